//! Membership of an executor group: registered once listening, the registration repeated as
//! a heartbeat every `heartbeatSecs` of ax's answer, removed at shutdown.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::client::AxApi;

/// The heartbeat when ax's answer does not give one (ax's own default).
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);
/// The first wait after a registration that failed before ever joining, doubled each time.
const FIRST_RETRY: Duration = Duration::from_millis(250);

/// This executor in a group: its name, and the base URL ax reaches it on.
#[derive(Debug, Clone)]
pub(crate) struct Membership {
    pub group: String,
    pub url: String,
    pub capacity: Option<u32>,
}

#[derive(Serialize)]
struct Member<'a> {
    url: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    capacity: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Registered {
    heartbeat_secs: Option<u64>,
}

impl Membership {
    fn members_url(&self, api: &AxApi) -> url::Url {
        api.url(&["api", "executors", &self.group, "members"])
    }

    /// Registers (or heartbeats); the heartbeat ax asks for.
    async fn register(&self, api: &AxApi) -> Result<Duration, String> {
        let body = Member {
            url: &self.url,
            capacity: self.capacity,
        };
        let answer = api
            .post(self.members_url(api).as_str(), &body)
            .await
            .map_err(|err| err.to_string())?;
        if !answer.status.is_success() {
            return Err(format!("{}: {}", answer.status, answer.reason()));
        }
        let secs = serde_json::from_str::<Registered>(&answer.body)
            .ok()
            .and_then(|registered| registered.heartbeat_secs)
            .filter(|secs| *secs > 0);
        Ok(secs.map_or(DEFAULT_HEARTBEAT, Duration::from_secs))
    }

    /// Registers, then beats until `stop` turns true. A failed beat is logged and tried again
    /// at the next one (ax may be restarting).
    pub async fn keep_registered(self, api: &AxApi, mut stop: watch::Receiver<bool>) {
        let mut every = DEFAULT_HEARTBEAT;
        let mut joined = false;
        let mut failures = 0;
        loop {
            let wait = match self.register(api).await {
                Ok(heartbeat) => {
                    if !joined {
                        log::info!("joined executor group {} as {}", self.group, self.url);
                        joined = true;
                    }
                    every = heartbeat;
                    every
                }
                Err(why) => {
                    failures += 1;
                    // Until it has joined (ax starting beside it), try again sooner than a beat.
                    let wait = if joined {
                        every
                    } else {
                        FIRST_RETRY.saturating_mul(1 << failures.min(4)).min(every)
                    };
                    log::warn!(
                        "registration in executor group {} as {} failed (again in {wait:?}): {why}",
                        self.group,
                        self.url
                    );
                    wait
                }
            };
            if tokio::time::timeout(wait, stop.wait_for(|stop| *stop))
                .await
                .is_ok()
            {
                return;
            }
        }
    }

    /// Leaves the group (graceful shutdown): ax stops routing to this executor.
    pub async fn remove(&self, api: &AxApi) {
        let mut url = self.members_url(api);
        url.query_pairs_mut().append_pair("url", &self.url);
        match api.delete(url.as_str()).await {
            Ok(answer) if answer.status.is_success() || answer.status.as_u16() == 404 => {
                log::info!("left executor group {}", self.group)
            }
            Ok(answer) => log::warn!(
                "leaving executor group {} failed ({}): {}",
                self.group,
                answer.status,
                answer.reason()
            ),
            Err(err) => log::warn!("leaving executor group {} failed: {err}", self.group),
        }
    }
}
