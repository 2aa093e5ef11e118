//! `POST /api/callback`: an executor reports a run's result.

use actix_web::{web, HttpResponse};
use serde_json::{json, Map, Value};

use super::{validate, ApiState};
use crate::actors::dispatch::json_text;
use crate::error::ApiError;
use crate::metrics::metrics;
use crate::security::{callback_token, same_secret};
use crate::store::models::InstanceStatus;
use crate::store::queries::instances::{ResultOutcome, ResultRecord};
use crate::store::to_db;

const FIELDS: &[&str] = &[
    "requestId",
    "callbackToken",
    "status",
    "code",
    "message",
    "retry",
    "attempt",
];
const MAX_CODE_CHARS: usize = 64;
const MAX_MESSAGE_CHARS: usize = 1024;

/// `{requestId, status: "SUCCESS"|"FAILED", code?, message?, retry?, attempt?}` → 200 with
/// `applied`; a result for a run already final changes nothing and says so; an unknown run is
/// 404. `"retry": false` makes a failure final; `attempt` ties the result to one attempt.
pub async fn report(
    state: web::Data<ApiState>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let started = std::time::Instant::now();
    let result = parse(body.into_inner(), &state)?;
    let request_id = result.request_id.clone();
    let reported = result.status;
    let (applied, status, note) = match state.scheduler.report_result(result).await? {
        ResultOutcome::Applied(status) => (true, status, "result recorded"),
        ResultOutcome::RetryScheduled { .. } => (
            true,
            InstanceStatus::Ready,
            "failure recorded; the run will be retried",
        ),
        ResultOutcome::AlreadyFinal(current) => {
            (false, current, "the run was already final; nothing changed")
        }
        ResultOutcome::Superseded => (
            false,
            reported,
            "the result is for an earlier attempt; nothing changed",
        ),
        ResultOutcome::Unknown => {
            return Err(ApiError::NotFound(format!(
                "no run with requestId {request_id}"
            )))
        }
    };
    log::info!("request {request_id}: callback {reported} ({note})");
    metrics()
        .callback_seconds
        .observe_duration(started.elapsed());
    Ok(HttpResponse::Ok().json(json!({
        "requestId": request_id,
        "status": status,
        "applied": applied,
        "message": note,
    })))
}

fn parse(body: Value, state: &ApiState) -> Result<ResultRecord, ApiError> {
    let Value::Object(mut body) = body else {
        return Err(ApiError::Invalid {
            field: None,
            message: "the body must be a JSON object".into(),
        });
    };
    if let Some(unknown) = body.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ApiError::invalid(
            unknown.clone(),
            format!("unknown field `{unknown}`"),
        ));
    }
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
    if !same_secret(&token, &callback_token(&state.security.secret, &request_id)) {
        return Err(ApiError::Forbidden(
            "callbackToken does not match this requestId".into(),
        ));
    }
    let status = match body.remove("status") {
        Some(Value::String(s)) if s == "SUCCESS" => InstanceStatus::Success,
        Some(Value::String(s)) if s == "FAILED" => InstanceStatus::Failed,
        _ => {
            return Err(ApiError::invalid(
                "status",
                "status must be SUCCESS or FAILED",
            ))
        }
    };
    let retry_allowed = match body.remove("retry") {
        None | Some(Value::Null) | Some(Value::Bool(true)) => true,
        Some(Value::Bool(false)) => false,
        Some(_) => return Err(ApiError::invalid("retry", "retry must be true or false")),
    };
    let attempt = match body.remove("attempt") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(
            n.as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    ApiError::invalid("attempt", "attempt must be a positive integer")
                })?,
        ),
        Some(_) => {
            return Err(ApiError::invalid(
                "attempt",
                "attempt must be a positive integer",
            ))
        }
    };
    Ok(ResultRecord {
        request_id,
        status,
        code: bounded(&mut body, "code", MAX_CODE_CHARS)?,
        message: bounded(&mut body, "message", MAX_MESSAGE_CHARS)?,
        at: to_db(state.scheduler.now()),
        deadline: None,
        attempt,
        retry_allowed,
        // The executor is told exactly what its result did.
        batchable: false,
    })
}

fn bounded(
    body: &mut Map<String, Value>,
    field: &str,
    max: usize,
) -> Result<Option<String>, ApiError> {
    let text = body.remove(field).as_ref().and_then(json_text);
    if text.as_ref().is_some_and(|t| t.chars().count() > max) {
        return Err(ApiError::invalid(
            field,
            format!("{field} is longer than {max} characters"),
        ));
    }
    Ok(text)
}
