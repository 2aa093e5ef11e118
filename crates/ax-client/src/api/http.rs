//! One request to the API: the call, its reply, and every way it can fail as a [`ClientError`].

use std::time::Duration;

use serde_json::Value;

use crate::api::error::ClientError;
use crate::Connection;

/// A request of a command: method, path, query, `If-Match` and body.
#[derive(Clone)]
pub struct Call {
    method: &'static str,
    path: String,
    query: Vec<(&'static str, String)>,
    if_match: Option<String>,
    body: Option<Value>,
}

impl Call {
    pub fn new(method: &'static str, path: String) -> Call {
        Call {
            method,
            path,
            query: Vec::new(),
            if_match: None,
            body: None,
        }
    }

    /// Adds a query parameter when it has a value.
    pub fn with(mut self, name: &'static str, value: Option<String>) -> Call {
        if let Some(value) = value {
            self.query.push((name, value));
        }
        self
    }

    pub fn body(mut self, body: Value) -> Call {
        self.body = Some(body);
        self
    }

    /// Makes the change only at this version (an `ETag`, quotes included).
    pub fn if_match(mut self, etag: String) -> Call {
        self.if_match = Some(etag);
        self
    }
}

/// A 2xx reply: its status (201 for a creation), its JSON (`null` for none, as a 204's) and
/// its `ETag`.
pub struct Reply {
    pub status: u16,
    pub body: Value,
    pub etag: Option<String>,
}

/// Sends the call: the JSON reply of a 2xx, else why not.
pub async fn send(conn: &Connection, call: &Call) -> Result<Value, ClientError> {
    request(conn, call).await.map(|reply| reply.body)
}

/// Sends the call: the reply of a 2xx, else why not.
pub async fn request(conn: &Connection, call: &Call) -> Result<Reply, ClientError> {
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(30))
        .finish();
    let url = format!("{}{}", conn.url.trim_end_matches('/'), call.path);
    let method = awc::http::Method::from_bytes(call.method.as_bytes())
        .map_err(|err| ClientError::Failed(err.to_string()))?;
    let mut request = client
        .request(method, &url)
        .query(&call.query)
        .map_err(|err| ClientError::Failed(format!("bad query: {err}")))?;
    if let Some(token) = &conn.token {
        request = request.bearer_auth(token);
    }
    if let Some(etag) = &call.if_match {
        request = request.insert_header((awc::http::header::IF_MATCH, etag.as_str()));
    }
    let sent = match (&call.body, call.method) {
        (Some(body), _) => request.send_json(body).await,
        (None, "POST") => request.send_json(&serde_json::json!({})).await,
        (None, _) => request.send().await,
    };
    let mut response = sent.map_err(|err| ClientError::Unreachable {
        url: conn.url.clone(),
        reason: unreachable_reason(&err),
    })?;
    let bytes = response
        .body()
        .limit(64 << 20)
        .await
        .map_err(|err| ClientError::Failed(format!("reading the reply of {url}: {err}")))?;
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let status = response.status();
    if status.is_success() {
        let etag = response
            .headers()
            .get(awc::http::header::ETAG)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        return Ok(Reply {
            status: status.as_u16(),
            body,
            etag,
        });
    }
    let error = &body["error"];
    Err(ClientError::Refused {
        status: status.as_u16(),
        code: error["code"]
            .as_str()
            .map_or_else(|| format!("HTTP {}", status.as_u16()), str::to_string),
        message: error["message"]
            .as_str()
            .map_or_else(|| format!("from {url}"), str::to_string),
        field: error["field"].as_str().map(str::to_string),
    })
}

/// Why no answer came, in plain words rather than the HTTP client's.
fn unreachable_reason(err: &awc::error::SendRequestError) -> String {
    use awc::error::{ConnectError, SendRequestError as Send};
    let reason = match err {
        Send::Connect(ConnectError::Io(io)) | Send::Send(io) => return io_reason(io),
        Send::Timeout | Send::Connect(ConnectError::Timeout) => "timed out",
        Send::Connect(
            ConnectError::Resolver(_) | ConnectError::NoRecords | ConnectError::Unresolved,
        ) => "cannot resolve its host name",
        Send::Connect(ConnectError::SslIsNotSupported) => "https is not supported here",
        Send::Url(_) => "not a valid URL",
        _ => "no valid HTTP answer",
    };
    reason.into()
}

fn io_reason(io: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match io.kind() {
        ErrorKind::ConnectionRefused => "connection refused".into(),
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => "connection reset".into(),
        ErrorKind::TimedOut => "timed out".into(),
        kind => kind.to_string(),
    }
}
