//! What the console's search finds, by what is typed: a request id opens its run, the start of
//! one (six hex digits or more) lists the runs it names, and any text lists the tasks whose
//! `scene/name` contains it, whatever the case of its letters. Pure: the store reads what
//! this decides.

use crate::run::{RequestId, RequestIdPrefix};

/// The longest text searched for: a scene, a slash and a name at their longest.
pub const MAX_QUERY_CHARS: usize = 64 + 1 + 128;

/// What a search asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Search {
    /// Nothing typed.
    Nothing,
    /// A whole request id: its run.
    Run(RequestId),
    /// The start of request ids: their runs; the text may name tasks too (`facade` is hex).
    RunPrefix(RequestIdPrefix),
    /// Other text: the tasks whose `scene/name` contains it.
    Text,
}

impl Search {
    /// What `typed` (trimmed) asks for.
    pub fn of(typed: &str) -> Search {
        let typed = typed.trim();
        if typed.is_empty() {
            return Search::Nothing;
        }
        if let Some(id) = RequestId::parse(typed) {
            return Search::Run(id);
        }
        match RequestIdPrefix::parse(typed) {
            Some(prefix) => Search::RunPrefix(prefix),
            None => Search::Text,
        }
    }
}

/// The tasks whose `scene/name` contains a text, as SQL `LIKE` patterns (`\` escapes) over
/// their scene and name in lower case. A scene has no slash, so the first slash of
/// `scene/name` is the one between them: text without a slash lies in the scene or in the
/// name; text with one lies in the name, or spans the two from its first slash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskMatch {
    /// The scene or the name contains the text.
    pub within: String,
    /// The scene ends with the text before its first slash and the name starts with the text
    /// after it.
    pub across: Option<(String, String)>,
}

impl TaskMatch {
    /// The patterns of `text` (trimmed; letters compared in lower case).
    pub fn of(text: &str) -> TaskMatch {
        let text = text.trim().to_ascii_lowercase();
        let across = text.split_once('/').map(|(scene, name)| {
            (
                format!("%{}", like_escaped(scene)),
                format!("{}%", like_escaped(name)),
            )
        });
        TaskMatch {
            within: like_contains(&text),
            across,
        }
    }
}

/// A `LIKE` pattern (`\` escapes) of the texts that contain `text` as it is.
pub fn like_contains(text: &str) -> String {
    format!("%{}%", like_escaped(text))
}

/// `text` in a `LIKE` pattern, its wildcards and escape character escaped with `\`.
fn like_escaped(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_id_opens_its_run_its_start_lists_runs_other_text_tasks() {
        let id = RequestId::manual();
        assert_eq!(Search::of(&format!("  {id} ")), Search::Run(id.clone()));
        let upper = id.as_str().to_uppercase();
        assert_eq!(Search::of(&upper), Search::Run(id.clone()), "any case");
        let start = &id.as_str()[..8];
        assert!(matches!(
            Search::of(start),
            Search::RunPrefix(prefix) if prefix.as_str() == start
        ));
        assert_eq!(Search::of("abcde"), Search::Text, "five hex digits");
        assert_eq!(Search::of("billing/charge"), Search::Text);
        assert_eq!(Search::of(" \t"), Search::Nothing);
    }

    #[test]
    fn tasks_match_within_scene_or_name_or_across_the_slash() {
        assert_eq!(
            TaskMatch::of("Charge_50%"),
            TaskMatch {
                within: r"%charge\_50\%%".into(),
                across: None,
            }
        );
        assert_eq!(
            TaskMatch::of("ling/charge-c"),
            TaskMatch {
                within: "%ling/charge-c%".into(),
                across: Some(("%ling".into(), "charge-c%".into())),
            }
        );
        // A name may hold a slash: only the first one can be the scene's.
        assert_eq!(
            TaskMatch::of("billing/a/b").across,
            Some(("%billing".into(), "a/b%".into()))
        );
        assert_eq!(like_contains(r"a\b"), r"%a\\b%");
    }
}
