use chrono::{Datelike, NaiveDate};

use super::*;

fn day(text: &str) -> NaiveDate {
    text.parse().expect("a date")
}

fn days(texts: &[&str]) -> Vec<NaiveDate> {
    texts.iter().map(|text| day(text)).collect()
}

/// A calendar of the events given, each a list of property lines, CRLF-ended as RFC 5545 has it.
fn ics(events: &[&[&str]]) -> String {
    let mut lines = vec!["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//ax//test//EN"];
    for event in events {
        lines.push("BEGIN:VEVENT");
        lines.extend_from_slice(event);
        lines.push("END:VEVENT");
    }
    lines.push("END:VCALENDAR");
    lines.join("\r\n") + "\r\n"
}

fn read_events(events: &[&[&str]], until_year: i32) -> Result<Calendar, IcsError> {
    read(&ics(events), until_year)
}

/// The dates of one event, read through `until_year`.
fn dates_of(event: &[&str], until_year: i32) -> Vec<NaiveDate> {
    let calendar = read_events(&[event], until_year).expect("read");
    assert!(calendar.ranges.is_empty(), "{:?}", calendar.ranges);
    calendar.dates.into_iter().collect()
}

fn error_of(event: &[&str]) -> String {
    read_events(&[event], 2030)
        .expect_err("refused")
        .to_string()
}

// ---- Lines ----

#[test]
fn folded_lines_are_joined_with_crlf_or_lf_and_a_space_or_a_tab() {
    let text = concat!(
        "BEGIN:VCALENDAR\nBEGIN:VEVENT\r\n",
        "SUMMARY:Christ\r\n mas\n\t Day\n",
        "DTSTART;VALUE=\n DATE:2026\n 1225\n",
        "END:VEVENT\nEND:VCALENDAR",
    );
    let calendar = read(text, 2026).expect("read");
    assert_eq!(
        calendar.dates.into_iter().collect::<Vec<_>>(),
        days(&["2026-12-25"])
    );
    let lines = lines::content_lines(text).expect("lines");
    assert_eq!(lines[2].value, "Christmas Day");
    assert_eq!(
        lines[3].line, 6,
        "a line is numbered by its first physical line"
    );
}

#[test]
fn parameters_may_be_quoted_and_names_are_case_insensitive() {
    let text = "begin:vcalendar\ndtStart;tzid=\"Europe/Berlin;x:y\";Value=DATE:20261225";
    let lines = lines::content_lines(text).expect("lines");
    assert_eq!(lines[1].name, "DTSTART");
    assert_eq!(lines[1].param("TZID"), Some("Europe/Berlin;x:y"));
    assert_eq!(lines[1].param("VALUE"), Some("DATE"));
    assert_eq!(lines[1].value, "20261225");
}

#[test]
fn a_line_that_is_no_content_line_is_refused_with_its_number() {
    let text = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nthis is not ical\nEND:VEVENT\nEND:VCALENDAR\n";
    let err = read(text, 2030).expect_err("refused");
    assert_eq!(err.line(), Some(3), "{err}");
    assert!(
        err.to_string().starts_with("line 3: not a content line"),
        "{err}"
    );
}

#[test]
fn a_file_that_is_not_icalendar_or_has_no_event_is_refused() {
    let err = read("{\"dates\": []}", 2030).expect_err("refused");
    assert!(
        err.to_string()
            .contains("does not start with BEGIN:VCALENDAR"),
        "{err}"
    );
    assert_eq!(read(&ics(&[]), 2030), Err(IcsError::NoEvents));
    assert_eq!(read("", 2030), Err(IcsError::NoEvents));
    let open = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:20261225\n";
    let err = read(open, 2030).expect_err("refused");
    assert_eq!(err.to_string(), "line 2: BEGIN:VEVENT has no END:VEVENT");
    let crossed = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nBEGIN:VALARM\nEND:VEVENT\nEND:VCALENDAR\n";
    let err = read(crossed, 2030).expect_err("refused");
    assert!(
        err.to_string()
            .starts_with("line 4: END:VEVENT, but BEGIN:VALARM at line 3"),
        "{err}"
    );
}

// ---- Single events ----

#[test]
fn a_one_day_event_is_a_date_and_a_longer_one_a_range_ending_the_day_before_dtend() {
    let calendar = read_events(
        &[
            &[
                "SUMMARY:Christmas",
                "DTSTART;VALUE=DATE:20261225",
                "DTEND;VALUE=DATE:20261226",
            ],
            &[
                "SUMMARY:Closed",
                "DTSTART;VALUE=DATE:20261224",
                "DTEND;VALUE=DATE:20270102",
            ],
            &["SUMMARY:No end", "DTSTART;VALUE=DATE:20260501"],
            &["SUMMARY:Date form", "DTSTART:20261003"],
            &[
                "SUMMARY:Fair",
                "DTSTART;VALUE=DATE:20260301",
                "DURATION:P3D",
            ],
            &[
                "SUMMARY:Week",
                "DTSTART;VALUE=DATE:20260801",
                "DURATION:P1W",
            ],
        ],
        2030,
    )
    .expect("read");
    assert_eq!(
        calendar.dates.into_iter().collect::<Vec<_>>(),
        days(&["2026-05-01", "2026-10-03", "2026-12-25"])
    );
    let range = |from, to| DateRange {
        from: day(from),
        to: day(to),
    };
    assert_eq!(
        calendar.ranges,
        vec![
            range("2026-03-01", "2026-03-03"),
            range("2026-08-01", "2026-08-07"),
            range("2026-12-24", "2027-01-01"),
        ]
    );
}

#[test]
fn days_outside_the_years_read_are_left_out_and_ranges_cut() {
    let calendar = read_events(
        &[
            &["DTSTART;VALUE=DATE:19691230", "DTEND;VALUE=DATE:19700103"],
            &["DTSTART;VALUE=DATE:19650101"],
            &["DTSTART;VALUE=DATE:20301230", "DURATION:P5D"],
            &["DTSTART;VALUE=DATE:20310101"],
        ],
        2030,
    )
    .expect("read");
    assert!(calendar.dates.is_empty(), "{:?}", calendar.dates);
    let range = |from, to| DateRange {
        from: day(from),
        to: day(to),
    };
    assert_eq!(
        calendar.ranges,
        vec![
            range("1970-01-01", "1970-01-02"),
            range("2030-12-30", "2030-12-31")
        ]
    );
}

#[test]
fn an_event_at_a_time_of_day_is_refused_naming_it_and_its_line() {
    let event: &[&str] = &[
        "SUMMARY:Team lunch",
        "DTSTART;TZID=Europe/Berlin:20261225T120000",
    ];
    let err = read_events(&[event], 2030).expect_err("refused");
    assert_eq!(err.line(), Some(6));
    assert_eq!(
        err.to_string(),
        "line 6: event `Team lunch`: an event at a time of day (DTSTART:20261225T120000) is not \
         supported: only all-day events (DTSTART;VALUE=DATE:YYYYMMDD) are read as days off"
    );
    let utc = error_of(&["SUMMARY:Deploy", "DTSTART:20261225T120000Z"]);
    assert!(
        utc.contains("event `Deploy`: an event at a time of day"),
        "{utc}"
    );
}

#[test]
fn an_end_that_is_not_a_later_day_is_refused() {
    let same = error_of(&[
        "SUMMARY:Zero",
        "DTSTART;VALUE=DATE:20260118",
        "DTEND;VALUE=DATE:20260118",
    ]);
    assert!(
        same.contains("DTEND 2026-01-18 is not after DTSTART 2026-01-18"),
        "{same}"
    );
    let timed = error_of(&[
        "SUMMARY:Mixed",
        "DTSTART;VALUE=DATE:20260101",
        "DTEND:20260101T050001Z",
    ]);
    assert!(
        timed.contains(
            "DTEND:20260101T050001Z has a time of day, but the event's DTSTART is a date"
        ),
        "{timed}"
    );
    let both = error_of(&["DTSTART:20260101", "DTEND:20260102", "DURATION:P1D"]);
    assert!(
        both.starts_with("line 7: an event without SUMMARY: both DTEND and DURATION"),
        "{both}"
    );
    let hours = error_of(&["DTSTART:20260101", "DURATION:PT24H"]);
    assert!(
        hours.contains("DURATION:PT24H (hours, minutes or seconds) is not supported"),
        "{hours}"
    );
    let negative = error_of(&["DTSTART:20260101", "DURATION:-P1D"]);
    assert!(
        negative.contains("DURATION:-P1D is not a number of days"),
        "{negative}"
    );
    let missing = error_of(&["SUMMARY:Nothing"]);
    assert!(
        missing.starts_with("line 4: event `Nothing`: the event has no DTSTART"),
        "{missing}"
    );
    let twice = error_of(&["DTSTART:20260101", "DTSTART:20260102"]);
    assert!(
        twice.starts_with(
            "line 6: an event without SUMMARY: DTSTART is given twice (first at line 5)"
        ),
        "{twice}"
    );
}

#[test]
fn a_summary_is_unescaped_in_messages() {
    let err = error_of(&["SUMMARY:Fronleichnam (BW\\, BY)", "DTSTART:20260604T000000"]);
    assert!(err.contains("event `Fronleichnam (BW, BY)`"), "{err}");
}

// ---- Yearly rules ----

#[test]
fn a_yearly_rule_repeats_the_start_day_through_the_last_year_read() {
    let event: &[&str] = &["DTSTART;VALUE=DATE:20261225", "RRULE:FREQ=YEARLY"];
    assert_eq!(
        dates_of(event, 2029),
        days(&["2026-12-25", "2027-12-25", "2028-12-25", "2029-12-25"])
    );
    let month: &[&str] = &["DTSTART;VALUE=DATE:19500101", "RRULE:FREQ=YEARLY;BYMONTH=1"];
    let read = dates_of(month, 2027);
    assert_eq!(
        read.len(),
        2027 - 1970 + 1,
        "from 1970 on: the earlier years are left out"
    );
    assert_eq!(read.first(), Some(&day("1970-01-01")));
    assert_eq!(read.last(), Some(&day("2027-01-01")));
}

#[test]
fn interval_count_and_until_bound_a_rule() {
    let every_other: &[&str] = &[
        "DTSTART;VALUE=DATE:20260704",
        "RRULE:FREQ=YEARLY;INTERVAL=2",
    ];
    assert_eq!(
        dates_of(every_other, 2031),
        days(&["2026-07-04", "2028-07-04", "2030-07-04"])
    );
    let counted: &[&str] = &["DTSTART;VALUE=DATE:20260704", "RRULE:FREQ=YEARLY;COUNT=3"];
    assert_eq!(
        dates_of(counted, 2040),
        days(&["2026-07-04", "2027-07-04", "2028-07-04"])
    );
    let until_date: &[&str] = &[
        "DTSTART;VALUE=DATE:20260704",
        "RRULE:FREQ=YEARLY;UNTIL=20280704",
    ];
    assert_eq!(
        dates_of(until_date, 2040),
        days(&["2026-07-04", "2027-07-04", "2028-07-04"])
    );
    let until_time: &[&str] = &[
        "DTSTART;VALUE=DATE:20260704",
        "RRULE:FREQ=YEARLY;UNTIL=20280703T230000Z",
    ];
    assert_eq!(
        dates_of(until_time, 2040),
        days(&["2026-07-04", "2027-07-04"])
    );
    let both = error_of(&[
        "DTSTART:20260704",
        "RRULE:FREQ=YEARLY;COUNT=2;UNTIL=20300101",
    ]);
    assert!(both.contains("both COUNT and UNTIL"), "{both}");
}

#[test]
fn a_counted_rule_counts_the_occurrences_before_1970_too() {
    let event: &[&str] = &["DTSTART;VALUE=DATE:19680501", "RRULE:FREQ=YEARLY;COUNT=4"];
    assert_eq!(dates_of(event, 2030), days(&["1970-05-01", "1971-05-01"]));
}

#[test]
fn month_days_count_from_the_end_when_negative() {
    let last_of_february: &[&str] = &[
        "DTSTART;VALUE=DATE:20270228",
        "RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=-1",
    ];
    assert_eq!(
        dates_of(last_of_february, 2029),
        days(&["2027-02-28", "2028-02-29", "2029-02-28"])
    );
    let leap_day: &[&str] = &["DTSTART;VALUE=DATE:20240229", "RRULE:FREQ=YEARLY"];
    assert_eq!(
        dates_of(leap_day, 2032),
        days(&["2024-02-29", "2028-02-29", "2032-02-29"])
    );
    let quarter_ends: &[&str] = &[
        "DTSTART;VALUE=DATE:20260331",
        "RRULE:FREQ=YEARLY;BYMONTH=3,6,9,12;BYMONTHDAY=-1",
    ];
    assert_eq!(
        dates_of(quarter_ends, 2026),
        days(&["2026-03-31", "2026-06-30", "2026-09-30", "2026-12-31"])
    );
}

#[test]
fn weekdays_are_counted_within_the_month() {
    let thanksgiving: &[&str] = &[
        "DTSTART;VALUE=DATE:20261126",
        "RRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=4TH",
    ];
    assert_eq!(
        dates_of(thanksgiving, 2029),
        days(&["2026-11-26", "2027-11-25", "2028-11-23", "2029-11-22"])
    );
    let memorial: &[&str] = &[
        "DTSTART;VALUE=DATE:20260525",
        "RRULE:FREQ=YEARLY;BYMONTH=5;BYDAY=-1MO",
    ];
    assert_eq!(
        dates_of(memorial, 2028),
        days(&["2026-05-25", "2027-05-31", "2028-05-29"])
    );
    let fifth: &[&str] = &[
        "DTSTART;VALUE=DATE:20260529",
        "RRULE:FREQ=YEARLY;BYMONTH=5;BYDAY=5FR",
    ];
    assert_eq!(
        dates_of(fifth, 2030),
        days(&["2026-05-29", "2030-05-31"]),
        "the other Mays have 4 Fridays"
    );
    let every_sunday: &[&str] = &[
        "DTSTART;VALUE=DATE:20261206",
        "RRULE:FREQ=YEARLY;BYMONTH=12;BYDAY=SU",
    ];
    assert_eq!(
        dates_of(every_sunday, 2026),
        days(&["2026-12-06", "2026-12-13", "2026-12-20", "2026-12-27"])
    );
    let friday_13th: &[&str] = &[
        "DTSTART;VALUE=DATE:20260213",
        "RRULE:FREQ=YEARLY;BYMONTHDAY=13;BYDAY=FR",
    ];
    assert_eq!(
        dates_of(friday_13th, 2026),
        days(&["2026-02-13", "2026-03-13", "2026-11-13"])
    );
}

#[test]
fn exdates_leave_occurrences_out() {
    let event: &[&str] = &[
        "DTSTART;VALUE=DATE:20260101",
        "RRULE:FREQ=YEARLY",
        "EXDATE;VALUE=DATE:20270101,20290101",
        "EXDATE:20260101",
    ];
    assert_eq!(dates_of(event, 2029), days(&["2028-01-01"]));
    let timed = error_of(&[
        "DTSTART;VALUE=DATE:20260101",
        "RRULE:FREQ=YEARLY",
        "EXDATE:20270101T000000Z",
    ]);
    assert!(
        timed.contains("EXDATE:20270101T000000Z has a time of day"),
        "{timed}"
    );
}

#[test]
fn an_event_with_a_recurrence_id_moves_one_occurrence_or_cancels_it() {
    let calendar = read_events(
        &[
            &[
                "UID:xmas",
                "SUMMARY:Christmas",
                "DTSTART;VALUE=DATE:20261225",
                "RRULE:FREQ=YEARLY",
            ],
            &[
                "UID:xmas",
                "SUMMARY:Christmas (substitute)",
                "RECURRENCE-ID;VALUE=DATE:20271225",
                "DTSTART;VALUE=DATE:20271227",
                "DTEND;VALUE=DATE:20271229",
            ],
            &[
                "UID:xmas",
                "RECURRENCE-ID;VALUE=DATE:20281225",
                "STATUS:CANCELLED",
                "DTSTART;VALUE=DATE:20281225",
            ],
        ],
        2029,
    )
    .expect("read");
    assert_eq!(
        calendar.dates.into_iter().collect::<Vec<_>>(),
        days(&["2026-12-25", "2029-12-25"])
    );
    assert_eq!(
        calendar.ranges,
        vec![DateRange {
            from: day("2027-12-27"),
            to: day("2027-12-28")
        }]
    );
    let range = error_of(&[
        "UID:a",
        "DTSTART:20260101",
        "RECURRENCE-ID;RANGE=THISANDFUTURE:20260101",
    ]);
    assert!(
        range.contains("RECURRENCE-ID;RANGE=THISANDFUTURE is not supported"),
        "{range}"
    );
    let no_uid = error_of(&["DTSTART:20260101", "RECURRENCE-ID:20260101"]);
    assert!(no_uid.contains("RECURRENCE-ID without a UID"), "{no_uid}");
}

#[test]
fn a_cancelled_event_gives_no_days() {
    let event: &[&str] = &[
        "DTSTART;VALUE=DATE:20260101",
        "RRULE:FREQ=YEARLY",
        "STATUS:CANCELLED",
    ];
    let calendar = read_events(&[event, &["DTSTART:20260505"]], 2030).expect("read");
    assert_eq!(
        calendar.dates.into_iter().collect::<Vec<_>>(),
        days(&["2026-05-05"])
    );
}

#[test]
fn rules_not_read_are_refused_naming_the_event_the_line_and_the_part() {
    let cases: &[(&str, &str)] = &[
        (
            "RRULE:FREQ=MONTHLY;BYDAY=1MO",
            "FREQ=MONTHLY is not supported: only yearly rules",
        ),
        ("RRULE:FREQ=WEEKLY", "FREQ=WEEKLY is not supported"),
        (
            "RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU;BYSETPOS=1",
            "BYSETPOS in an RRULE is not supported",
        ),
        (
            "RRULE:FREQ=YEARLY;BYWEEKNO=20",
            "BYWEEKNO in an RRULE is not supported",
        ),
        (
            "RRULE:FREQ=YEARLY;BYYEARDAY=100",
            "BYYEARDAY in an RRULE is not supported",
        ),
        (
            "RRULE:FREQ=YEARLY;BYDAY=20MO",
            "BYDAY=20… without BYMONTH (a weekday counted through the year) is not supported",
        ),
        (
            "RRULE:FREQ=YEARLY;BYMONTH=5;BYDAY=1MO;BYMONTHDAY=1",
            "BYDAY with an ordinal together with BYMONTHDAY",
        ),
        (
            "RRULE:FREQ=YEARLY;BYMONTH=5;BYDAY=6MO",
            "BYDAY=6…: a month has at most 5 of a weekday",
        ),
        (
            "RRULE:FREQ=YEARLY;BYMONTH=13",
            "BYMONTH: `13` is out of range",
        ),
        (
            "RRULE:FREQ=YEARLY;BYMONTHDAY=0",
            "BYMONTHDAY: `0` is out of range",
        ),
        ("RRULE:FREQ=YEARLY;BYDAY=XX", "BYDAY: `XX` is not a weekday"),
        (
            "RRULE:FREQ=YEARLY;INTERVAL=0",
            "INTERVAL=0 is not a whole number from 1",
        ),
        ("RRULE:FREQ=YEARLY;UNTIL=2030", "UNTIL=2030 is not a date"),
        (
            "RRULE:FREQ=YEARLY;FREQ=YEARLY",
            "the RRULE gives FREQ twice",
        ),
        ("RRULE:BYMONTH=1", "the RRULE has no FREQ"),
        ("RDATE;VALUE=DATE:20270101", "RDATE is not supported"),
        ("EXRULE:FREQ=YEARLY", "EXRULE is not supported"),
    ];
    for (line, expected) in cases {
        let err = read_events(
            &[&["SUMMARY:Holiday", "DTSTART;VALUE=DATE:20260101", line]],
            2030,
        )
        .expect_err(line);
        assert_eq!(err.line(), Some(7), "{line}: {err}");
        let text = err.to_string();
        assert!(
            text.starts_with("line 7: event `Holiday`: "),
            "{line}: {text}"
        );
        assert!(text.contains(expected), "{line}: {text}");
    }
}

#[test]
fn a_rule_giving_more_days_than_a_calendar_holds_is_refused_early() {
    let event: &[&str] = &[
        "DTSTART;VALUE=DATE:20260101",
        "RRULE:FREQ=YEARLY;BYDAY=MO,TU,WE,TH,FR",
    ];
    assert_eq!(
        read_events(&[event], 9999),
        Err(IcsError::TooMany {
            what: "dates",
            limit: MAX_DATES,
            until_year: 9999
        })
    );
    let text = read_events(&[event], 9999)
        .expect_err("refused")
        .to_string();
    assert!(text.ends_with("read fewer years"), "{text}");
    assert_eq!(
        dates_of(event, 2026).len(),
        261,
        "one year of weekdays fits"
    );
}

#[test]
fn the_last_year_is_within_the_years_a_calendar_holds() {
    let event: &[&str] = &["DTSTART:20260101"];
    assert_eq!(read_events(&[event], 10_000), Err(IcsError::Year(10_000)));
    assert_eq!(read_events(&[event], 1969), Err(IcsError::Year(1969)));
    assert!(read_events(&[event], 9999).is_ok());
}

#[test]
fn alarms_and_other_components_inside_an_event_are_not_its_properties() {
    let event: &[&str] = &[
        "SUMMARY:Alarmed",
        "DTSTART;VALUE=DATE:20261224",
        "BEGIN:VALARM",
        "TRIGGER:20261224T045500Z",
        "DURATION:PT15M",
        "END:VALARM",
    ];
    assert_eq!(dates_of(event, 2030), days(&["2026-12-24"]));
}

// ---- A real holiday calendar ----

// The bank holidays of England and Wales 2021-2030, by KR304, as Thunderbird publishes them:
// https://www.thunderbird.net/media/caldata/UKHolidays-EnglandWales.ics, from
// https://github.com/thunderbird/thunderbird-website (media/caldata/UKHolidays-EnglandWales.ics,
// commit eadad0f166762a7293f717ae5474b40bb9383696), copied byte for byte. That repository has
// no licence file; its sources are under the MPL 2.0, and Mozilla offers these calendars to
// anyone to download or subscribe to. See tests/fixtures/calendars/README.md.
const UK_ENGLAND_WALES: &str =
    include_str!("../../../../../tests/fixtures/calendars/uk-england-wales-holidays.ics");

fn in_year(calendar: &Calendar, year: i32) -> Vec<NaiveDate> {
    calendar
        .dates
        .iter()
        .copied()
        .filter(|day| day.year() == year)
        .collect()
}

#[test]
fn the_bank_holidays_of_england_and_wales_are_read_as_thunderbird_shows_them() {
    let calendar = read(UK_ENGLAND_WALES, 2030).expect("read");
    assert!(calendar.ranges.is_empty());
    assert_eq!(
        calendar.dates.len(),
        80,
        "8 bank holidays a year, 2021 to 2030"
    );
    // Easter's days come as moved occurrences (RECURRENCE-ID) of a yearly rule; the Mondays
    // of May and August from BYDAY=1MO and BYDAY=-1MO; Christmas and Boxing Day 2027 fall on
    // a weekend and are moved to their substitutes.
    assert_eq!(
        in_year(&calendar, 2027),
        days(&[
            "2027-01-01",
            "2027-03-26",
            "2027-03-29",
            "2027-05-03",
            "2027-05-31",
            "2027-08-30",
            "2027-12-27",
            "2027-12-28",
        ])
    );
    assert_eq!(
        in_year(&calendar, 2026),
        days(&[
            "2026-01-01",
            "2026-04-03",
            "2026-04-06",
            "2026-05-04",
            "2026-05-25",
            "2026-08-31",
            "2026-12-25",
            "2026-12-28",
        ])
    );
    for moved in ["2027-04-02", "2027-04-05", "2027-12-25", "2027-12-26"] {
        assert!(!calendar.holds(day(moved)), "{moved} was moved");
    }
    assert!(
        calendar.holds(day("2021-04-02")),
        "the rule's own start, Good Friday 2021"
    );
    assert!(
        calendar.holds(day("2030-04-19")),
        "Good Friday 2030, the last moved one"
    );
    assert_eq!(calendar.check(), Ok(()));
}

#[test]
fn a_real_calendar_ends_where_its_rules_end_or_at_the_last_year_read() {
    let later = read(UK_ENGLAND_WALES, 2040).expect("read");
    assert_eq!(later.dates.len(), 80, "its rules end in 2030 (UNTIL)");
    assert_eq!(later.dates.last(), Some(&day("2030-12-26")));
    let sooner = read(UK_ENGLAND_WALES, 2026).expect("read");
    assert_eq!(sooner.dates.len(), 48);
    assert_eq!(sooner.dates.last(), Some(&day("2026-12-28")));
}
