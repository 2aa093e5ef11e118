use super::*;
use proptest::prelude::*;

fn member(url: &str, in_flight: usize, cap: usize, usable: bool) -> Candidate<'_> {
    Candidate {
        url,
        in_flight,
        cap,
        usable,
    }
}

fn idle(urls: &[&'static str]) -> Vec<Candidate<'static>> {
    urls.iter().map(|url| member(url, 0, 1, true)).collect()
}

fn pick_one(routing: Routing, candidates: &[Candidate], turn: u64) -> Option<usize> {
    pick(routing, candidates, &[], 7, turn, turn)
}

#[test]
fn names_round_trip_and_match_serde() {
    assert_eq!(Routing::NAMES.len(), Routing::ALL.len());
    for (routing, name) in Routing::ALL.into_iter().zip(Routing::NAMES) {
        assert_eq!(routing.name(), *name);
        assert_eq!(Routing::parse(name), Some(routing));
        assert_eq!(
            serde_json::to_string(&routing).unwrap(),
            format!("\"{name}\"")
        );
        let back: Routing = serde_json::from_str(&format!("\"{name}\"")).unwrap();
        assert_eq!(back, routing);
    }
    assert_eq!(Routing::parse("round_robin"), None);
    assert_eq!(Routing::parse(" FIRST"), None);
    assert_eq!(Routing::parse(""), None);
    assert_eq!(Routing::DEFAULT, Routing::RoundRobin);
}

#[test]
fn health_state_serializes_upper_case() {
    assert_eq!(
        serde_json::to_string(&HealthState::Unhealthy).unwrap(),
        "\"UNHEALTHY\""
    );
}

#[test]
fn nothing_to_pick_is_none() {
    for routing in Routing::ALL {
        assert_eq!(pick_one(routing, &[], 3), None);
        let down = [member("a", 0, 1, false), member("b", 0, 1, true)];
        assert_eq!(pick(routing, &down, &["b"], 1, 2, 3), None);
    }
}

#[test]
fn first_and_failover_take_the_first_open_one_even_full() {
    let members = [
        member("a", 0, 1, false),
        member("b", 5, 1, true),
        member("c", 0, 1, true),
    ];
    for routing in [Routing::First, Routing::Failover] {
        assert_eq!(pick_one(routing, &members, 9), Some(1));
        assert_eq!(pick(routing, &members, &["b"], 0, 0, 0), Some(2));
    }
}

#[test]
fn a_shard_stays_on_its_member_and_else_goes_where_it_waits_least() {
    let members = [
        member("a", 0, 1, false),
        member("b", 5, 8, true),
        member("c", 1, 8, true),
    ];
    assert_eq!(
        pick_shard(&members, &[], Some("b")),
        Some(1),
        "its own, busy"
    );
    assert_eq!(
        pick_shard(&members, &["b"], Some("b")),
        Some(2),
        "own refused"
    );
    assert_eq!(
        pick_shard(&members, &[], Some("a")),
        Some(2),
        "own cools down"
    );
    assert_eq!(pick_shard(&members, &[], Some("gone")), Some(2), "own left");
    assert_eq!(pick_shard(&members, &[], None), Some(2), "a manual run");
    assert_eq!(pick_one(Routing::Broadcast, &members, 0), Some(2));
    assert_eq!(pick_shard(&members, &["b", "c"], Some("b")), None);
}

#[test]
fn round_robin_turns_and_skips_full_and_unusable_members() {
    let members = idle(&["a", "b", "c"]);
    let picks: Vec<_> = (0..6)
        .map(|turn| pick_one(Routing::RoundRobin, &members, turn))
        .collect();
    assert_eq!(picks, [0, 1, 2, 0, 1, 2].map(Some));

    let members = [
        member("a", 0, 1, true),
        member("b", 2, 2, true),
        member("c", 0, 1, false),
    ];
    // From b: b is full, c is down, so a.
    assert_eq!(pick_one(Routing::RoundRobin, &members, 1), Some(0));
    assert_eq!(pick_one(Routing::RoundRobin, &members, 2), Some(0));
    // Excluded by this attempt: b, the only other one, though full.
    assert_eq!(
        pick(Routing::RoundRobin, &members, &["a"], 0, 0, 0),
        Some(1)
    );
}

#[test]
fn round_robin_queues_on_the_first_from_its_start_when_all_are_full() {
    let members = [
        member("a", 1, 1, true),
        member("b", 3, 1, true),
        member("c", 1, 1, false),
    ];
    assert_eq!(pick_one(Routing::RoundRobin, &members, 1), Some(1));
    assert_eq!(pick_one(Routing::RoundRobin, &members, 2), Some(0));
}

#[test]
fn random_starts_at_its_number() {
    let members = [
        member("a", 0, 1, true),
        member("b", 0, 1, true),
        member("c", 1, 1, true),
    ];
    assert_eq!(pick(Routing::Random, &members, &[], 0, 0, 4), Some(1));
    assert_eq!(pick(Routing::Random, &members, &[], 0, 0, 5), Some(0));
    assert_eq!(
        pick(Routing::Random, &members, &[], 0, 0, u64::MAX),
        Some(0)
    );
}

#[test]
fn least_busy_compares_ratios_and_ties_go_to_registration_order() {
    let members = [
        member("a", 2, 4, true),  // 1/2
        member("b", 1, 3, true),  // 1/3
        member("c", 0, 1, false), // idle but down
        member("d", 2, 6, true),  // 1/3
    ];
    assert_eq!(pick_one(Routing::LeastBusy, &members, 0), Some(1));
    assert_eq!(pick(Routing::LeastBusy, &members, &["b"], 0, 0, 0), Some(3));
    let huge = [
        member("a", usize::MAX, usize::MAX, true),
        member("b", usize::MAX - 1, usize::MAX, true),
    ];
    assert_eq!(pick_one(Routing::LeastBusy, &huge, 0), Some(1));
}

#[test]
fn consistent_hash_stays_on_its_member_even_full() {
    let urls = ["http://a:1", "http://b:1", "http://c:1"];
    let members = idle(&urls);
    let key = 42;
    let home = pick(Routing::ConsistentHash, &members, &[], key, 0, 0).unwrap();
    let mut busy = members.clone();
    busy[home].in_flight = 100;
    for turn in 0..5 {
        assert_eq!(
            pick(Routing::ConsistentHash, &busy, &[], key, turn, turn),
            Some(home)
        );
    }
    // Its member tried and failed: the next-heaviest, never the excluded one.
    let next = pick(Routing::ConsistentHash, &members, &[urls[home]], key, 0, 0).unwrap();
    assert_ne!(next, home);
}

/// The member each of `keys` goes to.
fn homes(members: &[Candidate<'static>], keys: std::ops::Range<u64>) -> Vec<Option<&'static str>> {
    keys.map(|key| pick(Routing::ConsistentHash, members, &[], key, 0, 0).map(|i| members[i].url))
        .collect()
}

#[test]
fn consistent_hash_spreads_keys_evenly() {
    let urls: Vec<String> = (0..8).map(|i| format!("http://10.0.0.{i}:9000")).collect();
    for n in 2..=8 {
        let members: Vec<_> = urls[..n].iter().map(|u| member(u, 0, 1, true)).collect();
        let mut counts = vec![0usize; n];
        for key in 0..10_000 {
            let i = pick(Routing::ConsistentHash, &members, &[], key, 0, 0).unwrap();
            counts[i] += 1;
        }
        let fair = 10_000 / n;
        for count in counts {
            assert!(
                count * 5 >= fair * 4 && count * 5 <= fair * 6,
                "{n} members: {count} keys against {fair}"
            );
        }
    }
}

#[test]
fn member_urls_join_with_one_slash() {
    let cases = [
        (
            "http://10.0.0.7:9000",
            "/jobs/reconcile",
            "http://10.0.0.7:9000/jobs/reconcile",
        ),
        (
            "http://10.0.0.7:9000",
            "jobs/reconcile",
            "http://10.0.0.7:9000/jobs/reconcile",
        ),
        (
            "http://10.0.0.7:9000/",
            "/jobs/reconcile",
            "http://10.0.0.7:9000/jobs/reconcile",
        ),
        (
            "http://10.0.0.7:9000/",
            "jobs/reconcile",
            "http://10.0.0.7:9000/jobs/reconcile",
        ),
        (
            "http://h:9000/app/",
            "/jobs/reconcile?x=1",
            "http://h:9000/app/jobs/reconcile?x=1",
        ),
        (
            "http://h:9000/app",
            "jobs/reconcile?x=1",
            "http://h:9000/app/jobs/reconcile?x=1",
        ),
        ("http://h:9000/app//", "//jobs", "http://h:9000/app/jobs"),
        ("http://h:9000/app/", "", "http://h:9000/app/"),
        ("http://h:9000", "", "http://h:9000"),
        ("http://h:9000/app", "?x=1", "http://h:9000/app?x=1"),
    ];
    for (base, path, url) in cases {
        assert_eq!(member_url(base, path), url, "{base} + {path}");
    }
}

#[test]
fn group_names() {
    for name in ["a", "billing", "eu-west.1", "x_y", &"z".repeat(64)] {
        assert!(valid_group_name(name), "{name}");
    }
    for name in ["", "Billing", "a b", "a/b", "é", "a:b", &"z".repeat(65)] {
        assert!(!valid_group_name(name), "{name}");
    }
}

const RULE: HealthRule = HealthRule {
    failures_to_cool: 3,
    cool_down_ms: 30_000,
};

#[test]
fn the_rule_defaults_to_three_failures_and_thirty_seconds() {
    assert_eq!(HealthRule::default(), RULE);
}

#[test]
fn three_failures_in_a_row_cool_it_down() {
    let mut health = Health::default();
    assert_eq!(health.failed(RULE, 0, "refused").transition, None);
    assert_eq!(health.failed(RULE, 1, "refused").transition, None);
    assert_eq!(health.state(1), HealthState::Healthy);
    assert!(health.usable(1));
    assert_eq!(
        health.failed(RULE, 2, "timed out").transition,
        Some(Transition::WentUnhealthy)
    );
    assert_eq!(health.state(2), HealthState::Unhealthy);
    assert!(!health.usable(2));
    assert!(!health.usable(30_001));
    assert_eq!(health.consecutive_failures(), 3);
    assert_eq!(health.failures(), 3);
    assert_eq!(health.last_error(), Some("timed out"));
}

#[test]
fn a_success_in_between_resets_the_count() {
    let mut health = Health::default();
    health.failed(RULE, 0, "e");
    health.failed(RULE, 0, "e");
    assert_eq!(health.succeeded(0).transition, None);
    assert_eq!(health.consecutive_failures(), 0);
    health.failed(RULE, 0, "e");
    health.failed(RULE, 0, "e");
    assert_eq!(health.state(0), HealthState::Healthy);
    assert_eq!((health.successes(), health.failures()), (1, 4));
}

fn cooled(until: i64) -> Health {
    let mut health = Health::default();
    for _ in 0..RULE.failures_to_cool {
        health.failed(RULE, until - RULE.cool_down_ms, "down");
    }
    health
}

#[test]
fn after_the_cool_down_one_probe_at_a_time() {
    let mut health = cooled(30_000);
    // A send while cooling (an attempt picked just before) is not the probe.
    health.sending(29_999);
    assert_eq!(health.state(29_999), HealthState::Unhealthy);
    assert_eq!(health.state(30_000), HealthState::Probing);
    assert!(health.usable(30_000));
    health.sending(30_000);
    assert_eq!(health.state(30_000), HealthState::Probing);
    assert!(!health.usable(30_000));
    assert!(!health.usable(1_000_000));
}

#[test]
fn a_failed_probe_cools_it_down_again() {
    let mut health = cooled(30_000);
    health.sending(30_500);
    assert_eq!(health.failed(RULE, 31_000, "still down").transition, None);
    assert_eq!(health.state(31_000), HealthState::Unhealthy);
    assert!(!health.usable(60_999));
    assert!(health.usable(61_000));
}

#[test]
fn a_successful_probe_makes_it_healthy() {
    let mut health = cooled(30_000);
    health.sending(30_000);
    assert_eq!(
        health.succeeded(30_000).transition,
        Some(Transition::Recovered)
    );
    assert_eq!(health.state(30_000), HealthState::Healthy);
    assert!(health.usable(30_000));
    assert_eq!(health.consecutive_failures(), 0);
    // Healthy sends are not probes: any number may be out.
    health.sending(30_001);
    assert!(health.usable(30_001));
}

#[test]
fn a_failure_while_probing_cools_down_below_the_count() {
    let mut health = cooled(30_000);
    let strict = HealthRule {
        failures_to_cool: 10,
        ..RULE
    };
    health.sending(30_000);
    health.failed(strict, 30_000, "down");
    assert!(health.consecutive_failures() < strict.failures_to_cool);
    assert_eq!(health.state(30_000), HealthState::Unhealthy);
    assert!(!health.usable(59_999));
}

#[test]
fn only_transport_failures_count_against_a_member() {
    let mut health = Health::default();
    // A job that fails, however often, is the job's outcome: its member answered.
    for _ in 0..10 {
        assert_eq!(health.observe(&Exchange::Replied, RULE, 0).transition, None);
        assert_eq!(
            health.observe(&Exchange::Inconclusive, RULE, 0).transition,
            None
        );
    }
    assert_eq!(health.state(0), HealthState::Healthy);
    assert_eq!((health.failures(), health.consecutive_failures()), (0, 0));
    assert_eq!(health.successes(), 10);

    let refused = Exchange::Unreachable("connection refused".into());
    health.observe(&refused, RULE, 1);
    health.observe(&refused, RULE, 1);
    // A slow reply in between neither resets the count nor adds to it.
    health.observe(&Exchange::Inconclusive, RULE, 1);
    assert_eq!(health.consecutive_failures(), 2);
    assert_eq!(
        health.observe(&refused, RULE, 2).transition,
        Some(Transition::WentUnhealthy)
    );
    assert_eq!(health.last_error(), Some("connection refused"));
    // A reply, even a failed job's, brings it back.
    assert_eq!(
        health.observe(&Exchange::Replied, RULE, 3).transition,
        Some(Transition::Recovered)
    );
    assert_eq!(health.state(3), HealthState::Healthy);
}

#[test]
fn state_changes_are_shared_and_failures_noted() {
    let mut health = Health::default();
    let refused = Exchange::Unreachable("refused".into());
    assert_eq!(
        health.observe(&refused, RULE, 5).share,
        Some(Share::Failure)
    );
    assert_eq!(health.observe(&Exchange::Replied, RULE, 6).share, None);
    health.observe(&refused, RULE, 7);
    health.observe(&refused, RULE, 8);
    let cooled = health.observe(&refused, RULE, 9);
    assert_eq!(cooled.share, Some(Share::State));
    assert_eq!(
        health.shared(),
        SharedHealth {
            unhealthy_until_ms: Some(9 + RULE.cool_down_ms),
            last_failure_ms: Some(9),
            last_error: Some("refused".into()),
            changed_ms: 9,
        }
    );
    // Its failed probe starts the cool-down again: shared too.
    let again = health.observe(&refused, RULE, 40_000);
    assert_eq!((again.transition, again.share), (None, Some(Share::State)));
    let back = health.observe(&Exchange::Replied, RULE, 40_001);
    assert_eq!(back.share, Some(Share::State));
    assert_eq!(health.shared().unhealthy_until_ms, None);
    assert_eq!(health.shared().changed_ms, 40_001);
}

#[test]
fn the_later_change_of_state_wins() {
    let mut here = Health::default();
    let elsewhere = SharedHealth {
        unhealthy_until_ms: Some(30_100),
        last_failure_ms: Some(100),
        last_error: Some("reset".into()),
        changed_ms: 100,
    };
    assert_eq!(here.adopt(&elsewhere), Some(Transition::WentUnhealthy));
    assert_eq!(here.state(200), HealthState::Unhealthy);
    assert!(!here.usable(200));
    assert_eq!(here.last_error(), Some("reset"));
    assert_eq!(here.adopt(&elsewhere), None, "already known");
    // This process's own later probe answered: an older row does not undo it.
    here.sending(30_100);
    assert_eq!(
        here.succeeded(30_200).transition,
        Some(Transition::Recovered)
    );
    assert_eq!(here.adopt(&elsewhere), None);
    assert_eq!(here.state(30_300), HealthState::Healthy);
    // Another process saw it answer later still, after this one set it aside again.
    let mut fail = Health::default();
    fail.adopt(&elsewhere);
    let recovered = SharedHealth {
        unhealthy_until_ms: None,
        changed_ms: 500,
        ..elsewhere.clone()
    };
    assert_eq!(fail.adopt(&recovered), Some(Transition::Recovered));
    assert_eq!(fail.state(600), HealthState::Healthy);
    assert_eq!(fail.consecutive_failures(), 0);
    assert_eq!(
        fail.last_failure_ms(),
        Some(100),
        "its last failure stays shown"
    );
}

#[test]
fn an_inconclusive_probe_lets_the_next_attempt_probe() {
    let mut health = cooled(30_000);
    health.sending(30_000);
    assert!(!health.usable(30_000));
    assert_eq!(
        health
            .observe(&Exchange::Inconclusive, RULE, 30_100)
            .transition,
        None
    );
    assert_eq!(health.state(30_100), HealthState::Probing);
    assert!(health.usable(30_100));
}

fn candidate() -> impl Strategy<Value = (usize, usize, bool)> {
    (0..5usize, 1..4usize, prop::bool::weighted(0.8))
}

const URLS: [&str; 6] = [
    "http://a", "http://b", "http://c", "http://d", "http://e", "http://f",
];

fn routing() -> impl Strategy<Value = Routing> {
    prop::sample::select(Routing::ALL.to_vec())
}

proptest! {
    /// Every strategy picks an open member when there is one, and only then; a strategy
    /// that spreads load picks one with room when any open one has it.
    #[test]
    fn picks_only_open_members(
        routing in routing(),
        specs in prop::collection::vec(candidate(), 0..6),
        excluded in prop::collection::vec(prop::sample::select(URLS.to_vec()), 0..3),
        key: u64, turn: u64, random: u64,
    ) {
        let members: Vec<_> = specs
            .iter()
            .zip(URLS)
            .map(|(&(in_flight, cap, usable), url)| member(url, in_flight, cap, usable))
            .collect();
        let open: Vec<usize> = (0..members.len())
            .filter(|&i| members[i].usable && !excluded.contains(&members[i].url))
            .collect();
        let picked = pick(routing, &members, &excluded, key, turn, random);
        prop_assert_eq!(picked.is_some(), !open.is_empty());
        if let Some(i) = picked {
            prop_assert!(open.contains(&i));
            let has_room = open.iter().any(|&j| !members[j].is_full());
            let spreads = matches!(routing, Routing::RoundRobin | Routing::Random | Routing::LeastBusy);
            if spreads && has_room {
                prop_assert!(!members[i].is_full());
            }
            if routing == Routing::LeastBusy {
                for &j in &open {
                    let (a, b) = (&members[i], &members[j]);
                    prop_assert!(a.in_flight * b.cap <= b.in_flight * a.cap);
                    if a.in_flight * b.cap == b.in_flight * a.cap {
                        prop_assert!(i <= j);
                    }
                }
            }
        }
        // The same inputs, the same pick.
        prop_assert_eq!(pick(routing, &members, &excluded, key, turn, random), picked);
    }

    /// Adding a member moves only the tasks that now go to it; taking one away (or its
    /// going unusable) moves only its own tasks.
    #[test]
    fn consistent_hash_moves_only_what_it_must(n in 1..6usize, gone in 0..6usize, start: u64) {
        let keys = start..start.saturating_add(300);
        let before = idle(&URLS[..n]);
        let added = idle(&URLS[..n + 1]);
        let (was, now) = (homes(&before, keys.clone()), homes(&added, keys.clone()));
        for (was, now) in was.iter().zip(&now) {
            prop_assert!(was == now || *now == Some(URLS[n]));
        }
        let gone = gone % (n + 1);
        let mut down = added.clone();
        down[gone].usable = false;
        let removed: Vec<_> = added.iter().filter(|c| c.url != URLS[gone]).cloned().collect();
        let after_down = homes(&down, keys.clone());
        prop_assert_eq!(&after_down, &homes(&removed, keys));
        for (was, now) in now.iter().zip(&after_down) {
            prop_assert!(was == now || *was == Some(URLS[gone]));
        }
    }
}

#[derive(Debug, Clone)]
enum Event {
    Wait(i64),
    Send,
    Succeed,
    Fail,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (0..40_000i64).prop_map(Event::Wait),
        Just(Event::Send),
        Just(Event::Succeed),
        Just(Event::Fail),
    ]
}

proptest! {
    /// Over any sequence: the counters add up, a member is healthy exactly when it has not
    /// failed enough in a row since it last answered, and at most one probe is let out.
    #[test]
    fn health_follows_its_rule(events in prop::collection::vec(event(), 1..100)) {
        let mut health = Health::default();
        let mut now = 0i64;
        let (mut successes, mut failures, mut in_a_row) = (0u64, 0u64, 0u32);
        let mut unhealthy = false;
        for event in events {
            let before = health.state(now);
            match event {
                Event::Wait(ms) => now += ms,
                Event::Send if health.usable(now) => {
                    let probe = before == HealthState::Probing;
                    health.sending(now);
                    if probe {
                        prop_assert!(!health.usable(now));
                    }
                }
                Event::Send => {}
                Event::Succeed => {
                    successes += 1;
                    in_a_row = 0;
                    let transition = health.succeeded(now).transition;
                    prop_assert_eq!(transition == Some(Transition::Recovered), unhealthy);
                    unhealthy = false;
                }
                Event::Fail => {
                    failures += 1;
                    in_a_row += 1;
                    let transition = health.failed(RULE, now, "e").transition;
                    let cools = unhealthy || in_a_row >= RULE.failures_to_cool;
                    prop_assert_eq!(transition == Some(Transition::WentUnhealthy), cools && !unhealthy);
                    unhealthy = cools;
                    if cools {
                        prop_assert!(!health.usable(now + RULE.cool_down_ms - 1));
                        prop_assert!(health.usable(now + RULE.cool_down_ms));
                    }
                }
            }
            prop_assert_eq!(health.state(now) == HealthState::Healthy, !unhealthy);
            prop_assert_eq!((health.successes(), health.failures()), (successes, failures));
            prop_assert_eq!(health.consecutive_failures(), in_a_row);
        }
    }
}
