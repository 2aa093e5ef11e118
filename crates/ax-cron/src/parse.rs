//! Expression parsing: text to per-field bitmasks.

use super::days::{self, DomSpec, DowSpec};
use super::{next, CronError, CronSchedule, Zone};

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
    /// A day field: `?` allowed, and Quartz forms recognised (as errors when
    /// used in a range or step).
    day_field: bool,
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
    day_field: false,
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
    day_field: true,
};
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
    star_max: 12,
    names: &MONTH_NAMES,
    names_base: 1,
    day_field: false,
};
const DAY_OF_WEEK: FieldSpec = FieldSpec {
    name: "dayOfWeek",
    min: 0,
    max: 7,
    star_max: 6,
    names: &DOW_NAMES,
    names_base: 0,
    day_field: true,
};

/// Raw per-field masks of an expression, before day fields are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Masks {
    pub seconds: u64,
    pub minutes: u64,
    pub hours: u32,
    pub dom: DomSpec,
    /// Bits 1..=12.
    pub months: u16,
    /// Sunday is 0 (7 already folded onto 0).
    pub dow: DowSpec,
    /// The second, minute or hour field holds `*`, a range or a step: the
    /// schedule runs at intervals, so it fires in both copies of a repeated
    /// (DST overlap) hour.
    pub interval: bool,
}

/// Whether a step may be larger than its field's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Steps {
    /// As an expression is taken: a step larger than its field's range (`*/99` seconds) is
    /// refused, since it never repeats and so fires once a minute (an hour, …), not as it reads.
    Bounded,
    /// As an earlier ax stored it, when such steps were taken: the item's first value only,
    /// so a stored task keeps firing as it did.
    AsStored,
}

/// Parses a whole expression (see [`CronSchedule::parse`]).
pub(super) fn parse(expr: &str, steps: Steps) -> Result<CronSchedule, CronError> {
    let trimmed = expr.trim();
    let m = parse_masks(trimmed, steps)?;
    let schedule = CronSchedule {
        expr: trimmed.to_string(),
        seconds: m.seconds,
        minutes: m.minutes,
        hours: m.hours,
        months: m.months,
        day_masks: days::day_masks(&m.dom, &m.dow),
        dom: m.dom,
        dow: m.dow,
        interval: m.interval,
        zone: Zone::utc(),
    };
    // The Gregorian calendar (weekdays included) repeats every 400 years, so a
    // bounded search from any instant decides whether anything ever fires.
    if !next::fires_at_all(&schedule) {
        return Err(CronError::NeverFires(trimmed.to_string()));
    }
    Ok(schedule)
}

/// Parses a trimmed expression into field masks (no never-fires check).
pub(super) fn parse_masks(trimmed: &str, steps: Steps) -> Result<Masks, CronError> {
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
        seconds: parse_field(&SECOND, sec, steps)?,
        minutes: parse_field(&MINUTE, rest[0], steps)?,
        hours: parse_field(&HOUR, rest[1], steps)? as u32,
        dom: parse_dom(rest[2], steps)?,
        months: parse_field(&MONTH, rest[3], steps)? as u16,
        dow: parse_dow(rest[4], steps)?,
        // Time fields hold no names, so `-` only ever means a range.
        interval: [sec, rest[0], rest[1]]
            .iter()
            .any(|f| f.contains(['*', '-', '/'])),
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

/// A Quartz day-of-month form.
enum DomForm {
    /// `L-n` (`L` is `L-0`).
    BeforeLast(u32),
    /// `nW`.
    NearestWeekday(u32),
    /// `LW`.
    LastWeekday,
}

/// A Quartz day-of-week form; the weekday is 0..=6, Sunday = 0.
enum DowForm {
    /// `nL`.
    Last(u32),
    /// `n#k`.
    Nth(u32, u32),
}

/// Parses the day-of-month field: plain items and Quartz forms, unioned.
fn parse_dom(text: &str, steps: Steps) -> Result<DomSpec, CronError> {
    let mut spec = DomSpec::default();
    for item in list_items(&DAY_OF_MONTH, text)? {
        match dom_form(item)? {
            Some(DomForm::BeforeLast(n)) => spec.before_last |= 1 << n,
            Some(DomForm::NearestWeekday(n)) => spec.nearest_weekday |= 1 << n,
            Some(DomForm::LastWeekday) => spec.last_weekday = true,
            None => spec.days |= parse_item(&DAY_OF_MONTH, item, steps)? as u32,
        }
    }
    Ok(spec)
}

/// Parses the day-of-week field: plain items and Quartz forms, unioned.
fn parse_dow(text: &str, steps: Steps) -> Result<DowSpec, CronError> {
    let mut spec = DowSpec::default();
    for item in list_items(&DAY_OF_WEEK, text)? {
        match dow_form(item)? {
            Some(DowForm::Last(wd)) => spec.last |= 1 << wd,
            Some(DowForm::Nth(wd, k)) => spec.nth[k as usize - 1] |= 1 << wd,
            None => spec.days |= fold_sunday(parse_item(&DAY_OF_WEEK, item, steps)?),
        }
    }
    Ok(spec)
}

/// Recognises `L`, `L-n`, `LW` and `nW`; `None` for anything else.
fn dom_form(item: &str) -> Result<Option<DomForm>, CronError> {
    let invalid = |reason| CronError::InvalidQuartz {
        field: DAY_OF_MONTH.name,
        token: item.to_string(),
        reason,
    };
    if item.eq_ignore_ascii_case("L") {
        return Ok(Some(DomForm::BeforeLast(0)));
    }
    if item.eq_ignore_ascii_case("LW") {
        return Ok(Some(DomForm::LastWeekday));
    }
    if let Some(n) = strip_prefix_ignore_case(item, "L-").filter(|n| is_number(n)) {
        let n = saturating_number(n);
        if n > days::MAX_BEFORE_LAST {
            return Err(invalid("`L-n` takes n from 0 to 30"));
        }
        return Ok(Some(DomForm::BeforeLast(n)));
    }
    if let Some(n) = strip_suffix_ignore_case(item, "W").filter(|n| is_number(n)) {
        let n = saturating_number(n);
        if !(DAY_OF_MONTH.min..=DAY_OF_MONTH.max).contains(&n) {
            return Err(invalid("`nW` takes a day n from 1 to 31"));
        }
        return Ok(Some(DomForm::NearestWeekday(n)));
    }
    Ok(None)
}

/// Recognises `nL` and `n#k` (n a number or a name); `None` for anything else.
fn dow_form(item: &str) -> Result<Option<DowForm>, CronError> {
    if let Some((day, k)) = item.split_once('#') {
        if item.contains(['-', '/']) {
            return Err(in_range(DAY_OF_WEEK.name, item.to_string()));
        }
        let wd = weekday_value(day, item)?;
        if !is_number(k) || !(1..=days::MAX_NTH).contains(&saturating_number(k)) {
            return Err(CronError::InvalidQuartz {
                field: DAY_OF_WEEK.name,
                token: item.to_string(),
                reason: "`n#k` takes k from 1 to 5",
            });
        }
        return Ok(Some(DowForm::Nth(wd, saturating_number(k))));
    }
    match strip_suffix_ignore_case(item, "L") {
        // Only a number or a name before the `L`; other text (`1-5L`, `L`) is
        // left to the general parser, which says what is wrong with it.
        Some(day) if is_number(day) || DOW_NAMES.iter().any(|n| n.eq_ignore_ascii_case(day)) => {
            Ok(Some(DowForm::Last(weekday_value(day, item)?)))
        }
        _ => Ok(None),
    }
}

/// A weekday number or name as 0..=6 (7 is Sunday, 0).
fn weekday_value(tok: &str, item: &str) -> Result<u32, CronError> {
    let (v, _) = parse_value(&DAY_OF_WEEK, tok, item)?;
    Ok(v % 7)
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn strip_suffix_ignore_case<'a>(s: &'a str, suffix: &str) -> Option<&'a str> {
    let cut = s.len().checked_sub(suffix.len())?;
    let tail = s.get(cut..)?;
    tail.eq_ignore_ascii_case(suffix).then(|| &s[..cut])
}

/// A non-empty run of ASCII digits (`str::parse` would also accept a `+`).
fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// The items of a comma list; an empty item is an error.
fn list_items<'a>(
    spec: &FieldSpec,
    text: &'a str,
) -> Result<impl Iterator<Item = &'a str>, CronError> {
    if text.split(',').any(str::is_empty) {
        return Err(CronError::EmptyListItem {
            field: spec.name,
            token: text.to_string(),
        });
    }
    Ok(text.split(','))
}

/// Parses one field into a bitmask (bit `v` set when value `v` matches).
fn parse_field(spec: &FieldSpec, text: &str, steps: Steps) -> Result<u64, CronError> {
    let mut mask = 0u64;
    for item in list_items(spec, text)? {
        mask |= parse_item(spec, item, steps)?;
    }
    Ok(mask)
}

/// Parses one comma-list item: `*`, `?`, `v`, `a-b`, optionally with `/n`.
fn parse_item(spec: &FieldSpec, item: &str, steps: Steps) -> Result<u64, CronError> {
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
        if base == "?" && !spec.day_field {
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
            let values = spec.star_max - spec.min + 1;
            if n > values && steps == Steps::Bounded {
                return Err(CronError::StepTooLarge {
                    field: spec.name,
                    token: item.to_string(),
                    values,
                });
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

fn in_range(field: &'static str, token: String) -> CronError {
    CronError::QuartzInRange { field, token }
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
        // `tok` is only part of `item` inside a range or a step. There an
        // `L` or `W` form of a day field is supported, just not in that place.
        let misplaced = spec.day_field && tok != item && !tok.contains(['H', 'h']);
        let make = if misplaced { in_range } else { quartz };
        return Err(make(spec.name, item.to_string()));
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
/// of range, as a value or as a step, instead of overflowing).
fn saturating_number(digits: &str) -> u32 {
    digits.bytes().fold(0u32, |acc, b| {
        acc.saturating_mul(10).saturating_add(u32::from(b - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_mask(spec: &FieldSpec, text: &str) -> u64 {
        parse_field(spec, text, Steps::Bounded).expect("valid field")
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
        // A step as large as the field's range fires once per cycle: `*/60` is every 60 s.
        assert_eq!(field_mask(&SECOND, "*/60"), bits(&[0]));
        assert_eq!(field_mask(&HOUR, "3/24"), bits(&[3]));
        assert_eq!(field_mask(&DAY_OF_WEEK, "*/7"), bits(&[0]));
        assert_eq!(
            field_mask(&SECOND, "1-10/3,*/30"),
            bits(&[1, 4, 7, 10, 0, 30])
        );
    }

    #[test]
    fn a_step_larger_than_its_fields_range_is_refused_unless_stored() {
        for (spec, text, values) in [
            (&SECOND, "*/99", 60),
            (&SECOND, "*/61", 60),
            (&MINUTE, "*/61", 60),
            (&HOUR, "*/100", 24),
            (&HOUR, "1-5/25", 24),
            (&DAY_OF_MONTH, "*/32", 31),
            (&MONTH, "JAN/13", 12),
            (&DAY_OF_WEEK, "*/8", 7),
            (&SECOND, "*/99999999999999999999", 60),
        ] {
            let e = parse_field(spec, text, Steps::Bounded).unwrap_err();
            assert_eq!(
                e,
                CronError::StepTooLarge {
                    field: spec.name,
                    token: text.to_string(),
                    values
                },
                "{text}"
            );
            assert_eq!(e.field(), Some(spec.name));
            // As an earlier ax stored it: the item's first value, as that ax fired it.
            let stored = parse_field(spec, text, Steps::AsStored).expect(text);
            assert_eq!(stored.count_ones(), 1, "{text}");
        }
        assert_eq!(
            parse_field(&HOUR, "1-5/25", Steps::AsStored),
            Ok(bits(&[1]))
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
        assert!(parse_field(&MONTH, "MON", Steps::Bounded).is_err());
        assert!(parse_field(&DAY_OF_WEEK, "JAN", Steps::Bounded).is_err());
        assert!(parse_field(&HOUR, "JAN", Steps::Bounded).is_err());
    }

    #[test]
    fn question_mark_only_in_day_fields() {
        assert_eq!(
            field_mask(&DAY_OF_MONTH, "?"),
            field_mask(&DAY_OF_MONTH, "*")
        );
        assert_eq!(field_mask(&DAY_OF_WEEK, "?"), field_mask(&DAY_OF_WEEK, "*"));
        for spec in [&SECOND, &MINUTE, &HOUR, &MONTH] {
            let e = parse_field(spec, "?", Steps::Bounded).unwrap_err();
            assert!(matches!(e, CronError::QuestionMarkNotAllowed { .. }), "{e}");
            assert_eq!(e.field(), Some(spec.name));
        }
    }

    #[test]
    fn quartz_atoms() {
        for t in ["L", "W", "LW", "15W", "6L", "H", "h", "l", "H(0-29)", "5#3"] {
            let e = parse_field(&DAY_OF_MONTH, t, Steps::Bounded).unwrap_err();
            assert!(matches!(e, CronError::QuartzExtension { .. }), "{t}: {e}");
        }
        // Names containing L/W/H are not Quartz.
        assert_eq!(field_mask(&MONTH, "JUL"), bits(&[7]));
        assert_eq!(field_mask(&DAY_OF_WEEK, "WED,THU"), bits(&[3, 4]));
    }
}
