//! The HTTP API: handlers parse and validate, make one call to the service, and map the
//! reply. JSON is camelCase; errors are `ApiError`.

mod alerts;
mod audit;
mod calendars;
mod callback;
mod cron;
mod endpoint;
mod events;
mod executors;
mod guard;
mod health;
pub(crate) mod json;
mod openapi;
mod run_log;
mod runs;
mod scenes;
mod schedule;
mod tasks;
mod token;
// Public for `ax apply`, which checks task files with the rules the API applies.
pub mod validate;
mod views;

use actix_web::{web, HttpRequest};

pub use endpoint::Endpoint;
pub use guard::{json_bodies, same_site};
pub use token::require_token;
// For the handlers, which name these (and `Actor`, `ApiState`) as `super::…`.
use json::{body_within_limit, MAX_BODY_BYTES, MAX_BULK_BODY_BYTES};
pub use validate::{task_body, task_input};

use crate::error::ApiError;
use crate::web::{Actor, ApiState};

macro_rules! endpoint {
    ($method:ident $path:literal, $handler:path, $admin:literal, $summary:literal) => {
        Endpoint {
            method: stringify!($method),
            path: $path,
            summary: $summary,
            admin: $admin,
            route: || web::$method().to($handler),
        }
    };
}

/// Every endpoint of the HTTP API.
pub const ENDPOINTS: &[Endpoint] = &[
    endpoint!(get "/healthz", health::healthz, false, "Health: every actor answers, the wheel ticks, the store answers (503 if not); whether Redis answers"),
    endpoint!(head "/healthz", health::healthz, false, "Health, status only: 200 or 503, no body"),
    endpoint!(get "/metrics", health::prometheus, false, "Metrics in the Prometheus text format"),
    endpoint!(get "/api/openapi.json", openapi_document, false, "This document"),
    endpoint!(post "/api/tasks", tasks::create, true, "Create a task"),
    endpoint!(post "/api/tasks/bulk", tasks::bulk, true, "Create or update up to 1,000 tasks, all or none, matched by scene and name"),
    endpoint!(get "/api/tasks", tasks::list, true, "List tasks by id, filtered by scene and status"),
    endpoint!(get "/api/tasks/{id}", tasks::get, true, "One task"),
    endpoint!(put "/api/tasks/{id}", tasks::update, true, "Replace a task's definition"),
    endpoint!(patch "/api/tasks/{id}", tasks::patch, true, "Merge fields into a task (JSON merge patch; null resets a field to its default)"),
    endpoint!(delete "/api/tasks/{id}", tasks::delete, true, "Delete a task; its history stays"),
    endpoint!(get "/api/tasks/{id}/instances", runs::for_task, true, "A task's runs, newest first"),
    endpoint!(post "/api/tasks/{id}/pause", tasks::pause, true, "Pause a task"),
    endpoint!(post "/api/tasks/{id}/resume", tasks::resume, true, "Resume a task from now"),
    endpoint!(post "/api/tasks/{id}/trigger", tasks::trigger, true, "Fire one run now, outside the schedule"),
    endpoint!(post "/api/tasks/{id}/backfill", tasks::backfill, true, "Give every fire time in [from, to) a run with its scheduled requestId; existing runs are left alone"),
    endpoint!(get "/api/tasks/{id}/stats", tasks::stats, true, "Run counts by status and trigger-lag percentiles"),
    endpoint!(get "/api/scenes", scenes::list, true, "Scenes with their task counts by status and their pause"),
    endpoint!(post "/api/scenes/{scene}/pause", scenes::pause, true, "Pause a scene: none of its tasks fires until it is resumed"),
    endpoint!(post "/api/scenes/{scene}/resume", scenes::resume, true, "Resume a scene: its tasks fire again, but those paused one by one"),
    endpoint!(get "/api/scenes/{scene}/alerts", scenes::alerts, true, "A scene's alert rule (null: none) and the rule its tasks follow"),
    endpoint!(put "/api/scenes/{scene}/alerts", scenes::put_alerts, true, "Set a scene's alert rule (events, channels, threshold, windowSecs, silenceSecs), or null to follow alerts.default"),
    endpoint!(get "/api/instances", runs::history, true, "Run history with filters and a cursor"),
    endpoint!(get "/api/instances/{requestId}", runs::get, true, "One run by request id"),
    endpoint!(post "/api/instances/{requestId}/cancel", runs::cancel, true, "Cancel an open run: no further attempt, later results change nothing (409 if final)"),
    endpoint!(post "/api/instances/{requestId}/log", run_log::append, false, "An executor adds log lines and progress to an attempt of an open run (its callbackToken, or an admin's or executor's token)"),
    endpoint!(get "/api/instances/{requestId}/log", run_log::get, true, "A run's log lines, progress and output, by attempt"),
    endpoint!(get "/api/events", events::stream, true, "Run changes as server-sent events (text/event-stream): event run {requestId, taskId, scene, status} and event log {requestId, taskId, scene, attempt, progress, lines}; ?task=&scene="),
    endpoint!(post "/api/callback", callback::report, false, "An executor reports a run's result"),
    endpoint!(get "/api/cluster", health::cluster, true, "Live ax processes"),
    endpoint!(get "/api/executors", executors::list, true, "Executor groups with their members and each member's health in this ax process"),
    endpoint!(get "/api/executors/{group}", executors::get, true, "One executor group"),
    endpoint!(put "/api/executors/{group}", executors::put, true, "Create or replace an executor group: routing, maxInFlight per member, defined members (registered ones stay)"),
    endpoint!(delete "/api/executors/{group}", executors::delete, true, "Delete an executor group (409 while tasks use it)"),
    endpoint!(post "/api/executors/{group}/members", executors::register, true, "An executor registers itself in a group (created with the defaults if missing), or heartbeats"),
    endpoint!(delete "/api/executors/{group}/members", executors::unregister, true, "An executor leaves its group (?url=)"),
    endpoint!(get "/api/calendars", calendars::list, true, "Calendars of days off, each with how many tasks name it"),
    endpoint!(get "/api/calendars/{name}", calendars::get, true, "One calendar, with the first tasks naming it"),
    endpoint!(put "/api/calendars/{name}", calendars::put, true, "Create or replace a calendar (dates, ranges from-to, weekdays); the tasks naming it move their next runs onto its days at once"),
    endpoint!(delete "/api/calendars/{name}", calendars::delete, true, "Delete a calendar (409 while tasks name it)"),
    endpoint!(get "/api/alerts", alerts::list, true, "Alerts, newest first, one per channel: pending, sent, folded (told with the next alert) or failed; ?task=&scene=&status=&limit=&cursor="),
    endpoint!(post "/api/alerts/test", alerts::test, true, "Send a test alert to a configured channel now: 200 once it took it, 502 with the channel's error"),
    endpoint!(get "/api/audit", audit::list, true, "The audit log, newest first: who changed what and when"),
    endpoint!(get "/api/schedule/load", schedule::load, true, "The schedule ahead across all tasks: runs per minute over the next ?hours= (1-168, default 24), the busiest seconds with their tasks, and a jitter suggestion"),
    endpoint!(get "/api/cron/next", cron::next, true, "The next fire times of a cron expression in a time zone, less the days off of calendars (?calendar=a,b&policy=), with DST notes, the fires on days off, and a description in English"),
];

/// Mounts every endpoint.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.app_data(
        web::PathConfig::default()
            .error_handler(|err, _| ApiError::invalid("path", err.to_string()).into()),
    );
    // The router tries routes in order, matching patterns with parameters by regex: the
    // endpoints executors call thousands of times a second (callbacks) go first.
    let (open, admin): (Vec<&Endpoint>, Vec<&Endpoint>) = ENDPOINTS.iter().partition(|e| !e.admin);
    for endpoint in open.into_iter().chain(admin) {
        cfg.route(endpoint.path, (endpoint.route)());
    }
    cfg.default_service(web::to(not_found));
}

/// `GET /api/openapi.json`: the document of [`ENDPOINTS`].
async fn openapi_document() -> actix_web::HttpResponse {
    actix_web::HttpResponse::Ok().json(openapi::openapi(ENDPOINTS))
}

/// No endpoint took the request: a known path asked with another method is a 405 naming the
/// methods it serves; anything else a 404.
async fn not_found(req: HttpRequest) -> Result<actix_web::HttpResponse, ApiError> {
    let allow = methods_of(req.path());
    if !allow.is_empty() {
        return Err(ApiError::MethodNotAllowed {
            method: req.method().to_string(),
            allow,
        });
    }
    Err(ApiError::NotFound(format!(
        "no route for {} {}",
        req.method(),
        req.path()
    )))
}

/// Whether the endpoint serving this call proves itself (no token checked in front of it);
/// another method on a fixed path of one is answered 405 as it is.
pub fn is_open(method: &actix_web::http::Method, path: &str) -> bool {
    ENDPOINTS.iter().filter(|e| !e.admin).any(|e| {
        e.path == path
            || (e.method.eq_ignore_ascii_case(method.as_str()) && path_matches(e.path, path))
    })
}

/// The methods the endpoints of `path` serve, upper case, in table order.
fn methods_of(path: &str) -> Vec<&'static str> {
    let mut methods: Vec<&'static str> = Vec::new();
    for endpoint in ENDPOINTS.iter().filter(|e| path_matches(e.path, path)) {
        let method = match endpoint.method {
            "get" => "GET",
            "head" => "HEAD",
            "post" => "POST",
            "put" => "PUT",
            "patch" => "PATCH",
            "delete" => "DELETE",
            _ => continue,
        };
        if !methods.contains(&method) {
            methods.push(method);
        }
    }
    methods
}

/// Whether `path` fits `pattern`, each `{name}` standing for one non-empty segment.
fn path_matches(pattern: &str, path: &str) -> bool {
    let (pattern, path): (Vec<&str>, Vec<&str>) =
        (pattern.split('/').collect(), path.split('/').collect());
    pattern.len() == path.len()
        && pattern.iter().zip(&path).all(|(want, got)| {
            if want.starts_with('{') && want.ends_with('}') {
                !got.is_empty()
            } else {
                want == got
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_path_names_the_methods_it_serves() {
        assert_eq!(
            methods_of("/api/tasks/7"),
            ["GET", "PUT", "PATCH", "DELETE"]
        );
        assert_eq!(methods_of("/api/tasks"), ["POST", "GET"]);
        assert_eq!(methods_of("/healthz"), ["GET", "HEAD"]);
        assert_eq!(methods_of("/api/scenes/a/pause"), ["POST"]);
        for unknown in [
            "/api/tasks/",
            "/api/tasks/7/x",
            "/nope",
            "/api/tasks//pause",
        ] {
            assert!(methods_of(unknown).is_empty(), "{unknown}");
        }
    }
}
