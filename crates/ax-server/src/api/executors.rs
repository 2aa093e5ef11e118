//! `/api/executors`: executor groups, their members (defined, or registered by the executors
//! themselves) and each member's health, shared by every ax process of the cluster.

use ax_core::ids::GroupName;
use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use serde::Serialize;
use serde_json::json;

use super::json::JsonBody;
use super::validate::executor as validate;
use super::{Actor, ApiState};

use crate::error::ApiError;
use crate::service::executors::{GroupDetails, MemberState};
use ax_core::dispatch::routing::HealthState;
use ax_core::time::clock::rfc3339;
use ax_store::from_db;

/// A group as the API shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupView {
    name: GroupName,
    routing: String,
    max_in_flight: i32,
    updated_at: String,
    members: Vec<MemberView>,
}

/// A member with its health here.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MemberView {
    url: String,
    /// `true`: registered itself (and expires without heartbeats); `false`: defined.
    registered: bool,
    capacity: Option<i32>,
    /// `None` for a member gone.
    registered_at: Option<String>,
    last_seen_at: Option<String>,
    /// A member that expired or left: when, and why.
    gone_at: Option<String>,
    gone_reason: Option<String>,
    /// Shared by the cluster: the same on every ax process.
    state: HealthState,
    unhealthy_until: Option<String>,
    last_failure_at: Option<String>,
    last_error: Option<String>,
    /// This process's.
    in_flight: usize,
    successes: u64,
    failures: u64,
}

impl GroupView {
    fn new(details: GroupDetails, states: &HashMap<String, MemberState>) -> GroupView {
        let members = details
            .members
            .into_iter()
            .map(|member| {
                let state = states.get(&member.url);
                MemberView {
                    registered: member.last_seen_at.is_some(),
                    capacity: member.capacity,
                    registered_at: Some(rfc3339(from_db(member.registered_at))),
                    last_seen_at: member.last_seen_at.map(|at| rfc3339(from_db(at))),
                    gone_at: None,
                    gone_reason: None,
                    state: state.map_or(HealthState::Healthy, |s| s.state),
                    unhealthy_until: state.and_then(|s| s.unhealthy_until).map(rfc3339),
                    last_failure_at: state.and_then(|s| s.last_failure_at).map(rfc3339),
                    in_flight: state.map_or(0, |s| s.in_flight),
                    successes: state.map_or(0, |s| s.successes),
                    failures: state.map_or(0, |s| s.failures),
                    last_error: state.and_then(|s| s.last_error.clone()),
                    url: member.url,
                }
            })
            .chain(details.gone.into_iter().map(|gone| MemberView {
                registered: false,
                capacity: None,
                registered_at: None,
                last_seen_at: None,
                gone_at: Some(rfc3339(from_db(gone.gone_at))),
                gone_reason: Some(gone.reason),
                state: HealthState::Gone,
                unhealthy_until: None,
                last_failure_at: None,
                last_error: None,
                in_flight: 0,
                successes: 0,
                failures: 0,
                url: gone.url,
            }))
            .collect();
        GroupView {
            name: details.group.name,
            routing: details.group.routing,
            max_in_flight: details.group.max_in_flight,
            updated_at: rfc3339(from_db(details.group.updated_at)),
            members,
        }
    }
}

/// `GET /api/executors`: every group with its members and their health.
pub async fn list(state: web::Data<ApiState>) -> Result<HttpResponse, ApiError> {
    let groups = state.service.executor_groups().await?;
    let states = state.service.member_states();
    let items: Vec<GroupView> = groups
        .into_iter()
        .map(|group| GroupView::new(group, &states))
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "items": items })))
}

/// `GET /api/executors/{group}`.
pub async fn get(
    state: web::Data<ApiState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let name = validate::group_name(path.into_inner(), "group")?;
    let group = state.service.executor_group(name).await?;
    Ok(HttpResponse::Ok().json(GroupView::new(group, &state.service.member_states())))
}

/// `PUT /api/executors/{group}` `{routing?, maxInFlight?, members?}` → 201 when created, 200
/// when replaced, with the group.
pub async fn put(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let name = validate::group_name(path.into_inner(), "group")?;
    let input = validate::group_input(body.0, &state.security.allowlist)?;
    let created = state
        .service
        .put_executor_group(name.clone(), input, &actor.0)
        .await?;
    let group = state.service.executor_group(name).await?;
    let view = GroupView::new(group, &state.service.member_states());
    Ok(match created {
        true => HttpResponse::Created().json(view),
        false => HttpResponse::Ok().json(view),
    })
}

/// `DELETE /api/executors/{group}` → 204; 409 naming the tasks that use it.
pub async fn delete(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let name = validate::group_name(path.into_inner(), "group")?;
    state.service.delete_executor_group(name, &actor.0).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /api/executors/{group}/members` `{url, capacity?}`: a member registers itself, or
/// heartbeats → 201 when it joined, 200 when renewed, with how often to heartbeat; 403 for a
/// group outside the token's or a member of another token's, 409 for a group full.
pub async fn register(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let name = validate::group_name(path.into_inner(), "group")?;
    let member = validate::registration(body.0, &state.security.allowlist)?;
    let url = member.url.clone();
    let joined = state
        .service
        .register_member(name.clone(), member, &actor.0)
        .await?;
    let body = json!({
        "group": name,
        "url": url,
        "heartbeatSecs": state.service.heartbeat_secs(),
    });
    Ok(match joined {
        true => HttpResponse::Created().json(body),
        false => HttpResponse::Ok().json(body),
    })
}

/// `DELETE /api/executors/{group}/members?url=…`: a member leaves (graceful shutdown) → 204;
/// 403 for a member the token did not register (an executor's token).
pub async fn unregister(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let name = validate::group_name(path.into_inner(), "group")?;
    let url = query
        .into_inner()
        .remove("url")
        .ok_or_else(|| ApiError::invalid("url", "url is required: ?url=<the member's URL>"))?;
    let url = validate::member(url, &state.security.allowlist)?;
    state.service.unregister_member(name, url, &actor.0).await?;
    Ok(HttpResponse::NoContent().finish())
}
