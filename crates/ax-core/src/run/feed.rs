//! The run feed behind `GET /api/events`: which runs and attempt logs changed between two
//! looks at the store. A look reads what every ax process wrote (the open runs, the runs
//! ended and the logs updated since shortly before the last look), so any process serves the
//! changes of all, and nothing is added to the fire path. A run that passes through states
//! between two looks shows the last one; an ended run is told once.

use crate::ids::SceneName;
use std::collections::HashMap;

use chrono::NaiveDateTime;
use serde::Serialize;

use crate::run::{RunStatus, TaskId};

/// A run as one look saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRun {
    pub request_id: String,
    pub task_id: TaskId,
    /// Its task's scene; empty once the task is deleted.
    pub scene: String,
    pub status: RunStatus,
    /// When it ended; `None` while it is open.
    pub finished_at: Option<NaiveDateTime>,
}

/// An attempt's log as one look saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenLog {
    pub request_id: String,
    pub task_id: TaskId,
    pub scene: String,
    pub attempt: i32,
    pub progress: Option<i32>,
    /// Lines sent so far, kept or dropped.
    pub lines: i64,
    pub updated_at: NaiveDateTime,
}

/// One look at the store: the open runs, and what ended or logged since `since`.
#[derive(Debug, Clone, Default)]
pub struct Look {
    pub open: Vec<SeenRun>,
    pub ended: Vec<SeenRun>,
    pub logs: Vec<SeenLog>,
    /// The start of the window `ended` and `logs` were read from.
    pub since: NaiveDateTime,
}

/// A change, as `GET /api/events` sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    #[serde(skip)]
    pub kind: ChangeKind,
    pub request_id: String,
    pub task_id: TaskId,
    pub scene: String,
    pub status: Option<RunStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// A run's status changed (or the run is new).
    Run,
    /// An attempt's log got lines or progress.
    Log,
}

impl ChangeKind {
    pub fn event_name(self) -> &'static str {
        match self {
            ChangeKind::Run => "run",
            ChangeKind::Log => "log",
        }
    }
}

impl Change {
    fn of_run(run: &SeenRun) -> Change {
        Change {
            kind: ChangeKind::Run,
            request_id: run.request_id.clone(),
            task_id: run.task_id,
            scene: run.scene.clone(),
            status: Some(run.status),
            attempt: None,
            progress: None,
            lines: None,
        }
    }

    fn of_log(log: &SeenLog) -> Change {
        Change {
            kind: ChangeKind::Log,
            request_id: log.request_id.clone(),
            task_id: log.task_id,
            scene: log.scene.clone(),
            status: None,
            attempt: Some(log.attempt),
            progress: log.progress,
            lines: Some(log.lines),
        }
    }

    /// The change as one server-sent event.
    pub fn frame(&self) -> String {
        let data = serde_json::to_string(self).unwrap_or_default();
        format!("event: {}\ndata: {data}\n\n", self.kind.event_name())
    }
}

/// What a listener wants: the changes of one task, of one scene, or all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interest {
    pub task: Option<TaskId>,
    pub scene: Option<SceneName>,
}

impl Interest {
    pub fn wants(&self, change: &Change) -> bool {
        self.task.is_none_or(|task| task == change.task_id)
            && self
                .scene
                .as_ref()
                .is_none_or(|scene| *scene == change.scene)
    }
}

/// What the last looks saw, to tell the next one's changes.
#[derive(Debug, Default)]
pub struct Feed {
    /// Whether a first look was taken: it is the baseline, and tells nothing.
    primed: bool,
    open: HashMap<String, RunStatus>,
    /// Ended runs already told, until they leave the window.
    ended: HashMap<String, NaiveDateTime>,
    /// Each attempt's log as last told, until it leaves the window.
    logs: HashMap<(String, i32), (Option<i32>, i64, NaiveDateTime)>,
}

impl Feed {
    /// Whether a baseline look was taken: changes are told from the next look on.
    pub fn is_primed(&self) -> bool {
        self.primed
    }

    /// The changes `look` shows since the last look; the first look only sets the baseline.
    pub fn advance(&mut self, look: Look) -> Vec<Change> {
        let tell = self.primed;
        let mut changes = Vec::new();
        let mut open = HashMap::with_capacity(look.open.len());
        for run in look.open {
            if tell && self.open.get(&run.request_id) != Some(&run.status) {
                changes.push(Change::of_run(&run));
            }
            open.insert(run.request_id, run.status);
        }
        for run in look.ended {
            let at = run.finished_at.unwrap_or(look.since);
            if self.ended.insert(run.request_id.clone(), at).is_none() && tell {
                changes.push(Change::of_run(&run));
            }
        }
        for log in look.logs {
            let key = (log.request_id.clone(), log.attempt);
            let seen = (log.progress, log.lines, log.updated_at);
            let before = self.logs.insert(key, seen);
            if tell && before.is_none_or(|(p, l, _)| (p, l) != (log.progress, log.lines)) {
                changes.push(Change::of_log(&log));
            }
        }
        self.ended.retain(|_, at| *at >= look.since);
        self.logs.retain(|_, (_, _, at)| *at >= look.since);
        self.open = open;
        self.primed = true;
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;
    use proptest::prelude::*;

    fn at(secs: i64) -> NaiveDateTime {
        DateTime::from_timestamp(1_800_000_000 + secs, 0)
            .unwrap()
            .naive_utc()
    }

    fn run(id: &str, status: RunStatus, finished: Option<i64>) -> SeenRun {
        SeenRun {
            request_id: id.into(),
            task_id: TaskId(1),
            scene: "etl".into(),
            status,
            finished_at: finished.map(at),
        }
    }

    fn log(id: &str, lines: i64, progress: Option<i32>, updated: i64) -> SeenLog {
        SeenLog {
            request_id: id.into(),
            task_id: TaskId(1),
            scene: "etl".into(),
            attempt: 1,
            progress,
            lines,
            updated_at: at(updated),
        }
    }

    fn look(open: Vec<SeenRun>, ended: Vec<SeenRun>, logs: Vec<SeenLog>, since: i64) -> Look {
        Look {
            open,
            ended,
            logs,
            since: at(since),
        }
    }

    fn told(changes: &[Change]) -> Vec<(String, Option<RunStatus>)> {
        changes
            .iter()
            .map(|c| (c.request_id.clone(), c.status))
            .collect()
    }

    #[test]
    fn the_first_look_is_the_baseline() {
        let mut feed = Feed::default();
        let first = look(
            vec![run("a", RunStatus::Running, None)],
            vec![run("b", RunStatus::Success, Some(0))],
            vec![log("a", 3, None, 0)],
            -3,
        );
        assert!(feed.advance(first).is_empty());
    }

    #[test]
    fn new_runs_status_changes_and_ends_are_told_once() {
        let mut feed = Feed::default();
        feed.advance(look(
            vec![run("a", RunStatus::Ready, None)],
            vec![],
            vec![],
            0,
        ));
        let changes = feed.advance(look(
            vec![
                run("a", RunStatus::Running, None),
                run("n", RunStatus::Pending, None),
            ],
            vec![run("q", RunStatus::Failed, Some(1))],
            vec![],
            0,
        ));
        assert_eq!(
            told(&changes),
            vec![
                ("a".into(), Some(RunStatus::Running)),
                ("n".into(), Some(RunStatus::Pending)),
                ("q".into(), Some(RunStatus::Failed)),
            ]
        );
        // The next look's window overlaps: `q` is seen again, and not told again; `a` ends.
        let changes = feed.advance(look(
            vec![run("n", RunStatus::Pending, None)],
            vec![
                run("q", RunStatus::Failed, Some(1)),
                run("a", RunStatus::Success, Some(2)),
            ],
            vec![],
            1,
        ));
        assert_eq!(told(&changes), vec![("a".into(), Some(RunStatus::Success))]);
        assert!(feed
            .advance(look(
                vec![run("n", RunStatus::Pending, None)],
                vec![],
                vec![],
                2
            ))
            .is_empty());
    }

    #[test]
    fn a_log_is_told_when_its_lines_or_progress_change() {
        let mut feed = Feed::default();
        feed.advance(look(vec![], vec![], vec![], 0));
        let changes = feed.advance(look(vec![], vec![], vec![log("a", 2, None, 1)], 0));
        assert_eq!(changes.len(), 1);
        assert_eq!(
            (changes[0].kind, changes[0].lines),
            (ChangeKind::Log, Some(2))
        );
        assert!(feed
            .advance(look(vec![], vec![], vec![log("a", 2, None, 1)], 1))
            .is_empty());
        let changes = feed.advance(look(vec![], vec![], vec![log("a", 2, Some(50), 2)], 1));
        assert_eq!(changes[0].progress, Some(50));
    }

    #[test]
    fn what_left_the_window_is_forgotten() {
        let mut feed = Feed::default();
        feed.advance(look(
            vec![],
            vec![run("q", RunStatus::Failed, Some(1))],
            vec![],
            0,
        ));
        feed.advance(look(vec![], vec![], vec![], 5));
        assert!(feed.ended.is_empty());
    }

    #[test]
    fn a_frame_is_one_named_event_of_camel_case_json() {
        let change = Change::of_run(&run("a", RunStatus::Running, None));
        assert_eq!(
            change.frame(),
            "event: run\ndata: {\"requestId\":\"a\",\"taskId\":1,\"scene\":\"etl\",\"status\":\"RUNNING\"}\n\n"
        );
        let log = Change::of_log(&log("a", 4, Some(10), 0)).frame();
        assert!(log.starts_with("event: log\n"), "{log}");
        assert!(
            log.contains("\"attempt\":1,\"progress\":10,\"lines\":4"),
            "{log}"
        );
    }

    #[test]
    fn interests_filter_by_task_and_scene() {
        let change = Change::of_run(&run("a", RunStatus::Running, None));
        let wants = |task: Option<i64>, scene: Option<&str>| {
            Interest {
                task: task.map(TaskId),
                scene: scene.map(SceneName::from),
            }
            .wants(&change)
        };
        assert!(wants(None, None));
        assert!(wants(Some(1), Some("etl")));
        assert!(!wants(Some(2), None));
        assert!(!wants(None, Some("web")));
    }

    const STATUSES: [RunStatus; 4] = [
        RunStatus::Pending,
        RunStatus::Ready,
        RunStatus::Running,
        RunStatus::Success,
    ];

    proptest! {
        /// Runs change at random between looks, and an ended run stays in the window one look
        /// more: exactly the runs whose status differs from the last look's are told, each
        /// ended run once.
        #[test]
        fn exactly_the_changed_runs_are_told(
            steps in prop::collection::vec(prop::collection::vec((0..6usize, 0..4usize), 0..6), 1..12)
        ) {
            let mut feed = Feed::default();
            let mut model: HashMap<String, (RunStatus, i64)> = HashMap::new();
            let mut before: HashMap<String, RunStatus> = HashMap::new();
            for (n, step) in steps.iter().enumerate() {
                let n = n as i64;
                for (id, status) in step {
                    let id = format!("r{id}");
                    if model.get(&id).is_none_or(|(s, _)| !s.is_final()) {
                        model.insert(id, (STATUSES[*status], n));
                    }
                }
                let open = model.iter().filter(|(_, (s, _))| !s.is_final())
                    .map(|(id, (s, _))| run(id, *s, None)).collect();
                let ended = model.iter().filter(|(_, (s, at))| s.is_final() && *at >= n - 1)
                    .map(|(id, (s, at))| run(id, *s, Some(*at))).collect();
                let mut told: Vec<_> = told(&feed.advance(look(open, ended, vec![], n - 1)));
                told.sort();
                let mut expected: Vec<_> = if n == 0 { Vec::new() } else {
                    model.iter()
                        .filter(|(id, (s, _))| before.get(*id) != Some(s))
                        .map(|(id, (s, _))| (id.clone(), Some(*s)))
                        .collect()
                };
                expected.sort();
                prop_assert_eq!(told, expected);
                before = model.iter().map(|(id, (s, _))| (id.clone(), *s)).collect();
            }
        }
    }
}
