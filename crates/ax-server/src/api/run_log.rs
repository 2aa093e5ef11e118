//! `POST` and `GET /api/instances/{requestId}/log`: the log lines and progress an executor
//! sends while a run is open.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};

use super::json::JsonBody;
use super::views::RunLogView;
use super::{validate, ApiState};
use crate::error::ApiError;
use crate::service::run_logs::LogInput;
use ax_core::run::RequestId;
use ax_core::security::{callback_token, same_secret, Role};

const FIELDS: &[&str] = &["callbackToken", "attempt", "lines", "progress"];

/// `{callbackToken?, attempt?, lines?: [text…], progress?: 0-100}` → 200 `{requestId,
/// attempt, lines, droppedLines}` (the attempt's lines kept, and gone, so far). Proven by the
/// run's `callbackToken`, or by an admin's or an executor's token; `attempt` defaults to the
/// one dispatched last; 409 for an attempt never dispatched or a run ended longer ago than
/// `run_logs.grace_secs`.
pub async fn append(
    state: web::Data<ApiState>,
    req: HttpRequest,
    path: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let request_id = validate::request_id(&path, "requestId")?;
    let mut body = validate::object(body.0, FIELDS)?;
    authorize(&state, &req, &request_id, body.remove("callbackToken")).await?;
    let input = LogInput {
        attempt: validate::attempt(body.remove("attempt"))?,
        lines: validate::log_lines(body.remove("lines"))?,
        progress: validate::progress(body.remove("progress"))?,
    };
    if input.lines.is_empty() && input.progress.is_none() {
        return Err(ApiError::invalid("lines", "send lines, progress or both"));
    }
    let (attempt, appended) = state.service.append_log(request_id.clone(), input).await?;
    Ok(HttpResponse::Ok().json(json!({
        "requestId": request_id,
        "attempt": attempt,
        "lines": appended.kept,
        "droppedLines": appended.dropped,
    })))
}

/// The run's own callback token, checked before anything is looked up; without one, a token
/// that may report for executors (an admin's or an executor's; none needed when ax has none).
async fn authorize(
    state: &ApiState,
    req: &HttpRequest,
    request_id: &RequestId,
    token: Option<Value>,
) -> Result<(), ApiError> {
    match token {
        Some(Value::String(token)) => {
            let expected = callback_token(&state.security.secret, request_id.as_str());
            if same_secret(&token, &expected) {
                return Ok(());
            }
            Err(ApiError::Forbidden(
                "callbackToken does not match this requestId".into(),
            ))
        }
        Some(_) => Err(ApiError::invalid(
            "callbackToken",
            "callbackToken must be a string",
        )),
        None => {
            let authorization = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok());
            match state.security.authorize(authorization) {
                Some(p) if matches!(p.role, Role::Admin | Role::Executor) => Ok(()),
                Some(p) => Err(ApiError::Forbidden(format!(
                    "the token `{}` is a viewer's: it may read, not send log lines",
                    p.name
                ))),
                None => {
                    let what = format!("log lines for run {request_id}");
                    state.auth_failures.failed(req.peer_addr(), &what).await;
                    Err(ApiError::Unauthorized)
                }
            }
        }
    }
}

/// `GET /api/instances/{requestId}/log` → `{requestId, attempts: [{attempt, progress,
/// droppedLines, output, lines: [{at, text}]}]}`; a marker line (`"marker": true`) stands
/// first for lines dropped.
pub async fn get(
    state: web::Data<ApiState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let request_id = validate::request_id(&path, "requestId")?;
    let logs = state.service.run_log(request_id.clone()).await?;
    let limits = state.service.run_log_limits();
    Ok(HttpResponse::Ok().json(RunLogView::new(request_id, logs, limits)))
}
