//! The check's dispatches: bodies as ax sends them, signed, forged or stale on purpose, and
//! what the executor answered.

use std::time::Duration;

use ax_core::security::{
    callback_token, sign_dispatch, DUPLICATE_HEADER, IDEMPOTENT_HEADER, PROTOCOL_HEADER,
    PROTOCOL_VERSION, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use chrono::Utc;
use serde_json::{json, Value};

/// How long ago a stale dispatch says it was signed: past the protocol's 300 s.
const STALE_SECS: i64 = 600;
/// The longest answer read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// How a dispatch is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signing {
    /// With the secret, now.
    Signed,
    /// With another secret.
    Forged,
    /// With the secret, `STALE_SECS` ago.
    Stale,
    /// No signature headers.
    Unsigned,
}

/// One test run, as a dispatch describes it.
#[derive(Debug, Clone)]
pub struct TestRun {
    pub request_id: String,
    pub token: String,
    params: Value,
}

/// What the dispatches share: the secret, and where the executor answers.
pub struct Dispatcher {
    secret: String,
    reply_to: String,
    client: awc::Client,
}

/// The executor's answer.
#[derive(Debug)]
pub struct Answered {
    pub status: u16,
    pub body: Vec<u8>,
    /// `X-Ax-Idempotent: true`: it keeps each run's result.
    pub idempotent: bool,
    /// `X-Ax-Duplicate: true`: it had taken this run already.
    pub duplicate: bool,
    pub took: Duration,
}

impl Dispatcher {
    pub fn new(secret: String, reply_to: String, wait: Duration) -> Dispatcher {
        let client = awc::Client::builder().timeout(wait).finish();
        Dispatcher {
            secret,
            reply_to,
            client,
        }
    }

    /// A new run (a new `requestId`) with these params.
    pub fn run(&self, params: &Value) -> TestRun {
        let request_id = uuid::Uuid::new_v4().to_string();
        TestRun {
            token: callback_token(self.secret.as_bytes(), &request_id),
            request_id,
            params: params.clone(),
        }
    }

    /// Sends `attempt` of `run` to `url`, signed as `signing` says. `Err`: no answer.
    pub async fn send(
        &self,
        url: &str,
        run: &TestRun,
        attempt: i64,
        signing: Signing,
    ) -> Result<Answered, String> {
        let body = json!({
            "taskId": 1,
            "requestId": run.request_id,
            "params": run.params,
            "scheduledAt": Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
            "attempt": attempt,
            "callbackToken": run.token,
            "callbackUrl": format!("{}/api/callback", self.reply_to),
            "logUrl": format!("{}/api/instances/{}/log", self.reply_to, run.request_id),
        })
        .to_string();
        // A connection of its own for each dispatch: a server that closes its connections
        // after each answer (HTTP/1.0, Python's http.server) never meets a reused one.
        let mut request = self
            .client
            .post(url)
            .force_close()
            .content_type("application/json")
            .insert_header((PROTOCOL_HEADER, PROTOCOL_VERSION))
            .insert_header(("X-Ax-Request-Id", run.request_id.as_str()));
        let now = Utc::now().timestamp();
        let (secret, at) = match signing {
            Signing::Signed => (self.secret.clone(), now),
            Signing::Forged => (format!("not-{}", self.secret), now),
            Signing::Stale => (self.secret.clone(), now - STALE_SECS),
            Signing::Unsigned => (String::new(), now),
        };
        if signing != Signing::Unsigned {
            request = request
                .insert_header((TIMESTAMP_HEADER, at.to_string()))
                .insert_header((
                    SIGNATURE_HEADER,
                    sign_dispatch(secret.as_bytes(), at, body.as_bytes()),
                ));
        }
        let started = std::time::Instant::now();
        let mut response = request
            .send_body(body)
            .await
            .map_err(|err| format!("no answer from {url}: {err}"))?;
        let flag = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .is_some_and(|value| value.eq_ignore_ascii_case("true"))
        };
        let (idempotent, duplicate) = (flag(IDEMPOTENT_HEADER), flag(DUPLICATE_HEADER));
        let status = response.status().as_u16();
        let body = response
            .body()
            .limit(MAX_ANSWER_BYTES)
            .await
            .map_err(|err| format!("{url} answered {status}, then its body failed: {err}"))?;
        Ok(Answered {
            status,
            body: body.to_vec(),
            idempotent,
            duplicate,
            took: started.elapsed(),
        })
    }
}
