//! Durations as the settings take them: a plain number in the key's own unit
//! (`store.batch_interval_ms: 500` is 500 ms), or a number with a unit of its own (`500ms`,
//! `1s`, `5m`, `1h`, `2d`).

/// The unit a duration setting is kept in, as its key's suffix says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Millis,
    Secs,
    Days,
}

impl TimeUnit {
    /// As the configuration reference's table writes it.
    pub fn symbol(self) -> &'static str {
        match self {
            TimeUnit::Millis => "ms",
            TimeUnit::Secs => "s",
            TimeUnit::Days => "days",
        }
    }

    fn millis(self) -> i128 {
        match self {
            TimeUnit::Millis => 1,
            TimeUnit::Secs => 1000,
            TimeUnit::Days => 86_400_000,
        }
    }
}

/// The units a duration may be written with, each in milliseconds.
pub const UNITS: &[(&str, i128)] = &[
    ("ms", 1),
    ("s", 1000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// Whether `text` ends with a unit of its own (`1s`), not a plain number.
pub fn has_unit(text: &str) -> bool {
    text.trim().ends_with(|c: char| c.is_ascii_alphabetic())
}

/// `text` in `unit`; `None` when it is no duration, or not a whole number of `unit`. A number
/// too large to compute with saturates: it is then outside every setting's range, and refused
/// as such.
pub fn parse(text: &str, unit: TimeUnit) -> Option<i128> {
    let text = text.trim();
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let digits_end = unsigned
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(unsigned.len());
    let (digits, suffix) = unsigned.split_at(digits_end);
    if digits.is_empty() {
        return None;
    }
    let per = match suffix.trim() {
        "" => unit.millis(),
        written => UNITS.iter().find(|(name, _)| *name == written)?.1,
    };
    let magnitude = match digits.parse::<i128>().ok().and_then(|n| n.checked_mul(per)) {
        Some(millis) if millis % unit.millis() != 0 => return None,
        Some(millis) => millis / unit.millis(),
        None => i128::MAX,
    };
    Some(if negative { -magnitude } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_number_is_in_the_keys_unit() {
        assert_eq!(parse("500", TimeUnit::Millis), Some(500));
        assert_eq!(parse("30", TimeUnit::Secs), Some(30));
        assert_eq!(parse("30", TimeUnit::Days), Some(30));
        assert_eq!(parse(" 7 ", TimeUnit::Secs), Some(7));
        assert_eq!(parse("0", TimeUnit::Millis), Some(0));
        assert_eq!(parse("-1", TimeUnit::Millis), Some(-1));
    }

    #[test]
    fn every_unit_converts_into_the_keys_unit() {
        for (text, unit, want) in [
            ("500ms", TimeUnit::Millis, 500),
            ("1s", TimeUnit::Millis, 1000),
            ("5m", TimeUnit::Millis, 300_000),
            ("1h", TimeUnit::Secs, 3600),
            ("2d", TimeUnit::Secs, 172_800),
            ("2d", TimeUnit::Days, 2),
            ("48h", TimeUnit::Days, 2),
            ("2000ms", TimeUnit::Secs, 2),
            ("10 s", TimeUnit::Secs, 10),
            ("-1s", TimeUnit::Millis, -1000),
        ] {
            assert_eq!(parse(text, unit), Some(want), "{text} in {unit:?}");
        }
    }

    #[test]
    fn a_part_of_the_keys_unit_or_no_duration_is_refused() {
        for (text, unit) in [
            ("500ms", TimeUnit::Secs),
            ("12h", TimeUnit::Days),
            ("1.5s", TimeUnit::Millis),
            ("", TimeUnit::Secs),
            ("s", TimeUnit::Secs),
            ("ten", TimeUnit::Secs),
            ("1w", TimeUnit::Secs),
            ("1S", TimeUnit::Secs),
            ("1s2", TimeUnit::Secs),
            ("1h30m", TimeUnit::Secs),
            ("--1", TimeUnit::Secs),
        ] {
            assert_eq!(parse(text, unit), None, "{text:?} in {unit:?}");
        }
    }

    #[test]
    fn a_number_too_large_saturates() {
        let huge = "9".repeat(60);
        assert_eq!(parse(&huge, TimeUnit::Secs), Some(i128::MAX));
        assert_eq!(
            parse(&format!("{huge}d"), TimeUnit::Millis),
            Some(i128::MAX)
        );
        assert_eq!(parse(&format!("-{huge}"), TimeUnit::Secs), Some(-i128::MAX));
        let max = i128::MAX.to_string();
        assert_eq!(parse(&format!("{max}d"), TimeUnit::Secs), Some(i128::MAX));
    }

    #[test]
    fn a_unit_of_its_own_is_told_from_a_plain_number() {
        assert!(has_unit("1s") && has_unit("500ms ") && has_unit("2d"));
        assert!(!has_unit("1000") && !has_unit(""));
    }
}
