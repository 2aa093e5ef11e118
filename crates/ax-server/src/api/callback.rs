//! `POST /api/callback`: an executor reports a run's result.

use actix_web::{web, HttpResponse};
use serde_json::{json, Map, Value};

use super::json::JsonBody;
use super::{validate, ApiState};
use crate::error::ApiError;
use ax_core::metrics::metrics;
use ax_core::run::{failed_attempt, Decided, Outcome, Refusal, Report, ReportedStatus, RequestId};
use ax_core::security::{callback_token, same_secret};
use ax_core::text::{result_code, result_message, Unfit};
use ax_store::rows::models::{MAX_CODE_CHARS, MAX_MESSAGE_CHARS};

const FIELDS: &[&str] = &[
    "requestId",
    "callbackToken",
    "status",
    "code",
    "message",
    "retry",
    "stopRetry",
    "attempt",
    "output",
];

/// `{requestId, callbackToken, status: "SUCCESS"|"FAILED", code?, message?, stopRetry?,
/// attempt?, output?}` (`code` a string or an integer; `output` kept with the attempt's log) →
/// 200 `{requestId, status, applied, message}` where `status` is the run's status after the
/// call. A result belongs to the attempt it names, or without `attempt` to the one dispatched
/// last; it counts once (a repeat, or a result for a final run, changes nothing: `applied:
/// false`); a result for an attempt never dispatched is 409. `"stopRetry": true` (or `"retry":
/// false`) makes a failure final.
pub async fn report(state: web::Data<ApiState>, body: JsonBody) -> Result<HttpResponse, ApiError> {
    let started = std::time::Instant::now();
    let (request_id, report, output) = parse(body.0, &state)?;
    let reported = outcome_name(&report.outcome);
    let failure = match &report.outcome {
        Outcome::Failed { code, message, .. } => Some((code.clone(), message.clone())),
        _ => None,
    };
    let attempt = report.attempt;
    let decided = state.service.report(request_id.clone(), report).await?;
    let (applied, note) = match &decided {
        Decided::Applied(_) => (true, "result recorded"),
        Decided::Refused(Refusal::Final(_), _) => {
            (false, "the run was already final; nothing changed")
        }
        Decided::Refused(
            Refusal::NotDispatched {
                attempt,
                dispatched,
            },
            _,
        ) => {
            return Err(ApiError::Conflict {
                field: Some("attempt".into()),
                message: format!(
                    "attempt {attempt} of run {request_id} was never dispatched (the last \
                     dispatched is {dispatched})"
                ),
            })
        }
        Decided::Refused(..) => (
            false,
            "a result for this attempt was counted already, or it is not the current one; \
             nothing changed",
        ),
        Decided::Unknown => {
            return Err(ApiError::NotFound(format!(
                "no run with requestId {request_id}"
            )))
        }
    };
    if let (Decided::Applied(run), Some(output)) = (&decided, output) {
        let attempt = attempt.unwrap_or(run.dispatched);
        state
            .service
            .keep_output(request_id.clone(), attempt, output)
            .await?;
    }
    match (&decided, failure) {
        (Decided::Applied(run), Some((code, message))) => log::warn!(
            "{}",
            failed_attempt(
                &request_id,
                attempt.unwrap_or(run.dispatched),
                code.as_deref(),
                message.as_deref(),
                run
            )
        ),
        (Decided::Applied(run) | Decided::Refused(_, run), _) => log::info!(
            "task {} request {request_id}: callback {reported} ({note})",
            run.task_id
        ),
        (Decided::Unknown, _) => {}
    }
    metrics()
        .callback_seconds
        .observe_duration(started.elapsed());
    Ok(HttpResponse::Ok().json(json!({
        "requestId": request_id,
        "status": decided.status(),
        "applied": applied,
        "message": note,
    })))
}

fn outcome_name(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Succeeded { .. } => ReportedStatus::Success.as_str(),
        Outcome::Failed { .. } => ReportedStatus::Failed.as_str(),
        Outcome::Accepted { .. } => "accepted",
    }
}

/// A callback's request id, result and output.
type Callback = (RequestId, Report, Option<String>);

fn parse(body: Value, state: &ApiState) -> Result<Callback, ApiError> {
    let mut body = validate::object(body, FIELDS)?;
    let request_id = match body.remove("requestId") {
        Some(Value::String(id)) => validate::request_id(&id, "requestId")?,
        _ => return Err(ApiError::invalid("requestId", "requestId is required")),
    };
    let Some(Value::String(token)) = body.remove("callbackToken") else {
        return Err(ApiError::invalid(
            "callbackToken",
            "callbackToken (from the dispatch body) is required",
        ));
    };
    // Checked before anything is looked up: a forged result learns nothing and changes nothing.
    if !same_secret(
        &token,
        &callback_token(&state.security.secret, request_id.as_str()),
    ) {
        return Err(ApiError::Forbidden(
            "callbackToken does not match this requestId".into(),
        ));
    }
    let reported = match body.remove("status") {
        Some(Value::String(s)) => ReportedStatus::parse(&s),
        _ => None,
    };
    let succeeded = match reported {
        Some(ReportedStatus::Success) => true,
        Some(ReportedStatus::Failed) => false,
        None => {
            return Err(ApiError::invalid(
                "status",
                "status must be SUCCESS or FAILED",
            ))
        }
    };
    let retry_allowed = retry_allowed(&mut body)?;
    let attempt = validate::attempt(body.remove("attempt"))?;
    let output = validate::output(body.remove("output"))?;
    let code = result_text(&mut body, "code", result_code, MAX_CODE_CHARS)?;
    let message = result_text(&mut body, "message", result_message, MAX_MESSAGE_CHARS)?;
    let outcome = if succeeded {
        Outcome::Succeeded { code, message }
    } else {
        Outcome::Failed {
            code,
            message,
            retry: retry_allowed,
        }
    };
    let report = Report {
        attempt,
        outcome,
        at: state.service.now(),
        sent_at: None,
        member: None,
    };
    Ok((request_id, report, output))
}

/// Whether a failure may be retried: `"stopRetry": true` (the protocol's word) or `"retry":
/// false` (the same, as ax first spelled it) says no; both given must agree.
fn retry_allowed(body: &mut Map<String, Value>) -> Result<bool, ApiError> {
    let flag = |body: &mut Map<String, Value>, field: &'static str| match body.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(flag)),
        Some(_) => Err(ApiError::invalid(
            field,
            format!("{field} must be true or false"),
        )),
    };
    let stop = flag(body, "stopRetry")?;
    let retry = flag(body, "retry")?;
    match (stop, retry) {
        (Some(stop), Some(retry)) if stop == retry => Err(ApiError::invalid(
            "stopRetry",
            "stopRetry and retry disagree: send stopRetry alone",
        )),
        (Some(stop), _) => Ok(!stop),
        (None, retry) => Ok(retry.unwrap_or(true)),
    }
}

/// The callback's `code` or `message`, read by `read` as a reply's is (see `ax_core::text`):
/// unfit, or longer than `max` characters, it is a 400 naming the field.
fn result_text(
    body: &mut Map<String, Value>,
    field: &str,
    read: fn(&Value) -> Result<Option<String>, Unfit>,
    max: usize,
) -> Result<Option<String>, ApiError> {
    let text = match body.remove(field) {
        None => None,
        Some(value) => {
            read(&value).map_err(|why| ApiError::invalid(field, format!("{field} {why}")))?
        }
    };
    if text.as_ref().is_some_and(|t| t.chars().count() > max) {
        return Err(ApiError::invalid(
            field,
            format!("{field} is longer than {max} characters"),
        ));
    }
    Ok(text)
}
