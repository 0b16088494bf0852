//! The live feed: one poller thread reads what any process committed to the state file and
//! writes it, encoded once as SSE, to the watchers of its stream ([`crate::live`]); plus the
//! pool of read connections request handlers borrow.
//!
//! Persist first, then publish: the poller only ever publishes frames it read back from the
//! file, so a watcher can never see a frame a reconnect would not replay. It looks when a
//! committing writer pokes it ([`crate::wake`]) and at least every [`SAFETY_POLL`], so a lost
//! poke delays a frame and never loses one. No more watchers or streams than the [`Limits`]
//! are ever held.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use greenlight_store::{Reads, Store};
use greenlight_stream::{StreamId, encode_frame};
use tokio::net::TcpStream;
use tokio::sync::{Notify, watch};

use crate::error::ApiError;
use crate::live::{Encoded, Framing, Live, LiveFrame, Taken};
use crate::wake::{Listener, SAFETY_POLL};
use crate::{Error, Limits};

/// How often the poller looks for new commits when it could not bind its wake-up socket (a
/// state path too long for a socket's name, say): well under the 100 ms delivery promise.
pub const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Frames read per poll.
const POLL_BATCH: usize = 1024;

/// What the live feed holds right now (each bounded by its [`Limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Held {
    /// Open watchers, over every stream.
    pub watchers: usize,
    /// Streams with at least one watcher.
    pub live_streams: usize,
    /// Watchers whose socket could not take the live frames at once, being caught up by their
    /// own task (or being served what the file holds after their cursor, just opened).
    pub behind: usize,
}

/// One watcher's place in a stream, from the response being opened until it ends. Dropping it
/// (the response ends, the client leaves) frees the place, and the stream's with its last.
pub struct Watch {
    hub: Arc<Hub>,
    stream: StreamId,
}

impl Drop for Watch {
    fn drop(&mut self) {
        lock(&self.hub.live).free_place(self.stream);
    }
}

impl Watch {
    /// The stream watched.
    pub fn stream(&self) -> StreamId {
        self.stream
    }

    /// The hub it was taken from.
    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    /// Attaches the response's socket: the poller queues the stream's frames for it from now
    /// on, and writes them to it once its task called it caught up ([`Watch::take`]).
    pub fn attach(
        &self,
        socket: Arc<TcpStream>,
        framing: Framing,
        last: u64,
        wake: Arc<Notify>,
    ) -> u64 {
        lock(&self.hub.live).attach(self.stream, socket, framing, last, wake)
    }

    /// Takes the socket off the stream.
    pub fn detach(&self, id: u64) {
        lock(&self.hub.live).detach(self.stream, id);
    }

    /// What is queued for the attached socket `id` (see [`Live::take`]).
    pub fn take(&self, id: u64, sent: u64) -> Taken {
        lock(&self.hub.live).take(self.stream, id, sent)
    }

    /// Whether the attached socket `id` fell behind (see [`Live::fell_behind`]).
    pub fn fell_behind(&self, id: u64) -> Option<u64> {
        lock(&self.hub.live).fell_behind(self.stream, id)
    }

    /// A heartbeat for the attached socket `id` (see [`Live::offer_idle`]).
    pub fn offer_idle(&self, id: u64, heartbeat: &Encoded) {
        lock(&self.hub.live).offer_idle(self.stream, id, heartbeat);
    }
}

/// Shared by every request: the watchers, the change counter, the read pool.
pub struct Hub {
    state: PathBuf,
    limits: Limits,
    live: Mutex<Live>,
    changes: watch::Sender<u64>,
    pool: Mutex<Vec<Store>>,
    stopping: AtomicBool,
    shutdown: watch::Sender<bool>,
    /// The poller's wake-up socket, poked on stop so the poller sees it at once.
    wake_path: Mutex<Option<PathBuf>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves plain data behind; keep serving it.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Hub {
    /// A hub for the state file at `state` (opened, and migrated, once here so errors surface
    /// before the server binds).
    pub fn new(state: PathBuf, limits: Limits) -> Result<Arc<Hub>, greenlight_store::Error> {
        let store = Store::open(&state)?;
        Ok(Arc::new(Hub {
            state,
            limits,
            live: Mutex::new(Live::default()),
            changes: watch::channel(0).0,
            pool: Mutex::new(vec![store]),
            stopping: AtomicBool::new(false),
            shutdown: watch::channel(false).0,
            wake_path: Mutex::new(None),
        }))
    }

    /// What clients may make this server hold.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The state file.
    pub fn state(&self) -> &std::path::Path {
        &self.state
    }

    /// A place in `stream`'s live feed, or a `503` when the server already holds as many
    /// watchers or streams as its [`Limits`] allow. The caller checks that the stream exists
    /// first: a missing one must cost nothing.
    pub fn watch(self: &Arc<Self>, stream: StreamId) -> Result<Watch, ApiError> {
        lock(&self.live).take_place(stream, self.limits)?;
        Ok(Watch {
            hub: Arc::clone(self),
            stream,
        })
    }

    /// What the live feed holds right now.
    pub fn held(&self) -> Held {
        let (watchers, live_streams, behind) = lock(&self.live).held();
        Held {
            watchers,
            live_streams,
            behind,
        }
    }

    /// Bumped whenever anything is committed to the file (frames or the event log).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Becomes true when the server stops: every stream ends.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Ends every stream and the poller.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        let _ = self.shutdown.send(true);
        if let Some(path) = lock(&self.wake_path).as_deref() {
            crate::wake::interrupt(path);
        }
    }

    /// Runs `f` with a read connection on the blocking pool.
    pub async fn with_store<T, F>(self: &Arc<Self>, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Store) -> Result<T, ApiError> + Send + 'static,
    {
        let hub = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let taken = lock(&hub.pool).pop();
            let mut store = match taken {
                Some(store) => store,
                None => Store::open(&hub.state)?,
            };
            let result = f(&mut store);
            lock(&hub.pool).push(store);
            result
        })
        .await
        .map_err(|e| ApiError::internal(format!("a store task failed: {e}")))?
    }

    /// Writes the frames committed after `position` to their streams' watchers; returns the
    /// new position.
    fn publish_since(
        &self,
        store: &Store,
        mut position: i64,
    ) -> Result<i64, greenlight_store::Error> {
        loop {
            let batch = store.frames_since(position, POLL_BATCH)?;
            let Some(&(last, _)) = batch.last() else {
                return Ok(position);
            };
            let mut by_stream: Vec<(StreamId, Vec<LiveFrame>)> = Vec::new();
            for (_, frame) in &batch {
                let live = LiveFrame {
                    seq: frame.seq,
                    sse: Encoded::new(encode_frame(frame).as_bytes()),
                };
                match by_stream
                    .iter_mut()
                    .find(|(stream, _)| *stream == frame.stream)
                {
                    Some((_, frames)) => frames.push(live),
                    None => by_stream.push((frame.stream, vec![live])),
                }
            }
            // Encoded before the lock: the poller holds it only to write.
            let joins: Vec<Option<Encoded>> =
                by_stream.iter().map(|(_, frames)| joined(frames)).collect();
            let mut live = lock(&self.live);
            for ((stream, frames), joined) in by_stream.iter().zip(&joins) {
                live.publish(*stream, frames, joined.as_ref());
            }
            drop(live);
            position = last;
            if batch.len() < POLL_BATCH {
                return Ok(position);
            }
        }
    }

    /// The poller: when poked, and at least every [`SAFETY_POLL`] (every [`POLL_INTERVAL`] when
    /// no wake-up socket could be bound), reads and publishes the frames after its position,
    /// then looks at the store's last frame (pruned?) and last event, and bumps the change
    /// counter when anything moved. Returns the thread and, when the wake-up socket could not
    /// be bound, why (the poller then polls).
    pub fn spawn_poller(self: &Arc<Self>) -> Result<Poller, Error> {
        let store = Store::open(&self.state)?;
        let mut position = store.last_frame_position()?;
        let mut events = store.last_seq()?;
        // Bound before the first look, so a commit after that look always pokes it.
        let (listener, unbound) = match Listener::bind(&self.state) {
            Ok(listener) => (Some(listener), None),
            Err(e) => (None, Some(e)),
        };
        *lock(&self.wake_path) = listener
            .as_ref()
            .and_then(|l| l.path().map(std::path::Path::to_path_buf));
        let hub = Arc::clone(self);
        let thread = std::thread::Builder::new()
            .name("greenlight-serve-poll".into())
            .spawn(move || {
                // Owned by this thread: its socket is removed when the poller ends.
                let listener = listener;
                let mut failed = false;
                while !hub.stopping.load(Ordering::SeqCst) {
                    match &listener {
                        Some(listener) if !failed => listener.wait(SAFETY_POLL),
                        _ => std::thread::sleep(POLL_INTERVAL),
                    }
                    // New frames first: the read that finds them is the only one between a
                    // commit and its watchers (on PostgreSQL each read is a round trip).
                    // A failed read (a writer holding an exclusive lock for a migration, say) is
                    // retried soon, poked or not; nothing is skipped because the position stays.
                    let Ok(next) = hub.publish_since(&store, position) else {
                        failed = true;
                        continue;
                    };
                    let mut moved = next != position;
                    position = next;
                    let Ok(head) = store.last_frame_position() else {
                        failed = true;
                        continue;
                    };
                    failed = false;
                    if head < position {
                        // The newest frames were pruned, so new frames may take positions at or
                        // below ours: start again from the file's last one.
                        position = head;
                        moved = true;
                    }
                    let event_head = store.last_seq().unwrap_or(events);
                    moved |= event_head != events;
                    events = event_head;
                    if moved {
                        hub.changes.send_modify(|n| *n += 1);
                    }
                }
                *lock(&hub.wake_path) = None;
            })
            .map_err(Error::Runtime)?;
        Ok(Poller {
            thread,
            wake_unavailable: unbound,
        })
    }
}

/// One chunk holding every frame of `frames`, when their seqs follow each other (one write
/// per watcher for a poll that found several); `None` for a single frame or a hole.
fn joined(frames: &[LiveFrame]) -> Option<Encoded> {
    if frames.len() < 2 || frames.windows(2).any(|w| w[1].seq != w[0].seq + 1) {
        return None;
    }
    let mut sse = Vec::new();
    for frame in frames {
        sse.extend_from_slice(&frame.sse.bytes(Framing::UntilClose));
    }
    Some(Encoded::new(&sse))
}

/// The poller's thread, and why the wake-up socket could not be bound (the poller then polls).
pub struct Poller {
    /// Reads the new frames when woken, and writes them to their watchers.
    pub thread: std::thread::JoinHandle<()>,
    /// Why the poller polls instead of being woken, if it does.
    pub wake_unavailable: Option<std::io::Error>,
}
