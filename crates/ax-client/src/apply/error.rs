//! Why `ax apply`, `ax diff`, `ax export` or `ax executors apply` stopped, and the one rule
//! that turns it into a line on stderr and an exit status: 2 for a bad file or option (nothing
//! was written), the command's own status when the server refused or could not be reached, 1
//! for the rest. The messages name the file, the key and the item in the user's words.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ax_core::calendar::CalendarError;
use ax_core::task::fields;
use ax_core::text::yaml;
use ax_core::EXIT_USAGE;
use ax_server::error::ApiError;

use super::section::Section;
use super::upstreams::UpstreamError;
use crate::api::error::ClientError;

/// Why a task-file command failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Nested deeper than [`yaml::MAX_DEPTH`], first at `line`.
    #[error(
        "{}:{line}: nested deeper than {} levels; a file of tasks is not read that deep",
        path.display(),
        yaml::MAX_DEPTH
    )]
    TooDeep { path: PathBuf, line: u64 },
    #[error("{} is not YAML or JSON: {source}", path.display())]
    NotYaml { path: PathBuf, source: yaml::Error },
    /// A problem of a file's layout (its sections, scenes, groups or calendars), named with the
    /// file.
    #[error("{}: {problem}", path.display())]
    InFile {
        path: PathBuf,
        problem: Box<ApplyError>,
    },
    #[error("expected a list of tasks, or {{calendars, executors, scenes, tasks}}")]
    NotTasks,
    #[error("expected a list of executor groups, or {{executors: [...]}}")]
    NotGroups,
    /// A top-level key that is none of `known`.
    #[error("unknown key `{key}` (a file has {})", known.join(", "))]
    UnknownKey {
        key: String,
        known: &'static [&'static str],
    },
    #[error("`tasks` must be a list")]
    TasksNotAList,
    #[error("`scenes` must map scene names to {{paused: true|false}}")]
    ScenesNotAMap,
    /// A scene name the API refuses.
    #[error("scenes.{scene}: {source}")]
    SceneRefused { scene: String, source: ApiError },
    #[error("scenes.{scene}.paused must be true or false")]
    PauseNotABool { scene: String },
    /// A section of groups or calendars that is no list.
    #[error("`{}` must be a list of {}s", section.key, section.item)]
    NotAList { section: &'static Section },
    #[error("{}[{index}]: a {} is {}", section.key, section.item, section.shape)]
    NotAMapping {
        section: &'static Section,
        index: usize,
    },
    #[error("{}[{index}].name: name is required: the {}'s name", section.key, section.item)]
    Unnamed {
        section: &'static Section,
        index: usize,
    },
    #[error("{}[{index}]: the same name as {}[{first}]", section.key, section.key)]
    Twice {
        section: &'static Section,
        index: usize,
        first: usize,
    },
    /// A key of a group or calendar that the API refuses (`?` when it names none).
    #[error("{}[{index}].{key}: {source}", section.key)]
    Refused {
        section: &'static Section,
        index: usize,
        key: String,
        source: ApiError,
    },
    /// A task of the file refused as the API refuses it, its error already naming `items[n]`.
    #[error("{}", refusal_text(.0))]
    TaskRefused(ApiError),
    #[error("items[{index}]: the same scene and name as items[{first}]")]
    TaskTwice { index: usize, first: usize },
    /// The `dependsOn` of the file's task at `index`, worded as the other refusals of a task.
    #[error("{}", upstreams_text(*index, problem))]
    Upstreams {
        index: usize,
        problem: UpstreamError,
    },
    #[error(
        "--prune would delete {deletes} tasks: pass --yes to delete them (no terminal to ask \
         on); nothing changed"
    )]
    PruneWithoutYes { deletes: usize },
    #[error("not confirmed; nothing changed")]
    Declined,
    /// A request that found no server or was refused.
    #[error("{0}")]
    Server(#[from] ClientError),
    #[error("stored group {name} has an unknown routing `{routing}`")]
    StoredRouting { name: String, routing: String },
    #[error("stored calendar {name} reads back invalid: {source}")]
    StoredCalendar { name: String, source: CalendarError },
    #[error("stored task {id} reads back invalid: {source}")]
    StoredInvalid { id: i64, source: ApiError },
    /// An upstream created by this apply whose id could not be read back.
    #[error("upstream {upstream} has no id: it was not created")]
    NotCreated { upstream: String },
    /// The exported file could not be written as text: the encoder's words.
    #[error("{0}")]
    Unwritable(String),
}

impl ApplyError {
    /// This problem of a file's layout, named with the file.
    pub fn in_file(self, path: &Path) -> ApplyError {
        ApplyError::InFile {
            path: path.to_path_buf(),
            problem: Box::new(self),
        }
    }

    /// The exit status: 2 for a bad file or option, `server` (the command's) when the server
    /// failed or answered what could not be used, 1 when the user declined or the export
    /// could not be written.
    pub fn exit_code(&self, server: u8) -> u8 {
        use ApplyError::*;
        match self {
            Server(_)
            | StoredRouting { .. }
            | StoredCalendar { .. }
            | StoredInvalid { .. }
            | NotCreated { .. } => server,
            Declined | Unwritable(_) => 1,
            Unreadable { .. }
            | TooDeep { .. }
            | NotYaml { .. }
            | InFile { .. }
            | NotTasks
            | NotGroups
            | UnknownKey { .. }
            | TasksNotAList
            | ScenesNotAMap
            | SceneRefused { .. }
            | PauseNotABool { .. }
            | NotAList { .. }
            | NotAMapping { .. }
            | Unnamed { .. }
            | Twice { .. }
            | Refused { .. }
            | TaskRefused(_)
            | TaskTwice { .. }
            | Upstreams { .. }
            | PruneWithoutYes { .. } => EXIT_USAGE,
        }
    }

    /// Ends `command`: `COMMAND: message` on stderr, and the exit status (see `exit_code`).
    pub fn report(self, command: &str, server: u8) -> ExitCode {
        eprintln!("{command}: {self}");
        ExitCode::from(self.exit_code(server))
    }
}

/// A task of the file refused, as `ax apply` says it: each field refused, with its message.
fn refusal_text(err: &ApiError) -> String {
    let fields = err.field_errors();
    if fields.is_empty() {
        return format!("{err} (field ?)");
    }
    let each: Vec<String> = fields
        .iter()
        .map(|refused| format!("{} (field {})", refused.message, refused.field))
        .collect();
    each.join("; ")
}

/// A problem of the `dependsOn` of the file's `index`th task, as the API would refuse it.
fn upstreams_text(index: usize, problem: &UpstreamError) -> String {
    refusal_text(&ApiError::invalid(fields::DEPENDS_ON.name, problem.to_string()).in_item(index))
}
