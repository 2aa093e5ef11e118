use actix_web::{web, HttpResponse};
use serde_json::json;

use super::ApiState;

/// `GET /healthz`: liveness, and which instance and store answered.
pub async fn healthz(state: web::Data<ApiState>) -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "status": "ok",
        "instanceId": state.instance_id,
        "store": state.backend,
        "wheelSize": state.scheduler.wheel_size().await,
    }))
}
