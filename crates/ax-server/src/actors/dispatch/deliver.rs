//! Delivering one attempt: POSTed signed to its handler or group member, within its timeout,
//! and the reply turned into the event to record.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::value::RawValue;

use super::job::DispatchJob;
use super::reply::{classify_reply, failed, not_allowed, Reply};
use crate::actors::resolver::NotAllowed;
use crate::actors::store::RunEvent;
use ax_core::dispatch::routing::Exchange;
use ax_core::metrics::{metrics, DispatchResult};
use ax_core::run::{
    Event, Outcome, Report, RequestId, TaskId, BAD_PARAMS_CODE, BAD_REPLY_CODE, BAD_URI_MESSAGE,
    BODY_NOT_ENCODED_MESSAGE, CONNECT_ERROR_CODE, NO_REPLY_MESSAGE, PARAMS_NOT_JSON_MESSAGE,
    TIMEOUT_CODE,
};
use ax_core::security::{
    callback_token, sign_dispatch, Allowlist, PROTOCOL_HEADER, PROTOCOL_VERSION, SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
};
use ax_core::time::clock::{rfc3339, SharedClock};

/// What every dispatch of this process is signed with, may go to, and names as the way back.
#[derive(Clone)]
pub struct Envelope {
    /// Key of signatures and callback tokens.
    pub secret: Arc<[u8]>,
    pub allowlist: Allowlist,
    /// Every dispatch's `callbackUrl`, under ax's API as executors reach it
    /// (`executors.callback_url`).
    callback_url: Arc<str>,
    /// Where each run's `logUrl` starts: `…/api/instances/`, the request id and `/log` follow.
    runs_url: Arc<str>,
}

impl Envelope {
    /// The envelope of `security`'s dispatches, answered at `reply_to`: the URLs every
    /// dispatch shares are made once here, not per dispatch.
    pub fn new(security: &ax_core::security::Security, reply_to: &str) -> Envelope {
        Envelope {
            secret: security.secret.clone(),
            allowlist: security.allowlist.clone(),
            callback_url: format!("{reply_to}/api/callback").into(),
            runs_url: format!("{reply_to}/api/instances/").into(),
        }
    }
}

/// Longest reply body read from a handler.
const MAX_REPLY_BYTES: usize = 64 * 1024;

/// The body POSTed to a handler.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DispatchBody<'a> {
    task_id: TaskId,
    request_id: &'a RequestId,
    params: &'a RawValue,
    scheduled_at: String,
    attempt: i32,
    /// The result callback must carry this token (see `security::callback_token`).
    callback_token: String,
    callback_url: &'a str,
    log_url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    shard_index: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shard_total: Option<i32>,
}

/// What sending an attempt came to.
pub(super) enum Delivered {
    /// The reply (or its absence) as the event to record, the output the reply carried, and
    /// what the exchange says of the member.
    Event(RunEvent, Option<String>, Exchange),
    /// No connection could be made, so nothing was sent: why, and when it was tried.
    NotSent {
        why: String,
        tried_at: DateTime<Utc>,
    },
}

/// POSTs one attempt and turns the reply into the event to record, timed by the cluster's
/// clock (another process compares its deadline).
pub(super) async fn deliver(
    client: &awc::Client,
    envelope: &Envelope,
    job: &DispatchJob,
    clock: &SharedClock,
) -> Delivered {
    let started = clock.now();
    // An attempt gone to another member counted its lag when it was first sent.
    if job.attempt == 1 && job.tried.is_empty() {
        let lag = (started - job.due_at)
            .num_microseconds()
            .unwrap_or(i64::MAX);
        metrics().trigger_lag.observe(lag as f64 / 1e6);
    }
    let deadline = started + chrono::Duration::milliseconds(job.timeout_ms);
    let (Reply { outcome, output }, exchange) = match post(client, envelope, job, deadline).await {
        Ok(exchanged) => exchanged,
        Err(why) => {
            return Delivered::NotSent {
                why,
                tried_at: started,
            }
        }
    };
    let (result, code) = match &outcome {
        Outcome::Accepted { .. } => (DispatchResult::Accepted, None),
        Outcome::Succeeded { code, .. } => (DispatchResult::Success, code.as_deref()),
        Outcome::Failed { code, .. } => (DispatchResult::Failed, code.as_deref()),
    };
    metrics().dispatch_result(result);
    // A failure is logged once recorded, with what follows it (see `record`).
    if result != DispatchResult::Failed {
        log::info!(
            "task {} request {} attempt {}: {result:?}{}",
            job.task_id,
            job.request_id,
            job.attempt,
            code.map(|c| format!(" ({c})")).unwrap_or_default()
        );
    }
    Delivered::Event(
        RunEvent {
            request_id: job.request_id.clone(),
            task_id: Some(job.task_id),
            event: Event::Report(Report {
                attempt: Some(job.attempt),
                outcome,
                at: clock.now(),
                sent_at: Some(started),
                member: job.member.as_deref().map(str::to_string),
            }),
            // The dispatcher needs no exact outcome; which replies can be written without a read
            // is the lifecycle's to say (`run::blind`: not a failure, whose retry is decided on
            // the run as it is).
            blind: true,
        },
        output,
        exchange,
    )
}

/// POSTs one attempt, signed: `X-Ax-Timestamp` and `X-Ax-Signature` over exactly the bytes
/// sent. The handler's host is checked against the allowlist in force now, not only the one
/// the task was stored under: as written here, and as resolved by `GuardedResolver`.
/// Answers the reply with what the exchange says of the executor (see `routing::Exchange`);
/// `Err`: no connection could be made, so nothing was sent (why).
async fn post(
    client: &awc::Client,
    envelope: &Envelope,
    job: &DispatchJob,
    deadline: DateTime<Utc>,
) -> Result<(Reply, Exchange), String> {
    let Envelope {
        secret, allowlist, ..
    } = envelope;
    let unsent = |outcome: Outcome| Ok((outcome.into(), Exchange::Inconclusive));
    let Ok(uri) = job.handler_url.parse::<awc::http::Uri>() else {
        return unsent(failed(CONNECT_ERROR_CODE, BAD_URI_MESSAGE));
    };
    let host = uri.host().unwrap_or_default();
    if !allowlist.allows(host) {
        return unsent(not_allowed(format!(
            "host `{host}` is not allowed by security.handler_allowlist"
        )));
    }
    let Ok(params) = RawValue::from_string(job.params.to_string()) else {
        return unsent(failed(BAD_PARAMS_CODE, PARAMS_NOT_JSON_MESSAGE));
    };
    let body = DispatchBody {
        task_id: job.task_id,
        request_id: &job.request_id,
        params: &params,
        scheduled_at: rfc3339(job.scheduled_at),
        attempt: job.attempt,
        callback_token: callback_token(secret, job.request_id.as_str()),
        callback_url: &envelope.callback_url,
        log_url: format!("{}{}/log", envelope.runs_url, job.request_id),
        shard_index: job.shard.map(|shard| shard.index),
        shard_total: job.shard.map(|shard| shard.total),
    };
    let Ok(body) = serde_json::to_vec(&body) else {
        return unsent(failed(BAD_PARAMS_CODE, BODY_NOT_ENCODED_MESSAGE));
    };
    let timestamp = Utc::now().timestamp();
    let timeout = Duration::from_millis(job.timeout_ms.max(1) as u64);
    let signature = sign_dispatch(secret, timestamp, &body);
    let body = actix_web::web::Bytes::from(body);
    let request = || {
        client
            .post(uri.clone())
            .timeout(timeout)
            .content_type("application/json")
            .insert_header((PROTOCOL_HEADER, PROTOCOL_VERSION))
            .insert_header(("X-Ax-Request-Id", job.request_id.to_string()))
            .insert_header((TIMESTAMP_HEADER, timestamp.to_string()))
            .insert_header((SIGNATURE_HEADER, signature.clone()))
    };
    // `timeoutMs` bounds the whole exchange: connect, send, headers and body.
    let exchange = async {
        let mut tries = 0;
        let mut response = loop {
            tries += 1;
            match request().send_body(body.clone()).await {
                Ok(response) => break response,
                Err(awc::error::SendRequestError::Timeout) => return None,
                Err(awc::error::SendRequestError::Connect(awc::error::ConnectError::Resolver(
                    err,
                ))) if err.is::<NotAllowed>() => return Some(unsent(not_allowed(err.to_string()))),
                // A kept-alive connection the executor closed as it was reused (awc calls it
                // "connector has been disconnected"): the request was not answered, and a
                // new connection is tried at once rather than charging the executor with a
                // failed attempt. A server that closes every connection unanswered still
                // fails the attempt after a few tries.
                Err(awc::error::SendRequestError::Connect(
                    awc::error::ConnectError::Disconnected,
                )) if tries < CLOSED_CONNECTION_TRIES => {
                    log::debug!(
                        "task {} request {}: connection closed by the executor before its reply, \
                         sending again",
                        job.task_id,
                        job.request_id
                    );
                }
                // No connection (refused, reset, unreachable): the request was not sent.
                Err(err @ awc::error::SendRequestError::Connect(_)) => {
                    return Some(Err(err.to_string()))
                }
                Err(err) => {
                    let exchange = match closed_before_reply(&err) {
                        true => Exchange::Unreachable(err.to_string()),
                        false => Exchange::Inconclusive,
                    };
                    let outcome = failed(CONNECT_ERROR_CODE, err.to_string());
                    return Some(Ok((outcome.into(), exchange)));
                }
            }
        };
        // A status line came: whatever follows is the job's outcome, not the member's health.
        let status = response.status().as_u16();
        let reply = match read_capped(&mut response).await {
            Ok(bytes) => classify_reply(status, &bytes, deadline),
            Err(err) => failed(BAD_REPLY_CODE, err.to_string()).into(),
        };
        Some(Ok((reply, Exchange::Replied)))
    };
    // No reply within `timeoutMs` is the job's slowness (a connect timeout of the client's own
    // shows as a connect error above).
    tokio::time::timeout(timeout, exchange)
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| unsent(failed(TIMEOUT_CODE, NO_REPLY_MESSAGE)))
}

/// Whether a request that was (perhaps) sent failed in transport: the connection was reset or
/// closed before a reply came. Not retried on another member (the job may have run), but it
/// counts against the member as a refused connection does.
fn closed_before_reply(err: &awc::error::SendRequestError) -> bool {
    use awc::error::SendRequestError as E;
    match err {
        E::Send(_) | E::Connect(_) => true,
        E::Response(parse) => matches!(
            parse,
            actix_http::error::ParseError::Io(_) | actix_http::error::ParseError::Incomplete
        ),
        _ => false,
    }
}

/// Tries of a request whose connection the executor closed unanswered.
const CLOSED_CONNECTION_TRIES: usize = 4;

/// The reply body up to `MAX_REPLY_BYTES`; the rest is not read.
async fn read_capped<S>(response: &mut awc::ClientResponse<S>) -> Result<Vec<u8>, String>
where
    S: futures_util::Stream<Item = Result<actix_web::web::Bytes, awc::error::PayloadError>> + Unpin,
{
    use futures_util::StreamExt;
    let mut body = Vec::new();
    while let Some(chunk) = response.next().await {
        let chunk = chunk.map_err(|err| err.to_string())?;
        let room = MAX_REPLY_BYTES - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() == MAX_REPLY_BYTES {
            break;
        }
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_reset_or_closed_before_the_reply_is_a_transport_failure() {
        use actix_http::error::ParseError;
        use awc::error::SendRequestError as E;
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(closed_before_reply(&E::Send(reset)));
        assert!(closed_before_reply(&E::Response(ParseError::Incomplete)));
        let closed = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        assert!(closed_before_reply(&E::Response(ParseError::Io(closed))));
        // A reply that came but is not HTTP, or a request timeout: the job's, not the member's.
        assert!(!closed_before_reply(&E::Response(ParseError::Status)));
        assert!(!closed_before_reply(&E::Timeout));
    }
}
