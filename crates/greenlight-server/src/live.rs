//! The watchers of every stream, and the fan-out that writes each committed frame straight to
//! the socket of every watcher that is caught up, from the poller's own thread: no task is
//! woken and no HTTP layer runs between a frame read back from the store and its watchers.
//!
//! A watcher whose socket cannot take a frame at once (its send buffer is full) falls behind:
//! the frame's bytes are queued for it and its own task ([`crate::stream`]) writes the queue, and
//! fills in from the store whatever the queue does not hold, until it is caught up again. Only
//! one side ever writes to a socket: the poller while the watcher is [`Mode::Live`], its task
//! while it is behind; the switch is made under the hub's lock, so bytes never interleave. A
//! watcher more than [`LIVE_CAPACITY`] writes behind is ended (it resumes by cursor from the
//! store, so nothing is lost), which bounds what a client that stopped reading can cost.

use std::collections::{HashMap, VecDeque};
use std::io::ErrorKind;
use std::sync::Arc;

use axum::body::Bytes;
use greenlight_stream::StreamId;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::Limits;
use crate::error::ApiError;

/// Writes queued for a watcher that fell behind before it is ended.
pub const LIVE_CAPACITY: usize = 4096;

/// One committed frame as watchers receive it: its seq and its SSE bytes, encoded once for
/// every watcher.
#[derive(Debug, Clone)]
pub struct LiveFrame {
    /// Its seq in its stream.
    pub seq: u64,
    /// `id: …\ndata: …\n\n`.
    pub sse: Encoded,
}

/// How a stream's body is delimited on its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// HTTP/1.1: chunked, ended by the last chunk.
    Chunked,
    /// HTTP/1.0, which has no chunks: the body ends when the connection closes.
    UntilClose,
}

impl Framing {
    /// What ends the body before the connection closes.
    pub fn end(self) -> &'static [u8] {
        match self {
            Framing::Chunked => b"0\r\n\r\n",
            Framing::UntilClose => b"",
        }
    }
}

/// SSE bytes encoded once as one chunk of a chunked body; an HTTP/1.0 watcher is sent the
/// same bytes without the chunk's framing (a slice of them, not a copy).
#[derive(Debug, Clone)]
pub struct Encoded {
    chunk: Bytes,
    data: std::ops::Range<usize>,
}

impl Encoded {
    /// `sse` as a chunk.
    pub fn new(sse: &[u8]) -> Encoded {
        let size = format!("{:x}\r\n", sse.len());
        let mut chunk = Vec::with_capacity(size.len() + sse.len() + 2);
        chunk.extend_from_slice(size.as_bytes());
        chunk.extend_from_slice(sse);
        chunk.extend_from_slice(b"\r\n");
        Encoded {
            chunk: Bytes::from(chunk),
            data: size.len()..size.len() + sse.len(),
        }
    }

    /// The bytes a body framed as `framing` carries.
    pub fn bytes(&self, framing: Framing) -> Bytes {
        match framing {
            Framing::Chunked => self.chunk.clone(),
            Framing::UntilClose => self.chunk.slice(self.data.clone()),
        }
    }
}

/// What waits to be written for a watcher that is behind.
#[derive(Debug)]
pub enum Queued {
    /// Bytes that go out as they are (the rest of a frame a write cut short).
    Raw(Bytes),
    /// A frame, written only if it is the next the watcher needs.
    Frame(u64, Bytes),
}

/// Who writes to a watcher's socket.
#[derive(Debug)]
enum Mode {
    /// Caught up: the poller writes each frame as it reads it.
    Live,
    /// Behind: its task writes the queue; `ending` once it fell too far behind (the queue then
    /// holds only the rest of a frame already begun, and the response ends after it).
    Behind {
        queue: VecDeque<Queued>,
        ending: bool,
    },
    /// Its socket failed: nothing more is written.
    Broken,
}

/// One watcher's place in its stream.
struct Entry {
    id: u64,
    socket: Arc<TcpStream>,
    framing: Framing,
    /// The last seq it has been given (written to its socket, or queued for it).
    last: u64,
    mode: Mode,
    /// Its task, told when it must take over (fell behind, broke).
    wake: Arc<Notify>,
}

impl Entry {
    /// Gives the watcher the frames of one poll of its stream, in seq order (`joined`: all of
    /// them in one chunk, when they follow each other).
    fn offer(&mut self, frames: &[LiveFrame], joined: Option<&Encoded>) {
        let (Some(first), Some(newest)) = (frames.first(), frames.last()) else {
            return;
        };
        if let (Mode::Live, Some(joined)) = (&self.mode, joined)
            && first.seq == self.last + 1
        {
            self.write_live(newest.seq, &joined.bytes(self.framing));
            return;
        }
        for frame in frames {
            match self.mode {
                Mode::Broken => return,
                Mode::Behind { .. } => {
                    self.queue(Queued::Frame(frame.seq, frame.sse.bytes(self.framing)));
                }
                // At or below `last`: already given (its task read it from the store).
                Mode::Live if frame.seq <= self.last => {}
                Mode::Live if frame.seq == self.last + 1 => {
                    self.write_live(frame.seq, &frame.sse.bytes(self.framing))
                }
                // Skipped ahead: what lies between is in the store, which its task reads.
                Mode::Live => {
                    let bytes = frame.sse.bytes(self.framing);
                    self.fall_behind(Queued::Frame(frame.seq, bytes));
                }
            }
        }
    }

    /// Writes `bytes`, which end with frame `seq`, without waiting; what the socket does not
    /// take now is left to the watcher's task.
    fn write_live(&mut self, seq: u64, bytes: &Bytes) {
        let taken = match self.socket.try_write(bytes) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => 0,
            Err(_) => return self.break_off(),
        };
        self.last = seq;
        if taken < bytes.len() {
            self.fall_behind(Queued::Raw(bytes.slice(taken..)));
        }
    }

    fn fall_behind(&mut self, first: Queued) {
        self.mode = Mode::Behind {
            queue: VecDeque::from([first]),
            ending: false,
        };
        self.wake.notify_one();
    }

    fn queue(&mut self, item: Queued) {
        let Mode::Behind { queue, ending } = &mut self.mode else {
            return;
        };
        if *ending {
            return;
        }
        if queue.len() >= LIVE_CAPACITY {
            // Too slow: end it rather than hold more; it resumes from the store by cursor. The
            // rest of a frame already begun still goes out, so the body stays well formed.
            queue.retain(|item| matches!(item, Queued::Raw(_)));
            *ending = true;
            return;
        }
        queue.push_back(item);
    }

    fn break_off(&mut self) {
        self.mode = Mode::Broken;
        self.wake.notify_one();
    }
}

/// The watchers of one stream: the places taken (by responses being opened or served) and
/// the sockets attached.
#[derive(Default)]
struct StreamWatchers {
    places: usize,
    entries: Vec<Entry>,
}

/// What a watcher's task finds when it asks for its queue.
#[derive(Debug)]
pub enum Taken {
    /// Write these, then ask again.
    Items(VecDeque<Queued>),
    /// Nothing was waiting: it is live again, the poller writes to it.
    Live,
    /// The response ends: cleanly (`true`: it fell too far behind, the end of the body can be
    /// written), or because its socket failed.
    End(bool),
}

/// Every stream's watchers, and how many places are taken in all; kept under the hub's lock.
#[derive(Default)]
pub struct Live {
    streams: HashMap<StreamId, StreamWatchers>,
    places: usize,
    next_id: u64,
}

impl Live {
    /// Takes a place in `stream` for a response about to be opened, or says why not: the
    /// server already holds as many watchers or streams as `limits` allow.
    pub fn take_place(&mut self, stream: StreamId, limits: Limits) -> Result<(), ApiError> {
        if self.places >= limits.watchers {
            return Err(ApiError::unavailable(format!(
                "this server already serves {} streams, its limit; close a page that watches one, or retry later",
                limits.watchers
            )));
        }
        if !self.streams.contains_key(&stream) && self.streams.len() >= limits.live_streams {
            return Err(ApiError::unavailable(format!(
                "this server already streams {} different goals and runs live, its limit; close a page that watches one, or retry later",
                limits.live_streams
            )));
        }
        self.streams.entry(stream).or_default().places += 1;
        self.places += 1;
        Ok(())
    }

    /// Frees a place taken in `stream` (its socket, if attached, was detached first).
    pub fn free_place(&mut self, stream: StreamId) {
        self.places = self.places.saturating_sub(1);
        if let Some(watchers) = self.streams.get_mut(&stream) {
            watchers.places = watchers.places.saturating_sub(1);
            if watchers.places == 0 {
                self.streams.remove(&stream);
            }
        }
    }

    /// How many places are taken, over how many streams, and how many watchers are behind.
    pub fn held(&self) -> (usize, usize, usize) {
        let behind = self
            .streams
            .values()
            .flat_map(|w| &w.entries)
            .filter(|e| matches!(e.mode, Mode::Behind { .. }))
            .count();
        (self.places, self.streams.len(), behind)
    }

    /// Attaches a socket to its place in `stream`, behind (its task first fills in from the
    /// store after `last`) and with an empty queue; returns its id.
    pub fn attach(
        &mut self,
        stream: StreamId,
        socket: Arc<TcpStream>,
        framing: Framing,
        last: u64,
        wake: Arc<Notify>,
    ) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.streams.entry(stream).or_default().entries.push(Entry {
            id,
            socket,
            framing,
            last,
            mode: Mode::Behind {
                queue: VecDeque::new(),
                ending: false,
            },
            wake,
        });
        id
    }

    /// Takes a socket off its stream.
    pub fn detach(&mut self, stream: StreamId, id: u64) {
        if let Some(watchers) = self.streams.get_mut(&stream) {
            watchers.entries.retain(|e| e.id != id);
        }
    }

    fn entry(&mut self, stream: StreamId, id: u64) -> Option<&mut Entry> {
        self.streams
            .get_mut(&stream)?
            .entries
            .iter_mut()
            .find(|e| e.id == id)
    }

    /// Writes one poll's frames of `stream` to its live watchers and queues them for the
    /// others.
    pub fn publish(&mut self, stream: StreamId, frames: &[LiveFrame], joined: Option<&Encoded>) {
        if let Some(watchers) = self.streams.get_mut(&stream) {
            for entry in &mut watchers.entries {
                entry.offer(frames, joined);
            }
        }
    }

    /// A behind watcher's task asks for what is queued; with nothing queued, the watcher is
    /// live again from `sent`, the last seq its task wrote.
    pub fn take(&mut self, stream: StreamId, id: u64, sent: u64) -> Taken {
        let Some(entry) = self.entry(stream, id) else {
            return Taken::End(false);
        };
        match &mut entry.mode {
            Mode::Broken => Taken::End(false),
            Mode::Behind { queue, ending } if queue.is_empty() => {
                if *ending {
                    return Taken::End(true);
                }
                entry.mode = Mode::Live;
                entry.last = sent;
                Taken::Live
            }
            Mode::Behind { queue, .. } => Taken::Items(std::mem::take(queue)),
            Mode::Live => Taken::Live,
        }
    }

    /// A live watcher's task, woken: the last seq it was given if it fell behind or broke
    /// since (its task takes over), `None` while it is still live.
    pub fn fell_behind(&mut self, stream: StreamId, id: u64) -> Option<u64> {
        match self.entry(stream, id) {
            Some(entry) if matches!(entry.mode, Mode::Live) => None,
            Some(entry) => Some(entry.last),
            None => Some(0),
        }
    }

    /// Writes `bytes` (a heartbeat) to a live watcher if its socket takes them now; a socket
    /// that cannot is busy, and skipping the heartbeat costs nothing.
    pub fn offer_idle(&mut self, stream: StreamId, id: u64, heartbeat: &Encoded) {
        let Some(entry) = self.entry(stream, id) else {
            return;
        };
        if !matches!(entry.mode, Mode::Live) {
            return;
        }
        let bytes = heartbeat.bytes(entry.framing);
        match entry.socket.try_write(&bytes) {
            Ok(n) if n < bytes.len() => entry.fall_behind(Queued::Raw(bytes.slice(n..))),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => entry.break_off(),
        }
    }
}
