//! The schedule ahead: how many runs fire in each second and minute of a window across all
//! tasks, the busiest seconds with the tasks firing then, and how much jitter would spread
//! them. Tasks on one schedule (expression and zone) without jitter are enumerated once.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Duration, Timelike, Utc};

use crate::calendar::schedule::Schedule;
use crate::run::{jittered, TaskId};

/// Busiest seconds named.
pub const BUSIEST: usize = 10;
/// The window's bounds, in hours.
pub const HOURS: (i64, i64) = (1, 168);

/// A task as the schedule ahead sees it.
#[derive(Debug, Clone)]
pub struct Planned {
    pub id: TaskId,
    pub schedule: Schedule,
    pub jitter_secs: i32,
}

/// One busy second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Busy {
    pub at: DateTime<Utc>,
    pub runs: u64,
    pub tasks: Vec<TaskId>,
}

/// The schedule ahead over `[from, to)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Tasks counted.
    pub tasks: usize,
    pub total_runs: u64,
    /// The busiest seconds, most runs first (earliest of equals first); only seconds with runs.
    pub busiest: Vec<Busy>,
    pub per_minute: Vec<u64>,
    /// How to spread the busiest second, when it stands out.
    pub suggestion: Option<String>,
}

impl Load {
    /// The share of the tasks firing in the busiest second, in percent.
    pub fn busiest_share(&self) -> Option<f64> {
        let busiest = self.busiest.first()?;
        (self.tasks > 0).then(|| busiest.tasks.len() as f64 * 100.0 / self.tasks as f64)
    }
}

/// Fires of `schedule` in `[from, to)`, as seconds from `from`.
fn fire_seconds(schedule: &Schedule, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<u32> {
    let mut seconds = Vec::new();
    // `next_after` is strictly after: start a second early so `from` itself counts.
    let mut at = from - Duration::seconds(1);
    while let Some(next) = schedule.next_after(at).filter(|next| *next < to) {
        seconds.push(u32::try_from((next - from).num_seconds()).unwrap_or(u32::MAX));
        at = next;
    }
    seconds
}

/// A set of tasks sharing one schedule and no jitter, or one task alone.
struct Group<'a> {
    schedule: &'a Schedule,
    tasks: Vec<&'a Planned>,
    jittered: bool,
}

fn groups(tasks: &[Planned]) -> Vec<Group<'_>> {
    let mut shared: HashMap<(&str, &str), usize> = HashMap::new();
    let mut groups: Vec<Group<'_>> = Vec::new();
    for task in tasks {
        // A jittered task, or one with days off, fires on a schedule of its own.
        if task.jitter_secs > 0 || task.schedule.days_off().is_some() {
            groups.push(Group {
                schedule: &task.schedule,
                tasks: vec![task],
                jittered: task.jitter_secs > 0,
            });
            continue;
        }
        let key = (
            task.schedule.cron().expression(),
            task.schedule.cron().zone().name(),
        );
        match shared.get(&key) {
            Some(&n) => groups[n].tasks.push(task),
            None => {
                shared.insert(key, groups.len());
                groups.push(Group {
                    schedule: &task.schedule,
                    tasks: vec![task],
                    jittered: false,
                });
            }
        }
    }
    groups
}

/// The seconds (from `from`) a group's task fires in, given its schedule's fires.
fn task_seconds<'a>(
    group: &'a Group<'_>,
    task: &'a Planned,
    fires: &'a [u32],
    from: DateTime<Utc>,
    len: usize,
) -> impl Iterator<Item = usize> + 'a {
    fires.iter().filter_map(move |&second| {
        let second = if group.jittered {
            let at = from + Duration::seconds(i64::from(second));
            (jittered(task.id, at, task.jitter_secs) - from).num_seconds()
        } else {
            i64::from(second)
        };
        usize::try_from(second).ok().filter(|s| *s < len)
    })
}

/// The load of `tasks` over `hours` from `from` (a whole second).
pub fn load(tasks: &[Planned], from: DateTime<Utc>, hours: i64) -> Load {
    let to = from + Duration::hours(hours);
    let len = usize::try_from(hours * 3600).unwrap_or(0);
    let groups = groups(tasks);
    let fires: Vec<Vec<u32>> = groups
        .iter()
        .map(|g| fire_seconds(g.schedule, from, to))
        .collect();
    let mut per_second = vec![0u64; len];
    for (group, fires) in groups.iter().zip(&fires) {
        // The tasks of a shared schedule fire together: one addition a fire, not one a task.
        let (each, weight) = match group.jittered {
            true => (&group.tasks[..], 1),
            false => (&group.tasks[..1], group.tasks.len() as u64),
        };
        for task in each {
            for second in task_seconds(group, task, fires, from, len) {
                per_second[second] += weight;
            }
        }
    }
    let top = busiest_seconds(&per_second);
    let wanted: BTreeSet<usize> = top.iter().copied().collect();
    let mut tasks_at: HashMap<usize, Vec<TaskId>> = HashMap::new();
    for (group, fires) in groups.iter().zip(&fires) {
        let each = match group.jittered {
            true => &group.tasks[..],
            false => &group.tasks[..1],
        };
        for task in each {
            for second in task_seconds(group, task, fires, from, len) {
                if wanted.contains(&second) {
                    let firing = if group.jittered {
                        each
                    } else {
                        &group.tasks[..]
                    };
                    tasks_at
                        .entry(second)
                        .or_default()
                        .extend(firing.iter().map(|task| task.id));
                }
            }
        }
    }
    let busiest: Vec<Busy> = top
        .iter()
        .map(|&second| {
            let mut ids = tasks_at.remove(&second).unwrap_or_default();
            ids.sort_by_key(|id| id.0);
            ids.dedup();
            Busy {
                at: from + Duration::seconds(second as i64),
                runs: per_second[second],
                tasks: ids,
            }
        })
        .collect();
    let total_runs = per_second.iter().sum();
    let suggestion = suggestion(busiest.first(), tasks, total_runs, len);
    Load {
        from,
        to,
        tasks: tasks.len(),
        total_runs,
        per_minute: per_second.chunks(60).map(|m| m.iter().sum()).collect(),
        busiest,
        suggestion,
    }
}

/// The [`BUSIEST`] seconds with runs, most runs first, earliest of equals first.
fn busiest_seconds(per_second: &[u64]) -> Vec<usize> {
    let mut seconds: Vec<usize> = (0..per_second.len())
        .filter(|&s| per_second[s] > 0)
        .collect();
    seconds.sort_by_key(|&s| (std::cmp::Reverse(per_second[s]), s));
    seconds.truncate(BUSIEST);
    seconds
}

/// Fewer runs than this in a second are not worth spreading.
const CROWD: u64 = 10;

/// When the busiest second holds at least [`CROWD`] runs and over four times the average of
/// a second, the jitter that brings its unjittered tasks down to about that average.
fn suggestion(
    busiest: Option<&Busy>,
    tasks: &[Planned],
    total_runs: u64,
    seconds: usize,
) -> Option<String> {
    let busiest = busiest?;
    let average = (total_runs as f64 / seconds.max(1) as f64).max(1.0);
    if busiest.runs < CROWD || (busiest.runs as f64) < average * 4.0 {
        return None;
    }
    let jitter: HashMap<TaskId, i32> = tasks.iter().map(|t| (t.id, t.jitter_secs)).collect();
    let unjittered = busiest
        .tasks
        .iter()
        .filter(|id| jitter.get(id).copied().unwrap_or(0) == 0)
        .count() as u64;
    if unjittered < CROWD {
        return None;
    }
    let spread = ((unjittered as f64 / average.ceil()).ceil() as i64 - 1).clamp(1, 3599);
    let per_second = (unjittered as f64 / (spread + 1) as f64).ceil() as u64;
    let runs = if per_second == 1 { "run" } else { "runs" };
    Some(format!(
        "{unjittered} tasks without jitter fire at {}: jitterSecs: {spread} on them spreads \
         them over {} seconds, about {per_second} {runs} a second",
        clock(busiest.at),
        spread + 1
    ))
}

/// `HH:MM:SS` UTC, and what the second is (the top of an hour or a minute).
pub fn clock(at: DateTime<Utc>) -> String {
    let top = match (at.minute(), at.second()) {
        (0, 0) => " (the top of the hour)",
        (_, 0) => " (the top of a minute)",
        _ => "",
    };
    format!("{}Z{top}", at.format("%H:%M:%S"))
}

/// `4812` as `4,812`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn task(id: i64, cron: &str, jitter_secs: i32) -> Planned {
        Planned {
            id: TaskId(id),
            schedule: ax_cron::CronSchedule::parse(cron).expect("a cron").into(),
            jitter_secs,
        }
    }

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("a time")
    }

    #[test]
    fn the_top_of_the_hour_is_the_busiest_second() {
        let mut tasks: Vec<Planned> = (1..=12).map(|id| task(id, "0 0 * * * *", 0)).collect();
        tasks.push(task(13, "*/10 * * * * *", 0));
        let load = load(&tasks, at("2027-01-01T00:00:00Z"), 2);
        assert_eq!(load.per_minute.len(), 120);
        assert_eq!(load.total_runs, 12 * 2 + 6 * 120);
        assert_eq!(load.per_minute[0], 12 + 6);
        assert_eq!(load.per_minute[1], 6);
        let top = &load.busiest[0];
        assert_eq!((top.at, top.runs), (at("2027-01-01T00:00:00Z"), 13));
        assert_eq!(top.tasks.len(), 13);
        assert_eq!(load.busiest[1].at, at("2027-01-01T01:00:00Z"));
        assert_eq!(load.busiest[2].runs, 1, "then the every-10-seconds task");
        assert_eq!(load.busiest.len(), BUSIEST);
        let share = load.busiest_share().expect("a share");
        assert!((share - 100.0).abs() < 1e-9);
        let suggestion = load.suggestion.expect("a crowd to spread");
        assert!(
            suggestion.starts_with(
                "13 tasks without jitter fire at 00:00:00Z (the top of the hour): jitterSecs: "
            ),
            "{suggestion}"
        );
    }

    #[test]
    fn counts_read_in_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(4_812), "4,812");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn jitter_spreads_a_task_within_its_span() {
        let tasks = vec![task(1, "0 * * * * *", 30)];
        let load = load(&tasks, at("2027-01-01T00:00:00Z"), 1);
        assert_eq!(load.total_runs, 60);
        for busy in &load.busiest {
            assert!(busy.at.second() <= 30, "{busy:?}");
        }
        assert_eq!(load.suggestion, None, "one run a second needs no jitter");
    }

    #[test]
    fn a_zone_moves_the_fire() {
        let mut berlin = task(1, "0 0 9 * * *", 0);
        berlin.schedule = berlin
            .schedule
            .cron()
            .clone()
            .in_zone(ax_cron::Zone::parse("Europe/Berlin").expect("a zone"))
            .into();
        let load = load(&[berlin], at("2027-01-01T00:00:00Z"), 24);
        assert_eq!(load.busiest[0].at, at("2027-01-01T08:00:00Z"));
    }

    fn naive(tasks: &[Planned], from: DateTime<Utc>, hours: i64) -> Vec<u64> {
        let mut per_second = vec![0u64; (hours * 3600) as usize];
        for task in tasks {
            for second in 0..per_second.len() {
                let nominal = from + Duration::seconds(second as i64);
                if task.schedule.next_after(nominal - Duration::seconds(1)) == Some(nominal) {
                    let due = jittered(task.id, nominal, task.jitter_secs);
                    let s = (due - from).num_seconds() as usize;
                    if s < per_second.len() {
                        per_second[s] += 1;
                    }
                }
            }
        }
        per_second
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn counts_match_a_task_by_task_count(
            specs in proptest::collection::vec((0usize..5, 0i32..3), 1..12)
        ) {
            const CRONS: [&str; 5] = ["*/7 * * * * *", "0 * * * * *", "30 */2 * * * *", "0 0 * * * *", "*/20 5 * * * *"];
            let tasks: Vec<Planned> = specs.iter().enumerate()
                .map(|(n, (cron, jitter))| task(n as i64 + 1, CRONS[*cron], *jitter * 5))
                .collect();
            let from = at("2027-03-28T00:00:00Z");
            let per_second = naive(&tasks, from, 1);
            let load = load(&tasks, from, 1);
            let per_minute: Vec<u64> = per_second.chunks(60).map(|m| m.iter().sum()).collect();
            prop_assert_eq!(&load.per_minute, &per_minute);
            let most = per_second.iter().copied().max().unwrap_or(0);
            prop_assert_eq!(load.busiest.first().map_or(0, |b| b.runs), most);
            for busy in &load.busiest {
                let s = (busy.at - from).num_seconds() as usize;
                prop_assert_eq!(busy.runs, per_second[s]);
            }
        }
    }
}
