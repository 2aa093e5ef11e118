//! What the settings share: the values that are more than a scalar (tokens, executor hosts)
//! and the rules every layer applies alike.

use serde::Deserialize;

use ax_core::security::Role;

/// The fewest characters of a token or a secret.
pub const MIN_SECRET_CHARS: usize = 16;

/// A named API token (`server.tokens`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NamedToken {
    pub name: String,
    pub token: String,
    pub role: Role,
    /// The executor groups an executor's token may register members into (`["*"]`: all);
    /// required for one, refused for the others.
    #[serde(default)]
    pub groups: Option<Vec<String>>,
}

/// `dispatch.hosts.<host>`: one executor host's own settings.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// Most requests in flight to this host, instead of `dispatch.max_in_flight_per_host`.
    pub max_in_flight: usize,
}

/// Whether a value as written means "unset": empty, or only blanks.
pub(super) fn is_unset(value: &str) -> bool {
    value.trim().is_empty()
}

/// Whether `id` may name an ax process: it also names a lock file and a Redis key.
pub fn is_instance_id(id: &str) -> bool {
    is_short_name(id)
}

/// Whether `prefix` may start ax's Redis keys: the characters of an instance id, which never
/// need quoting in `redis-cli` or a key pattern.
pub fn is_key_prefix(prefix: &str) -> bool {
    is_short_name(prefix)
}

/// 1-64 characters of `A-Z a-z 0-9 . _ : -`.
fn is_short_name(text: &str) -> bool {
    (1..=64).contains(&text.len())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
}
