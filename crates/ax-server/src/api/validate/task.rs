//! Task bodies: every rule of a task's definition, and bulk registrations.

use ax_core::ids::SceneName;
use std::collections::HashMap;

use serde_json::Value;

use super::alert_rule::alert_rule;
use super::body::{integer, object, optional_string, required_string, small, text};
use super::executor::task_executor;
use super::handler_url::handler_url;
use crate::error::ApiError;
use crate::service::task_input::TaskInput;
use ax_core::calendar::TaskCalendars;
use ax_core::run::{OverlapPolicy, TaskId};
use ax_core::security::Allowlist;
use ax_core::task::fields;
use ax_core::task::labels::Labels;
use ax_cron::{CronSchedule, Zone};
use ax_store::rows::models::MAX_NAME_CHARS;

// A task's bounds and defaults are its fields' (`ax_core::task::fields`); text limits are those
// of the MySQL columns (VARCHAR counts characters; SQLite has no limit).
pub const MAX_SCENE_CHARS: usize = fields::SCENE.max();
pub const MAX_CRON_CHARS: usize = fields::CRON.max();
/// Far below the MEDIUMTEXT column (16 MiB): a task's params travel with every run.
pub const MAX_PARAMS_BYTES: usize = fields::PARAMS.max();
pub const MAX_UPSTREAMS: usize = fields::DEPENDS_ON.max();
pub const DEFAULT_SCENE: &str = fields::SCENE.default_text();
pub const DEFAULT_MAX_RETRY: i32 = fields::MAX_RETRY.default_integer() as i32;
pub const DEFAULT_TIMEOUT_MS: i64 = fields::TIMEOUT_MS.default_integer();

/// What a task body may hold: every declared field.
const TASK_FIELDS: &[&str] = &fields::NAMES;

/// A task as a body for `task_input`: the fields of its view a client may send.
pub fn task_body(view: Value) -> Value {
    match view {
        Value::Object(mut fields) => {
            fields.retain(|key, _| TASK_FIELDS.contains(&key.as_str()));
            Value::Object(fields)
        }
        other => other,
    }
}

/// Applies a JSON merge patch (RFC 7386) to `target`: an object's members are merged, member
/// by member and recursively; `null` removes one (a task field then takes its default); any
/// other value replaces.
pub fn merge_patch(target: Value, patch: Value) -> Value {
    let Value::Object(patch) = patch else {
        return patch;
    };
    let mut target = match target {
        Value::Object(fields) => fields,
        _ => serde_json::Map::new(),
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(&key);
        } else {
            let merged = merge_patch(target.remove(&key).unwrap_or(Value::Null), value);
            target.insert(key, merged);
        }
    }
    Value::Object(target)
}

/// Most tasks one bulk registration takes.
pub const MAX_BULK_ITEMS: usize = 1000;

/// A bulk registration body, `{"items": [task bodies], "upsert": bool}`: the tasks, checked
/// each (an error names its item: `items[17].cron`), and whether existing ones are updated.
pub fn bulk(body: &[u8], allowlist: &Allowlist) -> Result<(Vec<TaskInput>, bool), ApiError> {
    let mut body = object(crate::api::json::parse(body)?, &["items", "upsert"])?;
    let upsert = match body.remove("upsert") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(upsert)) => upsert,
        Some(_) => return Err(ApiError::invalid("upsert", "upsert must be true or false")),
    };
    let Some(Value::Array(items)) = body.remove("items") else {
        return Err(ApiError::invalid(
            "items",
            "items must be an array of tasks",
        ));
    };
    if items.len() > MAX_BULK_ITEMS {
        return Err(ApiError::invalid(
            "items",
            format!(
                "at most {MAX_BULK_ITEMS} tasks a call (got {}); send the rest in further calls",
                items.len()
            ),
        ));
    }
    let mut seen: HashMap<(SceneName, String), usize> = HashMap::with_capacity(items.len());
    let mut inputs = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let input = task_input(item, allowlist).map_err(|err| err.in_item(index))?;
        let key = (input.scene.clone(), input.name.clone());
        if let Some(first) = seen.insert(key, index) {
            let message = format!("the same scene and name as items[{first}]");
            return Err(ApiError::invalid("name", message).in_item(index));
        }
        inputs.push(input);
    }
    Ok((inputs, upsert))
}

/// A task body (`POST /api/tasks`, `PUT /api/tasks/{id}`). Every field is checked, in one
/// pass, so a refusal names each bad field (`ApiError::all`): the first as today's 400 did,
/// the rest in its `errors`.
pub fn task_input(mut body: Value, allowlist: &Allowlist) -> Result<TaskInput, ApiError> {
    // Fields of the task's view added after clients learnt to send a view back without `id`,
    // `status`, `nextRunAt`, `createdAt`, `updatedAt`: read-only, and ignored (a change's
    // version goes in `If-Match`).
    if let Some(members) = body.as_object_mut() {
        for read_only in ["version", "scenePaused"] {
            members.remove(read_only);
        }
    }
    let mut body = object(body, TASK_FIELDS)?;
    let mut refused = Refused::default();
    // The zone first, then the cron read in it: the order a 400 named them in before it named
    // them all, so its first `field` stays what clients saw.
    let zone =
        refused.check(optional_string(&mut body, fields::TIME_ZONE.name).and_then(time_zone));
    let cron = refused.check(required_string(&mut body, fields::CRON.name).and_then(cron));
    let name = refused.check(
        required_string(&mut body, fields::NAME.name)
            .and_then(|name| text(name, fields::NAME.name, MAX_NAME_CHARS)),
    );
    let scene = refused.check(
        optional_string(&mut body, fields::SCENE.name)
            .and_then(|name| scene(name.unwrap_or_else(|| DEFAULT_SCENE.into()))),
    );
    let handler_url = refused.check(
        optional_string(&mut body, fields::HANDLER_URL.name)
            .and_then(|url| url.map(|url| handler_url(url, allowlist)).transpose()),
    );
    let executor = refused.check(task_executor(body.remove(fields::EXECUTOR.name)));
    let params = refused.check(params(body.remove(fields::PARAMS.name)));
    let max_retry = refused.check(small(&mut body, fields::MAX_RETRY.name, MAX_RETRY));
    let timeout_ms = refused.check(integer(&mut body, fields::TIMEOUT_MS.name, TIMEOUT_MS));
    let enabled = refused.check(enabled(body.remove(fields::ENABLED.name)));
    let retry_backoff_secs = refused.check(small(
        &mut body,
        fields::RETRY_BACKOFF_SECS.name,
        RETRY_BACKOFF_SECS,
    ));
    let retry_factor = refused.check(small(&mut body, fields::RETRY_FACTOR.name, RETRY_FACTOR));
    let misfire_threshold_secs = refused.check(small(
        &mut body,
        fields::MISFIRE_THRESHOLD_SECS.name,
        MISFIRE_THRESHOLD_SECS,
    ));
    let dependency_timeout_secs = refused.check(small(
        &mut body,
        fields::DEPENDENCY_TIMEOUT_SECS.name,
        DEPENDENCY_TIMEOUT_SECS,
    ));
    let depends_on = refused.check(depends_on(body.remove(fields::DEPENDS_ON.name)));
    let overlap = refused.check(optional_string(&mut body, fields::OVERLAP.name).and_then(overlap));
    let jitter_secs = refused.check(small(&mut body, fields::JITTER_SECS.name, JITTER_SECS));
    let labels = refused.check(
        Labels::from_body(body.remove(fields::LABELS.name))
            .map_err(|err| ApiError::invalid(err.field, err.message)),
    );
    let alerts = refused.check(match body.remove(fields::ALERTS.name) {
        None | Some(Value::Null) => Ok(None),
        Some(rule) => alert_rule(rule, "alerts.").map(Some),
    });
    let alert_lag_ms = refused.check(integer(&mut body, fields::ALERT_LAG_MS.name, ALERT_LAG_MS));
    let calendars = refused.check(
        TaskCalendars::from_json(&body.remove(fields::CALENDARS.name).unwrap_or(Value::Null))
            .map_err(|err| ApiError::invalid(err.field(), err.message())),
    );
    // Which of the two a task runs on, once each passed on its own.
    if let (Some(handler_url), Some(executor)) = (&handler_url, &executor) {
        refused.check(one_destination(handler_url.is_some(), executor.is_some()));
    }
    let input = (|| {
        Some(TaskInput {
            name: name?,
            scene: scene?,
            cron: cron?.in_zone(zone?),
            handler_url: handler_url?,
            executor: executor?,
            params: params?,
            max_retry: max_retry?.unwrap_or(DEFAULT_MAX_RETRY),
            timeout_ms: timeout_ms?.unwrap_or(DEFAULT_TIMEOUT_MS),
            enabled: enabled?,
            retry_backoff_secs: retry_backoff_secs?,
            retry_factor: retry_factor?,
            misfire_threshold_secs: misfire_threshold_secs?,
            dependency_timeout_secs: dependency_timeout_secs?,
            depends_on: depends_on?,
            overlap: overlap?,
            jitter_secs: jitter_secs?.unwrap_or(DEFAULT_JITTER_SECS),
            labels: labels?,
            alerts: alerts?,
            alert_lag_ms: alert_lag_ms?,
            calendars: calendars?,
        })
    })();
    match input {
        Some(input) if refused.0.is_empty() => Ok(input),
        _ => Err(ApiError::all(refused.0)),
    }
}

/// The refusals of a body's fields, kept as each field is checked so that one 400 names them
/// all.
#[derive(Default)]
struct Refused(Vec<ApiError>);

impl Refused {
    /// The field's value when it passed; `None`, its refusal kept, when not.
    fn check<T>(&mut self, checked: Result<T, ApiError>) -> Option<T> {
        checked.map_err(|err| self.0.push(err)).ok()
    }
}

/// A task runs on a handler URL or on an executor group: one of them, not both.
fn one_destination(handler_url: bool, executor: bool) -> Result<(), ApiError> {
    match (handler_url, executor) {
        (true, false) | (false, true) => Ok(()),
        (false, false) => Err(ApiError::invalid(
            fields::HANDLER_URL.name,
            "handlerUrl is required (or executor: {group, path} for an executor group)",
        )),
        (true, true) => Err(ApiError::invalid(
            fields::EXECUTOR.name,
            "give either handlerUrl or executor, not both (set the other to null)",
        )),
    }
}

/// Whether the task fires on its schedule; `true` when absent.
fn enabled(value: Option<Value>) -> Result<bool, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(DEFAULT_ENABLED),
        Some(Value::Bool(enabled)) => Ok(enabled),
        Some(_) => Err(ApiError::invalid(
            fields::ENABLED.name,
            "enabled must be true or false",
        )),
    }
}

// The bounds of the integer fields, as the declarations give them (checked when compiled).
const MAX_RETRY: (i64, i64) = fields::MAX_RETRY.range();
const TIMEOUT_MS: (i64, i64) = fields::TIMEOUT_MS.range();
const RETRY_BACKOFF_SECS: (i64, i64) = fields::RETRY_BACKOFF_SECS.range();
const RETRY_FACTOR: (i64, i64) = fields::RETRY_FACTOR.range();
const MISFIRE_THRESHOLD_SECS: (i64, i64) = fields::MISFIRE_THRESHOLD_SECS.range();
const DEPENDENCY_TIMEOUT_SECS: (i64, i64) = fields::DEPENDENCY_TIMEOUT_SECS.range();
const JITTER_SECS: (i64, i64) = fields::JITTER_SECS.range();
const ALERT_LAG_MS: (i64, i64) = fields::ALERT_LAG_MS.range();
const DEFAULT_ENABLED: bool = fields::ENABLED.default_bool();
const DEFAULT_JITTER_SECS: i32 = fields::JITTER_SECS.default_integer() as i32;

/// An IANA time zone name; UTC when absent.
fn time_zone(value: Option<String>) -> Result<Zone, ApiError> {
    value.map_or(Ok(Zone::utc()), |name| zone(&name, "timeZone"))
}

/// The zone named `name`, or a 400 naming `field`.
pub fn zone(name: &str, field: &str) -> Result<Zone, ApiError> {
    Zone::parse(name).map_err(|err| ApiError::invalid(field, err.to_string()))
}

fn overlap(value: Option<String>) -> Result<OverlapPolicy, ApiError> {
    let Some(text) = value else {
        return Ok(OverlapPolicy::Allow);
    };
    OverlapPolicy::parse(&text).ok_or_else(|| {
        ApiError::invalid(
            "overlap",
            format!("overlap must be {}", OverlapPolicy::choices()),
        )
    })
}

/// A cron expression that fires, short enough to be stored as the parser keeps it (trimmed).
fn cron(text: String) -> Result<CronSchedule, ApiError> {
    let cron =
        CronSchedule::parse(&text).map_err(|err| ApiError::invalid("cron", err.to_string()))?;
    if cron.expression().chars().count() > MAX_CRON_CHARS {
        return Err(ApiError::invalid(
            "cron",
            format!("cron is longer than {MAX_CRON_CHARS} characters"),
        ));
    }
    Ok(cron)
}

/// A scene name: it appears in URL paths, so letters, digits and `_ . : -` only.
pub fn scene(value: String) -> Result<SceneName, ApiError> {
    let value = text(value, "scene", MAX_SCENE_CHARS)?;
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_.:-".contains(c);
    if !value.chars().all(allowed) {
        return Err(ApiError::invalid(
            "scene",
            "scene may hold only letters, digits and _ . : -",
        ));
    }
    Ok(value.into())
}

/// Upstream task ids: distinct positive integers, at most `MAX_UPSTREAMS`.
fn depends_on(value: Option<Value>) -> Result<Vec<TaskId>, ApiError> {
    let invalid = || {
        ApiError::invalid(
            "dependsOn",
            format!("dependsOn must be a list of at most {MAX_UPSTREAMS} task ids"),
        )
    };
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) if items.len() <= MAX_UPSTREAMS => items,
        Some(_) => return Err(invalid()),
    };
    let mut ids = Vec::with_capacity(items.len());
    for item in items {
        let id = TaskId(item.as_i64().filter(|id| *id > 0).ok_or_else(invalid)?);
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

pub(super) fn params(value: Option<Value>) -> Result<String, ApiError> {
    match value {
        None | Some(Value::Null) => Ok("{}".into()),
        Some(value @ Value::Object(_)) => {
            let text = value.to_string();
            if text.len() > MAX_PARAMS_BYTES {
                return Err(ApiError::invalid(
                    "params",
                    format!("params are larger than {MAX_PARAMS_BYTES} bytes"),
                ));
            }
            Ok(text)
        }
        Some(_) => Err(ApiError::invalid("params", "params must be a JSON object")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use super::super::refused::{field_of, refusal};

    fn valid() -> Value {
        json!({"name": "report", "cron": "0 */5 * * * *", "handlerUrl": "http://127.0.0.1:9000/run"})
    }

    #[test]
    fn defaults_fill_the_optional_fields() {
        let input = task_input(valid(), &Allowlist::default()).expect("valid");
        assert_eq!(input.retry_backoff_secs, None);
        assert_eq!(input.scene, "default");
        assert_eq!(input.params, "{}");
        assert_eq!(
            (input.max_retry, input.timeout_ms, input.enabled),
            (3, 30_000, true)
        );
    }

    #[test]
    fn each_bad_field_is_named() {
        let cases = [
            ("name", json!("")),
            ("name", json!("x".repeat(129))),
            ("name", json!("\u{202e}")),
            ("name", json!("invoice\u{202e}gnp.exe")),
            ("name", json!("a\u{200b}b")),
            ("name", json!("\u{feff}report")),
            ("name", json!("x\u{2066}y\u{2069}")),
            ("scene", json!("\u{202e}")),
            ("scene", json!("ops\u{200d}")),
            ("scene", json!("s".repeat(65))),
            ("cron", json!("0 0 0 31 2 *")),
            ("cron", json!("* * *")),
            ("handlerUrl", json!("ftp://host/x")),
            ("handlerUrl", json!("http://")),
            ("handlerUrl", json!("not a url")),
            ("params", json!([1, 2])),
            ("params", json!({"big": "x".repeat(MAX_PARAMS_BYTES)})),
            ("maxRetry", json!(11)),
            ("maxRetry", json!(-1)),
            ("timeoutMs", json!(99)),
            ("timeoutMs", json!(86_400_001)),
            ("timeoutMs", json!("100")),
            ("enabled", json!("yes")),
            ("retryBackoffSecs", json!(0)),
            ("retryFactor", json!(11)),
            ("misfireThresholdSecs", json!(-5)),
            ("dependencyTimeoutSecs", json!(0)),
            ("dependsOn", json!([1, "two"])),
            ("dependsOn", json!([0])),
            ("dependsOn", json!(3)),
            ("scene", json!("a/b")),
            ("scene", json!("x'; DROP TABLE ax_task; --")),
            ("bogus", json!(1)),
        ];
        for (field, value) in cases {
            let mut body = valid();
            body[field] = value;
            let err = task_input(body, &Allowlist::default()).expect_err(field);
            // One bad field: the error it always was, nothing more.
            assert_eq!(err.field_errors().len(), 1, "{field}: {err:?}");
            assert_eq!(field_of(err).as_deref(), Some(field));
        }
        let mut body = valid();
        body.as_object_mut().expect("object").remove("handlerUrl");
        assert_eq!(
            field_of(task_input(body, &Allowlist::default()).unwrap_err()).as_deref(),
            Some("handlerUrl")
        );
        assert_eq!(
            field_of(task_input(json!([]), &Allowlist::default()).unwrap_err()),
            None
        );
    }

    /// Each field and message of a refusal.
    fn refusals(err: &ApiError) -> Vec<(String, String)> {
        let fields = err.field_errors().into_iter();
        fields
            .map(|refused| (refused.field, refused.message))
            .collect()
    }

    #[test]
    fn every_bad_field_is_named_at_once_in_field_order() {
        let mut body = valid();
        body["labels"] = json!({"Team": "billing"});
        body["overlap"] = json!("SOMETIMES");
        body["maxRetry"] = json!(11);
        body["cron"] = json!("61 * * * * *");
        body["timeZone"] = json!("Mars/Olympus_Mons");
        body.as_object_mut().expect("object").remove("name");
        let err = task_input(body, &Allowlist::default()).expect_err("refused");
        let refused = refusals(&err);
        let fields: Vec<&str> = refused.iter().map(|(field, _)| field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "timeZone",
                "cron",
                "name",
                "maxRetry",
                "overlap",
                "labels.Team"
            ]
        );
        // The first is the error's own field and message, as when it was the only one.
        assert_eq!(refusal(err), refused[0].clone());
        let mut alone = valid();
        alone["maxRetry"] = json!(11);
        let err = task_input(alone, &Allowlist::default()).expect_err("refused");
        assert_eq!(refused[3], refusal(err));
        assert_eq!(refused[3].1, "maxRetry must be an integer from 0 to 10");
    }

    #[test]
    fn one_bad_field_is_refused_as_before() {
        let mut body = valid();
        body["maxRetry"] = json!(11);
        let err = task_input(body, &Allowlist::default()).expect_err("refused");
        match err {
            ApiError::Invalid {
                field,
                message,
                more,
            } => {
                assert_eq!(field.as_deref(), Some("maxRetry"));
                assert_eq!(message, "maxRetry must be an integer from 0 to 10");
                assert!(more.is_empty(), "{more:?}");
            }
            other => panic!("{other:?}"),
        }
        // A bad handlerUrl is not also reported as missing.
        let mut body = valid();
        body["handlerUrl"] = json!("ftp://host/x");
        let err = task_input(body, &Allowlist::default()).expect_err("refused");
        assert_eq!(refusals(&err).len(), 1, "{err:?}");
        // Both destinations given, and another field bad: both named, the pair last.
        let mut body = valid();
        body["executor"] = json!({"group": "billing", "path": "/x"});
        body["jitterSecs"] = json!(-1);
        let err = task_input(body, &Allowlist::default()).expect_err("refused");
        let fields: Vec<String> = refusals(&err).into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, ["jitterSecs", "executor"]);
    }

    #[test]
    fn a_bulk_item_names_each_of_its_fields() {
        let mut item = valid();
        item["cron"] = json!("nope");
        item["retryFactor"] = json!(0);
        let body = json!({"items": [valid(), item]}).to_string();
        let err = bulk(body.as_bytes(), &Allowlist::default()).expect_err("refused");
        let fields: Vec<String> = refusals(&err).into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, ["items[1].cron", "items[1].retryFactor"]);
        assert!(refusals(&err)[1].1.starts_with("items[1]: retryFactor"));
    }

    #[test]
    fn labels_are_read_and_a_bad_one_is_named() {
        let mut body = valid();
        body["labels"] = json!({"team": "billing"});
        let input = task_input(body, &Allowlist::default()).expect("valid");
        assert_eq!(
            input.labels.iter().collect::<Vec<_>>(),
            [("team", "billing")]
        );
        for (labels, field) in [
            (json!("team=billing"), "labels"),
            (json!({"Team": "billing"}), "labels.Team"),
            (json!({"team": ["billing"]}), "labels.team"),
        ] {
            let mut body = valid();
            body["labels"] = labels;
            let err = task_input(body, &Allowlist::default()).expect_err(field);
            assert_eq!(refusal(err).0, field);
        }
    }

    #[test]
    fn names_in_any_script_are_taken_as_they_are() {
        for name in [
            "Bericht für März",
            "日次レポート",
            "отчёт 2027",
            "a - b (2)",
            "✓ done",
        ] {
            let mut body = valid();
            body["name"] = json!(name);
            assert_eq!(
                task_input(body, &Allowlist::default()).expect(name).name,
                name
            );
        }
    }

    #[test]
    fn merge_patches_merge_objects_and_null_removes() {
        let task = json!({"name": "a", "params": {"x": 1, "y": 2}, "maxRetry": 5});
        let patched = merge_patch(
            task,
            json!({"params": {"y": null, "z": [1]}, "maxRetry": null, "cron": "* * * * * *"}),
        );
        assert_eq!(
            patched,
            json!({"name": "a", "params": {"x": 1, "z": [1]}, "cron": "* * * * * *"})
        );
        assert_eq!(merge_patch(json!({"a": 1}), json!([1])), json!([1]));
        assert_eq!(
            task_body(json!({"id": 3, "name": "a", "status": "PAUSED", "enabled": false})),
            json!({"name": "a", "enabled": false})
        );
    }

    #[test]
    fn handlers_outside_the_allowlist_are_refused() {
        let allow = Allowlist::parse(&["10.0.0.0/8".to_string()]).expect("valid");
        let mut body = valid();
        body["handlerUrl"] = json!("http://169.254.169.254/latest/meta-data");
        assert_eq!(
            field_of(task_input(body, &allow).unwrap_err()).as_deref(),
            Some("handlerUrl")
        );
        let mut body = valid();
        body["handlerUrl"] = json!("http://10.1.2.3:8080/run");
        assert!(task_input(body, &allow).is_ok());
    }

    fn handler_url_of(url: &str, allowlist: &Allowlist) -> Result<String, ApiError> {
        let mut body = valid();
        body["handlerUrl"] = json!(url);
        task_input(body, allowlist).map(|input| input.handler_url.unwrap_or_default())
    }

    #[test]
    fn handler_urls_that_cannot_be_called_are_refused() {
        let encodes_long = format!("http://127.0.0.1:9/{}", "ä".repeat(1000));
        // Each with a word of the reason it must be refused for.
        let cases = [
            ("http:///path", "host"),
            ("http://:80/", "host"),
            ("http:host/x", "http://"),
            ("http://127.0.0.1:9/o k", "whitespace"),
            ("http://127.0.0.1:9/x\r\n", "whitespace"),
            ("http://127.0.0.1:9/x\t", "whitespace"),
            (" http://127.0.0.1:9/x", "whitespace"),
            ("http://127.0.0.1:9/\u{a0}x", "whitespace"),
            ("http://127.0.0.1:9/x\u{0}", "control"),
            ("http:\\\\host\\x", "backslash"),
            ("http://127.0.0.1:9/a\\b", "backslash"),
            ("http://user:pass@127.0.0.1:9/x", "userinfo"),
            ("http://@127.0.0.1:9/x", "userinfo"),
            ("http://127.0.0.1:9/x#frag", "fragment"),
            ("http://127.0.0.1:9/x#", "fragment"),
            // url accepts `{` in a host name; the HTTP client's Uri does not.
            ("http://a{b}.example/x", "HTTP client"),
            (encodes_long.as_str(), "percent-encoded"),
        ];
        for (url, reason) in cases {
            let err = handler_url_of(url, &Allowlist::default()).expect_err(url);
            let (field, message) = refusal(err);
            assert_eq!(field, "handlerUrl", "{url:?}");
            assert!(message.contains(reason), "{url:?}: {message}");
        }
    }

    #[test]
    fn handler_urls_are_stored_as_the_client_sends_them() {
        let cases = [
            ("http://bücher.example/x", "http://xn--bcher-kva.example/x"),
            (
                "http://127.0.0.1:9/pfad/ä",
                "http://127.0.0.1:9/pfad/%C3%A4",
            ),
            ("http://127.0.0.1:80/run", "http://127.0.0.1/run"),
            ("HTTPS://Example.COM:443/a?q=1", "https://example.com/a?q=1"),
            ("http://127.0.0.1:9", "http://127.0.0.1:9/"),
        ];
        for (raw, stored) in cases {
            assert_eq!(
                handler_url_of(raw, &Allowlist::default()).expect(raw),
                stored
            );
        }
    }

    #[test]
    fn the_allowlist_sees_the_punycode_host() {
        let allow = Allowlist::parse(&["xn--bcher-kva.example".to_string()]).expect("valid");
        assert!(handler_url_of("http://bücher.example/x", &allow).is_ok());
        let allow = Allowlist::parse(&["bücher.example".to_string()]).expect("valid");
        assert_eq!(
            field_of(handler_url_of("http://bücher.example/x", &allow).unwrap_err()).as_deref(),
            Some("handlerUrl")
        );
    }

    #[test]
    fn upstreams_are_deduplicated() {
        let mut body = valid();
        body["dependsOn"] = json!([3, 1, 3]);
        assert_eq!(
            task_input(body, &Allowlist::default())
                .expect("valid")
                .depends_on,
            vec![TaskId(3), TaskId(1)]
        );
    }
}
