//! What an alert says, per channel kind: the webhook's JSON body (or the channel's own
//! template over it, so one kind serves Teams, DingTalk, PagerDuty or Alertmanager), Slack's
//! message format, and an email's subject, text and HTML. Pure: the sender posts what this
//! makes.

use chrono::{DateTime, SecondsFormat, Utc};
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;
use serde_json::{json, Value};

use super::rule::AlertEvent;
use crate::text::one_line;

/// Most characters of the message an alert's one line (`text`, an email's subject) carries.
const MESSAGE_CHARS: usize = 200;

/// One alert, as every channel is told it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Alert {
    /// Stable across resends (also `X-Ax-Alert-Id`): receivers de-duplicate by it.
    pub id: String,
    pub event: AlertEvent,
    /// What it is about: `etl/report` for a task, a member's URL, a process's instance id.
    pub subject: String,
    pub task_id: Option<i64>,
    pub scene: Option<String>,
    /// The run's page in the console, when it is about a run.
    pub link: Option<String>,
    pub request_id: Option<String>,
    pub code: Option<String>,
    pub message: Option<String>,
    /// Events within the window that made it.
    pub count: u32,
    /// Events folded into the silence before it, the first at `folded_since`.
    pub folded: u32,
    #[serde(serialize_with = "opt_time")]
    pub folded_since: Option<DateTime<Utc>>,
    #[serde(serialize_with = "time")]
    pub at: DateTime<Utc>,
}

fn rfc3339(at: &DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn time<S: serde::Serializer>(at: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(at))
}

fn opt_time<S: serde::Serializer>(at: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => s.serialize_str(&rfc3339(at)),
        None => s.serialize_none(),
    }
}

/// A channel's template that cannot be used: minijinja's words, with the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template: {0}")]
pub struct TemplateError(String);

impl Alert {
    /// One line: `FAILED etl/report: HTTP_500 (3 more folded since …)`; for an alert about
    /// several members or processes, its message: `MEMBER_UNHEALTHY 37 members of billing
    /// unhealthy: m1, m2, …`.
    pub fn headline(&self) -> String {
        let mut line = match (&self.message, self.tells_group()) {
            (Some(message), true) => format!("{} {message}", self.event),
            _ => format!("{} {}", self.event, self.subject),
        };
        if let Some(code) = &self.code {
            line.push_str(&format!(": {code}"));
        }
        if self.count > 1 && self.task_id.is_some() {
            line.push_str(&format!(", {} times", self.count));
        }
        if let (n @ 1.., Some(since)) = (self.folded, self.folded_since) {
            line.push_str(&format!(" ({n} more folded since {})", rfc3339(&since)));
        }
        line
    }

    /// Whether it tells of several members or processes at once: its message names them, and
    /// is its headline.
    fn tells_group(&self) -> bool {
        self.task_id.is_none() && self.count > 1 && self.message.is_some()
    }

    /// The alert in one line, enough to act on from a phone's notification: the headline,
    /// the message's first 200 characters (on one line) and the run's link, apart by ` | `:
    /// `FAILED billing/charge-cards: E_UPSTREAM | upstream answered 503 |
    /// https://ax.example.com/console/runs/…`. The webhook's and Slack's `text`; the email's
    /// subject.
    pub fn text(&self) -> String {
        let mut parts = vec![self.headline()];
        let message = self.message.as_deref().filter(|_| !self.tells_group());
        parts.extend(
            message
                .map(|message| one_line(message, MESSAGE_CHARS))
                .filter(|message| !message.is_empty()),
        );
        parts.extend(self.link.clone());
        parts.join(" | ")
    }

    /// The webhook's default body: the alert as JSON, with its one line as `text`.
    pub fn webhook_body(&self) -> Value {
        let mut body = serde_json::to_value(self).unwrap_or(Value::Null);
        body["text"] = json!(self.text());
        body
    }

    /// The webhook's body from `template` (minijinja, over the default body's fields; an
    /// unknown field is an error, not an empty string). Every value is written JSON-escaped,
    /// as inside a JSON string: a task's name or an executor's message cannot end the string
    /// it is put in and add keys of its own. Only `| safe` writes a value as it is (and
    /// `| tojson` a whole JSON value, quotes included).
    pub fn templated(&self, template: &str) -> Result<String, TemplateError> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_formatter(|out, _, value| {
            if value.is_safe() {
                return write!(out, "{value}").map_err(minijinja::Error::from);
            }
            let quoted = serde_json::to_string(&value.to_string()).unwrap_or_default();
            let inside = quoted
                .strip_prefix('"')
                .and_then(|q| q.strip_suffix('"'))
                .unwrap_or_default();
            out.write_str(inside).map_err(minijinja::Error::from)
        });
        env.render_str(template, self.webhook_body())
            .map_err(|err| TemplateError(err.to_string()))
    }

    /// A Slack incoming-webhook message: coloured by the event, linked to the run. Text from
    /// tasks and executors is escaped as Slack asks (`&`, `<`, `>`), so a message cannot
    /// mention `<!channel>` or forge a link.
    pub fn slack_body(&self) -> Value {
        let title = match &self.link {
            Some(link) => format!("<{link}|{}>", slack_escape(&self.headline())),
            None => slack_escape(&self.headline()),
        };
        let mut fields = vec![json!({"title": "Event", "value": self.event, "short": true})];
        if let Some(scene) = &self.scene {
            fields.push(json!({"title": "Scene", "value": slack_escape(scene), "short": true}));
        }
        if let Some(message) = &self.message {
            let message = slack_escape(message);
            fields.push(json!({"title": "Message", "value": message, "short": false}));
        }
        json!({
            "text": slack_escape(&self.text()),
            "attachments": [{
                "color": colour(self.event),
                "title": title,
                "fields": fields,
                "footer": format!("ax alert {}", self.id),
                "ts": self.at.timestamp(),
            }],
        })
    }

    /// An email's subject (the alert's one line), plain text and HTML.
    pub fn email(&self) -> (String, String, String) {
        let subject = format!("[ax] {}", self.text());
        let lines = self.lines();
        let text = lines
            .iter()
            .map(|(key, value)| format!("{key}: {value}"))
            .collect::<Vec<_>>()
            .join("\n");
        let rows: String = lines
            .iter()
            .map(|(key, value)| format!("<tr><th>{key}</th><td>{}</td></tr>", escape(value)))
            .collect();
        let link = self.link.as_deref().map_or(String::new(), |link| {
            format!("<p><a href=\"{}\">Open the run</a></p>", escape(link))
        });
        let html = format!(
            "<h2>{}</h2><table>{rows}</table>{link}",
            escape(&self.headline())
        );
        (subject, text, html)
    }

    /// The alert's facts, in order, for text bodies.
    fn lines(&self) -> Vec<(&'static str, String)> {
        let mut lines = vec![
            ("Event", self.event.to_string()),
            ("Subject", self.subject.clone()),
        ];
        let optional = [
            ("Scene", self.scene.clone()),
            ("Code", self.code.clone()),
            ("Message", self.message.clone()),
            ("Run", self.link.clone()),
        ];
        lines.extend(optional.into_iter().filter_map(|(k, v)| Some((k, v?))));
        lines.push(("Count", self.count.to_string()));
        if self.folded > 0 {
            lines.push(("Folded", self.folded.to_string()));
        }
        lines.push(("At", rfc3339(&self.at)));
        lines.push(("Alert id", self.id.clone()));
        lines
    }
}

/// Slack's attachment colour: red for failures, amber for the late and the skipped, green
/// for a resolution (and a test).
fn colour(event: AlertEvent) -> &'static str {
    match event {
        AlertEvent::Resolved | AlertEvent::Test => "good",
        AlertEvent::Missed | AlertEvent::Skipped | AlertEvent::Lag => "warning",
        _ => "danger",
    }
}

/// Text in a Slack message: `&`, `<` and `>` escaped, the only characters Slack reads as
/// markup (links, mentions).
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// HTML text: Slack's three and quotes escaped.
fn escape(text: &str) -> String {
    slack_escape(text).replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(event: AlertEvent) -> Alert {
        let at = DateTime::from_timestamp(1_800_000_000, 0).expect("time");
        Alert {
            id: "5c0c6ad3-2f41-4d8e-9e2b-1c7f3a9b6d20".into(),
            event,
            subject: "etl/report".into(),
            task_id: Some(7),
            scene: Some("etl".into()),
            link: Some("http://127.0.0.1:8901/console/runs/abc".into()),
            request_id: Some("abc".into()),
            code: Some("HTTP_500".into()),
            message: Some("boom <b>".into()),
            count: 1,
            folded: 3,
            folded_since: Some(at - chrono::Duration::minutes(30)),
            at,
        }
    }

    #[test]
    fn the_headline_says_what_how_often_and_what_was_folded() {
        assert_eq!(
            alert(AlertEvent::Failed).headline(),
            "FAILED etl/report: HTTP_500 (3 more folded since 2027-01-15T07:30:00.000Z)"
        );
        let plain = Alert {
            code: None,
            folded: 0,
            count: 2,
            ..alert(AlertEvent::Missed)
        };
        assert_eq!(plain.headline(), "MISSED etl/report, 2 times");
        let members = Alert {
            task_id: None,
            scene: None,
            code: None,
            folded: 0,
            count: 37,
            subject: "members of billing".into(),
            message: Some("37 members of billing unhealthy: m1, m2, m3, m4, m5, …".into()),
            ..alert(AlertEvent::MemberUnhealthy)
        };
        assert_eq!(
            members.headline(),
            "MEMBER_UNHEALTHY 37 members of billing unhealthy: m1, m2, m3, m4, m5, …"
        );
    }

    #[test]
    fn the_webhook_body_carries_every_field_in_camel_case() {
        let body = alert(AlertEvent::Failed).webhook_body();
        for key in [
            "id",
            "event",
            "subject",
            "taskId",
            "scene",
            "link",
            "requestId",
            "code",
            "message",
            "count",
            "folded",
            "foldedSince",
            "at",
            "text",
        ] {
            assert!(body.get(key).is_some(), "{key} in {body}");
        }
        assert_eq!(body["event"], "FAILED");
        assert_eq!(body["at"], "2027-01-15T08:00:00.000Z");
    }

    #[test]
    fn a_template_shapes_the_body_and_an_unknown_field_is_an_error() {
        let pagerduty = r#"{"routing_key": "K", "event_action": "{{ "resolve" if event == "RESOLVED" else "trigger" }}", "dedup_key": {{ subject|tojson }}, "payload": {"summary": {{ text|tojson }}, "source": "ax", "severity": "error"}}"#;
        let body: Value = serde_json::from_str(
            &alert(AlertEvent::Failed)
                .templated(pagerduty)
                .expect("renders"),
        )
        .expect("JSON");
        assert_eq!(body["event_action"], "trigger");
        assert_eq!(body["dedup_key"], "etl/report");
        let resolved = alert(AlertEvent::Resolved)
            .templated(pagerduty)
            .expect("renders");
        assert!(
            resolved.contains(r#""event_action": "resolve""#),
            "{resolved}"
        );
        let err = alert(AlertEvent::Failed)
            .templated("{{ nosuch }}")
            .expect_err("strict");
        assert!(err.to_string().contains("template"), "{err}");
        assert!(alert(AlertEvent::Failed).templated("{{ unclosed").is_err());
    }

    #[test]
    fn the_one_line_carries_the_code_the_message_and_the_link() {
        let failed = Alert {
            folded: 0,
            ..alert(AlertEvent::Failed)
        };
        let line =
            "FAILED etl/report: HTTP_500 | boom <b> | http://127.0.0.1:8901/console/runs/abc";
        assert_eq!(failed.text(), line);
        assert_eq!(failed.webhook_body()["text"], line);
        assert_eq!(failed.email().0, format!("[ax] {line}"));
        assert_eq!(
            failed.slack_body()["text"],
            line.replace("<b>", "&lt;b&gt;")
        );
        // A long message on several lines: one line, its first 200 characters.
        let long = Alert {
            message: Some(format!("upstream said:\n\t{}", "x".repeat(300))),
            ..failed.clone()
        };
        let text = long.text();
        let message = text.split(" | ").nth(1).expect("the message");
        assert!(message.starts_with("upstream said: xxx"), "{text}");
        assert_eq!(message.chars().count(), MESSAGE_CHARS + 1);
        assert!(message.ends_with('…') && !text.contains('\n'), "{text}");
        // Without a message or a run, the headline alone; a group's message is told once.
        let bare = Alert {
            message: None,
            link: None,
            ..failed.clone()
        };
        assert_eq!(bare.text(), bare.headline());
        let members = Alert {
            task_id: None,
            link: None,
            count: 2,
            message: Some("2 members of billing unhealthy: m1, m2".into()),
            ..failed
        };
        assert_eq!(members.text(), members.headline());
    }

    #[test]
    fn template_values_are_json_escaped_unless_marked_safe() {
        let hostile = Alert {
            subject: r#"x", "injected": "yes"#.into(),
            message: Some("\"}, \"evil\": \"1\nline two \\".into()),
            ..alert(AlertEvent::Failed)
        };
        let naive =
            r#"{"subject": "{{ subject }}", "message": "{{ message }}", "count": {{ count }}}"#;
        let rendered = hostile.templated(naive).expect("renders");
        let body: Value = serde_json::from_str(&rendered).expect("still JSON");
        let keys: Vec<&String> = body.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["count", "message", "subject"], "{rendered}");
        assert_eq!(body["subject"], hostile.subject);
        assert_eq!(body["message"].as_str(), hostile.message.as_deref());
        assert_eq!(body["count"], 1);
        // `tojson` writes a whole value, quotes included, not escaped twice.
        let whole = hostile
            .templated(r#"{"text": {{ text | tojson }}}"#)
            .expect("renders");
        let body: Value = serde_json::from_str(&whole).expect("JSON");
        assert_eq!(body["text"], hostile.text());
        // `safe` writes a value as it is: the one way to insert raw text.
        let raw = hostile.templated("{{ subject | safe }}").expect("renders");
        assert_eq!(raw, hostile.subject);
    }

    #[test]
    fn slack_colours_by_event_and_links_the_run() {
        let failed = alert(AlertEvent::Failed).slack_body();
        assert_eq!(failed["attachments"][0]["color"], "danger");
        assert!(failed["attachments"][0]["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("<http://127.0.0.1:8901/console/runs/abc|FAILED")));
        assert_eq!(
            alert(AlertEvent::Resolved).slack_body()["attachments"][0]["color"],
            "good"
        );
        assert_eq!(
            alert(AlertEvent::Missed).slack_body()["attachments"][0]["color"],
            "warning"
        );
    }

    #[test]
    fn an_email_has_text_and_escaped_html() {
        let (subject, text, html) = alert(AlertEvent::Failed).email();
        assert!(subject.starts_with("[ax] FAILED etl/report"));
        assert!(
            text.contains("Message: boom <b>") && text.contains("Folded: 3"),
            "{text}"
        );
        assert!(
            html.contains("boom &lt;b&gt;") && !html.contains("<b>"),
            "{html}"
        );
        assert!(html.contains("href=\"http://127.0.0.1:8901/console/runs/abc\""));
    }
}
