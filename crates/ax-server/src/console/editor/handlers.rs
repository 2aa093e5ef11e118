//! The editor's handlers: open the form, and save what it sends through the API's own
//! validation and the same service calls.

use actix_web::{web, HttpRequest, HttpResponse};

use super::draft::Draft;
use super::page::{editor, Target};
use super::refusals::{every_refusal, Refusal, Unsaved};
use super::upstreams::resolve_upstreams;
use crate::api::validate;
use crate::console::layout::{notice_link, Notice};
use crate::console::paths::task_href;
use crate::console::session::{Submitted, Visitor};
use crate::console::tasks::parse_task_id;
use crate::console::{admins_only, filters, see_other, ConsoleError};
use crate::service::error::ServiceError;
use crate::service::task_details::TaskDetails;
use crate::web::ApiState;
use ax_store::queries::tasks::Versions;

/// `GET /console/tasks/new?scene=`.
pub async fn new_form(
    state: web::Data<ApiState>,
    visitor: Visitor,
    req: HttpRequest,
) -> Result<HttpResponse, ConsoleError> {
    admins_only(&visitor)?;
    let params = filters::params(&req);
    let draft = Draft::new(params.get("scene").map(String::as_str));
    editor(&state, &visitor, Target::New, &draft, None).await
}

/// `POST /console/tasks/new`: the API's create.
pub async fn create(
    state: web::Data<ApiState>,
    visitor: Visitor,
    form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    save(&state, &visitor, Target::New, Draft::sent(&form)).await
}

/// `GET /console/tasks/{id}/edit`.
pub async fn edit_form(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    admins_only(&visitor)?;
    let id = parse_task_id(&path)?;
    let details = state.service.task(id).await?;
    let upstreams = state
        .service
        .tasks_by_id(details.depends_on.clone())
        .await?;
    let draft = Draft::of(&details.task, &upstreams);
    let target = Target::Existing {
        id,
        version: Some(details.task.version),
    };
    editor(&state, &visitor, target, &draft, None).await
}

/// `POST /console/tasks/{id}/edit`: the API's replace (`PUT`), with the version the form was
/// opened on as its `If-Match`.
pub async fn update(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
    form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let id = parse_task_id(&path)?;
    let version = form.get("version").and_then(|v| v.parse().ok());
    let target = Target::Existing { id, version };
    save(&state, &visitor, target, Draft::sent(&form)).await
}

/// Saves the draft as the API would; a refusal shows the editor again with its message, and a
/// task changed since the form was opened shows it as it is now, the edit not applied.
async fn save(
    state: &ApiState,
    visitor: &Visitor,
    target: Target,
    draft: Draft,
) -> Result<HttpResponse, ConsoleError> {
    let (target, draft, unsaved, status) = match saved(state, visitor, target, &draft).await {
        Ok(details) => {
            let notice = match target {
                Target::New => Notice::Created,
                Target::Existing { .. } => Notice::Saved,
            };
            return Ok(see_other(&notice_link(&task_href(details.task.id), notice)));
        }
        Err(ConsoleError::Refused(err)) => {
            let status = actix_web::ResponseError::status_code(&err);
            (target, draft, Unsaved::Refused(Refusal::all(&err)), status)
        }
        Err(ConsoleError::Changed(current)) => {
            let upstreams = state
                .service
                .tasks_by_id(current.depends_on.clone())
                .await?;
            let now = Draft::of(&current.task, &upstreams);
            let yours = draft.changes_from(&now);
            let target = Target::Existing {
                id: current.task.id,
                version: Some(current.task.version),
            };
            let status = actix_web::http::StatusCode::PRECONDITION_FAILED;
            (target, now, Unsaved::Changed(yours), status)
        }
        Err(other) => return Err(other),
    };
    let mut response = editor(state, visitor, target, &draft, Some(&unsaved)).await?;
    *response.status_mut() = status;
    Ok(response)
}

async fn saved(
    state: &ApiState,
    visitor: &Visitor,
    target: Target,
    draft: &Draft,
) -> Result<TaskDetails, ConsoleError> {
    // An unknown upstream is refused with the other fields, checked without it.
    let (upstreams, mut own) = match resolve_upstreams(
        &state.service,
        draft.scene_or_default(),
        draft.upstream_lines(),
    )
    .await
    {
        Ok(ids) => (ids, Vec::new()),
        Err(ConsoleError::Refused(err)) => (Vec::new(), vec![err]),
        Err(other) => return Err(other),
    };
    let (body, unread) = draft.body(&upstreams);
    own.extend(unread);
    let input = match validate::task_input(body, &state.security.allowlist) {
        Ok(input) if own.is_empty() => input,
        checked => return Err(every_refusal(own, checked.err()).into()),
    };
    let actor = &visitor.principal;
    let saved = match target {
        Target::New => state.service.create_task(input, actor).await,
        Target::Existing { id, version } => {
            let versions = version.map_or(Versions::Any, |v| Versions::OneOf(vec![v]));
            state.service.update_task(id, versions, input, actor).await
        }
    };
    saved.map_err(|err| match err {
        ServiceError::Stale(current) => ConsoleError::Changed(current),
        other => other.into(),
    })
}
