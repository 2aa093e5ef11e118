//! A task dispatched to an executor group rather than to one handler URL: the group, the path
//! on its members, and a routing of its own over the group's. Stored as JSON text in the
//! task's `executor` column (NULL for a task with a handler URL).

use crate::ids::GroupName;
use diesel::sql_types::Text;
use serde::{Deserialize, Serialize};

use crate::dispatch::routing::Routing;

#[derive(
    Debug,
    Clone,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    diesel::expression::AsExpression,
    diesel::deserialize::FromSqlRow,
)]
#[diesel(sql_type = Text)]
#[serde(deny_unknown_fields)]
pub struct TaskExecutor {
    pub group: GroupName,
    /// Joined to a member's base URL (`crate::dispatch::routing::member_url`).
    #[serde(default)]
    pub path: String,
    /// Overrides the group's routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
}

impl TaskExecutor {
    fn to_text(&self) -> String {
        // A struct of strings and a unit enum always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }
}

crate::json_text!(TaskExecutor, "executor");
