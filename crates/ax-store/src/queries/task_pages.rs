//! Keyset pages of the console's task listing, in any of its sort orders and both ways: a page
//! starts just past a cursor (a row's sort value and id), so it reads no skipped rows, at
//! 100,000 tasks as on the first page. Ties of the sort column are broken by id, so `(column,
//! id)` orders every row exactly once; each column's index holds the id after it (InnoDB's
//! secondary indexes end with the primary key, SQLite's with the rowid).

use std::collections::HashMap;

use chrono::NaiveDateTime;
use diesel::backend::Backend;
use diesel::expression_methods::PgSortExpressionMethods;
use diesel::mysql::Mysql;
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::sqlite::Sqlite;
use diesel_async::RunQueryDsl;

use super::tasks::{filtered, TaskFilter};
use crate::rows::models::Task;
use crate::rows::schema::ax_task::dsl as t;
use crate::rows::schema::ax_task::BoxedQuery;
use crate::with_conn;
use crate::{Conn, StoreError};
use ax_core::run::TaskId;

/// A column the listing sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortColumn {
    Id,
    Name,
    Scene,
    Status,
    NextRun,
}

/// The listing's order: a column, either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSort {
    pub column: SortColumn,
    pub descending: bool,
}

impl Default for TaskSort {
    /// By id, oldest first: the listing's order when none is asked.
    fn default() -> Self {
        TaskSort {
            column: SortColumn::Id,
            descending: false,
        }
    }
}

/// A row's value in the sort column; the derived order is SQL's on both stores (text by
/// bytes: names and scenes compare in binary collation; a missing time before any time).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum SortKey {
    /// The sort is by id: the cursor's id is the whole key.
    Id,
    /// A name, a scene or a status's stored text.
    Text(String),
    /// A next run time; `None` for a task with none.
    Time(Option<NaiveDateTime>),
}

/// The row a page starts past: its sort value and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub key: SortKey,
    pub id: TaskId,
}

/// Where a page lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// The first page.
    Start,
    /// The rows after this one, in the sort order.
    After(Cursor),
    /// The rows before this one (the previous page).
    Before(Cursor),
}

/// A page of the listing: its order, where it lies and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyset {
    pub sort: TaskSort,
    pub from: Position,
    pub limit: i64,
}

/// One page of tasks (or of what is shown of them), in the sort order.
#[derive(Debug, Clone)]
pub struct TaskPage<T = Task> {
    pub tasks: Vec<T>,
    /// Tasks matching the filter, on every page.
    pub total: i64,
    /// There are rows before this page's first.
    pub more_before: bool,
    /// There are rows after this page's last.
    pub more_after: bool,
}

impl<T> TaskPage<T> {
    /// The same page, its rows made into `U`s.
    pub fn with_rows<U>(self, tasks: Vec<U>) -> TaskPage<U> {
        TaskPage {
            tasks,
            total: self.total,
            more_before: self.more_before,
            more_after: self.more_after,
        }
    }
}

/// The sort value of `task` for `column`, as a cursor holds it.
pub fn key_of(task: &Task, column: SortColumn) -> SortKey {
    match column {
        SortColumn::Id => SortKey::Id,
        SortColumn::Name => SortKey::Text(task.name.clone()),
        SortColumn::Scene => SortKey::Text(task.scene.to_string()),
        SortColumn::Status => SortKey::Text(task.status.as_str().to_string()),
        SortColumn::NextRun => SortKey::Time(task.next_run_at),
    }
}

/// The page of tasks matching `filter` that `keyset` asks for. A previous page that would come
/// out short (rows were deleted or changed since) is the first page instead.
pub async fn page(
    conn: &mut Conn,
    filter: &TaskFilter,
    keyset: &Keyset,
) -> Result<TaskPage, StoreError> {
    let page = one_way(conn, filter, keyset).await?;
    let short = (page.tasks.len() as i64) < keyset.limit;
    match &keyset.from {
        Position::Before(_) if short => {
            let first = Keyset {
                from: Position::Start,
                ..keyset.clone()
            };
            one_way(conn, filter, &first).await
        }
        _ => Ok(page),
    }
}

async fn one_way(
    conn: &mut Conn,
    filter: &TaskFilter,
    keyset: &Keyset,
) -> Result<TaskPage, StoreError> {
    let backwards = matches!(keyset.from, Position::Before(_));
    // The order rows are read in: the sort's, or its reverse for the page before a cursor.
    let ascending = keyset.sort.descending == backwards;
    let cursor = match &keyset.from {
        Position::Start => None,
        Position::After(cursor) | Position::Before(cursor) => Some(cursor),
    };
    let read = Read {
        column: keyset.sort.column,
        ascending,
        cursor,
        // One more than a page says whether there is more that way.
        limit: keyset.limit.saturating_add(1),
    };
    let (mut tasks, total) = match filter.name_like {
        None => (
            read_rows(conn, filter, &read).await?,
            count(conn, filter).await?,
        ),
        Some(_) => read_searched(conn, filter, &read).await?,
    };
    let more_that_way = tasks.len() as i64 > keyset.limit;
    tasks.truncate(usize::try_from(keyset.limit).unwrap_or(0));
    if backwards {
        tasks.reverse();
    }
    Ok(TaskPage {
        tasks,
        total,
        more_before: if backwards {
            more_that_way
        } else {
            cursor.is_some()
        },
        more_after: if backwards { true } else { more_that_way },
    })
}

/// What one read of a page takes: rows past `cursor` in `column`'s order, `ascending` or not.
struct Read<'a> {
    column: SortColumn,
    ascending: bool,
    cursor: Option<&'a Cursor>,
    limit: i64,
}

async fn count(conn: &mut Conn, filter: &TaskFilter) -> Result<i64, StoreError> {
    Ok(with_conn!(conn, |c| filtered!(filter)
        .count()
        .get_result(c)
        .await)?)
}

/// Keeps the rows of `$query` past `($key, $id)` in the order of the not-null `$column` then
/// id, read ascending (`$asc`) or descending; written `column >= key AND (column > key OR
/// (column = key AND id > id))` so that both stores read one range of the column's index.
macro_rules! past {
    ($query:expr, $column:expr, $key:expr, $id:expr, $asc:expr) => {
        match $asc {
            true => $query.filter(
                $column.ge($key.clone()).and(
                    $column
                        .gt($key.clone())
                        .or($column.eq($key.clone()).and(t::id.gt($id))),
                ),
            ),
            false => $query.filter(
                $column.le($key.clone()).and(
                    $column
                        .lt($key.clone())
                        .or($column.eq($key.clone()).and(t::id.lt($id))),
                ),
            ),
        }
    };
}

/// Orders `$query` by `$column` then id, both ascending (`$asc`) or both descending.
macro_rules! ordered {
    ($query:expr, $column:expr, $asc:expr) => {
        match $asc {
            true => $query.order(($column.asc(), t::id.asc())),
            false => $query.order(($column.desc(), t::id.desc())),
        }
    };
}

/// Orders the tasks by next run then id, a task without one first going up and last going
/// down, as MySQL and SQLite place a NULL; PostgreSQL places it the other way unless told.
trait NextRunOrder: Backend + Sized {
    fn by_next_run(query: BoxedQuery<'_, Self>, asc: bool) -> BoxedQuery<'_, Self>;
}

impl NextRunOrder for Mysql {
    fn by_next_run(query: BoxedQuery<'_, Self>, asc: bool) -> BoxedQuery<'_, Self> {
        ordered!(query, t::next_run_at, asc)
    }
}

impl NextRunOrder for Sqlite {
    fn by_next_run(query: BoxedQuery<'_, Self>, asc: bool) -> BoxedQuery<'_, Self> {
        ordered!(query, t::next_run_at, asc)
    }
}

impl NextRunOrder for Pg {
    fn by_next_run(query: BoxedQuery<'_, Self>, asc: bool) -> BoxedQuery<'_, Self> {
        match asc {
            true => query.order((t::next_run_at.asc().nulls_first(), t::id.asc())),
            false => query.order((t::next_run_at.desc().nulls_last(), t::id.desc())),
        }
    }
}

fn by_next_run<DB: NextRunOrder>(query: BoxedQuery<'_, DB>, asc: bool) -> BoxedQuery<'_, DB> {
    DB::by_next_run(query, asc)
}

/// A page's rows (and one more) from the database, in the order read.
async fn read_rows(
    conn: &mut Conn,
    filter: &TaskFilter,
    read: &Read<'_>,
) -> Result<Vec<Task>, StoreError> {
    let asc = read.ascending;
    Ok(with_conn!(conn, |c| {
        let mut query = filtered!(filter);
        if let Some(Cursor { key, id }) = read.cursor {
            let id = *id;
            query = match (read.column, key) {
                (SortColumn::Name, SortKey::Text(key)) => past!(query, t::name, key, id, asc),
                (SortColumn::Scene, SortKey::Text(key)) => past!(query, t::scene, key, id, asc),
                (SortColumn::Status, SortKey::Text(key)) => past!(query, t::status, key, id, asc),
                (SortColumn::NextRun, SortKey::Time(Some(at))) => match asc {
                    true => past!(query, t::next_run_at, at, id, asc),
                    // Tasks with no next run come last going down: past any time.
                    false => query.filter(
                        t::next_run_at.is_null().or(t::next_run_at.le(*at).and(
                            t::next_run_at
                                .lt(*at)
                                .or(t::next_run_at.eq(*at).and(t::id.lt(id))),
                        )),
                    ),
                },
                (SortColumn::NextRun, SortKey::Time(None)) => match asc {
                    true => query.filter(
                        t::next_run_at
                            .is_not_null()
                            .or(t::next_run_at.is_null().and(t::id.gt(id))),
                    ),
                    false => query.filter(t::next_run_at.is_null().and(t::id.lt(id))),
                },
                // By id, or a key of another column (a cursor parsed for it cannot be).
                _ => match asc {
                    true => query.filter(t::id.gt(id)),
                    false => query.filter(t::id.lt(id)),
                },
            };
        }
        let query = match read.column {
            SortColumn::Id => match asc {
                true => query.order(t::id.asc()),
                false => query.order(t::id.desc()),
            },
            SortColumn::Name => ordered!(query, t::name, asc),
            SortColumn::Scene => ordered!(query, t::scene, asc),
            SortColumn::Status => ordered!(query, t::status, asc),
            SortColumn::NextRun => by_next_run(query, asc),
        };
        query
            .limit(read.limit)
            .select(Task::as_select())
            .load(c)
            .await
    })?)
}

/// A name search reads every name (a pattern that starts with a wildcard narrows no index):
/// the matching ids with their sort values in one pass, sorted and cut here, rather than a pass
/// to count and another over the whole rows to page. Returns the page's rows and the total.
async fn read_searched(
    conn: &mut Conn,
    filter: &TaskFilter,
    read: &Read<'_>,
) -> Result<(Vec<Task>, i64), StoreError> {
    let mut keys = searched_keys(conn, filter, read.column).await?;
    let total = keys.len() as i64;
    keys.sort_unstable();
    if !read.ascending {
        keys.reverse();
    }
    let past = |row: &(SortKey, TaskId)| match read.cursor {
        None => true,
        Some(cursor) => {
            let at = (cursor.key.clone(), cursor.id);
            match read.ascending {
                true => *row > at,
                false => *row < at,
            }
        }
    };
    let wanted: Vec<TaskId> = keys
        .into_iter()
        .filter(past)
        .take(usize::try_from(read.limit).unwrap_or(0))
        .map(|(_, id)| id)
        .collect();
    let mut rows: HashMap<TaskId, Task> = with_conn!(conn, |c| t::ax_task
        .filter(t::id.eq_any(&wanted))
        .select(Task::as_select())
        .load::<Task>(c)
        .await)?
    .into_iter()
    .map(|task| (task.id, task))
    .collect();
    let tasks = wanted.iter().filter_map(|id| rows.remove(id)).collect();
    Ok((tasks, total))
}

/// Every task matching `filter` as (sort value, id), reading only the sort column.
async fn searched_keys(
    conn: &mut Conn,
    filter: &TaskFilter,
    column: SortColumn,
) -> Result<Vec<(SortKey, TaskId)>, StoreError> {
    let text = |rows: Vec<(TaskId, String)>| {
        rows.into_iter()
            .map(|(id, text)| (SortKey::Text(text), id))
            .collect()
    };
    Ok(with_conn!(conn, |c| match column {
        SortColumn::Id => filtered!(filter)
            .select(t::id)
            .load::<TaskId>(c)
            .await
            .map(|ids| ids.into_iter().map(|id| (SortKey::Id, id)).collect()),
        SortColumn::Name => filtered!(filter)
            .select((t::id, t::name))
            .load(c)
            .await
            .map(text),
        SortColumn::Scene => filtered!(filter)
            .select((t::id, t::scene))
            .load(c)
            .await
            .map(text),
        SortColumn::Status => filtered!(filter)
            .select((t::id, t::status))
            .load(c)
            .await
            .map(text),
        SortColumn::NextRun => filtered!(filter)
            .select((t::id, t::next_run_at))
            .load::<(TaskId, Option<NaiveDateTime>)>(c)
            .await
            .map(|rows| {
                rows.into_iter()
                    .map(|(id, at)| (SortKey::Time(at), id))
                    .collect()
            }),
    })?)
}

/// The ids of the tasks matching `filter`, oldest first, at most `limit`.
pub async fn matching_ids(
    conn: &mut Conn,
    filter: &TaskFilter,
    limit: i64,
) -> Result<Vec<TaskId>, StoreError> {
    Ok(with_conn!(conn, |c| filtered!(filter)
        .select(t::id)
        .order(t::id.asc())
        .limit(limit)
        .load(c)
        .await)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_time_sorts_first_as_in_sql() {
        let at = chrono::DateTime::from_timestamp(0, 0).map(|at| at.naive_utc());
        assert!(SortKey::Time(None) < SortKey::Time(at));
        assert!(
            SortKey::Text("B".into()) < SortKey::Text("a".into()),
            "by bytes"
        );
    }
}
