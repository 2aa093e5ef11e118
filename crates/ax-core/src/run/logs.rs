//! What executors say while a run is open: log lines and progress per attempt, and the
//! `output` of a reply or callback. How lines are cut and bounded, and when a run stops taking
//! them; pure.

use chrono::{DateTime, Duration, Utc};

use crate::text::clean_line;

/// Longest line kept, in characters; a longer one is cut and ends with `…`.
pub const MAX_LINE_CHARS: usize = 4096;
/// Most lines one call may send, counted once split on newlines.
pub const MAX_LINES_PER_CALL: usize = 1000;
/// Most bytes of `output` kept per attempt: the last ones.
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;
/// What an attempt's progress may be.
pub const PROGRESS: std::ops::RangeInclusive<i32> = 0..=100;

/// How much of an attempt's log is kept (`run_logs.*`): beyond either bound, the oldest
/// lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub lines: usize,
    pub bytes: usize,
}

/// A call that sends more than [`MAX_LINES_PER_CALL`] lines, newlines inside its strings
/// counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "lines holds at most {MAX_LINES_PER_CALL} lines a call, a line per newline ({0} were sent)"
)]
pub struct TooManyLines(pub usize);

/// The lines to store of what an executor sent: one per `\n`, counted before any is made (a
/// string of newlines costs no more than the lines it may hold), each with its control
/// characters dropped but tabs (`text::clean_line`) and cut to [`MAX_LINE_CHARS`].
pub fn lines_of(sent: &[String]) -> Result<Vec<String>, TooManyLines> {
    let count: usize = sent.iter().map(|text| text.split('\n').count()).sum();
    if count > MAX_LINES_PER_CALL {
        return Err(TooManyLines(count));
    }
    Ok(sent
        .iter()
        .flat_map(|text| text.split('\n'))
        .map(|line| cut_line(&clean_line(line)))
        .collect())
}

fn cut_line(line: &str) -> String {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line.to_string(),
    }
}

/// How many of the oldest of these lines (their sizes in bytes, oldest first) must go so that
/// the rest fit `limits`.
pub fn overflow(sizes: &[usize], limits: Limits) -> usize {
    let mut bytes: usize = sizes.iter().sum();
    let mut drop = sizes.len().saturating_sub(limits.lines);
    bytes -= sizes[..drop].iter().sum::<usize>();
    while bytes > limits.bytes && drop < sizes.len() {
        bytes -= sizes[drop];
        drop += 1;
    }
    drop
}

/// The line shown in place of the `dropped` oldest lines of an attempt.
pub fn dropped_marker(dropped: i64, limits: Limits) -> String {
    format!(
        "[ax] {dropped} earlier line{} dropped: an attempt keeps its last {} lines and {} KiB",
        if dropped == 1 { "" } else { "s" },
        limits.lines,
        limits.bytes / 1024
    )
}

/// The last [`MAX_OUTPUT_BYTES`] of an output, cut on a character boundary.
pub fn cut_output(output: &str) -> &str {
    let mut start = output.len().saturating_sub(MAX_OUTPUT_BYTES);
    while !output.is_char_boundary(start) {
        start += 1;
    }
    &output[start..]
}

/// Why a run takes no more lines.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Closed {
    #[error("attempt {attempt} was never dispatched (the last dispatched is {dispatched})")]
    NotDispatched { attempt: i32, dispatched: i32 },
    #[error(
        "the run ended at {}: log lines are taken until {} s after its end",
        ended.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        grace.num_seconds()
    )]
    Ended {
        ended: DateTime<Utc>,
        grace: Duration,
    },
}

/// Whether lines for `attempt` are taken now: an attempt dispatched, of a run open or final
/// for less than `grace`.
pub fn takes_lines(
    attempt: i32,
    dispatched: i32,
    finished_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    grace: Duration,
) -> Result<(), Closed> {
    if attempt > dispatched {
        return Err(Closed::NotDispatched {
            attempt,
            dispatched,
        });
    }
    match finished_at {
        Some(ended) if now > ended + grace => Err(Closed::Ended { ended, grace }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMITS: Limits = Limits {
        lines: 3,
        bytes: 10,
    };

    #[test]
    fn lines_are_split_cleaned_and_cut() {
        let long = "x".repeat(MAX_LINE_CHARS + 5);
        let sent = [
            "a\r\nb".into(),
            long,
            "".into(),
            "\u{1b}[31mRED\u{0}\tok\rover".into(),
        ];
        let lines = lines_of(&sent).expect("within the limit");
        assert_eq!(lines[..2], ["a", "b"]);
        assert_eq!(lines[2].chars().count(), MAX_LINE_CHARS + 1);
        assert!(lines[2].ends_with('…'));
        assert_eq!(lines[3], "");
        assert_eq!(lines[4], "[31mRED\tokover");
    }

    #[test]
    fn the_limit_counts_lines_split_on_newlines() {
        let at_limit = "\n".repeat(MAX_LINES_PER_CALL - 1);
        assert_eq!(
            lines_of(std::slice::from_ref(&at_limit)).map(|l| l.len()),
            Ok(1000)
        );
        assert_eq!(
            lines_of(&[at_limit, "one more".into()]),
            Err(TooManyLines(MAX_LINES_PER_CALL + 1))
        );
        // A megabyte of newlines: refused, counted without a line made.
        let flood = "\n".repeat(1 << 20);
        assert_eq!(lines_of(&[flood]), Err(TooManyLines((1 << 20) + 1)));
        let items = vec![String::new(); MAX_LINES_PER_CALL + 1];
        assert!(lines_of(&items).is_err());
    }

    #[test]
    fn the_oldest_lines_go_first_by_count_and_by_bytes() {
        assert_eq!(overflow(&[1, 1, 1], LIMITS), 0);
        assert_eq!(overflow(&[1, 1, 1, 1, 1], LIMITS), 2);
        assert_eq!(overflow(&[8, 1, 2], LIMITS), 1);
        assert_eq!(overflow(&[11], LIMITS), 1);
    }

    #[test]
    fn output_keeps_its_end_on_a_char_boundary() {
        let output = format!("é{}", "a".repeat(MAX_OUTPUT_BYTES - 1));
        assert_eq!(cut_output(&output), &output[2..]);
        assert_eq!(cut_output("short"), "short");
    }

    #[test]
    fn lines_are_taken_until_the_grace_after_the_end() {
        let now = Utc::now();
        let grace = Duration::seconds(60);
        assert!(takes_lines(1, 1, None, now, grace).is_ok());
        assert!(takes_lines(1, 2, Some(now - Duration::seconds(59)), now, grace).is_ok());
        assert!(matches!(
            takes_lines(1, 1, Some(now - Duration::seconds(61)), now, grace),
            Err(Closed::Ended { .. })
        ));
        assert_eq!(
            takes_lines(2, 1, None, now, grace),
            Err(Closed::NotDispatched {
                attempt: 2,
                dispatched: 1
            })
        );
        assert!(dropped_marker(1, LIMITS).contains("1 earlier line dropped"));
    }

    proptest! {
        #[test]
        fn what_is_kept_fits_and_is_the_most_that_fits(
            sizes in proptest::collection::vec(0usize..8, 0..20),
            lines in 1usize..10,
            bytes in 0usize..40,
        ) {
            let limits = Limits { lines, bytes };
            let drop = overflow(&sizes, limits);
            let kept = &sizes[drop..];
            prop_assert!(kept.len() <= lines);
            prop_assert!(kept.iter().sum::<usize>() <= bytes);
            if drop > 0 {
                let one_more = &sizes[drop - 1..];
                prop_assert!(one_more.len() > lines || one_more.iter().sum::<usize>() > bytes);
            }
        }
    }
}
