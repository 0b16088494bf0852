//! The live feed: one poller thread reads what any process committed to the state file, and
//! the runtime's fan-out task publishes it, pre-encoded as SSE, to a broadcast per stream that
//! has watchers; plus the pool of read connections request handlers borrow.
//!
//! Persist first, then publish: the poller only ever publishes frames it read back from the
//! file, so a subscriber can never see a frame a reconnect would not replay. It looks when a
//! committing writer pokes it ([`crate::wake`]) and at least every [`SAFETY_POLL`], so a lost
//! poke delays a frame and never loses one. A stream's broadcast lives exactly as long as its
//! watchers: the last [`Watch`] to go drops it, and no more watchers or streams than the
//! [`Limits`] are ever held.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use greenlight_store::{Reads, Store};
use greenlight_stream::{StreamId, encode_frame};
use tokio::sync::{broadcast, mpsc, watch};

use crate::error::ApiError;
use crate::wake::{Listener, SAFETY_POLL};
use crate::{Error, Limits};

/// How often the poller looks for new commits when it could not bind its wake-up socket (a
/// state path too long for a socket's name, say): well under the 100 ms delivery promise.
pub const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Batches (one per poll that found frames of the stream) a subscriber may fall behind the live
/// feed before it is disconnected (it resumes by cursor from the file, so nothing is lost).
pub const LIVE_CAPACITY: usize = 4096;
/// Frames read per poll.
const POLL_BATCH: usize = 1024;

/// The frames of one stream that one poll found, in seq order: one wake-up and one write per
/// subscriber however many frames the poll brought (the fan-out's cost is per wake-up).
pub type LiveBatch = Arc<[LiveFrame]>;

/// One committed frame as subscribers receive it: its seq and its SSE bytes, encoded once.
#[derive(Debug, Clone)]
pub struct LiveFrame {
    /// Its seq in its stream.
    pub seq: u64,
    /// `id: …\ndata: …\n\n`.
    pub sse: Bytes,
}

/// The broadcasts of the streams being watched, and how many watchers they have in all.
#[derive(Default)]
struct Live {
    channels: HashMap<StreamId, broadcast::Sender<LiveBatch>>,
    watchers: usize,
}

/// What the live feed holds right now (each bounded by its [`Limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Held {
    /// Open watchers, over every stream.
    pub watchers: usize,
    /// Streams with a live broadcast (at least one watcher each).
    pub live_streams: usize,
}

/// One watcher's place in a stream's live feed. Dropping it (the response ends, the client
/// leaves) frees the place, and the stream's broadcast with its last watcher.
pub struct Watch {
    hub: Arc<Hub>,
    stream: StreamId,
    /// The stream's live batches.
    pub live: broadcast::Receiver<LiveBatch>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut live = lock(&self.hub.live);
        live.watchers = live.watchers.saturating_sub(1);
        // Nobody subscribes while the lock is held, so one receiver left is this one.
        if live
            .channels
            .get(&self.stream)
            .is_some_and(|sender| sender.receiver_count() <= 1)
        {
            live.channels.remove(&self.stream);
        }
    }
}

/// Shared by every request: the broadcasts, the change counter, the read pool.
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

    /// The state file.
    pub fn state(&self) -> &std::path::Path {
        &self.state
    }

    /// A place in `stream`'s live feed (its broadcast is created for its first watcher), or a
    /// `503` when the server already holds as many watchers or streams as its [`Limits`] allow.
    /// The caller checks that the stream exists first: a missing one must cost nothing.
    pub fn watch(self: &Arc<Self>, stream: StreamId) -> Result<Watch, ApiError> {
        let mut live = lock(&self.live);
        if live.watchers >= self.limits.watchers {
            return Err(ApiError::unavailable(format!(
                "this server already serves {} streams, its limit; close a page that watches one, or retry later",
                self.limits.watchers
            )));
        }
        let receiver = match live.channels.get(&stream) {
            Some(sender) => sender.subscribe(),
            None if live.channels.len() >= self.limits.live_streams => {
                return Err(ApiError::unavailable(format!(
                    "this server already streams {} different goals and runs live, its limit; close a page that watches one, or retry later",
                    self.limits.live_streams
                )));
            }
            None => {
                let (sender, receiver) = broadcast::channel(LIVE_CAPACITY);
                live.channels.insert(stream, sender);
                receiver
            }
        };
        live.watchers += 1;
        Ok(Watch {
            hub: Arc::clone(self),
            stream,
            live: receiver,
        })
    }

    /// What the live feed holds right now.
    pub fn held(&self) -> Held {
        let live = lock(&self.live);
        Held {
            watchers: live.watchers,
            live_streams: live.channels.len(),
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

    /// Hands the frames committed after `position` to the fan-out; returns the new position.
    fn publish_since(
        store: &Store,
        mut position: i64,
        fanout: &mpsc::UnboundedSender<Vec<(StreamId, LiveBatch)>>,
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
                    sse: Bytes::from(encode_frame(frame)),
                };
                match by_stream
                    .iter_mut()
                    .find(|(stream, _)| *stream == frame.stream)
                {
                    Some((_, frames)) => frames.push(live),
                    None => by_stream.push((frame.stream, vec![live])),
                }
            }
            let batches = by_stream
                .into_iter()
                .map(|(stream, frames)| (stream, LiveBatch::from(frames)))
                .collect();
            // Closed only once the runtime is gone, when nobody is left to watch.
            let _ = fanout.send(batches);
            position = last;
            if batch.len() < POLL_BATCH {
                return Ok(position);
            }
        }
    }

    /// The poller: when poked, and at least every [`SAFETY_POLL`] (every [`POLL_INTERVAL`] when
    /// no wake-up socket could be bound), reads and publishes the frames after its position,
    /// then looks at the store's last frame (pruned?) and last event, and bumps the change
    /// counter when anything moved. Returns
    /// the thread and, when the wake-up socket could not be bound, why (the poller then polls).
    pub fn spawn_poller(self: &Arc<Self>) -> Result<Poller, Error> {
        let store = Store::open(&self.state)?;
        // Unbounded: the runtime takes each batch within a wake-up; a bound would make the
        // poller wait on a runtime that, at shutdown, no longer runs its tasks.
        let (fanout, batches) = mpsc::unbounded_channel();
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
                    let Ok(next) = Hub::publish_since(&store, position, &fanout) else {
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
            fanout: Fanout {
                hub: Arc::clone(self),
                batches,
            },
            wake_unavailable: unbound,
        })
    }
}

/// The poller's thread, the fan-out the server's runtime must run, and why the wake-up socket
/// could not be bound (the poller then polls).
pub struct Poller {
    /// Reads the new frames when woken, and hands them to `fanout`.
    pub thread: std::thread::JoinHandle<()>,
    /// Sends them to their streams' watchers: spawned on the server's runtime.
    pub fanout: Fanout,
    /// Why the poller polls instead of being woken, if it does.
    pub wake_unavailable: Option<std::io::Error>,
}

/// The runtime's side of the live feed: the batches the poller read, sent to their streams'
/// broadcasts by a task of the runtime. Sent from the poller's own thread, every watcher's
/// wake-up would cross threads (an eventfd write each: 100 per frame at 100 watchers); from
/// here the runtime schedules its watchers itself, after one wake-up per poll.
pub struct Fanout {
    hub: Arc<Hub>,
    batches: mpsc::UnboundedReceiver<Vec<(StreamId, LiveBatch)>>,
}

impl Fanout {
    /// Forwards until the poller ends.
    pub async fn run(mut self) {
        while let Some(batches) = self.batches.recv().await {
            let live = lock(&self.hub.live);
            for (stream, batch) in batches {
                // A stream nobody watches has no broadcast: its frames are only in the file.
                if let Some(sender) = live.channels.get(&stream) {
                    let _ = sender.send(batch);
                }
            }
        }
    }
}
