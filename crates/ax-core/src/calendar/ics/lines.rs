//! The content lines of iCalendar text (RFC 5545 section 3.1): unfolded, each split into its
//! name, parameters and value, with the number of the line it starts on.

use super::error::IcsError;

/// One unfolded content line: `NAME;PARAM=VALUE:VALUE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ContentLine {
    /// The line of the file it starts on, from 1.
    pub line: usize,
    /// Upper-cased: names are case-insensitive.
    pub name: String,
    /// Names upper-cased; a quoted value without its quotes, a list as written (`A,B`).
    pub params: Vec<(String, String)>,
    pub value: String,
}

impl ContentLine {
    /// The value of a parameter, if given.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(param, _)| param == name)
            .map(|(_, value)| value.as_str())
    }
}

/// The text's content lines, unfolded and parsed; empty lines are left out. The first must
/// be `BEGIN:VCALENDAR`, so that another kind of file is named as such rather than by its
/// first line that does not parse.
pub(super) fn content_lines(text: &str) -> Result<Vec<ContentLine>, IcsError> {
    let lines = unfold(text);
    if let Some((line, first)) = lines.first() {
        if !first.trim_end().eq_ignore_ascii_case("BEGIN:VCALENDAR") {
            return Err(IcsError::Line {
                line: *line,
                problem: "not an iCalendar file: it does not start with BEGIN:VCALENDAR".into(),
            });
        }
    }
    lines
        .into_iter()
        .map(|(line, text)| parse(line, &text))
        .collect()
}

/// Joins each line that starts with a space or a tab to the one before, without that first
/// character: a long line is folded so (with CRLF or LF endings).
fn unfold(text: &str) -> Vec<(usize, String)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines: Vec<(usize, String)> = Vec::new();
    for (at, raw) in text.split('\n').enumerate() {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if raw.is_empty() {
            continue;
        }
        match (raw.strip_prefix([' ', '\t']), lines.last_mut()) {
            (Some(rest), Some((_, last))) => last.push_str(rest),
            _ => lines.push((at + 1, raw.to_string())),
        }
    }
    lines
}

/// Splits a line into name, parameters and value.
fn parse(line: usize, text: &str) -> Result<ContentLine, IcsError> {
    let bad = |problem: &str| IcsError::Line {
        line,
        problem: format!("{problem}: `{}`", clip(text)),
    };
    let name_end = text
        .find([';', ':'])
        .ok_or_else(|| bad("not a content line NAME:VALUE"))?;
    let name = &text[..name_end];
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(bad("not a property name"));
    }
    let mut rest = &text[name_end..];
    let mut params = Vec::new();
    while let Some(param) = rest.strip_prefix(';') {
        let (param_name, after) = param
            .split_once('=')
            .ok_or_else(|| bad("a parameter without `=`"))?;
        let (value, after) =
            param_value(after).ok_or_else(|| bad("a quoted parameter value without its end"))?;
        params.push((param_name.to_ascii_uppercase(), value));
        rest = after;
    }
    let value = rest
        .strip_prefix(':')
        .ok_or_else(|| bad("no `:` before the value"))?;
    Ok(ContentLine {
        line,
        name: name.to_ascii_uppercase(),
        params,
        value: value.to_string(),
    })
}

/// A parameter's value (a list kept as written, quotes taken off) and the text after it; a
/// quoted value may hold `;`, `:` and `,`.
fn param_value(text: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut rest = text;
    loop {
        if let Some(quoted) = rest.strip_prefix('"') {
            let close = quoted.find('"')?;
            value.push_str(&quoted[..close]);
            rest = &quoted[close + 1..];
        } else {
            let end = rest.find([',', ';', ':']).unwrap_or(rest.len());
            value.push_str(&rest[..end]);
            rest = &rest[end..];
        }
        match rest.strip_prefix(',') {
            Some(more) => {
                value.push(',');
                rest = more;
            }
            None => return Some((value, rest)),
        }
    }
}

/// The start of a line, for a message.
pub(super) fn clip(text: &str) -> String {
    const MAX: usize = 60;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A TEXT value as written for people: `\,` `\;` `\\` `\n` unescaped.
pub(super) fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        // A summary is shown on one line: a newline in it becomes a space.
        match chars.next() {
            Some('n' | 'N') => out.push(' '),
            Some(escaped) => out.push(escaped),
            None => {}
        }
    }
    out.trim().to_string()
}
