//! `GET /api/audit`: who changed what and when, newest first.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use serde::Serialize;

use super::validate;
use super::ApiState;
use crate::error::ApiError;
use ax_core::time::clock::rfc3339;
use ax_store::from_db;
use ax_store::queries::audit::AuditRow;
use ax_store::rows::models::AuditAction;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AuditPage {
    items: Vec<AuditView>,
    next_cursor: Option<String>,
}

#[derive(Serialize)]
struct AuditView {
    id: i64,
    at: String,
    actor: String,
    action: AuditAction,
    target: String,
    summary: String,
}

impl From<AuditRow> for AuditView {
    fn from(row: AuditRow) -> Self {
        AuditView {
            id: row.id,
            at: rfc3339(from_db(row.at)),
            actor: row.actor,
            action: row.action,
            target: row.target,
            summary: row.summary,
        }
    }
}

/// `GET /api/audit?limit=&cursor=`: a page of entries; `nextCursor` fetches the next one.
pub async fn list(
    state: web::Data<ApiState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let (before, limit) = validate::audit_query(&query)?;
    let rows = state.service.audit_log(before, limit).await?;
    let next_cursor = (rows.len() as i64 == limit)
        .then(|| rows.last().map(|row| row.id.to_string()))
        .flatten();
    Ok(HttpResponse::Ok().json(AuditPage {
        items: rows.into_iter().map(AuditView::from).collect(),
        next_cursor,
    }))
}
