//! All tests run in virtual time: the "clock" is just the argument to `advance`.

use super::*;
use std::collections::BTreeMap;

type W = TimeWheel<u32, u64>;

fn keys(v: &[Due<u32, u64>]) -> Vec<u32> {
    v.iter().map(|d| d.key).collect()
}

fn assert_sorted(v: &[Due<u32, u64>]) {
    assert!(
        v.windows(2).all(|w| w[0].due_sec <= w[1].due_sec),
        "not ordered by due_sec: {v:?}"
    );
}

#[test]
fn insert_remove_replace() {
    let mut w = W::new(600, 1000);
    assert!(w.is_empty());
    assert_eq!(w.insert(1, 1010, 10), None);
    assert_eq!(w.insert(2, 2000, 20), None);
    assert_eq!(w.len(), 2);
    assert!(w.contains(&1));
    assert_eq!(w.due_of(&1), Some(1010));
    // Replace within the same slot, then into another slot.
    assert_eq!(w.insert(1, 1610, 11), Some(10));
    assert_eq!(w.due_of(&1), Some(1610));
    assert_eq!(w.insert(1, 1020, 12), Some(11));
    assert_eq!(w.len(), 2);
    assert_eq!(
        w.remove(&1),
        Some(Due {
            key: 1,
            due_sec: 1020,
            value: 12
        })
    );
    assert_eq!(w.remove(&1), None);
    assert!(!w.contains(&1));
    assert_eq!(w.due_of(&1), None);
    assert_eq!(w.len(), 1);
    // Removed entries never fire; the other one does, once.
    let fired = w.advance(5000);
    assert_eq!(keys(&fired), vec![2]);
    assert!(w.is_empty());
    assert!(w.advance(10_000).is_empty());
}

#[test]
fn zero_slots_is_one() {
    let mut w = W::new(0, 0);
    assert_eq!(w.slots(), 1);
    w.insert(1, 3, 0);
    w.insert(2, 1, 0);
    assert_eq!(keys(&w.advance(1)), vec![2]);
    assert!(w.advance(2).is_empty());
    assert_eq!(keys(&w.advance(3)), vec![1]);
}

#[test]
fn due_exactly_at_each_next_second() {
    let base = 1_700_000_000;
    let mut w = W::new(600, base);
    for i in 1..=1300u32 {
        w.insert(i, base + i64::from(i), u64::from(i));
    }
    for i in 1..=1300u32 {
        let fired = w.advance(base + i64::from(i));
        assert_eq!(keys(&fired), vec![i], "second {i}");
        assert_eq!(fired[0].due_sec, base + i64::from(i));
        assert_eq!(w.position(), base + i64::from(i));
    }
    assert!(w.is_empty());
}

#[test]
fn rounds_fire_at_exact_second_not_a_lap_early() {
    let mut w = W::new(600, 0);
    let dues = [599, 600, 601, 1199, 1200, 1201, 1800, 5000, 36_000];
    for (k, &d) in dues.iter().enumerate() {
        w.insert(k as u32, d, 0);
    }
    let mut fired_at = BTreeMap::new();
    for s in 1..=36_000 {
        for d in w.advance(s) {
            assert_eq!(d.due_sec, s, "fired at wrong second");
            assert!(fired_at.insert(d.key, s).is_none(), "fired twice");
        }
    }
    assert_eq!(fired_at.len(), dues.len());
    for (k, &d) in dues.iter().enumerate() {
        assert_eq!(fired_at[&(k as u32)], d);
    }
}

#[test]
fn full_lap_jump_does_not_fire_next_lap() {
    // A jump of exactly `slots` seconds does a full pass; entries one lap
    // further in the same slots must stay.
    let mut w = W::new(600, 0);
    w.insert(1, 600, 0);
    w.insert(2, 601, 0);
    w.insert(3, 1200, 0);
    w.insert(4, 1, 0);
    assert_eq!(keys(&w.advance(600)), vec![4, 1]);
    assert_eq!(w.len(), 2);
    assert!(w.advance(600).is_empty());
    assert_eq!(keys(&w.advance(601)), vec![2]);
    assert!(w.advance(1199).is_empty());
    assert_eq!(keys(&w.advance(1200)), vec![3]);
}

#[test]
fn many_laps_small_wheel() {
    let mut w = W::new(7, -50);
    // Negative seconds exercise rem_euclid.
    let dues: Vec<i64> = vec![-49, -43, -42, 0, 6, 7, 49, 700, 701, 10_003];
    for (k, &d) in dues.iter().enumerate() {
        w.insert(k as u32, d, 0);
    }
    let mut seen = Vec::new();
    for s in -49..=10_003 {
        for d in w.advance(s) {
            assert_eq!(d.due_sec, s);
            seen.push(d.due_sec);
        }
    }
    assert_eq!(seen, dues);
    assert!(w.is_empty());
}

#[test]
fn late_tick_catches_up() {
    for &gap in &[1i64, 5, 599, 600, 601, 10_000] {
        let pos = 1_000_000;
        let mut w = W::new(600, pos);
        // Two entries per second for the gap plus two more laps beyond it.
        let horizon = gap + 1300;
        let mut k = 0u32;
        for off in 1..=horizon {
            for _ in 0..2 {
                w.insert(k, pos + off, off as u64);
                k += 1;
            }
        }
        let fired = w.advance(pos + gap);
        assert_sorted(&fired);
        assert_eq!(fired.len() as i64, 2 * gap, "gap {gap}");
        assert!(fired
            .iter()
            .all(|d| d.due_sec > pos && d.due_sec <= pos + gap));
        assert_eq!(w.position(), pos + gap);
        assert_eq!(w.len() as i64, 2 * (horizon - gap));
        let mut all: Vec<u32> = keys(&fired);
        // The rest fire second by second, exactly on time.
        for s in pos + gap + 1..=pos + horizon {
            let f = w.advance(s);
            assert_eq!(f.len(), 2);
            assert!(f.iter().all(|d| d.due_sec == s));
            all.extend(keys(&f));
        }
        all.sort_unstable();
        assert_eq!(all, (0..k).collect::<Vec<_>>(), "each exactly once");
    }
}

#[test]
fn insert_behind_position_is_returned_next_advance() {
    let mut w = W::new(600, 100);
    w.insert(1, 100, 0);
    w.insert(2, 50, 0);
    w.insert(3, i64::MIN, 0);
    w.insert(4, 101, 0);
    // Time went backwards: only overdue ones, sorted; position stays.
    let f = w.advance(90);
    assert_eq!(keys(&f), vec![3, 2, 1]);
    assert_eq!(w.position(), 100);
    assert_eq!(w.len(), 1);
    // Same second: nothing new.
    assert!(w.advance(100).is_empty());
    w.insert(5, 20, 0);
    let f = w.advance(101);
    assert_eq!(keys(&f), vec![5, 4]);
}

#[test]
fn time_going_backwards_loses_and_duplicates_nothing() {
    let mut w = W::new(60, 1000);
    for k in 0..200u32 {
        w.insert(k, 1000 + i64::from(k), 0);
    }
    let mut got = Vec::new();
    got.extend(keys(&w.advance(1050)));
    got.extend(keys(&w.advance(900)));
    assert_eq!(w.position(), 1050);
    got.extend(keys(&w.advance(1049)));
    got.extend(keys(&w.advance(1100)));
    got.extend(keys(&w.advance(i64::MIN)));
    got.extend(keys(&w.advance(1250)));
    got.sort_unstable();
    // Key 0 was due at 1000 == initial position: overdue, returned first.
    assert_eq!(got, (0..200).collect::<Vec<_>>());
}

#[test]
fn remove_after_partial_rounds() {
    let mut w = W::new(10, 0);
    w.insert(1, 35, 7);
    w.insert(2, 25, 8);
    w.insert(3, 15, 9);
    // Slot 5 visited at 5 and 15; entries 1 and 2 stay for later laps.
    for s in 1..=20 {
        let f = w.advance(s);
        if s == 15 {
            assert_eq!(keys(&f), vec![3]);
        } else {
            assert!(f.is_empty());
        }
    }
    assert_eq!(w.remove(&1).map(|d| (d.due_sec, d.value)), Some((35, 7)));
    assert_eq!(w.len(), 1);
    assert_eq!(keys(&w.advance(40)), vec![2]);
    assert!(w.advance(100).is_empty());
}

#[test]
fn len_consistency() {
    let mut w = W::new(16, 0);
    for k in 0..100u32 {
        w.insert(k, i64::from(k % 40), 0); // some overdue (due 0)
    }
    assert_eq!(w.len(), 100);
    for k in 0..100u32 {
        w.insert(k, i64::from(k % 40) + 1, 0); // replace: len unchanged
    }
    assert_eq!(w.len(), 100);
    for k in (0..100u32).step_by(3) {
        assert!(w.remove(&k).is_some());
    }
    let mut expected = 100 - 34;
    assert_eq!(w.len(), expected);
    for s in 1..=41 {
        expected -= w.advance(s).len();
        assert_eq!(w.len(), expected);
    }
    assert_eq!(expected, 0);
    assert!(w.is_empty());
}

#[test]
fn advance_into_appends_and_keeps_existing() {
    let mut w = W::new(600, 0);
    w.insert(1, 2, 0);
    w.insert(2, 1, 0);
    let mut out = vec![Due {
        key: 99,
        due_sec: 1_000,
        value: 0,
    }];
    w.advance_into(5, &mut out);
    assert_eq!(keys(&out), vec![99, 2, 1]);
}

#[test]
fn extreme_arguments_do_not_panic() {
    let mut w = W::new(usize::MAX, i64::MIN);
    assert_eq!(w.slots(), MAX_SLOTS);
    w.insert(1, i64::MAX, 0);
    w.insert(2, i64::MIN, 0);
    w.insert(3, 0, 0);
    assert_eq!(keys(&w.advance(i64::MIN)), vec![2]);
    assert_eq!(keys(&w.advance(i64::MAX)), vec![3, 1]);
    assert_eq!(w.position(), i64::MAX);
    w.insert(4, i64::MAX, 0); // at position: overdue
    assert_eq!(keys(&w.advance(i64::MIN)), vec![4]);

    let mut w = W::new(3, i64::MAX - 5);
    for k in 0..6u32 {
        w.insert(k, i64::MAX - i64::from(k), 0);
    }
    let mut n = 0;
    for s in i64::MAX - 4..=i64::MAX {
        n += w.advance(s).len();
    }
    assert_eq!(n, 6);
    assert!(w.is_empty());
}

/// xorshift64*: tiny deterministic PRNG, no dependencies.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
}

/// Reference model: a BTreeMap of key -> (due, value), and a position.
/// `advance(now)` returns everything due at or before max(now, position).
fn model_run(slots: usize, seed: u64, ops: usize) {
    let mut rng = Rng(seed);
    let start = rng.range(-1_000_000, 1_000_000);
    let mut w: W = TimeWheel::new(slots, start);
    let mut model: BTreeMap<u32, (i64, u64)> = BTreeMap::new();
    let mut pos = start;
    let span = (slots as i64) * 4 + 10;
    let key_space = 300;
    let mut fired_total = 0usize;

    for op in 0..ops {
        match rng.below(100) {
            0..=49 => {
                // insert/replace; mostly ahead, some behind, some far laps
                let key = rng.below(key_space) as u32;
                let due = match rng.below(10) {
                    0 => pos - rng.range(0, 100),
                    1 => pos + rng.range(0, span * 10),
                    _ => pos + rng.range(1, span),
                };
                let val = rng.next();
                let expect = model.insert(key, (due, val)).map(|(_, v)| v);
                assert_eq!(w.insert(key, due, val), expect, "op {op}");
            }
            50..=64 => {
                let key = rng.below(key_space) as u32;
                let expect = model.remove(&key).map(|(d, v)| Due {
                    key,
                    due_sec: d,
                    value: v,
                });
                assert_eq!(w.remove(&key), expect, "op {op}");
            }
            _ => {
                let now = match rng.below(20) {
                    0 => pos - rng.range(0, 50),              // backwards
                    1 => pos + rng.range(slots as i64, span), // big jump
                    2 => pos + rng.range(0, span * 20),       // huge jump
                    3..=9 => pos + rng.range(0, 3),
                    _ => pos + 1,
                };
                let got = w.advance(now);
                assert_sorted(&got);
                let limit = now.max(pos);
                let due_keys: Vec<u32> = model
                    .iter()
                    .filter(|(_, &(d, _))| d <= limit)
                    .map(|(&k, _)| k)
                    .collect();
                let mut expect: Vec<Due<u32, u64>> = due_keys
                    .into_iter()
                    .map(|k| {
                        let (d, v) = model.remove(&k).unwrap();
                        Due {
                            key: k,
                            due_sec: d,
                            value: v,
                        }
                    })
                    .collect();
                pos = limit;
                let mut got_sorted = got;
                got_sorted.sort_by_key(|d| (d.due_sec, d.key));
                expect.sort_by_key(|d| (d.due_sec, d.key));
                assert_eq!(got_sorted, expect, "op {op} advance({now})");
                fired_total += expect.len();
            }
        }
        assert_eq!(w.position(), pos);
        assert_eq!(w.len(), model.len());
        if op % 64 == 0 {
            for k in 0..key_space as u32 {
                assert_eq!(w.due_of(&k), model.get(&k).map(|&(d, _)| d));
                assert_eq!(w.contains(&k), model.contains_key(&k));
            }
        }
    }
    assert!(fired_total > 0);
}

#[test]
fn randomized_against_btreemap_model() {
    for (i, &slots) in [1usize, 2, 7, 60, 600].iter().enumerate() {
        for seed in 1..=4u64 {
            model_run(
                slots,
                0x9E37_79B9_7F4A_7C15 ^ (seed * 1_000 + i as u64),
                5_000,
            );
        }
    }
}

#[test]
fn big_jump_visits_each_slot_at_most_once() {
    for &(gap, max_visits) in &[
        (1i64, 1usize),
        (5, 5),
        (599, 599),
        (600, 600),
        (601, 600),
        (1199, 600),
        (10_000, 600),
    ] {
        let mut w = W::new(600, 0);
        for k in 0..2000u32 {
            w.insert(k, i64::from(k) * 7 + 1, 0);
        }
        let before = w.visits;
        let n = w.advance(gap).len();
        assert_eq!(w.visits - before, max_visits, "gap {gap}");
        assert_eq!(n as i64, (gap + 6) / 7, "gap {gap}");
    }
    let mut w = W::new(600, i64::MIN);
    w.advance(i64::MAX);
    assert_eq!(w.visits, 600);
}

/// The room the wheel holds, in entries: what its slots and index keep allocated.
fn room(w: &W) -> usize {
    w.buckets.iter().map(Vec::capacity).sum::<usize>() + w.index.capacity()
}

#[test]
fn a_slot_fired_gives_its_room_back() {
    // A busy second each second for a whole lap: every slot held 1,000 entries once.
    let mut w = W::new(60, 0);
    for lap_second in 1..=60i64 {
        for k in 0..1_000u32 {
            w.insert(lap_second as u32 * 1_000 + k, lap_second, 0);
        }
        assert_eq!(w.advance(lap_second).len(), 1_000);
    }
    assert!(w.is_empty());
    // What is left is the index's room for one second's entries, not the lap's.
    assert!(room(&w) < 4 * 1_000, "room kept: {}", room(&w));
}

#[test]
fn shrink_to_fit_gives_back_the_room_of_removed_entries() {
    let mut w = W::new(60, 0);
    for k in 0..6_000u32 {
        w.insert(k, i64::from(k % 60) + 1, 0);
    }
    for k in 0..5_900u32 {
        assert!(w.remove(&k).is_some());
    }
    let before = room(&w);
    w.shrink_to_fit();
    assert!(room(&w) * 10 < before, "room {} of {before}", room(&w));
    assert_eq!(w.len(), 100);
    assert_eq!(w.advance(60).len(), 100);
}
