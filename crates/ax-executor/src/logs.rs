//! A run's log lines and progress, buffered and sent to ax in batches (every 0.5 s or 100
//! lines, and always before the result), so a handler logging in a loop does not make a call
//! per line. A failing post never fails the run: tried a few times, then dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Notify;

use crate::client::AxApi;
use crate::dispatch::Delivery;

/// A batch goes out once this many lines wait…
const BATCH_LINES: usize = 100;
/// …or this long after the last one.
const BATCH_EVERY: Duration = Duration::from_millis(500);
/// Most lines ax takes in one call.
const MAX_LINES_PER_POST: usize = 1000;
/// Waits before the retries of a batch ax did not take.
const RETRY_WAITS: [Duration; 2] = [Duration::from_millis(250), Duration::from_secs(1)];

#[derive(Default)]
struct Pending {
    lines: Vec<String>,
    progress: Option<u8>,
}

/// The log of one run.
pub(crate) struct RunLog {
    request_id: String,
    delivery: Arc<Mutex<Delivery>>,
    api: Arc<AxApi>,
    pending: Mutex<Pending>,
    /// Wakes the flusher early: a full batch, or the run ended.
    wake: Notify,
    ended: AtomicBool,
    /// ax answered 409: the run is closed past its grace, so nothing more is sent.
    refused: AtomicBool,
    /// One post at a time, so batches arrive in order.
    sending: tokio::sync::Mutex<()>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LogBody<'a> {
    callback_token: &'a str,
    attempt: u32,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    lines: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<u8>,
}

impl RunLog {
    pub fn new(request_id: String, delivery: Arc<Mutex<Delivery>>, api: Arc<AxApi>) -> RunLog {
        RunLog {
            request_id,
            delivery,
            api,
            pending: Mutex::new(Pending::default()),
            wake: Notify::new(),
            ended: AtomicBool::new(false),
            refused: AtomicBool::new(false),
            sending: tokio::sync::Mutex::new(()),
        }
    }

    fn with_pending<R>(&self, f: impl FnOnce(&mut Pending) -> R) -> R {
        f(&mut self.pending.lock().unwrap_or_else(PoisonError::into_inner))
    }

    pub fn push(&self, lines: impl IntoIterator<Item = String>) {
        let waiting = self.with_pending(|pending| {
            pending.lines.extend(lines);
            pending.lines.len()
        });
        if waiting >= BATCH_LINES {
            self.wake.notify_one();
        }
    }

    pub fn progress(&self, percent: u8) {
        self.with_pending(|pending| pending.progress = Some(percent.min(100)));
    }

    /// Sends what waits, every `BATCH_EVERY` or when a batch is full, until [`RunLog::end`].
    pub async fn keep_flushing(self: Arc<Self>) {
        while !self.ended.load(Ordering::Acquire) {
            let _ = tokio::time::timeout(BATCH_EVERY, self.wake.notified()).await;
            self.flush().await;
        }
    }

    /// Stops the flusher and sends what is left: the run's lines reach ax before its result.
    pub async fn end(&self) {
        self.ended.store(true, Ordering::Release);
        self.wake.notify_one();
        self.flush().await;
    }

    /// Sends every waiting line and the latest progress.
    pub async fn flush(&self) {
        let _in_order = self.sending.lock().await;
        let Pending { lines, progress } = self.with_pending(std::mem::take);
        if self.refused.load(Ordering::Acquire) || (lines.is_empty() && progress.is_none()) {
            return;
        }
        let delivery = self
            .delivery
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut chunks: Vec<&[String]> = lines.chunks(MAX_LINES_PER_POST).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        let last = chunks.len() - 1;
        for (i, chunk) in chunks.into_iter().enumerate() {
            let body = LogBody {
                callback_token: &delivery.callback_token,
                attempt: delivery.attempt,
                lines: chunk,
                // The latest progress rides with the last chunk.
                progress: if i == last { progress } else { None },
            };
            if !self.post(&delivery.log_url, &body).await {
                return;
            }
        }
    }

    /// Posts one batch, trying again a couple of times; whether to go on with the next.
    async fn post(&self, url: &str, body: &LogBody<'_>) -> bool {
        let mut waits = RETRY_WAITS.iter();
        loop {
            let why = match self.api.post(url, body).await {
                Ok(answer) if answer.status.is_success() => return true,
                Ok(answer) if answer.status.as_u16() == 409 => {
                    log::debug!("run {}: ax takes no more log lines", self.request_id);
                    self.refused.store(true, Ordering::Release);
                    return false;
                }
                Ok(answer) if answer.status.is_client_error() && answer.status.as_u16() != 429 => {
                    log::warn!(
                        "run {}: ax refused {} log lines ({}): {}",
                        self.request_id,
                        body.lines.len(),
                        answer.status,
                        answer.reason()
                    );
                    return true;
                }
                Ok(answer) => format!("{}: {}", answer.status, answer.reason()),
                Err(err) => err.to_string(),
            };
            let Some(wait) = waits.next() else {
                log::warn!(
                    "run {}: dropped {} log lines ax did not take: {why}",
                    self.request_id,
                    body.lines.len()
                );
                return true;
            };
            tokio::time::sleep(*wait).await;
        }
    }
}
