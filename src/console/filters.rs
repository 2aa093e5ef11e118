//! The console's URL queries: filters read from a page's query string (each error naming its
//! field, to be shown beside it) and links that keep them.

use std::collections::HashMap;

use actix_web::HttpRequest;
use chrono::{DateTime, NaiveDateTime, Utc};

use crate::api::validate;
use crate::labels;
use crate::run::{RunStatus, TaskId};
use crate::store::models::{TaskStatus, MAX_NAME_CHARS};
use crate::store::queries::alerts::AlertFilter;
use crate::store::queries::instances::{Cursor, InstanceFilter};
use crate::store::queries::tasks::TaskFilter;
use crate::store::queries::Page;

/// A page's query: its parameters, those left empty (a GET form sends every field) dropped.
pub type Params = HashMap<String, String>;

/// Tasks and runs a page lists.
pub const PAGE_SIZE: i64 = 50;

/// The query string of `req`, as [`Params`].
pub fn params(req: &HttpRequest) -> Params {
    url::form_urlencoded::parse(req.query_string().as_bytes())
        .filter(|(_, value)| !value.trim().is_empty())
        .map(|(key, value)| (key.into_owned(), value.trim().to_string()))
        .collect()
}

/// A filter that cannot be applied, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    /// The query parameter (and form field) at fault.
    pub field: &'static str,
    pub message: String,
}

impl FilterError {
    fn new(field: &'static str, message: impl Into<String>) -> Self {
        FilterError {
            field,
            message: message.into(),
        }
    }
}

/// The message of `error` if it names `field`.
pub fn error_for<'e>(error: Option<&'e FilterError>, field: &str) -> Option<&'e str> {
    error
        .filter(|error| error.field == field)
        .map(|error| error.message.as_str())
}

/// What the tasks page lists.
#[derive(Debug, Clone)]
pub struct TaskQuery {
    /// The name search is its `name_like`, a `LIKE` pattern (`\` escaping).
    pub filter: TaskFilter,
    pub page: Page,
}

/// `?scene=&status=&q=&label=&after=` of the tasks page.
pub fn tasks(params: &Params) -> Result<TaskQuery, FilterError> {
    let status = params
        .get("status")
        .map(|text| {
            TaskStatus::parse(text).ok_or_else(|| {
                FilterError::new(
                    "status",
                    format!("status must be {}", TaskStatus::choices()),
                )
            })
        })
        .transpose()?;
    let name_like = params
        .get("q")
        .map(|q| match q.chars().count() > MAX_NAME_CHARS {
            true => Err(FilterError::new(
                "q",
                format!("a name has at most {MAX_NAME_CHARS} characters"),
            )),
            false => Ok(contains(q)),
        })
        .transpose()?;
    let label = params
        .get("label")
        .map(|text| labels::filter(text).map_err(|message| FilterError::new("label", message)))
        .transpose()?;
    let after = params
        .get("after")
        .map(|text| {
            text.parse::<i64>()
                .ok()
                .filter(|id| *id > 0)
                .map(TaskId)
                .ok_or_else(|| FilterError::new("after", "after must be a task id"))
        })
        .transpose()?;
    Ok(TaskQuery {
        filter: TaskFilter {
            scene: params.get("scene").cloned(),
            status,
            name_like,
            label,
            after,
        },
        page: Page {
            limit: PAGE_SIZE,
            offset: 0,
        },
    })
}

/// A `LIKE` pattern matching names that contain `text` as it is: its wildcards escaped.
fn contains(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// What the runs page lists.
#[derive(Debug, Clone)]
pub struct RunQuery {
    pub filter: InstanceFilter,
    pub cursor: Option<Cursor>,
}

/// `?task=&scene=&status=&from=&to=&cursor=` of the runs page.
pub fn runs(params: &Params) -> Result<RunQuery, FilterError> {
    let task_id = params
        .get("task")
        .map(|text| {
            text.parse::<i64>()
                .ok()
                .filter(|id| *id > 0)
                .map(TaskId)
                .ok_or_else(|| FilterError::new("task", "task must be a task id (a number)"))
        })
        .transpose()?;
    let status = params
        .get("status")
        .map(|text| {
            RunStatus::parse(text).ok_or_else(|| {
                FilterError::new("status", format!("status must be {}", RunStatus::choices()))
            })
        })
        .transpose()?;
    let (from, to) = (time(params, "from")?, time(params, "to")?);
    if let (Some(from), Some(to)) = (from, to) {
        if from >= to {
            return Err(FilterError::new("to", "to must be later than from"));
        }
    }
    let cursor = params.get("cursor").map(|text| cursor(text)).transpose()?;
    Ok(RunQuery {
        filter: InstanceFilter {
            task_id,
            scene: params.get("scene").cloned(),
            status,
            from,
            to,
        },
        cursor,
    })
}

/// The filters of the alerts page, in their order in its links.
pub const ALERT_FILTERS: &[&str] = &["task", "scene", "status"];

/// `?task=&scene=&status=&cursor=` of the alerts page, read as `GET /api/alerts` reads them
/// (its page size is the console's).
pub fn alerts(params: &Params) -> Result<AlertFilter, FilterError> {
    let query: Params = params
        .iter()
        .filter(|(key, _)| ALERT_FILTERS.contains(&key.as_str()) || *key == "cursor")
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    validate::alerts_query(&query)
        .map(|(filter, _)| filter)
        .map_err(|err| {
            match ALERT_FILTERS
                .iter()
                .find(|field| err.field() == Some(**field))
            {
                Some(field) => FilterError::new(field, err.to_string()),
                // The only other parameter read.
                None => damaged_cursor(),
            }
        })
}

/// A time filter in UTC: RFC 3339, or the `YYYY-MM-DDTHH:MM[:SS]` a browser's date-time field
/// sends, read as UTC.
fn time(params: &Params, field: &'static str) -> Result<Option<NaiveDateTime>, FilterError> {
    let Some(text) = params.get(field) else {
        return Ok(None);
    };
    let at = DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc).naive_utc())
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S"))
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M"))
        .map_err(|_| {
            FilterError::new(
                field,
                format!("{field} must be a UTC time such as 2024-05-01T09:30"),
            )
        })?;
    // What every store can hold: no time before the epoch, and MySQL's DATETIME ends with 9999.
    let years = 1970..=9999;
    if !years.contains(&chrono::Datelike::year(&at)) {
        return Err(FilterError::new(
            field,
            format!("{field} must lie in the years 1970 to 9999"),
        ));
    }
    Ok(Some(crate::store::to_db(at.and_utc())))
}

/// A history cursor in the JSON API's form (see [`Cursor::to_text`]).
pub fn encode_cursor(cursor: Cursor) -> String {
    cursor.to_text()
}

fn cursor(text: &str) -> Result<Cursor, FilterError> {
    Cursor::from_text(text).ok_or_else(damaged_cursor)
}

fn damaged_cursor() -> FilterError {
    FilterError::new(
        "cursor",
        "this page link is damaged: start again from the first page",
    )
}

/// `path` with the filters `kept` of `params` (in that order) and `cursor` as its query: a
/// page of a listing paged by cursor, its filters kept.
pub fn kept_link(path: &str, kept: &[&str], params: &Params, cursor: Option<&str>) -> String {
    let mut pairs: Vec<(&str, Option<&str>)> = kept
        .iter()
        .map(|name| (*name, params.get(*name).map(String::as_str)))
        .collect();
    pairs.push(("cursor", cursor));
    link(path, &pairs)
}

/// `path` with `params` as its query, in this order, empty values left out.
pub fn link(path: &str, params: &[(&str, Option<&str>)]) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for (key, value) in params {
        if let Some(value) = value.filter(|value| !value.is_empty()) {
            query.append_pair(key, value);
        }
    }
    let query = query.finish();
    match query.is_empty() {
        true => path.to_string(),
        false => format!("{path}?{query}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Params {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_name_search_matches_wildcards_as_text() {
        let query = tasks(&params(&[("q", "50%_off\\")])).expect("valid");
        assert_eq!(query.filter.name_like.as_deref(), Some("%50\\%\\_off\\\\%"));
    }

    #[test]
    fn a_bad_filter_names_its_field() {
        let field = |pairs: &[(&str, &str)]| tasks(&params(pairs)).err().map(|e| e.field);
        assert_eq!(field(&[("status", "ON")]), Some("status"));
        assert_eq!(field(&[("after", "-1")]), Some("after"));
        assert_eq!(field(&[("label", "team")]), Some("label"));
        assert_eq!(field(&[("label", "Team=x")]), Some("label"));
        assert_eq!(field(&[("scene", "a b"), ("status", "PAUSED")]), None);
        let field = |pairs: &[(&str, &str)]| runs(&params(pairs)).err().map(|e| e.field);
        assert_eq!(field(&[("status", "DONE")]), Some("status"));
        assert_eq!(field(&[("task", "x")]), Some("task"));
        assert_eq!(field(&[("from", "yesterday")]), Some("from"));
        assert_eq!(field(&[("from", "0900-01-01T00:00")]), Some("from"));
        assert_eq!(
            field(&[("from", "2024-01-02T00:00"), ("to", "2024-01-01T00:00")]),
            Some("to")
        );
        assert_eq!(field(&[("cursor", "12")]), Some("cursor"));
    }

    #[test]
    fn alert_filters_are_read_as_the_api_reads_them() {
        let query = alerts(&params(&[
            ("task", "7"),
            ("scene", "billing"),
            ("status", "sent"),
        ]));
        let filter = query.expect("valid");
        assert_eq!(filter.task, Some(TaskId(7)));
        assert_eq!(filter.scene.as_deref(), Some("billing"));
        let field = |pairs: &[(&str, &str)]| alerts(&params(pairs)).err().map(|e| e.field);
        assert_eq!(field(&[("task", "x")]), Some("task"));
        assert_eq!(field(&[("scene", "a b")]), Some("scene"));
        assert_eq!(field(&[("status", "lost")]), Some("status"));
        assert_eq!(field(&[("cursor", "12")]), Some("cursor"));
        assert_eq!(field(&[("limit", "x")]), None, "the console's page size");
    }

    #[test]
    fn a_label_filter_is_key_and_value() {
        let query = tasks(&params(&[("label", "team=billing")])).expect("valid");
        assert_eq!(
            query.filter.label,
            Some(("team".to_string(), "billing".to_string()))
        );
    }

    #[test]
    fn times_are_read_as_utc_from_either_form() {
        let at = |text: &str| runs(&params(&[("from", text)])).expect("valid").filter.from;
        let want = DateTime::parse_from_rfc3339("2024-05-01T09:30:00Z")
            .expect("a time")
            .naive_utc();
        assert_eq!(at("2024-05-01T09:30"), Some(want));
        assert_eq!(at("2024-05-01T11:30:00+02:00"), Some(want));
    }

    #[test]
    fn a_cursor_reads_back_as_written() {
        let cursor = Cursor {
            scheduled_at: DateTime::from_timestamp_millis(1_700_000_000_123)
                .expect("a time")
                .naive_utc(),
            id: 42,
        };
        let text = encode_cursor(cursor);
        assert_eq!(text, "1700000000123.42");
        assert_eq!(super::cursor(&text), Ok(cursor));
    }

    #[test]
    fn links_keep_the_filters_given() {
        assert_eq!(
            link(
                "/console/runs",
                &[("scene", Some("a&b")), ("status", None), ("q", Some(""))]
            ),
            "/console/runs?scene=a%26b"
        );
        assert_eq!(link("/console/runs", &[]), "/console/runs");
    }
}
