//! `ax tasks create` and `ax tasks edit`: a task as a file entry of `ax apply` (read and
//! written by `src/apply.rs`, so the three agree on its shape).

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;
use serde_json::{json, Value};

use crate::api::error::ClientError;
use crate::api::http::{request, Call};
use crate::api::output::one_line;
use crate::commands::flags;
use crate::commands::task_ref::{scene_name, TaskRef};
use crate::Connection;

/// `ax tasks create`: `-f FILE`, or the flags of one task.
#[derive(Debug, Clone, Args)]
pub struct CreateArgs {
    /// A YAML or JSON file holding one task (a mapping, or a list of one).
    #[arg(short = 'f', long = "file", conflicts_with_all = ["name", "scene", "cron", "handler", "executor", "tz", "params"])]
    pub file: Option<PathBuf>,
    #[arg(long, required_unless_present = "file")]
    pub name: Option<String>,
    /// Its scene (default `default`).
    #[arg(long)]
    pub scene: Option<String>,
    /// Its schedule: 6 fields `sec min hour day month weekday` (or 5), or a macro.
    #[arg(long, required_unless_present = "file")]
    pub cron: Option<String>,
    /// The URL its runs are sent to.
    #[arg(long, required_unless_present_any = ["file", "executor"], conflicts_with = "executor")]
    pub handler: Option<String>,
    /// The executor group its runs are sent to instead, and the path on the group's members:
    /// GROUP or GROUP:PATH (billing:/jobs/charge).
    #[arg(long, value_name = "GROUP[:PATH]", value_parser = flags::executor)]
    pub executor: Option<Value>,
    /// The IANA time zone its cron fields match in (default UTC).
    #[arg(long)]
    pub tz: Option<String>,
    /// Its params: a JSON object.
    #[arg(long, value_parser = flags::json_object)]
    pub params: Option<Value>,
}

/// Creates a task from `-f FILE` or from the flags: one line with its id.
pub async fn create(conn: &Connection, args: CreateArgs) -> Result<(), ClientError> {
    let body = match &args.file {
        Some(path) => one_task(path)?,
        None => from_flags(args),
    };
    let call = Call::new("POST", "/api/tasks".into()).body(body);
    let task = request(conn, &call).await?.body;
    one_line(conn.format, &task, || {
        format!(
            "created task {} (id {})",
            scene_name(&task),
            output_id(&task)
        )
    })
}

/// The one task of a file: a mapping, or a list of one.
fn one_task(path: &Path) -> Result<Value, ClientError> {
    let file = crate::apply::read_yaml(path).map_err(|err| ClientError::usage(err.to_string()))?;
    match file {
        Value::Array(mut items) if items.len() == 1 => Ok(items.remove(0)),
        Value::Object(task) if !task.contains_key("tasks") && !task.contains_key("executors") => {
            Ok(Value::Object(task))
        }
        _ => Err(ClientError::usage(format!(
            "{}: expected one task (a mapping, or a list of one); `ax apply -f` takes a file of \
             several",
            path.display()
        ))),
    }
}

/// A task body from `--name --scene --cron --handler|--executor --tz --params`.
fn from_flags(args: CreateArgs) -> Value {
    let mut body = json!({
        "name": args.name,
        "cron": args.cron,
    });
    for (key, value) in [
        ("handlerUrl", args.handler.map(Value::from)),
        ("executor", args.executor),
        ("scene", args.scene.map(Value::from)),
        ("timeZone", args.tz.map(Value::from)),
        ("params", args.params),
    ] {
        if let Some(value) = value {
            body[key] = value;
        }
    }
    body
}

fn output_id(task: &Value) -> String {
    crate::api::output::text(&task["id"])
}

/// Opens the task in the editor as YAML and saves what was changed, only onto the version
/// that was opened: a task changed meanwhile is refused, the edit kept in its file.
pub async fn edit(conn: &Connection, task: &TaskRef) -> Result<(), ClientError> {
    let id = task.id(conn).await?;
    let reply = request(conn, &Call::new("GET", format!("/api/tasks/{id}"))).await?;
    let named = scene_name(&reply.body);
    let version = reply
        .etag
        .unwrap_or_else(|| format!("\"{}\"", reply.body["version"]));
    let entry = crate::apply::edit_entry(reply.body);
    let mut file = EditFile::write(id, &entry)?;
    run_editor(&file.path)?;
    let edited = crate::apply::read_yaml(&file.path).map_err(|message| {
        ClientError::Usage(format!("{message} (your edit is kept in that file)"))
    });
    let edited = file.keep_on_error(edited)?;
    if serde_json::to_value(&entry).ok().as_ref() == Some(&edited) {
        println!("no change");
        return Ok(());
    }
    let call = Call::new("PUT", format!("/api/tasks/{id}"))
        .if_match(version.clone())
        .body(edited);
    let saved = match request(conn, &call).await {
        Err(ClientError::Refused { status: 412, .. }) => Err(ClientError::Failed(format!(
            "task {named} (id {id}) was changed by someone else while you edited it (you \
             opened version {version}); nothing saved: your edit is in {}, run `ax tasks edit` \
             again",
            file.path.display()
        ))),
        other => other
            .map_err(|err| with_note(err, &format!("; your edit is in {}", file.path.display()))),
    };
    let saved = file.keep_on_error(saved)?.body;
    one_line(conn.format, &saved, || {
        format!("saved task {} (id {id})", scene_name(&saved))
    })
}

/// The error with a note after its message.
fn with_note(err: ClientError, note: &str) -> ClientError {
    match err {
        ClientError::Refused {
            status,
            code,
            message,
            field,
        } => ClientError::Refused {
            status,
            code,
            message: format!("{message}{note}"),
            field,
        },
        ClientError::Usage(message) => ClientError::Usage(format!("{message}{note}")),
        ClientError::Failed(message) => ClientError::Failed(format!("{message}{note}")),
        unreachable @ ClientError::Unreachable { .. } => unreachable,
    }
}

/// Runs `$EDITOR` (else `$VISUAL`, else `vi`) on the file, through the shell, so the editor
/// may be given with its options (`code --wait`).
fn run_editor(path: &Path) -> Result<(), ClientError> {
    let editor = ["EDITOR", "VISUAL"]
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .find(|value| !value.trim().is_empty())
        .unwrap_or_else(|| "vi".into());
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(path)
        .status()
        .map_err(|err| ClientError::Failed(format!("cannot run the editor `{editor}`: {err}")))?;
    match status.success() {
        true => Ok(()),
        false => Err(ClientError::Failed(format!(
            "the editor `{editor}` failed ({status}); nothing saved"
        ))),
    }
}

/// The temporary file of an edit: removed when done, kept when the edit could not be saved.
struct EditFile {
    path: PathBuf,
    keep: bool,
}

impl EditFile {
    fn write(id: i64, entry: &impl serde::Serialize) -> Result<EditFile, ClientError> {
        let failed = |err: String| ClientError::Failed(format!("cannot write the task: {err}"));
        let text = ax_core::text::yaml::to_string(entry).map_err(|err| failed(err.to_string()))?;
        let name = format!("ax-task-{id}-{}.yaml", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, text).map_err(|err| failed(format!("{}: {err}", path.display())))?;
        Ok(EditFile { path, keep: false })
    }

    /// Passes `result` on, keeping the file when it is an error.
    fn keep_on_error<T>(&mut self, result: Result<T, ClientError>) -> Result<T, ClientError> {
        self.keep = result.is_err();
        result
    }
}

impl Drop for EditFile {
    fn drop(&mut self) {
        if !self.keep {
            // A temporary file left behind is harmless; nothing to report.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
