use maud::html;

use super::draft::{numbers, Draft};
use super::page::{editor_form, Target};
use super::refusals::{every_refusal, Refusal, Unsaved};
use super::upstreams::candidates;
use crate::api::validate;
use crate::console::session::Visitor;
use crate::error::ApiError;
use ax_core::run::TaskId;
use ax_core::task::fields;

#[test]
fn numbers_and_params_go_to_the_api_as_typed() {
    let mut draft = Draft::new(Some("ops"));
    draft.name = "nightly".into();
    draft.handler_url = "http://127.0.0.1:9/run".into();
    draft.params = r#"{"a": 1}"#.into();
    draft.max_retry = "two".into();
    draft.retry_factor = String::new();
    let (body, unread) = draft.body(&[TaskId(4)]);
    assert!(unread.is_empty(), "{unread:?}");
    assert_eq!(body["maxRetry"], "two");
    assert_eq!(body["timeoutMs"], 30_000);
    assert_eq!(body["params"]["a"], 1);
    assert_eq!(body["dependsOn"], serde_json::json!([4]));
    assert!(body.get("retryFactor").is_none());
    for bad in ["{nope", r#"{"a": 1, "a": 2}"#] {
        draft.params = bad.into();
        let (body, unread) = draft.body(&[]);
        let fields: Vec<_> = unread.iter().map(ApiError::field).collect();
        assert_eq!(fields, [Some("params")], "{bad}");
        // Sent as typed, so the API refuses params and no other field in its stead.
        assert_eq!(body["params"], bad, "{bad}");
    }
}

#[test]
fn a_stale_save_lists_the_values_sent_that_differ() {
    let now = Draft::new(Some("ops"));
    let mut sent = now.clone();
    assert!(sent.changes_from(&now).is_empty());
    sent.timeout_ms = "5000".into();
    sent.params = r#"{"a":1}"#.into();
    sent.enabled = false;
    let changes = sent.changes_from(&now);
    let names: Vec<&str> = changes.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, ["enabled", "params", "timeoutMs"]);
    assert_eq!(
        changes[1].1, "{\n  \"a\": 1\n}",
        "params as shown in the form"
    );
}

fn admin() -> Visitor {
    Visitor {
        principal: ax_core::security::Principal::admin("admin"),
        signed_in: false,
        csrf: "csrf".into(),
        notice: None,
    }
}

/// The editor's form for `draft`, after a save refused for `unsaved` if given.
fn form(draft: &Draft, unsaved: Option<&Unsaved>) -> String {
    editor_form(&admin(), Target::New, draft, unsaved, &[], html! {}).into_string()
}

/// A draft the API takes.
fn valid() -> Draft {
    let mut draft = Draft::new(Some("ops"));
    draft.name = "nightly".into();
    draft.handler_url = "http://127.0.0.1:9/run".into();
    draft
}

/// What saving `draft` would be refused for, as the editor shows it (none: it saves).
fn refusals_of(draft: &Draft) -> Vec<Refusal> {
    let (body, own) = draft.body(&[]);
    match validate::task_input(body, &Default::default()) {
        Ok(_) if own.is_empty() => Vec::new(),
        checked => Refusal::all(&every_refusal(own, checked.err())),
    }
}

#[test]
fn every_numeric_hint_states_the_bounds_the_api_enforces() {
    let form = form(&Draft::new(None), None);
    for field in numbers() {
        // The hint as the page shows it: `min-max; …`.
        let start = format!(r#"id="{}-hint">"#, field.name);
        let hint = form
            .split_once(&start)
            .and_then(|(_, rest)| rest.split_once("</span>"))
            .map(|(hint, _)| hint)
            .unwrap_or_else(|| panic!("no hint for {}", field.name));
        let (min, max) = hint
            .split(';')
            .next()
            .and_then(|bounds| bounds.split_once('-'))
            .and_then(|(min, max)| Some((min.parse::<i64>().ok()?, max.parse::<i64>().ok()?)))
            .unwrap_or_else(|| panic!("{}: no bounds in {hint:?}", field.name));
        assert_eq!((min, max), field.range(), "{}", field.name);
        for (value, taken) in [(min, true), (max, true), (min - 1, false), (max + 1, false)] {
            let (mut body, _) = valid().body(&[]);
            body[field.name] = value.into();
            let checked = validate::task_input(body, &Default::default());
            match checked {
                Ok(_) => assert!(taken, "{}: {value} taken, the hint says {hint}", field.name),
                Err(err) => {
                    assert!(!taken, "{}: {value} refused: {err}", field.name);
                    assert_eq!(err.field(), Some(field.name));
                }
            }
        }
    }
}

#[test]
fn a_save_refused_for_several_fields_shows_each_beside_it_and_lists_them() {
    let mut draft = valid();
    draft.max_retry = "11".into();
    draft.params = "{nope".into();
    draft.cron = "61 * * * * *".into();
    draft.labels = "team".into();
    let refusals = refusals_of(&draft);
    let fields: Vec<_> = refusals.iter().map(|r| r.field.as_deref()).collect();
    // In the order the fields are declared.
    let expected = ["cron", "params", "maxRetry", "labels"];
    assert_eq!(fields, expected.map(Some));
    assert!(
        refusals[1].message.contains("not valid JSON"),
        "{refusals:?}"
    );
    let form = form(&draft, Some(&Unsaved::Refused(refusals.clone())));
    for (field, refusal) in expected.iter().zip(&refusals) {
        let beside = format!(r#"<span class="field-error" id="{field}-error">"#);
        assert!(form.contains(&beside), "no error beside {field}: {form}");
        let label = refusal.label().expect("a label");
        let listed = format!(r##"<li><a href="#{field}">{label}</a>: "##);
        assert!(form.contains(&listed), "{field} not listed: {form}");
    }
    assert!(form.contains("change these 4 fields"), "{form}");
    assert!(refusals_of(&valid()).is_empty());
}

#[test]
fn the_time_zone_is_a_choice_of_every_zone_the_api_takes() {
    let form = form(&Draft::new(None), None);
    assert!(form.contains(r#"list="timeZone-choices""#), "{form}");
    let names = ax_cron::Zone::names();
    assert!(names.len() > 300, "{}", names.len());
    for name in &names {
        assert!(
            form.contains(&format!(r#"<option value="{name}">"#)),
            "{name}"
        );
        assert!(ax_cron::Zone::parse(name).is_ok(), "{name}");
    }
    for zone in ["UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires"] {
        assert!(names.iter().any(|name| name == zone), "{zone}");
    }
    // Any other text is still sent, and refused naming the field.
    let mut draft = valid();
    draft.time_zone = "Mars/Olympus_Mons".into();
    let fields: Vec<_> = refusals_of(&draft).into_iter().map(|r| r.field).collect();
    assert_eq!(fields, [Some("timeZone".to_string())]);
}

#[test]
fn every_field_is_in_the_form() {
    let draft = Draft::new(None);
    let form = form(&draft, None);
    let texts: Vec<&str> = draft.texts().into_iter().map(|(name, _)| name).collect();
    for field in fields::ALL {
        assert!(
            form.contains(&format!(r#"name="{}""#, field.name)),
            "no input for {}",
            field.name
        );
        assert!(texts.contains(&field.name), "{} not compared", field.name);
    }
}

#[test]
fn every_field_of_a_task_is_shown_and_sent_back_as_it_is() {
    use crate::api::validate::task_examples::{as_json, details, input, with_example};
    for field in fields::ALL {
        let stored = input(with_example(field));
        let draft = Draft::of(&details(&stored).task, &[]);
        let (body, unread) = draft.body(&stored.depends_on);
        assert!(unread.is_empty(), "{}: {unread:?}", field.name);
        let sent = validate::task_input(body, &Default::default()).expect("valid");
        assert_eq!(
            as_json(&sent),
            as_json(&stored),
            "{}: {draft:?}",
            field.name
        );
    }
}

#[test]
fn labels_are_lines_of_key_and_value() {
    let mut draft = Draft::new(None);
    draft.labels = "team=billing\n\n tier = 1 \n".into();
    let (body, _) = draft.body(&[]);
    assert_eq!(
        body["labels"],
        serde_json::json!({"team": "billing", "tier": "1"})
    );
    for (bad, field) in [("team", "labels"), ("a=1\na=2", "labels.a")] {
        draft.labels = bad.into();
        let (_, unread) = draft.body(&[]);
        let fields: Vec<_> = unread.iter().map(ApiError::field).collect();
        assert_eq!(fields, [Some(field)], "{bad}");
    }
    let refusal = Refusal {
        field: Some("labels.Team".into()),
        message: "no".into(),
    };
    assert_eq!(
        Refusal::for_field(&[refusal], "labels").as_deref(),
        Some("no")
    );
}

#[test]
fn an_upstream_is_read_in_the_task_scene_first() {
    assert_eq!(
        candidates("ops", "reports/daily"),
        [
            ("ops".into(), "reports/daily".to_string()),
            ("reports".into(), "daily".to_string())
        ]
    );
    assert_eq!(candidates("ops", "daily").len(), 1);
}
