//! Query strings: pages, history filters and cursors, the audit page, stats windows, cron previews.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDateTime, Utc};

use super::ids::task_id;
use super::task::{scene, zone};
use crate::error::ApiError;
use ax_core::alerting::AlertStatus;
use ax_core::calendar::TaskCalendars;
use ax_core::run::feed::Interest;
use ax_core::run::{RequestIdPrefix, RunStatus};
use ax_core::time::clock::rfc3339;
use ax_cron::LAST_TIME;
use ax_cron::{CronSchedule, Zone};
use ax_store::queries::alerts::{AlertFilter, AlertRow};
use ax_store::queries::runs::{Cursor, RunFilter};
use ax_store::queries::Page;
use ax_store::to_db;

/// Stats windows: one minute to 31 days; one day by default.
pub const STATS_WINDOW_SECS: (i64, i64) = (60, 31 * 24 * 60 * 60);
pub const DEFAULT_STATS_WINDOW_SECS: i64 = 24 * 60 * 60;
pub const MAX_PAGE_LIMIT: i64 = 500;
pub const DEFAULT_PAGE_LIMIT: i64 = 50;
const MAX_OFFSET: i64 = 1_000_000_000;
/// The times a client may pass (history filters and cursors), both ends included: ax keeps no
/// time before the epoch, and a MySQL DATETIME ends with the year 9999 (SQLite holds any).
pub const TIME_RANGE: (DateTime<Utc>, DateTime<Utc>) = (DateTime::UNIX_EPOCH, LAST_TIME);

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

/// The interest of `GET /api/events`: `task` (an id) and `scene`, both optional.
pub fn events_query(query: &HashMap<String, String>) -> Result<Interest, ApiError> {
    if let Some(unknown) = query
        .keys()
        .find(|k| !["task", "scene"].contains(&k.as_str()))
    {
        return Err(ApiError::invalid(
            unknown.as_str(),
            format!("unknown parameter `{unknown}`: the events take task and scene"),
        ));
    }
    let task = match query.get("task") {
        None => None,
        Some(raw) => Some(task_id(raw).map_err(|_| {
            ApiError::invalid("task", "task must be a task id (a positive integer)")
        })?),
    };
    let scene = query.get("scene").cloned().map(scene).transpose()?;
    Ok(Interest { task, scene })
}

/// Most fire times a preview lists, and how many by default.
pub const MAX_PREVIEW_COUNT: i64 = 100;
pub const DEFAULT_PREVIEW_COUNT: i64 = 10;

/// What `GET /api/cron/next` previews: the cron, its calendars, from when and how many fires.
pub struct CronPreview {
    pub cron: CronSchedule,
    /// `calendar` (names, by commas) and `policy`.
    pub calendars: Option<TaskCalendars>,
    pub from: DateTime<Utc>,
    pub count: usize,
}

/// The query of `GET /api/cron/next`: the schedule (`expr` in zone `tz`, less the days of the
/// calendars named in `calendar` under `policy`), the time after which to list (`from`,
/// default now) and how many (`count`).
pub fn cron_preview(
    query: &HashMap<String, String>,
    now: DateTime<Utc>,
) -> Result<CronPreview, ApiError> {
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
    Ok(CronPreview {
        cron: schedule.in_zone(zone),
        calendars: preview_calendars(query)?,
        from,
        count: count as usize,
    })
}

/// `calendar=a,b&policy=…` of a preview, read as a task's `calendars` field is.
fn preview_calendars(query: &HashMap<String, String>) -> Result<Option<TaskCalendars>, ApiError> {
    let names: Vec<&str> = query
        .get("calendar")
        .map(|names| {
            names
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .collect()
        })
        .unwrap_or_default();
    if names.is_empty() {
        if query.contains_key("policy") {
            return Err(ApiError::invalid(
                "policy",
                "policy applies to the calendars named in calendar",
            ));
        }
        return Ok(None);
    }
    let mut field = serde_json::json!({ "exclude": names });
    if let Some(policy) = query.get("policy") {
        field["policy"] = serde_json::Value::from(policy.as_str());
    }
    TaskCalendars::from_json(&field).map_err(|err| {
        let name = if err.field().ends_with("policy") {
            "policy"
        } else {
            "calendar"
        };
        ApiError::invalid(name, err.message())
    })
}

/// `windowSecs` of the task stats.
pub fn stats_window(query: &HashMap<String, String>) -> Result<chrono::Duration, ApiError> {
    let secs =
        query_int(query, "windowSecs", STATS_WINDOW_SECS)?.unwrap_or(DEFAULT_STATS_WINDOW_SECS);
    Ok(chrono::Duration::seconds(secs))
}

/// `hours` of `GET /api/schedule/load`: the window, default a day.
pub fn schedule_hours(query: &HashMap<String, String>) -> Result<i64, ApiError> {
    Ok(query_int(query, "hours", ax_core::task::schedule_load::HOURS)?.unwrap_or(24))
}

/// The filters, cursor and page size of `GET /api/instances`.
pub fn history_query(
    query: &HashMap<String, String>,
) -> Result<(RunFilter, Option<Cursor>, i64), ApiError> {
    // One status or several, separated by commas.
    let statuses = match query.get("status") {
        None => Vec::new(),
        Some(text) => text
            .split(',')
            .map(|status| {
                RunStatus::parse(status).ok_or_else(|| {
                    ApiError::invalid("status", format!("status must be {}", RunStatus::choices()))
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    let filter = RunFilter {
        task_id: query
            .get("taskId")
            .map(|id| task_id(id))
            .transpose()
            .map_err(|_| ApiError::invalid("taskId", "taskId must be a positive integer"))?,
        task_ids: None,
        scene: query.get("scene").cloned().map(scene).transpose()?,
        statuses,
        from: query_time(query, "from")?,
        to: query_time(query, "to")?,
    };
    let cursor = query.get("cursor").map(|c| decode_cursor(c)).transpose()?;
    let limit = query_int(query, "limit", (1, MAX_PAGE_LIMIT))?.unwrap_or(DEFAULT_PAGE_LIMIT);
    Ok((filter, cursor, limit))
}

/// `requestIdPrefix` of `GET /api/instances` and its page size, when it is given: it names
/// runs alone, so a filter or cursor beside it is refused, naming it.
pub fn prefix_query(
    query: &HashMap<String, String>,
) -> Result<Option<(RequestIdPrefix, i64)>, ApiError> {
    const NAME: &str = "requestIdPrefix";
    let Some(text) = query.get(NAME) else {
        return Ok(None);
    };
    let prefix = RequestIdPrefix::parse(text).ok_or_else(|| {
        ApiError::invalid(
            NAME,
            format!(
                "{NAME} must be the start of a request id: {} to 32 hex digits, with or \
                 without its dashes",
                RequestIdPrefix::MIN_HEX
            ),
        )
    })?;
    let beside = ["taskId", "scene", "status", "from", "to", "cursor"];
    if let Some(other) = beside.into_iter().find(|name| query.contains_key(*name)) {
        return Err(ApiError::invalid(
            other,
            format!("{other} cannot be given with {NAME}, which names runs alone"),
        ));
    }
    let limit = query_int(query, "limit", (1, MAX_PAGE_LIMIT))?.unwrap_or(DEFAULT_PAGE_LIMIT);
    Ok(Some((prefix, limit)))
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
pub(super) fn storable_time(at: DateTime<Utc>, name: &str) -> Result<NaiveDateTime, ApiError> {
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

/// The `LIKE` pattern (escaped with `\\`) that matches exactly `text`.
pub fn exact_like(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern
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

/// The filters, cursor and page size of `GET /api/alerts`.
pub fn alerts_query(query: &HashMap<String, String>) -> Result<(AlertFilter, i64), ApiError> {
    let task = query
        .get("task")
        .map(|raw| task_id(raw))
        .transpose()
        .map_err(|_| ApiError::invalid("task", "task must be a task id (a positive integer)"))?;
    let status = match query.get("status") {
        None => None,
        Some(text) => Some(AlertStatus::parse(text).ok_or_else(|| {
            ApiError::invalid("status", "status must be pending, sent, folded or failed")
        })?),
    };
    let before = query
        .get("cursor")
        .map(|text| {
            decode_alert_cursor(text).ok_or_else(|| {
                ApiError::invalid("cursor", "cursor must be a nextCursor from a previous page")
            })
        })
        .transpose()?;
    let limit = query_int(query, "limit", (1, MAX_PAGE_LIMIT))?.unwrap_or(DEFAULT_PAGE_LIMIT);
    let filter = AlertFilter {
        task,
        scene: query.get("scene").cloned().map(scene).transpose()?,
        status,
        before,
    };
    Ok((filter, limit))
}

/// The cursor of the page after `rows`, a page of at most `limit` alerts; none when it was
/// not full (the last page).
pub fn next_alert_cursor(rows: &[AlertRow], limit: i64) -> Option<String> {
    rows.last()
        .filter(|_| rows.len() as i64 == limit)
        .map(|row| alert_cursor(row.created_at, &row.id, &row.channel))
}

/// An alerts page's cursor: the last row's creation (ms since the epoch), id and channel.
fn alert_cursor(created_at: NaiveDateTime, id: &str, channel: &str) -> String {
    format!("{}~{id}~{channel}", created_at.and_utc().timestamp_millis())
}

fn decode_alert_cursor(text: &str) -> Option<(NaiveDateTime, String, String)> {
    let mut parts = text.splitn(3, '~');
    let millis: i64 = parts.next()?.parse().ok()?;
    let at = DateTime::from_timestamp_millis(millis)?.naive_utc();
    Some((at, parts.next()?.to_string(), parts.next()?.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::refused::{field_of, refusal};

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
}
