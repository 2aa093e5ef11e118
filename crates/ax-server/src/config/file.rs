//! The config file: YAML with a mapping per section, each key a setting's or one of the
//! design document's aliases ([`ALIASES`]). An empty value (`url:`, `url: ""`) is unset.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::kind::{scalar, Written};
use super::{Alias, Config, ConfigError, Origin, Setting, ALIASES, SETTINGS};

/// Applies the file `path`, whose text is `text`, to `config`.
pub fn apply(config: &mut Config, path: &Path, text: &str) -> Result<(), ConfigError> {
    let parse_error = |source| ConfigError::Parse {
        path: path.to_path_buf(),
        source,
    };
    let sections = match ax_core::text::yaml::from_str(text).map_err(parse_error)? {
        Node::Value(Value::Null) => return Ok(()),
        Node::Mapping(sections) => sections,
        Node::Value(_) => {
            return Err(ConfigError::NotAMapping {
                path: path.to_path_buf(),
                key: "the file".into(),
            })
        }
    };
    // Each setting given, by the key the file gives it with: a key and its alias are one
    // setting given twice.
    let mut given: HashMap<&'static str, String> = HashMap::new();
    for (section, keys) in sections {
        if !is_section(&section) {
            return Err(unknown(path, section));
        }
        let keys = match keys {
            Node::Value(Value::Null) => continue,
            Node::Mapping(keys) => keys,
            Node::Value(_) => {
                return Err(ConfigError::NotAMapping {
                    path: path.to_path_buf(),
                    key: section,
                })
            }
        };
        for (key, value) in keys {
            let key = format!("{section}.{key}");
            let value = value.into_value();
            let (setting, alias) = resolve(path, &key)?;
            if is_unset(&value) {
                continue;
            }
            let converted = match alias {
                Some(alias) => Some(convert(path, alias, &value)?),
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
                None => Written::Yaml(&value),
            };
            setting.apply(config, written).map_err(|refusal| {
                let value = match &converted {
                    Some(text) => setting.shown(text),
                    None => shown(setting, &value),
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
fn convert(path: &Path, alias: &Alias, value: &Value) -> Result<String, ConfigError> {
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

fn is_section(section: &str) -> bool {
    let prefix = format!("{section}.");
    SETTINGS
        .iter()
        .any(|setting| setting.key.starts_with(&prefix))
}

fn is_unset(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(text) => super::is_unset(text),
        _ => false,
    }
}

/// A value of the file as a refusal shows it; `None` for a secret.
fn shown(setting: &Setting, value: &Value) -> Option<String> {
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

/// A value of the file, its mappings' keys in the file's order: of two keys refused, the
/// first the file gives is named.
enum Node {
    Mapping(Vec<(String, Node)>),
    Value(Value),
}

impl Node {
    fn into_value(self) -> Value {
        match self {
            Node::Mapping(entries) => Value::Object(
                entries
                    .into_iter()
                    .map(|(key, node)| (key, node.into_value()))
                    .collect(),
            ),
            Node::Value(value) => value,
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry::<String, Node>()? {
            entries.push(entry);
        }
        Ok(Node::Mapping(entries))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item.into_value());
        }
        Ok(Node::Value(Value::Array(items)))
    }

    fn visit_bool<E>(self, flag: bool) -> Result<Node, E> {
        Ok(Node::Value(flag.into()))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Node, E> {
        Ok(Node::Value(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Node, E> {
        Ok(Node::Value(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Node, E> {
        Ok(Node::Value(n.into()))
    }

    fn visit_str<E>(self, text: &str) -> Result<Node, E> {
        Ok(Node::Value(text.into()))
    }

    fn visit_string<E>(self, text: String) -> Result<Node, E> {
        Ok(Node::Value(text.into()))
    }

    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Value(Value::Null))
    }

    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Value(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        Node::deserialize(deserializer)
    }
}
