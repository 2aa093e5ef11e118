//! The form model: a task's fields as the editor shows them and as a form sends them back,
//! and the API body they make.

use serde_json::{Map, Value};

use super::upstreams::upstream_name;
use crate::api::json;
use crate::api::validate::{DEFAULT_MAX_RETRY, DEFAULT_SCENE, DEFAULT_TIMEOUT_MS};
use crate::console::layout::pretty_json;
use crate::console::session::Submitted;
use crate::error::ApiError;
use ax_core::run::{OverlapPolicy, TaskId};
use ax_core::task::fields::{self, Field, Kind, ALERTS, CALENDARS, EXECUTOR, LABELS, PARAMS};
use ax_core::task::labels::Labels;
use ax_store::rows::models::{Task, TaskStatus};

/// The editor's fields as text, as shown and as sent back. The form's field names are the
/// API's, so an API error's `field` names the input it belongs beside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Draft {
    pub(super) name: String,
    pub(super) scene: String,
    pub(super) cron: String,
    pub(super) time_zone: String,
    /// `{"exclude": [...], "policy": …}` as JSON text; empty: no days off.
    pub(super) calendars: String,
    pub(super) handler_url: String,
    /// Instead of the handler URL: `{"group": …, "path": …}` as JSON text.
    pub(super) executor: String,
    pub(super) params: String,
    pub(super) max_retry: String,
    pub(super) timeout_ms: String,
    pub(super) retry_backoff_secs: String,
    pub(super) retry_factor: String,
    pub(super) misfire_threshold_secs: String,
    pub(super) dependency_timeout_secs: String,
    /// Upstream tasks by name, one a line: `name` in this task's scene, else `scene/name`.
    pub(super) depends_on: String,
    pub(super) overlap: String,
    pub(super) jitter_secs: String,
    /// One `key=value` a line.
    pub(super) labels: String,
    /// The task's own alert rule as JSON text; empty: the scene's or the default.
    pub(super) alerts: String,
    pub(super) alert_lag_ms: String,
    pub(super) enabled: bool,
}

/// The numeric fields, as declared: their form (and API) names, labels and bounds.
pub(super) fn numbers() -> impl Iterator<Item = &'static Field> {
    fields::ALL
        .into_iter()
        .filter(|field| matches!(field.kind, Kind::Integer { .. }))
}

impl Draft {
    /// A new task's fields, in `scene` when given.
    pub(super) fn new(scene: Option<&str>) -> Draft {
        Draft {
            name: String::new(),
            scene: scene.unwrap_or(DEFAULT_SCENE).to_string(),
            cron: "0 * * * * *".into(),
            time_zone: "UTC".into(),
            calendars: String::new(),
            handler_url: String::new(),
            executor: String::new(),
            params: "{}".into(),
            max_retry: DEFAULT_MAX_RETRY.to_string(),
            timeout_ms: DEFAULT_TIMEOUT_MS.to_string(),
            retry_backoff_secs: String::new(),
            retry_factor: String::new(),
            misfire_threshold_secs: String::new(),
            dependency_timeout_secs: String::new(),
            depends_on: String::new(),
            overlap: OverlapPolicy::Allow.as_str().into(),
            jitter_secs: "0".into(),
            labels: String::new(),
            alerts: String::new(),
            alert_lag_ms: String::new(),
            enabled: true,
        }
    }

    /// A task's fields; `upstreams` are its upstream tasks.
    pub(super) fn of(task: &Task, upstreams: &[Task]) -> Draft {
        let number = |value: Option<i32>| value.map(|v| v.to_string()).unwrap_or_default();
        let depends_on: Vec<String> = upstreams
            .iter()
            .map(|upstream| upstream_name(&task.scene, upstream))
            .collect();
        Draft {
            name: task.name.clone(),
            scene: task.scene.to_string(),
            cron: task.cron.clone(),
            time_zone: task.time_zone.clone(),
            calendars: task
                .calendars
                .as_ref()
                .and_then(|calendars| serde_json::to_string(calendars).ok())
                .unwrap_or_default(),
            handler_url: task.handler_url.clone(),
            executor: task
                .executor
                .as_ref()
                .and_then(|e| serde_json::to_string(e).ok())
                .unwrap_or_default(),
            params: pretty_json(&task.params),
            max_retry: task.max_retry.to_string(),
            timeout_ms: task.timeout_ms.to_string(),
            retry_backoff_secs: number(task.retry_backoff_secs),
            retry_factor: number(task.retry_factor),
            misfire_threshold_secs: number(task.misfire_threshold_secs),
            dependency_timeout_secs: number(task.dependency_timeout_secs),
            depends_on: depends_on.join("\n"),
            overlap: task.overlap.as_str().into(),
            jitter_secs: task.jitter_secs.to_string(),
            labels: label_lines(&task.labels),
            alerts: task
                .alerts
                .as_ref()
                .and_then(|rule| serde_json::to_string_pretty(rule).ok())
                .unwrap_or_default(),
            alert_lag_ms: task
                .alert_lag_ms
                .map(|ms| ms.to_string())
                .unwrap_or_default(),
            enabled: task.status == TaskStatus::Enabled,
        }
    }

    /// The fields a form sent.
    pub(super) fn sent(form: &Submitted) -> Draft {
        let text = |name: &str| form.get(name).unwrap_or_default().to_string();
        Draft {
            name: text("name"),
            scene: text("scene"),
            cron: text("cron"),
            time_zone: text("timeZone"),
            calendars: form.raw("calendars").unwrap_or_default().trim().to_string(),
            handler_url: text("handlerUrl"),
            executor: text("executor"),
            params: form.raw("params").unwrap_or_default().trim().to_string(),
            max_retry: text("maxRetry"),
            timeout_ms: text("timeoutMs"),
            retry_backoff_secs: text("retryBackoffSecs"),
            retry_factor: text("retryFactor"),
            misfire_threshold_secs: text("misfireThresholdSecs"),
            dependency_timeout_secs: text("dependencyTimeoutSecs"),
            depends_on: form.raw("dependsOn").unwrap_or_default().trim().to_string(),
            overlap: text("overlap"),
            jitter_secs: text("jitterSecs"),
            labels: form.raw("labels").unwrap_or_default().trim().to_string(),
            alerts: form.raw("alerts").unwrap_or_default().trim().to_string(),
            alert_lag_ms: text("alertLagMs"),
            enabled: form.get("enabled").is_some(),
        }
    }

    /// Every field, by its API name, as text (params as indented JSON).
    pub(super) fn texts(&self) -> Vec<(&'static str, String)> {
        let mut texts = vec![
            ("name", self.name.clone()),
            ("scene", self.scene.clone()),
            ("cron", self.cron.clone()),
            ("timeZone", self.time_zone.clone()),
            ("calendars", pretty_json(&self.calendars)),
            ("handlerUrl", self.handler_url.clone()),
            ("executor", self.executor.clone()),
            ("enabled", self.enabled.to_string()),
            ("params", pretty_json(&self.params)),
            ("dependsOn", self.upstream_lines().join("\n")),
            ("overlap", self.overlap.clone()),
            ("labels", self.label_pairs().join("\n")),
            ("alerts", pretty_json(&self.alerts)),
        ];
        texts.extend(numbers().map(|field| (field.name, self.number(field.name).to_string())));
        texts
    }

    /// This draft's fields that differ from `other`'s, with this draft's values.
    pub(super) fn changes_from(&self, other: &Draft) -> Vec<(&'static str, String)> {
        let theirs = other.texts();
        self.texts()
            .into_iter()
            .zip(theirs)
            .filter(|(mine, theirs)| mine.1 != theirs.1)
            .map(|(mine, _)| mine)
            .collect()
    }

    pub(super) fn number(&self, name: &str) -> &str {
        match name {
            "maxRetry" => &self.max_retry,
            "timeoutMs" => &self.timeout_ms,
            "retryBackoffSecs" => &self.retry_backoff_secs,
            "retryFactor" => &self.retry_factor,
            "misfireThresholdSecs" => &self.misfire_threshold_secs,
            "dependencyTimeoutSecs" => &self.dependency_timeout_secs,
            "alertLagMs" => &self.alert_lag_ms,
            _ => &self.jitter_secs,
        }
    }

    /// The scene the task is in, as its upstreams' names are read.
    pub(super) fn scene_or_default(&self) -> &str {
        if self.scene.is_empty() {
            DEFAULT_SCENE
        } else {
            &self.scene
        }
    }

    /// The lines of the labels field.
    fn label_pairs(&self) -> Vec<&str> {
        self.labels
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect()
    }

    /// The labels field as the API's object: a line is `key=value`; a key given twice is
    /// refused, as a JSON body's would be.
    fn labels_value(&self) -> Result<Map<String, Value>, ApiError> {
        let mut labels = Map::new();
        for line in self.label_pairs() {
            let Some((key, value)) = line.split_once('=') else {
                let message = format!("each line of labels is key=value (got `{line}`)");
                return Err(ApiError::invalid("labels", message));
            };
            let (key, value) = (key.trim(), value.trim());
            if labels.contains_key(key) {
                let field = format!("labels.{key}");
                return Err(ApiError::invalid(&field, format!("{field} is given twice")));
            }
            labels.insert(key.into(), Value::String(value.into()));
        }
        Ok(labels)
    }

    /// The lines of the dependency field.
    pub(super) fn upstream_lines(&self) -> Vec<&str> {
        self.depends_on
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect()
    }

    /// The API body of the draft, its upstreams resolved to `depends_on`: what the API's
    /// validation then checks. An empty field is left out (its default); a number that does
    /// not read as one is sent as text, for the API's own message. With it, the refusals of
    /// the fields that do not read as the API's values (JSON that is not, a label line without
    /// `=`): each is sent as its text, so the API refuses that field and no other in its stead
    /// (an executor left out would make the handler URL required).
    pub(super) fn body(&self, depends_on: &[TaskId]) -> (Value, Vec<ApiError>) {
        let mut body = Map::new();
        let mut unread = Vec::new();
        let mut put = |name: &str, value: &str| {
            if !value.is_empty() {
                body.insert(name.into(), Value::String(value.into()));
            }
        };
        put("name", &self.name);
        put("scene", &self.scene);
        put("cron", &self.cron);
        put("timeZone", &self.time_zone);
        put("handlerUrl", &self.handler_url);
        put("overlap", &self.overlap);
        for field in numbers() {
            let text = self.number(field.name);
            if !text.is_empty() {
                let value = text
                    .parse::<i64>()
                    .map_or_else(|_| Value::String(text.into()), Value::from);
                body.insert(field.name.into(), value);
            }
        }
        match self.labels_value() {
            Ok(labels) if labels.is_empty() => {}
            Ok(labels) => {
                body.insert(LABELS.name.into(), Value::Object(labels));
            }
            Err(err) => {
                unread.push(err);
                body.insert(LABELS.name.into(), Value::String(self.labels.clone()));
            }
        }
        for (name, text) in [
            (CALENDARS.name, &self.calendars),
            (EXECUTOR.name, &self.executor),
            (ALERTS.name, &self.alerts),
            (PARAMS.name, &self.params),
        ] {
            if text.is_empty() {
                continue;
            }
            // Read as the API reads a body: a key given twice is refused, not the last kept.
            let value = json::distinct(text.as_bytes()).unwrap_or_else(|(_, err)| {
                let message = format!("{name} is not valid JSON: {err}");
                unread.push(ApiError::invalid(name, message));
                Value::String(text.clone())
            });
            body.insert(name.into(), value);
        }
        body.insert("enabled".into(), Value::Bool(self.enabled));
        let ids: Vec<Value> = depends_on.iter().map(|id| Value::from(id.0)).collect();
        body.insert("dependsOn".into(), Value::Array(ids));
        (Value::Object(body), unread)
    }
}

/// Labels as the editor shows them: `key=value`, one a line.
fn label_lines(labels: &Labels) -> String {
    let lines: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    lines.join("\n")
}
