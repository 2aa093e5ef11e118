//! Time wheel benchmarks (virtual time, 600 slots).

use ax_core::wheel::TimeWheel;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;

const SLOTS: usize = 600;
const T0: i64 = 1_700_000_000;

/// Deterministic spread without a PRNG dependency (Knuth multiplicative hash).
fn spread(i: u64, range: u64) -> i64 {
    (i.wrapping_mul(2_654_435_761) % range) as i64
}

/// (a) 100k entries over the next hour, then step second by second to the end.
fn bulk_fill_and_drain(c: &mut Criterion) {
    const N: u64 = 100_000;
    const SPAN: u64 = 3600;
    let mut g = c.benchmark_group("bulk_100k_over_3600s");
    g.throughput(Throughput::Elements(N));
    g.bench_function("insert_then_advance_1s", |b| {
        let mut out = Vec::new();
        b.iter(|| {
            let mut w: TimeWheel<u64, u64> = TimeWheel::new(SLOTS, T0);
            for i in 0..N {
                w.insert(i, T0 + 1 + spread(i, SPAN), i);
            }
            let mut fired = 0;
            for s in 1..=SPAN as i64 {
                out.clear();
                w.advance_into(T0 + s, &mut out);
                fired += out.len();
            }
            assert_eq!(fired as u64, N);
            black_box(w.len())
        })
    });
    g.finish();
}

/// (b) 30k entries, each re-inserted 30 s after it fires; 300 one-second ticks.
fn steady_state(c: &mut Criterion) {
    const N: u64 = 30_000;
    const PERIOD: i64 = 30;
    const TICKS: i64 = 300;
    let mut g = c.benchmark_group("steady_30k_period_30s");
    g.throughput(Throughput::Elements(N * (TICKS / PERIOD) as u64));
    g.bench_function("advance_300_ticks_reinsert", |b| {
        // The wheel persists across iterations: it is in steady state by design.
        let mut w: TimeWheel<u64, u64> = TimeWheel::new(SLOTS, T0);
        for i in 0..N {
            w.insert(i, T0 + 1 + spread(i, PERIOD as u64), i);
        }
        let mut now = T0;
        let mut out = Vec::with_capacity(2_000);
        b.iter(|| {
            let mut fired = 0;
            for _ in 0..TICKS {
                now += 1;
                w.advance_into(now, &mut out);
                fired += out.len();
                for d in out.drain(..) {
                    w.insert(d.key, d.due_sec + PERIOD, d.value);
                }
            }
            black_box(fired)
        })
    });
    g.finish();
}

/// (c) insert+remove churn on a wheel already holding 30k entries.
fn churn(c: &mut Criterion) {
    const BASE: u64 = 30_000;
    const OPS: u64 = 10_000;
    let mut g = c.benchmark_group("churn_on_30k");
    g.throughput(Throughput::Elements(OPS));
    let mut base: TimeWheel<u64, u64> = TimeWheel::new(SLOTS, T0);
    for i in 0..BASE {
        base.insert(i, T0 + 1 + spread(i, 3600), i);
    }
    g.bench_function("insert_then_remove_pair", |b| {
        b.iter_batched_ref(
            || base.clone(),
            |w| {
                for i in 0..OPS {
                    let k = BASE + i;
                    w.insert(k, T0 + 1 + spread(k, 3600), k);
                }
                for i in 0..OPS {
                    black_box(w.remove(&(BASE + i)));
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("reschedule_existing", |b| {
        b.iter_batched_ref(
            || base.clone(),
            |w| {
                for i in 0..OPS {
                    let k = spread(i, BASE) as u64;
                    black_box(w.insert(k, T0 + 1 + spread(i + 7, 3600), i));
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bulk_fill_and_drain, steady_state, churn);
criterion_main!(benches);
