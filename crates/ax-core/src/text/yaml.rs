//! YAML from outside ax (the config file, a file of tasks, a task opened in an editor), read
//! under a budget, and the YAML ax writes (`-o yaml`, `ax export`, `ax tasks edit`): both by
//! serde-saphyr, so what ax writes it reads back as it was.
//!
//! The budget refuses a text nested deeper than [`MAX_DEPTH`] as soon as the parser gets
//! there, naming the line: no file a person writes nests that deep (a task with its params is
//! about 6 levels), and parsing time and stack grow with depth. Its other limits grow with the
//! text: a text without aliases is never refused for its size, and aliases (`*name`) make it
//! at most a bounded amount of work more.
//!
//! The reading is YAML 1.2's, as serde_yaml's was: `yes`, `no` and `on` are strings, `0755`
//! and `1_000` too, and `<<` is a key like any other. A key given twice is refused (serde_yaml
//! kept the last in a file of tasks; the API refuses a JSON key given twice).

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::granit_parser::ErrorKind;
use serde_saphyr::options::AliasLimits;
use serde_saphyr::{Budget, ExternalMessageSource, MergeKeyPolicy};

/// The deepest a text ax reads may nest: mappings and lists, block or flow, counted together.
pub const MAX_DEPTH: usize = 64;

/// Why a text was not read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Nested deeper than [`MAX_DEPTH`], first at `line` (from 1).
    #[error("nested deeper than {MAX_DEPTH} levels at line {line}")]
    TooDeep { line: u64 },
    /// Not YAML, or not of the shape asked for: the parser's words for a person (not those
    /// for the program using it), then the line and column.
    #[error("{}", .0.render_with_formatter(&serde_saphyr::UserMessageFormatter))]
    Invalid(Box<serde_saphyr::Error>),
}

/// Reads `text`, one YAML document (JSON is YAML), as a `T`; an empty text is YAML's null.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    serde_saphyr::from_str_with_options(text, options(text.len())).map_err(|err| {
        match too_deep(&err) {
            true => Error::TooDeep {
                line: err.location().map_or(1, |at| at.line()),
            },
            false => Error::Invalid(Box::new(err)),
        }
    })
}

/// `value` as YAML in block style: a multi-line string as a `|` block, every other string
/// on one line, quoted where it would read as something else (`"yes"`, `"0755"`, `"a: b"`).
pub fn to_string<T: Serialize>(value: &T) -> Result<String, serde_saphyr::SerializeError> {
    let options = serde_saphyr::ser_options! {
        // No long line folded into a `>` block.
        folded_wrap_chars: usize::MAX,
    };
    serde_saphyr::to_string_with_options(value, options)
}

/// The options a text of `size` bytes is read with.
fn options(size: usize) -> serde_saphyr::Options {
    let defaults = Budget::default();
    // Each event, node, alias, anchor and scalar byte of a text without aliases takes at least
    // one of its bytes (an event without one, such as a block's end, follows one that has).
    let at_least = |default: usize| default.max(size.saturating_mul(2));
    let budget = serde_saphyr::budget! {
        max_depth: MAX_DEPTH,
        // A flow collection (`[`, `{`) past the depth is refused by the parser itself, before
        // it looks further ahead.
        flow_nesting_limit: MAX_DEPTH,
        max_events: at_least(defaults.max_events),
        max_nodes: at_least(defaults.max_nodes),
        max_aliases: at_least(defaults.max_aliases),
        max_anchors: at_least(defaults.max_anchors),
        max_total_scalar_bytes: at_least(defaults.max_total_scalar_bytes),
        max_recorded_anchor_events: at_least(defaults.max_recorded_anchor_events),
        max_recorded_anchor_bytes: at_least(defaults.max_recorded_anchor_bytes),
        // One anchor used by every task is fine: the node limit bounds what aliases cost.
        enforce_alias_anchor_ratio: false,
    };
    let mut alias_limits = AliasLimits::default();
    alias_limits.max_total_replayed_events = at_least(alias_limits.max_total_replayed_events);
    serde_saphyr::options! {
        budget: budget,
        alias_limits: alias_limits,
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
        merge_keys: MergeKeyPolicy::AsOrdinary,
        // One line: `… at line 3, column 7`.
        with_snippet: false,
    }
}

/// Whether `err` is the depth budget's: breached as the parser reads, a flow collection past
/// its limit, or either through an alias.
fn too_deep(err: &serde_saphyr::Error) -> bool {
    match err.without_snippet() {
        serde_saphyr::Error::Budget {
            breach: BudgetBreach::Depth { .. },
            ..
        } => true,
        serde_saphyr::Error::ExternalMessage { source, .. } => matches!(
            source.as_ref(),
            ExternalMessageSource::Parser(scan)
                if matches!(scan.kind(), ErrorKind::RecursionLimitExceeded)
        ),
        serde_saphyr::Error::AliasError { error, .. } => too_deep(error),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};
    use std::time::{Duration, Instant};

    fn read(text: &str) -> Result<Value, Error> {
        from_str(text)
    }

    fn line_too_deep(text: &str) -> Option<u64> {
        match read(text) {
            Err(Error::TooDeep { line }) => Some(line),
            _ => None,
        }
    }

    /// `levels` mappings and lists nested every way YAML writes them.
    fn nested(levels: usize) -> Vec<String> {
        let half = levels / 2;
        vec![
            format!("{}{}", "[".repeat(levels), "]".repeat(levels)),
            format!("{}1{}", "{a: ".repeat(levels), "}".repeat(levels)),
            format!("{}x\n", "- ".repeat(levels)),
            (0..levels)
                .map(|n| format!("{}k{n}:\n", "  ".repeat(n)))
                .collect(),
            format!(
                "a: &x !!seq {}{}\n",
                "[".repeat(levels - 1),
                "]".repeat(levels - 1)
            ),
            format!("--- {}{}", "[".repeat(levels), "]".repeat(levels)),
            format!(
                "{}{}{}",
                "- ".repeat(half),
                "[".repeat(levels - half),
                "]".repeat(levels - half)
            ),
        ]
    }

    #[test]
    fn a_file_of_tasks_reads_as_written() {
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
            deeply
      quoted: 'it''s [[[['
      words: [yes, no, on, off, y, null, ~, 0755, 1_000, 0x1F, 1e3, 1.5, -2, true]
      <<: merged
  - name: second
    cron: \"* * * * * *\"
";
        let file = read(tasks).expect("a file of tasks");
        let params = &file["tasks"][0]["params"];
        assert_eq!(params["limits"], json!({"rows": 10, "keys": ["a", "b"]}));
        assert_eq!(params["note"], "a [bracket and a {brace");
        assert_eq!(params["plain"], "a [bracket in a plain scalar");
        assert!(params["script"]
            .as_str()
            .expect("text")
            .ends_with(":\n    deeply\n"));
        assert_eq!(params["quoted"], "it's [[[[");
        assert_eq!(
            params["words"],
            json!([
                "yes", "no", "on", "off", "y", null, null, "0755", "1_000", 31, 1000.0, 1.5, -2,
                true
            ])
        );
        assert_eq!(params["<<"], "merged");
        assert_eq!(file["tasks"][1]["cron"], "* * * * * *");
        let json = r#"[{"name": "a", "params": {"x": [1, {"y": "]]]["}]}}]"#;
        assert_eq!(read(json).expect("JSON")[0]["params"]["x"][1]["y"], "]]][");
        assert_eq!(read("").expect("empty"), Value::Null);
        assert_eq!(read("# only a comment\n").expect("a comment"), Value::Null);
        assert_eq!(read("\u{feff}a: 1\n").expect("a BOM"), json!({"a": 1}));
    }

    #[test]
    fn every_way_of_nesting_counts_to_the_limit_and_no_further() {
        for text in nested(MAX_DEPTH) {
            read(&text).unwrap_or_else(|err| panic!("{err}: {:.60}", text));
        }
        for text in nested(MAX_DEPTH + 1) {
            assert!(line_too_deep(&text).is_some(), "{:.60}", text);
        }
    }

    #[test]
    fn the_line_past_the_limit_is_named() {
        let text = format!("a: 1\nb:\n  c: {}\n", "[".repeat(70));
        assert_eq!(line_too_deep(&text), Some(3));
        let block: String = (0..70).map(|n| format!("{}k:\n", " ".repeat(n))).collect();
        assert_eq!(line_too_deep(&block), Some(65));
        let err = read(&text).expect_err("too deep").to_string();
        assert_eq!(err, "nested deeper than 64 levels at line 3");
    }

    #[test]
    fn quotes_comments_and_block_scalars_hide_no_nesting_and_make_none() {
        let deep = "[".repeat(70);
        for text in [
            format!("a: |\n  text\nb: {deep}"),
            format!("a: it's\nb: {deep}"),
            format!("a: x # c 'q\nb: {deep}"),
        ] {
            assert!(line_too_deep(&text).is_some(), "{text:.40}");
        }
        for text in [
            format!("a: '{deep}'"),
            format!("a: \"\\\"{deep}\""),
            format!("a: |\n  {deep}\n"),
            format!("# {deep}"),
            format!("a: b {deep}"),
        ] {
            read(&text).unwrap_or_else(|err| panic!("{err}: {text:.40}"));
        }
    }

    #[test]
    fn nesting_through_an_alias_counts() {
        let anchored = format!("{}{}", "[".repeat(40), "]".repeat(40));
        let within = format!("a: &a {anchored}\nb: [[[*a]]]\n");
        read(&within).expect("43 deep");
        let past = format!(
            "a: &a {anchored}\nb: {}*a{}\n",
            "[".repeat(30),
            "]".repeat(30)
        );
        assert!(line_too_deep(&past).is_some(), "{past}");
    }

    /// The parser took time quadratic in the depth (a file nested 100,000 deep ran 38 s): it
    /// stops at the limit now, whatever follows.
    #[test]
    fn a_huge_nesting_is_refused_at_once() {
        for (text, line) in [
            (format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)), 1),
            (format!("{}x\n", "- ".repeat(100_000)), 1),
            (
                format!("- name: a\n  params:\n    x: {}\n", "{y: ".repeat(100_000)),
                3,
            ),
        ] {
            let started = Instant::now();
            assert_eq!(line_too_deep(&text), Some(line), "{text:.40}");
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{:?}",
                started.elapsed()
            );
        }
    }

    #[test]
    fn aliases_cannot_multiply_a_small_text_into_a_huge_one() {
        let mut bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n".to_string();
        for n in 1..9 {
            let refs = vec![format!("*a{}", n - 1); 10].join(", ");
            bomb.push_str(&format!("a{n}: &a{n} [{refs}]\n"));
        }
        let started = Instant::now();
        let err = read(&bomb).expect_err("a billion nodes");
        assert!(matches!(err, Error::Invalid(_)), "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        // One anchor that every task uses is no bomb.
        let mut shared = "params: &p {region: eu, rows: 10}\ntasks:\n".to_string();
        for n in 0..2_000 {
            shared.push_str(&format!("  - {{name: t{n}, params: *p}}\n"));
        }
        let file = read(&shared).expect("one anchor, many aliases");
        assert_eq!(file["tasks"][1999]["params"]["rows"], 10);
    }

    #[test]
    fn a_large_file_is_read_whole() {
        // More nodes than serde-saphyr's default budget (250,000), and more aliases (50,000).
        let text = format!("a: &a x\nb: [{}]\n", "1, *a, ".repeat(130_000));
        let file = read(&text).expect("260,000 nodes, 130,000 aliases");
        assert_eq!(file["b"].as_array().map(Vec::len), Some(260_000));
    }

    #[test]
    fn an_error_names_the_line_and_column_on_one_line() {
        for (text, said) in [
            ("tasks:\n  - name: a\n   cron: x\n", "at line 3, column 4"),
            ("a: [1, 2\nb: 3\n", "at line 2"),
            (
                "a: 1\na: 2\n",
                "duplicate mapping key `a` is not allowed here at line 2",
            ),
            ("a: 1\n---\nb: 2\n", "multiple found at line 3"),
        ] {
            let err = read(text).expect_err(text).to_string();
            assert!(err.contains(said), "{text:?}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn what_is_written_reads_back_as_it_was() {
        let value = json!([{"name": "extract", "cron": "0 0 4 * * *", "params": {"empty": {},
            "list": [], "nested": [[1, 2], {"a": [1]}]}, "dependsOn": ["etl/extract"]},
            {"s": ["yes", "no", "on", "null", "~", "", " lead", "trail ", "0755", "1_000",
                "0x1F", "1e3", ".nan", "1.0", "12:30", "2024-01-01", "a: b", "- x", "#c",
                "x #c", "'", "\"", "a\nb", "a\nb\n", "a\n\n", "\ttab", "\u{1b}[2J", "é日本",
                "\u{feff}bom", "x".repeat(200), "word ".repeat(40), "@x", "*x", "&x", "!x",
                "|", ">", "? x", "[a]", "{a}", "<<"],
             "n": [0, -1, i64::MAX, u64::MAX, 1.5, 1e300, -0.5, 0.1], "b": [true, false],
             "z": null}]);
        let text = to_string(&value).expect("YAML");
        assert_eq!(read(&text).expect("reads back"), value, "{text}");
        assert!(
            text.starts_with("- cron: 0 0 4 * * *\n  dependsOn:\n  - etl/extract\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!("\n  - {}\n", "x".repeat(200))),
            "one line: {text}"
        );
        assert!(text.contains("\n  - |-\n    a\n    b\n"), "a block: {text}");
    }

    proptest! {
        #[test]
        fn any_string_and_number_reads_back(
            text in "\\PC{0,40}|[ -~\\n\\t]{0,200}",
            key in "\\PC{0,12}",
            int in any::<i64>(),
            float in -1e12f64..1e12,
        ) {
            let value = json!({key.clone(): [text, int, float, {key: null}]});
            let written = to_string(&value).expect("YAML");
            prop_assert_eq!(read(&written).expect("reads back"), value, "{}", written);
        }
    }
}
