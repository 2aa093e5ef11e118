//! `GET /api/events?task=&scene=`: run changes as server-sent events, for the console's live
//! pages and for scripts (see `crate::actors::feed`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use actix_web::http::header;
use actix_web::web::Bytes;
use actix_web::{web, HttpResponse};
use futures_util::stream::{self, Stream, StreamExt};
use tokio::sync::mpsc;

use super::{validate, ApiState};
use crate::actors::feed::Frame;
use crate::error::ApiError;

/// A comment sent when nothing changed for this long, so proxies keep the stream open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// How long a client waits before reconnecting, and a comment naming the stream.
const OPENING: &[u8] = b"retry: 2000\n: ax run changes\n\n";

/// One `event: run` per run change (`{requestId, taskId, scene, status}`) and one
/// `event: log` per attempt log that got lines or progress (`{requestId, taskId, scene,
/// attempt, progress, lines}`), from the next look on (within a second).
pub async fn stream(
    state: web::Data<ApiState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let interest = validate::events_query(&query)?;
    let queue = state.service.listen(interest).await?;
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        // A proxy that buffers would hold the events back.
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(frames(queue)))
}

/// The stream's body: the opening, then each frame, with a keep-alive in silences; it ends
/// when the feed lets the listener go.
fn frames(queue: mpsc::Receiver<Frame>) -> impl Stream<Item = Result<Bytes, Infallible>> {
    let rest = stream::unfold(queue, |mut queue| async move {
        match tokio::time::timeout(KEEP_ALIVE, queue.recv()).await {
            Ok(Some(frame)) => Some((Ok(frame), queue)),
            Ok(None) => None,
            Err(_) => Some((Ok(Bytes::from_static(b": keep-alive\n\n")), queue)),
        }
    });
    stream::once(async { Ok(Bytes::from_static(OPENING)) }).chain(rest)
}
