//! A task as a command names it: its id or `scene/name`, and in a `--task` filter also a name
//! alone (when one task in all scenes has it). A name is found with one request
//! (`GET /api/tasks?scene=&name=`).

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::api::error::ClientError;
use crate::api::http::{request, Call};
use crate::Connection;

/// A task named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskRef {
    Id(i64),
    /// `scene/name`, or a name alone (`scene` `None`): scenes hold no `/`, names may.
    Named {
        scene: Option<String>,
        name: String,
    },
}

impl FromStr for TaskRef {
    type Err = String;

    fn from_str(text: &str) -> Result<TaskRef, String> {
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            return match text.parse::<i64>() {
                Ok(id) if id > 0 => Ok(TaskRef::Id(id)),
                _ => Err("expected a task id (a positive number) or SCENE/NAME".into()),
            };
        }
        let (scene, name) = match text.split_once('/') {
            Some((scene, name)) => (Some(scene.to_string()), name),
            None => (None, text),
        };
        if name.is_empty() || scene.as_deref() == Some("") {
            return Err("expected a task id or SCENE/NAME, like reports/nightly".into());
        }
        Ok(TaskRef::Named {
            scene,
            name: name.to_string(),
        })
    }
}

/// A task argument: its id or `SCENE/NAME` (a name alone is too easily a typo of an id).
pub fn id_or_scene_name(text: &str) -> Result<TaskRef, String> {
    match text.parse()? {
        TaskRef::Named { scene: None, name } => Err(format!(
            "expected a task id or SCENE/NAME (default/{name} for a task of the default scene)"
        )),
        task => Ok(task),
    }
}

impl fmt::Display for TaskRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskRef::Id(id) => write!(f, "{id}"),
            TaskRef::Named {
                scene: Some(scene),
                name,
            } => write!(f, "{scene}/{name}"),
            TaskRef::Named { scene: None, name } => f.write_str(name),
        }
    }
}

impl TaskRef {
    /// The task's id: as given, or found by its name.
    pub async fn id(&self, conn: &Connection) -> Result<i64, ClientError> {
        match self {
            TaskRef::Id(id) => Ok(*id),
            TaskRef::Named { .. } => Ok(self.find(conn).await?["id"].as_i64().unwrap_or(0)),
        }
    }

    /// The task (as `GET /api/tasks` lists it) this names.
    pub async fn find(&self, conn: &Connection) -> Result<Value, ClientError> {
        let (scene, name) = match self {
            TaskRef::Id(id) => {
                let call = Call::new("GET", format!("/api/tasks/{id}"));
                return Ok(request(conn, &call).await?.body);
            }
            TaskRef::Named { scene, name } => (scene, name),
        };
        let call = Call::new("GET", "/api/tasks".into())
            .with("scene", scene.clone())
            .with("name", Some(name.clone()))
            .with("limit", Some("500".into()));
        let page = request(conn, &call).await?.body;
        let mut found: Vec<Value> = crate::api::output::items(&page).to_vec();
        match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err(ClientError::Refused {
                status: 404,
                code: "NOT_FOUND".into(),
                message: format!("no task {self}"),
                field: None,
            }),
            _ => Err(ClientError::usage(format!(
                "{name} names {} tasks ({}): give SCENE/NAME or the id",
                found.len(),
                found.iter().map(scene_name).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}

/// `scene/name` of a task as the API shows it.
pub fn scene_name(task: &Value) -> String {
    format!(
        "{}/{}",
        task["scene"].as_str().unwrap_or("?"),
        task["name"].as_str().unwrap_or("?")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_a_scene_and_name_or_a_name() {
        assert_eq!("42".parse(), Ok(TaskRef::Id(42)));
        assert_eq!(
            "reports/nightly/eu".parse(),
            Ok(TaskRef::Named {
                scene: Some("reports".into()),
                name: "nightly/eu".into()
            })
        );
        assert_eq!(
            "nightly".parse(),
            Ok(TaskRef::Named {
                scene: None,
                name: "nightly".into()
            })
        );
        for bad in ["0", "", "/x", "reports/", "99999999999999999999"] {
            assert!(bad.parse::<TaskRef>().is_err(), "{bad}");
        }
        assert!(id_or_scene_name("nightly").is_err());
        assert_eq!(id_or_scene_name("7"), Ok(TaskRef::Id(7)));
    }
}
