//! The scenes page (`/console/scenes`): every scene with its task counts.

use actix_web::{web, HttpResponse};
use maud::{html, Markup};

use super::filters::link;
use super::layout::{page, scrolling, task_badge, Section};
use super::{ok, ConsoleError};
use crate::api::ApiState;
use crate::service::SceneCounts;
use crate::store::models::TaskStatus;

/// `GET /console/scenes`.
pub async fn list(state: web::Data<ApiState>) -> Result<HttpResponse, ConsoleError> {
    let scenes = state.service.scenes().await?;
    Ok(ok(scenes_page(&scenes)))
}

fn scenes_page(scenes: &[SceneCounts]) -> Markup {
    page(
        "Scenes",
        Some(Section::Scenes),
        html! {
            @if scenes.is_empty() {
                p.muted { "No tasks yet, so no scenes." }
            } @else {
                (scene_table(scenes))
            }
        },
    )
}

fn scene_table(scenes: &[SceneCounts]) -> Markup {
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
                        th.num scope="col" { "Tasks" }
                        @for status in TaskStatus::ALL { th.num scope="col" { (task_badge(*status)) } }
                        th scope="col" { "Runs" }
                    }
                }
                tbody {
                    @for scene in scenes {
                        tr {
                            td { a href=(link("/console/tasks", &[("scene", Some(&scene.scene))])) { (scene.scene) } }
                            td.num { (scene.by_status.values().sum::<i64>()) }
                            @for status in TaskStatus::ALL {
                                td.num {
                                    a href=(link("/console/tasks", &[("scene", Some(&scene.scene)), ("status", Some(status.as_str()))])) {
                                        (count(scene, *status))
                                    }
                                }
                            }
                            td { a href=(link("/console/runs", &[("scene", Some(&scene.scene))])) { "Runs" } }
                        }
                    }
                }
            }
        },
    )
}
