//! The editor page: the form with its fields, the schedule's preview, and why the last save
//! did not happen.

use std::collections::HashMap;

use actix_web::HttpResponse;
use maud::{html, Markup};

use super::draft::{numbers, Draft};
use super::refusals::{form_field, Refusal, Unsaved};
use crate::api::validate;
use crate::console::layout::{self, page, Section};
use crate::console::paths::task_href;
use crate::console::session::{csrf_field, Visitor};
use crate::console::{ok, tasks, ConsoleError};
use crate::web::ApiState;
use ax_core::calendar::schedule::Schedule;
use ax_core::calendar::TaskCalendars;
use ax_core::run::{OverlapPolicy, TaskId};
use ax_core::task::fields::{
    ALERTS, CALENDARS, CRON, DEPENDS_ON, ENABLED, EXECUTOR, HANDLER_URL, LABELS, NAME, OVERLAP,
    PARAMS, SCENE, TIME_ZONE,
};
use ax_core::task::labels::{MAX_KEY_CHARS, MAX_VALUE_CHARS};

/// Names of a scene's tasks the dependency field lists.
const SUGGESTED_NAMES: i64 = 200;

/// Which task the editor saves: a new one, or task `id` at the version the form was opened on
/// (none: whatever version it is at).
#[derive(Debug, Clone, Copy)]
pub(super) enum Target {
    New,
    Existing { id: TaskId, version: Option<i64> },
}

impl Target {
    fn action(self) -> String {
        match self {
            Target::New => "/console/tasks/new".into(),
            Target::Existing { id, .. } => format!("{}/edit", task_href(id)),
        }
    }
}

/// The editor page, with why the last save did not happen, if it did not.
pub(super) async fn editor(
    state: &ApiState,
    visitor: &Visitor,
    target: Target,
    draft: &Draft,
    unsaved: Option<&Unsaved>,
) -> Result<HttpResponse, ConsoleError> {
    let suggestions = state
        .service
        .names_in_scene(draft.scene_or_default().into(), SUGGESTED_NAMES)
        .await?;
    let preview = preview(state, draft).await?;
    let title = match target {
        Target::New => "New task".to_string(),
        Target::Existing { .. } => format!("Edit task {}", draft.name),
    };
    let page = page(
        visitor,
        &title,
        Some(Section::Tasks),
        editor_form(visitor, target, draft, unsaved, &suggestions, preview),
    );
    Ok(ok(page))
}

/// The preview of the draft's schedule, as `GET /api/cron/next` reads it (the same checks),
/// less the days off of its calendars when the field reads as such.
async fn preview(state: &ApiState, draft: &Draft) -> Result<Markup, ConsoleError> {
    let query: HashMap<String, String> = [("expr", &draft.cron), ("tz", &draft.time_zone)]
        .into_iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(key, value)| (key.to_string(), value.clone()))
        .collect();
    let now = state.service.now();
    let asked = match validate::cron_preview(&query, now) {
        Ok(asked) => asked,
        Err(err) => return Ok(html! { p.error #preview-description { (err.to_string()) } }),
    };
    let calendars = serde_json::from_str(&draft.calendars)
        .ok()
        .and_then(|field| TaskCalendars::from_json(&field).ok().flatten());
    let book = state.service.book_for(calendars.as_ref()).await?;
    let description = asked.cron.describe();
    let schedule = Schedule::new(asked.cron, book.days_off(calendars.as_ref()));
    Ok(html! {
        p #preview-description { (description) }
        (tasks::upcoming(&schedule, &schedule.preview(asked.from, asked.count)))
    })
}

pub(super) fn editor_form(
    visitor: &Visitor,
    target: Target,
    draft: &Draft,
    unsaved: Option<&Unsaved>,
    suggestions: &[String],
    preview: Markup,
) -> Markup {
    let refusals = unsaved.map_or(&[][..], Unsaved::refusals);
    let error = |field: &str| Refusal::for_field(refusals, field);
    let zones = ax_cron::Zone::names();
    let overlaps: Vec<&str> = OverlapPolicy::ALL.iter().map(|p| p.as_str()).collect();
    let (back, version) = match target {
        Target::New => ("/console/tasks".to_string(), None),
        Target::Existing { id, version } => (task_href(id), version),
    };
    html! {
        @match unsaved {
            Some(Unsaved::Refused(refusals)) => {
                div.error role="alert" #form-error {
                    @match refusals.len() {
                        1 => { "Not saved; change this field:" }
                        n => { "Not saved; change these " (n) " fields:" }
                    }
                    ul.refusals {
                        @for refusal in refusals {
                            li {
                                @match (&refusal.field, refusal.label()) {
                                    (Some(field), Some(label)) => {
                                        a href=(format!("#{}", form_field(field))) { (label) } ": "
                                    }
                                    _ => {}
                                }
                                (refusal.message)
                            }
                        }
                    }
                }
            }
            Some(Unsaved::Changed(yours)) => {
                div.error role="alert" #form-error {
                    "Not saved: this task changed since you opened it. The form shows it as it is now; your edit was not applied."
                    @if !yours.is_empty() {
                        " What you had sent, where it differs:"
                        ul.changes { @for (name, value) in yours { li { code { (name) } ": " code { (value) } } } }
                    }
                }
            }
            None => {}
        }
        form.editor method="post" action=(target.action()) novalidate {
            (csrf_field(visitor))
            @if let Some(version) = version { input type="hidden" name="version" value=(version); }
            fieldset {
                legend { "Task" }
                (layout::input("name", NAME.label, "text", Some(&draft.name), error("name").as_deref()))
                (layout::input("scene", SCENE.label, "text", Some(&draft.scene), error("scene").as_deref()))
                (layout::input("handlerUrl", HANDLER_URL.label, "url", Some(&draft.handler_url), error("handlerUrl").as_deref()))
                (layout::input("executor", EXECUTOR.label, "text", Some(&draft.executor), error("executor").as_deref()))
                (layout::checkbox("enabled", ENABLED.label, draft.enabled))
            }
            fieldset {
                legend { "Schedule" }
                (layout::input("cron", CRON.label, "text", Some(&draft.cron), error("cron").as_deref()))
                (layout::searchable("timeZone", TIME_ZONE.label, &draft.time_zone, &zones, error("timeZone").as_deref()))
                (layout::textarea("calendars", CALENDARS.label, &draft.calendars, 2, error("calendars").as_deref()))
                p.hint {
                    "Policy SKIP (the default), PREVIOUS_OPEN_DAY or NEXT_OPEN_DAY; "
                    a href="/console/calendars" { "the calendars" } "."
                }
                section.preview aria-labelledby="preview-heading" {
                    h2 #preview-heading { "Next 10 fire times" }
                    div #preview aria-live="polite" { (preview) }
                }
                (layout::select_of("overlap", OVERLAP.label, &overlaps, &draft.overlap, error("overlap").as_deref()))
            }
            fieldset {
                legend { "Params" }
                (layout::textarea("params", PARAMS.label, &draft.params, 6, error("params").as_deref()))
                p.hint #params-check aria-live="polite" {}
            }
            fieldset {
                legend { "Dependencies" }
                (layout::textarea("dependsOn", DEPENDS_ON.label, &draft.depends_on, 3, error("dependsOn").as_deref()))
                @if !suggestions.is_empty() {
                    details {
                        summary { "Tasks of scene " (draft.scene_or_default()) }
                        ul.names { @for name in suggestions { li { code { (name) } } } }
                    }
                }
            }
            fieldset {
                legend { "Retries and limits" }
                div.grid {
                    @for field in numbers() {
                        (layout::number(field.name, field.label, &field.hint(), draft.number(field.name), error(field.name).as_deref()))
                    }
                }
            }
            fieldset {
                legend { "Labels" }
                (layout::textarea("labels", LABELS.label, &draft.labels, 3, error("labels").as_deref()))
                p.hint { "The tasks list filters by one (key=value). A key is 1-" (MAX_KEY_CHARS) " of a-z 0-9 _ . -; a value at most " (MAX_VALUE_CHARS) " characters." }
            }
            fieldset {
                legend { "Alerts" }
                (layout::textarea("alerts", ALERTS.label, &draft.alerts, 4, error("alerts").as_deref()))
                p.hint { "For example " code { r#"{"events": ["FAILED", "RESOLVED"], "channels": ["ops-hook"], "threshold": 3}"# } "; a paused task is muted." }
            }
            div.actions {
                button type="submit" { "Save task" }
                a href=(back) { "Cancel" }
            }
        }
    }
}
