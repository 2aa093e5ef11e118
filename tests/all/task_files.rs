//! Task files that travel (`ax_client::apply`): `dependsOn` by `scene/name`, `ax export`
//! without defaults in a fixed key order, applied to another ax whose ids differ; `ax apply`'s
//! change lines and count, `--prune`'s consent, and `ax diff`'s exit status; a file's
//! calendars, written before the tasks that name them. The `ax` binary is run as a process
//! against `ax serve` processes.

use std::path::Path;
use std::process::{Output, Stdio};

use chrono::{Datelike, Weekday};
use serde_json::{json, Value};

use crate::common::{Api, AxProcess, TestStore};

/// Runs `ax ARGS --url URL`, isolated from the developer's `AX_…` variables, with no
/// terminal on stdin.
fn ax(url: &str, args: &[&str]) -> Output {
    let mut command = crate::common::ax_command();
    command
        .args(args)
        .args(["--url", url])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    command.output().expect("run ax")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The output of a command that exits `code`.
fn exits(output: &Output, code: i32) -> String {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout {:?} stderr {:?}",
        stdout(output),
        stderr(output)
    );
    stdout(output)
}

fn lines(output: &Output) -> Vec<String> {
    exits(output, 0).lines().map(str::to_string).collect()
}

fn write(path: &Path, text: &str) -> String {
    std::fs::write(path, text).expect("write the file");
    path.display().to_string()
}

async fn start(dir: &Path, name: &str) -> (AxProcess, TestStore) {
    let store = TestStore::sqlite();
    let env = vec![("AX_STORE_URL".to_string(), store.url())];
    (AxProcess::start(dir, name, env).await, store)
}

/// Every task of the ax at `api`, by `scene/name`: its id and view.
async fn tasks_by_name(api: &Api) -> Vec<(String, i64, Value)> {
    let (_, page) = api.get("/api/tasks?limit=500").await;
    let mut tasks: Vec<(String, i64, Value)> = page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|task| {
            let text = |key: &str| task[key].as_str().unwrap_or_default().to_string();
            let name = format!("{}/{}", text("scene"), text("name"));
            (name, task["id"].as_i64().unwrap_or_default(), task.clone())
        })
        .collect();
    tasks.sort_by(|a, b| a.0.cmp(&b.0));
    tasks
}

/// A task's upstreams by `scene/name`.
fn upstream_names(tasks: &[(String, i64, Value)], name: &str) -> Vec<String> {
    let (_, _, task) = tasks.iter().find(|t| t.0 == name).expect("the task");
    let mut names: Vec<String> = task["dependsOn"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|id| tasks.iter().find(|t| json!(t.1) == *id))
        .map(|t| t.0.clone())
        .collect();
    names.sort();
    names
}

const FILE: &str = "\
- name: report
  scene: reports
  cron: '0 0 6 * * *'
  handlerUrl: 'http://127.0.0.1:9/report'
  dependsOn: [etl/load, etl/extract]
- name: load
  scene: etl
  cron: '0 0 5 * * *'
  timeZone: UTC
  handlerUrl: 'http://127.0.0.1:9/load'
  maxRetry: 3
  dependsOn: [extract]
- name: extract
  scene: etl
  cron: '0 0 4 * * *'
  handlerUrl: 'http://127.0.0.1:9/extract'
  maxRetry: 1
  params: {source: s3}
";

/// A file applied to one ax with upstreams by name, exported, and applied to a second ax
/// whose ids differ: the same tasks and dependencies by name; applied again, no change; the
/// second ax exports the same file.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_file_travels_to_another_ax_by_names() {
    let dir = tempfile::tempdir().expect("dir");
    let (first, _first_store) = start(dir.path(), "first").await;
    let (second, _second_store) = start(dir.path(), "second").await;
    let (one, two) = (first.base(), second.base());
    let file = write(&dir.path().join("tasks.yaml"), FILE);

    // Upstreams named in the file are created before the tasks that wait on them.
    assert_eq!(
        lines(&ax(&one, &["apply", "-f", &file])),
        [
            "+ reports/report",
            "+ etl/load",
            "+ etl/extract",
            "3 created, 0 changed, 0 deleted"
        ]
    );
    let first_tasks = tasks_by_name(&Api::at(one.clone())).await;
    assert_eq!(
        upstream_names(&first_tasks, "reports/report"),
        ["etl/extract", "etl/load"]
    );
    assert_eq!(upstream_names(&first_tasks, "etl/load"), ["etl/extract"]);
    assert_eq!(lines(&ax(&one, &["apply", "-f", &file])), ["no change"]);

    // Export: defaults left out, keys in a fixed order, upstreams by scene/name.
    let exported = exits(&ax(&one, &["export"]), 0);
    assert!(
        exported.starts_with(
            "- name: extract\n  scene: etl\n  cron: 0 0 4 * * *\n  handlerUrl: http://127.0.0.1:9/extract\n  params:\n    source: s3\n  maxRetry: 1\n"
        ),
        "{exported}"
    );
    assert!(
        exported.contains("  dependsOn:\n  - etl/extract\n  - etl/load\n"),
        "{exported}"
    );
    for default in [
        "maxRetry: 3",
        "timeZone",
        "enabled",
        "overlap",
        "jitterSecs",
        "labels",
    ] {
        assert!(!exported.contains(default), "{default}: {exported}");
    }
    // Upstreams of another scene are named too, though not exported.
    let reports = exits(&ax(&one, &["export", "--scene", "reports"]), 0);
    assert!(
        reports.ends_with("  dependsOn:\n  - etl/extract\n  - etl/load\n"),
        "{reports}"
    );
    let json_text = exits(&ax(&one, &["export", "--json"]), 0);
    let json_file: Value = serde_json::from_str(&json_text).expect("JSON");
    assert_eq!(
        json_file[1]["dependsOn"],
        json!(["etl/extract"]),
        "{json_text}"
    );
    let order: Vec<usize> = [
        "\"name\"",
        "\"scene\"",
        "\"cron\"",
        "\"handlerUrl\"",
        "\"params\"",
    ]
    .iter()
    .filter_map(|key| json_text.find(key))
    .collect();
    assert!(order.len() == 5 && order.is_sorted(), "{json_text}");

    // The second ax has other tasks first: other ids.
    let api = Api::at(two.clone());
    for n in 0..5 {
        api.create_task(json!({"name": format!("unrelated-{n}"), "scene": "other",
            "cron": "0 0 1 * * *", "handlerUrl": "http://127.0.0.1:9/x"}))
            .await;
    }
    let exported_path = write(&dir.path().join("exported.yaml"), &exported);
    assert_eq!(
        exits(&ax(&two, &["diff", "-f", &exported_path]), 1),
        "+ etl/extract\n+ etl/load\n+ reports/report\n"
    );
    assert_eq!(
        lines(&ax(&two, &["apply", "-f", &exported_path]))
            .last()
            .map(String::as_str),
        Some("3 created, 0 changed, 0 deleted")
    );
    let second_tasks = tasks_by_name(&api).await;
    assert_eq!(
        upstream_names(&second_tasks, "reports/report"),
        ["etl/extract", "etl/load"]
    );
    assert_eq!(upstream_names(&second_tasks, "etl/load"), ["etl/extract"]);
    let id_of = |tasks: &[(String, i64, Value)], name: &str| {
        tasks.iter().find(|t| t.0 == name).map(|t| t.1)
    };
    assert_ne!(
        id_of(&first_tasks, "etl/extract"),
        id_of(&second_tasks, "etl/extract"),
        "the ids differ"
    );
    assert_eq!(
        lines(&ax(&two, &["apply", "-f", &exported_path])),
        ["no change"]
    );
    assert_eq!(exits(&ax(&two, &["diff", "-f", &exported_path]), 0), "");
    assert_eq!(
        exits(&ax(&two, &["export", "--scene", "etl"]), 0),
        exits(&ax(&one, &["export", "--scene", "etl"]), 0),
        "the same file from either ax"
    );
    first.terminate().await;
    second.terminate().await;
}

/// `ax apply` prints each change old → new and a count; `ax diff` exits 1 on differences;
/// `--prune` deletes only with `--yes` off a terminal, and without it writes nothing at all.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn apply_shows_changes_and_prunes_only_when_told_to() {
    let dir = tempfile::tempdir().expect("dir");
    let (process, _store) = start(dir.path(), "changes").await;
    let url = process.base();
    let path = dir.path().join("tasks.yaml");
    let task = |name: &str, extra: &str| {
        format!("- {{name: {name}, scene: etl, cron: '0 0 1 * * *', handlerUrl: 'http://127.0.0.1:9/run'{extra}}}\n")
    };
    let file = write(
        &path,
        &[task("a", ", maxRetry: 1"), task("b", ""), task("c", "")].concat(),
    );
    assert_eq!(
        lines(&ax(&url, &["apply", "-f", &file]))
            .last()
            .map(String::as_str),
        Some("3 created, 0 changed, 0 deleted")
    );

    let long = "x".repeat(80);
    write(
        &path,
        &[
            task("a", ", maxRetry: 2"),
            task("b", &format!(", params: {{note: {long}}}")),
        ]
        .concat(),
    );
    let a_line = "~ etl/a: maxRetry 1 → 2";
    let b_line = format!(
        "~ etl/b: params {{}} → {{\"note\":\"{}…",
        "x".repeat(40 - "{\"note\":\"".len() - 1)
    );
    assert_eq!(
        exits(&ax(&url, &["diff", "-f", &file]), 1),
        format!("{a_line}\n{b_line}\n")
    );
    assert_eq!(
        exits(&ax(&url, &["diff", "-f", &file, "--prune"]), 1),
        format!("{a_line}\n{b_line}\n- etl/c\n")
    );
    let kept = "; 1 not in the file, kept (--prune deletes them)";
    assert_eq!(
        lines(&ax(&url, &["apply", "-f", &file, "--dry-run"])),
        [
            a_line.to_string(),
            b_line.clone(),
            format!("0 would be created, 2 would be changed, 0 would be deleted{kept}")
        ]
    );
    assert_eq!(
        lines(&ax(&url, &["apply", "-f", &file])),
        [
            a_line.to_string(),
            b_line,
            format!("0 created, 2 changed, 0 deleted{kept}")
        ]
    );
    assert_eq!(
        lines(&ax(&url, &["apply", "-f", &file])),
        [format!("no change{kept}")]
    );

    // --prune without a terminal and without --yes: nothing written, not even the create.
    write(&path, &[task("a", ", maxRetry: 2"), task("d", "")].concat());
    let refused = ax(&url, &["apply", "-f", &file, "--prune"]);
    exits(&refused, 2);
    assert!(stderr(&refused).contains("--yes"), "{}", stderr(&refused));
    let api = Api::at(url.clone());
    let names = |tasks: Vec<(String, i64, Value)>| -> Vec<String> {
        tasks.into_iter().map(|t| t.0).collect()
    };
    assert_eq!(
        names(tasks_by_name(&api).await),
        ["etl/a", "etl/b", "etl/c"],
        "nothing changed"
    );
    assert_eq!(
        lines(&ax(&url, &["apply", "-f", &file, "--prune", "--yes"])),
        [
            "+ etl/d",
            "- etl/b",
            "- etl/c",
            "1 created, 0 changed, 2 deleted"
        ]
    );
    assert_eq!(names(tasks_by_name(&api).await), ["etl/a", "etl/d"]);
    assert_eq!(exits(&ax(&url, &["diff", "-f", &file, "--prune"]), 0), "");

    // An unknown upstream or a cycle: exit 2 naming the task's dependsOn, nothing written.
    let unknown = write(
        &path,
        &[task("e", ""), task("a", ", dependsOn: [nope]")].concat(),
    );
    for command in ["apply", "diff"] {
        let refused = ax(&url, &[command, "-f", &unknown]);
        exits(&refused, 2);
        assert!(
            stderr(&refused).contains("items[1].dependsOn"),
            "{}",
            stderr(&refused)
        );
    }
    let cycle = write(
        &path,
        &[
            task("e", ", dependsOn: [a]"),
            task("a", ", dependsOn: [etl/e]"),
        ]
        .concat(),
    );
    let refused = ax(&url, &["apply", "-f", &cycle]);
    exits(&refused, 2);
    assert!(
        stderr(&refused).contains("items[0].dependsOn") && stderr(&refused).contains("cycle"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(names(tasks_by_name(&api).await), ["etl/a", "etl/d"]);

    // `ax diff`: 2 for a bad file, 3 when the server cannot be reached.
    let bad = write(&path, "- {name: x}\n");
    exits(&ax(&url, &["diff", "-f", &bad]), 2);
    let fine = write(&path, &task("a", ""));
    process.terminate().await;
    exits(&ax(&url, &["diff", "-f", &fine]), 3);
}

/// A file of a calendar and a task that names it: all but one weekday off (`weekdays`), the
/// task at 04:00 UTC every day.
fn calendar_file(weekdays: &str) -> String {
    format!(
        "calendars:\n\
         - name: closed\n  dates: [2030-12-25]\n  weekdays: [{weekdays}]\n\
         tasks:\n\
         - name: nightly\n  scene: ops\n  cron: '0 0 4 * * *'\n  timeZone: UTC\n\
         \x20 handlerUrl: 'http://127.0.0.1:9/run'\n  calendars: {{exclude: [closed]}}\n"
    )
}

/// The weekday of the only task's next run.
async fn next_run_day(api: &Api) -> Weekday {
    let tasks = tasks_by_name(api).await;
    let next = tasks[0].2["nextRunAt"].as_str().unwrap_or_default();
    chrono::DateTime::parse_from_rfc3339(next)
        .unwrap_or_else(|err| panic!("a next run ({err}): {tasks:?}"))
        .weekday()
}

/// A file's calendar is created before the task that names it, in one apply; applied again,
/// no change; its days changed, it is replaced and the task's next run moves onto its open
/// day; `ax diff` exits 1 then 0; `--prune` never deletes a calendar; `ax export` writes the
/// calendar its task names, and the export applied back changes nothing.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_files_calendars_are_written_before_its_tasks() {
    let dir = tempfile::tempdir().expect("dir");
    let (process, _store) = start(dir.path(), "calendars").await;
    let url = process.base();
    let api = Api::at(url.clone());
    let path = dir.path().join("tasks.yaml");
    let file = write(&path, &calendar_file("MON, TUE, WED, THU, FRI, SAT"));

    assert_eq!(
        exits(&ax(&url, &["diff", "-f", &file]), 1),
        "+ calendar closed\n+ ops/nightly\n"
    );
    assert_eq!(
        lines(&ax(&url, &["apply", "-f", &file])),
        [
            "+ calendar closed",
            "+ ops/nightly",
            "1 created, 0 changed, 0 deleted; calendars: 1 created, 0 replaced"
        ]
    );
    assert_eq!(next_run_day(&api).await, Weekday::Sun, "only Sundays open");
    assert_eq!(lines(&ax(&url, &["apply", "-f", &file])), ["no change"]);
    assert_eq!(exits(&ax(&url, &["diff", "-f", &file]), 0), "");

    // Sunday off instead of Saturday: the calendar replaced, the task's next run moved.
    write(&path, &calendar_file("SUN, MON, TUE, WED, THU, FRI"));
    assert_eq!(
        exits(&ax(&url, &["diff", "-f", &file]), 1),
        "~ calendar closed (weekdays)\n"
    );
    assert_eq!(
        lines(&ax(&url, &["apply", "-f", &file])),
        [
            "~ calendar closed (weekdays)",
            "0 created, 0 changed, 0 deleted; calendars: 0 created, 1 replaced"
        ]
    );
    assert_eq!(
        next_run_day(&api).await,
        Weekday::Sat,
        "only Saturdays open"
    );
    assert_eq!(exits(&ax(&url, &["diff", "-f", &file]), 0), "");
    let (_, closed) = api.get("/api/calendars/closed").await;
    assert_eq!(closed["dates"], json!(["2030-12-25"]), "{closed}");
    assert_eq!(closed["taskCount"], 1, "{closed}");

    // A file without the calendar, with --prune: tasks only are pruned, never calendars.
    let tasks_only = calendar_file("SAT");
    let tasks_only = &tasks_only[tasks_only.find("tasks:").expect("tasks")..];
    let pruned = write(&dir.path().join("tasks-only.yaml"), tasks_only);
    assert_eq!(
        lines(&ax(&url, &["apply", "-f", &pruned, "--prune", "--yes"])),
        ["no change"]
    );
    let (status, _) = api.get("/api/calendars/closed").await;
    assert_eq!(status, 200, "kept");

    // Export writes the calendar the task names, before the tasks; applied back, no change.
    let exported = exits(&ax(&url, &["export", "--scene", "ops"]), 0);
    assert!(
        exported.starts_with("calendars:\n- name: closed\n  dates:\n  - ")
            && exported.contains("2030-12-25")
            && exported.contains("\n  weekdays:\n  - MON\n"),
        "{exported}"
    );
    assert!(
        exported.contains("\ntasks:\n- name: nightly\n"),
        "{exported}"
    );
    let exported_path = write(&dir.path().join("exported.yaml"), &exported);
    assert_eq!(exits(&ax(&url, &["diff", "-f", &exported_path]), 0), "");
    assert_eq!(
        lines(&ax(&url, &["apply", "-f", &exported_path])),
        ["no change"]
    );

    // A bad calendar: exit 2 naming its index and key, nothing written.
    let bad = write(&path, &calendar_file("SAT, SOON"));
    for command in ["apply", "diff"] {
        let refused = ax(&url, &[command, "-f", &bad]);
        exits(&refused, 2);
        assert!(
            stderr(&refused).contains("calendars[0].weekdays[1]: must be a weekday"),
            "{}",
            stderr(&refused)
        );
    }
    assert_eq!(next_run_day(&api).await, Weekday::Sat, "unchanged");
    process.terminate().await;
}
