//! `GET /api/openapi.json`: the OpenAPI 3.0 document of the HTTP API, built from the same
//! endpoint table the router mounts.

use serde_json::{json, Map, Value};

use super::endpoint::Endpoint;
use crate::service::executors::DEFAULT_MAX_IN_FLIGHT;
use ax_core::alerting::AlertStatus;
use ax_core::dispatch::routing::Routing;
use ax_core::run::{ReportedStatus, RunStatus, TriggerType};
use ax_core::task::fields;
use ax_store::rows::models::AuditAction;
use ax_store::rows::models::TaskStatus;

/// The document: every endpoint of `endpoints`, with its parameters, body and replies.
pub fn openapi(endpoints: &[Endpoint]) -> Value {
    let mut paths = Map::new();
    for endpoint in endpoints {
        let op = operation(
            endpoint.method,
            endpoint.path,
            endpoint.summary,
            endpoint.admin,
        );
        if let Some(item) = paths
            .entry(endpoint.path)
            .or_insert_with(|| json!({}))
            .as_object_mut()
        {
            item.insert(endpoint.method.to_string(), op);
        }
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "ax (Action eXecutor)",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A distributed cron scheduler that calls HTTP handlers. Each run \
                is POSTed to its task's handlerUrl as {taskId, requestId, params, scheduledAt, \
                attempt, callbackToken}. The handler's reply means what HTTP says: a 2xx whose \
                JSON body has \"status\": \"SUCCESS\" or \"FAILED\" (with code, message, \
                retry) is the result, whatever the code; otherwise 202 Accepted leaves the run \
                RUNNING until the executor reports to POST /api/callback (or timeoutMs passes), \
                and 200, 201, 204 (any other 2xx) are a success; a non-2xx reply, a connection \
                error or a timeout is a failed attempt.",
        },
        "paths": paths,
        "components": {
            "securitySchemes": {"adminToken": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas(),
        },
    })
}

fn operation(method: &str, path: &str, summary: &str, admin: bool) -> Value {
    let mut parameters: Vec<Value> = path
        .split('/')
        .filter_map(|part| part.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| {
            // Task ids are integers; request ids and scene names are strings.
            let kind = if name == "id" { "integer" } else { "string" };
            json!({"name": name, "in": "path", "required": true, "schema": {"type": kind}})
        })
        .collect();
    parameters.extend(query_parameters(method, path));
    let conditional = matches!(
        (method, path),
        ("put" | "patch" | "delete", "/api/tasks/{id}")
    );
    if conditional {
        parameters.push(
            json!({"name": "If-Match", "in": "header", "required": false,
            "description": "the task's ETag (\"3\") or *: the change is made only if the task \
                is at that version, else 412 (strong comparison: a weak tag never matches)",
            "schema": {"type": "string"}}),
        );
    }
    let (status, reply) = reply(method, path);
    let mut success = match (method, path) {
        ("get", "/metrics") => {
            json!({"description": "success", "content": {"text/plain": {"schema": reply}}})
        }
        ("get", "/api/events") => json!({"description": "server-sent events, open until the \
            client leaves: `event: run` with data {requestId, taskId, scene, status} \
            per run change, `event: log` with data {requestId, taskId, scene, attempt, \
            progress, lines} per attempt log that grew",
            "content": {"text/event-stream": {"schema": reply}}}),
        _ => json!({"description": "success", "content": content(&reply)}),
    };
    if reply == schema_ref("Task") {
        success["headers"] = json!({"ETag": {"schema": {"type": "string"},
            "description": "the task's version, a strong tag (\"3\"): send it as If-Match"}});
    }
    let mut responses = json!({
        status: success,
        "400": error("invalid input; `field` names it, `errors` every field refused"),
        "404": error("not found"),
        "503": error("store or Redis unavailable"),
        "421": error("a Host this ax does not answer to (`field`: Host)"),
    });
    if !matches!(method, "get" | "head") {
        let cross_site = "sent by a page of another site (`field`: Origin or Sec-Fetch-Site)";
        let why = match admin {
            true => format!("a viewer's token: it may read, not change; or {cross_site}"),
            false => cross_site.to_string(),
        };
        responses["403"] = error(&why);
    }
    if admin {
        responses["401"] = error("missing or wrong token");
    }
    if conditional {
        responses["412"] = error(
            "If-Match names none of the versions the task is at (`field`: If-Match; the ETag \
             header gives the current one)",
        );
    }
    match (method, path) {
        ("post", "/api/callback") => {
            responses["403"] = error(
                "the callback token does not match the run, or a page of another site sent it",
            );
        }
        ("post", "/api/tasks/bulk") => {
            responses["409"] = error(
                "without upsert: a task of that scene and name exists (`field`: items[i].name)",
            );
            responses["413"] = error("body larger than 16 MiB");
        }
        ("post", "/api/instances/{requestId}/cancel") => {
            responses["409"] = error("the run is final already");
        }
        ("post", "/api/instances/{requestId}/log") => {
            responses["403"] = error(
                "the callback token does not match the run, a viewer's token (401 without any \
                 when ax has tokens), or a page of another site sent it",
            );
            responses["409"] = error(
                "the attempt was never dispatched (`field`: attempt), or the run ended longer \
                 ago than run_logs.grace_secs",
            );
        }
        ("post", "/api/tasks/{id}/backfill") => {
            responses["400"] = error(
                "invalid input; `field` names it (`to`: not after from, later than now, or more \
                 than 10,000 fire times)",
            );
        }
        ("post", "/api/tasks") | ("put" | "patch", "/api/tasks/{id}") => {
            responses["409"] = error("the scene has another task of that name (`field`: name)");
        }
        ("delete", "/api/executors/{group}") => {
            responses["409"] = error("tasks use the group: the message names them");
        }
        ("post", "/api/executors/{group}/members") => {
            responses["403"] = error(
                "an executor's token outside its groups (`field`: group), or a member that \
                 registered itself with another token (`field`: url); a viewer's token; or \
                 sent by a page of another site (`field`: Origin or Sec-Fetch-Site)",
            );
            responses["409"] = error(
                "the group holds executors.max_registered_members registered members already \
                 (`field`: group)",
            );
        }
        ("delete", "/api/executors/{group}/members") => {
            responses["403"] = error(
                "an executor's token outside its groups (`field`: group), or a member it did \
                 not register: defined by an admin, or registered with another token (`field`: \
                 url); a viewer's token; or sent by a page of another site (`field`: Origin or \
                 Sec-Fetch-Site)",
            );
        }
        _ => {}
    }
    let mut op = json!({
        "operationId": operation_id(method, path),
        "summary": summary,
        "parameters": parameters,
        "responses": responses,
    });
    if let Some(body) = request_body(method, path) {
        // A manual run's body is optional: without one it runs with the task's params.
        let required = !path.ends_with("/trigger");
        op["requestBody"] = json!({"required": required, "content": content(&body)});
        if op["responses"].get("413").is_none() {
            op["responses"]["413"] = error("body larger than 1 MiB");
        }
        op["responses"]["415"] = error("a body whose Content-Type is not application/json");
    }
    if admin {
        op["security"] = json!([{"adminToken": []}]);
    }
    op
}

/// `getApiTasksIdInstances` for `GET /api/tasks/{id}/instances`: unique, as method and path
/// are.
fn operation_id(method: &str, path: &str) -> String {
    let mut id = method.to_string();
    for word in path.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            id.push(first.to_ascii_uppercase());
            id.extend(chars);
        }
    }
    id
}

fn content(schema: &Value) -> Value {
    json!({"application/json": {"schema": schema}})
}

fn error(description: &str) -> Value {
    json!({"description": description, "content": content(&schema_ref("Error"))})
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn query(name: &str, kind: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "required": false, "description": description,
           "schema": {"type": kind}})
}

fn query_parameters(method: &str, path: &str) -> Vec<Value> {
    let page = || {
        vec![
            query("limit", "integer", "1-500, default 50"),
            query("offset", "integer", "default 0"),
        ]
    };
    match (method, path) {
        ("get", "/api/tasks") => {
            let mut params = vec![
                query("scene", "string", "only this scene"),
                query("status", "string", "ENABLED or PAUSED"),
                query(
                    "label",
                    "string",
                    "KEY=VALUE (team=billing): only tasks with this label",
                ),
            ];
            params.extend(page());
            params
        }
        ("get", "/api/tasks/{id}/instances") => page(),
        ("get", "/api/events") => vec![
            query("task", "integer", "only this task's runs"),
            query("scene", "string", "only this scene's runs"),
        ],
        ("get", "/api/schedule/load") => vec![query("hours", "integer", "1-168, default 24")],
        ("get", "/api/tasks/{id}/stats") => {
            vec![query(
                "windowSecs",
                "integer",
                "60 s - 31 days, default one day",
            )]
        }
        ("get", "/api/audit") => vec![
            query("limit", "integer", "1-500, default 50"),
            query("cursor", "string", "nextCursor of the previous page"),
        ],
        ("get", "/api/cron/next") => vec![
            query("expr", "string", "the cron expression (required)"),
            query("tz", "string", "IANA time zone, default UTC"),
            query(
                "from",
                "string",
                "list fire times after this (RFC3339), default now",
            ),
            query("count", "integer", "1-100, default 10"),
        ],
        ("delete", "/api/executors/{group}/members") => {
            vec![query(
                "url",
                "string",
                "the member's URL, as it registered (required)",
            )]
        }
        ("get", "/api/alerts") => vec![
            query("task", "integer", "only this task's alerts"),
            query("scene", "string", "only alerts about this scene's tasks"),
            query("status", "string", &AlertStatus::choices()),
            query("limit", "integer", "1-500, default 50"),
            query("cursor", "string", "nextCursor of the previous page"),
        ],
        ("get", "/api/instances") => vec![
            query("taskId", "integer", "only this task's runs"),
            query("scene", "string", "only runs of this scene's tasks"),
            query("status", "string", &RunStatus::choices()),
            query("from", "string", "scheduled at or after (RFC3339)"),
            query("to", "string", "scheduled before (RFC3339)"),
            query("limit", "integer", "1-500, default 50"),
            query("cursor", "string", "nextCursor of the previous page"),
            query(
                "requestIdPrefix",
                "string",
                "only runs whose requestId starts with this (6-32 hex digits, dashes optional), \
                 the latest made first, at most limit, no next page; alone, without the other \
                 filters or a cursor",
            ),
        ],
        _ => Vec::new(),
    }
}

fn request_body(method: &str, path: &str) -> Option<Value> {
    match (method, path) {
        ("post", "/api/tasks") | ("put", "/api/tasks/{id}") => Some(schema_ref("TaskInput")),
        ("post", "/api/tasks/{id}/trigger") => Some(json!({"type": "object", "properties": {
            "params": {"type": "object", "description": "overrides the task's params"}}})),
        ("patch", "/api/tasks/{id}") => Some(json!({"type": "object",
            "description": "any TaskInput fields: merged into the task (RFC 7386); null resets one to its default"})),
        ("post", "/api/callback") => Some(schema_ref("Callback")),
        ("post", "/api/instances/{requestId}/log") => {
            Some(json!({"type": "object", "properties": {
            "callbackToken": {"type": "string", "description": "the run's, from the dispatch body; \
                or send an admin's or executor's token"},
            "attempt": {"type": "integer", "minimum": 1, "description": "default: the one dispatched last"},
            "lines": {"type": "array", "maxItems": 1000, "items": {"type": "string"},
                "description": "one line per newline, at most 1,000 lines in all once split \
                (more: 400 naming lines); each line kept without control characters but tabs, \
                cut to 4,096 characters"},
            "progress": {"type": "integer", "minimum": 0, "maximum": 100}}}))
        }
        ("put", "/api/executors/{group}") => Some(json!({"type": "object", "properties": {
            "routing": {"type": "string", "enum": Routing::NAMES, "default": Routing::DEFAULT.name()},
            "maxInFlight": {"type": "integer", "minimum": 1, "default": DEFAULT_MAX_IN_FLIGHT,
                "description": "requests in flight to each member at most"},
            "members": {"type": "array", "items": {"type": "string", "format": "uri"},
                "description": "defined members, in order; members that registered themselves stay"}}})),
        ("post", "/api/executors/{group}/members") => Some(json!({"type": "object",
            "required": ["url"], "properties": {
            "url": {"type": "string", "format": "uri", "description": "the member's base URL"},
            "capacity": {"type": "integer", "minimum": 1,
                "description": "caps its requests in flight below the group's maxInFlight"}}})),
        ("post", "/api/tasks/{id}/backfill") => Some(json!({"type": "object",
            "required": ["from", "to"], "properties": {
                "from": {"type": "string", "format": "date-time"},
                "to": {"type": "string", "format": "date-time",
                    "description": "exclusive; not later than now"}}})),
        ("post", "/api/tasks/bulk") => Some(json!({"type": "object", "required": ["items"],
            "properties": {
                "items": {"type": "array", "maxItems": 1000, "items": schema_ref("TaskInput")},
                "upsert": {"type": "boolean", "default": false,
                    "description": "update the tasks whose scene and name exist (else 409)"}}})),
        _ => None,
    }
}

fn reply(method: &str, path: &str) -> (&'static str, Value) {
    let page = |item: &str| {
        json!({"type": "object", "properties": {
            "items": {"type": "array", "items": schema_ref(item)},
            "total": {"type": "integer"}, "limit": {"type": "integer"}, "offset": {"type": "integer"}}})
    };
    match (method, path) {
        ("post", "/api/tasks") => ("201", schema_ref("Task")),
        ("post", "/api/tasks/bulk") => (
            "200",
            json!({"type": "object", "properties": {
            "created": {"type": "integer"}, "updated": {"type": "integer"},
            "unchanged": {"type": "integer"}}}),
        ),
        ("post", "/api/tasks/{id}/trigger") => ("201", schema_ref("Instance")),
        ("post", "/api/instances/{requestId}/cancel") => ("200", schema_ref("Instance")),
        ("post", "/api/tasks/{id}/backfill") => (
            "202",
            json!({"type": "object", "properties": {
            "runs": {"type": "integer", "description": "runs recorded (triggerType BACKFILL)"},
            "existing": {"type": "integer", "description": "fire times whose run existed, left alone"}}}),
        ),
        ("delete", _) => ("204", json!({})),
        ("get", "/api/tasks") => ("200", page("Task")),
        ("get", "/api/tasks/{id}/instances") => ("200", page("Instance")),
        ("get", "/api/instances") => (
            "200",
            json!({"type": "object", "properties": {
            "items": {"type": "array", "items": schema_ref("Instance")},
            "nextCursor": {"type": "string", "nullable": true}}}),
        ),
        ("get", "/api/instances/{requestId}") => ("200", schema_ref("RunDetail")),
        ("post", "/api/instances/{requestId}/log") => (
            "200",
            json!({"type": "object", "properties": {
            "requestId": {"type": "string"}, "attempt": {"type": "integer"},
            "lines": {"type": "integer", "description": "lines the attempt's log holds now"},
            "droppedLines": {"type": "integer", "description": "oldest lines gone past the bounds"}}}),
        ),
        ("get", "/api/instances/{requestId}/log") => (
            "200",
            json!({"type": "object", "properties": {
            "requestId": {"type": "string"},
            "attempts": {"type": "array", "items": {"type": "object", "properties": {
                "attempt": {"type": "integer"},
                "progress": {"type": "integer", "nullable": true},
                "droppedLines": {"type": "integer"},
                "output": {"type": "string", "nullable": true,
                    "description": "the output of the attempt's reply or callback (its last 64 KiB)"},
                "lines": {"type": "array", "items": {"type": "object", "properties": {
                    "at": {"type": "string", "format": "date-time"}, "text": {"type": "string"},
                    "marker": {"type": "boolean", "description": "stands for dropped lines"}}}}}}}}}),
        ),
        ("get", "/api/tasks/{id}/stats") => ("200", schema_ref("Stats")),
        ("post", "/api/callback") => (
            "200",
            json!({"type": "object", "properties": {
            "requestId": {"type": "string"}, "status": {"type": "string"},
            "applied": {"type": "boolean"}, "message": {"type": "string"}}}),
        ),
        ("get", "/metrics" | "/api/events") => ("200", json!({"type": "string"})),
        ("get", "/api/executors") => (
            "200",
            json!({"type": "object", "properties": {
            "items": {"type": "array", "items": schema_ref("ExecutorGroup")}}}),
        ),
        ("get" | "put", "/api/executors/{group}") => ("200", schema_ref("ExecutorGroup")),
        ("post", "/api/executors/{group}/members") => (
            "201",
            json!({"type": "object", "description": "201 when it joined, 200 for a heartbeat",
                "properties": {"group": {"type": "string"}, "url": {"type": "string"},
                "heartbeatSecs": {"type": "integer",
                    "description": "register again this often, or be dropped"}}}),
        ),
        ("get", "/api/scenes") => (
            "200",
            json!({"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "scene": {"type": "string"}, "total": {"type": "integer"},
                "tasks": {"type": "object", "additionalProperties": {"type": "integer"},
                    "description": "task counts by their own status"},
                "paused": {"type": "boolean",
                    "description": "the scene's own pause: none of its tasks fires while it is paused"},
                "pausedAt": {"type": "string", "format": "date-time", "nullable": true}}}}}}),
        ),
        ("post", "/api/scenes/{scene}/pause") => (
            "200",
            json!({"type": "object", "properties": {"scene": {"type": "string"},
            "paused": {"type": "integer",
                "description": "its tasks that stop firing (0 if it was paused already)"}}}),
        ),
        ("post", "/api/scenes/{scene}/resume") => (
            "200",
            json!({"type": "object", "properties": {"scene": {"type": "string"},
            "resumed": {"type": "integer",
                "description": "its tasks that fire again (those paused one by one stay paused)"}}}),
        ),
        ("get", "/api/audit") => (
            "200",
            json!({"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "id": {"type": "integer"}, "at": {"type": "string", "format": "date-time"},
                "actor": {"type": "string", "description": "the token's name, or anonymous"},
                "action": {"type": "string", "enum": AuditAction::ALL},
                "target": {"type": "string"},
                "summary": {"type": "string", "description": "before and after, briefly"}}}},
            "nextCursor": {"type": "string", "nullable": true}}}),
        ),
        ("get", "/api/cron/next") => (
            "200",
            json!({"type": "object", "properties": {
            "times": {"type": "array", "items": {"type": "object", "properties": {
                "utc": {"type": "string", "format": "date-time"},
                "local": {"type": "string", "format": "date-time"},
                "note": {"type": "string", "nullable": true,
                    "description": "moved from 02:30 (DST gap), repeated 02:00 (DST overlap)"}}}},
            "description": {"type": "string", "description": "the expression in English"}}}),
        ),
        (_, path) if path.starts_with("/api/tasks/{id}") => ("200", schema_ref("Task")),
        _ => ("200", json!({"type": "object"})),
    }
}

fn schemas() -> Value {
    let string = json!({"type": "string"});
    let time = json!({"type": "string", "format": "date-time"});
    let int = json!({"type": "integer"});
    let opt_string = json!({"type": "string", "nullable": true});
    let opt_time = json!({"type": "string", "format": "date-time", "nullable": true});
    json!({
        "Error": {"type": "object", "properties": {"error": {"type": "object",
            "required": ["code", "message"], "properties": {
            "code": string, "message": string,
            "field": {"type": "string", "description": "the offending field or parameter, \
                when there is one (the first of `errors`)"},
            "errors": {"type": "array", "description": "a 400 naming a field: every field \
                refused, each with its message, the one in `field` and `message` first; a task \
                body lists each bad field at once (`items[i].field` in a bulk registration)",
                "items": {"type": "object", "required": ["field", "message"],
                    "properties": {"field": string, "message": string}}}}}}},
        "TaskInput": fields::input_schema(),
        "Task": {"allOf": [{"$ref": "#/components/schemas/TaskInput"}, {"type": "object", "properties": {
            "id": int,
            "status": {"type": "string", "enum": TaskStatus::ALL,
                "description": "the task's own state; it fires when neither it nor its scene is paused"},
            "scenePaused": {"type": "boolean", "description": "whether its scene is paused"},
            "version": {"type": "integer",
                "description": "raised by every change of its definition (not by nextRunAt moving on); the ETag"},
            "nextRunAt": {"type": "string", "format": "date-time", "nullable": true},
            "createdAt": time, "updatedAt": time}}]},
        "Instance": {"type": "object", "properties": {
            "id": int, "taskId": int, "requestId": string,
            "triggerType": {"type": "string", "enum": TriggerType::ALL},
            "scheduledAt": time, "triggerAt": time,
            "status": {"type": "string", "enum": RunStatus::ALL},
            "attempt": int, "retryCount": int, "code": opt_string, "message": opt_string,
            "deadlineAt": opt_time, "firedBy": string, "createdAt": time,
            "nextAttemptAt": {"type": "string", "format": "date-time", "nullable": true,
                "description": "while a retry waits: when it is due"},
            "finishedAt": opt_time,
            "params": {"type": "object", "nullable": true,
                "description": "a manual run's own params, when they overrode the task's"},
            "dispatchedAttempt": int,
            "claimedUntil": {"type": "string", "format": "date-time", "nullable": true,
                "description": "while a dispatcher holds the current attempt: when its claim lapses"},
            "dispatchedAt": {"type": "string", "format": "date-time", "nullable": true,
                "description": "when the first attempt was sent; the run's lag is this minus scheduledAt"},
            "member": {"type": "string", "nullable": true,
                "description": "the executor group member that served its last attempt"},
            "shardIndex": {"type": "integer", "nullable": true,
                "description": "a broadcast run's shard of its fire, 0..shardTotal"},
            "shardTotal": {"type": "integer", "nullable": true,
                "description": "how many shards its fire has (one per live member at fire time)"}}},
        "RunDetail": {"allOf": [{"$ref": "#/components/schemas/Instance"}, {"type": "object", "properties": {
            "attempts": {"type": "array", "description": "attempts that failed and were retried, in order; the last attempt's outcome is the run's own",
                "items": {"type": "object", "properties": {
                    "attempt": int, "endedAt": time, "code": opt_string, "message": opt_string,
                    "process": {"type": "string", "description": "the ax process that dispatched it"},
                    "member": {"type": "string", "nullable": true,
                        "description": "the executor group member that served it"}}}},
            "shards": {"type": "array", "description": "a broadcast shard's fire: every shard in order, this run among them (absent for other runs)",
                "items": {"type": "object", "properties": {
                    "requestId": {"type": "string", "format": "uuid"},
                    "shardIndex": int, "status": {"type": "string", "enum": RunStatus::ALL},
                    "member": {"type": "string", "nullable": true}}}}}}]},
        "ExecutorGroup": {"type": "object", "properties": {
            "name": string, "routing": {"type": "string", "enum": Routing::NAMES},
            "maxInFlight": int, "updatedAt": time,
            "members": {"type": "array", "items": {"type": "object", "properties": {
                "url": string,
                "registered": {"type": "boolean",
                    "description": "registered itself (expires without heartbeats), else defined"},
                "capacity": {"type": "integer", "nullable": true},
                "registeredAt": {"type": "string", "format": "date-time", "nullable": true,
                    "description": "absent for a member GONE"},
                "lastSeenAt": opt_time,
                "state": {"type": "string", "enum": ["HEALTHY", "UNHEALTHY", "PROBING", "GONE"],
                    "description": "shared by the cluster: only transport failures count \
                        against a member; GONE: it expired or left (listed for an hour, never \
                        dispatched to)"},
                "goneAt": {"type": "string", "format": "date-time", "nullable": true,
                    "description": "when a GONE member expired or left"},
                "goneReason": {"type": "string", "nullable": true,
                    "description": "why it is GONE: expired, left or removed from the definition"},
                "unhealthyUntil": {"type": "string", "format": "date-time", "nullable": true,
                    "description": "set aside until then (its probe is due after)"},
                "lastFailureAt": {"type": "string", "format": "date-time", "nullable": true,
                    "description": "its last transport failure"},
                "lastError": {"type": "string", "nullable": true,
                    "description": "what its last transport failure said"},
                "inFlight": {"type": "integer", "description": "this ax process's requests to it"},
                "successes": {"type": "integer",
                    "description": "replies to this ax process's dispatches"},
                "failures": {"type": "integer",
                    "description": "transport failures of this ax process's dispatches"}}}}}},
        "Callback": {"type": "object", "required": ["requestId", "callbackToken", "status"], "properties": {
            "requestId": string, "callbackToken": string,
            "status": {"type": "string", "enum": ReportedStatus::ALL},
            "code": {"oneOf": [{"type": "string", "maxLength": 64}, {"type": "integer"}],
                "description": "a string without control characters, or an integer (stored as \
                    its decimal text: 0 as \"0\")"},
            "message": {"type": "string", "maxLength": 1024,
                "description": "stored with its control characters dropped but for newlines \
                    and tabs"},
            "stopRetry": {"type": "boolean",
                "description": "true: a failure is final, no further attempt"},
            "retry": {"type": "boolean", "description": "false: the same as stopRetry true"},
            "attempt": int,
            "output": {"type": "string", "maxLength": 65536,
                "description": "what the job printed or produced, kept with the attempt's log"}}},
        "Stats": {"type": "object", "properties": {
            "taskId": int, "from": time, "to": time, "total": int,
            "byStatus": {"type": "object", "additionalProperties": int},
            "overlap": {"type": "object", "description": "what the overlap policy did in the window",
                "properties": {"skipped": int, "replaced": int, "waiting": int}},
            "lagMs": {"type": "object", "nullable": true,
                "description": "first dispatch time minus scheduled time of the window's dispatched runs",
                "properties": {
                "p50": int, "p90": int, "p99": int, "max": int}}}},
    })
}
