use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::apply::calendars::{calendar_changes, calendar_entries};
use crate::apply::groups::group_entries;
use crate::apply::plan::{scene_changes, task_plan, Plan};
use crate::apply::read::{definitions, scene_pauses};
use ax_core::security::Allowlist;
use ax_server::api::task_input;
use ax_server::service::task_input::TaskInput;

const HANDLER: &str = "http://executor.internal:80/run";

fn yaml(file: &ExportFile) -> String {
    yaml::to_string(file).expect("YAML")
}

#[test]
fn export_writes_the_fields_in_order_without_defaults() {
    let view = json!({"id": 3, "name": "a", "scene": "s", "cron": "* * * * * *",
        "timeZone": "UTC", "handlerUrl": "http://h/", "executor": null, "params": {},
        "maxRetry": 3, "retryFactor": null, "jitterSecs": 5, "labels": {"team": "x"},
        "dependsOn": [], "overlap": "ALLOW", "enabled": true, "status": "ENABLED",
        "nextRunAt": "2027-01-01T00:00:00.000Z"});
    let entry = file_entry(view, &Directory::default());
    let keys: Vec<&str> = entry.0.iter().map(|(key, _)| *key).collect();
    assert_eq!(
        keys,
        [
            "name",
            "scene",
            "cron",
            "handlerUrl",
            "jitterSecs",
            "labels"
        ]
    );
    let text = yaml(&ExportFile::List(vec![entry.clone()]));
    assert!(
        text.starts_with("- name: a\n  scene: s\n  cron: \"* * * * * *\"\n  handlerUrl:"),
        "{text}"
    );
    let json = serde_json::to_string_pretty(&ExportFile::List(vec![entry])).expect("JSON");
    let order = [
        "\"name\"",
        "\"scene\"",
        "\"cron\"",
        "\"handlerUrl\"",
        "\"jitterSecs\"",
    ];
    let at: Vec<usize> = order.iter().filter_map(|key| json.find(key)).collect();
    assert!(at.len() == order.len() && at.is_sorted(), "{json}");
}

#[test]
fn export_names_upstreams_by_scene_and_name() {
    let keys = [
        (("s".to_string(), "a".to_string()), 7),
        (("t".into(), "b".into()), 9),
    ];
    let directory = Directory::new(keys.iter().map(|(key, id)| (key, *id)), []);
    let view = json!({"name": "c", "scene": "s", "cron": "* * * * * *",
        "handlerUrl": "http://h/", "dependsOn": [7, 9, 11]});
    let entry = file_entry(view, &directory);
    assert_eq!(entry.get("dependsOn"), Some(&json!(["s/a", "t/b", 11])));
}

#[test]
fn groups_export_without_defaults_or_registered_members_and_read_back() {
    let shown = json!({"name": "billing", "routing": "BROADCAST", "maxInFlight": 64,
        "members": [{"url": "http://127.0.0.1:9000/", "registered": false},
                    {"url": "http://127.0.0.1:9001/", "registered": true}]});
    let entry = group_entry("billing", &shown);
    assert_eq!(
        entry.0,
        [
            ("name", json!("billing")),
            ("routing", json!("BROADCAST")),
            ("members", json!(["http://127.0.0.1:9000/"]))
        ]
    );
    let plain = json!({"routing": "ROUND_ROBIN", "maxInFlight": 8, "members": []});
    assert_eq!(
        group_entry("g", &plain).0,
        [("name", json!("g")), ("maxInFlight", json!(8))]
    );
    let task = Ordered(vec![("name", json!("a")), ("cron", json!("* * * * * *"))]);
    let named = Named {
        executors: vec![entry],
        ..Named::default()
    };
    let file = export_file(vec![task], named, &BTreeSet::new());
    let text = yaml(&file);
    assert!(text.starts_with("executors:\n- name: billing\n"), "{text}");
    let file: Value = yaml::from_str(&text).expect("reads back");
    assert_eq!(file["tasks"], json!([{"name": "a", "cron": "* * * * * *"}]));
    let groups = group_entries(Some(file["executors"].clone())).expect("read back");
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].name, "billing");
}

#[test]
fn calendars_export_their_days_after_the_groups_and_read_back_as_no_change() {
    let shown = json!({"name": "holidays", "dates": ["2026-12-25", "2026-12-26"],
        "ranges": [{"from": "2027-08-01", "to": "2027-08-14"}], "weekdays": [],
        "taskCount": 1, "updatedAt": "2027-01-01T00:00:00.000Z",
        "tasks": [{"id": 3, "scene": "s", "name": "a"}]});
    let entry = calendar_entry("holidays", &shown);
    assert_eq!(
        entry.0,
        [
            ("name", json!("holidays")),
            ("dates", json!(["2026-12-25", "2026-12-26"])),
            (
                "ranges",
                json!([{"from": "2027-08-01", "to": "2027-08-14"}])
            )
        ]
    );
    let weekends = json!({"weekdays": ["SAT", "SUN"], "dates": [], "ranges": []});
    assert_eq!(
        calendar_entry("weekends", &weekends).0,
        [
            ("name", json!("weekends")),
            ("weekdays", json!(["SAT", "SUN"]))
        ]
    );
    let task = Ordered(vec![
        ("name", json!("a")),
        ("calendars", json!({"exclude": ["holidays"]})),
    ]);
    let named = Named {
        executors: vec![group_entry(
            "g",
            &json!({"routing": "FIRST", "maxInFlight": 64, "members": []}),
        )],
        calendars: vec![entry],
    };
    let text = yaml(&export_file(vec![task], named, &BTreeSet::new()));
    assert!(
        text.starts_with("executors:\n- name: g\n")
            && text.contains("\ncalendars:\n- name: holidays\n"),
        "{text}"
    );
    assert!(text.find("calendars:") < text.find("tasks:"), "{text}");
    let file: Value = yaml::from_str(&text).expect("reads back");
    let calendars = calendar_entries(Some(file["calendars"].clone())).expect("read back");
    let stored = BTreeMap::from([(
        "holidays".to_string(),
        ax_core::calendar::Calendar::from_json(&json!({"dates": shown["dates"],
            "ranges": shown["ranges"], "weekdays": shown["weekdays"]}))
        .expect("valid"),
    )]);
    assert!(
        calendar_changes(&calendars, &stored).is_empty(),
        "a round trip"
    );
}

#[test]
fn scene_pauses_export_and_read_back_as_changes() {
    let task = || Ordered(vec![("name", json!("a")), ("cron", json!("* * * * * *"))]);
    let plain = serde_json::to_value(export_file(
        vec![task()],
        Named::default(),
        &BTreeSet::new(),
    ));
    assert_eq!(
        plain.ok(),
        Some(json!([{"name": "a", "cron": "* * * * * *"}]))
    );
    let paused = BTreeSet::from(["quiet".to_string()]);
    let file = serde_json::to_value(export_file(vec![task()], Named::default(), &paused));
    let file = file.expect("JSON");
    assert_eq!(
        file["scenes"],
        json!({"quiet": {"paused": true}, "default": {"paused": false}}),
        "a task without a scene is in the default one"
    );
    let wanted = scene_pauses(Some(file["scenes"].clone())).expect("valid");
    assert!(scene_changes(&wanted, &paused).is_empty(), "a round trip");
    assert_eq!(
        scene_changes(&wanted, &BTreeSet::from(["default".to_string()])),
        [("default".to_string(), false), ("quiet".to_string(), true)]
    );
    let plan = Plan {
        scenes: scene_changes(&wanted, &BTreeSet::new()),
        ..Plan::default()
    };
    assert_eq!(plan.lines(), ["~ scene quiet (paused)"]);
    assert_eq!(
        plan.count(false),
        "0 created, 0 changed, 0 deleted; scenes: 1 paused, 0 resumed"
    );
    for bad in [
        json!({"s": true}),
        json!({"s": {"paused": "yes"}}),
        json!({"a b": {"paused": true}}),
    ] {
        assert!(scene_pauses(Some(bad.clone())).is_err(), "{bad}");
    }
}

/// A task as the API would show it: fields drawn at their default or another value, and
/// upstreams among the tasks before it (so no cycle), in this scene or another.
fn arbitrary_task() -> impl Strategy<Value = (Value, Vec<prop::sample::Index>)> {
    (
        prop::sample::select(vec!["etl", "default", "ops"]),
        prop::sample::select(vec!["0 0 1 * * *", "*/5 * * * * *"]),
        prop::option::of(0..=10i64),
        prop::option::of(prop::sample::select(vec!["UTC", "Europe/Berlin"])),
        prop::option::of(prop::sample::select(vec!["ALLOW", "SKIP"])),
        prop::option::of(1..=5i64),
        any::<bool>(),
        prop::collection::vec(any::<prop::sample::Index>(), 0..3),
    )
        .prop_map(
            |(scene, cron, retry, zone, overlap, factor, enabled, ups)| {
                let mut task = json!({"scene": scene, "cron": cron, "handlerUrl": HANDLER,
                    "params": {}, "labels": {}, "enabled": enabled, "retryFactor": factor});
                for (key, value) in [
                    ("maxRetry", retry.map(Value::from)),
                    ("timeZone", zone.map(Value::from)),
                    ("overlap", overlap.map(Value::from)),
                ] {
                    if let Some(value) = value {
                        task[key] = value;
                    }
                }
                (task, ups)
            },
        )
}

proptest! {
    /// What export writes, applied back to the same store, changes nothing.
    #[test]
    fn an_export_applied_back_is_no_change(
        drawn in prop::collection::vec(arbitrary_task(), 1..12)
    ) {
        let mut views = Vec::new();
        for (n, (mut task, ups)) in drawn.into_iter().enumerate() {
            let id = n as i64 * 3 + 10;
            task["id"] = json!(id);
            task["name"] = json!(format!("t{n}"));
            let mut upstreams: Vec<i64> = match n {
                0 => Vec::new(),
                _ => ups.iter().map(|up| up.index(n) as i64 * 3 + 10).collect(),
            };
            upstreams.sort();
            upstreams.dedup();
            task["dependsOn"] = json!(upstreams);
            views.push(task);
        }
        let stored: BTreeMap<Key, (i64, TaskInput)> = views
            .iter()
            .map(|view| {
                let input = task_input(task_body(view.clone()), &Allowlist::default())
                    .expect("a valid view");
                let id = view["id"].as_i64().unwrap_or_default();
                ((input.scene.to_string(), input.name.clone()), (id, input))
            })
            .collect();
        let keys: Vec<(Key, i64)> = stored.iter().map(|(k, (id, _))| (k.clone(), *id)).collect();
        let directory = Directory::new(keys.iter().map(|(k, id)| (k, *id)), []);
        let entries = views.into_iter().map(|view| file_entry(view, &directory)).collect();
        let text = yaml(&export_file(entries, Named::default(), &BTreeSet::new()));
        let items: Vec<Value> = yaml::from_str(&text).expect("YAML");
        let tasks = definitions(&items).expect("valid");
        let (plan, _) = task_plan(&tasks, &stored, true).expect("resolved");
        prop_assert!(plan.is_empty(), "{:?}\n{}", plan.lines(), text);
    }
}
