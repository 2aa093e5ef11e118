//! `ax cron next --calendar`: a preview with days off, asked of the server that holds the
//! calendars (without `--calendar`, `ax cron next` needs no server).

use std::process::ExitCode;

use serde_json::Value;

use crate::api::http::{request, Call};
use crate::api::output::{self, text};
use crate::Connection;

/// What `ax cron next` previews.
#[derive(Debug, Clone)]
pub struct CronNext {
    pub expr: String,
    pub from: Option<String>,
    pub count: u32,
    pub tz: Option<String>,
    /// Calendars' names, and what a fire on their days does.
    pub calendars: Vec<String>,
    pub policy: Option<String>,
}

/// Runs `ax cron next` with calendars: the fires a line each (moved ones saying from where),
/// then how many fell on days off.
pub fn cron_next(conn: Connection, asked: CronNext) -> ExitCode {
    crate::finish(async move {
        let call = Call::new("GET", "/api/cron/next".into())
            .with("expr", Some(asked.expr.clone()))
            .with("tz", asked.tz.clone())
            .with("from", asked.from.clone())
            .with("count", Some(asked.count.to_string()))
            .with("calendar", Some(asked.calendars.join(",")))
            .with("policy", asked.policy.clone());
        let body = request(&conn, &call).await?.body;
        let local = asked.tz.is_some();
        output::print(conn.format, &body, |body, _| fire_lines(body, local))
    })
}

/// A fire a line, in UTC or (`local`) with its zone's offset; a moved one with the day off it
/// left and its calendar. The fires on days off close the list, a line each, marked `-`.
fn fire_lines(body: &Value, local: bool) -> String {
    let time = |fire: &Value| text(&fire[if local { "local" } else { "utc" }]);
    let mut out = String::new();
    for fire in body["times"].as_array().into_iter().flatten() {
        out.push_str(&time(fire));
        if let Some(day) = fire["movedFrom"].as_str() {
            out.push_str(&format!("  moved from {day} ({})", text(&fire["calendar"])));
        }
        out.push('\n');
    }
    for fire in body["excluded"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "- {}  day off ({})\n",
            time(fire),
            text(&fire["calendar"])
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn moved_fires_say_from_where_and_days_off_close_the_list() {
        let body = json!({
            "times": [
                {"utc": "2026-12-24T08:00:00.000Z", "local": "2026-12-24T09:00:00.000+01:00",
                 "movedFrom": "2026-12-25", "calendar": "holidays"},
                {"utc": "2026-12-28T08:00:00.000Z", "local": "2026-12-28T09:00:00.000+01:00"},
            ],
            "excluded": [{"utc": "2026-12-25T08:00:00.000Z",
                "local": "2026-12-25T09:00:00.000+01:00", "calendar": "holidays"}],
        });
        assert_eq!(
            super::fire_lines(&body, false),
            "2026-12-24T08:00:00.000Z  moved from 2026-12-25 (holidays)\n\
             2026-12-28T08:00:00.000Z\n\
             - 2026-12-25T08:00:00.000Z  day off (holidays)\n"
        );
        assert!(super::fire_lines(&body, true).starts_with("2026-12-24T09:00:00.000+01:00"));
    }
}
