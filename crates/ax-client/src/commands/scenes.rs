//! `ax scenes list|pause|resume`.

use ax_core::ids::SceneName;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{json, Value};

use crate::api::error::ClientError;
use crate::api::http::{request, Call};
use crate::api::output::one_line;
use crate::api::output::{self, Column};
use crate::Connection;

#[derive(Debug, Clone, Subcommand)]
pub enum ScenesCommand {
    /// Every scene with its tasks counted by status, and its pause.
    List,
    /// Pause a scene: none of its tasks fires until it is resumed.
    Pause {
        #[arg(value_parser = scene)]
        scene: SceneName,
    },
    /// Resume a scene: its tasks fire again from now, but those paused one by one.
    Resume {
        #[arg(value_parser = scene)]
        scene: SceneName,
    },
}

/// A scene's name, checked as the API checks it (it goes in a path as it is).
fn scene(text: &str) -> Result<SceneName, String> {
    ax_server::api::validate::scene(text.to_string()).map_err(|err| err.to_string())
}

const SCENE_COLUMNS: &[Column] = &[
    ("SCENE", "scene"),
    ("TASKS", "total"),
    ("ENABLED", "enabled"),
    ("PAUSED", "pausedTasks"),
    ("SCENE PAUSED", "pausedAt"),
];

/// Runs `ax scenes …`.
pub fn scenes(conn: Connection, command: ScenesCommand) -> ExitCode {
    crate::finish(run(conn, command))
}

async fn run(conn: Connection, command: ScenesCommand) -> Result<(), ClientError> {
    let (scene, verb) = match command {
        ScenesCommand::List => {
            let body = request(&conn, &Call::new("GET", "/api/scenes".into()))
                .await?
                .body;
            return output::print(conn.format, &body, |body, _| scenes_table(body));
        }
        ScenesCommand::Pause { scene } => (scene, "pause"),
        ScenesCommand::Resume { scene } => (scene, "resume"),
    };
    let call = Call::new("POST", format!("/api/scenes/{scene}/{verb}"));
    let reply = request(&conn, &call).await?.body;
    one_line(conn.format, &reply, || match verb {
        "pause" => format!("paused scene {scene}: {} tasks stopped", reply["paused"]),
        _ => format!(
            "resumed scene {scene}: {} tasks fire again",
            reply["resumed"]
        ),
    })
}

/// A line per scene, its tasks counted by their own status.
fn scenes_table(body: &Value) -> String {
    let rows: Vec<Value> = output::items(body)
        .iter()
        .map(|scene| {
            let mut row = scene.clone();
            row["enabled"] = json!(scene["tasks"]["ENABLED"].as_i64().unwrap_or(0));
            row["pausedTasks"] = json!(scene["tasks"]["PAUSED"].as_i64().unwrap_or(0));
            if scene["paused"] == json!(true) && scene["pausedAt"].is_null() {
                row["pausedAt"] = json!("yes");
            }
            row
        })
        .collect();
    output::table(SCENE_COLUMNS, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scene_a_line_with_its_counts_and_pause() {
        let body = json!({"items": [
            {"scene": "a", "total": 3, "tasks": {"ENABLED": 2, "PAUSED": 1}, "paused": false,
             "pausedAt": null},
            {"scene": "reports", "total": 0, "tasks": {}, "paused": true,
             "pausedAt": "2027-01-01T00:00:00.000Z"}]});
        assert_eq!(
            scenes_table(&body),
            "SCENE    TASKS  ENABLED  PAUSED  SCENE PAUSED\n\
             a        3      2        1       -\n\
             reports  0      0        0       2027-01-01T00:00:00.000Z\n"
        );
    }
}
