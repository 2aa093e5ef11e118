//! How deep a YAML (or JSON) text nests, found by one linear scan before any parser sees it:
//! the YAML parser takes time quadratic in the depth (a 200 KB file nested 100,000 deep ran
//! 38 s before its recursion limit), so a file nested past a small depth is refused unread.
//!
//! The scan is no parser. It counts a block level for each column a line's content, or an
//! indicator on it (`- `, `? `, `: `), starts deeper than the levels open, and a flow level for
//! each `[` or `{`, outside quotes, comments and block scalars (`|`, `>`). Where it cannot tell
//! it counts: a scalar at a deeper column is a level, a quoted scalar ends with its line. It
//! counts a sequence written at its key's column with the key (`a:` over `- b`), so it never
//! reads a text as less than about half as deep as the parser does.

/// The line (from 1) where `text` first nests deeper than `max` levels; `None` if it never
/// does.
pub fn too_deep(text: &str, max: usize) -> Option<usize> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut scan = Scan::default();
    text.lines()
        .position(|line| scan.line(line) > max)
        .map(|index| index + 1)
}

#[derive(Default)]
struct Scan {
    /// The columns of the open block levels, innermost last.
    blocks: Vec<usize>,
    /// Open `[` and `{`.
    flow: usize,
    /// In a block scalar: the column its lines are indented past.
    literal: Option<usize>,
    /// Whether a node may start here: a quote, `|` or `>` begins a scalar only there.
    node_start: bool,
}

impl Scan {
    fn depth(&self) -> usize {
        self.blocks.len() + self.flow
    }

    /// A block node at `column`: the levels deeper than it are closed, and a level opens
    /// unless one is open at its column.
    fn open_block(&mut self, column: usize) {
        while self.blocks.last().is_some_and(|&open| open > column) {
            self.blocks.pop();
        }
        if self.blocks.last() != Some(&column) {
            self.blocks.push(column);
        }
    }

    /// Reads one line; returns the deepest nesting on it.
    fn line(&mut self, line: &str) -> usize {
        let indent = line.len() - line.trim_start_matches(' ').len();
        if let Some(parent) = self.literal {
            if indent > parent || line.trim().is_empty() {
                return self.depth();
            }
            self.literal = None;
        }
        let mut at = indent;
        if self.flow == 0 {
            let content = &line[indent..];
            if content.is_empty() || content.starts_with('#') || content.starts_with('%') {
                return self.depth();
            }
            if indent == 0 && is_document_marker(content) {
                self.blocks.clear();
                at = 3;
            } else {
                at = self.open_indicators(line, indent);
            }
            self.node_start = true;
        }
        self.rest(line, at)
    }

    /// Opens the block levels a line starts at `indent`: its own, and one per indicator
    /// (`- - x` is two sequences and a scalar). Returns where the content after them begins.
    fn open_indicators(&mut self, line: &str, indent: usize) -> usize {
        let mut at = indent;
        loop {
            self.open_block(at);
            let rest = &line.as_bytes()[at..];
            let indicator = rest.len() > 2
                && matches!(rest[0], b'-' | b'?' | b':')
                && matches!(rest[1], b' ' | b'\t');
            if !indicator {
                return at;
            }
            let after = &line[at + 1..];
            at += 1 + after.len() - after.trim_start_matches([' ', '\t']).len();
        }
    }

    /// Scans `line` from byte `from` for flow levels, quotes, comments and block scalars.
    fn rest(&mut self, line: &str, from: usize) -> usize {
        let mut deepest = self.depth();
        let mut quote: Option<char> = None;
        let mut chars = line[from..].chars().peekable();
        let mut after_space = true;
        while let Some(c) = chars.next() {
            if let Some(open) = quote {
                match c {
                    '\\' if open == '"' => {
                        chars.next();
                    }
                    '\'' if open == '\'' && chars.peek() == Some(&'\'') => {
                        chars.next();
                    }
                    c if c == open => quote = None,
                    _ => {}
                }
                continue;
            }
            let space = c == ' ' || c == '\t';
            match c {
                _ if space => {}
                '#' if after_space => break,
                '[' | '{' if self.flow > 0 || self.node_start => {
                    self.flow += 1;
                    deepest = deepest.max(self.depth());
                    self.node_start = true;
                }
                ']' | '}' if self.flow > 0 => {
                    self.flow -= 1;
                    self.node_start = false;
                }
                ',' if self.flow > 0 => self.node_start = true,
                ':' if self.flow > 0 || chars.peek().is_none_or(|n| *n == ' ' || *n == '\t') => {
                    self.node_start = true
                }
                '\'' | '"' if self.node_start => {
                    quote = Some(c);
                    self.node_start = false;
                }
                '|' | '>' if self.node_start && self.flow == 0 => {
                    self.literal = self.blocks.last().copied();
                    break;
                }
                // An anchor or a tag comes before its node.
                '&' | '!' if self.node_start => {
                    while chars.next_if(|n| *n != ' ' && *n != '\t').is_some() {}
                }
                _ => self.node_start = false,
            }
            after_space = space;
        }
        deepest
    }
}

/// `---` at the start of a line (alone or followed by a blank): a new document.
fn is_document_marker(content: &str) -> bool {
    content
        .strip_prefix("---")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(text: &str) -> usize {
        (1..)
            .find(|max| too_deep(text, *max).is_none())
            .unwrap_or_default()
    }

    #[test]
    fn a_file_of_tasks_is_shallow() {
        let tasks = "\
# tasks of the ops scene
tasks:
  - name: nightly report   # the main one
    scene: ops
    cron: \"0 0 2 * * *\"
    handlerUrl: http://executor.internal/run
    params:
      region: [eu, us]
      limits: {rows: 10, 'keys': [a, b]}
      note: \"a [bracket and a {brace\"
      plain: a [bracket in a plain scalar
      script: |
        for x in [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[:
                    deeply:
                        indented:
                            text
      quoted: 'it''s [[[['
  - name: second
    cron: \"* * * * * *\"
";
        assert_eq!(
            depth(tasks),
            6,
            "the file, tasks, a task, params, limits, keys"
        );
        assert_eq!(too_deep(tasks, 64), None);
        let json = r#"[{"name": "a", "params": {"x": [1, {"y": "]]]["}]}}]"#;
        // Five, and the top node's column.
        assert_eq!(depth(json), 6);
        let pretty =
            "[\n  {\n    \"name\": \"a\",\n    \"params\": {\"x\": [\n      1\n    ]}\n  }\n]\n";
        assert_eq!(depth(pretty), 5);
    }

    #[test]
    fn every_way_of_nesting_counts() {
        let flow = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let braces = format!("{}1{}", "{a: ".repeat(100), "}".repeat(100));
        let dashes = format!("{}x", "- ".repeat(100));
        let block: String = (0..100)
            .map(|n| format!("{}k{n}:\n", "  ".repeat(n)))
            .collect();
        let mixed = format!("a: &x !!seq {}\n", "[".repeat(100));
        let document = format!("--- {}", "[".repeat(100));
        let after_quote = format!("k: 'x' \n- {}", "[".repeat(100));
        for text in [flow, braces, dashes, block, mixed, document, after_quote] {
            assert!(
                too_deep(&text, 64).is_some(),
                "{}",
                &text[..text.len().min(60)]
            );
        }
    }

    #[test]
    fn the_line_past_the_limit_is_named() {
        let text = format!("a: 1\nb:\n  c: {}\n", "[".repeat(70));
        assert_eq!(too_deep(&text, 64), Some(3));
        let block: String = (0..70).map(|n| format!("{}k:\n", " ".repeat(n))).collect();
        assert_eq!(too_deep(&block, 64), Some(65));
    }

    #[test]
    fn quotes_comments_and_block_scalars_hide_nothing_past_their_end() {
        let deep = "[".repeat(70);
        for text in [
            // A quote ends with its line; a block scalar with its indentation.
            format!("a: 'open\n{deep}"),
            format!("a: |\n  text\nb: {deep}"),
            // A quote only opens a scalar where a node starts.
            format!("a: it's\nb: {deep}"),
            format!("[a\n'b, {deep}"),
            format!("a: x # c 'q\nb: {deep}"),
        ] {
            assert!(too_deep(&text, 64).is_some(), "{text:.40}");
        }
        for text in [
            format!("a: '{deep}'"),
            format!("a: \"\\\"{deep}\""),
            format!("a: |\n  {deep}\n"),
            format!("# {deep}"),
            format!("a: b {deep}"),
        ] {
            assert_eq!(too_deep(&text, 64), None, "{text:.40}");
        }
    }

    #[test]
    fn a_huge_nesting_is_refused_at_once() {
        let text = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(too_deep(&text, 64), Some(1));
        let text = format!("{}x\n", "- ".repeat(100_000));
        assert_eq!(too_deep(&text, 64), Some(1));
    }
}
