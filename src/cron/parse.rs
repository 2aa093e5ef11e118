//! Expression parsing: text to per-field bitmasks.

use super::{next, CronError, CronSchedule};

/// Static description of one field.
struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    /// Upper bound used for `*` (differs from `max` only for day-of-week,
    /// where `*` means 0-6 so Sunday is not produced twice as 0 and 7).
    star_max: u32,
    /// Names accepted in place of numbers; index `i` means value `i + names_base`.
    names: &'static [&'static str],
    names_base: u32,
    allow_question: bool,
}

const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DOW_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

const SECOND: FieldSpec = FieldSpec {
    name: "second",
    min: 0,
    max: 59,
    star_max: 59,
    names: &[],
    names_base: 0,
    allow_question: false,
};
const MINUTE: FieldSpec = FieldSpec {
    name: "minute",
    ..SECOND
};
const HOUR: FieldSpec = FieldSpec {
    name: "hour",
    max: 23,
    star_max: 23,
    ..SECOND
};
const DAY_OF_MONTH: FieldSpec = FieldSpec {
    name: "dayOfMonth",
    min: 1,
    max: 31,
    star_max: 31,
    names: &[],
    names_base: 0,
    allow_question: true,
};
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
    star_max: 12,
    names: &MONTH_NAMES,
    names_base: 1,
    allow_question: false,
};
const DAY_OF_WEEK: FieldSpec = FieldSpec {
    name: "dayOfWeek",
    min: 0,
    max: 7,
    star_max: 6,
    names: &DOW_NAMES,
    names_base: 0,
    allow_question: true,
};

/// Raw per-field masks of an expression, before day fields are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Masks {
    pub seconds: u64,
    pub minutes: u64,
    pub hours: u32,
    /// Bits 1..=31.
    pub dom: u32,
    /// Bits 1..=12.
    pub months: u16,
    /// Bits 0..=6, Sunday = 0 (7 already folded onto 0).
    pub dow: u8,
}

/// Parses a whole expression (see [`CronSchedule::parse`]).
pub(super) fn parse(expr: &str) -> Result<CronSchedule, CronError> {
    let trimmed = expr.trim();
    let m = parse_masks(trimmed)?;
    let schedule = CronSchedule {
        expr: trimmed.to_string(),
        seconds: m.seconds,
        minutes: m.minutes,
        hours: m.hours,
        months: m.months,
        day_masks: day_masks(m.dom, m.dow),
    };
    // The Gregorian calendar (weekdays included) repeats every 400 years, so a
    // bounded search from any instant decides whether anything ever fires.
    if !next::fires_at_all(&schedule) {
        return Err(CronError::NeverFires(trimmed.to_string()));
    }
    Ok(schedule)
}

/// Parses a trimmed expression into field masks (no never-fires check).
pub(super) fn parse_masks(trimmed: &str) -> Result<Masks, CronError> {
    if trimmed.is_empty() {
        return Err(CronError::Empty);
    }
    // Macros expand to a 6-field body.
    let body = if trimmed.starts_with('@') {
        expand_macro(trimmed).ok_or_else(|| CronError::UnknownMacro(trimmed.to_string()))?
    } else {
        trimmed
    };

    // Fixed-size buffer: avoids collecting into a Vec and caps work on
    // inputs with absurd numbers of fields.
    let mut fields = [""; 6];
    let mut count = 0usize;
    for f in body.split_whitespace() {
        if let Some(slot) = fields.get_mut(count) {
            *slot = f;
        }
        count += 1;
    }
    let (sec, rest): (&str, &[&str]) = match count {
        5 => ("0", &fields[..5]),
        6 => (fields[0], &fields[1..6]),
        7 => return Err(CronError::YearFieldUnsupported),
        n => return Err(CronError::FieldCount(n)),
    };

    // Struct fields evaluate in order, so errors report the leftmost field.
    Ok(Masks {
        seconds: parse_field(&SECOND, sec)?,
        minutes: parse_field(&MINUTE, rest[0])?,
        hours: parse_field(&HOUR, rest[1])? as u32,
        dom: parse_field(&DAY_OF_MONTH, rest[2])? as u32,
        months: parse_field(&MONTH, rest[3])? as u16,
        dow: fold_sunday(parse_field(&DAY_OF_WEEK, rest[4])?),
    })
}

/// Day-of-week 7 is Sunday too: fold bit 7 onto bit 0.
fn fold_sunday(dow: u64) -> u8 {
    ((dow | (dow >> 7)) & 0x7f) as u8
}

/// Expands a macro to its 6-field equivalent, case-insensitively.
fn expand_macro(m: &str) -> Option<&'static str> {
    const MACROS: [(&str, &str); 7] = [
        ("@yearly", "0 0 0 1 1 *"),
        ("@annually", "0 0 0 1 1 *"),
        ("@monthly", "0 0 0 1 * *"),
        ("@weekly", "0 0 0 * * 0"),
        ("@daily", "0 0 0 * * *"),
        ("@midnight", "0 0 0 * * *"),
        ("@hourly", "0 0 * * * *"),
    ];
    MACROS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(m))
        .map(|&(_, body)| body)
}

/// For each weekday of the 1st of a month, the month days (bits 1..=31)
/// matching both the day-of-month mask and the day-of-week mask.
fn day_masks(dom: u32, dow: u8) -> [u32; 7] {
    let mut masks = [0u32; 7];
    for (first_wd, mask) in masks.iter_mut().enumerate() {
        for day in 1..=31u32 {
            let wd = (first_wd as u32 + day - 1) % 7;
            if dom & (1 << day) != 0 && dow & (1 << wd) != 0 {
                *mask |= 1 << day;
            }
        }
    }
    masks
}

/// Parses one field into a bitmask (bit `v` set when value `v` matches).
fn parse_field(spec: &FieldSpec, text: &str) -> Result<u64, CronError> {
    let mut mask = 0u64;
    for item in text.split(',') {
        if item.is_empty() {
            return Err(CronError::EmptyListItem {
                field: spec.name,
                token: text.to_string(),
            });
        }
        mask |= parse_item(spec, item)?;
    }
    Ok(mask)
}

/// Parses one comma-list item: `*`, `?`, `v`, `a-b`, optionally with `/n`.
fn parse_item(spec: &FieldSpec, item: &str) -> Result<u64, CronError> {
    let err_token = |make: fn(&'static str, String) -> CronError| make(spec.name, item.to_string());
    // `#` (nth weekday) can't be caught per atom since `5#3` splits oddly.
    if item.contains('#') {
        return Err(err_token(quartz));
    }
    let (base, step) = match item.split_once('/') {
        Some((base, step)) => (base, Some(step)),
        None => (item, None),
    };

    let (start, end) = if base == "*" || base == "?" {
        if base == "?" && !spec.allow_question {
            return Err(err_token(|field, token| {
                CronError::QuestionMarkNotAllowed { field, token }
            }));
        }
        (spec.min, spec.star_max)
    } else if let Some((a, b)) = base.split_once('-') {
        if b.contains('-') {
            return Err(err_token(unknown));
        }
        let (start, _) = parse_value(spec, a, item)?;
        let (mut end, end_is_name) = parse_value(spec, b, item)?;
        // `FRI-SUN` reads naturally as Friday..Sunday; SUN is 0 but 7 works too.
        if spec.max == 7 && end == 0 && end_is_name && start > 0 {
            end = 7;
        }
        if start > end {
            return Err(CronError::ReversedRange {
                field: spec.name,
                token: base.to_string(),
            });
        }
        (start, end)
    } else {
        let (v, _) = parse_value(spec, base, item)?;
        // `a/n` runs from `a` to the field max; a bare value is just itself.
        (v, if step.is_some() { spec.max } else { v })
    };

    let step = match step {
        None => 1,
        Some(s) => {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err_token(|field, token| CronError::InvalidStep {
                    field,
                    token,
                }));
            }
            let n = saturating_number(s);
            if n == 0 {
                return Err(err_token(|field, token| CronError::ZeroStep {
                    field,
                    token,
                }));
            }
            n
        }
    };

    let mut mask = 0u64;
    // Values are at most 63 here (validated), so the shift cannot overflow.
    for v in (start..=end).step_by(step as usize) {
        mask |= 1u64 << v;
    }
    Ok(mask)
}

fn quartz(field: &'static str, token: String) -> CronError {
    CronError::QuartzExtension { field, token }
}

fn unknown(field: &'static str, token: String) -> CronError {
    CronError::UnknownToken { field, token }
}

/// Parses a single value (number or name); returns it and whether it was a name.
/// `item` is the enclosing list item, reported for malformed syntax.
fn parse_value(spec: &FieldSpec, tok: &str, item: &str) -> Result<(u32, bool), CronError> {
    if tok.is_empty() {
        // E.g. `-1`, `1-`, `/5`: a range or step with a missing operand.
        return Err(unknown(spec.name, item.to_string()));
    }
    // Explicit digit check: `str::parse` would also accept a leading `+`.
    if tok.bytes().all(|b| b.is_ascii_digit()) {
        let v = saturating_number(tok);
        if v < spec.min || v > spec.max {
            return Err(CronError::OutOfRange {
                field: spec.name,
                token: tok.to_string(),
                min: spec.min,
                max: spec.max,
            });
        }
        return Ok((v, false));
    }
    if let Some(i) = spec.names.iter().position(|n| n.eq_ignore_ascii_case(tok)) {
        return Ok((i as u32 + spec.names_base, true));
    }
    if is_quartz_atom(tok) {
        return Err(quartz(spec.name, item.to_string()));
    }
    Err(unknown(spec.name, tok.to_string()))
}

/// Quartz forms that survive list/range/step splitting: `L`, `W`, `LW`,
/// `nL`, `nW`, `H`, `H(..)`.
fn is_quartz_atom(tok: &str) -> bool {
    let rest = tok.trim_start_matches(|c: char| c.is_ascii_digit());
    ["L", "W", "LW", "H"]
        .iter()
        .any(|q| rest.eq_ignore_ascii_case(q))
        || (tok.len() >= 2
            && tok.as_bytes()[0].eq_ignore_ascii_case(&b'H')
            && tok.as_bytes()[1] == b'(')
}

/// Decimal digits to u32, saturating (huge numbers are then reported as out
/// of range, or as a step that simply never repeats, instead of overflowing).
fn saturating_number(digits: &str) -> u32 {
    digits.bytes().fold(0u32, |acc, b| {
        acc.saturating_mul(10).saturating_add(u32::from(b - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_mask(spec: &FieldSpec, text: &str) -> u64 {
        parse_field(spec, text).expect("valid field")
    }

    fn bits(values: &[u32]) -> u64 {
        values.iter().fold(0, |m, v| m | 1 << v)
    }

    #[test]
    fn single_values_lists_and_ranges() {
        assert_eq!(field_mask(&MINUTE, "5"), bits(&[5]));
        assert_eq!(field_mask(&MINUTE, "1,5,59"), bits(&[1, 5, 59]));
        assert_eq!(field_mask(&HOUR, "9-12"), bits(&[9, 10, 11, 12]));
        assert_eq!(field_mask(&HOUR, "3-3"), bits(&[3]));
        assert_eq!(field_mask(&HOUR, "1-2,20-21"), bits(&[1, 2, 20, 21]));
        assert_eq!(field_mask(&SECOND, "*"), (1u64 << 60) - 1);
        assert_eq!(field_mask(&DAY_OF_MONTH, "*"), ((1u64 << 32) - 1) & !1);
        assert_eq!(field_mask(&MONTH, "*"), ((1u64 << 13) - 1) & !1);
    }

    #[test]
    fn steps_of_each_form() {
        assert_eq!(field_mask(&MINUTE, "*/15"), bits(&[0, 15, 30, 45]));
        assert_eq!(field_mask(&MINUTE, "10-30/10"), bits(&[10, 20, 30]));
        assert_eq!(field_mask(&MINUTE, "10-35/10"), bits(&[10, 20, 30]));
        assert_eq!(field_mask(&MINUTE, "50/4"), bits(&[50, 54, 58]));
        assert_eq!(field_mask(&DAY_OF_MONTH, "*/10"), bits(&[1, 11, 21, 31]));
        assert_eq!(field_mask(&MONTH, "*/4"), bits(&[1, 5, 9]));
        assert_eq!(field_mask(&HOUR, "*/100"), bits(&[0]));
        assert_eq!(field_mask(&SECOND, "*/99999999999999999999"), bits(&[0]));
        assert_eq!(
            field_mask(&SECOND, "1-10/3,*/30"),
            bits(&[1, 4, 7, 10, 0, 30])
        );
    }

    #[test]
    fn names_in_any_case_and_in_ranges() {
        assert_eq!(field_mask(&MONTH, "jan"), bits(&[1]));
        assert_eq!(field_mask(&MONTH, "Dec"), bits(&[12]));
        assert_eq!(field_mask(&MONTH, "jan-MAR"), bits(&[1, 2, 3]));
        assert_eq!(field_mask(&MONTH, "JAN/5"), bits(&[1, 6, 11]));
        assert_eq!(field_mask(&DAY_OF_WEEK, "MON-FRI"), bits(&[1, 2, 3, 4, 5]));
        assert_eq!(field_mask(&DAY_OF_WEEK, "sun,Sat"), bits(&[0, 6]));
        assert_eq!(field_mask(&DAY_OF_WEEK, "fri-sun"), bits(&[5, 6, 7]));
        assert_eq!(field_mask(&DAY_OF_WEEK, "1-WED"), bits(&[1, 2, 3]));
    }

    #[test]
    fn dow_star_and_seven() {
        assert_eq!(field_mask(&DAY_OF_WEEK, "*"), bits(&[0, 1, 2, 3, 4, 5, 6]));
        assert_eq!(field_mask(&DAY_OF_WEEK, "7"), bits(&[7]));
        assert_eq!(field_mask(&DAY_OF_WEEK, "5-7"), bits(&[5, 6, 7]));
        // Names only where they belong.
        assert!(parse_field(&MONTH, "MON").is_err());
        assert!(parse_field(&DAY_OF_WEEK, "JAN").is_err());
        assert!(parse_field(&HOUR, "JAN").is_err());
    }

    #[test]
    fn question_mark_only_in_day_fields() {
        assert_eq!(
            field_mask(&DAY_OF_MONTH, "?"),
            field_mask(&DAY_OF_MONTH, "*")
        );
        assert_eq!(field_mask(&DAY_OF_WEEK, "?"), field_mask(&DAY_OF_WEEK, "*"));
        for spec in [&SECOND, &MINUTE, &HOUR, &MONTH] {
            let e = parse_field(spec, "?").unwrap_err();
            assert!(matches!(e, CronError::QuestionMarkNotAllowed { .. }), "{e}");
            assert_eq!(e.field(), Some(spec.name));
        }
    }

    #[test]
    fn quartz_atoms() {
        for t in ["L", "W", "LW", "15W", "6L", "H", "h", "l", "H(0-29)", "5#3"] {
            let e = parse_field(&DAY_OF_MONTH, t).unwrap_err();
            assert!(matches!(e, CronError::QuartzExtension { .. }), "{t}: {e}");
        }
        // Names containing L/W/H are not Quartz.
        assert_eq!(field_mask(&MONTH, "JUL"), bits(&[7]));
        assert_eq!(field_mask(&DAY_OF_WEEK, "WED,THU"), bits(&[3, 4]));
    }
}
