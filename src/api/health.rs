use actix_web::{web, HttpResponse};
use serde_json::json;

use super::ApiState;
use crate::error::ApiError;

/// `GET /healthz`: liveness, and which instance and store answered.
pub async fn healthz(state: web::Data<ApiState>) -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "status": "ok",
        "instanceId": state.instance_id,
        "store": state.backend,
        "wheelSize": state.scheduler.wheel_size().await,
    }))
}

/// `GET /api/cluster`: the live ax processes (heartbeats in Redis; just this one without).
pub async fn cluster(state: web::Data<ApiState>) -> Result<HttpResponse, ApiError> {
    let instances = state.scheduler.cluster().await?;
    Ok(HttpResponse::Ok().json(json!({
        "self": state.instance_id,
        "instances": instances,
    })))
}
