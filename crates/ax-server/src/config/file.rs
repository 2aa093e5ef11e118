//! The config file: YAML with a mapping per section, each key a setting's or one of the
//! design document's aliases ([`ALIASES`]). An empty value (`url:`, `url: ""`) is unset.

use std::collections::HashMap;
use std::path::Path;

use serde_yaml::Value as Yaml;

use super::kind::{scalar, Written};
use super::{Alias, Config, ConfigError, Origin, Setting, ALIASES, SETTINGS};

/// Applies the file `path`, whose text is `text`, to `config`.
pub fn apply(config: &mut Config, path: &Path, text: &str) -> Result<(), ConfigError> {
    let parse_error = |source| ConfigError::Parse {
        path: path.to_path_buf(),
        source,
    };
    let sections = match serde_yaml::from_str(text).map_err(parse_error)? {
        Yaml::Null => return Ok(()),
        Yaml::Mapping(sections) => sections,
        _ => {
            return Err(ConfigError::NotAMapping {
                path: path.to_path_buf(),
                key: "the file".into(),
            })
        }
    };
    // Each setting given, by the key the file gives it with: a key and its alias are one
    // setting given twice.
    let mut given: HashMap<&'static str, String> = HashMap::new();
    for (section, keys) in &sections {
        let section = name(path, section, "")?;
        if !is_section(&section) {
            return Err(unknown(path, section));
        }
        let keys = match keys {
            Yaml::Null => continue,
            Yaml::Mapping(keys) => keys,
            _ => {
                return Err(ConfigError::NotAMapping {
                    path: path.to_path_buf(),
                    key: section,
                })
            }
        };
        for (key, value) in keys {
            let key = name(path, key, &format!("{section}."))?;
            let (setting, alias) = resolve(path, &key)?;
            if is_unset(value) {
                continue;
            }
            let converted = match alias {
                Some(alias) => Some(convert(path, alias, value)?),
                None => None,
            };
            if let Some(first) = given.insert(setting.key, key.clone()) {
                return Err(ConfigError::Twice {
                    path: path.to_path_buf(),
                    first,
                    second: key,
                    sets: setting.key,
                });
            }
            let written = match &converted {
                Some(text) => Written::Text(text),
                None => Written::Yaml(value),
            };
            setting.apply(config, written).map_err(|refusal| {
                let value = match &converted {
                    Some(text) => setting.shown(text),
                    None => shown(setting, value),
                };
                let origin = Origin::File {
                    path: path.to_path_buf(),
                    key,
                    value,
                };
                setting.refused(origin, refusal)
            })?;
        }
    }
    Ok(())
}

/// The setting `key` sets, and the alias it is of that setting.
fn resolve(
    path: &Path,
    key: &str,
) -> Result<(&'static Setting, Option<&'static Alias>), ConfigError> {
    let by_key = |key: &str| SETTINGS.iter().find(|setting| setting.key == key);
    if let Some(setting) = by_key(key) {
        return Ok((setting, None));
    }
    ALIASES
        .iter()
        .find(|alias| alias.key == key)
        .and_then(|alias| Some((by_key(alias.sets)?, Some(alias))))
        .ok_or_else(|| unknown(path, key.to_string()))
}

/// An alias's value, as the setting it sets takes it.
fn convert(path: &Path, alias: &Alias, value: &Yaml) -> Result<String, ConfigError> {
    let refused = |text: Option<&str>, rule: String| ConfigError::Invalid {
        origin: Origin::File {
            path: path.to_path_buf(),
            key: alias.key.to_string(),
            value: text.map(alias.shown),
        },
        key: alias.key,
        rule,
    };
    let text = scalar(value).ok_or_else(|| refused(None, "must be one value".into()))?;
    (alias.convert)(&text).map_err(|rule| refused(Some(&text), rule))
}

/// A key of the file, as text, after `prefix`.
fn name(path: &Path, key: &Yaml, prefix: &str) -> Result<String, ConfigError> {
    match scalar(key) {
        Some(key) => Ok(format!("{prefix}{key}")),
        None => Err(unknown(path, format!("{prefix}{key:?}"))),
    }
}

fn is_section(section: &str) -> bool {
    let prefix = format!("{section}.");
    SETTINGS
        .iter()
        .any(|setting| setting.key.starts_with(&prefix))
}

fn is_unset(value: &Yaml) -> bool {
    match value {
        Yaml::Null => true,
        Yaml::String(text) => super::is_unset(text),
        _ => false,
    }
}

/// A value of the file as a refusal shows it; `None` for a secret.
fn shown(setting: &Setting, value: &Yaml) -> Option<String> {
    match scalar(value) {
        Some(text) => setting.shown(&text),
        None if setting.kind.hides_values() => None,
        None => Some(serde_json::to_string(value).unwrap_or_else(|_| format!("{value:?}"))),
    }
}

fn unknown(path: &Path, key: String) -> ConfigError {
    ConfigError::UnknownKey {
        path: path.to_path_buf(),
        key,
    }
}
