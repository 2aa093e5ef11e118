//! Task ids and request ids, from a path or a body.

use crate::error::ApiError;
use ax_core::run::{RequestId, TaskId};

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
