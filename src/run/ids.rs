//! Ids as types: a function that takes a task id cannot be handed a run's, and each maps to its
//! column once.

use chrono::{DateTime, Utc};
use diesel::backend::Backend;
use diesel::deserialize::{FromSql, FromSqlRow};
use diesel::expression::AsExpression;
use diesel::serialize::{Output, ToSql};
use diesel::sql_types::{BigInt, Text};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A task's id.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    AsExpression,
    FromSqlRow,
)]
#[diesel(sql_type = BigInt)]
#[serde(transparent)]
pub struct TaskId(pub i64);

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<DB> ToSql<BigInt, DB> for TaskId
where
    DB: Backend,
    i64: ToSql<BigInt, DB>,
{
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, DB>) -> diesel::serialize::Result {
        self.0.to_sql(out)
    }
}

impl<DB> FromSql<BigInt, DB> for TaskId
where
    DB: Backend,
    i64: FromSql<BigInt, DB>,
{
    fn from_sql(bytes: DB::RawValue<'_>) -> diesel::deserialize::Result<Self> {
        i64::from_sql(bytes).map(TaskId)
    }
}

/// A run's request id: the executor's idempotency key, a UUID in its hyphenated form.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    AsExpression,
    FromSqlRow,
)]
#[diesel(sql_type = Text)]
#[serde(transparent)]
pub struct RequestId(String);

/// Namespace of ax's scheduled-run ids (a fixed, random UUID).
const RUN_NAMESPACE: Uuid = Uuid::from_u128(0x6a1c_52e4_93b7_4c0e_8f2d_3b5a_7e91_c4d8);

impl RequestId {
    /// The id of a task's scheduled run: derived from (task id, scheduled second), so every
    /// fire of that run — on any ax instance, after any restart — carries the same id, and a
    /// duplicate fire hits the unique key instead of adding a row.
    pub fn scheduled(task_id: TaskId, scheduled_at: DateTime<Utc>) -> RequestId {
        let name = format!("{task_id}@{}", scheduled_at.timestamp());
        RequestId::named(scheduled_at, &name)
    }

    /// The id of shard `index` of a broadcast task's scheduled run: derived from (task id,
    /// scheduled second, shard); shard 0's is the run's own id (see `Shard::request_id`).
    pub fn scheduled_shard(task_id: TaskId, scheduled_at: DateTime<Utc>, index: i32) -> RequestId {
        if index == 0 {
            return RequestId::scheduled(task_id, scheduled_at);
        }
        let name = format!("{task_id}@{}#{index}", scheduled_at.timestamp());
        RequestId::named(scheduled_at, &name)
    }

    /// A UUID v8 that sorts by `at`: its first 48 bits are `at` in Unix milliseconds (as a
    /// UUID v7's), the other 74 are the SHA-1 of `name` in ax's namespace (as a UUID v5's).
    /// Ids made in the same second sit side by side in the database's request-id index, so a
    /// batch of runs writes a few of its pages instead of a page a run (SQLite's WAL takes
    /// each page written whole); two names of one second share an id with odds of 2^-74.
    fn named(at: DateTime<Utc>, name: &str) -> RequestId {
        let millis = u64::try_from(at.timestamp_millis()).unwrap_or(0);
        let mut bytes = *Uuid::new_v5(&RUN_NAMESPACE, name.as_bytes()).as_bytes();
        bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
        RequestId::from(uuid::Builder::from_custom_bytes(bytes).into_uuid())
    }

    /// A fresh id for a run outside the schedule (manual runs): a UUID v7, which sorts by
    /// the time it is made, for the same reason.
    pub fn manual() -> RequestId {
        RequestId::from(Uuid::now_v7())
    }

    /// Parses a request id given from outside; `None` unless it is a UUID.
    pub fn parse(text: &str) -> Option<RequestId> {
        Uuid::parse_str(text).ok().map(RequestId::from)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<Uuid> for RequestId {
    fn from(id: Uuid) -> Self {
        RequestId(id.hyphenated().to_string())
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<DB> ToSql<Text, DB> for RequestId
where
    DB: Backend,
    str: ToSql<Text, DB>,
{
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, DB>) -> diesel::serialize::Result {
        self.0.as_str().to_sql(out)
    }
}

impl<DB> FromSql<Text, DB> for RequestId
where
    DB: Backend,
    String: FromSql<Text, DB>,
{
    fn from_sql(bytes: DB::RawValue<'_>) -> diesel::deserialize::Result<Self> {
        String::from_sql(bytes).map(RequestId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(secs, 0).single().expect("valid time")
    }

    #[test]
    fn a_scheduled_request_id_is_a_uuid_v8_of_its_second_and_never_changes() {
        let t = at(1_799_999_990);
        let id = RequestId::scheduled(TaskId(7), t);
        let uuid = Uuid::parse_str(id.as_str()).expect("uuid");
        assert_eq!(uuid.get_version_num(), 8);
        assert_eq!(uuid.as_u128() >> 80, 1_799_999_990_000);
        // Every ax process, of any version since, gives this run this id: a fire repeated after
        // a restart or on another process hits the unique key.
        assert_eq!(id.as_str(), "01a3185c-28f0-8252-9330-c8c4cfa77695");
        assert_eq!(RequestId::scheduled(TaskId(7), t), id);
        assert_ne!(RequestId::scheduled_shard(TaskId(7), t, 1), id);
    }

    #[test]
    fn manual_request_ids_sort_by_when_they_are_made() {
        let first = RequestId::manual();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = RequestId::manual();
        assert!(first < second, "{first} then {second}");
        let uuid = Uuid::parse_str(second.as_str()).expect("uuid");
        assert_eq!(uuid.get_version_num(), 7);
    }

    #[test]
    fn other_task_or_second_other_id() {
        let t = at(1_800_000_000);
        let id = |task, t| RequestId::scheduled(TaskId(task), t);
        assert_ne!(id(7, t), id(8, t));
        assert_ne!(id(7, t), id(7, at(1_800_000_001)));
        // "1@23" and "12@3" must not collide: the separator keeps the parts apart.
        assert_ne!(id(1, at(23)), id(12, at(3)));
    }

    #[test]
    fn manual_ids_are_unique_and_parse_back() {
        let id = RequestId::manual();
        assert_ne!(id, RequestId::manual());
        assert_eq!(RequestId::parse(id.as_str()), Some(id));
        assert_eq!(RequestId::parse("not-a-uuid"), None);
    }
}
