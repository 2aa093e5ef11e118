//! The client's errors and the one rule that maps them to exit codes: 2 for bad usage or bad
//! input (the user can fix the command), 1 when the server said no or could not be reached.

use std::process::ExitCode;

use ax_core::EXIT_USAGE;

/// Why a client command failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Bad usage or input, found before or by the server (a 400 `INVALID_ARGUMENT`): the message
    /// names the flag, argument or field in the user's words.
    #[error("{0}")]
    Usage(String),
    /// No HTTP answer at all.
    #[error("cannot reach ax at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The server answered with an error other than a usage problem.
    #[error("{}", refusal_text(*.status, code, message, field.as_deref()))]
    Refused {
        status: u16,
        code: String,
        message: String,
        field: Option<String>,
    },
    /// Something else went wrong on this side: a reply that cannot be read, a file, the editor.
    #[error("{0}")]
    Failed(String),
}

impl ClientError {
    /// A usage error naming what was wrong.
    pub fn usage(message: impl Into<String>) -> ClientError {
        ClientError::Usage(message.into())
    }

    /// The process's exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            ClientError::Usage(_) => EXIT_USAGE,
            ClientError::Refused {
                status: 400, code, ..
            } if code == "INVALID_ARGUMENT" => EXIT_USAGE,
            ClientError::Unreachable { .. }
            | ClientError::Refused { .. }
            | ClientError::Failed(_) => 1,
        }
    }

    /// Whether the server answered 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ClientError::Refused { status: 404, .. })
    }
}

/// `CODE (field): message`, and for a 401 how to pass the token.
fn refusal_text(status: u16, code: &str, message: &str, field: Option<&str>) -> String {
    let mut text = match field {
        Some(field) => format!("{code} ({field}): {message}"),
        None => format!("{code}: {message}"),
    };
    if status == 401 {
        text.push_str("; pass the admin token with --token or AX_ADMIN_TOKEN");
    }
    text
}

/// Ends a client command: its message on stderr and its exit code.
pub fn exit_with(result: Result<(), ClientError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("ax: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(status: u16, code: &str) -> ClientError {
        ClientError::Refused {
            status,
            code: code.into(),
            message: "no".into(),
            field: Some("cron".into()),
        }
    }

    #[test]
    fn usage_problems_exit_2_and_refusals_1() {
        assert_eq!(ClientError::usage("--limit: expected 1-500").exit_code(), 2);
        assert_eq!(refused(400, "INVALID_ARGUMENT").exit_code(), 2);
        assert_eq!(refused(404, "NOT_FOUND").exit_code(), 1);
        assert_eq!(refused(409, "CONFLICT").exit_code(), 1);
        assert_eq!(refused(503, "STORE_UNAVAILABLE").exit_code(), 1);
        let unreachable = ClientError::Unreachable {
            url: "http://127.0.0.1:9".into(),
            reason: "connection refused".into(),
        };
        assert_eq!(unreachable.exit_code(), 1);
        assert_eq!(
            unreachable.to_string(),
            "cannot reach ax at http://127.0.0.1:9: connection refused"
        );
    }

    #[test]
    fn a_401_tells_how_to_pass_the_token() {
        let text = refused(401, "UNAUTHORIZED").to_string();
        assert!(text.contains("--token or AX_ADMIN_TOKEN"), "{text}");
        assert_eq!(
            refused(404, "NOT_FOUND").to_string(),
            "NOT_FOUND (cron): no"
        );
    }
}
