use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::*;
use crate::apply::read::{definitions, FileTask};
use crate::apply::upstreams;
use ax_core::security::Allowlist;
use ax_server::api::task_input;

const HANDLER: &str = "http://executor.internal:80/run";

fn body(scene: &str, name: &str, cron: &str) -> Value {
    json!({"name": name, "scene": scene, "cron": cron, "handlerUrl": HANDLER})
}

fn input(name: &str, cron: &str) -> TaskInput {
    task_input(body("s", name, cron), &Allowlist::default()).expect("valid")
}

fn stored_as(tasks: &[(i64, TaskInput)]) -> BTreeMap<Key, (i64, TaskInput)> {
    tasks
        .iter()
        .map(|(id, t)| ((t.scene.to_string(), t.name.clone()), (*id, t.clone())))
        .collect()
}

fn file_tasks(items: &[Value]) -> Vec<FileTask> {
    definitions(items).expect("a valid file")
}

/// The plan of `items` against `stored` (keyed by the tasks themselves).
fn plan_of(items: &[Value], stored: &[(i64, TaskInput)], prune: bool) -> Plan {
    task_plan(&file_tasks(items), &stored_as(stored), prune)
        .expect("resolved")
        .0
}

#[test]
fn the_plan_creates_changes_and_prunes_by_scene_and_name() {
    let stored = [
        (1, input("same", "0 0 1 * * *")),
        (2, input("moved", "0 0 2 * * *")),
        (3, input("gone", "0 0 3 * * *")),
    ];
    let mut retried = body("s", "moved", "0 30 2 * * *");
    retried["maxRetry"] = json!(1);
    let wanted = [
        body("s", "same", "0 0 1 * * *"),
        retried,
        body("s", "new", "0 0 4 * * *"),
    ];
    let plan = plan_of(&wanted, &stored, true);
    assert_eq!(
        plan.lines(),
        [
            "+ s/new",
            r#"~ s/moved: cron "0 0 2 * * *" → "0 30 2 * * *", maxRetry 3 → 1"#,
            "- s/gone"
        ]
    );
    assert_eq!(plan.count(false), "1 created, 1 changed, 1 deleted");
    assert_eq!(
        plan.count(true),
        "1 would be created, 1 would be changed, 1 would be deleted"
    );
    let kept = plan_of(&wanted, &stored, false);
    assert!(kept.delete.is_empty());
    assert_eq!(
        kept.count(false),
        "1 created, 1 changed, 0 deleted; 1 not in the file, kept (--prune deletes them)"
    );
}

#[test]
fn a_definition_the_server_stores_the_same_way_is_unchanged() {
    // The cron is trimmed and the default port dropped, the same way on both sides.
    let stored = [(1, input("a", "0 0 1 * * *"))];
    let plan = plan_of(&[body("s", "a", " 0 0 1 * * * ")], &stored, true);
    assert!(plan.is_empty());
    assert_eq!(plan.no_change(), "no change");
}

#[test]
fn tasks_of_other_scenes_are_neither_pruned_nor_counted() {
    let other = task_input(body("t", "x", "0 0 1 * * *"), &Allowlist::default());
    let stored = [(1, input("a", "0 0 1 * * *")), (2, other.expect("valid"))];
    let plan = plan_of(&[body("s", "a", "0 0 1 * * *")], &stored, true);
    assert!(plan.is_empty(), "{plan:?}");
    assert_eq!(plan_of(&[], &stored, false).kept, 0, "no scene in the file");
}

#[test]
fn upstreams_by_name_match_the_stored_ids() {
    let mut report = input("report", "0 0 2 * * *");
    report.depends_on = vec![ax_core::run::TaskId(1)];
    let stored = [(1, input("extract", "0 0 1 * * *")), (2, report)];
    let mut wanted = vec![
        body("s", "extract", "0 0 1 * * *"),
        body("s", "report", "0 0 2 * * *"),
    ];
    for same in [json!(["extract"]), json!(["s/extract"]), json!([1])] {
        wanted[1]["dependsOn"] = same.clone();
        assert!(plan_of(&wanted, &stored, true).is_empty(), "{same}");
    }
    wanted.push(body("s", "load", "0 0 3 * * *"));
    wanted[1]["dependsOn"] = json!(["extract", "load"]);
    let (plan, upstreams) =
        task_plan(&file_tasks(&wanted), &stored_as(&stored), true).expect("resolved");
    assert_eq!(
        plan.lines(),
        [
            "+ s/load",
            r#"~ s/report: dependsOn ["s/extract"] → ["s/extract","s/load"]"#
        ]
    );
    let creates = BTreeSet::from([("s".to_string(), "load".to_string())]);
    assert_eq!(
        upstreams::layers(&upstreams, &[1, 2], &creates),
        [vec![2], vec![1]],
        "load is created before report waits on it"
    );
}

#[test]
fn an_unknown_upstream_or_a_cycle_names_the_task_and_field() {
    let stored = [(1, input("a", "0 0 1 * * *"))];
    let mut wanted = vec![body("s", "x", "0 0 1 * * *"), body("s", "y", "0 0 1 * * *")];
    wanted[1]["dependsOn"] = json!(["nope"]);
    let err = task_plan(&file_tasks(&wanted), &stored_as(&stored), false)
        .expect_err("unknown")
        .to_string();
    assert!(
        err.contains("items[1].dependsOn") && err.contains("`nope`"),
        "{err}"
    );
    wanted[0]["dependsOn"] = json!(["y"]);
    wanted[1]["dependsOn"] = json!(["s/x"]);
    let err = task_plan(&file_tasks(&wanted), &stored_as(&stored), false)
        .expect_err("a cycle")
        .to_string();
    assert!(err.contains("(field items[0].dependsOn)"), "{err}");
    assert!(err.contains("s/x → s/y → s/x"), "{err}");
    // Through a stored task the file does not have: a waits on x.
    let mut a = input("a", "0 0 1 * * *");
    a.depends_on = vec![ax_core::run::TaskId(2)];
    let stored = [(1, a), (2, input("x", "0 0 1 * * *"))];
    let wanted = [json!({"name": "x", "scene": "s", "cron": "0 0 1 * * *",
        "handlerUrl": HANDLER, "dependsOn": ["a"]})];
    let err = task_plan(&file_tasks(&wanted), &stored_as(&stored), false)
        .expect_err("a cycle through a")
        .to_string();
    assert!(err.contains("s/x → s/a → s/x"), "{err}");
    let bad = [
        json!({"name": "x", "cron": "0 0 1 * * *", "handlerUrl": HANDLER,
        "dependsOn": [true]}),
    ];
    let err = definitions(&bad).expect_err("not an upstream").to_string();
    assert!(err.contains("items[0].dependsOn"), "{err}");
}
