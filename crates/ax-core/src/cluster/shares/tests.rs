use super::*;
use proptest::prelude::*;

fn ids(names: &[&str]) -> Vec<ProcessId> {
    names.iter().map(|name| ProcessId::from(*name)).collect()
}

#[test]
fn a_process_alone_owns_every_partition() {
    let me = ProcessId::from("a");
    assert!(Share::of(&me, &[]).is_all());
    assert!(Share::of(&me, &ids(&["a"])).is_all());
}

#[test]
fn the_shares_of_a_list_split_the_partitions_between_its_processes() {
    let all = ids(&["node-a", "node-b", "node-c"]);
    let shares: Vec<Share> = all.iter().map(|me| Share::of(me, &all)).collect();
    for partition in 0..PARTITIONS {
        let holders = shares.iter().filter(|s| s.holds(partition)).count();
        assert_eq!(holders, 1, "partition {partition}");
        let owner = owner(partition, &all).expect("an owner");
        let at = all.iter().position(|p| p == owner).expect("listed");
        assert!(shares[at].holds(partition));
    }
    // Roughly even: each of three holds a third, give or take.
    for share in &shares {
        assert!((60..=110).contains(&share.len()), "{}", share.len());
    }
}

#[test]
fn tasks_fall_in_partitions_by_id() {
    assert_eq!(partition_of(TaskId(1)), 1);
    assert_eq!(partition_of(TaskId(256)), 0);
    assert_eq!(partition_of(TaskId(-1)), 255);
    let mut share = Share::NONE;
    share.insert(3);
    assert!(share.owns(TaskId(259)));
    assert!(!share.owns(TaskId(4)));
    assert_eq!(share.partitions().collect::<Vec<_>>(), [3]);
}

#[test]
fn a_lost_partition_is_kept_for_the_handoff_and_a_gained_one_taken_at_once() {
    let (a, b) = (ProcessId::from("a"), ProcessId::from("b"));
    let mut keeper = ShareKeeper::new(a.clone());
    assert!(keeper.firing(0).is_all(), "alone until it hears of others");
    assert!(
        keeper.update(std::slice::from_ref(&a), 500).is_all(),
        "alone in the list"
    );
    let both = [a.clone(), b.clone()];
    let firing = keeper.update(&both, 1_000);
    assert!(firing.is_all(), "b's partitions kept for the handoff");
    assert_eq!(keeper.owned(), Share::of(&a, &both));
    let handoff = HANDOFF.as_millis() as i64;
    assert!(keeper.firing(1_000 + handoff - 1).is_all());
    assert_eq!(keeper.firing(1_000 + handoff), Share::of(&a, &both));
    // b leaves: a takes its partitions back at once.
    assert!(keeper.update(std::slice::from_ref(&a), 9_000).is_all());
}

#[test]
fn a_share_is_written_as_hex() {
    let mut share = Share::NONE;
    share.insert(0);
    share.insert(255);
    let text = serde_json::to_string(&share).expect("json");
    assert_eq!(text, format!("\"8{}1\"", "0".repeat(62)));
    assert_eq!(serde_json::from_str::<Share>(&text).expect("back"), share);
    assert!(serde_json::from_str::<Share>("\"ff\"").is_err());
    assert!(serde_json::from_str::<Share>(&format!("\"{}\"", "g".repeat(64))).is_err());
}

#[test]
fn a_process_that_first_hears_of_others_takes_its_share_at_once() {
    let (a, b) = (ProcessId::from("a"), ProcessId::from("b"));
    let both = [a.clone(), b.clone()];
    let mut keeper = ShareKeeper::new(b.clone());
    assert_eq!(keeper.update(&both, 0), Share::of(&b, &both));
}

proptest! {
    /// A process that joins takes partitions only from the others, and one that leaves gives
    /// only its own to the others: every partition that changes owner is the newcomer's or the
    /// leaver's.
    #[test]
    fn joining_or_leaving_moves_only_that_processs_partitions(
        names in proptest::collection::btree_set("[a-z0-9-]{1,12}", 2..8),
    ) {
        let all: Vec<ProcessId> = names.iter().map(|n| ProcessId::from(n.as_str())).collect();
        let (newcomer, before) = all.split_last().expect("two at least");
        for partition in 0..PARTITIONS {
            let was = owner(partition, before).expect("owner");
            let is = owner(partition, &all).expect("owner");
            prop_assert!(is == was || is == newcomer, "partition {}", partition);
        }
    }

    /// While the old processes of a cluster have read, or not yet read, the list that has a
    /// newcomer, and the newcomer fires only its own share, every partition is fired by one
    /// of them at least.
    #[test]
    fn no_partition_is_left_while_views_differ(
        names in proptest::collection::btree_set("[a-z0-9-]{1,12}", 3..7),
        first_sees_newcomer in any::<bool>(),
    ) {
        let all: Vec<ProcessId> = names.iter().map(|n| ProcessId::from(n.as_str())).collect();
        let (newcomer, before) = all.split_last().expect("three at least");
        let mut keepers: Vec<ShareKeeper> =
            before.iter().map(|p| ShareKeeper::new(p.clone())).collect();
        for keeper in &mut keepers {
            keeper.update(before, 0);
        }
        let mut joining = ShareKeeper::new(newcomer.clone());
        joining.update(&all, 0);
        let t = HANDOFF.as_millis() as i64 * 2;
        prop_assert_eq!(joining.firing(t), Share::of(newcomer, &all), "past its handoff");
        // Only some of the old processes have read the new list yet.
        let mut fired = Share::NONE;
        for (i, keeper) in keepers.iter_mut().enumerate() {
            let sees = (i == 0) == first_sees_newcomer;
            let list = if sees { &all[..] } else { before };
            fired = fired.union(keeper.update(list, t));
        }
        fired = fired.union(joining.firing(t));
        prop_assert!(fired.is_all());
    }
}
