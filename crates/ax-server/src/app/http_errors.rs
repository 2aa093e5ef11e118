//! Every error in the shape of the part it comes from, the split by path made here once: under
//! the console ([`crate::web::console_home::guards_itself`]) the console's HTML error page, elsewhere ax's
//! JSON error. [`in_shape`] puts there what the handlers did not answer themselves (an
//! extractor's refusal of a form or a query, a response that could not be built).
//!
//! Below the app, the HTTP server's own errors are in the JSON shape. A request actix-http cannot parse
//! (a malformed request line or header, a URI over the 64 KiB `http` crate limit) or whose
//! head is over its 128 KiB buffer never reaches a handler: actix-http answers it itself, with
//! an empty 400 or 431, and closes the connection. The stream below recognises those answers
//! as they are written and writes the same status with a JSON body instead.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::error::InternalError;
use actix_web::{middleware, HttpResponse, ResponseError};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error::{foreign, ApiError};

/// Answers each request in its part's shape: the console finishes its own answers
/// ([`crate::console::Finish`]); anywhere else an error that is no [`ApiError`] becomes one.
pub async fn in_shape(
    req: ServiceRequest,
    next: middleware::Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let console = crate::web::console_home::guards_itself(req.path())
        .then(|| crate::console::Finish::of(req.request()));
    let finish = |response: HttpResponse| match &console {
        Some(console) => console.apply(response),
        None => match foreign::<ApiError>(&response) {
            Some(err) => err.error_response(),
            None => response,
        },
    };
    match next.call(req).await {
        Ok(response) => {
            let (request, response) = response.map_into_boxed_body().into_parts();
            Ok(ServiceResponse::new(request, finish(response)))
        }
        // A middleware's refusal: the request went with it, so the answer goes out as an error
        // carrying the finished response.
        Err(err) => {
            let cause = err.to_string();
            let response = finish(HttpResponse::from_error(err));
            Err(InternalError::from_response(cause, response).into())
        }
    }
}

/// A connection whose protocol-level error answers carry a JSON body.
pub struct JsonProtocolErrors<T> {
    io: T,
    rewrite: Option<Rewrite>,
}

/// An error answer being written in place of actix-http's.
struct Rewrite {
    bytes: Vec<u8>,
    written: usize,
    /// How much of the caller's buffer it stands for.
    replaces: usize,
}

impl<T> JsonProtocolErrors<T> {
    pub fn new(io: T) -> Self {
        JsonProtocolErrors { io, rewrite: None }
    }
}

/// The answer for a response head actix-http wrote for a request it refused: ours only ever
/// have a body, so an empty 400 or 431 can only be actix-http's. Answers how many bytes of
/// `written` the head takes, and what to write instead.
fn replacement(written: &[u8]) -> Option<(usize, Vec<u8>)> {
    if !written.starts_with(b"HTTP/1.1 4") {
        return None;
    }
    let head_len = written.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = &written[..head_len];
    let empty = head
        .windows(b"\r\ncontent-length: 0\r\n".len())
        .any(|w| w == b"\r\ncontent-length: 0\r\n");
    if !empty {
        return None;
    }
    let (status, code, message) = if head.starts_with(b"HTTP/1.1 400 ") {
        (
            "400 Bad Request",
            "BAD_REQUEST",
            "the request could not be read: a malformed request line or header, or a URI \
             longer than 64 KiB",
        )
    } else if head.starts_with(b"HTTP/1.1 431 ") {
        (
            "431 Request Header Fields Too Large",
            "HEADERS_TOO_LARGE",
            "the request line and headers are longer than 128 KiB",
        )
    } else {
        return None;
    };
    let body = serde_json::json!({"error": {"code": code, "message": message}}).to_string();
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    Some((head_len, answer.into_bytes()))
}

impl<T: AsyncRead + Unpin> AsyncRead for JsonProtocolErrors<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for JsonProtocolErrors<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.rewrite.is_none() {
            let Some((replaces, bytes)) = replacement(buf) else {
                return Pin::new(&mut this.io).poll_write(cx, buf);
            };
            this.rewrite = Some(Rewrite {
                bytes,
                written: 0,
                replaces,
            });
        }
        // The caller calls again with the same bytes until told they are written.
        let Some(rewrite) = this.rewrite.as_mut() else {
            return Poll::Ready(Ok(0));
        };
        while rewrite.written < rewrite.bytes.len() {
            let n =
                ready!(Pin::new(&mut this.io).poll_write(cx, &rewrite.bytes[rewrite.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            rewrite.written += n;
        }
        let replaces = rewrite.replaces;
        this.rewrite = None;
        Poll::Ready(Ok(replaces))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_empty_protocol_errors_are_replaced() {
        let head = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\
                     date: Tue, 01 Dec 2026 11:39:46 GMT\r\n\r\n";
        let (replaces, answer) = replacement(head).expect("replaced");
        assert_eq!(replaces, head.len());
        let answer = String::from_utf8(answer).expect("text");
        let (answer_head, body) = answer.split_once("\r\n\r\n").expect("head and body");
        assert!(answer_head.starts_with("HTTP/1.1 400 Bad Request\r\n"));
        assert!(answer_head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(body["error"]["code"], "BAD_REQUEST");

        let too_large =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        let (_, answer) = replacement(too_large).expect("replaced");
        assert!(String::from_utf8_lossy(&answer).contains("HEADERS_TOO_LARGE"));

        for kept in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-length: 62\r\n\r\n{...}"[..],
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n",
            b"{\"error\":\"HTTP/1.1 400 \"}",
        ] {
            assert!(
                replacement(kept).is_none(),
                "{}",
                String::from_utf8_lossy(kept)
            );
        }
    }
}
