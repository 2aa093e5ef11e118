//! How `ax apply` compares a task of a file with the stored one, and shows a change: each
//! field that differs, with its old and new value, short (`maxRetry 1 → 2`). Pure.

use serde_json::Value;

use super::upstreams::Upstream;
use ax_core::task::fields::{self, Default, Field, Kind};
use ax_server::service::task_input::TaskInput;

/// Longest value a change shows, in characters; a longer one is cut, with `…`.
const SHOWN_CHARS: usize = 40;

/// One field of a task that a change sets from `old` to `new` (`None`: not given).
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub field: &'static Field,
    pub old: Option<Value>,
    pub new: Option<Value>,
}

impl Difference {
    /// `field old → new`, each value short.
    pub fn line(&self) -> String {
        let (old, new) = (self.old.as_ref(), self.new.as_ref());
        format!(
            "{} {} → {}",
            self.field.name,
            shown(self.field, old),
            shown(self.field, new)
        )
    }
}

/// A task's definition as compared: its fields by name, as the API reads them; with
/// `upstreams`, its `dependsOn` by their labels, sorted (their order means nothing).
pub fn definition(input: &TaskInput, upstreams: Option<&[Upstream]>) -> Value {
    let mut definition = serde_json::to_value(input).unwrap_or(Value::Null);
    if let Some(upstreams) = upstreams {
        let mut labels: Vec<String> = upstreams.iter().map(Upstream::label).collect();
        labels.sort();
        definition[fields::DEPENDS_ON.name] = Value::from(labels);
    }
    definition
}

/// The fields in which two definitions differ, in their declared order; not `name` and
/// `scene`, by which the two were matched.
pub fn differences(want: &Value, have: &Value) -> Vec<Difference> {
    let key = [fields::NAME.name, fields::SCENE.name];
    fields::ALL
        .into_iter()
        .filter(|field| !key.contains(&field.name))
        .filter(|field| want.get(field.name) != have.get(field.name))
        .map(|field| Difference {
            field,
            old: have.get(field.name).cloned(),
            new: want.get(field.name).cloned(),
        })
        .collect()
}

/// A value as a change shows it: compact JSON, cut to `SHOWN_CHARS`; params (kept as text)
/// as the object they are; `null` or no value as `(default)` where the field has one, else
/// `(none)`.
pub fn shown(field: &Field, value: Option<&Value>) -> String {
    let value = match value {
        None | Some(Value::Null) => {
            return match field.default {
                Default::Required | Default::Either(_) => "(none)".into(),
                _ => "(default)".into(),
            }
        }
        Some(value) => value,
    };
    let text = match (field.kind, value) {
        (Kind::Object { .. }, Value::String(text)) => serde_json::from_str::<Value>(text)
            .map(|object| object.to_string())
            .unwrap_or_else(|_| text.clone()),
        _ => value.to_string(),
    };
    cut(&text, SHOWN_CHARS)
}

/// `text`, or its first `max - 1` characters and `…`.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some(_) => {
            let kept: String = text.chars().take(max.saturating_sub(1)).collect();
            format!("{kept}…")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ax_server::api::validate::task_examples::{input, required};
    use serde_json::json;

    fn body_with(field: &str, value: Value) -> Value {
        let mut body = required();
        body[field] = value;
        body
    }

    #[test]
    fn a_change_shows_old_and_new_values() {
        let have = definition(&input(body_with("maxRetry", json!(1))), None);
        let want = definition(&input(body_with("maxRetry", json!(2))), None);
        let lines: Vec<String> = differences(&want, &have)
            .iter()
            .map(Difference::line)
            .collect();
        assert_eq!(lines, ["maxRetry 1 → 2"]);
        assert!(differences(&have, &have).is_empty());
    }

    #[test]
    fn values_are_short_and_defaults_are_named() {
        let params = json!({"long": "x".repeat(100)});
        let want = definition(&input(body_with("params", params)), None);
        let have = definition(&input(required()), None);
        let [change] = differences(&want, &have).try_into().expect("params alone");
        let line = change.line();
        assert!(line.starts_with(r#"params {} → {"long":"xxx"#), "{line}");
        assert!(line.ends_with('…'), "{line}");
        assert_eq!(
            line.chars().count(),
            "params {} → ".chars().count() + SHOWN_CHARS
        );
        let factor = fields::RETRY_FACTOR;
        assert_eq!(shown(&factor, Some(&Value::Null)), "(default)");
        assert_eq!(shown(&fields::HANDLER_URL, None), "(none)");
        assert_eq!(
            shown(&fields::CRON, Some(&json!("0 0 1 * * *"))),
            r#""0 0 1 * * *""#
        );
        assert_eq!(cut("ééé", 3), "ééé");
        assert_eq!(cut("éééé", 3), "éé…");
    }

    #[test]
    fn upstreams_compare_by_name_in_any_order() {
        let plain = input(required());
        let key = |name: &str| Upstream::Task(("s".into(), name.into()));
        let want = definition(&plain, Some(&[key("b"), key("a")]));
        let have = definition(&plain, Some(&[key("a"), key("b")]));
        assert!(differences(&want, &have).is_empty());
        let have = definition(&plain, Some(&[key("a"), Upstream::Id(9)]));
        let lines: Vec<String> = differences(&want, &have)
            .iter()
            .map(Difference::line)
            .collect();
        assert_eq!(lines, [r##"dependsOn ["#9","s/a"] → ["s/a","s/b"]"##]);
    }
}
