//! Request ids: the executor's idempotency key for a run.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Namespace of ax's scheduled-run ids (a fixed, random UUID).
const RUN_NAMESPACE: Uuid = Uuid::from_u128(0x6a1c_52e4_93b7_4c0e_8f2d_3b5a_7e91_c4d8);

/// The request id of a task's scheduled run: derived from (task id, scheduled second), so every
/// fire of that run — on any ax instance, after any restart — carries the same id, and a
/// duplicate fire hits the unique key instead of adding a row.
pub fn scheduled_request_id(task_id: i64, scheduled_at: DateTime<Utc>) -> Uuid {
    let name = format!("{task_id}@{}", scheduled_at.timestamp());
    Uuid::new_v5(&RUN_NAMESPACE, name.as_bytes())
}

/// A fresh id for a run outside the schedule (manual runs).
pub fn manual_request_id() -> Uuid {
    Uuid::new_v4()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(secs, 0).single().expect("valid time")
    }

    #[test]
    fn same_run_same_id() {
        let t = at(1_800_000_000);
        assert_eq!(scheduled_request_id(7, t), scheduled_request_id(7, t));
        assert_eq!(scheduled_request_id(7, t).get_version_num(), 5);
    }

    #[test]
    fn other_task_or_second_other_id() {
        let t = at(1_800_000_000);
        assert_ne!(scheduled_request_id(7, t), scheduled_request_id(8, t));
        assert_ne!(
            scheduled_request_id(7, t),
            scheduled_request_id(7, at(1_800_000_001))
        );
        // "1@23" and "12@3" must not collide: the separator keeps the parts apart.
        assert_ne!(
            scheduled_request_id(1, at(23)),
            scheduled_request_id(12, at(3))
        );
    }

    #[test]
    fn manual_ids_are_unique() {
        assert_ne!(manual_request_id(), manual_request_id());
    }
}
