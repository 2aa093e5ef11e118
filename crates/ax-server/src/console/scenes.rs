//! The scenes page (`/console/scenes`): every scene with its task counts, and the pause or
//! resume of a whole scene; a scene's page (`/console/scenes/{scene}`): its task counts, the
//! alert rule its tasks follow and its last alerts.

use actix_web::{web, HttpResponse};
use ax_core::ids::SceneName;
use maud::{html, Markup};

use super::alerts::{alert_section, rule_in_force, LATEST_ALERTS};
use super::filters::link;
use super::layout::{
    maybe_time, notice_link, page, scene_paused_badge, scrolling, task_badge, Notice, Section,
};
use super::paths::{scene_href, SCENES};
use super::session::{csrf_field, Submitted, Visitor};
use super::timeline;
use super::{ok, see_other, ConsoleError};
use crate::api::validate;
use crate::service::run_history::{
    SceneHistory, FAILURE_DAYS, SCENE_TASKS, TIMELINE_HOURS, TIMELINE_RUNS,
};
use crate::service::scenes::SceneCounts;
use crate::web::ApiState;
use ax_core::run::TaskId;
use ax_store::queries::alerts::AlertFilter;
use ax_store::rows::models::TaskStatus;

/// `GET /console/scenes`.
pub async fn list(
    state: web::Data<ApiState>,
    visitor: Visitor,
) -> Result<HttpResponse, ConsoleError> {
    let scenes = state.service.scenes().await?;
    Ok(ok(scenes_page(&visitor, &scenes)))
}

/// `GET /console/scenes/{scene}`: a scene with tasks, paused or with a rule of its own;
/// any other is a page that is not there.
pub async fn detail(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    let no_scene = || ConsoleError::NotFound(format!("There is no scene {path}."));
    let scene = validate::scene(path.to_string()).map_err(|_| no_scene())?;
    let service = &state.service;
    let filter = AlertFilter {
        scene: Some(scene.clone()),
        ..AlertFilter::default()
    };
    let (scenes, own_rule, latest, history) = futures_util::join!(
        service.scenes(),
        service.scene_alerts(scene.clone()),
        service.alerts(filter, LATEST_ALERTS),
        service.scene_history(scene.clone()),
    );
    let (own_rule, latest, history) = (own_rule?, latest?, history?);
    let counts = match scenes?.into_iter().find(|counts| counts.scene == scene) {
        Some(counts) => counts,
        None if own_rule.is_some() => SceneCounts {
            scene: scene.to_string(),
            by_status: Default::default(),
            paused_at: None,
        },
        None => return Err(no_scene()),
    };
    let rule = rule_in_force(None, own_rule.as_ref(), service.default_alert_rule());
    let alerts = alert_section(rule, &latest, ("scene", &counts.scene));
    let alerts = html! { (scene_history(&history)) (alerts) };
    Ok(ok(scene_page(&visitor, &counts, alerts)))
}

/// The timeline and failure heat-maps of a scene's first tasks, a lane per task with runs.
fn scene_history(scene: &SceneHistory) -> Markup {
    let history = &scene.history;
    let lanes: Vec<(TaskId, String)> = scene
        .tasks
        .iter()
        .filter(|(id, _)| history.timeline().any(|span| span.task_id == *id))
        .cloned()
        .collect();
    html! {
        section.history aria-labelledby="timeline-heading" {
            h2 #timeline-heading { "Timeline, last " (TIMELINE_HOURS) " h" }
            @if lanes.is_empty() {
                p.muted { "No runs in the last " (TIMELINE_HOURS) " h." }
            } @else {
                (timeline::gantt(history.timeline(), &lanes, history.now, TIMELINE_HOURS))
            }
            p.muted {
                "A lane per task with runs, at most " (TIMELINE_RUNS) " runs"
                @if scene.more { ", over the scene's first " (SCENE_TASKS) " tasks by name" }
                "."
            }
            h2 #failures-heading { "Failures" }
            (timeline::heatmaps(&history.failures, history.now, FAILURE_DAYS))
        }
    }
}

fn scene_page(visitor: &Visitor, counts: &SceneCounts, alerts: Markup) -> Markup {
    let scene = &counts.scene;
    page(
        visitor,
        &format!("Scene {scene}"),
        Some(Section::Scenes),
        html! {
            @if counts.paused_at.is_some() {
                p.scene-state { (scene_paused_badge()) " None of its tasks fires until the scene is resumed." }
            }
            dl.fields {
                dt { "Paused since" } dd { (maybe_time(counts.paused_at.map(|at| at.naive_utc()))) }
                dt { "Tasks" }
                dd { a href=(link("/console/tasks", &[("scene", Some(scene))])) { (total(counts)) } }
                @for status in TaskStatus::ALL {
                    dt { (task_badge(*status)) }
                    dd { a href=(status_link(scene, *status)) { (count(counts, *status)) } }
                }
                dt { "Runs" } dd { a href=(link("/console/runs", &[("scene", Some(scene))])) { "Runs of this scene" } }
            }
            (alerts)
            p.hint { "A scene's own rule is set with " code { "PUT /api/scenes/" (scene) "/alerts" } "; " code { "null" } " makes its tasks follow the default rule again." }
        },
    )
}

/// How many of the scene's tasks have `status`.
fn count(scene: &SceneCounts, status: TaskStatus) -> i64 {
    scene.by_status.get(status.as_str()).copied().unwrap_or(0)
}

fn total(scene: &SceneCounts) -> i64 {
    scene.by_status.values().sum()
}

/// The tasks page showing the scene's tasks of `status`.
fn status_link(scene: &str, status: TaskStatus) -> String {
    link(
        "/console/tasks",
        &[("scene", Some(scene)), ("status", Some(status.as_str()))],
    )
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
        SCENES,
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
        SCENES,
        Notice::SceneResumed(count as i64),
    )))
}

/// `GET /console/scenes/pause?scene=` and `…/resume?scene=`: says how many of the scene's
/// tasks stop (or start) firing, and asks; the form posts to the same path.
pub async fn confirm(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
    query: web::Query<std::collections::HashMap<String, String>>,
) -> Result<HttpResponse, ConsoleError> {
    super::admins_only(&visitor)?;
    let pausing = match path.as_str() {
        "pause" => true,
        "resume" => false,
        _ => {
            return Err(ConsoleError::NotFound(format!(
                "There is no scene action {path}."
            )))
        }
    };
    let scene = validate::scene(query.get("scene").cloned().unwrap_or_default())?;
    let counts = state
        .service
        .scenes()
        .await?
        .into_iter()
        .find(|counts| counts.scene == scene)
        .ok_or_else(|| ConsoleError::NotFound(format!("There is no scene {scene}.")))?;
    Ok(ok(confirm_page(&visitor, &counts, pausing)))
}

fn confirm_page(visitor: &Visitor, counts: &SceneCounts, pausing: bool) -> Markup {
    let scene = &counts.scene;
    let enabled = count(counts, TaskStatus::Enabled);
    let (verb, action, change) = match pausing {
        true => (
            "Pause",
            "/console/scenes/pause",
            "stop firing on every ax process until the scene is resumed",
        ),
        false => (
            "Resume",
            "/console/scenes/resume",
            "fire again; its tasks paused one by one stay paused",
        ),
    };
    page(
        visitor,
        &format!("{verb} scene {scene}?"),
        Some(Section::Scenes),
        html! {
            p role="note" {
                "Scene " strong { (scene) } " has " (total(counts)) " tasks: "
                strong.count { (enabled) } " enabled " (if enabled == 1 { "task" } else { "tasks" }) " " (change) "."
            }
            div.actions {
                form.inline method="post" action=(action) {
                    (csrf_field(visitor))
                    input type="hidden" name="scene" value=(scene);
                    button type="submit" { (verb) " scene" }
                }
                a href=(SCENES) { "Keep it as it is" }
            }
        },
    )
}

/// The scene a form names, checked as the API checks it.
fn scene_of(form: &Submitted) -> Result<SceneName, ConsoleError> {
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
                            td {
                                a href=(scene_href(&scene.scene)) { (scene.scene) }
                                @if scene.paused_at.is_some() { " " (scene_paused_badge()) }
                            }
                            td { (maybe_time(scene.paused_at.map(|at| at.naive_utc()))) }
                            td.num { a href=(link("/console/tasks", &[("scene", Some(&scene.scene))])) { (total(scene)) } }
                            @for status in TaskStatus::ALL {
                                td.num {
                                    a href=(status_link(&scene.scene, *status)) { (count(scene, *status)) }
                                }
                            }
                            td { a href=(link("/console/runs", &[("scene", Some(&scene.scene))])) { "Runs" } }
                            @if visitor.may_change() {
                                td.actions {
                                    @match scene.paused_at {
                                        None => (scene_button("/console/scenes/pause", &scene.scene, "Pause scene")),
                                        Some(_) => (scene_button("/console/scenes/resume", &scene.scene, "Resume scene")),
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

/// A link to the confirmation of `action` on `scene`; its accessible name says which scene.
fn scene_button(action: &str, scene: &str, label: &str) -> Markup {
    html! {
        a.button href=(link(action, &[("scene", Some(scene))])) aria-label=(format!("{label} {scene}")) { (label) }
    }
}
