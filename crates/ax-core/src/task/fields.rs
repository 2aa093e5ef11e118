//! A task's fields, each declared once: its name (in the API, in files of tasks and in the
//! console's forms), its type and bounds, its default, the `ax_task` column that stores it, a
//! line of doc and an example. Made from this list: the fields a task body may hold and the
//! bounds and defaults the API checks them against, naming the field in its 400s
//! (`ax_server::api::validate`), the OpenAPI schema, the audit diff, `ax apply`'s difference,
//! `ax export`'s defaults left out, and the console editor's numbers with their hints. The
//! stored row, the view and the editor's form name each field in Rust; tests that go over
//! every field here fail when one of them misses one (`tests` below, and those of
//! `console::editor`).

use serde_json::{json, Value};

use crate::run::OverlapPolicy;

/// One field of a task's definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Its name in the API, in files of tasks and in the console's forms (camelCase).
    pub name: &'static str,
    pub kind: Kind,
    /// Its value when a body leaves it out or sends `null`.
    pub default: Default,
    /// The `ax_task` column that stores it; `None`: a table of its own holds it.
    pub column: Option<&'static str>,
    /// What it means, in a line.
    pub doc: &'static str,
    /// How the console's editor labels its input.
    pub label: &'static str,
    /// A valid value other than its default, as JSON text: the OpenAPI example, and what the
    /// tests give each field to see it reach every view.
    pub example: &'static str,
}

/// What a field holds, with its bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Text of 1 to `max` characters, no control or Unicode format character.
    Name {
        max: usize,
    },
    /// 1 to `max` of `A-Z a-z 0-9 _ . : -` (it appears in URL paths).
    Scene {
        max: usize,
    },
    /// A cron expression that fires, at most `max` characters as stored (trimmed).
    Cron {
        max: usize,
    },
    /// An IANA time zone name.
    Zone,
    /// An `http` or `https` URL of at most `max` characters as written and as stored.
    Url {
        max: usize,
    },
    /// A JSON object of at most `max_bytes` as text.
    Object {
        max_bytes: usize,
    },
    /// An integer from `min` to `max`.
    Integer {
        min: i64,
        max: i64,
    },
    Boolean,
    /// Ids of existing tasks, at most `max` (duplicates dropped).
    TaskIds {
        max: usize,
    },
    /// One of these names.
    Choice(&'static [&'static str]),
    /// An executor group's name (`[a-z0-9_.-]`, at most `max`), a path on its members, and
    /// optionally a routing of the task's own (see `crate::task::executor`).
    Executor {
        max: usize,
    },
    /// Up to `max` keys of `key_chars` of `a-z 0-9 _ . -`, each with a string of at most
    /// `value_chars` characters (see `crate::task::labels`).
    Labels {
        max: usize,
        key_chars: usize,
        value_chars: usize,
    },
    /// An alert rule: the shape of `alerts.default` (see `crate::alerting::AlertRule`).
    AlertRule,
    /// Up to `max` calendars' names and a policy (see `crate::calendar::TaskCalendars`).
    Calendars {
        max: usize,
    },
}

/// A field's value when a body does not give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Default {
    /// A body must give it.
    Required,
    /// A body must give it or the field of this name, not both.
    Either(&'static str),
    Integer(i64),
    Text(&'static str),
    Boolean(bool),
    /// The empty object or list.
    Empty,
    /// `null`: the server's setting of this name applies.
    Setting(&'static str),
    /// `null`: what this says (the next rule out applies, or nothing is checked).
    Null(&'static str),
}

pub const NAME: Field = Field {
    name: "name",
    kind: Kind::Name { max: 128 },
    default: Default::Required,
    column: Some("name"),
    doc: "unique in its scene; no control or Unicode format characters (bidi overrides, \
          zero-width characters)",
    label: "Name",
    example: r#""nightly-report""#,
};

pub const SCENE: Field = Field {
    name: "scene",
    kind: Kind::Scene { max: 64 },
    default: Default::Text("default"),
    column: Some("scene"),
    doc: "the group the task belongs to; it can be paused as a whole",
    label: "Scene",
    example: r#""reports""#,
};

pub const CRON: Field = Field {
    name: "cron",
    kind: Kind::Cron { max: 255 },
    default: Default::Required,
    column: Some("cron"),
    doc: "6 fields sec min hour day month weekday, matched in timeZone",
    label: "Cron (sec min hour day month weekday)",
    example: r#""0 30 2 * * *""#,
};

pub const TIME_ZONE: Field = Field {
    name: "timeZone",
    kind: Kind::Zone,
    default: Default::Text("UTC"),
    column: Some("time_zone"),
    doc: "IANA zone (Europe/Berlin) whose wall-clock time the cron fields match; every time \
          stored and shown stays UTC",
    label: "Time zone (IANA name)",
    example: r#""Europe/Berlin""#,
};

pub const HANDLER_URL: Field = Field {
    name: "handlerUrl",
    kind: Kind::Url { max: 2048 },
    default: Default::Either("executor"),
    column: Some("handler_url"),
    doc: "where each run is POSTed; stored normalised (punycode host, non-ASCII \
          percent-encoded, default port dropped)",
    label: "Handler URL",
    example: r#""http://executor.internal:8080/run""#,
};

pub const PARAMS: Field = Field {
    name: "params",
    kind: Kind::Object {
        max_bytes: 64 * 1024,
    },
    default: Default::Empty,
    column: Some("params"),
    doc: "sent with each run as it is",
    label: "Params (a JSON object sent with each run)",
    example: r#"{"region": "eu"}"#,
};

pub const MAX_RETRY: Field = Field {
    name: "maxRetry",
    kind: Kind::Integer { min: 0, max: 10 },
    default: Default::Integer(3),
    column: Some("max_retry"),
    doc: "attempts after the first one fails",
    label: "Max retries",
    example: "5",
};

pub const TIMEOUT_MS: Field = Field {
    name: "timeoutMs",
    kind: Kind::Integer {
        min: 100,
        max: 24 * 60 * 60 * 1000,
    },
    default: Default::Integer(30_000),
    column: Some("timeout_ms"),
    doc: "how long an attempt may take, in milliseconds",
    label: "Timeout (ms)",
    example: "60000",
};

pub const ENABLED: Field = Field {
    name: "enabled",
    kind: Kind::Boolean,
    default: Default::Boolean(true),
    column: Some("status"),
    doc: "whether it fires on its schedule (status ENABLED) or is paused",
    label: "Enabled (fires on its schedule)",
    example: "false",
};

pub const RETRY_BACKOFF_SECS: Field = Field {
    name: "retryBackoffSecs",
    kind: Kind::Integer {
        min: 1,
        max: 24 * 60 * 60,
    },
    default: Default::Setting("scheduler.retry_backoff_secs"),
    column: Some("retry_backoff_secs"),
    doc: "the wait before the first retry, in seconds",
    label: "Retry back-off (s)",
    example: "30",
};

pub const RETRY_FACTOR: Field = Field {
    name: "retryFactor",
    kind: Kind::Integer { min: 1, max: 10 },
    default: Default::Setting("scheduler.retry_factor"),
    column: Some("retry_factor"),
    doc: "each further retry waits this many times longer",
    label: "Retry factor",
    example: "3",
};

pub const MISFIRE_THRESHOLD_SECS: Field = Field {
    name: "misfireThresholdSecs",
    kind: Kind::Integer {
        min: 1,
        max: 24 * 60 * 60,
    },
    default: Default::Setting("scheduler.misfire_threshold_secs"),
    column: Some("misfire_threshold_secs"),
    doc: "a stalled task's run later than this many seconds is recorded MISSED",
    label: "Misfire threshold (s)",
    example: "600",
};

pub const DEPENDENCY_TIMEOUT_SECS: Field = Field {
    name: "dependencyTimeoutSecs",
    kind: Kind::Integer {
        min: 1,
        max: 7 * 24 * 60 * 60,
    },
    default: Default::Setting("scheduler.dependency_timeout_secs"),
    column: Some("dependency_timeout_secs"),
    doc: "how long a run waits for its upstreams, in seconds",
    label: "Dependency timeout (s)",
    example: "7200",
};

pub const DEPENDS_ON: Field = Field {
    name: "dependsOn",
    kind: Kind::TaskIds { max: 100 },
    default: Default::Empty,
    // ax_task_dependency holds a task's upstreams, a row each.
    column: None,
    doc: "tasks whose latest run at or before a run's time must succeed first (one level)",
    label: "Upstream tasks, one name a line (scene/name for another scene)",
    example: "[1]",
};

pub const OVERLAP: Field = Field {
    name: "overlap",
    kind: Kind::Choice(OverlapPolicy::NAMES),
    default: Default::Text("ALLOW"),
    column: Some("overlap"),
    doc: "what a run due while an earlier run of the task is open does: ALLOW runs both, SKIP \
          records the new run SKIPPED, BUFFER_ONE holds it PENDING until the earlier one is \
          final (a further one is SKIPPED), REPLACE cancels the earlier one",
    label: "When a run is due while an earlier one is open",
    example: r#""SKIP""#,
};

pub const JITTER_SECS: Field = Field {
    name: "jitterSecs",
    kind: Kind::Integer { min: 0, max: 3600 },
    default: Default::Integer(0),
    column: Some("jitter_secs"),
    doc: "each run is dispatched up to this many seconds after its time, by an offset fixed \
          by (taskId, scheduledAt)",
    label: "Jitter (s)",
    example: "15",
};

pub const LABELS: Field = Field {
    name: "labels",
    kind: Kind::Labels {
        max: 16,
        key_chars: 63,
        value_chars: 256,
    },
    default: Default::Empty,
    column: Some("labels"),
    doc: "string keys of 1-63 of a-z 0-9 _ . - to string values; the task list filters by \
          one (label=KEY=VALUE)",
    label: "Labels, one key=value a line",
    example: r#"{"team": "billing", "tier": "1"}"#,
};

pub const EXECUTOR: Field = Field {
    name: "executor",
    kind: Kind::Executor { max: 64 },
    default: Default::Either("handlerUrl"),
    column: Some("executor"),
    doc: "instead of handlerUrl: `{group, path, routing?}`, each run POSTed to a member of the \
          executor group (its base URL + path), picked by the group's routing or this one",
    label: "Executor group, instead of the handler URL (JSON: {\"group\": \"billing\", \"path\": \"/jobs/x\"})",
    example: r#"{"group": "billing", "path": "/jobs/reconcile"}"#,
};

pub const ALERTS: Field = Field {
    name: "alerts",
    kind: Kind::AlertRule,
    default: Default::Null("its scene's rule, else the configured alerts.default"),
    column: Some("alerts"),
    doc: "the task's own alert rule, `{events, channels, threshold, windowSecs, silenceSecs}` \
          (the shape of alerts.default); a paused task is muted",
    label: "Alert rule of its own (JSON, the shape of alerts.default; empty: the scene's or the default)",
    example: r#"{"events": ["FAILED", "LAG"], "channels": [], "threshold": 2, "windowSecs": 600,
        "silenceSecs": 3600}"#,
};

pub const ALERT_LAG_MS: Field = Field {
    name: "alertLagMs",
    kind: Kind::Integer {
        min: 1,
        max: 24 * 60 * 60 * 1000,
    },
    default: Default::Null("no LAG alert"),
    column: Some("alert_lag_ms"),
    doc: "a run first dispatched more than this many milliseconds after it was due (its time \
          plus its jitter) makes a LAG alert event",
    label: "Alert when dispatch lags by more than (ms)",
    example: "2000",
};

pub const CALENDARS: Field = Field {
    name: "calendars",
    kind: Kind::Calendars {
        max: crate::calendar::MAX_EXCLUDED,
    },
    default: Default::Null("no days off"),
    column: Some("calendars"),
    doc: "`{exclude, policy}`: a fire whose day, in timeZone, is in one of the calendars named in \
          exclude is left out (policy SKIP, the default) or fires at the same time on the \
          nearest open day before (PREVIOUS_OPEN_DAY) or after (NEXT_OPEN_DAY)",
    label: "Calendars of days off (JSON: {\"exclude\": [\"holidays\"], \"policy\": \"SKIP\"})",
    example: r#"{"exclude": ["holidays"], "policy": "NEXT_OPEN_DAY"}"#,
};

/// Every field, in the order the audit log and `ax apply` list changes.
pub const ALL: [&Field; 21] = [
    &NAME,
    &SCENE,
    &CRON,
    &TIME_ZONE,
    &CALENDARS,
    &HANDLER_URL,
    &EXECUTOR,
    &PARAMS,
    &MAX_RETRY,
    &TIMEOUT_MS,
    &ENABLED,
    &RETRY_BACKOFF_SECS,
    &RETRY_FACTOR,
    &MISFIRE_THRESHOLD_SECS,
    &DEPENDENCY_TIMEOUT_SECS,
    &DEPENDS_ON,
    &OVERLAP,
    &JITTER_SECS,
    &LABELS,
    &ALERTS,
    &ALERT_LAG_MS,
];

/// The names of every field: what a task body may hold.
pub const NAMES: [&str; ALL.len()] = {
    let mut names = [""; ALL.len()];
    let mut n = 0;
    while n < ALL.len() {
        names[n] = ALL[n].name;
        n += 1;
    }
    names
};

/// The field of this name.
pub fn named(name: &str) -> Option<&'static Field> {
    ALL.into_iter().find(|field| field.name == name)
}

impl Field {
    /// An integer field's bounds (a compile error, where it is used in a `const`, for a field
    /// of another kind).
    pub const fn range(&self) -> (i64, i64) {
        match self.kind {
            Kind::Integer { min, max } => (min, max),
            _ => panic!("not an integer field"),
        }
    }

    /// The most characters (bytes of an object, ids of a list) a field holds.
    pub const fn max(&self) -> usize {
        match self.kind {
            Kind::Name { max }
            | Kind::Scene { max }
            | Kind::Cron { max }
            | Kind::Url { max }
            | Kind::TaskIds { max } => max,
            Kind::Object { max_bytes } => max_bytes,
            _ => panic!("a field without a length"),
        }
    }

    /// An integer field's default.
    pub const fn default_integer(&self) -> i64 {
        match self.default {
            Default::Integer(n) => n,
            _ => panic!("no integer default"),
        }
    }

    /// A boolean field's default.
    pub const fn default_bool(&self) -> bool {
        match self.default {
            Default::Boolean(value) => value,
            _ => panic!("no boolean default"),
        }
    }

    /// A text field's default.
    pub const fn default_text(&self) -> &'static str {
        match self.default {
            Default::Text(text) => text,
            _ => panic!("no text default"),
        }
    }

    /// Its default as a JSON value; `None` when a body must give it.
    pub fn default_json(&self) -> Option<Value> {
        Some(match self.default {
            Default::Required | Default::Either(_) => return None,
            Default::Integer(n) => json!(n),
            Default::Text(text) => json!(text),
            Default::Boolean(value) => json!(value),
            Default::Empty => match self.kind {
                Kind::TaskIds { .. } => json!([]),
                _ => json!({}),
            },
            Default::Setting(_) | Default::Null(_) => Value::Null,
        })
    }

    /// The example as a JSON value.
    pub fn example_json(&self) -> Value {
        serde_json::from_str(self.example).unwrap_or(Value::Null)
    }

    /// Whether a file of tasks leaves the field out at this value: `null`, or its default.
    pub fn left_out(&self, value: &Value) -> bool {
        value.is_null() || self.default_json().as_ref() == Some(value)
    }

    /// What the editor says beside a number: its bounds and default.
    pub fn hint(&self) -> String {
        let bounds = match self.kind {
            Kind::Integer { min, max } => format!("{min}-{max}"),
            _ => String::new(),
        };
        match self.default {
            Default::Setting(_) => format!("{bounds}; empty: the server's default"),
            Default::Null(meaning) => format!("{bounds}; empty: {meaning}"),
            Default::Integer(n) => format!("{bounds}; default {n}"),
            _ => bounds,
        }
    }

    /// The field's OpenAPI schema: its type, bounds, default, doc and example.
    pub fn schema(&self) -> Value {
        let mut schema = match self.kind {
            Kind::Name { max } => json!({"type": "string", "minLength": 1, "maxLength": max}),
            Kind::Scene { max } => json!({"type": "string", "minLength": 1, "maxLength": max,
                "pattern": "^[A-Za-z0-9_.:-]+$"}),
            Kind::Cron { max } => json!({"type": "string", "maxLength": max}),
            Kind::Zone => json!({"type": "string"}),
            Kind::Url { max } => json!({"type": "string", "format": "uri", "maxLength": max}),
            Kind::Object { .. } => json!({"type": "object"}),
            Kind::Integer { min, max } => {
                json!({"type": "integer", "minimum": min, "maximum": max})
            }
            Kind::Boolean => json!({"type": "boolean"}),
            Kind::TaskIds { max } => json!({"type": "array", "maxItems": max,
                "items": {"type": "integer", "minimum": 1}}),
            Kind::Choice(names) => json!({"type": "string", "enum": names}),
            Kind::Labels {
                max, value_chars, ..
            } => json!({"type": "object", "maxProperties": max,
                "additionalProperties": {"type": "string", "maxLength": value_chars}}),
            Kind::Executor { max } => json!({"type": "object", "required": ["group"],
                "additionalProperties": false, "properties": {
                    "group": {"type": "string", "maxLength": max, "pattern": "^[a-z0-9_.-]+$"},
                    "path": {"type": "string"},
                    "routing": {"type": "string", "enum": crate::dispatch::routing::Routing::NAMES}}}),
            Kind::AlertRule => json!({"type": "object", "additionalProperties": false,
                "properties": {
                    "events": {"type": "array",
                        "items": {"type": "string", "enum": crate::alerting::AlertEvent::NAMES}},
                    "channels": {"type": "array", "items": {"type": "string"}},
                    "threshold": {"type": "integer", "minimum": 1},
                    "windowSecs": {"type": "integer", "minimum": 1},
                    "silenceSecs": {"type": "integer", "minimum": 0}}}),
            Kind::Calendars { max } => json!({"type": "object", "additionalProperties": false,
                "properties": {
                    "exclude": {"type": "array", "maxItems": max,
                        "items": {"type": "string", "pattern": "^[a-z0-9_.-]{1,64}$"}},
                    "policy": {"type": "string", "enum": crate::calendar::CalendarPolicy::NAMES,
                        "default": "SKIP"}}}),
        };
        let doc = match self.kind {
            Kind::Object { max_bytes } => format!("{}; at most {} KiB", self.doc, max_bytes / 1024),
            _ => self.doc.to_string(),
        };
        schema["description"] = match self.default {
            Default::Setting(setting) => json!(format!("{doc}; null: the server's {setting}")),
            Default::Null(meaning) => json!(format!("{doc}; null: {meaning}")),
            Default::Either(other) => json!(format!("{doc}; a task gives this or {other}")),
            _ => json!(doc),
        };
        if let Default::Setting(_) | Default::Null(_) = self.default {
            schema["nullable"] = json!(true);
        }
        if let Some(default) = self.default_json().filter(|value| !value.is_null()) {
            schema["default"] = default;
        }
        schema["example"] = self.example_json();
        schema
    }
}

/// The OpenAPI schema of a task body: every field, those without a default required.
pub fn input_schema() -> Value {
    let properties: serde_json::Map<String, Value> = ALL
        .iter()
        .map(|field| (field.name.to_string(), field.schema()))
        .collect();
    let required: Vec<&str> = ALL
        .iter()
        .filter(|field| field.default == Default::Required)
        .map(|field| field.name)
        .collect();
    json!({"type": "object", "required": required, "properties": properties})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_leaves_out_the_defaults() {
        for field in ALL {
            assert!(field.left_out(&Value::Null), "{}", field.name);
            if let Some(default) = field.default_json() {
                assert!(field.left_out(&default), "{}", field.name);
            }
            assert!(!field.left_out(&field.example_json()), "{}", field.name);
        }
        assert!(DEPENDS_ON.left_out(&json!([])) && LABELS.left_out(&json!({})));
        assert!(PARAMS.left_out(&json!({})) && MAX_RETRY.left_out(&json!(3)));
        assert!(SCENE.left_out(&json!("default")) && !MAX_RETRY.left_out(&json!(2)));
    }

    #[test]
    fn the_schema_has_every_field() {
        let schema = input_schema();
        for field in ALL {
            let property = &schema["properties"][field.name];
            assert!(property["description"].is_string(), "{}", field.name);
            assert_eq!(property["example"], field.example_json(), "{}", field.name);
        }
        assert_eq!(schema["required"], json!(["name", "cron"]));
        assert_eq!(
            schema["properties"]["executor"]["required"],
            json!(["group"])
        );
        assert_eq!(schema["properties"]["jitterSecs"]["maximum"], 3600);
        assert_eq!(schema["properties"]["retryFactor"]["nullable"], json!(true));
        assert_eq!(schema["properties"]["labels"]["maxProperties"], 16);
    }

    #[test]
    fn the_api_page_lists_every_field() {
        let readme = include_str!("../../../../docs/api.md");
        for field in ALL {
            assert!(
                readme.contains(&format!("| `{}` |", field.name)),
                "docs/api.md's task body table lacks {}",
                field.name
            );
        }
    }
}
