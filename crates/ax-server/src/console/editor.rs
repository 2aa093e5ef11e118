//! The task editor (`/console/tasks/new`, `/console/tasks/{id}/edit`): every field of a task,
//! sent through the API's own validation and the same service calls, with each error beside
//! the field it names. A preview lists the next fire times; the script keeps it up to date from
//! `GET /api/cron/next` as the expression or the zone is typed.

use std::collections::HashMap;

use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, Markup};
use serde_json::{Map, Value};

use super::filters;
use super::layout::pretty_json;
use super::layout::{self, notice_link, page, Notice, Section};
use super::paths::task_href;
use super::session::{csrf_field, Submitted, Visitor};
use super::tasks::{self, parse_task_id};
use super::{admins_only, ok, see_other, ConsoleError};
use crate::api::json;
use crate::api::validate::{self, DEFAULT_MAX_RETRY, DEFAULT_SCENE, DEFAULT_TIMEOUT_MS};
use crate::error::ApiError;
use crate::service::error::ServiceError;
use crate::service::task_details::TaskDetails;
use crate::service::Service;
use crate::web::ApiState;
use ax_core::run::{OverlapPolicy, TaskId};
use ax_core::task::fields::{
    self, Field, Kind, ALERTS, CRON, DEPENDS_ON, ENABLED, EXECUTOR, HANDLER_URL, LABELS, NAME,
    OVERLAP, PARAMS, SCENE, TIME_ZONE,
};
use ax_core::task::labels::{Labels, MAX_KEY_CHARS, MAX_VALUE_CHARS};
use ax_store::queries::tasks::Versions;
use ax_store::rows::models::{Task, TaskStatus};

/// Names of a scene's tasks the dependency field lists.
const SUGGESTED_NAMES: i64 = 200;

/// The editor's fields as text, as shown and as sent back. The form's field names are the
/// API's, so an API error's `field` names the input it belongs beside.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Draft {
    name: String,
    scene: String,
    cron: String,
    time_zone: String,
    handler_url: String,
    /// Instead of the handler URL: `{"group": …, "path": …}` as JSON text.
    executor: String,
    params: String,
    max_retry: String,
    timeout_ms: String,
    retry_backoff_secs: String,
    retry_factor: String,
    misfire_threshold_secs: String,
    dependency_timeout_secs: String,
    /// Upstream tasks by name, one a line: `name` in this task's scene, else `scene/name`.
    depends_on: String,
    overlap: String,
    jitter_secs: String,
    /// One `key=value` a line.
    labels: String,
    /// The task's own alert rule as JSON text; empty: the scene's or the default.
    alerts: String,
    alert_lag_ms: String,
    enabled: bool,
}

/// The numeric fields, as declared: their form (and API) names, labels and bounds.
fn numbers() -> impl Iterator<Item = &'static Field> {
    fields::ALL
        .into_iter()
        .filter(|field| matches!(field.kind, Kind::Integer { .. }))
}

impl Draft {
    /// A new task's fields, in `scene` when given.
    fn new(scene: Option<&str>) -> Draft {
        Draft {
            name: String::new(),
            scene: scene.unwrap_or(DEFAULT_SCENE).to_string(),
            cron: "0 * * * * *".into(),
            time_zone: "UTC".into(),
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
    fn of(task: &Task, upstreams: &[Task]) -> Draft {
        let number = |value: Option<i32>| value.map(|v| v.to_string()).unwrap_or_default();
        let depends_on: Vec<String> = upstreams
            .iter()
            .map(|upstream| upstream_name(&task.scene, upstream))
            .collect();
        Draft {
            name: task.name.clone(),
            scene: task.scene.clone(),
            cron: task.cron.clone(),
            time_zone: task.time_zone.clone(),
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
    fn sent(form: &Submitted) -> Draft {
        let text = |name: &str| form.get(name).unwrap_or_default().to_string();
        Draft {
            name: text("name"),
            scene: text("scene"),
            cron: text("cron"),
            time_zone: text("timeZone"),
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
    fn texts(&self) -> Vec<(&'static str, String)> {
        let mut texts = vec![
            ("name", self.name.clone()),
            ("scene", self.scene.clone()),
            ("cron", self.cron.clone()),
            ("timeZone", self.time_zone.clone()),
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
    fn changes_from(&self, other: &Draft) -> Vec<(&'static str, String)> {
        let theirs = other.texts();
        self.texts()
            .into_iter()
            .zip(theirs)
            .filter(|(mine, theirs)| mine.1 != theirs.1)
            .map(|(mine, _)| mine)
            .collect()
    }

    fn number(&self, name: &str) -> &str {
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
    fn scene_or_default(&self) -> &str {
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
    fn upstream_lines(&self) -> Vec<&str> {
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
    fn body(&self, depends_on: &[TaskId]) -> (Value, Vec<ApiError>) {
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

/// How an upstream is named from a task of `scene`.
fn upstream_name(scene: &str, upstream: &Task) -> String {
    if upstream.scene == scene {
        upstream.name.clone()
    } else {
        format!("{}/{}", upstream.scene, upstream.name)
    }
}

/// The (scene, name) pairs a line of the dependency field may mean, in order of preference: a
/// name in the task's own scene, else `scene/name` (scenes hold no `/`).
fn candidates(scene: &str, line: &str) -> Vec<(String, String)> {
    let mut pairs = vec![(scene.to_string(), line.to_string())];
    if let Some((other, name)) = line.split_once('/') {
        pairs.push((other.to_string(), name.to_string()));
    }
    pairs
}

/// The ids of the draft's upstreams, by name; an unknown name is an error of `dependsOn`.
async fn resolve_upstreams(service: &Service, draft: &Draft) -> Result<Vec<TaskId>, ConsoleError> {
    let scene = draft.scene_or_default();
    let lines = draft.upstream_lines();
    if lines.is_empty() {
        return Ok(Vec::new());
    }
    let wanted: Vec<(String, String)> = lines
        .iter()
        .flat_map(|line| candidates(scene, line))
        .collect();
    let found = service.tasks_named(wanted).await?;
    let by_name: HashMap<(&str, &str), TaskId> = found
        .iter()
        .map(|task| ((task.scene.as_str(), task.name.as_str()), task.id))
        .collect();
    let mut ids = Vec::with_capacity(lines.len());
    for line in lines {
        let id = candidates(scene, line)
            .iter()
            .find_map(|(s, n)| by_name.get(&(s.as_str(), n.as_str())).copied());
        match id {
            Some(id) => ids.push(id),
            None => {
                let message = format!("no task is named `{line}` in scene `{scene}` (another scene's task: scene/name)");
                return Err(ApiError::invalid("dependsOn", message).into());
            }
        }
    }
    Ok(ids)
}

/// Every refusal of a save, the API's and the editor's own (a field that does not read, an
/// upstream of no task), as one error: the editor's refusal of a field stands for the API's of
/// it, and all are in the order the fields are declared.
fn every_refusal(own: Vec<ApiError>, api: Option<ApiError>) -> ApiError {
    let own_fields: Vec<&str> = own
        .iter()
        .filter_map(|err| err.field())
        .map(form_field)
        .collect();
    let mut refusals: Vec<ApiError> = Vec::new();
    if let Some(api) = api {
        let fields = api.field_errors();
        if fields.is_empty() {
            refusals.push(api);
        }
        refusals.extend(
            fields
                .into_iter()
                .filter(|refused| !own_fields.contains(&form_field(&refused.field)))
                .map(|refused| ApiError::invalid(refused.field, refused.message)),
        );
    }
    refusals.extend(own);
    let position = |err: &ApiError| {
        let field = err.field().map(form_field);
        fields::ALL
            .iter()
            .position(|declared| Some(declared.name) == field)
            .unwrap_or(fields::ALL.len())
    };
    refusals.sort_by_key(position);
    ApiError::all(refusals)
}

/// A refusal of a save: the field named, if any, and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refusal {
    field: Option<String>,
    message: String,
}

/// Why the editor is shown again after a save: refused, or the task changed since the form
/// was opened (the form then shows the task as it is, and the values sent that differ).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Unsaved {
    /// Each field refused (one refusal without a field when the error names none).
    Refused(Vec<Refusal>),
    Changed(Vec<(&'static str, String)>),
}

impl Unsaved {
    fn refusals(&self) -> &[Refusal] {
        match self {
            Unsaved::Refused(refusals) => refusals,
            Unsaved::Changed(_) => &[],
        }
    }
}

impl Refusal {
    /// Every field `err` refuses, or its message alone when it names none (a conflict).
    fn all(err: &ApiError) -> Vec<Refusal> {
        let fields = err.field_errors();
        if fields.is_empty() {
            return vec![Refusal {
                field: err.field().map(str::to_string),
                message: err.to_string(),
            }];
        }
        fields
            .into_iter()
            .map(|refused| Refusal {
                field: Some(refused.field),
                message: refused.message,
            })
            .collect()
    }

    /// The message of the refusals of `field`, or of a part of it (`labels.team`).
    fn for_field(refusals: &[Refusal], field: &str) -> Option<String> {
        let messages: Vec<&str> = refusals
            .iter()
            .filter(|r| r.field.as_deref().map(form_field) == Some(field))
            .map(|r| r.message.as_str())
            .collect();
        (!messages.is_empty()).then(|| messages.join("; "))
    }

    /// How the summary names its field: the input's label.
    fn label(&self) -> Option<&'static str> {
        fields::named(form_field(self.field.as_deref()?)).map(|declared| declared.label)
    }
}

/// The form's field an error's field is in: `labels` for `labels.team`.
fn form_field(field: &str) -> &str {
    field.split('.').next().unwrap_or(field)
}

/// Which task the editor saves: a new one, or task `id` at the version the form was opened on
/// (none: whatever version it is at).
#[derive(Debug, Clone, Copy)]
enum Target {
    New,
    Existing { id: TaskId, version: Option<i64> },
}

impl Target {
    fn action(self) -> String {
        match self {
            Target::New => "/console/tasks/new".into(),
            Target::Existing { id, .. } => format!("{}/edit", task_href(id)),
        }
    }
}

/// `GET /console/tasks/new?scene=`.
pub async fn new_form(
    state: web::Data<ApiState>,
    visitor: Visitor,
    req: HttpRequest,
) -> Result<HttpResponse, ConsoleError> {
    admins_only(&visitor)?;
    let params = filters::params(&req);
    let draft = Draft::new(params.get("scene").map(String::as_str));
    editor(&state, &visitor, Target::New, &draft, None).await
}

/// `POST /console/tasks/new`: the API's create.
pub async fn create(
    state: web::Data<ApiState>,
    visitor: Visitor,
    form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    save(&state, &visitor, Target::New, Draft::sent(&form)).await
}

/// `GET /console/tasks/{id}/edit`.
pub async fn edit_form(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    admins_only(&visitor)?;
    let id = parse_task_id(&path)?;
    let details = state.service.task(id).await?;
    let upstreams = state
        .service
        .tasks_by_id(details.depends_on.clone())
        .await?;
    let draft = Draft::of(&details.task, &upstreams);
    let target = Target::Existing {
        id,
        version: Some(details.task.version),
    };
    editor(&state, &visitor, target, &draft, None).await
}

/// `POST /console/tasks/{id}/edit`: the API's replace (`PUT`), with the version the form was
/// opened on as its `If-Match`.
pub async fn update(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
    form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let id = parse_task_id(&path)?;
    let version = form.get("version").and_then(|v| v.parse().ok());
    let target = Target::Existing { id, version };
    save(&state, &visitor, target, Draft::sent(&form)).await
}

/// Saves the draft as the API would; a refusal shows the editor again with its message, and a
/// task changed since the form was opened shows it as it is now, the edit not applied.
async fn save(
    state: &ApiState,
    visitor: &Visitor,
    target: Target,
    draft: Draft,
) -> Result<HttpResponse, ConsoleError> {
    let (target, draft, unsaved, status) = match saved(state, visitor, target, &draft).await {
        Ok(details) => {
            let notice = match target {
                Target::New => Notice::Created,
                Target::Existing { .. } => Notice::Saved,
            };
            return Ok(see_other(&notice_link(&task_href(details.task.id), notice)));
        }
        Err(ConsoleError::Refused(err)) => {
            let status = actix_web::ResponseError::status_code(&err);
            (target, draft, Unsaved::Refused(Refusal::all(&err)), status)
        }
        Err(ConsoleError::Changed(current)) => {
            let upstreams = state
                .service
                .tasks_by_id(current.depends_on.clone())
                .await?;
            let now = Draft::of(&current.task, &upstreams);
            let yours = draft.changes_from(&now);
            let target = Target::Existing {
                id: current.task.id,
                version: Some(current.task.version),
            };
            let status = actix_web::http::StatusCode::PRECONDITION_FAILED;
            (target, now, Unsaved::Changed(yours), status)
        }
        Err(other) => return Err(other),
    };
    let mut response = editor(state, visitor, target, &draft, Some(&unsaved)).await?;
    *response.status_mut() = status;
    Ok(response)
}

async fn saved(
    state: &ApiState,
    visitor: &Visitor,
    target: Target,
    draft: &Draft,
) -> Result<TaskDetails, ConsoleError> {
    // An unknown upstream is refused with the other fields, checked without it.
    let (upstreams, mut own) = match resolve_upstreams(&state.service, draft).await {
        Ok(ids) => (ids, Vec::new()),
        Err(ConsoleError::Refused(err)) => (Vec::new(), vec![err]),
        Err(other) => return Err(other),
    };
    let (body, unread) = draft.body(&upstreams);
    own.extend(unread);
    let input = match validate::task_input(body, &state.security.allowlist) {
        Ok(input) if own.is_empty() => input,
        checked => return Err(every_refusal(own, checked.err()).into()),
    };
    let actor = &visitor.principal;
    let saved = match target {
        Target::New => state.service.create_task(input, actor).await,
        Target::Existing { id, version } => {
            let versions = version.map_or(Versions::Any, |v| Versions::OneOf(vec![v]));
            state.service.update_task(id, versions, input, actor).await
        }
    };
    saved.map_err(|err| match err {
        ServiceError::Stale(current) => ConsoleError::Changed(current),
        other => other.into(),
    })
}

/// The editor page, with why the last save did not happen, if it did not.
async fn editor(
    state: &ApiState,
    visitor: &Visitor,
    target: Target,
    draft: &Draft,
    unsaved: Option<&Unsaved>,
) -> Result<HttpResponse, ConsoleError> {
    let suggestions = state
        .service
        .names_in_scene(draft.scene_or_default().to_string(), SUGGESTED_NAMES)
        .await?;
    let preview = preview(state, draft);
    let title = match target {
        Target::New => "New task".to_string(),
        Target::Existing { .. } => format!("Edit task {}", draft.name),
    };
    let page = page(
        visitor,
        &title,
        Some(Section::Tasks),
        editor_form(visitor, target, draft, unsaved, &suggestions, preview),
    );
    Ok(ok(page))
}

/// The preview of the draft's schedule, as `GET /api/cron/next` reads it (the same checks).
fn preview(state: &ApiState, draft: &Draft) -> Markup {
    let query: HashMap<String, String> = [("expr", &draft.cron), ("tz", &draft.time_zone)]
        .into_iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(key, value)| (key.to_string(), value.clone()))
        .collect();
    let now = state.service.now();
    match validate::cron_preview(&query, now) {
        Ok((schedule, from, count)) => html! {
            p #preview-description { (schedule.describe()) }
            (tasks::upcoming(&schedule, &schedule.upcoming(from, count)))
        },
        Err(err) => html! { p.error #preview-description { (err.to_string()) } },
    }
}

fn editor_form(
    visitor: &Visitor,
    target: Target,
    draft: &Draft,
    unsaved: Option<&Unsaved>,
    suggestions: &[String],
    preview: Markup,
) -> Markup {
    let refusals = unsaved.map_or(&[][..], Unsaved::refusals);
    let error = |field: &str| Refusal::for_field(refusals, field);
    let zones = ax_cron::Zone::names();
    let overlaps: Vec<&str> = OverlapPolicy::ALL.iter().map(|p| p.as_str()).collect();
    let (back, version) = match target {
        Target::New => ("/console/tasks".to_string(), None),
        Target::Existing { id, version } => (task_href(id), version),
    };
    html! {
        @match unsaved {
            Some(Unsaved::Refused(refusals)) => {
                div.error role="alert" #form-error {
                    @match refusals.len() {
                        1 => { "Not saved; change this field:" }
                        n => { "Not saved; change these " (n) " fields:" }
                    }
                    ul.refusals {
                        @for refusal in refusals {
                            li {
                                @match (&refusal.field, refusal.label()) {
                                    (Some(field), Some(label)) => {
                                        a href=(format!("#{}", form_field(field))) { (label) } ": "
                                    }
                                    _ => {}
                                }
                                (refusal.message)
                            }
                        }
                    }
                }
            }
            Some(Unsaved::Changed(yours)) => {
                div.error role="alert" #form-error {
                    "Not saved: this task changed since you opened it. The form shows it as it is now; your edit was not applied."
                    @if !yours.is_empty() {
                        " What you had sent, where it differs:"
                        ul.changes { @for (name, value) in yours { li { code { (name) } ": " code { (value) } } } }
                    }
                }
            }
            None => {}
        }
        form.editor method="post" action=(target.action()) novalidate {
            (csrf_field(visitor))
            @if let Some(version) = version { input type="hidden" name="version" value=(version); }
            fieldset {
                legend { "Task" }
                (layout::input("name", NAME.label, "text", Some(&draft.name), error("name").as_deref()))
                (layout::input("scene", SCENE.label, "text", Some(&draft.scene), error("scene").as_deref()))
                (layout::input("handlerUrl", HANDLER_URL.label, "url", Some(&draft.handler_url), error("handlerUrl").as_deref()))
                (layout::input("executor", EXECUTOR.label, "text", Some(&draft.executor), error("executor").as_deref()))
                (layout::checkbox("enabled", ENABLED.label, draft.enabled))
            }
            fieldset {
                legend { "Schedule" }
                (layout::input("cron", CRON.label, "text", Some(&draft.cron), error("cron").as_deref()))
                (layout::searchable("timeZone", TIME_ZONE.label, &draft.time_zone, &zones, error("timeZone").as_deref()))
                section.preview aria-labelledby="preview-heading" {
                    h2 #preview-heading { "Next 10 fire times" }
                    div #preview aria-live="polite" { (preview) }
                }
                (layout::select_of("overlap", OVERLAP.label, &overlaps, &draft.overlap, error("overlap").as_deref()))
            }
            fieldset {
                legend { "Params" }
                (layout::textarea("params", PARAMS.label, &draft.params, 6, error("params").as_deref()))
                p.hint #params-check aria-live="polite" {}
            }
            fieldset {
                legend { "Dependencies" }
                (layout::textarea("dependsOn", DEPENDS_ON.label, &draft.depends_on, 3, error("dependsOn").as_deref()))
                @if !suggestions.is_empty() {
                    details {
                        summary { "Tasks of scene " (draft.scene_or_default()) }
                        ul.names { @for name in suggestions { li { code { (name) } } } }
                    }
                }
            }
            fieldset {
                legend { "Retries and limits" }
                div.grid {
                    @for field in numbers() {
                        (layout::number(field.name, field.label, &field.hint(), draft.number(field.name), error(field.name).as_deref()))
                    }
                }
            }
            fieldset {
                legend { "Labels" }
                (layout::textarea("labels", LABELS.label, &draft.labels, 3, error("labels").as_deref()))
                p.hint { "The tasks list filters by one (key=value). A key is 1-" (MAX_KEY_CHARS) " of a-z 0-9 _ . -; a value at most " (MAX_VALUE_CHARS) " characters." }
            }
            fieldset {
                legend { "Alerts" }
                (layout::textarea("alerts", ALERTS.label, &draft.alerts, 4, error("alerts").as_deref()))
                p.hint { "For example " code { r#"{"events": ["FAILED", "RESOLVED"], "channels": ["ops-hook"], "threshold": 3}"# } "; a paused task is muted." }
            }
            div.actions {
                button type="submit" { "Save task" }
                a href=(back) { "Cancel" }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                ("ops".to_string(), "reports/daily".to_string()),
                ("reports".to_string(), "daily".to_string())
            ]
        );
        assert_eq!(candidates("ops", "daily").len(), 1);
    }
}
