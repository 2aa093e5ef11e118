//! The audit log: changes recorded, and read back.

use super::error::Result;
use super::Service;
use crate::actors::store::boxed;
use ax_core::security::Principal;
use ax_store::queries::audit::{self as audit_log, AuditRow};
use ax_store::rows::models::{AuditAction, Entry};

impl Service {
    /// Records a change in the audit log. The change is made already: a store that refuses the
    /// entry is logged, and the change stands.
    pub(super) async fn audit(
        &self,
        actor: &Principal,
        action: AuditAction,
        target: String,
        summary: String,
    ) {
        let entry = Entry {
            actor: actor.name.clone(),
            action,
            target,
            summary,
        };
        let at = self.clock.now();
        let recorded = self
            .store
            .query(move |conn| boxed(async move { audit_log::record(conn, at, &entry).await }))
            .await;
        if let Err(err) = recorded {
            log::error!("{action} not recorded in the audit log: {err}");
        }
    }

    /// The audit log, newest first: up to `limit` entries older than entry `before`.
    pub async fn audit_log(&self, before: Option<i64>, limit: i64) -> Result<Vec<AuditRow>> {
        Ok(self
            .store
            .query(move |conn| boxed(audit_log::list(conn, before, limit)))
            .await?)
    }
}
