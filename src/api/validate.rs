//! Input validation: every rule of the HTTP contract, each failure naming its field.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::{Map, Value};

use crate::clock::{rfc3339, LAST_TIME};
use crate::cron::{CronSchedule, Zone};
use crate::error::ApiError;
use crate::labels::Labels;
use crate::run::{OverlapPolicy, RequestId, RunStatus, TaskId};
use crate::security::Allowlist;
use crate::service::TaskInput;
use crate::store::models::MAX_NAME_CHARS;
use crate::store::queries::instances::{Cursor, InstanceFilter};
use crate::store::queries::Page;
use crate::store::to_db;
use crate::task_fields as fields;
use crate::text;

// A task's bounds and defaults are its fields' (`crate::task_fields`); text limits are those
// of the MySQL columns (VARCHAR counts characters; SQLite has no limit).
pub const MAX_SCENE_CHARS: usize = fields::SCENE.max();
pub const MAX_CRON_CHARS: usize = fields::CRON.max();
pub const MAX_URL_CHARS: usize = fields::HANDLER_URL.max();
/// Far below the MEDIUMTEXT column (16 MiB): a task's params travel with every run.
pub const MAX_PARAMS_BYTES: usize = fields::PARAMS.max();
pub const MAX_UPSTREAMS: usize = fields::DEPENDS_ON.max();
/// Stats windows: one minute to 31 days; one day by default.
pub const STATS_WINDOW_SECS: (i64, i64) = (60, 31 * 24 * 60 * 60);
pub const DEFAULT_STATS_WINDOW_SECS: i64 = 24 * 60 * 60;
pub const DEFAULT_SCENE: &str = fields::SCENE.default_text();
pub const DEFAULT_MAX_RETRY: i32 = fields::MAX_RETRY.default_integer() as i32;
pub const DEFAULT_TIMEOUT_MS: i64 = fields::TIMEOUT_MS.default_integer();
pub const MAX_PAGE_LIMIT: i64 = 500;
pub const DEFAULT_PAGE_LIMIT: i64 = 50;
const MAX_OFFSET: i64 = 1_000_000_000;
/// The times a client may pass (history filters and cursors), both ends included: ax keeps no
/// time before the epoch, and a MySQL DATETIME ends with the year 9999 (SQLite holds any).
pub const TIME_RANGE: (DateTime<Utc>, DateTime<Utc>) = (DateTime::UNIX_EPOCH, LAST_TIME);

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

/// A JSON object with none but these fields.
pub fn object(value: Value, fields: &[&str]) -> Result<Map<String, Value>, ApiError> {
    let Value::Object(object) = value else {
        return Err(ApiError::Invalid {
            field: None,
            message: "the body must be a JSON object".into(),
        });
    };
    if let Some(unknown) = object.keys().find(|k| !fields.contains(&k.as_str())) {
        return Err(ApiError::invalid(
            unknown.clone(),
            format!("unknown field `{unknown}`"),
        ));
    }
    Ok(object)
}

/// Most tasks one bulk registration takes.
pub const MAX_BULK_ITEMS: usize = 1000;

/// A bulk registration body, `{"items": [task bodies], "upsert": bool}`: the tasks, checked
/// each (an error names its item: `items[17].cron`), and whether existing ones are updated.
pub fn bulk(body: &[u8], allowlist: &Allowlist) -> Result<(Vec<TaskInput>, bool), ApiError> {
    let mut body = object(super::json::parse(body)?, &["items", "upsert"])?;
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
    let mut seen: HashMap<(String, String), usize> = HashMap::with_capacity(items.len());
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

/// A task body (`POST /api/tasks`, `PUT /api/tasks/{id}`).
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
    let zone = time_zone(optional_string(&mut body, fields::TIME_ZONE.name)?)?;
    let cron = cron(required_string(&mut body, fields::CRON.name)?)?.in_zone(zone);
    let name = text(
        required_string(&mut body, fields::NAME.name)?,
        fields::NAME.name,
        MAX_NAME_CHARS,
    )?;
    let scene_name = optional_string(&mut body, fields::SCENE.name)?;
    Ok(TaskInput {
        name,
        scene: scene(scene_name.unwrap_or_else(|| DEFAULT_SCENE.into()))?,
        cron,
        handler_url: handler_url(
            required_string(&mut body, fields::HANDLER_URL.name)?,
            allowlist,
        )?,
        params: params(body.remove(fields::PARAMS.name))?,
        max_retry: small(&mut body, fields::MAX_RETRY.name, MAX_RETRY)?
            .unwrap_or(DEFAULT_MAX_RETRY),
        timeout_ms: integer(&mut body, fields::TIMEOUT_MS.name, TIMEOUT_MS)?
            .unwrap_or(DEFAULT_TIMEOUT_MS),
        enabled: match body.remove(fields::ENABLED.name) {
            None | Some(Value::Null) => DEFAULT_ENABLED,
            Some(Value::Bool(enabled)) => enabled,
            Some(_) => {
                return Err(ApiError::invalid(
                    "enabled",
                    "enabled must be true or false",
                ))
            }
        },
        retry_backoff_secs: small(
            &mut body,
            fields::RETRY_BACKOFF_SECS.name,
            RETRY_BACKOFF_SECS,
        )?,
        retry_factor: small(&mut body, fields::RETRY_FACTOR.name, RETRY_FACTOR)?,
        misfire_threshold_secs: small(
            &mut body,
            fields::MISFIRE_THRESHOLD_SECS.name,
            MISFIRE_THRESHOLD_SECS,
        )?,
        dependency_timeout_secs: small(
            &mut body,
            fields::DEPENDENCY_TIMEOUT_SECS.name,
            DEPENDENCY_TIMEOUT_SECS,
        )?,
        depends_on: depends_on(body.remove(fields::DEPENDS_ON.name))?,
        overlap: overlap(optional_string(&mut body, fields::OVERLAP.name)?)?,
        jitter_secs: small(&mut body, fields::JITTER_SECS.name, JITTER_SECS)?
            .unwrap_or(DEFAULT_JITTER_SECS),
        labels: Labels::from_body(body.remove(fields::LABELS.name))
            .map_err(|err| ApiError::invalid(err.field, err.message))?,
    })
}

// The bounds of the integer fields, as the declarations give them (checked when compiled).
const MAX_RETRY: (i64, i64) = fields::MAX_RETRY.range();
const TIMEOUT_MS: (i64, i64) = fields::TIMEOUT_MS.range();
const RETRY_BACKOFF_SECS: (i64, i64) = fields::RETRY_BACKOFF_SECS.range();
const RETRY_FACTOR: (i64, i64) = fields::RETRY_FACTOR.range();
const MISFIRE_THRESHOLD_SECS: (i64, i64) = fields::MISFIRE_THRESHOLD_SECS.range();
const DEPENDENCY_TIMEOUT_SECS: (i64, i64) = fields::DEPENDENCY_TIMEOUT_SECS.range();
const JITTER_SECS: (i64, i64) = fields::JITTER_SECS.range();
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
pub fn scene(value: String) -> Result<String, ApiError> {
    let value = text(value, "scene", MAX_SCENE_CHARS)?;
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_.:-".contains(c);
    if !value.chars().all(allowed) {
        return Err(ApiError::invalid(
            "scene",
            "scene may hold only letters, digits and _ . : -",
        ));
    }
    Ok(value)
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

/// The optional body of a manual run: `{"params": {…}}`; returns the params as JSON text.
pub fn trigger_params(body: &[u8]) -> Result<Option<String>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let mut body = object(super::json::parse(body)?, &["params"])?;
    match body.remove("params") {
        None | Some(Value::Null) => Ok(None),
        value => params(value).map(Some),
    }
}

/// The cursor and page size of `GET /api/audit`: entries older than the cursor's.
pub fn audit_query(query: &HashMap<String, String>) -> Result<(Option<i64>, i64), ApiError> {
    let before = match query.get("cursor") {
        None => None,
        Some(text) => Some(
            text.parse::<i64>()
                .ok()
                .filter(|id| *id > 0)
                .ok_or_else(|| {
                    ApiError::invalid("cursor", "cursor must be a nextCursor from a previous page")
                })?,
        ),
    };
    let limit = query_int(query, "limit", (1, MAX_PAGE_LIMIT))?.unwrap_or(DEFAULT_PAGE_LIMIT);
    Ok((before, limit))
}

/// Most fire times a preview lists, and how many by default.
pub const MAX_PREVIEW_COUNT: i64 = 100;
pub const DEFAULT_PREVIEW_COUNT: i64 = 10;

/// The query of `GET /api/cron/next`: the schedule (`expr` in zone `tz`), the time after which
/// to list (`from`, default now) and how many (`count`).
pub fn cron_preview(
    query: &HashMap<String, String>,
    now: DateTime<Utc>,
) -> Result<(CronSchedule, DateTime<Utc>, usize), ApiError> {
    let expr = query
        .get("expr")
        .ok_or_else(|| ApiError::invalid("expr", "expr is required"))?;
    let schedule =
        CronSchedule::parse(expr).map_err(|err| ApiError::invalid("expr", err.to_string()))?;
    let zone = query
        .get("tz")
        .map_or(Ok(Zone::utc()), |name| zone(name, "tz"))?;
    let from = query_time(query, "from")?.map_or(now, |at| at.and_utc());
    let count = query_int(query, "count", (1, MAX_PREVIEW_COUNT))?.unwrap_or(DEFAULT_PREVIEW_COUNT);
    Ok((schedule.in_zone(zone), from, count as usize))
}

/// A backfill body, `{"from": RFC3339, "to": RFC3339}`: the range `[from, to)`.
pub fn backfill_range(body: &[u8]) -> Result<(DateTime<Utc>, DateTime<Utc>), ApiError> {
    let mut body = object(super::json::parse(body)?, &["from", "to"])?;
    let mut time = |name: &str| -> Result<DateTime<Utc>, ApiError> {
        let text = required_string(&mut body, name)?;
        let at = DateTime::parse_from_rfc3339(&text)
            .map_err(|_| ApiError::invalid(name, format!("{name} must be an RFC3339 time")))?
            .with_timezone(&Utc);
        storable_time(at, name)?;
        Ok(at)
    };
    let (from, to) = (time("from")?, time("to")?);
    if from >= to {
        return Err(ApiError::invalid("to", "to must be later than from"));
    }
    Ok((from, to))
}

/// `windowSecs` of the task stats.
pub fn stats_window(query: &HashMap<String, String>) -> Result<chrono::Duration, ApiError> {
    let secs =
        query_int(query, "windowSecs", STATS_WINDOW_SECS)?.unwrap_or(DEFAULT_STATS_WINDOW_SECS);
    Ok(chrono::Duration::seconds(secs))
}

/// The filters, cursor and page size of `GET /api/instances`.
pub fn history_query(
    query: &HashMap<String, String>,
) -> Result<(InstanceFilter, Option<Cursor>, i64), ApiError> {
    let status = match query.get("status") {
        None => None,
        Some(text) => Some(RunStatus::parse(text).ok_or_else(|| {
            ApiError::invalid("status", format!("status must be {}", RunStatus::choices()))
        })?),
    };
    let filter = InstanceFilter {
        task_id: query
            .get("taskId")
            .map(|id| task_id(id))
            .transpose()
            .map_err(|_| ApiError::invalid("taskId", "taskId must be a positive integer"))?,
        scene: query.get("scene").cloned().map(scene).transpose()?,
        status,
        from: query_time(query, "from")?,
        to: query_time(query, "to")?,
    };
    let cursor = query.get("cursor").map(|c| decode_cursor(c)).transpose()?;
    let limit = query_int(query, "limit", (1, MAX_PAGE_LIMIT))?.unwrap_or(DEFAULT_PAGE_LIMIT);
    Ok((filter, cursor, limit))
}

fn query_time(
    query: &HashMap<String, String>,
    name: &str,
) -> Result<Option<NaiveDateTime>, ApiError> {
    let Some(text) = query.get(name) else {
        return Ok(None);
    };
    let at = DateTime::parse_from_rfc3339(text)
        .map_err(|_| ApiError::invalid(name, format!("{name} must be an RFC3339 time")))?;
    storable_time(at.with_timezone(&Utc), name).map(Some)
}

/// A time a client passed, as stored, if every store can hold it (`TIME_RANGE`); else 400
/// naming `name`, instead of a store error answered as an outage.
fn storable_time(at: DateTime<Utc>, name: &str) -> Result<NaiveDateTime, ApiError> {
    let (first, last) = TIME_RANGE;
    if at < first || at > last {
        return Err(ApiError::invalid(
            name,
            format!(
                "{name} must lie from {} to {}",
                rfc3339(first),
                rfc3339(last)
            ),
        ));
    }
    Ok(to_db(at))
}

/// A history cursor as the client sees it (see [`Cursor::to_text`]).
pub fn encode_cursor(cursor: Cursor) -> String {
    cursor.to_text()
}

fn decode_cursor(text: &str) -> Result<Cursor, ApiError> {
    let cursor = Cursor::from_text(text).ok_or_else(|| {
        ApiError::invalid("cursor", "cursor must be a nextCursor from a previous page")
    })?;
    storable_time(cursor.scheduled_at.and_utc(), "cursor")?;
    Ok(cursor)
}

fn required_string(body: &mut Map<String, Value>, field: &str) -> Result<String, ApiError> {
    optional_string(body, field)?
        .ok_or_else(|| ApiError::invalid(field, format!("{field} is required")))
}

fn optional_string(body: &mut Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    match body.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::invalid(
            field,
            format!("{field} must be a string"),
        )),
    }
}

/// A name-like string: not blank, at most `max` characters, no control or format characters.
fn text(value: String, field: &str, max: usize) -> Result<String, ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::invalid(
            field,
            format!("{field} must not be empty"),
        ));
    }
    if value.chars().count() > max {
        return Err(ApiError::invalid(
            field,
            format!("{field} is longer than {max} characters"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            field,
            format!("{field} contains control characters"),
        ));
    }
    // Bidi overrides and zero-width characters make a name look empty or read as another.
    if let Some(c) = value.chars().find(|&c| text::is_format(c)) {
        return Err(ApiError::invalid(
            field,
            format!(
                "{field} contains an invisible Unicode format character (U+{:04X})",
                u32::from(c)
            ),
        ));
    }
    Ok(value)
}

/// A handler URL in the form the HTTP client sends it, its host on the allowlist.
fn handler_url(raw: String, allowlist: &Allowlist) -> Result<String, ApiError> {
    let invalid = |why: String| ApiError::invalid("handlerUrl", format!("handlerUrl {why}"));
    let url = normalised_url(&raw).map_err(invalid)?;
    // The normalised host: an IDN is matched as the punycode name the client resolves.
    let host = url.host_str().unwrap_or_default();
    if !allowlist.allows(host) {
        return Err(invalid(format!(
            "host `{host}` is not in security.handler_allowlist"
        )));
    }
    Ok(url.into())
}

/// Parses a handler URL into `url::Url`'s serialisation (non-ASCII percent-encoded, IDN host as
/// punycode, default port dropped), which is what gets stored and called; says why when the
/// text is ambiguous or the HTTP client could not send it.
fn normalised_url(raw: &str) -> Result<url::Url, String> {
    if raw.chars().count() > MAX_URL_CHARS {
        return Err(format!("is longer than {MAX_URL_CHARS} characters"));
    }
    unambiguous(raw)?;
    let url = url::Url::parse(raw).map_err(|err| format!("is not a URL: {err}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("must be an http or https URL".into());
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".into());
    }
    if url.fragment().is_some() {
        return Err("must not have a #fragment: it is never sent to the handler".into());
    }
    // Percent-encoding can make the stored form longer than the text as written.
    if url.as_str().len() > MAX_URL_CHARS {
        return Err(format!(
            "is longer than {MAX_URL_CHARS} characters once percent-encoded"
        ));
    }
    awc::http::Uri::try_from(url.as_str())
        .map_err(|err| format!("cannot be sent by the HTTP client ({err}): {url}"))?;
    Ok(url)
}

/// Refuses text the URL parser would silently repair into something the author may not have
/// meant: whitespace and control characters (stripped or removed), backslashes (read as `/`),
/// no `//` or an empty authority (the host taken from elsewhere), and userinfo.
fn unambiguous(raw: &str) -> Result<(), String> {
    if let Some(c) = raw.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "contains whitespace or a control character ({c:?}); percent-encode it"
        ));
    }
    if raw.contains('\\') {
        return Err("contains a backslash; write / or percent-encode it".into());
    }
    let rest = raw.split_once(':').map_or("", |(_, rest)| rest);
    let Some(rest) = rest.strip_prefix("//") else {
        return Err("must start with http:// or https://".into());
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err("must not carry user:password@ (userinfo)".into());
    }
    if authority.is_empty() || authority.starts_with(':') {
        return Err("must name a host".into());
    }
    Ok(())
}

fn params(value: Option<Value>) -> Result<String, ApiError> {
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

fn integer(
    body: &mut Map<String, Value>,
    field: &str,
    (min, max): (i64, i64),
) -> Result<Option<i64>, ApiError> {
    match body.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(ApiError::invalid(
                field,
                format!("{field} must be an integer from {min} to {max}"),
            )),
        },
        Some(_) => Err(ApiError::invalid(
            field,
            format!("{field} must be an integer"),
        )),
    }
}

/// An optional integer whose bounds fit an `i32`.
fn small(
    body: &mut Map<String, Value>,
    field: &str,
    bounds: (i64, i64),
) -> Result<Option<i32>, ApiError> {
    Ok(integer(body, field, bounds)?.map(|n| n as i32))
}

/// `limit` and `offset` of a listing.
pub fn page(query: &HashMap<String, String>) -> Result<Page, ApiError> {
    Ok(Page {
        limit: query_int(query, "limit", (1, MAX_PAGE_LIMIT))?.unwrap_or(DEFAULT_PAGE_LIMIT),
        offset: query_int(query, "offset", (0, MAX_OFFSET))?.unwrap_or(0),
    })
}

fn query_int(
    query: &HashMap<String, String>,
    name: &str,
    (min, max): (i64, i64),
) -> Result<Option<i64>, ApiError> {
    let Some(value) = query.get(name) else {
        return Ok(None);
    };
    match value.parse::<i64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
        _ => Err(ApiError::invalid(
            name,
            format!("{name} must be an integer from {min} to {max}"),
        )),
    }
}

/// A task id from the path.
pub fn task_id(raw: &str) -> Result<TaskId, ApiError> {
    // Plain decimal only: `+5` and `005` name no task.
    let plain = raw.bytes().all(|b| b.is_ascii_digit()) && !raw.starts_with('0');
    plain
        .then(|| raw.parse::<i64>().ok())
        .flatten()
        .map(TaskId)
        .ok_or_else(|| ApiError::invalid("id", "id must be a positive integer"))
}

/// A request id: a UUID, in its canonical lowercase form as stored.
pub fn request_id(raw: &str, field: &str) -> Result<RequestId, ApiError> {
    RequestId::parse(raw).ok_or_else(|| ApiError::invalid(field, format!("{field} must be a UUID")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field_of(err: ApiError) -> Option<String> {
        match err {
            ApiError::Invalid { field, .. } => field,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    /// The field and message of a 400.
    fn refusal(err: ApiError) -> (String, String) {
        match err {
            ApiError::Invalid {
                field: Some(field),
                message,
            } => (field, message),
            other => panic!("expected Invalid with a field, got {other:?}"),
        }
    }

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
            assert_eq!(
                field_of(task_input(body, &Allowlist::default()).expect_err(field)).as_deref(),
                Some(field)
            );
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
    fn pagination_is_bounded() {
        let q = |k: &str, v: &str| HashMap::from([(k.to_string(), v.to_string())]);
        assert_eq!(
            page(&HashMap::new()).unwrap(),
            Page {
                limit: 50,
                offset: 0
            }
        );
        assert_eq!(
            field_of(page(&q("limit", "501")).unwrap_err()).as_deref(),
            Some("limit")
        );
        assert_eq!(
            field_of(page(&q("limit", "0")).unwrap_err()).as_deref(),
            Some("limit")
        );
        let huge = "99999999999999999999999";
        assert_eq!(
            field_of(page(&q("offset", huge)).unwrap_err()).as_deref(),
            Some("offset")
        );
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
        task_input(body, allowlist).map(|input| input.handler_url)
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
    fn history_times_must_be_storable() {
        let q = |k: &str, v: &str| HashMap::from([(k.to_string(), v.to_string())]);
        let refused = [
            ("cursor", "-8334601228800000.1"),
            ("cursor", "99999999999999999.1"),
            ("cursor", "-1.1"),
            ("cursor", "253402300800000.1"),
            ("cursor", "1800000000000.0"),
            ("cursor", "1800000000000.-4"),
            ("from", "0001-01-01T00:00:00Z"),
            ("from", "1969-12-31T23:59:59Z"),
            ("to", "9999-12-31T23:59:59-01:00"),
            ("to", "9999-12-31T23:59:59.500Z"),
        ];
        for (name, value) in refused {
            let (field, _) = refusal(history_query(&q(name, value)).expect_err(value));
            assert_eq!(field, name, "{name}={value}");
        }
        let accepted = [
            ("cursor", "0.1"),
            ("cursor", "253402300799000.9223372036854775807"),
            ("from", "1970-01-01T00:00:00Z"),
            ("to", "9999-12-31T23:59:59Z"),
            ("to", "2030-06-01T12:00:00+02:00"),
        ];
        for (name, value) in accepted {
            assert!(history_query(&q(name, value)).is_ok(), "{name}={value}");
        }
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

    #[test]
    fn cursors_round_trip_and_junk_is_named() {
        let at = chrono::DateTime::from_timestamp_millis(1_800_000_000_123).expect("time");
        let cursor = Cursor {
            scheduled_at: at.naive_utc(),
            id: 42,
        };
        assert_eq!(
            decode_cursor(&encode_cursor(cursor)).expect("decodes"),
            cursor
        );
        for junk in ["", "1", "x.1", "1.x", "99999999999999999999.1"] {
            assert_eq!(
                field_of(decode_cursor(junk).unwrap_err()).as_deref(),
                Some("cursor")
            );
        }
    }

    #[test]
    fn trigger_bodies() {
        assert_eq!(trigger_params(b"").unwrap(), None);
        assert_eq!(trigger_params(b"{}").unwrap(), None);
        assert_eq!(
            trigger_params(br#"{"params":{"a":1}}"#).unwrap().as_deref(),
            Some(r#"{"a":1}"#)
        );
        assert_eq!(
            field_of(trigger_params(br#"{"params":[1]}"#).unwrap_err()).as_deref(),
            Some("params")
        );
        assert_eq!(
            field_of(trigger_params(br#"{"p":1}"#).unwrap_err()).as_deref(),
            Some("p")
        );
        assert_eq!(field_of(trigger_params(b"\xff").unwrap_err()), None);
    }

    #[test]
    fn ids_are_checked() {
        assert_eq!(task_id("12").unwrap(), TaskId(12));
        assert!(task_id("0").is_err() && task_id("x").is_err() && task_id("1; drop").is_err());
        for not_plain in ["+5", "005", "-1", " 5", "5 ", "", "99999999999999999999"] {
            assert!(task_id(not_plain).is_err(), "{not_plain:?}");
        }
        assert!(request_id("not-a-uuid", "requestId").is_err());
        let id = "6A1C52E4-93B7-4C0E-8F2D-3B5A7E91C4D8";
        assert_eq!(
            request_id(id, "requestId").unwrap().as_str(),
            id.to_lowercase()
        );
    }
}
