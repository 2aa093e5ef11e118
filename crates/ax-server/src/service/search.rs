//! Finding runs by the start of their request id, and tasks by text in their `scene/name`.

use super::error::Result;
use super::task_details::{with_details, TaskDetails};
use super::Service;
use crate::actors::store::boxed;
use ax_core::run::RequestIdPrefix;
use ax_core::task::search::TaskMatch;
use ax_store::queries::search;
use ax_store::rows::models::Run;

impl Service {
    /// Up to `limit` runs whose request id starts with `prefix`, the latest made first.
    pub async fn runs_by_prefix(&self, prefix: RequestIdPrefix, limit: i64) -> Result<Vec<Run>> {
        Ok(self
            .store
            .query(move |conn| {
                boxed(async move { search::runs_by_prefix(conn, &prefix, limit).await })
            })
            .await?)
    }

    /// Up to `limit` tasks whose `scene/name` contains `text`, by scene and name, with their
    /// scenes' pause.
    pub async fn tasks_containing(&self, text: &str, limit: i64) -> Result<Vec<TaskDetails>> {
        let text = TaskMatch::of(text);
        Ok(self
            .store
            .query(move |conn| {
                boxed(async move {
                    let tasks = search::tasks_matching(conn, &text, limit).await?;
                    with_details(conn, tasks).await
                })
            })
            .await?)
    }
}
