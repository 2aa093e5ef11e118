//! Plain-English descriptions of schedules, for previews.
//!
//! Described from the parsed masks, not the text, so equivalent spellings
//! (`*/15`, `0,15,30,45`, `0-59/15`) read the same.

use super::days::{set_bits, DomSpec, DowSpec};
use super::CronSchedule;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const NTH: [&str; 5] = ["first", "second", "third", "fourth", "fifth"];

/// Up to this many fire times a day are listed one by one ("At 08:00, 12:00
/// and 18:00") rather than described as a pattern.
const MAX_LISTED_TIMES: usize = 6;

/// See [`CronSchedule::describe`].
pub(super) fn describe(s: &CronSchedule) -> String {
    let mut parts = time_parts(
        &values(s.seconds, 0, 59),
        &values(s.minutes, 0, 59),
        &values(u64::from(s.hours), 0, 23),
    );
    let dom_restricted = s.dom.days != DomSpec::ALL_DAYS;
    if dom_restricted {
        parts.push(format!("on {} of the month", dom_items(&s.dom)));
    }
    if s.dow.days != DowSpec::ALL_DAYS {
        parts.push(dow_part(&s.dow, dom_restricted));
    }
    let months = values(u64::from(s.months), 1, 12);
    if months.len() < 12 {
        parts.push(format!("only in {}", month_names(&months)));
    }
    let mut text = capitalize(&parts.join(", "));
    if s.zone.rules().is_some() {
        text.push_str(&format!(" ({} time)", s.zone));
    }
    text
}

/// The set values of `mask` within `lo..=hi`.
fn values(mask: u64, lo: u32, hi: u32) -> Vec<u32> {
    (lo..=hi).filter(|v| mask & (1 << v) != 0).collect()
}

/// How a field's values are laid out.
#[derive(Debug, PartialEq, Eq)]
enum Shape {
    All,
    Single(u32),
    /// `start, start + step, …, last` (at least three, or two reaching the end).
    Step {
        start: u32,
        step: u32,
        last: u32,
    },
    /// Contiguous, at least three values.
    Range(u32, u32),
    List,
}

fn shape(values: &[u32], lo: u32, hi: u32) -> Shape {
    match values {
        [] => Shape::List,
        [v] => Shape::Single(*v),
        _ if values.len() as u32 == hi - lo + 1 => Shape::All,
        [first, second, ..] => {
            let step = second - first;
            let last = values[values.len() - 1];
            let even = values.windows(2).all(|w| w[1] - w[0] == step);
            let long_enough = values.len() >= 3 || (*first == lo && last + step > hi);
            match (even, step) {
                (true, 1) if values.len() >= 3 => Shape::Range(*first, last),
                (true, 2..) if long_enough => Shape::Step {
                    start: *first,
                    step,
                    last,
                },
                _ => Shape::List,
            }
        }
    }
}

/// The shape of a second, minute or hour field, whose values come round again each minute,
/// hour or day. A step that runs to the field's end is an interval ("every 15 seconds") only
/// if it also spans the turn: `*/15` fires at :45 and 15 s later at :00; `*/45` fires at :00
/// and :45, 45 s then 15 s apart, so it is the list it is.
fn time_shape(values: &[u32], lo: u32, hi: u32) -> Shape {
    match shape(values, lo, hi) {
        Shape::Step { start, step, last }
            if last + step > hi && hi + 1 + start - last - lo != step =>
        {
            Shape::List
        }
        shape => shape,
    }
}

/// The time-of-day parts, e.g. `["at 09:30"]` or `["every 15 minutes", "between 09:00 and 17:59"]`.
fn time_parts(secs: &[u32], mins: &[u32], hours: &[u32]) -> Vec<String> {
    let hour_shape = time_shape(hours, 0, 23);
    let once_an_hour = secs.len() == 1 && mins.len() == 1;
    // Parsed fields always hold at least one value.
    let (s, m) = (
        secs.first().copied().unwrap_or(0),
        mins.first().copied().unwrap_or(0),
    );
    if once_an_hour
        && hour_shape != Shape::All
        && (hours.len() <= MAX_LISTED_TIMES || hour_shape == Shape::List)
    {
        let times: Vec<String> = hours.iter().map(|&h| clock(h, m, s)).collect();
        return vec![format!("at {}", join(&times))];
    }
    let mut parts = Vec::new();
    if once_an_hour {
        // Unless the hours part says it already ("every 2 hours").
        if (m, s) == (0, 0) && !matches!(hour_shape, Shape::Step { .. }) {
            parts.push("every hour".to_string());
        } else if (m, s) != (0, 0) {
            parts.push(format!("at {} past the hour", minutes_seconds(m, s)));
        }
    } else {
        let sec_part = match time_shape(secs, 0, 59) {
            Shape::Single(0) => None,
            shape => Some(field_phrase(&shape, secs, (0, 59), "second")),
        };
        let min_part = match time_shape(mins, 0, 59) {
            // "Every second" and "every 15 seconds" already cover each minute.
            Shape::All if sec_part.as_deref().is_some_and(|p| p.starts_with("every")) => None,
            shape => Some(field_phrase(&shape, mins, (0, 59), "minute")),
        };
        parts.extend(sec_part);
        parts.extend(min_part);
    }
    match hour_shape {
        Shape::All => {}
        Shape::Single(h) => parts.push(format!("between {h:02}:00 and {h:02}:59")),
        Shape::Range(a, b) => parts.push(format!("between {a:02}:00 and {b:02}:59")),
        Shape::Step { .. } => parts.push(field_phrase(&hour_shape, hours, (0, 23), "hour")),
        Shape::List => parts.push(format!(
            "during {}",
            field_phrase(&hour_shape, hours, (0, 23), "hour")
        )),
    }
    parts
}

/// A second, minute or hour field in words: "every minute", "at second 30",
/// "every 15 minutes", "minutes 10 through 20", "seconds 1, 5 and 10".
fn field_phrase(shape: &Shape, values: &[u32], (lo, hi): (u32, u32), unit: &str) -> String {
    match *shape {
        Shape::All => format!("every {unit}"),
        Shape::Single(v) => format!("at {unit} {v}"),
        Shape::Step { start, step, last } => {
            if last + step <= hi {
                format!("every {step} {unit}s from {unit} {start} through {last}")
            } else if start != lo {
                format!("every {step} {unit}s from {unit} {start}")
            } else {
                format!("every {step} {unit}s")
            }
        }
        Shape::Range(a, b) => format!("{unit}s {a} through {b}"),
        Shape::List => format!("{unit}s {}", runs(values, |v| v.to_string())),
    }
}

/// "30 minutes", "1 minute and 15 seconds", "15 seconds".
fn minutes_seconds(m: u32, s: u32) -> String {
    let plural = |n: u32, unit: &str| format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
    match (m, s) {
        (m, 0) => plural(m, "minute"),
        (0, s) => plural(s, "second"),
        (m, s) => format!("{} and {}", plural(m, "minute"), plural(s, "second")),
    }
}

/// The day-of-month items: "day 1 and the last day", "days 1 through 7".
fn dom_items(dom: &DomSpec) -> String {
    let mut items = Vec::new();
    let days = values(u64::from(dom.days), 1, 31);
    match shape(&days, 1, 31) {
        Shape::Single(d) => items.push(format!("day {d}")),
        Shape::Step { start, step, last } if last + step > 31 => {
            items.push(format!("every {} day from day {start}", ordinal(step)));
        }
        _ if days.is_empty() => {}
        _ => items.push(format!("days {}", runs(&days, |d| d.to_string()))),
    }
    items.extend(set_bits(dom.before_last).map(|n| match n {
        0 => "the last day".to_string(),
        1 => "the day before the last day".to_string(),
        n => format!("the {} day before the last day", ordinal(n)),
    }));
    items.extend(set_bits(dom.nearest_weekday).map(|n| format!("the weekday nearest day {n}")));
    if dom.last_weekday {
        items.push("the last weekday".to_string());
    }
    join(&items)
}

/// The day-of-week part: "Monday through Friday", "only on Sunday", "on the
/// last Friday of the month"; "if it is …" when day-of-month is restricted
/// too (both must match).
fn dow_part(dow: &DowSpec, dom_restricted: bool) -> String {
    // Monday first, Sunday last: `FRI-SUN` reads as a range.
    let order = |wd: u32| (wd + 6) % 7;
    let mut plain: Vec<u32> = set_bits(u32::from(dow.days)).map(order).collect();
    plain.sort_unstable();
    let name = |i: u32| WEEKDAYS[((i + 1) % 7) as usize].to_string();
    let mut items = Vec::new();
    if !plain.is_empty() {
        items.push(runs(&plain, name));
    }
    let mut of_month = Vec::new();
    for (k, wds) in dow.nth.iter().enumerate() {
        for wd in set_bits(u32::from(*wds)) {
            of_month.push(format!("the {} {}", NTH[k], WEEKDAYS[wd as usize]));
        }
    }
    for wd in set_bits(u32::from(dow.last)) {
        of_month.push(format!("the last {}", WEEKDAYS[wd as usize]));
    }
    if !of_month.is_empty() {
        items.push(format!("{} of the month", join(&of_month)));
    }
    let text = join(&items);
    // One run of three or more reads as a range: "Monday through Friday".
    let is_range = of_month.is_empty()
        && plain.len() >= 3
        && plain[plain.len() - 1] - plain[0] + 1 == plain.len() as u32;
    match (dom_restricted, is_range) {
        (true, _) => format!("if it is {text}"),
        (false, true) => text,
        (false, false) if plain.is_empty() => format!("on {text}"),
        (false, false) => format!("only on {text}"),
    }
}

fn month_names(months: &[u32]) -> String {
    runs(months, |m| MONTHS[m as usize - 1].to_string())
}

/// Values as a list where runs of three or more read "a through b".
fn runs(values: &[u32], name: impl Fn(u32) -> String) -> String {
    let mut items = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let mut j = i;
        while j + 1 < values.len() && values[j + 1] == values[j] + 1 {
            j += 1;
        }
        if j - i >= 2 {
            items.push(format!("{} through {}", name(values[i]), name(values[j])));
        } else {
            items.extend(values[i..=j].iter().map(|&v| name(v)));
        }
        i = j + 1;
    }
    join(&items)
}

/// "a", "a and b", "a, b and c".
fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// `HH:MM`, or `HH:MM:SS` when the second is not zero.
fn clock(h: u32, m: u32, s: u32) -> String {
    if s == 0 {
        format!("{h:02}:{m:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use crate::{CronSchedule, Zone};

    #[test]
    fn examples() {
        for (expr, text) in [
            // Times of day.
            ("0 30 9 * * MON-FRI", "At 09:30, Monday through Friday"),
            ("0 0 12 * * *", "At 12:00"),
            ("15 30 9 * * *", "At 09:30:15"),
            ("0 0 8,12,18 * * *", "At 08:00, 12:00 and 18:00"),
            ("0 0 */6 * * *", "At 00:00, 06:00, 12:00 and 18:00"),
            (
                "0 0 9-17/2 * * *",
                "At 09:00, 11:00, 13:00, 15:00 and 17:00",
            ),
            // Seconds, minutes, hours as patterns.
            ("* * * * * *", "Every second"),
            ("*/15 * * * * *", "Every 15 seconds"),
            ("10-20 * * * * *", "Seconds 10 through 20, every minute"),
            ("30 * * * * *", "At second 30, every minute"),
            ("0 * * * * *", "Every minute"),
            ("* * * * *", "Every minute"),
            ("0 */5 * * * *", "Every 5 minutes"),
            ("0 0,15,30,45 * * * *", "Every 15 minutes"),
            (
                "0 10-40/15 * * * *",
                "Every 15 minutes from minute 10 through 40",
            ),
            ("0 5/20 * * * *", "Every 20 minutes from minute 5"),
            ("0 1,5,10-12 * * * *", "Minutes 1, 5 and 10 through 12"),
            ("0 0 * * * *", "Every hour"),
            ("0 30 * * * *", "At 30 minutes past the hour"),
            ("15 1 * * * *", "At 1 minute and 15 seconds past the hour"),
            ("0 0 */2 * * *", "Every 2 hours"),
            // A step that does not divide its field's range is the list it fires at.
            ("*/45 * * * * *", "Seconds 0 and 45, every minute"),
            (
                "*/7 * * * * *",
                "Seconds 0, 7, 14, 21, 28, 35, 42, 49 and 56, every minute",
            ),
            ("0 */25 * * * *", "Minutes 0, 25 and 50"),
            ("50/4 * * * * *", "Seconds 50, 54 and 58, every minute"),
            ("0 0-50/25 * * * *", "Minutes 0, 25 and 50"),
            (
                "0 */15 */5 * * *",
                "Every 15 minutes, during hours 0, 5, 10, 15 and 20",
            ),
            ("*/30 * * * * *", "Every 30 seconds"),
            ("*/60 * * * * *", "Every minute"),
            ("0 */20 * * * *", "Every 20 minutes"),
            ("0 0 */3 * * *", "Every 3 hours"),
            ("0 0 1/3 * * *", "Every 3 hours from hour 1"),
            (
                "0 30 */2 * * *",
                "At 30 minutes past the hour, every 2 hours",
            ),
            (
                "0 30 9-17 * * MON-FRI",
                "At 30 minutes past the hour, between 09:00 and 17:59, Monday through Friday",
            ),
            (
                "0 */15 9 * * *",
                "Every 15 minutes, between 09:00 and 09:59",
            ),
            ("0 0 9-17 * * *", "Every hour, between 09:00 and 17:59"),
            // Days, weekdays and months.
            (
                "0 15 10 * * SAT,SUN",
                "At 10:15, only on Saturday and Sunday",
            ),
            ("0 0 0 * * FRI-SUN", "At 00:00, Friday through Sunday"),
            (
                "0 0 0 * * 1,3,5",
                "At 00:00, only on Monday, Wednesday and Friday",
            ),
            (
                "0 0 6 1-7 * *",
                "At 06:00, on days 1 through 7 of the month",
            ),
            ("0 0 23 28 * *", "At 23:00, on day 28 of the month"),
            (
                "0 30 2 */2 * *",
                "At 02:30, on every 2nd day from day 1 of the month",
            ),
            (
                "0 0 0 1 JAN,APR,JUL,OCT *",
                "At 00:00, on day 1 of the month, only in January, April, July and October",
            ),
            (
                "0 0 0 * JAN-MAR *",
                "At 00:00, only in January through March",
            ),
            (
                "0 0 0 13 * FRI",
                "At 00:00, on day 13 of the month, if it is Friday",
            ),
            // Macros.
            ("@hourly", "Every hour"),
            ("@daily", "At 00:00"),
            ("@weekly", "At 00:00, only on Sunday"),
            ("@monthly", "At 00:00, on day 1 of the month"),
            (
                "@yearly",
                "At 00:00, on day 1 of the month, only in January",
            ),
            // Quartz forms.
            ("0 0 0 L * *", "At 00:00, on the last day of the month"),
            (
                "0 0 0 L-1 * *",
                "At 00:00, on the day before the last day of the month",
            ),
            (
                "0 0 0 L-3 * *",
                "At 00:00, on the 3rd day before the last day of the month",
            ),
            (
                "0 0 9 15W * *",
                "At 09:00, on the weekday nearest day 15 of the month",
            ),
            ("0 0 9 LW * *", "At 09:00, on the last weekday of the month"),
            (
                "0 0 0 1,L * *",
                "At 00:00, on day 1 and the last day of the month",
            ),
            ("0 0 12 ? * 5L", "At 12:00, on the last Friday of the month"),
            (
                "0 0 9 ? * MON#2",
                "At 09:00, on the second Monday of the month",
            ),
            (
                "0 0 9 ? * MON#1,FRIL",
                "At 09:00, on the first Monday and the last Friday of the month",
            ),
            (
                "0 0 9 ? * SAT,1#1",
                "At 09:00, only on Saturday and the first Monday of the month",
            ),
            (
                "0 0 0 L * FRI",
                "At 00:00, on the last day of the month, if it is Friday",
            ),
        ] {
            let s = CronSchedule::parse(expr).expect("valid");
            assert_eq!(s.describe(), text, "{expr}");
        }
    }

    /// Every step of the second and minute fields: "every n" exactly when n divides 60, the
    /// values it fires at otherwise ("Seconds 0, 7, … and 56").
    #[test]
    fn a_step_reads_as_an_interval_only_when_it_divides_its_range() {
        for n in 2..=59 {
            let fired: Vec<String> = (0..60).step_by(n).map(|v| v.to_string()).collect();
            let (init, last) = fired.split_at(fired.len() - 1);
            let list = format!("{} and {}", init.join(", "), last[0]);
            for (expr, unit, plural) in [
                (format!("*/{n} * * * * *"), "second", "Seconds"),
                (format!("0 */{n} * * * *"), "minute", "Minutes"),
            ] {
                let text = CronSchedule::parse(&expr).expect("valid").describe();
                let expected = match 60 % n {
                    0 => format!("Every {n} {unit}s"),
                    _ => format!("{plural} {list}"),
                };
                assert!(text.starts_with(&expected), "{expr}: {text}");
            }
        }
    }

    #[test]
    fn zone_is_named_unless_utc() {
        let s = CronSchedule::parse("0 30 9 * * *").expect("valid");
        assert_eq!(s.describe(), "At 09:30");
        let berlin = s.in_zone(Zone::parse("Europe/Berlin").expect("zone"));
        assert_eq!(berlin.describe(), "At 09:30 (Europe/Berlin time)");
    }
}
