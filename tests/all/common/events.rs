//! A client of `GET /api/events`: reads the stream and splits it into server-sent events.

use std::pin::Pin;
use std::time::{Duration, Instant};

use actix_web::web::Bytes;
use futures_util::{Stream, StreamExt};
use serde_json::Value;

type Body = Pin<Box<dyn Stream<Item = Result<Bytes, awc::error::PayloadError>>>>;

/// One event: its name (`run`, `log`) and its data.
#[derive(Debug, Clone)]
pub struct Event {
    pub name: String,
    pub data: Value,
}

/// An open event stream.
pub struct Events {
    body: Body,
    buffer: String,
    /// The stream's headers, lower-cased names.
    pub content_type: String,
    pub cache_control: String,
}

impl Events {
    /// Opens `{base}{path}`; the status and, when 200, the stream.
    pub async fn open(base: &str, path: &str) -> (u16, Option<Events>) {
        // No client timeout: it would also bound the stream's body.
        let client = awc::Client::builder().disable_timeout().finish();
        let response = client
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("an answer");
        let status = response.status().as_u16();
        if status != 200 {
            return (status, None);
        }
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let events = Events {
            content_type: header("content-type"),
            cache_control: header("cache-control"),
            body: Box::pin(response),
            buffer: String::new(),
        };
        (status, Some(events))
    }

    /// The next event, or `None` when none came within `timeout` or the stream ended.
    pub async fn next(&mut self, timeout: Duration) -> Option<Event> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(event) = self.take_event() {
                return Some(event);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            match actix_rt::time::timeout(left, self.body.next()).await {
                Ok(Some(Ok(bytes))) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
    }

    /// The events until one matches `want` (that one last), or panics after `timeout`.
    pub async fn until(&mut self, timeout: Duration, want: impl Fn(&Event) -> bool) -> Vec<Event> {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.next(left).await {
                Some(event) => {
                    let done = want(&event);
                    seen.push(event);
                    if done {
                        return seen;
                    }
                }
                None => break,
            }
        }
        panic!("no wanted event within {timeout:?}; saw {seen:?}");
    }

    /// Splits off the first complete event; comments and `retry:` lines are skipped.
    fn take_event(&mut self) -> Option<Event> {
        while let Some(end) = self.buffer.find("\n\n") {
            let block: String = self.buffer.drain(..end + 2).collect();
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|line| line.strip_prefix(name).map(str::trim).map(String::from))
            };
            if let (Some(name), Some(data)) = (field("event:"), field("data:")) {
                let data = serde_json::from_str(&data).unwrap_or(Value::Null);
                return Some(Event { name, data });
            }
        }
        None
    }
}
