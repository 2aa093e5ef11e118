//! What a validation refused, for the tests of each input.

use crate::error::ApiError;

pub(super) fn field_of(err: ApiError) -> Option<String> {
    match err {
        ApiError::Invalid { field, .. } => field,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

/// The field and message of a 400.
pub(super) fn refusal(err: ApiError) -> (String, String) {
    match err {
        ApiError::Invalid {
            field: Some(field),
            message,
            ..
        } => (field, message),
        other => panic!("expected Invalid with a field, got {other:?}"),
    }
}
