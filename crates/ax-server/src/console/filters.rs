//! The console's URL queries: filters read from a page's query string (each error naming its
//! field, to be shown beside it) and links that keep them.

use ax_core::ids::SceneName;
use std::collections::HashMap;

use actix_web::HttpRequest;
use chrono::{DateTime, NaiveDateTime, Utc};

use crate::api::validate;
use ax_core::run::{RunStatus, TaskId};
use ax_core::task::labels;
use ax_store::queries::alerts::AlertFilter;
use ax_store::queries::runs::{Cursor, RunFilter};
use ax_store::queries::task_pages::{
    Cursor as TaskCursor, Keyset, Position, SortColumn, SortKey, TaskSort,
};
use ax_store::queries::tasks::TaskFilter;
use ax_store::rows::models::{TaskStatus, MAX_NAME_CHARS};

/// A page's query: its parameters, those left empty (a GET form sends every field) dropped.
pub type Params = HashMap<String, String>;

/// Tasks and runs a page lists.
pub const PAGE_SIZE: i64 = 50;

/// The query string of `req`, as [`Params`]; a parameter given several times (checkboxes of
/// one name) holds its values joined by commas.
pub fn params(req: &HttpRequest) -> Params {
    query_params(req.query_string())
}

fn query_params(query: &str) -> Params {
    let mut params = Params::new();
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        params
            .entry(key.into_owned())
            .and_modify(|values: &mut String| {
                values.push(',');
                values.push_str(value);
            })
            .or_insert_with(|| value.to_string());
    }
    params
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
    pub keyset: Keyset,
}

/// The filters of the tasks page, in their order in its links.
pub const TASK_FILTERS: &[&str] = &["q", "scene", "status", "label"];

/// `?q=&scene=&status=&label=` of the tasks page: the tasks they match.
pub fn task_filter(params: &Params) -> Result<TaskFilter, FilterError> {
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
            false => Ok(ax_core::task::search::like_contains(q)),
        })
        .transpose()?;
    let label = params
        .get("label")
        .map(|text| labels::filter(text).map_err(|message| FilterError::new("label", message)))
        .transpose()?;
    Ok(TaskFilter {
        scene: params.get("scene").cloned().map(SceneName::from),
        status,
        name_like,
        label,
    })
}

/// `?q=&scene=&status=&label=&sort=&after=|before=` of the tasks page.
pub fn tasks(params: &Params) -> Result<TaskQuery, FilterError> {
    let filter = task_filter(params)?;
    let sort = params
        .get("sort")
        .map(|text| task_sort(text))
        .transpose()?
        .unwrap_or_default();
    let cursor = |field: &'static str| {
        params
            .get(field)
            .map(|text| {
                task_cursor(text, sort.column).ok_or_else(|| {
                    FilterError::new(
                        field,
                        "this page link is damaged: start again from the first page",
                    )
                })
            })
            .transpose()
    };
    let from = match (cursor("after")?, cursor("before")?) {
        (None, None) => Position::Start,
        (Some(after), None) => Position::After(after),
        (None, Some(before)) => Position::Before(before),
        (Some(_), Some(_)) => {
            return Err(FilterError::new(
                "before",
                "a page is either after or before a task, not both",
            ))
        }
    };
    Ok(TaskQuery {
        filter,
        keyset: Keyset {
            sort,
            from,
            limit: PAGE_SIZE,
        },
    })
}

/// The tasks page's sorts: the `sort` parameter's value of each column (`-` before it for the
/// reverse order).
pub const TASK_SORTS: &[(&str, SortColumn)] = &[
    ("name", SortColumn::Name),
    ("scene", SortColumn::Scene),
    ("status", SortColumn::Status),
    ("next", SortColumn::NextRun),
    ("id", SortColumn::Id),
];

fn task_sort(text: &str) -> Result<TaskSort, FilterError> {
    let (descending, name) = match text.strip_prefix('-') {
        Some(name) => (true, name),
        None => (false, text),
    };
    let column = TASK_SORTS
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, column)| *column)
        .ok_or_else(|| {
            let names: Vec<&str> = TASK_SORTS.iter().map(|(name, _)| *name).collect();
            FilterError::new(
                "sort",
                format!(
                    "sort must be one of {}, or one of them after - for the reverse order",
                    names.join(", ")
                ),
            )
        })?;
    Ok(TaskSort { column, descending })
}

/// The `sort` parameter of `sort`; none for the default order.
pub fn task_sort_text(sort: TaskSort) -> Option<String> {
    if sort == TaskSort::default() {
        return None;
    }
    let name = TASK_SORTS
        .iter()
        .find(|(_, column)| *column == sort.column)
        .map_or("id", |(name, _)| *name);
    Some(match sort.descending {
        true => format!("-{name}"),
        false => name.to_string(),
    })
}

/// A task cursor as a page link holds it: the id alone when the sort is by id, else
/// `id:value` (a next run as Unix milliseconds, `none` for no next run).
pub fn task_cursor_text(cursor: &TaskCursor) -> String {
    let id = cursor.id;
    match &cursor.key {
        SortKey::Id => id.to_string(),
        SortKey::Text(text) => format!("{id}:{text}"),
        SortKey::Time(Some(at)) => format!("{id}:{}", at.and_utc().timestamp_millis()),
        SortKey::Time(None) => format!("{id}:none"),
    }
}

/// The cursor `text` holds for a sort by `column`, if it is one.
fn task_cursor(text: &str, column: SortColumn) -> Option<TaskCursor> {
    let (id, key) = match text.split_once(':') {
        Some((id, key)) => (id, Some(key)),
        None => (text, None),
    };
    let id = id.parse::<i64>().ok().filter(|id| *id > 0).map(TaskId)?;
    let key = match (column, key) {
        (SortColumn::Id, None) => SortKey::Id,
        (SortColumn::Name | SortColumn::Scene, Some(key))
            if !key.is_empty() && key.chars().count() <= MAX_NAME_CHARS =>
        {
            SortKey::Text(key.to_string())
        }
        (SortColumn::Status, Some(key)) => {
            SortKey::Text(TaskStatus::parse(key)?.as_str().to_string())
        }
        (SortColumn::NextRun, Some("none")) => SortKey::Time(None),
        (SortColumn::NextRun, Some(millis)) => {
            let at = DateTime::from_timestamp_millis(millis.parse().ok()?)?;
            SortKey::Time(Some(at.naive_utc()))
        }
        _ => return None,
    };
    Some(TaskCursor { key, id })
}

/// What the runs page lists.
#[derive(Debug, Clone)]
pub struct RunQuery {
    pub filter: RunFilter,
    pub cursor: Option<Cursor>,
    /// The task filter given as a name, for the page to resolve to its tasks' ids.
    pub task_name: Option<String>,
}

/// A task filter: a task's id, or else its name.
fn task_of(text: &str) -> Result<(Option<TaskId>, Option<String>), FilterError> {
    match text.parse::<i64>() {
        Ok(id) if id > 0 => Ok((Some(TaskId(id)), None)),
        Ok(_) => Err(FilterError::new("task", "a task id is a positive number")),
        Err(_) if text.chars().count() > MAX_NAME_CHARS => Err(FilterError::new(
            "task",
            format!("a name has at most {MAX_NAME_CHARS} characters"),
        )),
        Err(_) => Ok((None, Some(text.to_string()))),
    }
}

/// Statuses separated by commas (checkboxes of one name, or typed).
fn run_statuses(text: &str) -> Result<Vec<RunStatus>, FilterError> {
    let mut statuses = text
        .split(',')
        .map(|status| {
            RunStatus::parse(status.trim()).ok_or_else(|| {
                FilterError::new("status", format!("status must be {}", RunStatus::choices()))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    statuses.sort_unstable_by_key(|status| status.as_str());
    statuses.dedup();
    Ok(statuses)
}

/// `?task=&scene=&status=&from=&to=&cursor=` of the runs page: `task` an id or a name,
/// `status` one or several.
pub fn runs(params: &Params) -> Result<RunQuery, FilterError> {
    let (task_id, task_name) = match params.get("task") {
        Some(text) => task_of(text)?,
        None => (None, None),
    };
    let statuses = params
        .get("status")
        .map(|text| run_statuses(text))
        .transpose()?
        .unwrap_or_default();
    let (from, to) = (time(params, "from")?, time(params, "to")?);
    if let (Some(from), Some(to)) = (from, to) {
        if from >= to {
            return Err(FilterError::new("to", "to must be later than from"));
        }
    }
    let cursor = params.get("cursor").map(|text| cursor(text)).transpose()?;
    Ok(RunQuery {
        filter: RunFilter {
            task_id,
            task_ids: None,
            scene: params.get("scene").cloned().map(SceneName::from),
            statuses,
            from,
            to,
        },
        cursor,
        task_name,
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
    Ok(Some(ax_store::to_db(at.and_utc())))
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

/// `path` with the filters `kept` of `params` (in that order), `cursor` and the way back
/// (`back`, see [`around`]) as its query: a page of a listing paged by cursor, its filters kept.
pub fn kept_link(path: &str, kept: &[&str], params: &Params, cursor: Option<&str>) -> String {
    let mut pairs: Vec<(&str, Option<&str>)> = kept
        .iter()
        .map(|name| (*name, params.get(*name).map(String::as_str)))
        .collect();
    pairs.push(("cursor", cursor));
    pairs.push(("back", params.get(BACK).map(String::as_str)));
    link(path, &pairs)
}

/// The query parameter holding the cursors of the pages before this one, oldest first
/// (the first page, which has none, left out), so a page links back to the one before.
pub const BACK: &str = "back";

/// How many pages back a page link remembers; beyond, "Previous page" leads to the first.
const MAX_BACK: usize = 20;

/// The queries of a listing's pages around this one, paged by the cursor parameter `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Around {
    /// The first page's, when this is not the first.
    pub first: Option<Params>,
    /// The page before's, when this is not the first.
    pub previous: Option<Params>,
    /// The next page's, when there is one (`next` is its cursor).
    pub next: Option<Params>,
}

/// The pages around `params`' page (see [`Around`]).
pub fn around(params: &Params, key: &str, next: Option<&str>) -> Around {
    let trail: Vec<&str> = params
        .get(BACK)
        .map(|back| back.split(',').filter(|c| !c.is_empty()).collect())
        .unwrap_or_default();
    let with = |cursor: Option<&str>, trail: &[&str]| {
        let mut query = params.clone();
        query.remove(key);
        query.remove(BACK);
        if let Some(cursor) = cursor {
            query.insert(key.to_string(), cursor.to_string());
        }
        if !trail.is_empty() {
            query.insert(BACK.to_string(), trail.join(","));
        }
        query
    };
    let current = params.get(key).map(String::as_str);
    let previous = current.map(|_| match trail.split_last() {
        Some((last, before)) => with(Some(last), before),
        None => with(None, &[]),
    });
    let next = next.map(|next| {
        let mut trail = trail.clone();
        trail.extend(current);
        let keep = trail.len().saturating_sub(MAX_BACK);
        with(Some(next), &trail[keep..])
    });
    Around {
        first: current.map(|_| with(None, &[])),
        previous,
        next,
    }
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
        assert_eq!(field(&[("sort", "cron")]), Some("sort"));
        assert_eq!(field(&[("sort", "--name")]), Some("sort"));
        assert_eq!(field(&[("sort", "name"), ("after", "3")]), Some("after"));
        assert_eq!(
            field(&[("sort", "status"), ("after", "3:ON")]),
            Some("after")
        );
        assert_eq!(field(&[("after", "3"), ("before", "5")]), Some("before"));
        assert_eq!(field(&[("label", "team")]), Some("label"));
        assert_eq!(field(&[("label", "Team=x")]), Some("label"));
        assert_eq!(field(&[("scene", "a b"), ("status", "PAUSED")]), None);
        let field = |pairs: &[(&str, &str)]| runs(&params(pairs)).err().map(|e| e.field);
        assert_eq!(field(&[("status", "DONE")]), Some("status"));
        assert_eq!(field(&[("task", "-3")]), Some("task"));
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
    fn a_sort_and_its_cursors_read_back_as_written() {
        let query = tasks(&params(&[("sort", "-next")])).expect("valid");
        let sort = query.keyset.sort;
        assert_eq!((sort.column, sort.descending), (SortColumn::NextRun, true));
        assert_eq!(task_sort_text(sort).as_deref(), Some("-next"));
        assert_eq!(task_sort_text(TaskSort::default()), None);
        let at = DateTime::from_timestamp_millis(1_700_000_000_123).map(|at| at.naive_utc());
        for (column, key) in [
            (SortColumn::Id, SortKey::Id),
            (SortColumn::Name, SortKey::Text("a:b c".into())),
            (SortColumn::Status, SortKey::Text("PAUSED".into())),
            (SortColumn::NextRun, SortKey::Time(at)),
            (SortColumn::NextRun, SortKey::Time(None)),
        ] {
            let cursor = TaskCursor { key, id: TaskId(7) };
            let text = task_cursor_text(&cursor);
            assert_eq!(task_cursor(&text, column), Some(cursor), "{text}");
        }
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
    fn repeated_parameters_are_joined_and_read_as_several_statuses() {
        let params = query_params("status=FAILED&status=SUCCESS&status=FAILED&scene=");
        assert_eq!(
            params.get("status").map(String::as_str),
            Some("FAILED,SUCCESS,FAILED")
        );
        assert!(!params.contains_key("scene"));
        let query = runs(&params).expect("valid");
        assert_eq!(
            query.filter.statuses,
            vec![RunStatus::Failed, RunStatus::Success]
        );
        let bad = runs(&query_params("status=FAILED&status=DONE")).err();
        assert_eq!(bad.map(|e| e.field), Some("status"));
    }

    #[test]
    fn a_task_is_an_id_or_a_name() {
        let query = runs(&params(&[("task", "12")])).expect("valid");
        assert_eq!(
            (query.filter.task_id, query.task_name),
            (Some(TaskId(12)), None)
        );
        let query = runs(&params(&[("task", "nightly report")])).expect("valid");
        assert_eq!(query.filter.task_id, None);
        assert_eq!(query.task_name.as_deref(), Some("nightly report"));
        let long = "x".repeat(MAX_NAME_CHARS + 1);
        assert_eq!(
            runs(&params(&[("task", &long)])).err().map(|e| e.field),
            Some("task")
        );
    }

    #[test]
    fn pages_link_back_through_their_trail() {
        let first = params(&[("scene", "s")]);
        let on_first = around(&first, "cursor", Some("c1"));
        assert_eq!(
            (on_first.first.clone(), on_first.previous.clone()),
            (None, None)
        );
        let second = on_first.next.expect("a next page");
        assert_eq!(second, params(&[("scene", "s"), ("cursor", "c1")]));
        let on_second = around(&second, "cursor", Some("c2"));
        assert_eq!(on_second.previous, Some(first.clone()));
        assert_eq!(
            on_second.first,
            Some(first.clone()),
            "the previous page is the first"
        );
        let third = on_second.next.expect("a next page");
        assert_eq!(third.get(BACK).map(String::as_str), Some("c1"));
        let on_third = around(&third, "cursor", None);
        assert_eq!(on_third.previous, Some(second));
        assert_eq!(on_third.first, Some(first));
        assert_eq!(on_third.next, None);
    }

    #[test]
    fn the_trail_back_is_bounded() {
        let mut page = params(&[("cursor", "c0")]);
        for n in 1..=(MAX_BACK + 5) {
            page = around(&page, "cursor", Some(&format!("c{n}")))
                .next
                .expect("next");
        }
        let trail = page.get(BACK).map(|t| t.split(',').count());
        assert_eq!(trail, Some(MAX_BACK));
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
