//! Ids as types, in one place: a function that takes a task id cannot be handed a run's, nor a
//! group's name a scene's, and each maps to its column once. Runs' and tasks' ids here, the
//! names that serve as ids in `names`.

/// Maps a newtype over a `String` to a text column, both ways: its text as written.
macro_rules! text_column {
    ($name:ident) => {
        impl<DB> diesel::serialize::ToSql<diesel::sql_types::Text, DB> for $name
        where
            DB: diesel::backend::Backend,
            str: diesel::serialize::ToSql<diesel::sql_types::Text, DB>,
        {
            fn to_sql<'b>(
                &'b self,
                out: &mut diesel::serialize::Output<'b, '_, DB>,
            ) -> diesel::serialize::Result {
                diesel::serialize::ToSql::<diesel::sql_types::Text, DB>::to_sql(
                    self.0.as_str(),
                    out,
                )
            }
        }

        impl<DB> diesel::deserialize::FromSql<diesel::sql_types::Text, DB> for $name
        where
            DB: diesel::backend::Backend,
            String: diesel::deserialize::FromSql<diesel::sql_types::Text, DB>,
        {
            fn from_sql(bytes: DB::RawValue<'_>) -> diesel::deserialize::Result<Self> {
                <String as diesel::deserialize::FromSql<diesel::sql_types::Text, DB>>::from_sql(
                    bytes,
                )
                .map($name)
            }
        }
    };
}

mod names;

pub use names::{CalendarName, GroupName, ProcessId, SceneName};

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

text_column!(RequestId);

/// The start of request ids, as one is copied from a log or a page: at least
/// [`RequestIdPrefix::MIN_HEX`] hex digits, with or without the dashes a request id has (a dash
/// only where one stands in a request id), any case. Held as request ids are stored: lower
/// case, dashes in their places.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestIdPrefix(String);

impl RequestIdPrefix {
    /// The fewest hex digits taken: 6 name 16.7 million ids, and the first 12 of an id are its
    /// time (a second's runs share 9), so fewer would name nearly every run.
    pub const MIN_HEX: usize = 6;
    /// Where a request id's dashes stand, counted in hex digits before them.
    const DASHES_AFTER: [usize; 4] = [8, 12, 16, 20];
    /// A request id's hex digits.
    const HEX: usize = 32;

    /// `text` as the start of request ids; `None` unless it is one (shorter than
    /// [`Self::MIN_HEX`], longer than an id, another character, a dash out of place).
    pub fn parse(text: &str) -> Option<RequestIdPrefix> {
        let mut prefix = String::with_capacity(36);
        let mut digits = 0;
        let mut dash_allowed = false;
        for c in text.chars() {
            if c == '-' {
                if !dash_allowed {
                    return None;
                }
                dash_allowed = false;
                continue;
            }
            if !c.is_ascii_hexdigit() || digits == Self::HEX {
                return None;
            }
            if Self::DASHES_AFTER.contains(&digits) {
                prefix.push('-');
            }
            prefix.push(c.to_ascii_lowercase());
            digits += 1;
            dash_allowed = Self::DASHES_AFTER.contains(&digits);
        }
        (digits >= Self::MIN_HEX).then_some(RequestIdPrefix(prefix))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The least text above every request id that starts with it: the ids it names are the
    /// range `[prefix, end)` of the request-id index (a `g` sorts after every hex digit and
    /// the dash).
    pub fn end(&self) -> String {
        format!("{}g", self.0)
    }

    /// Whether `id` starts with it.
    pub fn matches(&self, id: &RequestId) -> bool {
        id.as_str().starts_with(&self.0)
    }
}

impl std::fmt::Display for RequestIdPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_prefix_is_six_hex_digits_or_more_with_the_dashes_of_an_id_or_none() {
        let id = RequestId::manual();
        let text = id.as_str();
        let parsed = |text: &str| RequestIdPrefix::parse(text).map(|p| p.as_str().to_string());
        // As copied, with its dashes or without, in any case: stored as ids are.
        assert_eq!(parsed(&text[..6]).as_deref(), Some(&text[..6]));
        assert_eq!(parsed(&text[..13]).as_deref(), Some(&text[..13]));
        assert_eq!(parsed(&text[..8]), parsed(&text[..9]), "a dash at the end");
        let bare: String = text[..20].replace('-', "").to_uppercase();
        assert_eq!(parsed(&bare).as_deref(), Some(&text[..20]));
        assert_eq!(parsed(&text[..35]).as_deref(), Some(&text[..35]));
        let prefix = RequestIdPrefix::parse(&text[..10]).expect("a prefix");
        assert!(prefix.matches(&id));
        assert!(!prefix.matches(&RequestId::from(Uuid::from_u128(0))));
        // The range of the index it names.
        assert!(prefix.as_str() <= text && text < prefix.end().as_str());
        assert_eq!(parsed("0123456789").as_deref(), Some("01234567-89"));
        for refused in [
            "",
            "abcde",
            "abc-def01",
            "-abcdef",
            "abcdef0g",
            "01234567--89ab",
            "01234567 89ab",
            "reports",
        ] {
            assert_eq!(RequestIdPrefix::parse(refused), None, "{refused:?}");
        }
        let too_long = format!("{}0", text.replace('-', ""));
        assert_eq!(RequestIdPrefix::parse(&too_long), None, "longer than an id");
    }

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
