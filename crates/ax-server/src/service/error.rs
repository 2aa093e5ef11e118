//! The errors of the service's operations.

use super::task_details::TaskDetails;
use ax_core::ids::{CalendarName, GroupName, SceneName};
use ax_core::run::{RequestId, RunStatus, TaskId};
use ax_store::queries::executors::Holder;
use ax_store::queries::tasks::UpstreamProblem;
use ax_store::rows::models::TaskFields;
use ax_store::StoreError;

/// Errors of scheduler operations.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("task {0} not found")]
    TaskNotFound(TaskId),
    /// The task is at another version than the change was made for: the task as it is now.
    #[error(
        "task {} has changed: it is at version {} now; read it again and make the change \
         on that",
        .0.task.id,
        .0.task.version
    )]
    Stale(Box<TaskDetails>),
    #[error("dependsOn names tasks that do not exist: {0:?}")]
    UnknownUpstreams(Vec<TaskId>),
    #[error("dependsOn would close a cycle: {0}")]
    Cycle(String),
    #[error("scene `{scene}` has a task named `{name}` already")]
    NameTaken { scene: SceneName, name: String },
    #[error("another client registered one of these names meanwhile; nothing was written")]
    Raced,
    #[error("this scene and name are task {0}'s (set \"upsert\": true to update it)")]
    Exists(TaskId),
    /// A backfill's range cannot be taken; the message says why (field `to`).
    #[error("{0}")]
    Backfill(String),
    #[error("no run with requestId {0}")]
    RunNotFound(RequestId),
    #[error("run {id} is {status} already: a final run does not change")]
    RunFinal { id: RequestId, status: RunStatus },
    /// A run's log that takes no more lines.
    #[error(transparent)]
    LogClosed(#[from] ax_core::run::logs::Closed),
    #[error("this ax process serves {0} event streams already; try another process or later")]
    TooManyListeners(usize),
    /// The blocking pool a long computation runs on is gone: the process is stopping.
    #[error("this ax process is shutting down; try another process or later")]
    ShuttingDown,
    #[error("no executor group `{0}`")]
    GroupNotFound(GroupName),
    #[error("executor group `{group}` is used by {} tasks: {}; give them another executor first", .tasks.len(), .tasks.join(", "))]
    GroupInUse {
        group: GroupName,
        tasks: Vec<String>,
    },
    #[error("no calendar `{0}`")]
    CalendarNotFound(CalendarName),
    #[error("a calendar named `{0}` exists already: pick another name, or change that one")]
    CalendarExists(CalendarName),
    #[error("calendar `{calendar}` is used by {} tasks: {}; take it out of their calendars first", .tasks.len(), .tasks.join(", "))]
    CalendarInUse {
        calendar: CalendarName,
        tasks: Vec<String>,
    },
    /// A task's `calendars` naming a calendar that does not exist.
    #[error("no calendar `{name}`: create it first (PUT /api/calendars/{name})")]
    UnknownCalendar { field: String, name: CalendarName },
    #[error("executor group `{group}` has no member {url}")]
    MemberNotFound { group: GroupName, url: String },
    /// An executor's token outside its groups (`server.tokens[N].groups`).
    #[error("the token `{token}` may register members into the executor groups {groups} only, not into `{group}`")]
    NotInGroups {
        token: String,
        group: String,
        groups: String,
    },
    /// A member an executor's token did not register: an admin defined it, or another token
    /// registered it.
    #[error("{}", held(.group, .url, *.holder))]
    MemberHeld {
        group: GroupName,
        url: String,
        holder: Holder,
    },
    #[error("executor group `{group}` holds {max} registered members already, the most executors.max_registered_members allows; another joins once one leaves or expires")]
    GroupFull { group: GroupName, max: usize },
    /// An alert rule naming a channel that is not configured.
    #[error("{field}: {message}")]
    AlertRule { field: String, message: String },
    #[error(transparent)]
    AlertTest(#[from] crate::actors::alerts::TestError),
    /// A bulk registration refused for the item at `index`.
    #[error("items[{index}]: {error}")]
    Item {
        index: usize,
        error: Box<ServiceError>,
    },
}

impl ServiceError {
    /// The store's refusal of a task's `(scene, name)` as such; other errors as they are.
    pub(super) fn naming(err: StoreError, fields: &TaskFields) -> Self {
        if err.is_name_taken() {
            ServiceError::NameTaken {
                scene: fields.scene.clone(),
                name: fields.name.clone(),
            }
        } else {
            ServiceError::Store(err)
        }
    }
}

impl From<UpstreamProblem> for ServiceError {
    fn from(problem: UpstreamProblem) -> Self {
        match problem {
            UpstreamProblem::Unknown(ids) => ServiceError::UnknownUpstreams(ids),
            UpstreamProblem::Cycle(cycle) => {
                let path: Vec<String> = cycle.iter().map(TaskId::to_string).collect();
                ServiceError::Cycle(path.join(" waits on "))
            }
        }
    }
}

/// Why a member is not a token's to renew or remove.
fn held(group: &str, url: &str, holder: Holder) -> String {
    match holder {
        Holder::Admin => format!(
            "member {url} of executor group `{group}` was defined by an admin \
             (PUT /api/executors/{group}, ax apply): only an admin removes it"
        ),
        Holder::OtherToken => format!(
            "member {url} of executor group `{group}` registered itself with another token: \
             only that token or an admin renews or removes it"
        ),
    }
}

pub(super) type Result<T> = std::result::Result<T, ServiceError>;
