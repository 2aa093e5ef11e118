use actix_web::{web, HttpResponse};
use serde_json::{json, Value};

use super::ApiState;
use crate::error::ApiError;
use ax_core::metrics::metrics;

/// `GET /healthz`: 200 when every actor answers, the wheel ticks and the store answers; 503
/// with the reason otherwise. Either way, which instance and store answered, and whether Redis
/// does: ax fires on while it is down, so Redis down alone is no 503.
pub async fn healthz(state: web::Data<ApiState>) -> HttpResponse {
    let report = state.health.check().await;
    let redis = report.redis_up.map(|up| if up { "up" } else { "down" });
    let mut body = json!({
        "status": "ok",
        "instanceId": state.instance_id,
        "store": state.backend,
        "wheelSize": report.wheel_size,
        "clockSkewMs": report.clock_skew_ms,
        "redis": redis,
    });
    if report.is_healthy() {
        return HttpResponse::Ok().json(body);
    }
    let reason = report.problems.join("; ");
    log::warn!("unhealthy: {reason}");
    body["status"] = "unavailable".into();
    body["reason"] = reason.into();
    HttpResponse::ServiceUnavailable().json(body)
}

/// `GET /metrics`: Prometheus text format.
pub async fn prometheus(state: web::Data<ApiState>) -> HttpResponse {
    let text = metrics().render(state.service.wheel_stats().await);
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(text)
}

/// `GET /api/cluster`: the live ax processes (heartbeats in Redis; just this one without),
/// each with its share of the tasks.
pub async fn cluster(state: web::Data<ApiState>) -> Result<HttpResponse, ApiError> {
    let members = state.service.cluster().await?;
    let shares = state.service.shares(&members).await?;
    let instances: Vec<Value> = members
        .iter()
        .zip(shares)
        .map(|(member, share)| {
            let mut instance = json!(member);
            if let Some(fields) = instance.as_object_mut() {
                // The heartbeat's bits and rate, shown as figures.
                fields.remove("firesPerSec");
                fields.insert("share".into(), json!(share));
            }
            instance
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({
        "self": state.instance_id,
        "instances": instances,
    })))
}
