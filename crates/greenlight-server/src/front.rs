//! The front of every connection: it reads the first request's head itself. A stream request
//! (`GET /api/{goals,runs,workflows}/{id}/stream`) is answered here, through the same routes and
//! guard as any other, and its connection then carries that stream alone
//! ([`crate::stream::follow`]: the poller writes each frame to its socket, no HTTP layer in
//! between). Any other request is handed to hyper with the bytes already read, and hyper
//! serves one request per connection, so a stream request never arrives on a connection hyper
//! holds.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Method, Request, Version, header};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::Watcher;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tower_service::Service;

use crate::live::Framing;
use crate::serve::HEADER_READ_TIMEOUT;
use crate::stream::{Attach, FromFront, follow};

/// The longest request head the server reads (far above a browser's 8–16 KB). Hyper is given the
/// same bound and [`MAX_HEADERS`] (`serve.rs`), so a head the front cannot read is refused by
/// hyper too, and no stream request ever reaches its handler another way.
pub const MAX_HEAD: usize = 64 * 1024;
/// The most headers a request may carry: hyper's own default.
pub const MAX_HEADERS: usize = 100;
/// The largest body of a response the front answers in one piece (errors, a gap).
const MAX_BODY: usize = 1024 * 1024;

/// Serves one connection: its first request's head is read within [`HEADER_READ_TIMEOUT`] (a
/// client that stalls is dropped), then answered here or by hyper.
pub async fn serve(mut tcp: TcpStream, routes: Router, http: http1::Builder, watcher: Watcher) {
    let mut head = Vec::with_capacity(1024);
    let Ok(Ok(complete)) =
        tokio::time::timeout(HEADER_READ_TIMEOUT, read_head(&mut tcp, &mut head)).await
    else {
        return;
    };
    if complete && let Some(request) = stream_request(&head) {
        answer(tcp, routes, request).await;
        return;
    }
    let io = TokioIo::new(Rewind {
        read: Bytes::from(head),
        tcp,
    });
    let _ = watcher
        .watch(http.serve_connection(io, TowerToHyperService::new(routes)))
        .await;
}

/// Reads until the head is complete within [`MAX_HEAD`] (`true`), or is too long or cut short
/// (`false`: hyper answers what it can of it); an error when the client left before sending
/// anything.
async fn read_head(tcp: &mut TcpStream, head: &mut Vec<u8>) -> std::io::Result<bool> {
    // Where the search for the head's end resumes: a head sent a byte at a time is not
    // searched again from its start after every byte.
    let mut searched = 0;
    loop {
        if let Some(at) = head[searched..].windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(searched + at + 4 <= MAX_HEAD);
        }
        searched = head.len().saturating_sub(3);
        if head.len() >= MAX_HEAD {
            return Ok(false);
        }
        if tcp.read_buf(head).await? == 0 {
            if head.is_empty() {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            return Ok(false);
        }
    }
}

/// `/api/goals/{id}/stream`, `/api/runs/{id}/stream`, `/api/workflows/{id}/stream` (the query
/// aside): the paths the routes serve a stream on.
fn is_stream_path(target: &str) -> bool {
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    let parts: Vec<&str> = path.split('/').collect();
    matches!(
        parts.as_slice(),
        ["", "api", "goals" | "runs" | "workflows", id, "stream"] if !id.is_empty()
    )
}

/// The request of `head` when it asks for a stream (`GET` or `HEAD` of a stream path), built
/// for the routes; anything else, or a head that does not parse, is hyper's to answer.
fn stream_request(head: &[u8]) -> Option<Request<Body>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut headers);
    if !matches!(parsed.parse(head), Ok(httparse::Status::Complete(_))) {
        return None;
    }
    let (method, target, version) = (parsed.method?, parsed.path?, parsed.version?);
    if !matches!(method, "GET" | "HEAD") || !is_stream_path(target) {
        return None;
    }
    let mut request = Request::builder()
        .method(method)
        .uri(target)
        .version(if version == 0 {
            Version::HTTP_10
        } else {
            Version::HTTP_11
        });
    for h in parsed.headers.iter() {
        request = request.header(h.name, h.value);
    }
    let mut request = request.body(Body::empty()).ok()?;
    request.extensions_mut().insert(FromFront);
    Some(request)
}

/// Answers a stream request: through the routes (the guard, the handler's decision), then the
/// stream itself when the handler opened one, or its answer in one piece.
async fn answer(mut tcp: TcpStream, mut routes: Router, request: Request<Body>) {
    let head_only = request.method() == Method::HEAD;
    // HTTP/1.0 has no chunks: its stream's body ends when the connection closes.
    let (version, framing) = match request.version() {
        Version::HTTP_10 => (Version::HTTP_10, Framing::UntilClose),
        _ => (Version::HTTP_11, Framing::Chunked),
    };
    let _ = std::future::poll_fn(|cx| Service::<Request<Body>>::poll_ready(&mut routes, cx)).await;
    let response = match routes.call(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let (parts, body) = response.into_parts();
    if let Some(opened) = parts.extensions.get::<Attach>().and_then(Attach::take) {
        let length = Length::Streamed(framing);
        if tcp.write_all(&head(&parts, version, length)).await.is_err() || head_only {
            return;
        }
        follow(tcp, opened, framing).await;
        return;
    }
    let body = axum::body::to_bytes(body, MAX_BODY)
        .await
        .unwrap_or_default();
    let mut out = head(&parts, version, Length::Known(body.len()));
    if !head_only {
        out.extend_from_slice(&body);
    }
    if tcp.write_all(&out).await.is_ok() {
        let _ = tcp.shutdown().await;
    }
}

/// How a response's body is delimited.
enum Length {
    /// A body in one piece, of this many bytes.
    Known(usize),
    /// A stream.
    Streamed(Framing),
}

/// A response's head for this connection, which closes after it.
fn head(parts: &axum::http::response::Parts, version: Version, length: Length) -> Vec<u8> {
    let status = parts.status;
    let version = if version == Version::HTTP_10 {
        "1.0"
    } else {
        "1.1"
    };
    let mut out = format!(
        "HTTP/{version} {} {}\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    )
    .into_bytes();
    for (name, value) in &parts.headers {
        if [
            header::CONTENT_LENGTH,
            header::TRANSFER_ENCODING,
            header::CONNECTION,
        ]
        .contains(name)
        {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    match length {
        Length::Known(n) => out.extend_from_slice(format!("content-length: {n}\r\n").as_bytes()),
        Length::Streamed(Framing::Chunked) => {
            out.extend_from_slice(b"transfer-encoding: chunked\r\n");
        }
        Length::Streamed(Framing::UntilClose) => {}
    }
    out.extend_from_slice(b"connection: close\r\n\r\n");
    out
}

/// The connection as hyper reads it: the bytes the front already read, then the socket.
struct Rewind {
    read: Bytes,
    tcp: TcpStream,
}

impl AsyncRead for Rewind {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.read.is_empty() {
            return Pin::new(&mut self.tcp).poll_read(cx, buf);
        }
        let n = self.read.len().min(buf.remaining());
        let taken = self.read.split_to(n);
        buf.put_slice(&taken);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_paths_are_the_three_stream_routes_and_nothing_else() {
        for yes in [
            "/api/goals/1/stream",
            "/api/runs/7/stream?last_event_id=r7:3",
            "/api/workflows/wf-2/stream",
        ] {
            assert!(is_stream_path(yes), "{yes}");
        }
        for no in [
            "/api/goals/1/stream/",
            "/api/goals//stream",
            "/api/goals/1/events",
            "/api/live",
            "/api/goals/1/%73tream",
            "/x/api/goals/1/stream",
            "/api/goals/1/2/stream",
        ] {
            assert!(!is_stream_path(no), "{no}");
        }
    }

    #[test]
    fn only_a_complete_get_or_head_of_a_stream_path_is_taken() {
        let get = b"GET /api/goals/1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
        let request = stream_request(get).expect("a stream request");
        assert_eq!(request.uri().path(), "/api/goals/1/stream");
        assert_eq!(request.headers()["host"], "127.0.0.1");
        assert!(request.extensions().get::<FromFront>().is_some());
        assert!(stream_request(b"HEAD /api/runs/2/stream HTTP/1.1\r\n\r\n").is_some());
        assert!(stream_request(b"POST /api/goals/1/stream HTTP/1.1\r\n\r\n").is_none());
        assert!(stream_request(b"GET /api/goals/1 HTTP/1.1\r\n\r\n").is_none());
        assert!(stream_request(b"GET /api/goals/1/stream HTTP/1.1\r\nHost: x").is_none());
        assert!(
            stream_request(b"GET /api/goals/1/stream HTTP/1.1\r\nBad Header: x\r\n\r\n").is_none()
        );
    }
}
