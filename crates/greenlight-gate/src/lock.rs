//! The machine-wide gate mutex, in CommandMate's lock protocol so that either runner blocks the
//! other: a directory `<root>/<name>.lock` made atomically, with an `owner` JSON record.
//!
//! A lock is only ever removed by the holder whose token is in the record, or by a waiter on
//! the same host and in the same pid namespace that has seen the recorded pid dead, and then
//! only once nothing the holder started still runs: a lock is free when what ran under it is
//! gone, not when its holder is. The waiter ends the dead holder's processes (found by the run
//! token they carry, which names the holder) and takes the lock once two looks find none. A
//! holder on another host or in another pid namespace is never judged: its pid means nothing
//! here, so it counts as alive.
//! A lock directory without a readable record (a holder killed between making the directory
//! and writing its record, or a file someone else wrote) names nobody to wait for: a waiter
//! reclaims it once the directory is older than the waiter's whole budget (the gate's
//! timeout, and at least [`OWNERLESS_MIN_AGE`]), which no live holder writing a record takes.
//!
//! Removing someone else's lock is a look then a remove, and two waiters that both looked could
//! otherwise both remove: the second would remove the lock the first had just taken, and two
//! gates would run under one mutex. So a waiter removes only while it holds an `flock` on the
//! lock root, and looks again under it; the kernel drops that lock when its holder dies, so it
//! cannot go stale the way a directory can.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::exec::{Interrupt, InterruptWatch, LeftoverProcess};

/// How often a waiter retries; CommandMate polls every 250 ms, and matching it keeps the two
/// runners fair to each other.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// The least age at which a lock directory without a readable record is reclaimed, whatever
/// the budget: a holder writes its record right after making the directory, so ten seconds is
/// far more than any live holder takes, and a zero budget (a one-look try) never steals a lock
/// whose record is being written.
pub const OWNERLESS_MIN_AGE: Duration = Duration::from_secs(10);

/// Where locks live: `CM_VERIFY_LOCK_ROOT`, else `$HOME/.commandmate/locks` (as CommandMate),
/// in the environment `env` looks variables up in (the one the front end read).
pub fn lock_root_from(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    match env("CM_VERIFY_LOCK_ROOT").filter(|v| !v.is_empty()) {
        Some(root) => PathBuf::from(root),
        None => {
            let home = env("HOME")
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "/tmp".into());
            Path::new(&home).join(".commandmate").join("locks")
        }
    }
}

/// This machine's name, as recorded in `owner.host` (what `hostname` prints).
pub fn host_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// The record inside a lock directory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    /// The holder's pid.
    pub pid: i64,
    /// The holder's host name.
    pub host: String,
    /// A value unique to one acquisition.
    pub token: String,
    /// Milliseconds since the Unix epoch.
    pub acquired_at: i64,
    /// The holder's pid namespace (the inode of its `/proc/self/ns/pid`), in which `pid` means
    /// something. Written after CommandMate's four fields, which stay as they are.
    ///
    /// A record without it (CommandMate's, or an older greenlight's) is judged as before: on
    /// this host its pid is read in our namespace. Those runners record no namespace, and
    /// treating every such record as foreign would leave a killed CommandMate holder's lock to
    /// block every waiter for good; the cost is that a legacy holder in another pid namespace
    /// can still be misjudged, as it always could.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_ns: Option<u64>,
}

impl Owner {
    /// Whether this holder's pid can be judged here: the same host, and the same pid namespace
    /// (or a record that names none, see [`Owner::pid_ns`]). We cannot know our own namespace
    /// when `/proc` is unreadable, and then a recorded one is foreign.
    pub fn judged_here(&self, host: &str) -> bool {
        self.host == host
            && self
                .pid_ns
                .is_none_or(|theirs| greenlight_proc::procs::pid_namespace() == Some(theirs))
    }
}

/// A dead holder whose lock a waiter broke, and what of its run the waiter ended first.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StaleHolder {
    /// The record that was broken (its fields, as before this struct, then `ended`).
    #[serde(flatten)]
    pub owner: Owner,
    /// The holder's processes (its gate, and whatever else it started) that were still
    /// running and were ended before the lock was taken.
    pub ended: Vec<LeftoverProcess>,
}

/// A held lock; released on drop if still ours.
#[derive(Debug)]
pub struct LockGuard {
    path: PathBuf,
    token: String,
    released: bool,
}

impl LockGuard {
    /// The lock directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the lock if the record still carries our token.
    pub fn release(mut self) {
        self.release_now();
    }

    fn release_now(&mut self) {
        if self.released {
            return;
        }
        self.released = true;
        match read_owner(&self.path) {
            Some(owner) if owner.token != self.token => {} // broken as stale and taken by another
            _ => {
                let _ = fs::remove_dir_all(&self.path);
            }
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        self.release_now();
    }
}

/// What a wait for the lock came to.
#[derive(Debug)]
pub enum Acquired {
    /// We hold it, after waiting this long.
    Held {
        /// Releases the lock when dropped.
        guard: LockGuard,
        /// How long the wait took.
        waited: Duration,
        /// The dead same-host holder whose lock was broken on the way.
        broke_stale: Option<StaleHolder>,
        /// Why a lock directory without a readable record was reclaimed on the way.
        reclaimed_ownerless: Option<String>,
    },
    /// The budget ran out; `holder` is the last record seen.
    GaveUp {
        /// The lock directory.
        path: PathBuf,
        /// How long the wait took.
        waited: Duration,
        /// The last record seen.
        holder: Option<Owner>,
        /// Why the lock names no holder, when its record was missing or unreadable.
        ownerless: Option<String>,
        /// The holder is dead, but these processes it started would not end (a process stuck
        /// in the kernel ignores even SIGKILL), so its lock was not taken.
        survivors: Vec<LeftoverProcess>,
    },
    /// greenlight was interrupted while waiting.
    Interrupted(Interrupt),
}

fn read_owner(path: &Path) -> Option<Owner> {
    let text = fs::read_to_string(path.join("owner")).ok()?;
    serde_json::from_str(text.trim()).ok()
}

/// Why the lock directory at `path` names no holder, when it exists without a readable record.
fn ownerless_reason(path: &Path) -> Option<String> {
    match fs::read(path.join("owner")) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            match serde_json::from_str::<Owner>(text.trim()) {
                Ok(_) => None,
                Err(_) => {
                    let shown: String = text.trim().chars().take(60).collect();
                    Some(format!(
                        "its owner file is not a lock record (`{}`)",
                        shown.escape_debug()
                    ))
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            path.is_dir().then(|| "it has no owner file".to_owned())
        }
        Err(e) => Some(format!("its owner file cannot be read ({e})")),
    }
}

/// How long ago the lock directory was last changed (made, or its record written).
fn dir_age(path: &Path) -> Option<Duration> {
    let modified = fs::metadata(path).ok()?.modified().ok()?;
    SystemTime::now().duration_since(modified).ok()
}

/// The lock root, open and held with an exclusive `flock`, for a waiter to remove a lock that
/// is not its own while it holds it (dropping it unlocks); `None` while another waiter holds it
/// (try again after a pause).
fn break_turn(root: &Path) -> io::Result<Option<fs::File>> {
    let dir = fs::File::open(root)?;
    match rustix::fs::flock(&dir, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(dir)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(e) => Err(io::Error::from(e)),
    }
}

fn pid_is_dead(pid: i64) -> bool {
    i32::try_from(pid).is_ok_and(crate::procs::is_dead)
}

fn new_token() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut bytes = [0u8; 8];
    let random = fs::File::open("/dev/urandom")
        .and_then(|mut f| io::Read::read_exact(&mut f, &mut bytes))
        .map(|()| u64::from_le_bytes(bytes))
        .unwrap_or(0);
    format!("{}-{nanos}-{random:016x}", std::process::id())
}

/// How soon a waiter looks again while a dead holder's processes are being ended, and how long
/// a look that found none is confirmed after: a holder killed while it was starting a gate
/// leaves a child that carries no token until its `exec`, which takes well under a millisecond.
const ENDING_RECHECK: Duration = Duration::from_millis(20);

/// How long a waiter keeps ending a dead holder's processes before it gives up, whatever its
/// budget; the same two seconds a goal runner gives an earlier runner's marked processes.
pub const ENDING_LIMIT: Duration = Duration::from_secs(2);

/// Waits up to `budget` for the lock `name`, polling every [`POLL_INTERVAL`].
pub async fn acquire(
    root: &Path,
    name: &str,
    budget: Duration,
    interrupt: &mut InterruptWatch,
) -> io::Result<Acquired> {
    fs::create_dir_all(root)?;
    let path = root.join(format!("{name}.lock"));
    let host = host_name();
    let started = Instant::now();
    let mut broken_token: Option<String> = None;
    let mut broke_stale = None;
    let mut reclaimed_ownerless = None;
    // The dead holder whose processes are being ended, and how many looks in a row found none.
    let mut ending: Option<StaleHolder> = None;
    let mut quiet_looks = 0;
    loop {
        if let Some(signal) = *interrupt.borrow() {
            return Ok(Acquired::Interrupted(signal));
        }
        match fs::create_dir(&path) {
            Ok(()) => {
                let token = new_token();
                let acquired_at = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or(0);
                let owner = Owner {
                    pid: i64::from(std::process::id()),
                    host,
                    token: token.clone(),
                    acquired_at,
                    pid_ns: greenlight_proc::procs::pid_namespace(),
                };
                let guard = LockGuard {
                    path: path.clone(),
                    token,
                    released: false,
                };
                let mut record = serde_json::to_string(&owner).map_err(io::Error::other)?;
                record.push('\n');
                fs::write(path.join("owner"), record)?;
                return Ok(Acquired::Held {
                    guard,
                    waited: started.elapsed(),
                    broke_stale,
                    reclaimed_ownerless,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let holder = read_owner(&path);
        let mut pause = POLL_INTERVAL;
        if let Some(owner) = &holder {
            let already_tried = broken_token.as_deref() == Some(owner.token.as_str());
            if !already_tried && owner.judged_here(&host) && pid_is_dead(owner.pid) {
                // What ran under the lock may outlive its holder (SIGKILL ends only the
                // holder): end it, and take the lock only once two looks a moment apart find
                // nothing left.
                let round = i32::try_from(owner.pid)
                    .map(greenlight_proc::end_processes_of)
                    .unwrap_or_default();
                let stale = ending.get_or_insert_with(|| StaleHolder {
                    owner: owner.clone(),
                    ended: Vec::new(),
                });
                if stale.owner != *owner {
                    *stale = StaleHolder {
                        owner: owner.clone(),
                        ended: Vec::new(),
                    };
                    quiet_looks = 0;
                }
                if round.is_empty() {
                    quiet_looks += 1;
                } else {
                    quiet_looks = 0;
                    for p in round {
                        if !stale.ended.iter().any(|e| e.pid == p.pid) {
                            stale.ended.push(p);
                        }
                    }
                }
                if quiet_looks >= 2
                    && let Some(_turn) = break_turn(root)?
                {
                    // Break at most once per token, and only the record read under the turn:
                    // another waiter may have broken it and taken the lock since we looked.
                    broken_token = Some(owner.token.clone());
                    if read_owner(&path).as_ref() == Some(owner) {
                        let _ = fs::remove_dir_all(&path);
                        broke_stale = ending.take();
                    }
                    continue;
                }
                pause = ENDING_RECHECK;
            }
        }
        let ownerless = if holder.is_none() {
            ownerless_reason(&path)
        } else {
            None
        };
        let old_enough =
            |path: &Path| dir_age(path).is_some_and(|age| age >= budget.max(OWNERLESS_MIN_AGE));
        if let Some(why) = &ownerless
            && old_enough(&path)
            && reclaimed_ownerless.is_none()
            && let Some(_turn) = break_turn(root)?
        {
            // Nobody can be waited for, and it has been so for longer than we may wait. Look
            // again under the turn: a holder that wrote its record meanwhile keeps its lock,
            // and a directory another waiter reclaimed and made anew is young.
            if ownerless_reason(&path).is_some() && old_enough(&path) {
                let _ = fs::remove_dir_all(&path);
                reclaimed_ownerless = Some(why.clone());
            }
            continue;
        }
        // Ending a dead holder's processes may take longer than a short budget (a runner lock
        // is tried once): it gets [`ENDING_LIMIT`] however short the budget.
        let limit = if ending.is_some() {
            budget.max(ENDING_LIMIT)
        } else {
            budget
        };
        if started.elapsed() >= limit {
            let survivors = ending
                .filter(|stale| holder.as_ref() == Some(&stale.owner))
                .map(|stale| {
                    let mut left = stale.ended;
                    left.retain(|p| !crate::procs::is_dead(p.pid));
                    left
                })
                .unwrap_or_default();
            return Ok(Acquired::GaveUp {
                path,
                waited: started.elapsed(),
                holder,
                ownerless,
                survivors,
            });
        }
        let pause = pause.min(limit.saturating_sub(started.elapsed()));
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            changed = interrupt.changed() => {
                if changed.is_err() {
                    tokio::time::sleep(pause).await; // nobody can interrupt any more
                }
            }
        }
    }
}
