//! Configuration, layered: built-in defaults, then `config/ax.yaml` (or `--config PATH`), then
//! `AX_…` environment variables, then command-line flags. Every setting is declared once, in
//! [`settings`]; reading each layer, checking values, `--help` and the reference in `docs/configuration.md` follow.

mod declare;
mod dsn;
mod duration;
mod error;
mod file;
mod kind;
mod redis_url;
pub mod reference;
mod settings;
mod values;

use std::path::Path;

use ax_core::plan::MissedRunPolicy;
use ax_core::run::RetryPolicy;

pub use declare::Setting;
pub use error::{ConfigError, Origin};
pub use kind::{Kind, MAX_IN_FLIGHT_PER_HOST};
pub use redis_url::{RedisTarget, SentinelTarget};
pub use settings::{
    AlertsConfig, Alias, Config, DispatchConfig, ExecutorsConfig, RedisConfig, RunLogsConfig,
    SchedulerConfig, SecurityConfig, ServerConfig, StoreConfig, ALIASES, MAX_COMMIT_AHEAD_MS,
    SETTINGS,
};

use kind::{Refusal, Written};
use values::is_unset;
pub use values::{is_instance_id, is_key_prefix, HostConfig, NamedToken, MIN_SECRET_CHARS};

/// The config file read when no `--config` is given and it exists.
pub const DEFAULT_CONFIG_PATH: &str = "config/ax.yaml";

impl DispatchConfig {
    /// How each host's slots are shared between quick and slow tasks.
    pub fn lanes(&self) -> ax_core::dispatch::host_slots::LaneSettings {
        ax_core::dispatch::host_slots::LaneSettings {
            slow_after: std::time::Duration::from_millis(self.slow_after_ms),
            slow_share_percent: self.slow_share_percent,
        }
    }

    /// Each executor host's cap.
    pub fn host_caps(&self) -> ax_core::dispatch::host_slots::HostCaps {
        ax_core::dispatch::host_slots::HostCaps {
            default: self.max_in_flight_per_host,
            hosts: self
                .hosts
                .iter()
                .map(|(host, config)| (host.to_ascii_lowercase(), config.max_in_flight))
                .collect(),
        }
    }
}

/// The environment variables ax reads, one per setting that has one.
pub fn env_vars() -> impl Iterator<Item = &'static str> {
    SETTINGS.iter().filter_map(|setting| setting.env)
}

impl Setting {
    /// This setting's refusal of a value from `origin`.
    fn refused(&self, origin: Origin, refusal: Refusal) -> ConfigError {
        match refusal {
            Refusal::Rule(rule) => ConfigError::Invalid {
                origin,
                key: self.key,
                rule,
            },
            Refusal::Entry { entry, rule } => ConfigError::InvalidEntry {
                origin,
                key: self.key,
                entry_rule: format!("{entry} {rule}"),
            },
            Refusal::ShortSecret => ConfigError::ShortSecret {
                key: self.key,
                env: self.env.unwrap_or("file only"),
            },
        }
    }

    /// `value` as a refusal may show it: `None` for a secret.
    fn shown(&self, value: &str) -> Option<String> {
        (!self.kind.hides_values()).then(|| kind::masked(value))
    }
}

impl Config {
    /// Loads the configuration: `path` if given, else `config/ax.yaml` if present, else
    /// defaults; then the process environment.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        Config::load_with(path, Vec::new())
    }

    /// Like `load`, then command-line flags over both: each `(flag, key, value)` sets the
    /// config key `key` (errors name `flag`).
    pub fn load_with(
        path: Option<&Path>,
        flags: Vec<(&'static str, &'static str, String)>,
    ) -> Result<Config, ConfigError> {
        let default_path = Path::new(DEFAULT_CONFIG_PATH);
        let file = path.or_else(|| default_path.exists().then_some(default_path));
        let mut config = match file {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        config.apply_env(|name| std::env::var(name).ok())?;
        for (flag, key, value) in flags {
            config.apply_flag(flag, key, &value)?;
        }
        config.validate()?;
        Ok(config)
    }

    /// The environment variables ax reads, each with its key, range and default, for `--help`.
    pub fn env_help() -> String {
        let mut help = String::from(
            "Environment (over the config file; command-line flags over both; empty is unset):\n",
        );
        let width = env_vars().map(str::len).max().unwrap_or(0);
        for setting in SETTINGS {
            let Some(name) = setting.env else { continue };
            let range = setting.kind.describe();
            let default = setting.default_shown().replace('`', "");
            let about = match range.is_empty() {
                true => format!("default {default}"),
                false => format!("{range}; default {default}"),
            };
            let list = if setting.kind.is_list() {
                ", comma-separated"
            } else {
                ""
            };
            help.push_str(&format!(
                "  {name:<width$}  {}{list} ({about})\n",
                setting.key
            ));
        }
        help.push_str(&format!(
            "  {:<width$}  log filter (default info)\n",
            "RUST_LOG"
        ));
        help
    }

    /// The listen address: as configured, else all interfaces only when the admin API is
    /// protected by a token.
    pub fn bind_address(&self) -> &str {
        match &self.server.bind {
            Some(bind) => bind,
            None if self.has_tokens() => "0.0.0.0",
            None => "127.0.0.1",
        }
    }

    /// Whether the API asks for a token (the admin token or a named one).
    pub fn has_tokens(&self) -> bool {
        self.server.admin_token.is_some() || !self.server.tokens.is_empty()
    }

    /// The global missed-run policy.
    pub fn missed_run_policy(&self) -> MissedRunPolicy {
        MissedRunPolicy {
            misfire_threshold_secs: self.scheduler.misfire_threshold_secs,
            ..MissedRunPolicy::default()
        }
    }

    /// The global retry back-off.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            backoff_secs: self.scheduler.retry_backoff_secs,
            factor: self.scheduler.retry_factor,
        }
    }

    /// Reads a YAML file over the defaults; absent keys keep them.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config = Config::default();
        file::apply(&mut config, path, &text)?;
        Ok(config)
    }

    /// Applies every `AX_…` variable that `lookup` finds, but an empty one: unset.
    pub fn apply_env(
        &mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        for setting in SETTINGS {
            let Some(name) = setting.env else { continue };
            let Some(value) = lookup(name).filter(|value| !is_unset(value)) else {
                continue;
            };
            setting
                .apply(self, Written::Text(&value))
                .map_err(|refusal| {
                    let value = setting.shown(&value);
                    setting.refused(Origin::Env { name, value }, refusal)
                })?;
        }
        Ok(())
    }

    /// Applies a command-line flag's value to `key`, but an empty one: unset.
    fn apply_flag(
        &mut self,
        flag: &'static str,
        key: &'static str,
        value: &str,
    ) -> Result<(), ConfigError> {
        let setting = SETTINGS
            .iter()
            .find(|setting| setting.key == key)
            .ok_or(ConfigError::UnknownFlag { flag, key })?;
        if is_unset(value) {
            return Ok(());
        }
        setting
            .apply(self, Written::Text(value))
            .map_err(|refusal| {
                let value = setting.shown(value);
                setting.refused(Origin::Flag { flag, value }, refusal)
            })
    }

    /// Rejects values the scheduler cannot run with, as set in the fields after every layer.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for setting in SETTINGS {
            let Some(value) = setting.value(self) else {
                continue;
            };
            setting.kind.check(&value).map_err(|refusal| {
                let shown = (!setting.kind.hides_values()).then(|| value.shown());
                let origin = Origin::Field {
                    key: setting.key,
                    value: shown,
                };
                setting.refused(origin, refusal)
            })?;
        }
        self.check_alerts()
    }

    /// What alerts' settings must agree on with others: the default rule names configured
    /// channels, and every channel's host passes the handler allowlist as a handler's would
    /// (no link-local or metadata address unless named).
    fn check_alerts(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, rule: String| ConfigError::Invalid {
            origin: Origin::Field { key, value: None },
            key,
            rule,
        };
        let names: Vec<&str> = self
            .alerts
            .channels
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        self.alerts
            .default_rule
            .check(&names)
            .map_err(|err| invalid("alerts.default", err.to_string()))?;
        let allowlist = ax_core::security::Allowlist::parse(&self.security.handler_allowlist)
            .map_err(|err| invalid("security.handler_allowlist", err))?;
        for (n, channel) in self.alerts.channels.iter().enumerate() {
            let address = channel.url.as_deref().or(channel.smtp.as_deref());
            let host = address
                .and_then(|a| url::Url::parse(a).ok())
                .and_then(|url| url.host_str().map(str::to_string));
            if let Some(host) = host.filter(|host| !allowlist.allows(host)) {
                return Err(invalid(
                    "alerts.channels",
                    format!("[{n}]: the host {host} is not allowed by security.handler_allowlist (link-local and metadata addresses need naming)"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
