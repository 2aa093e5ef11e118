//! `/api/scenes`: a business area's tasks paused or resumed in one call.

use actix_web::{web, HttpResponse};
use serde_json::{json, Value};

use super::json::JsonBody;
use super::validate;
use super::views::SceneView;
use super::{Actor, ApiState};
use crate::error::ApiError;

/// `GET /api/scenes`: each scene with its task counts by status.
pub async fn list(state: web::Data<ApiState>) -> Result<HttpResponse, ApiError> {
    let scenes = state.service.scenes().await?;
    let items: Vec<SceneView> = scenes.into_iter().map(SceneView::from).collect();
    Ok(HttpResponse::Ok().json(json!({ "items": items })))
}

/// `POST /api/scenes/{scene}/pause` → `{scene, paused}`.
pub async fn pause(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let scene = validate::scene(path.into_inner())?;
    let count = state.service.pause_scene(scene.clone(), &actor.0).await?;
    Ok(HttpResponse::Ok().json(json!({ "scene": scene, "paused": count })))
}

/// `POST /api/scenes/{scene}/resume` → `{scene, resumed}`.
pub async fn resume(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let scene = validate::scene(path.into_inner())?;
    let count = state.service.resume_scene(scene.clone(), &actor.0).await?;
    Ok(HttpResponse::Ok().json(json!({ "scene": scene, "resumed": count })))
}

/// `GET /api/scenes/{scene}/alerts` → `{scene, alerts, applies}`: the scene's own rule (`null`:
/// none) and the rule its tasks follow.
pub async fn alerts(
    state: web::Data<ApiState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let scene = validate::scene(path.into_inner())?;
    let rule = state.service.scene_alerts(scene.clone()).await?;
    let applies = rule
        .clone()
        .unwrap_or_else(|| state.service.default_alert_rule().clone());
    Ok(HttpResponse::Ok().json(json!({ "scene": scene, "alerts": rule, "applies": applies })))
}

/// `PUT /api/scenes/{scene}/alerts` with a rule (the shape of `alerts.default`), or `null` to
/// follow the default again → `{scene, alerts, applies}`.
pub async fn put_alerts(
    state: web::Data<ApiState>,
    path: web::Path<String>,
    JsonBody(body): JsonBody,
) -> Result<HttpResponse, ApiError> {
    let scene = validate::scene(path.into_inner())?;
    let rule = match body {
        Value::Null => None,
        body => {
            let rule = validate::alert_rule(body, "")?;
            state.service.check_alert_rule(&rule, "")?;
            Some(rule)
        }
    };
    state
        .service
        .set_scene_alerts(scene.clone(), rule.clone())
        .await?;
    let applies = rule
        .clone()
        .unwrap_or_else(|| state.service.default_alert_rule().clone());
    Ok(HttpResponse::Ok().json(json!({ "scene": scene, "alerts": rule, "applies": applies })))
}
