//! A run's writes, applied under their compare-and-set conditions: writes of one shape (same
//! columns, same conditions) go many to a statement.

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::sql_types::{Integer, Nullable, Text, Timestamp};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;

use super::alerts;
use super::success_watch::{self, SuccessWatch};

use crate::pool::prepared::{padded, Kept};
use crate::with_conn;
use crate::{to_db, Conn, StoreError};
use ax_core::run::{Change, Expect, RequestId, RunStatus, TaskId, Write};

/// Groups writes that one statement can apply together (same columns, same conditions).
pub(super) fn by_shape<T, W: std::borrow::Borrow<Write>>(
    writes: impl IntoIterator<Item = (T, W)>,
) -> Vec<Vec<(T, W)>> {
    let mut groups: Vec<(Shape, Vec<(T, W)>)> = Vec::new();
    for (key, write) in writes {
        let shape = Shape::of(write.borrow());
        match groups.iter_mut().find(|(s, _)| *s == shape) {
            Some((_, group)) => group.push((key, write)),
            None => groups.push((shape, vec![(key, write)])),
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}

/// The run a write is for, with its task when the writer knows it: a success of a task no
/// alert watches is then written without a look-up (see [`success_watch`]).
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub run: &'a RequestId,
    pub task: Option<TaskId>,
}

impl<'a> From<&'a RequestId> for Target<'a> {
    fn from(run: &'a RequestId) -> Self {
        Target { run, task: None }
    }
}

/// Applies writes of any shapes, as few statements as their shapes allow; returns how many
/// runs changed.
pub async fn apply_all(
    conn: &mut Conn,
    writes: &[(Target<'_>, &Write)],
    watch: Option<&SuccessWatch>,
) -> Result<usize, StoreError> {
    let mut changed = 0;
    for group in by_shape(writes.iter().copied()) {
        changed += apply(conn, &group, watch).await?;
    }
    Ok(changed)
}

/// A value bound into a write.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Int(i32),
    Status(RunStatus),
    Text(String),
    OptText(Option<String>),
    Time(NaiveDateTime),
    OptTime(Option<NaiveDateTime>),
}

fn opt_time(at: Option<DateTime<Utc>>) -> Value {
    Value::OptTime(at.map(to_db))
}

/// The columns a change sets (each with its `=`), in a fixed order.
fn set_columns(change: &Change) -> Vec<(&'static str, Value)> {
    let mut set = Vec::new();
    let mut put = |column, value: Option<Value>| {
        if let Some(value) = value {
            set.push((column, value));
        }
    };
    put("status =", change.status.map(Value::Status));
    put("attempt =", change.attempt.map(Value::Int));
    put("dispatched_attempt =", change.dispatched.map(Value::Int));
    put("retry_count =", change.retries_used.map(Value::Int));
    put("callback_code =", change.code.clone().map(Value::OptText));
    put(
        "callback_message =",
        change.message.clone().map(Value::OptText),
    );
    put("next_attempt_at =", change.next_attempt_at.map(opt_time));
    put("claimed_until =", change.claimed_until.map(opt_time));
    put("deadline_at =", change.deadline_at.map(opt_time));
    put(
        "trigger_at =",
        change.due_at.map(|at| Value::Time(to_db(at))),
    );
    put(
        "finished_at =",
        change.finished_at.map(|at| Value::Time(to_db(at))),
    );
    put(
        "fired_by =",
        change.claimant.clone().map(|c| Value::Text(c.into())),
    );
    put(
        "dispatched_at =",
        change.dispatched_at.map(|at| Value::Time(to_db(at))),
    );
    put("member =", change.member.clone().map(Value::Text));
    set
}

/// The per-run conditions of a write (its status condition aside), each a column and its
/// comparison, in a fixed order.
fn expect_columns(expect: &Expect) -> Vec<(&'static str, Value)> {
    let mut cond = Vec::new();
    if let Some(attempt) = expect.attempt {
        cond.push(("attempt =", Value::Int(attempt)));
    }
    if let Some(dispatched) = expect.dispatched {
        cond.push(("dispatched_attempt =", Value::Int(dispatched)));
    }
    if let Some(dispatched) = expect.dispatched_at_least {
        cond.push(("dispatched_attempt >=", Value::Int(dispatched)));
    }
    if let Some(until) = expect.claimed_until {
        cond.push(("claimed_until =", Value::Time(to_db(until))));
    }
    if let Some(at) = expect.next_attempt_at {
        cond.push(("next_attempt_at =", Value::Time(to_db(at))));
    }
    if let Some(claimant) = &expect.claimant {
        cond.push(("fired_by =", Value::Text(claimant.to_string())));
    }
    cond
}

/// What makes writes fit one statement.
#[derive(Debug, PartialEq, Eq)]
struct Shape {
    set: Vec<&'static str>,
    expect: Vec<&'static str>,
    status: &'static [RunStatus],
}

impl Shape {
    fn of(write: &Write) -> Shape {
        Shape {
            set: set_columns(&write.change)
                .into_iter()
                .map(|(c, _)| c)
                .collect(),
            expect: expect_columns(&write.expect)
                .into_iter()
                .map(|(c, _)| c)
                .collect(),
            status: write.expect.status,
        }
    }
}

/// Most runs one statement writes.
const ROWS_PER_STATEMENT: usize = 100;

/// Binds `$binds` (a `&[Value]`) into the boxed `$query`, in order.
macro_rules! bind_values {
    ($query:expr, $binds:expr) => {{
        let mut query = $query;
        for value in $binds {
            query = match value {
                Value::Int(v) => query.bind::<Integer, _>(*v),
                Value::Status(v) => query.bind::<Text, _>(*v),
                Value::Text(v) => query.bind::<Text, _>(v.as_str()),
                Value::OptText(v) => query.bind::<Nullable<Text>, _>(v.as_deref()),
                Value::Time(v) => query.bind::<Timestamp, _>(*v),
                Value::OptTime(v) => query.bind::<Nullable<Timestamp>, _>(*v),
            };
        }
        query
    }};
}

/// A run's id, as read back.
#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = Text)]
    request_id: String,
}

/// Applies writes of one shape (see [`Shape`]), many to a statement; returns how many runs
/// changed. A run whose row no longer meets its write's condition is left as it is. While
/// alerts are on, the successes it writes of watched tasks (`watch`'s; every task without
/// one) are queued for the folder (see [`alerts::queue_successes`]) in the same transaction:
/// the rows that will change are read and locked first, so only a success this write makes
/// is queued.
pub async fn apply(
    conn: &mut Conn,
    writes: &[(Target<'_>, &Write)],
    watch: Option<&SuccessWatch>,
) -> Result<usize, StoreError> {
    let succeeds = |write: &Write| write.change.status == Some(RunStatus::Success);
    let watched = if writes.iter().any(|(_, w)| succeeds(w)) {
        success_watch::watched(conn, watch).await?
    } else {
        None
    };
    let queued = |(target, write): &&(Target, &Write)| {
        succeeds(write) && watched.as_ref().is_some_and(|w| w.needs(target.task))
    };
    let mut changed = 0;
    for chunk in writes.chunks(ROWS_PER_STATEMENT) {
        // The statement names a padded list, so that its text is one of a few (kept
        // prepared); a run named twice is changed once.
        let statement = padded(chunk);
        let (condition, condition_binds) = condition(&statement);
        let successes: Vec<String> = if chunk.iter().any(|w| queued(&w)) {
            let ids = changing(conn, &condition, &condition_binds).await?;
            chunk
                .iter()
                .filter(|w| queued(w) && ids.contains(&w.0.run.to_string()))
                .map(|(target, _)| target.run.to_string())
                .collect()
        } else {
            Vec::new()
        };
        let (set, mut binds) = assignments(&statement);
        binds.extend(condition_binds);
        let sql = conn.binds(format!("UPDATE ax_instance SET {set} WHERE {condition}"));
        changed += with_conn!(conn, |c| {
            Kept(bind_values!(
                diesel::sql_query(sql.as_str()).into_boxed(),
                &binds
            ))
            .execute(c)
            .await
        })?;
        alerts::queue_successes(conn, &successes).await?;
    }
    Ok(changed)
}

/// The runs that meet `condition`, locked (on MariaDB; SQLite's writer is alone) until the
/// transaction ends, so the update that follows changes exactly these.
async fn changing(
    conn: &mut Conn,
    condition: &str,
    binds: &[Value],
) -> Result<Vec<String>, StoreError> {
    let lock = match conn {
        Conn::Mysql(_) | Conn::Postgres(_) => " FOR UPDATE",
        Conn::Sqlite(..) => "",
    };
    let sql = conn.binds(format!(
        "SELECT request_id FROM ax_instance WHERE {condition}{lock}"
    ));
    let ids: Vec<Id> = with_conn!(conn, |c| {
        Kept(bind_values!(
            diesel::sql_query(sql.as_str()).into_boxed(),
            binds
        ))
        .load(c)
        .await
    })?;
    Ok(ids.into_iter().map(|id| id.request_id).collect())
}

/// The columns a value per run (`col = CASE request_id WHEN ? THEN ? … END`) or one value for
/// every run (`col = ?`) of `pick`, with their binds.
fn per_run_columns(
    writes: &[(Target, &Write)],
    pick: &dyn Fn(&Write) -> Vec<(&'static str, Value)>,
    binds: &mut Vec<Value>,
) -> Vec<String> {
    let per_run: Vec<Vec<(&'static str, Value)>> = writes.iter().map(|(_, w)| pick(w)).collect();
    let Some(first) = per_run.as_slice().first() else {
        return Vec::new();
    };
    let mut parts = Vec::new();
    for (k, (name, value)) in first.iter().enumerate() {
        // One value for every run (a status, a cleared column) is bound once.
        if per_run.iter().all(|values| values[k].1 == *value) {
            binds.push(value.clone());
            parts.push(format!("{name} ?"));
        } else {
            for ((target, _), values) in writes.iter().zip(&per_run) {
                binds.push(Value::Text(target.run.to_string()));
                binds.push(values[k].1.clone());
            }
            let whens = "WHEN ? THEN ? ".repeat(writes.len());
            parts.push(format!("{name} CASE request_id {whens}END"));
        }
    }
    parts
}

/// The `SET` list of writes of one shape, with its binds.
fn assignments(writes: &[(Target, &Write)]) -> (String, Vec<Value>) {
    let mut binds = Vec::new();
    let set = per_run_columns(writes, &|w| set_columns(&w.change), &mut binds).join(", ");
    (set, binds)
}

/// The `WHERE` condition of writes of one shape (each run's id, status and comparisons), with
/// its binds.
fn condition(writes: &[(Target, &Write)]) -> (String, Vec<Value>) {
    let Some((_, first)) = writes.first() else {
        return ("1 = 0".into(), Vec::new());
    };
    let mut binds: Vec<Value> = writes
        .iter()
        .map(|(target, _)| Value::Text(target.run.to_string()))
        .collect();
    binds.extend(first.expect.status.iter().map(|s| Value::Status(*s)));
    let mut conditions = vec![
        format!("request_id IN ({})", vec!["?"; writes.len()].join(", ")),
        format!(
            "status IN ({})",
            vec!["?"; first.expect.status.len()].join(", ")
        ),
    ];
    conditions.extend(per_run_columns(
        writes,
        &|w| expect_columns(&w.expect),
        &mut binds,
    ));
    (conditions.join(" AND "), binds)
}
