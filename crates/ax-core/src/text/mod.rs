//! Text from outside ax (clients, executors): the invisible characters a name may not hold,
//! what a run's result code and message and its log lines become, how such text is quoted in
//! a log line or shown on a terminal, and put on one line; and YAML, read under a budget.

mod enums;
pub mod yaml;

use std::fmt;

use serde_json::Value;

/// Unicode's format characters (general category Cf, Unicode 16), as inclusive ranges: they
/// draw nothing or reorder what follows (bidi overrides, zero-width joiners, the BOM), so a
/// name holding one can look empty or read as another.
const FORMAT: &[(char, char)] = &[
    ('\u{ad}', '\u{ad}'),
    ('\u{600}', '\u{605}'),
    ('\u{61c}', '\u{61c}'),
    ('\u{6dd}', '\u{6dd}'),
    ('\u{70f}', '\u{70f}'),
    ('\u{890}', '\u{891}'),
    ('\u{8e2}', '\u{8e2}'),
    ('\u{180e}', '\u{180e}'),
    ('\u{200b}', '\u{200f}'),
    ('\u{202a}', '\u{202e}'),
    ('\u{2060}', '\u{2064}'),
    ('\u{2066}', '\u{206f}'),
    ('\u{feff}', '\u{feff}'),
    ('\u{fff9}', '\u{fffb}'),
    ('\u{110bd}', '\u{110bd}'),
    ('\u{110cd}', '\u{110cd}'),
    ('\u{13430}', '\u{1343f}'),
    ('\u{1bca0}', '\u{1bca3}'),
    ('\u{1d173}', '\u{1d17a}'),
    ('\u{e0001}', '\u{e0001}'),
    ('\u{e0020}', '\u{e007f}'),
];

/// Whether `c` is a Unicode format character (category Cf).
pub fn is_format(c: char) -> bool {
    FORMAT
        .binary_search_by(|&(first, last)| {
            if last < c {
                std::cmp::Ordering::Less
            } else if first > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Why an executor's result code or message is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    #[error("must be a string or an integer")]
    CodeType,
    #[error("must be a string")]
    MessageType,
    #[error("must not contain control characters ({0:?})")]
    Control(char),
}

/// A run's result code as an executor sent it, in a reply or a callback: a string without
/// control characters, or an integer (XXL-Job's executors send `"code": 200`) as its decimal
/// text; `null` is none. Fractions, booleans, arrays and objects are unfit.
pub fn result_code(value: &Value) -> Result<Option<String>, Unfit> {
    match value {
        Value::Null => Ok(None),
        Value::String(code) => match code.chars().find(|c| c.is_control()) {
            Some(c) => Err(Unfit::Control(c)),
            None => Ok(Some(code.clone())),
        },
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(Some(n.to_string())),
        _ => Err(Unfit::CodeType),
    }
}

/// A run's result message as an executor sent it: a string, cleaned by [`clean_message`];
/// `null` is none.
pub fn result_message(value: &Value) -> Result<Option<String>, Unfit> {
    match value {
        Value::Null => Ok(None),
        Value::String(message) => Ok(Some(clean_message(message))),
        _ => Err(Unfit::MessageType),
    }
}

/// A message with its control characters dropped, but for newlines and tabs: a stack trace
/// keeps its lines, while a NUL or an escape sequence never reaches a page or a terminal.
pub fn clean_message(text: &str) -> String {
    text.chars()
        .filter(|&c| !c.is_control() || c == '\n' || c == '\t')
        .collect()
}

/// A log line as an executor sent it, to keep: its control characters dropped but for tabs (a
/// line has no newline, and a NUL, a `\r` or an escape sequence is no text), as
/// [`clean_message`] does for a message.
pub fn clean_line(line: &str) -> String {
    line.chars()
        .filter(|&c| !c.is_control() || c == '\t')
        .collect()
}

/// `text` on one line of at most `max_chars` characters (and a `…` when cut): every run of
/// blanks, newlines, control and format characters becomes one space, none at either end.
pub fn one_line(text: &str, max_chars: usize) -> String {
    let words = text
        .split(|c: char| c.is_whitespace() || c.is_control() || is_format(c))
        .filter(|word| !word.is_empty());
    let mut line = String::new();
    for word in words {
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
        if line.chars().count() > max_chars {
            break;
        }
    }
    match line.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line,
    }
}

/// Text from a client or an executor as a log line quotes it: control and format characters
/// escaped (`\n`, `\u{1b}`, `\u{202e}`), so it cannot end the line, forge another, or move
/// the terminal's cursor. The rest is written as it is.
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        escape_where(f, self.0, |c| c.is_control() || is_format(c))
    }
}

/// An executor's line as a terminal shows it (`ax runs logs`): as [`Escaped`], but a tab stays
/// a tab, the one control character a kept line may hold.
pub struct OnTerminal<'a>(pub &'a str);

impl fmt::Display for OnTerminal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        escape_where(f, self.0, |c| (c.is_control() && c != '\t') || is_format(c))
    }
}

/// Writes `text` with each character `escaped` picks as Rust writes it in a string (`\u{1b}`).
fn escape_where(f: &mut fmt::Formatter<'_>, text: &str, escaped: fn(char) -> bool) -> fmt::Result {
    let mut rest = text;
    while let Some(at) = rest.find(escaped) {
        f.write_str(&rest[..at])?;
        let c = rest[at..].chars().next().unwrap_or_default();
        write!(f, "{}", c.escape_debug())?;
        rest = &rest[at + c.len_utf8()..];
    }
    f.write_str(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn format_characters_are_those_of_category_cf() {
        // The table's ranges are sorted and apart, as the binary search needs.
        for pair in FORMAT.windows(2) {
            assert!(pair[0].1 < pair[1].0, "{pair:?}");
        }
        for c in [
            '\u{ad}',
            '\u{61c}',
            '\u{180e}',
            '\u{200b}',
            '\u{200d}',
            '\u{200f}',
            '\u{202a}',
            '\u{202e}',
            '\u{2060}',
            '\u{2064}',
            '\u{2066}',
            '\u{2069}',
            '\u{feff}',
            '\u{e0001}',
            '\u{e007f}',
            '\u{1343f}',
        ] {
            assert!(is_format(c), "{:?}", c);
        }
        // Neighbours of the ranges, spaces, controls (another category) and letters are not.
        for c in [
            'a',
            ' ',
            '\u{a0}',
            '\n',
            '\u{0}',
            '\u{ac}',
            '\u{ae}',
            '\u{200a}',
            '\u{2010}',
            '\u{2029}',
            '\u{202f}',
            '\u{2065}',
            '\u{fefe}',
            '\u{ff00}',
            'é',
            '日',
            '\u{e0002}',
            '\u{e0080}',
        ] {
            assert!(!is_format(c), "{:?}", c);
        }
    }

    #[test]
    fn codes_are_strings_or_integers() {
        assert_eq!(result_code(&json!("E42")), Ok(Some("E42".into())));
        assert_eq!(result_code(&json!(0)), Ok(Some("0".into())));
        assert_eq!(result_code(&json!(-500)), Ok(Some("-500".into())));
        assert_eq!(
            result_code(&json!(u64::MAX)),
            Ok(Some(u64::MAX.to_string()))
        );
        assert_eq!(result_code(&Value::Null), Ok(None));
        for unfit in [json!(1.5), json!(true), json!([1]), json!({"a": 1})] {
            assert_eq!(result_code(&unfit), Err(Unfit::CodeType), "{unfit}");
        }
        for (code, c) in [("a\u{0}b", '\u{0}'), ("\u{1b}[2J", '\u{1b}'), ("E\n", '\n')] {
            assert_eq!(
                result_code(&json!(code)),
                Err(Unfit::Control(c)),
                "{code:?}"
            );
        }
    }

    #[test]
    fn messages_keep_their_lines_and_lose_other_controls() {
        assert_eq!(
            result_message(&json!("line 1\r\n\tline 2\u{0}\u{1b}[31m red\u{7f}")),
            Ok(Some("line 1\n\tline 2[31m red".into()))
        );
        assert_eq!(result_message(&Value::Null), Ok(None));
        assert_eq!(result_message(&json!(7)), Err(Unfit::MessageType));
        assert_eq!(clean_message("ünïcode ✓"), "ünïcode ✓");
    }

    #[test]
    fn a_kept_log_line_loses_its_controls_but_tabs() {
        assert_eq!(
            clean_line("\u{1b}[31mRED\u{0}\r\tdone\u{7f}\u{9b}2J"),
            "[31mRED\tdone2J"
        );
        assert_eq!(clean_line("ünïcode ✓ \u{202e}"), "ünïcode ✓ \u{202e}");
    }

    #[test]
    fn one_line_flattens_and_cuts() {
        assert_eq!(one_line("  a\n\tb\r\n c\u{1b}d  ", 200), "a b c d");
        assert_eq!(one_line("abc def", 5), "abc d…");
        assert_eq!(one_line("é".repeat(300).as_str(), 200).chars().count(), 201);
        assert_eq!(one_line("\n\n", 200), "");
        // A text of many short words is not copied whole before it is cut.
        assert_eq!(one_line(&"x ".repeat(100_000), 3), "x x…");
    }

    #[test]
    fn a_terminal_sees_escapes_as_text_and_tabs_as_tabs() {
        let shown = OnTerminal("\u{1b}[31mRED\tx\u{202e}\r").to_string();
        assert_eq!(shown, "\\u{1b}[31mRED\tx\\u{202e}\\r");
        assert!(!shown
            .chars()
            .any(|c| c != '\t' && (c.is_control() || is_format(c))));
    }

    #[test]
    fn log_quotes_escape_what_could_forge_a_line() {
        let forged = "ok\n[2027-01-01T00:00:00.000Z ERROR ax] forged\u{1b}[2J\u{202e}gnp\u{0}";
        let quoted = Escaped(forged).to_string();
        assert_eq!(
            quoted,
            "ok\\n[2027-01-01T00:00:00.000Z ERROR ax] forged\\u{1b}[2J\\u{202e}gnp\\0"
        );
        assert!(!quoted.chars().any(|c| c.is_control() || is_format(c)));
        assert_eq!(Escaped("plain 'text' ü").to_string(), "plain 'text' ü");
        assert_eq!(Escaped("tab\there").to_string(), "tab\\there");
    }
}
