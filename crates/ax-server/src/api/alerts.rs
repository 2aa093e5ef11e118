//! `/api/alerts`: the alerts ax made (sent, folded, failed, pending), and a test alert to a
//! channel.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use serde::Serialize;
use serde_json::{json, Value};

use super::json::JsonBody;
use super::validate;
use super::ApiState;
use crate::error::ApiError;
use ax_core::alerting::{AlertEvent, AlertStatus};
use ax_core::time::clock::rfc3339;
use ax_store::from_db;
use ax_store::queries::alerts::AlertRow;

/// One alert on one channel.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AlertView {
    id: String,
    /// Empty for an event folded into a silence (told with the next alert).
    channel: String,
    event: AlertEvent,
    subject: String,
    task_id: Option<i64>,
    scene: Option<String>,
    request_id: Option<String>,
    code: Option<String>,
    message: Option<String>,
    count: i32,
    folded: i32,
    folded_since: Option<String>,
    at: String,
    status: AlertStatus,
    tries: i32,
    next_try_at: Option<String>,
    sent_at: Option<String>,
    last_error: Option<String>,
    created_at: String,
}

impl From<AlertRow> for AlertView {
    fn from(row: AlertRow) -> Self {
        let time = |at| rfc3339(from_db(at));
        AlertView {
            id: row.id,
            channel: row.channel,
            event: row.event,
            subject: row.subject,
            task_id: row.task_id.map(|id| id.0),
            scene: row.scene,
            request_id: row.request_id,
            code: row.code,
            message: row.message,
            count: row.count,
            folded: row.folded,
            folded_since: row.folded_since.map(time),
            at: time(row.at),
            status: row.status,
            tries: row.tries,
            next_try_at: row
                .next_try_at
                .filter(|_| row.status == AlertStatus::Pending)
                .map(time),
            sent_at: row.sent_at.map(time),
            last_error: row.last_error,
            created_at: time(row.created_at),
        }
    }
}

/// `GET /api/alerts?limit=&cursor=&task=&scene=&status=`, newest first.
pub async fn list(
    state: web::Data<ApiState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let (filter, limit) = validate::alerts_query(&query)?;
    let rows = state.service.alerts(filter, limit).await?;
    let next_cursor = validate::next_alert_cursor(&rows, limit);
    let items: Vec<AlertView> = rows.into_iter().map(AlertView::from).collect();
    Ok(HttpResponse::Ok().json(json!({ "items": items, "nextCursor": next_cursor })))
}

/// `POST /api/alerts/test {"channel": NAME}`: 200 `{"id"}` once the channel took it.
pub async fn test(
    state: web::Data<ApiState>,
    JsonBody(body): JsonBody,
) -> Result<HttpResponse, ApiError> {
    let channel = match body
        .as_object()
        .map(|fields| (fields.get("channel"), fields.len()))
    {
        Some((Some(Value::String(name)), 1)) => name.clone(),
        _ => {
            let message = "the body is {\"channel\": NAME}, NAME a configured channel's";
            return Err(ApiError::invalid("channel", message));
        }
    };
    let id = state.service.test_alert(channel).await?;
    Ok(HttpResponse::Ok().json(json!({ "id": id, "delivered": true })))
}
