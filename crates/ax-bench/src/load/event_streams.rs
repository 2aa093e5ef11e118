//! `--event-streams N`: consoles left open on `GET /api/events` during the window, so a run
//! measures what live pages cost the fire path.

use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use actix_web::web::Bytes;
use anyhow::{anyhow, bail};
use futures_util::{Stream, StreamExt};

/// The open streams and what they received.
pub struct EventStreams {
    tasks: Vec<actix_rt::task::JoinHandle<()>>,
    events: Rc<AtomicU64>,
}

impl EventStreams {
    /// Opens `count` streams, spread over the ax processes at `bases`.
    pub async fn open(bases: &[String], count: u32) -> anyhow::Result<EventStreams> {
        let events = Rc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for n in 0..count as usize {
            let base = &bases[n % bases.len()];
            let body = connect(base).await?;
            tasks.push(actix_rt::spawn(read(body, events.clone())));
        }
        Ok(EventStreams { tasks, events })
    }

    /// Closes the streams; the events they received.
    pub fn close(self) -> u64 {
        for task in &self.tasks {
            task.abort();
        }
        self.events.load(Ordering::Relaxed)
    }
}

type Body = Pin<Box<dyn Stream<Item = Result<Bytes, awc::error::PayloadError>>>>;

async fn connect(base: &str) -> anyhow::Result<Body> {
    // No client timeout: it would also bound the stream.
    let client = awc::Client::builder().disable_timeout().finish();
    let response = tokio::time::timeout(
        Duration::from_secs(10),
        client.get(format!("{base}/api/events")).send(),
    )
    .await
    .map_err(|_| anyhow!("GET {base}/api/events: no answer in 10 s"))?
    .map_err(|err| anyhow!("GET {base}/api/events: {err}"))?;
    if response.status() != 200 {
        bail!("GET {base}/api/events: HTTP {}", response.status());
    }
    Ok(Box::pin(response))
}

/// Counts the stream's events (each starts with an `event:` line) until it ends.
async fn read(mut body: Body, events: Rc<AtomicU64>) {
    // The end of the last chunk, when it cut a line.
    let mut partial = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        partial.extend_from_slice(&chunk);
        let Some(end) = partial.iter().rposition(|&b| b == b'\n') else {
            continue;
        };
        events.fetch_add(event_lines(&partial[..end]), Ordering::Relaxed);
        partial.drain(..=end);
    }
}

fn event_lines(lines: &[u8]) -> u64 {
    lines
        .split(|&b| b == b'\n')
        .filter(|line| line.starts_with(b"event:"))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::event_lines;

    #[test]
    fn events_are_counted_by_their_first_line() {
        let stream = b"retry: 2000\n\nevent: run\ndata: {}\n\n: keep-alive\nevent: log\ndata: {}";
        assert_eq!(event_lines(stream), 2);
    }
}
