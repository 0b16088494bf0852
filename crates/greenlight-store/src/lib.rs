//! SQLite state for the goal loop and the Stop hook: goals, gates, turns, gate runs, the dispatch
//! ledger, the append-only event log, the hook's block counters, the live frames of every
//! goal and recorded verify or hook run (`frames`), and workflow runs (`workflow`).
//!
//! One rule keeps it simple: **every change happens inside [`Store::write`]**, which opens one
//! `BEGIN IMMEDIATE` transaction, hands the closure a [`Tx`], and commits only if the closure
//! returns `Ok`. Every mutating method of [`Tx`] appends its own event in that same transaction,
//! so the event log and the tables can never disagree, and a caller that needs several changes to
//! land together (record a gate run, pause the goal, end the turn) puts them in one closure.
//!
//! Why a closure rather than one method per transition: the goal loop's transitions are
//! compositions ("a failed gate run that exhausts the retries pauses the goal"), and a closure
//! lets it compose them without the store having to know every combination. Why IMMEDIATE:
//! several greenlight processes (one per worktree) share one file, and a deferred transaction that
//! upgrades from reading to writing fails at once with `SQLITE_BUSY` instead of waiting; taking
//! the write lock up front makes `busy_timeout` apply.
//!
//! ```no_run
//! use greenlight_store::{AgentSpec, Family, NewGoal, Reads, Store};
//! # fn main() -> Result<(), greenlight_store::Error> {
//! let env = |name: &str| std::env::var_os(name);
//! let mut store = Store::open(&greenlight_store::default_state_path_from(env)?)?;
//! let goal = store.write(|tx| {
//!     tx.create_goal(&NewGoal {
//!         worktree: ".".into(),
//!         text: "make the tests pass".into(),
//!         agent: AgentSpec { family: Family::Claude, ..AgentSpec::default() },
//!         judge: None,
//!         max_turns: 20,
//!         retries: 3,
//!         gate_timeout_sec: 300,
//!         gates: vec!["cargo test".into()],
//!     })
//! })?;
//! assert_eq!(store.gates(goal)?.len(), 1);
//! # Ok(()) }
//! ```
//!
//! Nothing here touches the user's worktree: the only file written is the database (and SQLite's
//! `-wal` / `-shm` beside it); the `-wake` directory a server may make beside it is only read,
//! to poke the server after each commit ([`wake`]).

#![cfg(unix)]

mod db;
mod error;
mod frames;
mod history;
mod listing;
mod model;
mod owner;
pub mod pg;
mod queue;
mod read;
mod schema;
mod tx;
pub mod wake;
mod workflow;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};

use crate::db::Conn;

pub use db::DbError;
pub use error::Error;
pub use frames::{INTERRUPTED, Run, RunId};
pub use greenlight_stream;
pub use greenlight_types;
pub use history::{
    DEFAULT_STATS_WINDOW, DigestTelemetry, GateStats, HistoryScope, NewRunGate, RowSource,
    RunGateRow, nearest_rank,
};
pub use listing::{ARCHIVE_AFTER_MS, Changes, GoalPage};
pub use model::{
    AgentEndpoint, AgentSpec, DigestClass, Dispatch, DispatchEnd, DispatchId, DispatchOutcome,
    DispatchStep, Event, Family, Gate, GateId, GateRun, GateRunId, GateVerdict, Goal, GoalId,
    GoalState, LastResult, Millis, NewDispatch, NewGate, NewGateRun, NewGoal, NewToolCall, Pause,
    Recovered, Tokens, ToolCallRecord, ToolCallStatus, Turn,
};
pub use owner::{Liveness, RunOwner};
pub use queue::{Fence, NewQueueItem, QueueClaim, QueueItem, QueueItemId, QueueKind, QueueState};
pub use read::Reads;
pub use schema::SCHEMA_VERSION;
pub use tx::Tx;
pub use workflow::{
    IN_FLIGHT, NewWorkflowDispatch, NewWorkflowMember, NewWorkflowRun, WorkflowBudget,
    WorkflowDetail, WorkflowDispatch, WorkflowDispatchEnd, WorkflowDispatchId, WorkflowEvent,
    WorkflowMember, WorkflowRecord, WorkflowRun, WorkflowRunId, WorkflowSpend,
};

/// How long a writer waits for another process's transaction before giving up. Transactions
/// here are a handful of small statements (milliseconds); ten seconds absorbs a slow disk and a
/// burst of parallel worktrees while still failing visibly if something holds the lock for good.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Where timestamps come from, so tests can make them deterministic.
pub trait WallClock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> Millis;

    /// Whether this is the machine's own clock. On a PostgreSQL store, which many machines
    /// share, leases are then measured by the database server's clock instead: the machines'
    /// clocks may disagree by more than a lease, and one running ahead would take every item
    /// from its live holder.
    fn is_the_machines(&self) -> bool {
        false
    }
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl WallClock for SystemClock {
    fn now_ms(&self) -> Millis {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
    }

    fn is_the_machines(&self) -> bool {
        true
    }
}

/// A clock for tests: starts at `start` and advances by `step` on every reading.
#[derive(Debug)]
pub struct StepClock {
    next: AtomicI64,
    step: i64,
}

impl StepClock {
    /// A clock whose first reading is `start`.
    pub fn new(start: Millis, step: Millis) -> Self {
        StepClock {
            next: AtomicI64::new(start),
            step,
        }
    }
}

impl WallClock for StepClock {
    fn now_ms(&self) -> Millis {
        self.next.fetch_add(self.step, Ordering::SeqCst)
    }
}

/// A clock for tests that stands still until the test moves it ([`HandClock::set`]), shared
/// by every store of a test that plays several workers.
#[derive(Debug)]
pub struct HandClock(AtomicI64);

impl HandClock {
    /// A clock reading `at`.
    pub fn new(at: Millis) -> Self {
        HandClock(AtomicI64::new(at))
    }

    /// Moves the clock to `at`.
    pub fn set(&self, at: Millis) {
        self.0.store(at, Ordering::SeqCst);
    }
}

impl WallClock for HandClock {
    fn now_ms(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
}

/// The state database path in the environment `env` looks variables up in (the one the front
/// end read): `GREENLIGHT_STORE` if set (a `postgres://` URL: see [`pg`]), else
/// `GREENLIGHT_STATE` if set, else `$XDG_STATE_HOME/greenlight/state.db`, else
/// `~/.local/state/greenlight/state.db`. (`--state PATH` on the command line wins over all of
/// these; the binary handles that.)
pub fn default_state_path_from(env: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, Error> {
    let set = |name| env(name).filter(|v| !v.is_empty());
    // A PostgreSQL store shared by many machines (`postgres://…`) wins over the local file.
    if let Some(url) = set("GREENLIGHT_STORE") {
        return Ok(PathBuf::from(url));
    }
    if let Some(path) = set("GREENLIGHT_STATE") {
        return Ok(PathBuf::from(path));
    }
    // The XDG spec says a relative value is invalid and must be ignored.
    if let Some(dir) = set("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
    {
        return Ok(dir.join("greenlight").join("state.db"));
    }
    if let Some(home) = set("HOME") {
        return Ok(PathBuf::from(home).join(".local/state/greenlight/state.db"));
    }
    Err(Error::NoStatePath)
}

/// Where the files that live beside a state database go (the goal runners' locks, the result
/// cache's key, evidence files): the file itself for a SQLite store; for a PostgreSQL store,
/// which has no file, a stand-in path on this machine named after its URL, under the
/// temporary directory (everything kept there is a lock or may be lost: a lost cache key only
/// costs cache misses).
pub fn local_anchor(location: &Path) -> PathBuf {
    let Some(url) = location.to_str().filter(|l| pg::is_url(l)) else {
        return location.to_path_buf();
    };
    // FNV-1a: stable across builds and processes, which is all a directory name needs.
    let hash = url.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    std::env::temp_dir()
        .join("greenlight-postgres")
        .join(format!("{hash:016x}"))
        .join("state")
}

/// The schema version the store at `location` records, read without changing anything:
/// `None` when there is no store there yet (no file; a PostgreSQL database greenlight never
/// opened). What `greenlight store check` reports before `migrate` brings it up to date.
pub fn stored_schema_version(location: &Path) -> Result<Option<i64>, Error> {
    if let Some(url) = location.to_str().filter(|l| pg::is_url(l)) {
        let target = pg::PgTarget::parse(url)?;
        let shown = PathBuf::from(target.shown());
        let client = target.connect().map_err(|source| Error::Open {
            path: shown.clone(),
            source,
        })?;
        let conn = Conn::Postgres(&client);
        let exists: bool = conn
            .query_row(
                "SELECT to_regclass('greenlight_schema') IS NOT NULL",
                (),
                |r| r.get(0),
            )
            .map_err(|e| Error::sql(&shown, e))?;
        if !exists {
            return Ok(None);
        }
        return conn
            .query_row("SELECT MAX(version) FROM greenlight_schema", (), |r| {
                r.get(0)
            })
            .map_err(|e| Error::sql(&shown, e));
    }
    if !location.exists() {
        return Ok(None);
    }
    let open_err = |source: rusqlite::Error| Error::Open {
        path: location.to_path_buf(),
        source: source.into(),
    };
    let conn = Connection::open_with_flags(location, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(open_err)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
    conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
        .map(Some)
        .map_err(open_err)
}

/// An open state database: a SQLite file, or a PostgreSQL database named by a
/// `postgres://` URL given where a path goes. Not `Sync`: give each thread (or process) its own
/// `Store`; SQLite's locking, or PostgreSQL's, makes them safe together.
pub struct Store {
    handle: Handle,
    /// The file, or the URL without its password: what messages name.
    path: PathBuf,
    clock: Arc<dyn WallClock>,
    /// Pokes whoever follows the file after each commit (see [`wake`]); PostgreSQL notifies
    /// its listeners itself.
    waker: Option<wake::Waker>,
    /// The queue item this store writes for, checked first in every write (see [`queue`]).
    fence: Option<Fence>,
}

enum Handle {
    Sqlite(Connection),
    Postgres(pg::Pooled),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The channel PostgreSQL notifies after every write transaction commits (what SQLite's
/// writers poke the wake directory for): a server following the store looks at once.
pub const CHANGES_CHANNEL: &str = "greenlight_changes";

/// The channel PostgreSQL notifies after a transaction that queued work commits.
pub const QUEUE_CHANNEL: &str = "greenlight_queue";

/// PostgreSQL's stand-in for SQLite's IMMEDIATE transaction: every writer takes this one
/// transaction-scoped advisory lock first, so writers run one at a time, each seeing every
/// commit before it, exactly as on SQLite. Writes are a few small statements, so one lock
/// costs little; queue claims, which must not wait on each other, do not take it.
pub(crate) const PG_BEGIN_WRITE: &str = "BEGIN; SELECT pg_advisory_xact_lock(7165064437063036020)";

impl Store {
    /// Closes the open runs whose owner is gone, as [`Tx::close_abandoned_runs`] does; looks
    /// first without the write lock, so a file with no abandoned run is never written. What
    /// `history`, `serve` and every recorded run call before they show or add runs.
    pub fn close_abandoned_runs(&mut self) -> Result<Vec<RunId>, Error> {
        let any_gone = frames::open_runs(self)?
            .iter()
            .any(|(_, owner)| owner.liveness() == Liveness::Gone);
        if !any_gone {
            return Ok(Vec::new());
        }
        self.write(|tx| tx.close_abandoned_runs())
    }

    /// Marks the running workflow runs whose owner is gone as interrupted, as
    /// [`Tx::interrupt_abandoned_workflow_runs`] does; looks first without the write lock, so a
    /// file with no abandoned run is never written. What every workflow view calls first.
    pub fn interrupt_abandoned_workflow_runs(&mut self) -> Result<Vec<WorkflowRunId>, Error> {
        if !workflow::any_abandoned(self)? {
            return Ok(Vec::new());
        }
        self.write(|tx| tx.interrupt_abandoned_workflow_runs())
    }

    /// Open (creating if needed) the database at `path` with the wall clock, and migrate it.
    pub fn open(path: &Path) -> Result<Store, Error> {
        Store::open_with_clock(path, Arc::new(SystemClock))
    }

    /// Open with a given clock.
    pub fn open_with_clock(path: &Path, clock: Arc<dyn WallClock>) -> Result<Store, Error> {
        Self::open_unchecked(path, clock).map_err(|e| e.on_open(path))
    }

    fn open_unchecked(path: &Path, clock: Arc<dyn WallClock>) -> Result<Store, Error> {
        if let Some(url) = path.to_str().filter(|p| pg::is_url(p)) {
            return Store::open_postgres(&pg::PgTarget::parse(url)?, clock);
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| Error::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let open_err = |source: rusqlite::Error| Error::Open {
            path: path.to_path_buf(),
            source: source.into(),
        };
        let mut conn = Connection::open(path).map_err(open_err)?;
        // busy_timeout first: switching to WAL itself needs a lock another process may hold.
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        // Two processes opening a new file at once can still get SQLITE_BUSY straight away:
        // SQLite skips the busy handler where waiting could deadlock (a read lock upgrading
        // while another connection holds the write lock). Setting up is idempotent, so retry.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        loop {
            let attempt = Self::set_up(&mut conn, path);
            match attempt {
                Err(e) if e.is_busy() && std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => {
                    other?;
                    break;
                }
            }
        }
        Ok(Store {
            handle: Handle::Sqlite(conn),
            path: path.to_path_buf(),
            clock,
            waker: Some(wake::Waker::new(wake::dir_for(path))),
            fence: None,
        })
    }

    /// Opens the PostgreSQL store `target` names and brings its schema up to date.
    pub fn open_postgres(target: &pg::PgTarget, clock: Arc<dyn WallClock>) -> Result<Store, Error> {
        let path = PathBuf::from(target.shown());
        let open_err = |source| Error::Open {
            path: path.clone(),
            source,
        };
        let pooled = target.take().map_err(open_err)?;
        schema::migrate_postgres(Conn::Postgres(pooled.client()), &path)?;
        Ok(Store {
            handle: Handle::Postgres(pooled),
            path,
            clock,
            waker: None,
            fence: None,
        })
    }

    /// Whether this store is a PostgreSQL database (shared by many machines) rather than a
    /// file.
    pub fn is_postgres(&self) -> bool {
        matches!(self.handle, Handle::Postgres(_))
    }

    /// WAL, foreign keys, durable commits, and the schema brought up to date.
    fn set_up(conn: &mut Connection, path: &Path) -> Result<(), Error> {
        let open_err = |source: rusqlite::Error| Error::Open {
            path: path.to_path_buf(),
            source: source.into(),
        };
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(open_err)?;
        // FULL: a committed gate result or ledger row survives a power cut, not only kill -9.
        // Writes are a few per turn, so the fsync costs nothing that matters.
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(open_err)?;
        schema::migrate(conn, path)
    }

    pub(crate) fn conn(&self) -> Conn<'_> {
        match &self.handle {
            Handle::Sqlite(c) => Conn::Sqlite(c),
            Handle::Postgres(p) => Conn::Postgres(p.client()),
        }
    }

    /// Lets this connection's commits return before the disk has them (WAL with `synchronous =
    /// NORMAL`): a power cut may lose its last transactions, never corrupt the file, and a
    /// `kill -9` loses nothing. For records that are a view rather than a verdict (verify and
    /// hook runs), written many times per second, where an fsync per commit would cost more
    /// than the run.
    pub fn relax_durability(&mut self) -> Result<(), Error> {
        match &self.handle {
            Handle::Sqlite(c) => c
                .pragma_update(None, "synchronous", "NORMAL")
                .map_err(|e| Error::sql(&self.path, e)),
            // Per session: this connection's commits return before the WAL is flushed.
            Handle::Postgres(p) => Conn::Postgres(p.client())
                .batch("SET synchronous_commit = off")
                .map_err(|e| Error::sql(&self.path, e)),
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Run `f` in one write transaction (SQLite: IMMEDIATE; PostgreSQL: under the store's
    /// write lock): committed if it returns `Ok`, rolled back (leaving nothing behind) if it
    /// returns `Err`. Every row written in it carries the same timestamp, read once from the
    /// clock. After the commit, whoever follows the store is woken (see [`wake`]; PostgreSQL
    /// delivers its notifications at the commit itself): persist first, then wake.
    pub fn write<T, E>(&mut self, f: impl FnOnce(&Tx<'_>) -> Result<T, E>) -> Result<T, E>
    where
        E: From<Error>,
    {
        let now = self.clock.now_ms();
        let path = &self.path;
        match &mut self.handle {
            Handle::Sqlite(conn) => {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(|e| Error::sql(path, e))?;
                if let Some(fence) = self.fence {
                    queue::check_fence(Conn::Sqlite(&tx), path, fence)?;
                }
                let value = f(&Tx::new(Conn::Sqlite(&tx), path, now, self.fence))?;
                tx.commit().map_err(|e| Error::sql(path, e))?;
                if let Some(waker) = &mut self.waker {
                    waker.poke();
                }
                Ok(value)
            }
            Handle::Postgres(pooled) => {
                let conn = Conn::Postgres(pooled.client());
                if let Err(e) = conn.batch(PG_BEGIN_WRITE) {
                    pooled.discard();
                    return Err(Error::sql(path, e).into());
                }
                let tx = Tx::new(conn, path, now, self.fence);
                let outcome = match self.fence {
                    Some(fence) => queue::check_fence(conn, path, fence)
                        .map_err(E::from)
                        .and_then(|()| f(&tx)),
                    None => f(&tx),
                };
                let end = match &outcome {
                    Ok(_) => tx.pg_commit_sql(),
                    Err(_) => "ROLLBACK".to_owned(),
                };
                if let Err(e) = conn.batch(&end) {
                    pooled.discard();
                    return Err(Error::sql(path, e).into());
                }
                outcome
            }
        }
    }

    /// From now on every write first checks that `fence`'s queue item is still held under its
    /// epoch, and fails with [`Error::LeaseLost`] otherwise: what a worker sets on the store
    /// its claimed goal runs on.
    pub fn set_fence(&mut self, fence: Option<Fence>) {
        self.fence = fence;
    }

    /// Claims the oldest queue item that `worker`, having `labels`, may run, under a lease of
    /// `lease_ms` from now; `None` when there is none. See [`queue`] for why claims never
    /// collide.
    pub fn claim_queue_item(
        &mut self,
        worker: &str,
        labels: &[String],
        lease_ms: u64,
    ) -> Result<Option<(QueueItem, Fence)>, Error> {
        let now = self.clock.now_ms();
        let path = &self.path;
        let claimed = match &mut self.handle {
            Handle::Sqlite(conn) => {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(|e| Error::sql(path, e))?;
                let claimed = queue::claim(Conn::Sqlite(&tx), path, worker, labels, now, lease_ms)?;
                tx.commit().map_err(|e| Error::sql(path, e))?;
                claimed
            }
            Handle::Postgres(pooled) => {
                // Not under the write lock: workers claiming at once skip each other's rows.
                let conn = Conn::Postgres(pooled.client());
                conn.batch("BEGIN").map_err(|e| Error::sql(path, e))?;
                let claimed = queue::lease_now(conn, path, self.clock.as_ref(), now)
                    .and_then(|now| queue::claim(conn, path, worker, labels, now, lease_ms));
                let end = if claimed.is_ok() {
                    "COMMIT"
                } else {
                    "ROLLBACK"
                };
                if let Err(e) = conn.batch(end) {
                    pooled.discard();
                    return Err(Error::sql(path, e));
                }
                claimed?
            }
        };
        let Some((item, _, _)) = claimed else {
            return Ok(None);
        };
        let fence = Fence {
            item: item.id,
            epoch: item.lease_epoch,
        };
        let item = queue::queue_item(self, item.id)?.unwrap_or(item);
        Ok(Some((item, fence)))
    }

    /// Extends `worker`'s lease on `fence`'s item by `lease_ms` from now; `false` when the item
    /// is no longer its own (another worker claimed it after the lease ran out, or it ended).
    pub fn renew_queue_lease(
        &mut self,
        fence: Fence,
        worker: &str,
        lease_ms: u64,
    ) -> Result<bool, Error> {
        let conn = self.conn();
        let now = queue::lease_now(conn, &self.path, self.clock.as_ref(), self.clock.now_ms())?;
        queue::renew(conn, &self.path, fence, worker, now, lease_ms)
    }

    /// Run `f` over one consistent snapshot (a read transaction): every query in it sees the
    /// database as of the same instant, whatever other processes commit meanwhile. Use it when
    /// several reads must agree (a goal with its gates for `goal status --json`).
    pub fn read<T, E>(&mut self, f: impl FnOnce(&Snapshot<'_>) -> Result<T, E>) -> Result<T, E>
    where
        E: From<Error>,
    {
        let path = &self.path;
        match &mut self.handle {
            Handle::Sqlite(conn) => {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Deferred)
                    .map_err(|e| Error::sql(path, e))?;
                let value = f(&Snapshot {
                    conn: Conn::Sqlite(&tx),
                    path,
                })?;
                // Nothing was written; ending the read transaction releases the snapshot.
                tx.rollback().map_err(|e| Error::sql(path, e))?;
                Ok(value)
            }
            Handle::Postgres(pooled) => {
                let conn = Conn::Postgres(pooled.client());
                if let Err(e) = conn.batch("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") {
                    pooled.discard();
                    return Err(Error::sql(path, e).into());
                }
                let outcome = f(&Snapshot { conn, path });
                if let Err(e) = conn.batch("ROLLBACK") {
                    pooled.discard();
                    return Err(Error::sql(path, e).into());
                }
                outcome
            }
        }
    }
}

/// A read-only view of one instant of the database, from [`Store::read`].
pub struct Snapshot<'a> {
    conn: Conn<'a>,
    path: &'a Path,
}

impl read::sealed::Access for Snapshot<'_> {
    fn conn(&self) -> Conn<'_> {
        self.conn
    }
    fn db_path(&self) -> &Path {
        self.path
    }
}

impl Reads for Snapshot<'_> {}

impl read::sealed::Access for Store {
    fn conn(&self) -> Conn<'_> {
        Store::conn(self)
    }
    fn db_path(&self) -> &Path {
        &self.path
    }
}

impl Reads for Store {}
