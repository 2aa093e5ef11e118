//! The dispatch ax POSTs (protocol.md, "Dispatch"), and where a run's results and log lines go.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use crate::client::AxApi;

/// A dispatch's body. Fields this version does not know are ignored.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Dispatch {
    #[serde(default)]
    pub task_id: i64,
    pub request_id: String,
    #[serde(default)]
    pub params: Value,
    pub scheduled_at: DateTime<Utc>,
    pub attempt: u32,
    pub callback_token: String,
    #[serde(default)]
    pub callback_url: Option<String>,
    #[serde(default)]
    pub log_url: Option<String>,
    #[serde(default)]
    pub shard_index: Option<u32>,
    #[serde(default)]
    pub shard_total: Option<u32>,
}

/// One delivery of a run: which attempt, and where its result and log lines go. A re-delivery
/// of a run still working replaces it, so the result is reported for the newest attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Delivery {
    pub attempt: u32,
    pub callback_token: String,
    pub callback_url: String,
    pub log_url: String,
}

impl Dispatch {
    /// The dispatch's own `callbackUrl` and `logUrl` when it has them (they are signed, so
    /// trusted), else ax's API at `api`.
    pub fn delivery(&self, api: &AxApi) -> Delivery {
        let or_api = |given: &Option<String>, segments: &[&str]| {
            given
                .clone()
                .filter(|url| !url.is_empty())
                .unwrap_or_else(|| api.url(segments).to_string())
        };
        Delivery {
            attempt: self.attempt,
            callback_token: self.callback_token.clone(),
            callback_url: or_api(&self.callback_url, &["api", "callback"]),
            log_url: or_api(
                &self.log_url,
                &["api", "instances", &self.request_id, "log"],
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::Backoff;

    fn api() -> AxApi {
        AxApi {
            base: url::Url::parse("http://127.0.0.1:8901").expect("url"),
            token: None,
            callback_backoff: Backoff::default(),
        }
    }

    #[test]
    fn urls_come_from_the_dispatch_else_from_ax_url() {
        let body = r#"{"taskId": 7, "requestId": "r-1", "params": {"region": "eu"},
            "scheduledAt": "2027-02-03T04:05:10.000Z", "attempt": 2, "callbackToken": "t",
            "somethingNew": true}"#;
        let dispatch: Dispatch = serde_json::from_str(body).expect("a dispatch");
        assert_eq!(
            dispatch.delivery(&api()),
            Delivery {
                attempt: 2,
                callback_token: "t".into(),
                callback_url: "http://127.0.0.1:8901/api/callback".into(),
                log_url: "http://127.0.0.1:8901/api/instances/r-1/log".into(),
            }
        );
        let with_urls = Dispatch {
            callback_url: Some("http://ax.internal/api/callback".into()),
            log_url: Some("http://ax.internal/api/instances/r-1/log".into()),
            ..dispatch
        };
        let delivery = with_urls.delivery(&api());
        assert_eq!(delivery.callback_url, "http://ax.internal/api/callback");
        assert_eq!(delivery.log_url, "http://ax.internal/api/instances/r-1/log");
    }
}
