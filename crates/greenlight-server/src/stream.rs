//! One stream over SSE: the resume decision, the replay from the file, the hand-over to the live
//! feed without a gap or a duplicate, the heartbeat, and the end (a gap, a watcher too far
//! behind, the client leaving, the server stopping).
//!
//! The handler ([`open`]) decides and takes the watcher's place; the connection's front
//! ([`crate::front`]) then writes the response's head and hands the socket to [`follow`]. The
//! hand-over: the socket is attached to the live feed first (frames read from then on are queued
//! for it), then the file is read. Every queued frame was committed, so it is either in what the
//! file read returns (and dropped as seq ≤ last sent) or after it; a queued frame that skips
//! ahead sends the watcher back to the file to fill in what lies between. A stream never ends by
//! itself when its goal is done or its run finished: it stays open and live (frames may still
//! come, e.g. a resumed goal).

use std::io::ErrorKind;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use greenlight_store::{Reads, SystemClock, WallClock};
use greenlight_stream::{Resume, StreamId, encode_frame, encode_gap, encode_retry, resolve};
use tokio::net::TcpStream;
use tokio::sync::{Notify, watch};

use crate::error::ApiError;
use crate::hub::{Hub, Watch};
use crate::live::{Encoded, Framing, Queued, Taken};
use crate::summary::stream_exists;

/// The reconnection delay sent once at the start.
pub const RETRY_MS: u64 = 2000;
/// The heartbeat comment interval (under every common proxy's idle timeout).
pub const PING_INTERVAL: Duration = Duration::from_secs(15);
/// Frames read from the file per step of a replay.
const REPLAY_PAGE: usize = 512;
const PING: &[u8] = b": ping\n\n";
/// How long a stream that ends waits for its client to take the body's end.
const BODY_END_WAIT: Duration = Duration::from_secs(5);

/// The headers of every SSE response.
pub fn sse_headers(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
}

/// The cursor: `Last-Event-ID` if sent, else `?last_event_id=`.
pub fn cursor(headers: &HeaderMap, query: Option<String>) -> Option<String> {
    headers
        .get("last-event-id")
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .or(query)
}

/// A stream request a handler accepted: its place in the live feed and the last seq the
/// watcher already has. Carried out of the routes as the response's extension, for the
/// connection's front to [`follow`].
#[derive(Clone)]
pub struct Attach(Arc<Mutex<Option<Opened>>>);

impl Attach {
    /// The opened stream (once: the first to ask takes it).
    pub fn take(&self) -> Option<Opened> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// What [`follow`] serves.
pub struct Opened {
    watch: Watch,
    last: u64,
}

/// Marks a request read by the connection's front, the only place a stream can be followed.
#[derive(Debug, Clone, Copy)]
pub struct FromFront;

/// Refuses a stream request that did not come through the connection's front (which can only
/// be a route added around it): only the front can hand its socket to [`follow`].
pub fn from_front(front: Option<axum::Extension<FromFront>>) -> Result<(), ApiError> {
    front.map(|_| ()).ok_or_else(|| {
        ApiError::internal(
            "this stream request reached its handler without the server's connection front, which alone can serve a stream; send it to `greenlight serve` directly",
        )
    })
}

/// Why a followed stream ends.
enum End {
    /// The body ends cleanly (a gap frame was sent; the watcher fell too far behind).
    Finish,
    /// The server stops.
    Shutdown,
    /// The client left, or its socket failed: nothing more can be written.
    Gone,
}

/// One followed stream: its socket, its place, what it was sent.
struct Follower {
    watch: Watch,
    socket: Arc<TcpStream>,
    id: u64,
    wake: Arc<Notify>,
    shutdown: watch::Receiver<bool>,
    framing: Framing,
    /// The last seq written to the socket.
    sent: u64,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.watch.detach(self.id);
    }
}

/// Serves an opened stream on its connection (whose response head was written): the retry
/// line, the frames stored after the cursor, then every frame as it is committed, until the
/// client leaves, the server stops, or the stream must end (a gap; too far behind).
pub async fn follow(socket: TcpStream, opened: Opened, framing: Framing) {
    let socket = Arc::new(socket);
    let wake = Arc::new(Notify::new());
    let Opened { watch, last } = opened;
    let id = watch.attach(Arc::clone(&socket), framing, last, Arc::clone(&wake));
    let mut follower = Follower {
        shutdown: watch.hub().shutdown_signal(),
        watch,
        socket,
        id,
        wake,
        framing,
        sent: last,
    };
    let end = follower.run().await;
    // Off the live feed first: from here on only this task writes to the socket.
    follower.watch.detach(follower.id);
    match end {
        // The body's end follows what it was sent, however slowly the client reads it.
        End::Finish => {
            let end = framing.end();
            let _ = tokio::time::timeout(BODY_END_WAIT, follower.write(end)).await;
        }
        // The server is stopping: a client that does not take five bytes now is not waited for.
        End::Shutdown => {
            let _ = follower.socket.try_write(framing.end());
        }
        End::Gone => {}
    }
}

impl Follower {
    async fn run(&mut self) -> End {
        if *self.shutdown.borrow() {
            return End::Shutdown;
        }
        let retry = self.encoded(encode_retry(RETRY_MS).as_bytes());
        if let Err(end) = self.write(&retry).await {
            return end;
        }
        let mut ping =
            tokio::time::interval_at(tokio::time::Instant::now() + PING_INTERVAL, PING_INTERVAL);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // What the file holds after the cursor first; frames read meanwhile are queued.
        if let Err(end) = self.fill_from_store().await {
            return end;
        }
        loop {
            if let Err(end) = self.catch_up().await {
                return end;
            }
            if let Err(end) = self.live(&mut ping).await {
                return end;
            }
        }
    }

    /// Writes what was queued for the watcher, in order (the rest of a frame a live write cut
    /// short comes first), filling in from the file what the queue skips, until nothing is
    /// left: the watcher is then live, the poller writes to it.
    async fn catch_up(&mut self) -> Result<(), End> {
        loop {
            let items = match self.watch.take(self.id, self.sent) {
                Taken::Live => return Ok(()),
                Taken::End(clean) => return Err(if clean { End::Finish } else { End::Gone }),
                Taken::Items(items) => items,
            };
            for item in items {
                match item {
                    Queued::Raw(bytes) => self.write(&bytes).await?,
                    Queued::Frame(seq, bytes) => {
                        if seq > self.sent + 1 {
                            // What lies between is in the file.
                            self.fill_from_store().await?;
                        }
                        if seq == self.sent + 1 {
                            self.write(&bytes).await?;
                            self.sent = seq;
                        }
                    }
                }
            }
        }
    }

    /// While live: waits for the poller to say the watcher fell behind, for the client to
    /// leave, for the server to stop, and sends the heartbeat.
    async fn live(&mut self, ping: &mut tokio::time::Interval) -> Result<(), End> {
        let heartbeat = Encoded::new(PING);
        let mut scratch = [0u8; 512];
        loop {
            tokio::select! {
                biased;
                _ = self.shutdown.changed() => return Err(End::Shutdown),
                () = self.wake.notified() => {
                    if let Some(last) = self.watch.fell_behind(self.id) {
                        self.sent = last;
                        return Ok(());
                    }
                }
                ready = self.socket.readable() => {
                    ready.map_err(|_| End::Gone)?;
                    // A client has nothing to say on a stream: what it sends is dropped, its
                    // end of the connection ends the stream.
                    match self.socket.try_read(&mut scratch) {
                        Ok(0) => return Err(End::Gone),
                        Ok(_) => {}
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                        Err(_) => return Err(End::Gone),
                    }
                }
                _ = ping.tick() => self.watch.offer_idle(self.id, &heartbeat),
            }
        }
    }

    /// The frames stored after `sent`, page by page until caught up; a hole is the gap frame
    /// and the end.
    async fn fill_from_store(&mut self) -> Result<(), End> {
        let stream = self.watch.stream();
        loop {
            let after = self.sent;
            let page = self
                .watch
                .hub()
                .with_store(move |store| Ok(store.frames_after(stream, after, REPLAY_PAGE)?))
                .await;
            let frames = match page {
                Ok(frames) => frames,
                Err(e) => {
                    let detail = format!("the state file could not be read: {}", e.detail);
                    let gap = self.encoded(&gap(stream, &detail));
                    self.write(&gap).await?;
                    return Err(End::Finish);
                }
            };
            if frames.is_empty() {
                return Ok(());
            }
            let mut out = Vec::with_capacity(frames.len() * 256);
            let mut hole = None;
            for frame in &frames {
                if frame.seq != self.sent + 1 {
                    hole = Some(format!(
                        "frame {}:{} is no longer stored (the next stored is {})",
                        stream,
                        self.sent + 1,
                        frame.seq
                    ));
                    break;
                }
                out.extend_from_slice(encode_frame(frame).as_bytes());
                self.sent = frame.seq;
            }
            if let Some(detail) = &hole {
                out.extend_from_slice(&gap(stream, detail));
            }
            if !out.is_empty() {
                let out = self.encoded(&out);
                self.write(&out).await?;
            }
            if hole.is_some() {
                return Err(End::Finish);
            }
        }
    }

    /// `sse` as this body carries it.
    fn encoded(&self, sse: &[u8]) -> Bytes {
        Encoded::new(sse).bytes(self.framing)
    }

    /// Writes all of `bytes`, waiting for the socket while it takes something at least every
    /// [`Limits::stalled_write`](crate::Limits) (a client that stopped reading is cut off; it
    /// resumes by cursor if it ever reads again), or until the server stops.
    async fn write(&mut self, mut bytes: &[u8]) -> Result<(), End> {
        let stall = self.watch.hub().limits().stalled_write;
        while !bytes.is_empty() {
            match self.socket.try_write(bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    tokio::select! {
                        biased;
                        _ = self.shutdown.changed() => return Err(End::Shutdown),
                        ready = tokio::time::timeout(stall, self.socket.writable()) => {
                            ready.map_err(|_| End::Gone)?.map_err(|_| End::Gone)?;
                        }
                    }
                }
                Err(_) => return Err(End::Gone),
            }
        }
        Ok(())
    }
}

fn gap(stream: StreamId, detail: &str) -> Bytes {
    Bytes::from(encode_gap(stream, SystemClock.now_ms(), detail))
}

fn sse_response(body: Body) -> Response {
    let mut response = Response::new(body);
    sse_headers(response.headers_mut());
    response
}

/// `GET /api/goals/{id}/stream` and `GET /api/runs/{id}/stream`.
pub async fn open(hub: Arc<Hub>, stream: StreamId, raw_cursor: Option<String>) -> Response {
    let watching = Arc::clone(&hub);
    let opened = hub
        .with_store(move |store| {
            // A missing stream is answered before anything is held for it.
            if !stream_exists(store, stream)? {
                return Ok(None);
            }
            // Watch before reading the file: nothing committed after the read can be missed.
            let live = watching.watch(stream)?;
            Ok(Some((live, store.frame_bounds(stream)?)))
        })
        .await;
    let (live, (oldest, head)) = match opened {
        Ok(Some(opened)) => opened,
        Ok(None) => {
            let what = match stream {
                StreamId::Goal(id) => format!("no goal {id} in this state file"),
                StreamId::Run(id) => format!("no run {id} in this state file"),
                StreamId::Workflow(id) => format!("no workflow run {id} in this state file"),
            };
            return ApiError::not_found(what).into_response();
        }
        Err(e) => return e.into_response(),
    };
    let retry = encode_retry(RETRY_MS);
    let last = match resolve(raw_cursor.as_deref(), stream, head, oldest) {
        Resume::Reject => return StatusCode::CONFLICT.into_response(),
        Resume::Gap => {
            let detail = match raw_cursor.as_deref() {
                Some(raw) => format!(
                    "cursor `{}` cannot be resumed in stream {stream} (its head is {head}, oldest stored {oldest})",
                    raw.escape_debug()
                ),
                None => "no cursor".into(),
            };
            let mut body = retry.into_bytes();
            body.extend_from_slice(&gap(stream, &detail));
            return sse_response(Body::from(body));
        }
        // Fresh: everything still stored (from 1 unless the start was pruned).
        Resume::Fresh => oldest.saturating_sub(1),
        Resume::Replay { after } => after,
    };
    let mut response = sse_response(Body::empty());
    response
        .extensions_mut()
        .insert(Attach(Arc::new(Mutex::new(Some(Opened {
            watch: live,
            last,
        })))));
    response
}
