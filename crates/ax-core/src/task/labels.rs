//! A task's labels (`crate::task::fields::LABELS`): string keys of `a-z 0-9 _ . -` to string
//! values. Stored as a JSON object in one text column, keys in order and without spaces, so
//! a label is found in the column as the text `"key":"value"` (see [`Labels::needle`]).

use std::collections::BTreeMap;

use diesel::sql_types::Text;
use serde_json::Value;

use crate::task::fields::{Kind, LABELS};

/// Most labels a task has, longest key and longest value (characters), from the declaration.
const LIMITS: (usize, usize, usize) = match LABELS.kind {
    Kind::Labels {
        max,
        key_chars,
        value_chars,
    } => (max, key_chars, value_chars),
    _ => panic!("labels are declared as labels"),
};
pub const MAX_LABELS: usize = LIMITS.0;
pub const MAX_KEY_CHARS: usize = LIMITS.1;
pub const MAX_VALUE_CHARS: usize = LIMITS.2;

/// A task's labels, by key.
#[derive(
    Debug,
    Clone,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    diesel::expression::AsExpression,
    diesel::deserialize::FromSqlRow,
)]
#[diesel(sql_type = Text)]
#[serde(transparent)]
pub struct Labels(BTreeMap<String, String>);

/// Labels refused: the field at fault (`labels`, or `labels.KEY` for one label) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LabelError {
    pub field: String,
    pub message: String,
}

impl LabelError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        LabelError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl Labels {
    /// The labels of a task body: absent or `null` is none; otherwise an object of at most
    /// [`MAX_LABELS`] valid keys, each with a string value.
    pub fn from_body(value: Option<Value>) -> Result<Labels, LabelError> {
        let name = LABELS.name;
        let members = match value {
            None | Some(Value::Null) => return Ok(Labels::default()),
            Some(Value::Object(members)) => members,
            Some(_) => {
                return Err(LabelError::new(
                    name,
                    format!("{name} must be an object of string keys to string values"),
                ))
            }
        };
        if members.len() > MAX_LABELS {
            return Err(LabelError::new(
                name,
                format!("at most {MAX_LABELS} labels (got {})", members.len()),
            ));
        }
        let mut labels = BTreeMap::new();
        for (key, value) in members {
            let field = format!("{name}.{key}");
            check_key(&key).map_err(|message| LabelError::new(&field, message))?;
            let Value::String(value) = value else {
                return Err(LabelError::new(&field, format!("{field} must be a string")));
            };
            check_value(&value).map_err(|message| LabelError::new(&field, message))?;
            labels.insert(key, value);
        }
        Ok(Labels(labels))
    }

    /// Labels from `key=value` pairs, each checked; a key given twice is refused.
    pub fn from_pairs(pairs: Vec<(String, String)>) -> Result<Labels, LabelError> {
        let mut members = serde_json::Map::new();
        for (key, value) in pairs {
            if members.contains_key(&key) {
                let field = format!("{}.{key}", LABELS.name);
                return Err(LabelError::new(&field, format!("{field} is given twice")));
            }
            members.insert(key, Value::String(value));
        }
        Labels::from_body(Some(Value::Object(members)))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The labels in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// As stored: compact JSON, keys in order.
    fn to_text(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_else(|_| "{}".into())
    }

    /// The text the stored labels of a task with label `key` = `value` hold, and no other
    /// task's do: a key has no quote, and a quote inside a value is escaped, so the quotes
    /// around the key and after the value can only be the object's own.
    pub fn needle(key: &str, value: &str) -> String {
        format!("{}:{}", Value::from(key), Value::from(value))
    }
}

/// A label key: 1 to [`MAX_KEY_CHARS`] of `a-z 0-9 _ . -`.
fn check_key(key: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c);
    if key.is_empty() || key.chars().count() > MAX_KEY_CHARS || !key.chars().all(allowed) {
        return Err(format!(
            "a label key must be 1-{MAX_KEY_CHARS} of a-z 0-9 _ . - (got `{}`)",
            key.escape_debug()
        ));
    }
    Ok(())
}

/// A label value: at most [`MAX_VALUE_CHARS`] characters.
fn check_value(value: &str) -> Result<(), String> {
    if value.chars().count() > MAX_VALUE_CHARS {
        return Err(format!(
            "a label value has at most {MAX_VALUE_CHARS} characters"
        ));
    }
    Ok(())
}

/// A label to filter by, `KEY=VALUE` (`team=billing`), each part checked as a label's.
pub fn filter(text: &str) -> Result<(String, String), String> {
    let (key, value) = text.split_once('=').ok_or_else(|| {
        format!(
            "a label filter is KEY=VALUE, such as team=billing (got `{}`)",
            text.escape_debug()
        )
    })?;
    check_key(key)?;
    check_value(value)?;
    Ok((key.to_string(), value.to_string()))
}

crate::json_text!(Labels, "labels");

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(value: Value) -> LabelError {
        Labels::from_body(Some(value)).expect_err("refused")
    }

    #[test]
    fn labels_are_checked_and_each_error_names_its_field() {
        let labels =
            Labels::from_body(Some(json!({"team": "billing", "a.b-c_9": ""}))).expect("valid");
        assert_eq!(
            labels.iter().collect::<Vec<_>>(),
            [("a.b-c_9", ""), ("team", "billing")]
        );
        assert!(Labels::from_body(None).expect("none").is_empty());
        assert_eq!(refused(json!(["team"])).field, "labels");
        let many: serde_json::Map<String, Value> =
            (0..17).map(|n| (format!("k{n}"), json!("v"))).collect();
        assert_eq!(refused(Value::Object(many)).field, "labels");
        for key in ["Team", "", "a b", "é", &"k".repeat(64)] {
            let err = refused(json!({ key: "v" }));
            assert_eq!(err.field, format!("labels.{key}"), "{key:?}");
        }
        assert!(Labels::from_body(Some(json!({"k".repeat(63): "v"}))).is_ok());
        assert_eq!(refused(json!({"team": 1})).field, "labels.team");
        assert_eq!(
            refused(json!({"team": "x".repeat(257)})).field,
            "labels.team"
        );
        assert!(Labels::from_body(Some(json!({"team": "ü".repeat(256)}))).is_ok());
        let twice = vec![("a".to_string(), "1".to_string()), ("a".into(), "2".into())];
        assert_eq!(
            Labels::from_pairs(twice).expect_err("twice").field,
            "labels.a"
        );
    }

    #[test]
    fn a_filter_is_key_equals_value() {
        assert_eq!(
            filter("team=billing"),
            Ok(("team".to_string(), "billing".to_string()))
        );
        assert_eq!(filter("k=a=b"), Ok(("k".to_string(), "a=b".to_string())));
        for bad in ["team", "=billing", "Team=x", "a b=c"] {
            assert!(filter(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_needle_is_found_only_in_labels_that_have_the_label() {
        let stored = |labels: Value| Labels::from_body(Some(labels)).expect("valid").to_text();
        let needle = Labels::needle("team", "billing");
        assert!(stored(json!({"a": "1", "team": "billing"})).contains(&needle));
        for other in [
            json!({"team": "billing-eu"}),
            json!({"team": "Billing"}),
            json!({"xteam": "billing"}),
            json!({"a.team": "billing"}),
            json!({"a": "\"team\":\"billing\""}),
            json!({"a": "team", "b": "billing"}),
        ] {
            assert!(!stored(other.clone()).contains(&needle), "{other}");
        }
    }
}
