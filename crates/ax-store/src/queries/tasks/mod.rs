//! Task rows: CRUD for the API (`crud`), their upstreams (`upstreams`), pausing tasks and
//! scenes (`pause`, under the scenes' locks of `scene_lock`), the preload window for the
//! scheduler (`preload`) and bulk registration (`register`).

mod crud;
mod pause;
mod preload;
mod register;
mod scene_lock;
mod upstreams;

pub use crud::{
    delete, find, find_many, find_named, insert, list, named, names_in_scene, scene_names, update,
    Conditional, LastInsertId, Versions,
};
pub use pause::{note_pauses, pause, pause_scene, resume, resume_scene, scene_counts};
pub use preload::{due_until, DueCursor};
pub use register::{register, BulkItem, BulkOutcome, BulkProblem, BulkRefusal};
pub use scene_lock::paused_scenes;
pub use upstreams::{all_dependencies, dependencies_of, with_upstreams_known, UpstreamProblem};

use ax_core::ids::SceneName;
use diesel::sql_types::Text;

use crate::rows::models::TaskStatus;

diesel::define_sql_function! {
    /// Where `needle` starts in `haystack` (1-based), 0 if it is not in it; on every store
    /// (on MySQL by the column's binary collation: case counts, as on SQLite; on PostgreSQL a
    /// function of ax's schema over `strpos`).
    fn instr(haystack: Text, needle: Text) -> Integer;
}

/// Filters of a task listing.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    pub scene: Option<SceneName>,
    pub status: Option<TaskStatus>,
    /// Names matching this SQL `LIKE` pattern (`\` escapes).
    pub name_like: Option<String>,
    /// Only tasks with this label (key, value).
    pub label: Option<(String, String)>,
}

/// The tasks matching a [`TaskFilter`] as a boxed query of the connection's backend (a boxed
/// query is tied to one backend: expand it inside a `with_conn!` body).
macro_rules! filtered {
    ($filter:expr) => {{
        let filter: &$crate::queries::tasks::TaskFilter = $filter;
        let mut query = t::ax_task.into_boxed();
        if let Some(scene) = &filter.scene {
            query = query.filter(t::scene.eq(scene.clone()));
        }
        if let Some(status) = filter.status {
            query = query.filter(t::status.eq(status));
        }
        if let Some(pattern) = &filter.name_like {
            query = query.filter(t::name.like(pattern.clone()).escape('\\'));
        }
        if let Some((key, value)) = &filter.label {
            // A scan of the labels column: the stored form holds a label as this text.
            query = query.filter(
                $crate::queries::tasks::instr(
                    t::labels,
                    ax_core::task::labels::Labels::needle(key, value),
                )
                .gt(0),
            );
        }
        query
    }};
}
pub(crate) use filtered;
