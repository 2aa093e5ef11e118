//! Alerts: the outbox as `GET /api/alerts` pages it, and a test alert sent to a channel.

use super::error::{Result, ServiceError};
use super::Service;
use crate::actors::alerts::{TestChannel, TestError};
use crate::actors::store::boxed;
use ax_core::alerting::AlertRule;
use ax_core::ids::SceneName;
use ax_store::queries::alerts::{self, AlertFilter, AlertRow};

impl Service {
    /// Alerts, newest first.
    pub async fn alerts(&self, filter: AlertFilter, limit: i64) -> Result<Vec<AlertRow>> {
        Ok(self
            .store
            .query(move |conn| boxed(async move { alerts::list(conn, &filter, limit).await }))
            .await?)
    }

    /// A scene's own alert rule.
    pub async fn scene_alerts(&self, scene: SceneName) -> Result<Option<AlertRule>> {
        let stored = self
            .store
            .query(move |conn| boxed(async move { alerts::scene_rule(conn, &scene).await }))
            .await?;
        // Written by `set_scene_alerts` only: a rule that no longer reads is none.
        Ok(stored.and_then(|text| serde_json::from_str(&text).ok()))
    }

    /// Sets (or with `None` clears) a scene's own alert rule.
    pub async fn set_scene_alerts(&self, scene: SceneName, rule: Option<AlertRule>) -> Result<()> {
        let text = rule.map(|rule| serde_json::to_string(&rule).unwrap_or_default());
        Ok(self
            .store
            .query(move |conn| {
                boxed(async move { alerts::set_scene_rule(conn, &scene, text).await })
            })
            .await?)
    }

    /// The configured channels' names.
    pub fn alert_channels(&self) -> Vec<&str> {
        self.alerting
            .channels
            .iter()
            .map(|c| c.name.as_str())
            .collect()
    }

    /// Whether `rule` names configured channels only; a refusal names the key under `prefix`
    /// (`alerts.` for a task's field).
    pub fn check_alert_rule(&self, rule: &AlertRule, prefix: &str) -> Result<()> {
        rule.check(&self.alert_channels())
            .map_err(|err| ServiceError::AlertRule {
                field: format!("{prefix}{}", err.field),
                message: err.message,
            })
    }

    /// The rule of a task whose scene has none.
    pub fn default_alert_rule(&self) -> &AlertRule {
        &self.alerting.default_rule
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
