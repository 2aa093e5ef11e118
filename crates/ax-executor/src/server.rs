//! The HTTP side: one handler for every request, taking a dispatch through its checks
//! (path, method, size, signature, JSON, shutdown, dedupe) to a run and its reply.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actix_web::http::{header, Method, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;
use tokio::sync::oneshot;

use crate::dedupe::Claim;
use crate::dispatch::Dispatch;
use crate::handler::Handler;
use crate::lifecycle::{Answer, Runs};
use crate::outcome::Outcome;
use crate::signature;

/// The protocol version this SDK speaks.
pub const PROTOCOL_VERSION: &str = "1";
const PROTOCOL_HEADER: &str = "X-Ax-Protocol";
/// On the reply to a delivery of a run taken already.
const DUPLICATE_HEADER: header::HeaderName = header::HeaderName::from_static("x-ax-duplicate");
pub(crate) const IDEMPOTENT_HEADER: &str = "X-Ax-Idempotent";
/// Largest dispatch body taken (ax sends at most 64 KiB of params).
pub(crate) const MAX_BODY_BYTES: usize = 1024 * 1024;

/// A path's handler and how long its dispatch's reply waits for it.
pub(crate) struct Route {
    pub handler: Arc<dyn Handler>,
    pub reply_within: Duration,
}

/// What every request is handled with.
pub(crate) struct State {
    pub secret: Vec<u8>,
    pub routes: HashMap<String, Route>,
    pub runs: Arc<Runs>,
    /// Past the drain delay: dispatches that still arrive (on a kept-alive connection) get 503.
    pub closed: Arc<AtomicBool>,
}

fn refuse(status: StatusCode, error: impl std::fmt::Display) -> HttpResponse {
    HttpResponse::build(status).json(json!({ "error": error.to_string() }))
}

fn result(outcome: &Outcome) -> HttpResponse {
    HttpResponse::Ok().json(outcome.wire())
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() as i64)
}

/// Every request comes here.
pub(crate) async fn dispatch(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<State>,
) -> HttpResponse {
    let Some(route) = state.routes.get(req.path()) else {
        return refuse(StatusCode::NOT_FOUND, "no handler at this path");
    };
    if req.method() != Method::POST {
        let mut reply = refuse(StatusCode::METHOD_NOT_ALLOWED, "dispatches are POSTed");
        reply
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
        return reply;
    }
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<usize>().ok());
    if announced.is_some_and(|length| length > MAX_BODY_BYTES) {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, "the body is over 1 MiB");
    }
    let body = match payload.to_bytes_limited(MAX_BODY_BYTES).await {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => return refuse(StatusCode::PAYLOAD_TOO_LARGE, "the body is over 1 MiB"),
        Err(err) => return refuse(StatusCode::BAD_REQUEST, err),
    };
    let header_text = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
    let signed = signature::verify(
        &state.secret,
        header_text("X-Ax-Timestamp"),
        header_text("X-Ax-Signature"),
        &body,
        now(),
    );
    if let Err(err) = signed {
        log::warn!("{} {}: dispatch refused: {err}", req.method(), req.path());
        return refuse(StatusCode::UNAUTHORIZED, err);
    }
    if let Some(version) = header_text(PROTOCOL_HEADER).filter(|v| v.trim() != PROTOCOL_VERSION) {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!("protocol version {version} is not known here (only {PROTOCOL_VERSION})"),
        );
    }
    let dispatch: Dispatch = match serde_json::from_slice(&body) {
        Ok(dispatch) => dispatch,
        Err(err) => return refuse(StatusCode::BAD_REQUEST, format!("not a dispatch: {err}")),
    };
    if state.closed.load(Ordering::Acquire) {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "the executor is shutting down",
        );
    }
    run(&state, route, dispatch).await
}

/// A signed dispatch: claimed, then run, answered again, or joined to its run in flight.
async fn run(state: &State, route: &Route, dispatch: Dispatch) -> HttpResponse {
    let request_id = dispatch.request_id.clone();
    let claim = match state.runs.store().claim(&request_id).await {
        Ok(claim) => claim,
        Err(err) => {
            log::error!("run {request_id}: {err}");
            return refuse(StatusCode::SERVICE_UNAVAILABLE, err);
        }
    };
    let duplicate = |mut reply: HttpResponse| {
        reply
            .headers_mut()
            .insert(DUPLICATE_HEADER, header::HeaderValue::from_static("true"));
        reply
    };
    match claim {
        Claim::Done(outcome) => {
            log::info!(
                "run {request_id} attempt {}: done already",
                dispatch.attempt
            );
            duplicate(result(&outcome))
        }
        Claim::Running => {
            let here = state.runs.redeliver(&dispatch);
            log::info!(
                "run {request_id} attempt {}: still at work{}",
                dispatch.attempt,
                if here { "" } else { " (elsewhere)" }
            );
            duplicate(HttpResponse::Accepted().finish())
        }
        Claim::New => {
            let wait = !route.reply_within.is_zero();
            match state.runs.start(route.handler.clone(), dispatch, wait) {
                None => {
                    // The run threads are gone: shutting down. Forget the claim.
                    if let Err(err) = state.runs.store().release(&request_id).await {
                        log::error!("run {request_id}: {err}");
                    }
                    refuse(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the executor is shutting down",
                    )
                }
                Some(None) => HttpResponse::Accepted().finish(),
                Some(Some(answer)) => reply_within(answer, route.reply_within).await,
            }
        }
    }
}

/// The run's result if it comes within `within`, else `202` (it then comes by callback).
async fn reply_within(mut answer: oneshot::Receiver<Answer>, within: Duration) -> HttpResponse {
    let answer = match tokio::time::timeout(within, &mut answer).await {
        Ok(answer) => answer.ok(),
        Err(_) => {
            // Closed before looking, so that a result sent from now on fails to arrive here
            // and goes by callback instead: never both lost.
            answer.close();
            answer.try_recv().ok()
        }
    };
    match answer {
        Some(Answer::Done(outcome)) => result(&outcome),
        Some(Answer::Shutdown) => refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "the executor shut down before the run ended",
        ),
        None => HttpResponse::Accepted().finish(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_web::test]
    async fn a_result_sent_in_time_is_the_reply_else_202() {
        let (tx, rx) = oneshot::channel();
        assert!(tx.send(Answer::Done(Outcome::from("42 rows"))).is_ok());
        let reply = reply_within(rx, Duration::from_millis(10)).await;
        assert_eq!(reply.status(), StatusCode::OK);

        let (tx, rx) = oneshot::channel::<Answer>();
        let reply = reply_within(rx, Duration::from_millis(10)).await;
        assert_eq!(reply.status(), StatusCode::ACCEPTED);
        // The waiter gave up: the run's end learns it and calls back.
        assert!(tx.send(Answer::Done(Outcome::success())).is_err());

        let (tx, rx) = oneshot::channel();
        assert!(tx.send(Answer::Shutdown).is_ok());
        let reply = reply_within(rx, Duration::from_millis(10)).await;
        assert_eq!(reply.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
}
