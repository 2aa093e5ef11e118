//! The scenes page (`/console/scenes`): every scene with its task counts, and the pause or
//! resume of a whole scene.

use actix_web::{web, HttpResponse};
use maud::{html, Markup};

use super::filters::link;
use super::layout::{maybe_time, notice_link, page, scrolling, task_badge, Notice, Section};
use super::session::{csrf_field, Submitted, Visitor};
use super::{ok, see_other, ConsoleError};
use crate::api::validate;
use crate::service::scenes::SceneCounts;
use crate::store::models::TaskStatus;
use crate::web::ApiState;

/// `GET /console/scenes`.
pub async fn list(
    state: web::Data<ApiState>,
    visitor: Visitor,
) -> Result<HttpResponse, ConsoleError> {
    let scenes = state.service.scenes().await?;
    Ok(ok(scenes_page(&visitor, &scenes)))
}

/// `POST /console/scenes/pause` (`scene`): pauses the scene; none of its tasks fires until it
/// is resumed.
pub async fn pause(
    state: web::Data<ApiState>,
    visitor: Visitor,
    form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let scene = scene_of(&form)?;
    let count = state.service.pause_scene(scene, &visitor.principal).await?;
    Ok(see_other(&notice_link(
        "/console/scenes",
        Notice::ScenePaused(count as i64),
    )))
}

/// `POST /console/scenes/resume` (`scene`): resumes the scene; its tasks paused one by one stay
/// paused.
pub async fn resume(
    state: web::Data<ApiState>,
    visitor: Visitor,
    form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let scene = scene_of(&form)?;
    let count = state
        .service
        .resume_scene(scene, &visitor.principal)
        .await?;
    Ok(see_other(&notice_link(
        "/console/scenes",
        Notice::SceneResumed(count as i64),
    )))
}

/// The scene a form names, checked as the API checks it.
fn scene_of(form: &Submitted) -> Result<String, ConsoleError> {
    let scene = form.get("scene").unwrap_or_default().to_string();
    Ok(validate::scene(scene)?)
}

fn scenes_page(visitor: &Visitor, scenes: &[SceneCounts]) -> Markup {
    page(
        visitor,
        "Scenes",
        Some(Section::Scenes),
        html! {
            @if scenes.is_empty() {
                p.muted { "No tasks yet, so no scenes." }
            } @else {
                p.hint { "A paused scene's tasks do not fire, whatever their own state; resuming it leaves the tasks paused one by one paused." }
                (scene_table(visitor, scenes))
            }
        },
    )
}

fn scene_table(visitor: &Visitor, scenes: &[SceneCounts]) -> Markup {
    let count = |scene: &SceneCounts, status: TaskStatus| {
        scene.by_status.get(status.as_str()).copied().unwrap_or(0)
    };
    scrolling(
        "Scenes",
        html! {
            table {
                thead {
                    tr {
                        th scope="col" { "Scene" }
                        th scope="col" { "Paused since" }
                        th.num scope="col" { "Tasks" }
                        @for status in TaskStatus::ALL { th.num scope="col" { (task_badge(*status)) } }
                        th scope="col" { "Runs" }
                        @if visitor.may_change() { th scope="col" { "Actions" } }
                    }
                }
                tbody {
                    @for scene in scenes {
                        tr {
                            td { a href=(link("/console/tasks", &[("scene", Some(&scene.scene))])) { (scene.scene) } }
                            td { (maybe_time(scene.paused_at.map(|at| at.naive_utc()))) }
                            td.num { (scene.by_status.values().sum::<i64>()) }
                            @for status in TaskStatus::ALL {
                                td.num {
                                    a href=(link("/console/tasks", &[("scene", Some(&scene.scene)), ("status", Some(status.as_str()))])) {
                                        (count(scene, *status))
                                    }
                                }
                            }
                            td { a href=(link("/console/runs", &[("scene", Some(&scene.scene))])) { "Runs" } }
                            @if visitor.may_change() {
                                td.actions {
                                    @match scene.paused_at {
                                        None => (scene_button(visitor, "/console/scenes/pause", &scene.scene, "Pause scene")),
                                        Some(_) => (scene_button(visitor, "/console/scenes/resume", &scene.scene, "Resume scene")),
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// A button posting `scene` to `action`; its accessible name says which scene.
fn scene_button(visitor: &Visitor, action: &str, scene: &str, label: &str) -> Markup {
    html! {
        form.inline method="post" action=(action) {
            (csrf_field(visitor))
            input type="hidden" name="scene" value=(scene);
            button type="submit" aria-label=(format!("{label} {scene}")) { (label) }
        }
    }
}
