//! The codes and messages ax itself writes on a run (`callback_code`, `callback_message`), each
//! spelled once: the lifecycle writes them, the dispatchers report them, and the store, the
//! stats and the load tool read them back.

/// An attempt that got no result before its deadline (no reply, or no callback).
pub const TIMEOUT_CODE: &str = "TIMEOUT";
/// A callback that never came before the run's deadline.
pub const TIMEOUT_MESSAGE: &str = "no result before the task's timeoutMs";
/// A handler that did not reply before the task's timeout.
pub const NO_REPLY_MESSAGE: &str = "no reply before the task's timeoutMs";

/// The handler could not be reached (no connection, or its URL is not one).
pub const CONNECT_ERROR_CODE: &str = "CONNECT_ERROR";
/// An executor group had no member to send the attempt to: none registered, none healthy, or
/// every one refused the connection.
pub const NO_EXECUTOR_CODE: &str = "NO_EXECUTOR";
/// The handler's URL does not parse as a URI.
pub const BAD_URI_MESSAGE: &str = "the handler URL is not a valid URI";
/// The handler's reply could not be read.
pub const BAD_REPLY_CODE: &str = "BAD_REPLY";
/// The run's params could not be sent.
pub const BAD_PARAMS_CODE: &str = "BAD_PARAMS";
/// The stored params do not parse as JSON.
pub const PARAMS_NOT_JSON_MESSAGE: &str = "stored params are not JSON";
/// The dispatch body could not be encoded.
pub const BODY_NOT_ENCODED_MESSAGE: &str = "the dispatch body could not be encoded";
/// The handler's host is not allowed (not retried).
pub const HANDLER_NOT_ALLOWED_CODE: &str = "HANDLER_NOT_ALLOWED";

/// The code of a reply outside 2xx: `HTTP_` and its status.
pub fn http_code(status: u16) -> String {
    format!("HTTP_{status}")
}

/// A result the database refused to store, recorded as its attempt's failure.
pub const RESULT_REJECTED_CODE: &str = "RESULT_REJECTED";
pub const RESULT_REJECTED_MESSAGE: &str = "the result could not be stored";

/// A waiting run whose upstream's run did not succeed.
pub const UPSTREAM_FAILED_CODE: &str = "UPSTREAM_FAILED";
pub const UPSTREAM_FAILED_MESSAGE: &str =
    "an upstream task's run at or before this one did not succeed";
/// A waiting run whose upstreams took longer than the dependency timeout.
pub const DEPENDENCY_TIMEOUT_CODE: &str = "DEPENDENCY_TIMEOUT";
pub const DEPENDENCY_TIMEOUT_MESSAGE: &str =
    "upstream tasks did not succeed within the dependency timeout";

/// A run whose task was deleted before it finished.
pub const TASK_DELETED_CODE: &str = "TASK_DELETED";
pub const TASK_DELETED_MESSAGE: &str = "the task was deleted before the run finished";

/// The code of a run the overlap policy skipped or holds back.
pub const OVERLAP_CODE: &str = "OVERLAP";
/// The code of a run a later one replaced.
pub const REPLACED_CODE: &str = "REPLACED";
pub const REPLACED_MESSAGE: &str = "replaced by a later run of the task (overlap REPLACE)";
/// The code of a run a user cancelled.
pub const CANCELLED_CODE: &str = "CANCELLED";
pub const CANCELLED_MESSAGE: &str = "cancelled by a user";

/// A run skipped by `SKIP`, or by `BUFFER_ONE` with a run waiting already.
pub const SKIP_MESSAGE: &str = "an earlier run of the task was not finished (overlap SKIP)";
pub const BUFFER_FULL_MESSAGE: &str =
    "a run of the task was waiting already for an earlier one to finish (overlap BUFFER_ONE)";
/// A run `BUFFER_ONE` holds back.
pub const BUFFER_MESSAGE: &str = "waits for the task's earlier run to finish (overlap BUFFER_ONE)";
