//! One stream over SSE: the resume decision, the replay from the file, the hand-over to the live
//! feed without a gap or a duplicate, the heartbeat, and the end (a gap, a lagging subscriber,
//! the server stopping).
//!
//! The hand-over: subscribe to the live broadcast first, then read the file. Every frame the
//! broadcast carries was committed, so it is either in what the file read returns (and dropped
//! as seq ≤ last sent) or after it. A live frame that skips ahead sends the stream back to the
//! file to fill in what lies between. A stream never ends by itself when its goal is done or its
//! run finished: it stays open and live (frames may still come, e.g. a resumed goal).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use greenlight_store::{Reads, SystemClock, WallClock};
use greenlight_stream::{Resume, StreamId, encode_frame, encode_gap, encode_retry, resolve};
use tokio::sync::{broadcast, watch};

use crate::error::ApiError;
use crate::hub::{Hub, Watch};
use crate::summary::stream_exists;

/// The reconnection delay sent once at the start.
pub const RETRY_MS: u64 = 2000;
/// The heartbeat comment interval (under every common proxy's idle timeout).
pub const PING_INTERVAL: Duration = Duration::from_secs(15);
/// Frames read from the file per step of a replay.
const REPLAY_PAGE: usize = 512;
const PING: &[u8] = b": ping\n\n";

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

/// Where a subscriber is.
enum Phase {
    /// Read the file after `last` before going live.
    Replay,
    /// Forward the broadcast.
    Live,
    Done,
}

struct Subscriber {
    hub: Arc<Hub>,
    stream: StreamId,
    live: Watch,
    shutdown: watch::Receiver<bool>,
    ping: tokio::time::Interval,
    last: u64,
    phase: Phase,
    first: Option<Bytes>,
}

impl Subscriber {
    /// The next chunk of the body, or `None` at its end.
    async fn next(&mut self) -> Option<Bytes> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        loop {
            match std::mem::replace(&mut self.phase, Phase::Done) {
                Phase::Done => return None,
                Phase::Replay => match self.replay_page().await {
                    Ok(Some(bytes)) => {
                        self.phase = Phase::Replay;
                        return Some(bytes);
                    }
                    Ok(None) => self.phase = Phase::Live,
                    Err(gap) => return Some(gap),
                },
                Phase::Live => {
                    self.phase = Phase::Live;
                    if let Some(bytes) = self.live_step().await {
                        return Some(bytes);
                    }
                    if matches!(self.phase, Phase::Live) {
                        // Ended (lagged, shut down): the body ends; the client resumes by cursor.
                        return None;
                    }
                }
            }
        }
    }

    /// The next page of stored frames after `last` (`None`: caught up). A hole is the gap frame.
    async fn replay_page(&mut self) -> Result<Option<Bytes>, Bytes> {
        let (stream, after) = (self.stream, self.last);
        let page = self
            .hub
            .with_store(move |store| Ok(store.frames_after(stream, after, REPLAY_PAGE)?))
            .await;
        let frames = match page {
            Ok(frames) => frames,
            Err(e) => {
                return Err(gap(
                    stream,
                    &format!("the state file could not be read: {}", e.detail),
                ));
            }
        };
        if frames.is_empty() {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(frames.len() * 256);
        for frame in &frames {
            if frame.seq != self.last + 1 {
                return Err(gap(
                    stream,
                    &format!(
                        "frame {}:{} is no longer stored (the next stored is {})",
                        stream,
                        self.last + 1,
                        frame.seq
                    ),
                ));
            }
            out.extend_from_slice(encode_frame(frame).as_bytes());
            self.last = frame.seq;
        }
        Ok(Some(Bytes::from(out)))
    }

    /// The next live chunk; `None` with the phase still `Live` means the stream ends, with the
    /// phase `Replay` it means "fill in from the file first".
    async fn live_step(&mut self) -> Option<Bytes> {
        loop {
            let received = tokio::select! {
                biased;
                _ = self.shutdown.changed() => return None,
                r = self.live.live.recv() => r,
                _ = self.ping.tick() => return Some(Bytes::from_static(PING)),
            };
            let first = match received {
                Ok(batch) => batch,
                // Too slow: disconnect rather than skip; the client resumes from the file.
                Err(broadcast::error::RecvError::Lagged(_)) => return None,
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            let mut out = Chunk::Empty;
            let mut next = Some(first);
            while let Some(batch) = next.take() {
                for frame in batch.iter() {
                    if frame.seq > self.last + 1 {
                        // Skipped ahead: what lies between is in the file.
                        self.phase = Phase::Replay;
                        return out.into_bytes();
                    }
                    // At or below `last`: already sent (the hand-over from the file).
                    if frame.seq == self.last + 1 {
                        out.push(&frame.sse);
                        self.last = frame.seq;
                    }
                }
                // Batches already waiting go out in the same write.
                next = match self.live.live.try_recv() {
                    Ok(batch) => Some(batch),
                    Err(broadcast::error::TryRecvError::Lagged(_)) => {
                        self.phase = Phase::Done;
                        return out.into_bytes();
                    }
                    Err(_) => None,
                };
            }
            if let Some(out) = out.into_bytes() {
                return Some(out);
            }
        }
    }
}

/// One write's frames: a lone frame's shared bytes go out as they are, so a frame fanned out
/// to every watcher is copied for none of them; several are joined into one write.
enum Chunk {
    Empty,
    One(Bytes),
    Many(Vec<u8>),
}

impl Chunk {
    fn push(&mut self, frame: &Bytes) {
        *self = match std::mem::replace(self, Chunk::Empty) {
            Chunk::Empty => Chunk::One(frame.clone()),
            Chunk::One(first) => {
                let mut joined = Vec::with_capacity(first.len() + frame.len());
                joined.extend_from_slice(&first);
                joined.extend_from_slice(frame);
                Chunk::Many(joined)
            }
            Chunk::Many(mut joined) => {
                joined.extend_from_slice(frame);
                Chunk::Many(joined)
            }
        };
    }

    fn into_bytes(self) -> Option<Bytes> {
        match self {
            Chunk::Empty => None,
            Chunk::One(bytes) => Some(bytes),
            Chunk::Many(joined) => Some(Bytes::from(joined)),
        }
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
    let (last, phase) = match resolve(raw_cursor.as_deref(), stream, head, oldest) {
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
        Resume::Fresh => (oldest.saturating_sub(1), Phase::Replay),
        Resume::Replay { after } => (after, Phase::Replay),
    };
    let mut ping =
        tokio::time::interval_at(tokio::time::Instant::now() + PING_INTERVAL, PING_INTERVAL);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let subscriber = Subscriber {
        shutdown: hub.shutdown_signal(),
        hub,
        stream,
        live,
        ping,
        last,
        phase,
        first: Some(Bytes::from(retry)),
    };
    let body = futures_util::stream::unfold(subscriber, |mut sub| async move {
        sub.next()
            .await
            .map(|bytes| (Ok::<_, std::convert::Infallible>(bytes), sub))
    });
    sse_response(Body::from_stream(body))
}
