//! Alerts: the outbox as `GET /api/alerts` pages it, and a test alert sent to a channel.

use super::error::{Result, ServiceError};
use super::Service;
use crate::actors::alerts::{TestChannel, TestError};
use crate::actors::store::boxed;
use crate::store::queries::alerts::{self, AlertFilter, AlertRow};

impl Service {
    /// Alerts, newest first.
    pub async fn alerts(&self, filter: AlertFilter, limit: i64) -> Result<Vec<AlertRow>> {
        Ok(self
            .store
            .query(move |conn| boxed(async move { alerts::list(conn, &filter, limit).await }))
            .await?)
    }

    /// Sends a test alert to `channel` now; its id once delivered.
    pub async fn test_alert(&self, channel: String) -> Result<String> {
        self.alerts
            .send(TestChannel(channel))
            .await
            .map_err(|err| ServiceError::AlertTest(TestError::Failed(err.to_string())))?
            .map_err(ServiceError::AlertTest)
    }
}
