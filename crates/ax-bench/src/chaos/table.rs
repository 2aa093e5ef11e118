//! The pure part of the suite: what a scenario's window asked for against what the executor
//! received and the store holds, and the table that shows it. No I/O and no clock.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;

use serde::Serialize;
use uuid::Uuid;

use crate::measure::analysis::{has_derived_id, Delivery, RunKey};

/// A run delivered more than this after its second is late (the missed-run policy's grace).
pub const LATE_AFTER_MS: i64 = 2_000;

/// The figures of one scenario's window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Tally {
    /// Runs the schedule asks for in the window (cron seconds × tasks).
    pub expected: usize,
    /// Expected runs the executor received.
    pub delivered: usize,
    /// Expected runs neither delivered nor folded.
    pub lost: usize,
    /// Of the lost, those with a run row (recorded, never delivered: `MISSED`, or a row left
    /// open).
    pub lost_with_row: usize,
    /// Expected runs folded into a catch-up by the missed-run policy: a run of the same task,
    /// due earlier, delivered late at or after this one's second stood for it (ax's documented
    /// answer to a stall of more than 2 s: one run, now, for every period missed).
    pub folded: usize,
    /// Request ids of the window the executor received more than once.
    pub delivered_twice: usize,
    /// Expected runs first delivered more than [`LATE_AFTER_MS`] after their second.
    pub late: usize,
    /// The most an expected run's first delivery came after its second, in ms.
    pub worst_late_ms: i64,
    /// Deliveries whose request id is not the one derived from (task, second).
    pub mismatched_request_ids: usize,
    /// Run rows beyond the first of a (task, second) in the window.
    pub duplicate_rows: usize,
}

/// Compares the window's expected runs with every delivery (of any time: a catch-up of a run
/// due just before the window may stand for runs in it) and the window's run rows.
pub fn tally(
    expected: &HashSet<RunKey>,
    deliveries: &[Delivery],
    rows: &[(i64, i64, String)],
    window: Range<i64>,
) -> Tally {
    let mut tally = Tally {
        expected: expected.len(),
        ..Tally::default()
    };
    // The first receipt of each run, and how many receipts of each request id.
    let mut first: HashMap<RunKey, i64> = HashMap::new();
    let mut receipts: HashMap<Uuid, usize> = HashMap::new();
    for delivery in deliveries {
        let key = (delivery.task_id, delivery.scheduled_at);
        let at = first.entry(key).or_insert(delivery.received_at_us);
        *at = (*at).min(delivery.received_at_us);
        if window.contains(&delivery.scheduled_at) {
            *receipts.entry(delivery.request_id).or_default() += 1;
            if !has_derived_id(delivery) {
                tally.mismatched_request_ids += 1;
            }
        }
    }
    tally.delivered_twice = receipts.values().filter(|n| **n > 1).count();
    // Each task's delivered seconds in order, with their first receipt.
    let mut by_task: BTreeMap<i64, BTreeMap<i64, i64>> = BTreeMap::new();
    for ((task, second), received_us) in &first {
        by_task
            .entry(*task)
            .or_default()
            .insert(*second, *received_us);
    }
    let with_row: HashSet<RunKey> = rows.iter().map(|(task, at, _)| (*task, *at)).collect();
    tally.duplicate_rows = rows.len() - with_row.len();
    for key in expected {
        if let Some(received_us) = first.get(key) {
            tally.delivered += 1;
            let late_ms = (received_us - key.1 * 1_000_000) / 1_000;
            tally.worst_late_ms = tally.worst_late_ms.max(late_ms);
            if late_ms > LATE_AFTER_MS {
                tally.late += 1;
            }
        } else if is_folded(by_task.get(&key.0), key.1) {
            tally.folded += 1;
        } else {
            tally.lost += 1;
            if with_row.contains(key) {
                tally.lost_with_row += 1;
            }
        }
    }
    tally
}

/// Whether the run of `second` was folded into a catch-up: the task's last delivered run
/// before it was delivered late, at or after `second`.
fn is_folded(delivered: Option<&BTreeMap<i64, i64>>, second: i64) -> bool {
    let Some((due, received_us)) = delivered.and_then(|runs| runs.range(..second).next_back())
    else {
        return false;
    };
    let late_ms = (received_us - due * 1_000_000) / 1_000;
    late_ms > LATE_AFTER_MS && *received_us >= second * 1_000_000
}

/// How a scenario ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// It ran; its figures.
    Measured(Tally),
    /// It could not run on this build or machine (a feature missing, a permission): why.
    NotRun { reason: String },
    /// It broke before its figures were in: the error.
    Failed { error: String },
}

/// One line of the table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub scenario: &'static str,
    /// Fires per second the schedule asks for.
    pub load: f64,
    /// What the scenario expects, in words.
    pub expects: &'static str,
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl Row {
    /// Why this row fails the suite, if it does: a run lost, two rows for one run, a delivery
    /// under another request id, or a scenario that broke. A scenario this build cannot run is
    /// shown, not failed.
    pub fn failure(&self) -> Option<String> {
        match &self.outcome {
            Outcome::Measured(tally) => {
                let mut why = Vec::new();
                if tally.lost > 0 {
                    why.push(format!("{} runs lost", tally.lost));
                }
                if tally.duplicate_rows > 0 {
                    why.push(format!("{} duplicate run rows", tally.duplicate_rows));
                }
                if tally.mismatched_request_ids > 0 {
                    why.push(format!(
                        "{} deliveries under another request id",
                        tally.mismatched_request_ids
                    ));
                }
                (!why.is_empty()).then(|| why.join(", "))
            }
            Outcome::NotRun { .. } => None,
            Outcome::Failed { error } => Some(format!("did not complete: {error}")),
        }
    }
}

const HEADERS: [&str; 9] = [
    "scenario",
    "load (fires/s)",
    "expected",
    "delivered",
    "lost",
    "folded",
    "delivered twice",
    "late (> 2 s)",
    "worst lateness",
];

/// The table as text: one line per scenario, columns aligned, and a line under it for each
/// row that did not measure or that fails.
pub fn render(rows: &[Row]) -> String {
    let mut lines: Vec<Vec<String>> = vec![HEADERS.iter().map(|h| h.to_string()).collect()];
    let mut notes = Vec::new();
    for row in rows {
        let load = format!("{:.0}", row.load);
        let cells = match &row.outcome {
            Outcome::Measured(t) => vec![
                t.expected.to_string(),
                t.delivered.to_string(),
                t.lost.to_string(),
                t.folded.to_string(),
                t.delivered_twice.to_string(),
                t.late.to_string(),
                format!("{:.1} s", t.worst_late_ms as f64 / 1000.0),
            ],
            Outcome::NotRun { reason } => {
                notes.push(format!("{}: not run: {reason}", row.scenario));
                vec!["not run".to_string()]
            }
            Outcome::Failed { error } => {
                notes.push(format!("{}: failed: {error}", row.scenario));
                vec!["failed".to_string()]
            }
        };
        if let (Outcome::Measured(_), Some(why)) = (&row.outcome, row.failure()) {
            notes.push(format!("{}: FAILS: {why}", row.scenario));
        }
        let mut line = vec![row.scenario.to_string(), load];
        line.extend(cells);
        lines.push(line);
    }
    let widths: Vec<usize> = (0..HEADERS.len())
        .map(|column| {
            lines
                .iter()
                .filter_map(|line| line.get(column))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    for line in &lines {
        let cells: Vec<String> = line
            .iter()
            .enumerate()
            .map(|(column, cell)| {
                // Names to the left, figures to the right.
                if column == 0 {
                    format!("{cell:<width$}", width = widths[column])
                } else {
                    format!("{cell:>width$}", width = widths[column])
                }
            })
            .collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    for note in notes {
        text.push_str(&note);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::analysis::scheduled_request_id;
    use chrono::DateTime;

    const T0: i64 = 1_800_000_000;

    fn delivery(task_id: i64, second: i64, late_ms: i64) -> Delivery {
        let at = DateTime::from_timestamp(second, 0).expect("time");
        Delivery {
            request_id: scheduled_request_id(task_id, at),
            task_id,
            scheduled_at: second,
            received_at_us: second * 1_000_000 + late_ms * 1_000,
        }
    }

    fn every_second(task: i64, seconds: Range<i64>) -> HashSet<RunKey> {
        seconds.map(|s| (task, s)).collect()
    }

    #[test]
    fn a_clean_window_has_nothing_to_say() {
        let expected = every_second(1, T0..T0 + 10);
        let deliveries: Vec<Delivery> = (T0..T0 + 10).map(|s| delivery(1, s, 30)).collect();
        let tally = tally(&expected, &deliveries, &[], T0..T0 + 10);
        assert_eq!(
            tally,
            Tally {
                expected: 10,
                delivered: 10,
                worst_late_ms: 30,
                ..Tally::default()
            }
        );
    }

    #[test]
    fn a_catch_up_folds_the_seconds_up_to_its_delivery_and_no_further() {
        let expected = every_second(1, T0..T0 + 20);
        // Seconds 0-2 on time; 3 delivered at 9.5 standing for 4-9; 10 on time; 11 never.
        let mut deliveries: Vec<Delivery> = (T0..T0 + 3).map(|s| delivery(1, s, 10)).collect();
        deliveries.push(delivery(1, T0 + 3, 6_500));
        deliveries.extend((T0 + 10..T0 + 11).map(|s| delivery(1, s, 10)));
        deliveries.extend((T0 + 12..T0 + 20).map(|s| delivery(1, s, 10)));
        let rows = vec![(1, T0 + 11, "MISSED".to_string())];
        let tally = tally(&expected, &deliveries, &rows, T0..T0 + 20);
        assert_eq!(tally.delivered, 13);
        assert_eq!(tally.folded, 6);
        assert_eq!((tally.lost, tally.lost_with_row), (1, 1));
        assert_eq!((tally.late, tally.worst_late_ms), (1, 6_500));
        assert!(tally.failure_free_of_duplicates());
    }

    #[test]
    fn repeats_and_foreign_ids_and_double_rows_are_counted() {
        let expected = every_second(2, T0..T0 + 3);
        let mut deliveries: Vec<Delivery> = (T0..T0 + 3).map(|s| delivery(2, s, 100)).collect();
        deliveries.push(delivery(2, T0 + 1, 3_000));
        deliveries.push(Delivery {
            request_id: Uuid::nil(),
            ..delivery(2, T0 + 2, 200)
        });
        // Before the window: counts for folding only.
        deliveries.push(delivery(2, T0 - 5, 100));
        deliveries.push(delivery(2, T0 - 5, 100));
        let rows = vec![
            (2, T0, "SUCCESS".to_string()),
            (2, T0, "SUCCESS".to_string()),
        ];
        let tally = tally(&expected, &deliveries, &rows, T0..T0 + 3);
        assert_eq!(tally.delivered_twice, 1);
        assert_eq!(tally.mismatched_request_ids, 1);
        assert_eq!(tally.duplicate_rows, 1);
        assert_eq!((tally.late, tally.worst_late_ms), (0, 100));
    }

    impl Tally {
        fn failure_free_of_duplicates(&self) -> bool {
            self.delivered_twice == 0 && self.duplicate_rows == 0
        }
    }

    fn row(outcome: Outcome) -> Row {
        Row {
            scenario: "kill-9",
            load: 100.0,
            expects: "",
            outcome,
        }
    }

    #[test]
    fn lost_runs_and_broken_scenarios_fail_and_unsupported_ones_do_not() {
        let clean = Tally {
            expected: 5,
            delivered: 5,
            ..Tally::default()
        };
        assert_eq!(row(Outcome::Measured(clean.clone())).failure(), None);
        let lost = Tally {
            lost: 2,
            ..clean.clone()
        };
        assert_eq!(
            row(Outcome::Measured(lost)).failure().as_deref(),
            Some("2 runs lost")
        );
        let not_run = row(Outcome::NotRun {
            reason: "no Sentinel".into(),
        });
        assert_eq!(not_run.failure(), None);
        let failed = row(Outcome::Failed {
            error: "boom".into(),
        });
        assert!(failed.failure().is_some());
        let text = render(&[row(Outcome::Measured(clean)), not_run]);
        assert!(text.starts_with("scenario"), "{text}");
        assert!(text.contains("kill-9: not run: no Sentinel"), "{text}");
        let json = serde_json::to_value(&failed).expect("json");
        assert_eq!(json["outcome"], "failed");
        assert_eq!(json["error"], "boom");
        let json = serde_json::to_value(row(Outcome::Measured(Tally::default()))).expect("json");
        assert_eq!(json["outcome"], "measured");
        assert_eq!(
            (json["scenario"].as_str(), json["lost"].as_u64()),
            (Some("kill-9"), Some(0))
        );
    }
}
