//! The audit log page (`/console/audit?cursor=`): who changed what and when, newest first.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use maud::{html, Markup};

use super::filters::link;
use super::layout::{page, scrolling, stored_time, Section};
use super::session::Visitor;
use super::{ok, ConsoleError};
use crate::web::ApiState;
use ax_store::queries::audit::AuditRow;

/// Entries a page shows.
const PAGE: i64 = 50;

/// `GET /console/audit?cursor=`.
pub async fn list(
    state: web::Data<ApiState>,
    visitor: Visitor,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ConsoleError> {
    // A damaged cursor starts again from the newest entry.
    let before = query.get("cursor").and_then(|c| c.parse::<i64>().ok());
    let rows = state.service.audit_log(before, PAGE).await?;
    let next = (rows.len() as i64 == PAGE)
        .then(|| rows.last().map(|row| row.id))
        .flatten();
    Ok(ok(audit_page(&visitor, &rows, next)))
}

fn audit_page(visitor: &Visitor, rows: &[AuditRow], next: Option<i64>) -> Markup {
    page(
        visitor,
        "Audit log",
        Some(Section::Audit),
        html! {
            @if rows.is_empty() {
                p.muted { "No changes recorded yet." }
            } @else {
                (audit_table(rows))
            }
            @if let Some(id) = next {
                p { a href=(link("/console/audit", &[("cursor", Some(&id.to_string()))])) { "Older changes" } }
            }
        },
    )
}

fn audit_table(rows: &[AuditRow]) -> Markup {
    scrolling(
        "Audit log",
        html! {
            table {
                thead {
                    tr {
                        th scope="col" { "Time" }
                        th scope="col" { "Actor" }
                        th scope="col" { "Action" }
                        th scope="col" { "Target" }
                        th scope="col" { "Change" }
                    }
                }
                tbody {
                    @for row in rows {
                        tr {
                            td { (stored_time(row.at)) }
                            td { (row.actor) }
                            td { code { (row.action) } }
                            td { (row.target) }
                            td { (row.summary) }
                        }
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::session::tests::visitor;
    use ax_store::rows::models::AuditAction;

    #[test]
    fn entries_are_escaped_and_paged() {
        let row = AuditRow {
            id: 7,
            at: chrono::DateTime::UNIX_EPOCH.naive_utc(),
            actor: "ops".into(),
            action: AuditAction::TaskUpdate,
            target: "task 1 (a/<b>)".into(),
            summary: "cron: * → 0".into(),
        };
        let html = audit_page(&visitor(), &[row], Some(7)).into_string();
        assert!(html.contains("task 1 (a/&lt;b&gt;)"), "{html}");
        assert!(html.contains("task.update") && html.contains("ops"));
        assert!(html.contains("/console/audit?cursor=7"));
        assert!(audit_page(&visitor(), &[], None)
            .into_string()
            .contains("No changes recorded yet."));
    }
}
