//! `/api/scenes`: a business area's tasks paused or resumed in one call.

use actix_web::{web, HttpResponse};
use serde_json::json;

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
