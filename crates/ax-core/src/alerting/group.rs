//! Events about members and processes, folded per group and window: a thousand members of a
//! group gone at once make one alert naming the count and the first of them, not a thousand
//! alerts that bury the ones about runs. The subjects are made here and read back here, so
//! the folder knows a member's group by its subject alone. Pure: the folder in the store
//! holds a group's events in the queue until its window closes, then asks what to tell.

use chrono::{DateTime, Duration, Utc};

use super::rule::AlertEvent;

/// How many members a folded alert names before `…`.
pub const FIRST_NAMED: usize = 5;

/// The subject of events about member `url` of executor group `group`.
pub fn member_subject(group: &str, url: &str) -> String {
    format!("member {group} {url}")
}

/// The subject of events about ax process `id`.
pub fn process_subject(id: &str) -> String {
    format!("process {id}")
}

/// Which group an event about no run folds in, and its member's name there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The group's name in alerts, also its fold key: `members of billing`, `ax processes`.
    pub name: String,
    /// The member's name in the group: a member's URL, a process's id.
    pub member: String,
}

/// The group of an event's `subject` (as [`member_subject`] and [`process_subject`] make
/// them); any other subject (`redis`) is a group of its own.
pub fn group_of(subject: &str) -> Group {
    let split = |rest: &str| {
        rest.split_once(' ')
            .map(|(g, m)| (g.to_string(), m.to_string()))
    };
    if let Some((group, url)) = subject.strip_prefix("member ").and_then(split) {
        return Group {
            name: format!("members of {group}"),
            member: url,
        };
    }
    if let Some(id) = subject.strip_prefix("process ") {
        return Group {
            name: "ax processes".into(),
            member: id.into(),
        };
    }
    Group {
        name: subject.into(),
        member: subject.into(),
    }
}

/// Which of a group's queued events (their times, in queue order) a window closed at `now`
/// takes: those within `window` of the earliest, once that window is over; none while it is
/// open, so the events arriving meanwhile join it.
pub fn closed_window(ats: &[DateTime<Utc>], now: DateTime<Utc>, window: Duration) -> Vec<usize> {
    let Some(first) = ats.iter().min().copied() else {
        return Vec::new();
    };
    if now - first < window {
        return Vec::new();
    }
    (0..ats.len())
        .filter(|&n| ats[n] - first < window)
        .collect()
}

/// What one alert about several members of `group` says: `37 members of billing unhealthy:
/// m1, m2, m3, m4, m5, …`, naming the first [`FIRST_NAMED`] of `members` (in order).
pub fn group_message(group: &str, event: AlertEvent, members: &[&str]) -> String {
    let verb = match event {
        AlertEvent::MemberUnhealthy => "unhealthy",
        AlertEvent::ProcessLeft => "left",
        AlertEvent::RedisUnreachable => "unreachable",
        AlertEvent::Resolved => "back",
        other => other.as_str(),
    };
    let mut named = members
        .iter()
        .take(FIRST_NAMED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if members.len() > FIRST_NAMED {
        named.push_str(", …");
    }
    format!("{} {group} {verb}: {named}", members.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).expect("time")
    }

    #[test]
    fn a_subject_names_its_group_and_member() {
        let member = group_of(&member_subject("billing", "http://10.0.0.7:8080/"));
        assert_eq!(member.name, "members of billing");
        assert_eq!(member.member, "http://10.0.0.7:8080/");
        let process = group_of(&process_subject("ax-2"));
        assert_eq!(
            (process.name.as_str(), process.member.as_str()),
            ("ax processes", "ax-2")
        );
        let redis = group_of("redis");
        assert_eq!(
            (redis.name.as_str(), redis.member.as_str()),
            ("redis", "redis")
        );
    }

    #[test]
    fn a_window_closes_once_its_time_is_over_and_takes_what_fell_in_it() {
        let window = Duration::seconds(10);
        let ats = [at(3), at(0), at(9), at(12)];
        assert!(closed_window(&ats, at(9), window).is_empty(), "still open");
        assert_eq!(closed_window(&ats, at(10), window), vec![0, 1, 2]);
        assert!(closed_window(&[], at(100), window).is_empty());
    }

    #[test]
    fn the_message_names_the_count_and_the_first_members() {
        let members: Vec<String> = (1..=37).map(|n| format!("m{n}")).collect();
        let members: Vec<&str> = members.iter().map(String::as_str).collect();
        assert_eq!(
            group_message("members of billing", AlertEvent::MemberUnhealthy, &members),
            "37 members of billing unhealthy: m1, m2, m3, m4, m5, …"
        );
        assert_eq!(
            group_message("ax processes", AlertEvent::ProcessLeft, &["ax-2", "ax-3"]),
            "2 ax processes left: ax-2, ax-3"
        );
        assert_eq!(
            group_message("members of billing", AlertEvent::Resolved, &members[..3]),
            "3 members of billing back: m1, m2, m3"
        );
    }

    proptest! {
        /// Closing windows as a folder does, each second: every event is taken exactly once,
        /// and no window spans more than the window's length.
        #[test]
        fn every_event_is_taken_once_within_one_window(
            gaps in prop::collection::vec(0..8i64, 1..80),
            window in 1..20i64,
        ) {
            let window = Duration::seconds(window);
            let mut now = 0;
            let mut queued: Vec<(usize, DateTime<Utc>)> = Vec::new();
            let mut taken = Vec::new();
            let mut events = gaps.iter().scan(0, |t, gap| { *t += gap; Some(*t) }).enumerate();
            let mut next = events.next();
            while next.is_some() || !queued.is_empty() {
                while let Some((n, t)) = next.filter(|(_, t)| *t <= now) {
                    queued.push((n, at(t)));
                    next = events.next();
                }
                let ats: Vec<_> = queued.iter().map(|(_, t)| *t).collect();
                let closed = closed_window(&ats, at(now), window);
                if let (Some(first), Some(last)) = (
                    closed.iter().map(|&i| ats[i]).min(),
                    closed.iter().map(|&i| ats[i]).max(),
                ) {
                    prop_assert!(last - first < window);
                }
                let mut n = 0;
                queued.retain(|(id, _)| {
                    let keep = !closed.contains(&n);
                    if !keep {
                        taken.push(*id);
                    }
                    n += 1;
                    keep
                });
                now += 1;
            }
            taken.sort_unstable();
            prop_assert_eq!(taken, (0..gaps.len()).collect::<Vec<_>>());
        }
    }
}
