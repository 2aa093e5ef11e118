//! Calls to ax's API (callbacks, log lines, registration), over awc.

use std::time::Duration;

use awc::http::StatusCode;
use serde::Serialize;
use url::Url;

use crate::backoff::Backoff;

/// Longest answer body read from ax (its answers are small JSON objects).
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Longest any one call to ax may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

thread_local! {
    // awc's client is bound to its thread; each thread that talks to ax keeps one, so its
    // connections are reused (ax keeps an idle one open for 75 s).
    static CLIENT: awc::Client = awc::Client::builder().timeout(CALL_TIMEOUT).finish();
}

/// A call to ax that did not get an answer.
#[derive(Debug, thiserror::Error)]
#[error("{url}: {reason}")]
pub(crate) struct Unreachable {
    pub url: String,
    pub reason: String,
}

/// An answer of ax's: its status and its body as text.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub body: String,
}

impl Answer {
    /// The `message` of an error answer (`{"error": {"message"}}`), else the body.
    pub fn reason(&self) -> String {
        serde_json::from_str::<serde_json::Value>(&self.body)
            .ok()
            .and_then(|body| body["error"]["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| self.body.chars().take(300).collect())
    }
}

/// Where ax is and how this executor proves itself to it.
#[derive(Debug, Clone)]
pub(crate) struct AxApi {
    pub base: Url,
    pub token: Option<String>,
    pub callback_backoff: Backoff,
}

impl AxApi {
    /// `{ax_url}/seg/ments`, under any path the base has (ax behind a proxy's prefix).
    pub fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    pub async fn post(&self, url: &str, body: &impl Serialize) -> Result<Answer, Unreachable> {
        self.send(awc::http::Method::POST, url, Some(body)).await
    }

    pub async fn delete(&self, url: &str) -> Result<Answer, Unreachable> {
        self.send(awc::http::Method::DELETE, url, None::<&()>).await
    }

    async fn send(
        &self,
        method: awc::http::Method,
        url: &str,
        body: Option<&impl Serialize>,
    ) -> Result<Answer, Unreachable> {
        let unreachable = |reason: String| Unreachable {
            url: url.to_string(),
            reason,
        };
        let mut request = CLIENT.with(|client| client.request(method, url));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let sent = match body {
            Some(body) => request.send_json(body).await,
            None => request.send().await,
        };
        let mut response = sent.map_err(|err| unreachable(err.to_string()))?;
        let body = response
            .body()
            .limit(MAX_ANSWER_BYTES)
            .await
            .map_err(|err| unreachable(format!("reading the answer: {err}")))?;
        Ok(Answer {
            status: response.status(),
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_paths_go_under_the_base_path() {
        let api = |base: &str| AxApi {
            base: Url::parse(base).expect("url"),
            token: None,
            callback_backoff: Backoff::default(),
        };
        let segments = ["api", "executors", "billing", "members"];
        assert_eq!(
            api("http://127.0.0.1:8901").url(&segments).as_str(),
            "http://127.0.0.1:8901/api/executors/billing/members"
        );
        assert_eq!(
            api("https://ops.example.com/ax/").url(&segments).as_str(),
            "https://ops.example.com/ax/api/executors/billing/members"
        );
    }

    #[test]
    fn an_error_answer_gives_its_message() {
        let answer = Answer {
            status: StatusCode::FORBIDDEN,
            body: r#"{"error": {"code": "FORBIDDEN", "message": "wrong token"}}"#.into(),
        };
        assert_eq!(answer.reason(), "wrong token");
        let plain = Answer {
            status: StatusCode::BAD_GATEWAY,
            body: "bad gateway".into(),
        };
        assert_eq!(plain.reason(), "bad gateway");
    }
}
