//! The sections of a file that define, beside its tasks, what they name: executor groups
//! (`executors`, see `groups`) and calendars (`calendars`, see `calendars`). Each is a list of
//! `{name, …}`, every item read as the API reads its body (errors name the section, the index
//! and the key: `calendars[0].dates[1]`), a name twice refused; compared with the stored ones
//! by name, to be created or replaced with the keys that differ (an unchanged one is left
//! out); written before the tasks, never deleted. Pure: the caller reads the store.

use std::collections::BTreeMap;
use std::fmt::Display;

use serde_json::Value;

use super::error::ApplyError;
use super::section::Section;
use ax_server::error::ApiError;

/// An item of a section: its name, its definition as the API reads it, and the body to `PUT`
/// (without the name, which goes in the path).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry<N, T> {
    pub name: N,
    pub input: T,
    pub body: Value,
}

/// What applying a file does to one of its groups or calendars.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Create,
    /// With the keys that differ.
    Replace(Vec<&'static str>),
}

/// The items of `section` (`value`: its list, if the file has it), each name read by
/// `read_name` and the rest of its body by `read_body`, both as the API reads them: an
/// error names the item's index and the key its refusal names (`?` when none).
pub(super) fn entries<N: PartialEq, T>(
    section: &'static Section,
    value: Option<Value>,
    read_name: impl Fn(String) -> Result<N, ApiError>,
    read_body: impl Fn(&Value) -> Result<T, ApiError>,
) -> Result<Vec<Entry<N, T>>, ApplyError> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(ApplyError::NotAList { section }),
    };
    let refused = |index: usize| {
        move |source: ApiError| ApplyError::Refused {
            section,
            index,
            key: source.field().unwrap_or("?").to_string(),
            source,
        }
    };
    let mut entries: Vec<Entry<N, T>> = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let Value::Object(mut body) = item else {
            return Err(ApplyError::NotAMapping { section, index });
        };
        let name = match body.remove("name") {
            Some(Value::String(name)) => read_name(name).map_err(refused(index))?,
            _ => return Err(ApplyError::Unnamed { section, index }),
        };
        if let Some(first) = entries.iter().position(|entry| entry.name == name) {
            return Err(ApplyError::Twice {
                section,
                index,
                first,
            });
        }
        let body = Value::Object(body);
        let input = read_body(&body).map_err(refused(index))?;
        entries.push(Entry { name, input, body });
    }
    Ok(entries)
}

/// The items to create or replace (`stored`: the store's by name; `keys_changed`: the keys in
/// which a definition differs from the stored one); unchanged ones are left out.
pub(super) fn changes<N: Clone + AsRef<str>, T>(
    wanted: &[Entry<N, T>],
    stored: &BTreeMap<String, T>,
    keys_changed: impl Fn(&T, &T) -> Vec<&'static str>,
) -> Vec<(N, Change)> {
    wanted
        .iter()
        .filter_map(|want| {
            let change = match stored.get(want.name.as_ref()) {
                None => Change::Create,
                Some(have) => match keys_changed(&want.input, have) {
                    keys if keys.is_empty() => return None,
                    keys => Change::Replace(keys),
                },
            };
            Some((want.name.clone(), change))
        })
        .collect()
}

/// The plan's lines of a section's changes: `+ executor billing`, `~ calendar holidays
/// (dates)`.
pub(super) fn lines<'a, N: Display + 'a>(
    section: &'a Section,
    changes: &'a [(N, Change)],
) -> impl Iterator<Item = String> + 'a {
    changes.iter().map(|(name, change)| match change {
        Change::Create => format!("+ {} {name}", section.line),
        Change::Replace(keys) => format!("~ {} {name} ({})", section.line, keys.join(", ")),
    })
}

/// The count's part of a section (`; calendars: 1 created, 0 replaced`, each number worded
/// by `n`), empty when nothing changes in it.
pub(super) fn count<N>(
    section: &Section,
    changes: &[(N, Change)],
    n: impl Fn(usize, &str) -> String,
) -> String {
    if changes.is_empty() {
        return String::new();
    }
    let created = changes
        .iter()
        .filter(|(_, change)| *change == Change::Create)
        .count();
    let replaced = changes.len() - created;
    let (created, replaced) = (n(created, "created"), n(replaced, "replaced"));
    format!("; {}: {created}, {replaced}", section.key)
}
