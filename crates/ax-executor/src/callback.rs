//! Reporting a result to ax by callback (`POST callbackUrl`), sent again with back-off while
//! ax cannot take it: ax counts a result sent twice once.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::backoff::{jitter, Backoff};
use crate::client::AxApi;
use crate::dispatch::Delivery;
use crate::outcome::{Outcome, Wire};

/// The callback's body: the result and which run and attempt it is for.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report<'a> {
    request_id: &'a str,
    callback_token: &'a str,
    attempt: u32,
    #[serde(flatten)]
    outcome: Wire<'a>,
}

/// What to do after an answer of ax's to a callback (protocol.md, "Callback").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Done,
    /// Sending it again would fail again (a wrong field or token, a run gone).
    Stop,
    Retry,
}

pub(crate) fn verdict(status: u16) -> Verdict {
    match status {
        200..=299 => Verdict::Done,
        429 | 500..=599 => Verdict::Retry,
        _ => Verdict::Stop,
    }
}

/// Sends the result of `request_id` for `delivery`'s attempt until ax takes it, refuses it,
/// or `backoff.give_up_after` has passed. Failures are logged, never returned: nothing more
/// can be done about them here (ax times the attempt out and delivers it again).
pub(crate) async fn report(
    api: &AxApi,
    backoff: &Backoff,
    request_id: &str,
    delivery: &Delivery,
    outcome: &Outcome,
) {
    let body = Report {
        request_id,
        callback_token: &delivery.callback_token,
        attempt: delivery.attempt,
        outcome: outcome.wire(),
    };
    let started = Instant::now();
    let mut tries = 0;
    loop {
        tries += 1;
        let why = match api.post(&delivery.callback_url, &body).await {
            Ok(answer) => match verdict(answer.status.as_u16()) {
                Verdict::Done => {
                    log::debug!(
                        "run {request_id} attempt {}: result reported",
                        delivery.attempt
                    );
                    return;
                }
                Verdict::Stop => {
                    log::error!(
                        "run {request_id} attempt {}: ax refused the result ({}): {}",
                        delivery.attempt,
                        answer.status,
                        answer.reason()
                    );
                    return;
                }
                Verdict::Retry => format!("{}: {}", answer.status, answer.reason()),
            },
            Err(err) => err.to_string(),
        };
        let Some(wait) = backoff.next(tries, started.elapsed(), jitter()) else {
            log::error!(
                "run {request_id} attempt {}: gave up reporting the result after {tries} tries \
                 in {:?}: {why}",
                delivery.attempt,
                started.elapsed()
            );
            return;
        };
        log::warn!(
            "run {request_id} attempt {}: result not taken ({why}); again in {:?}",
            delivery.attempt,
            round(wait)
        );
        tokio::time::sleep(wait).await;
    }
}

fn round(wait: Duration) -> Duration {
    Duration::from_millis(wait.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_as_the_protocol_says() {
        for (status, want) in [
            (200, Verdict::Done),
            (400, Verdict::Stop),
            (403, Verdict::Stop),
            (404, Verdict::Stop),
            (409, Verdict::Stop),
            (429, Verdict::Retry),
            (500, Verdict::Retry),
            (503, Verdict::Retry),
        ] {
            assert_eq!(verdict(status), want, "{status}");
        }
    }

    #[test]
    fn the_body_carries_the_run_the_attempt_and_the_result() {
        let outcome = Outcome::failed("UPSTREAM_DOWN", "billing API 503");
        let body = Report {
            request_id: "r-1",
            callback_token: "tok",
            attempt: 2,
            outcome: outcome.wire(),
        };
        assert_eq!(
            serde_json::to_value(&body).ok(),
            Some(
                serde_json::json!({"requestId": "r-1", "callbackToken": "tok", "attempt": 2,
                "status": "FAILED", "code": "UPSTREAM_DOWN", "message": "billing API 503"})
            )
        );
    }
}
