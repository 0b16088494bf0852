//! Wake-ups beside the database: after every commit, a writer pokes whoever listens in the wake
//! directory next to the file (`state.db-wake/`), so a reader that follows the file (a server
//! tailing frames) reads the new rows at once instead of on its next poll.
//!
//! A poke says only "look now"; the rows say what changed. So pokes are best-effort and never
//! block: one non-blocking datagram to each socket in the directory, and a missing directory, a
//! dead listener's socket or a full queue costs the writer a failed system call and nothing
//! else. A listener must keep a slow poll of its own, so a lost poke only delays. This module
//! knows nothing about who listens; it sends to every socket it finds there.

use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

/// The directory beside the database at `db` where listeners bind their sockets:
/// `<db>-wake`, named like SQLite's `-wal` and `-shm` beside it.
pub fn dir_for(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wake");
    PathBuf::from(name)
}

/// What a poke sends: one byte (the datagram itself is the message).
pub const POKE: &[u8] = b"w";

/// A writer's side: pokes every socket in one wake directory. The sending socket is made on
/// the first poke that finds a directory, so a writer nobody listens to holds no descriptor.
#[derive(Debug)]
pub struct Waker {
    dir: PathBuf,
    socket: Option<UnixDatagram>,
}

impl Waker {
    /// A waker for the listeners in `dir` (see [`dir_for`]).
    pub fn new(dir: PathBuf) -> Waker {
        Waker { dir, socket: None }
    }

    /// Pokes every listener in the directory; never waits, never fails (see the module doc).
    pub fn poke(&mut self) {
        // No directory: nobody listens, and this was the one system call it cost.
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        if self.socket.is_none() {
            self.socket = UnixDatagram::unbound()
                .and_then(|s| s.set_nonblocking(true).map(|()| s))
                .ok();
        }
        let Some(socket) = &self.socket else {
            return;
        };
        for entry in entries.flatten() {
            // Sockets only (the directory entry says so without another system call): a
            // symlink placed there is not followed to whatever socket it names.
            if !entry.file_type().is_ok_and(|t| t.is_socket()) {
                continue;
            }
            // A stale socket (its listener was killed) refuses; a full queue would block and
            // is skipped: that listener has a poke waiting already.
            let _ = socket.send_to(POKE, entry.path());
        }
    }
}
