//! What an action did, told on the page it led to.

/// What an action did, told on the page it led to (the redirect's `done` and `n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    Created,
    Saved,
    Deleted,
    Paused,
    Resumed,
    Triggered,
    Cancelled,
    /// Runs a backfill added.
    Backfilled(i64),
    /// Tasks of a selection paused, resumed or triggered.
    PausedMany(i64),
    ResumedMany(i64),
    TriggeredMany(i64),
    /// A scene paused or resumed: how many of its tasks stop or start firing.
    ScenePaused(i64),
    SceneResumed(i64),
    /// A calendar made, changed or deleted on its pages.
    CalendarCreated,
    CalendarSaved,
    CalendarDeleted,
    SignedOut,
    /// A bulk action asked with no task selected.
    NothingSelected,
}

impl Notice {
    /// The notice of a page's query string.
    pub fn from_query(query: &str) -> Option<Notice> {
        let mut done = None;
        let mut n = 0;
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            match &*key {
                "done" => done = Some(value.into_owned()),
                "n" => n = value.parse().unwrap_or(0),
                _ => {}
            }
        }
        Some(match done?.as_str() {
            "created" => Notice::Created,
            "saved" => Notice::Saved,
            "deleted" => Notice::Deleted,
            "paused" => Notice::Paused,
            "resumed" => Notice::Resumed,
            "triggered" => Notice::Triggered,
            "cancelled" => Notice::Cancelled,
            "backfilled" => Notice::Backfilled(n),
            "paused-many" => Notice::PausedMany(n),
            "resumed-many" => Notice::ResumedMany(n),
            "triggered-many" => Notice::TriggeredMany(n),
            "scene-paused" => Notice::ScenePaused(n),
            "scene-resumed" => Notice::SceneResumed(n),
            "calendar-created" => Notice::CalendarCreated,
            "calendar-saved" => Notice::CalendarSaved,
            "calendar-deleted" => Notice::CalendarDeleted,
            "signed-out" => Notice::SignedOut,
            "none-selected" => Notice::NothingSelected,
            _ => return None,
        })
    }

    /// The query string that tells it.
    pub fn query(self) -> String {
        let (done, n) = match self {
            Notice::Created => ("created", None),
            Notice::Saved => ("saved", None),
            Notice::Deleted => ("deleted", None),
            Notice::Paused => ("paused", None),
            Notice::Resumed => ("resumed", None),
            Notice::Triggered => ("triggered", None),
            Notice::Cancelled => ("cancelled", None),
            Notice::Backfilled(n) => ("backfilled", Some(n)),
            Notice::PausedMany(n) => ("paused-many", Some(n)),
            Notice::ResumedMany(n) => ("resumed-many", Some(n)),
            Notice::TriggeredMany(n) => ("triggered-many", Some(n)),
            Notice::ScenePaused(n) => ("scene-paused", Some(n)),
            Notice::SceneResumed(n) => ("scene-resumed", Some(n)),
            Notice::CalendarCreated => ("calendar-created", None),
            Notice::CalendarSaved => ("calendar-saved", None),
            Notice::CalendarDeleted => ("calendar-deleted", None),
            Notice::SignedOut => ("signed-out", None),
            Notice::NothingSelected => ("none-selected", None),
        };
        match n {
            Some(n) => format!("done={done}&n={n}"),
            None => format!("done={done}"),
        }
    }

    /// What the page says.
    pub fn text(self) -> String {
        let tasks = |n: i64| {
            if n == 1 {
                "1 task".to_string()
            } else {
                format!("{n} tasks")
            }
        };
        match self {
            Notice::Created => "Task created.".into(),
            Notice::Saved => "Task saved.".into(),
            Notice::Deleted => "Task deleted; its open runs ended FAILED (TASK_DELETED).".into(),
            Notice::Paused => "Task paused.".into(),
            Notice::Resumed => "Task resumed.".into(),
            Notice::Triggered => "Run triggered.".into(),
            Notice::Cancelled => "Run cancelled.".into(),
            Notice::Backfilled(1) => "Backfill: 1 run added.".into(),
            Notice::Backfilled(n) => format!("Backfill: {n} runs added."),
            Notice::PausedMany(n) => format!("Paused {}.", tasks(n)),
            Notice::ResumedMany(n) => format!("Resumed {}.", tasks(n)),
            Notice::TriggeredMany(n) => format!("Triggered {}.", tasks(n)),
            Notice::ScenePaused(1) => "Scene paused: 1 task stops firing.".into(),
            Notice::ScenePaused(n) => format!("Scene paused: {n} tasks stop firing."),
            Notice::SceneResumed(1) => "Scene resumed: 1 task fires again.".into(),
            Notice::SceneResumed(n) => format!("Scene resumed: {n} tasks fire again."),
            Notice::CalendarCreated => "Calendar created.".into(),
            Notice::CalendarSaved => {
                "Calendar saved; the tasks naming it fire on its new days from now on.".into()
            }
            Notice::CalendarDeleted => "Calendar deleted.".into(),
            Notice::SignedOut => "Signed out.".into(),
            Notice::NothingSelected => {
                "Nothing was done: no task was selected. Check the tasks to act on first.".into()
            }
        }
    }
}
