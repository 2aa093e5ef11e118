//! Why a configuration was refused, and where the refused value came from.

use std::fmt;
use std::path::PathBuf;

use super::values::MIN_SECRET_CHARS;

/// Errors reading the configuration, each one line in the key's words.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {source}")]
    Parse {
        path: PathBuf,
        source: ax_core::text::yaml::Error,
    },
    /// A value refused: where it came from, then the key and the rule it breaks
    /// (`AX_PORT=70000: server.port must be 1-65535`).
    #[error("{origin}{key} {rule}")]
    Invalid {
        origin: Origin,
        key: &'static str,
        rule: String,
    },
    /// A part of one entry of a list refused: the key, then the entry and the rule it breaks
    /// (`server.tokens` and `[0].groups must …`).
    #[error("{origin}{key}{entry_rule}")]
    InvalidEntry {
        origin: Origin,
        key: &'static str,
        entry_rule: String,
    },
    /// A secret too short not to be guessed; its value is never shown.
    #[error("{key} ({env}) must be at least {MIN_SECRET_CHARS} characters")]
    ShortSecret {
        key: &'static str,
        env: &'static str,
    },
    #[error("{path}: unknown key {key}")]
    UnknownKey { path: PathBuf, key: String },
    #[error("{path}: {key} must be a mapping of its keys")]
    NotAMapping { path: PathBuf, key: String },
    /// The file gives one setting twice: a key and the design document's alias of it.
    #[error("{path}: {first} and {second} both set {sets}: give one of them")]
    Twice {
        path: PathBuf,
        first: String,
        second: String,
        sets: &'static str,
    },
    /// A flag set a key no setting declares.
    #[error("{flag} sets {key}, which is no setting")]
    UnknownFlag {
        flag: &'static str,
        key: &'static str,
    },
}

/// Where a refused value came from, as its refusal starts.
#[derive(Debug)]
pub enum Origin {
    /// An environment variable; its value, unless it is one never shown.
    Env {
        name: &'static str,
        value: Option<String>,
    },
    /// A key of the config file; the value, unless it is one never shown.
    File {
        path: PathBuf,
        key: String,
        value: Option<String>,
    },
    /// A command-line flag; its value, unless it is one never shown.
    Flag {
        flag: &'static str,
        value: Option<String>,
    },
    /// The value a caller set in the field, checked after every layer.
    Field {
        key: &'static str,
        value: Option<String>,
    },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Env {
                name,
                value: Some(value),
            } => write!(f, "{name}={value}: "),
            Origin::Env { name, value: None } => write!(f, "{name}: "),
            Origin::File {
                path,
                key,
                value: Some(value),
            } => write!(f, "{}: {key}={value}: ", path.display()),
            Origin::File { path, .. } => write!(f, "{}: ", path.display()),
            Origin::Flag {
                flag,
                value: Some(value),
            } => write!(f, "{flag}={value}: "),
            Origin::Flag { flag, value: None } => write!(f, "{flag}: "),
            Origin::Field {
                key,
                value: Some(value),
            } => write!(f, "{key}={value}: "),
            Origin::Field { value: None, .. } => Ok(()),
        }
    }
}
