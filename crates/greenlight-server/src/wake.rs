//! The listening end of the store's wake-ups: for a SQLite file, a unix datagram socket of
//! this server's own in the wake directory beside it, which every committing writer pokes
//! ([`greenlight_store::wake`]); for a PostgreSQL store, a connection that `LISTEN`s on the
//! channel every committing writer notifies ([`greenlight_store::CHANGES_CHANNEL`]), wherever
//! that writer runs.
//!
//! The socket is this process's alone while it lives, and gone when it ends: removed (with the
//! directory, when no other server still listens there) on drop, and a socket left by a
//! killed server refuses a connection, so the next server to start removes it. A poke only
//! says "look now", so the poller that waits here keeps a slow poll ([`SAFETY_POLL`]) as
//! the backstop that makes a lost poke a delay, never a lost frame.

use std::io::ErrorKind;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use greenlight_store::wake;

/// How long the poller waits for a poke before it looks at the file anyway: the most a frame
/// whose poke was lost (a writer that does not poke, a socket removed under the server) waits.
pub const SAFETY_POLL: Duration = Duration::from_millis(250);

/// Listeners this process bound so far: two servers of one process on the same file (tests
/// start several) never pick the same name.
static SERVERS: AtomicU32 = AtomicU32::new(0);

/// How often a bind is retried when another server removed the directory between our making it
/// and binding in it (it removes the directory when its own socket was the last one there).
const BIND_ATTEMPTS: usize = 5;

/// What a server waits on between looks at the store.
pub enum Listener {
    /// A SQLite file's wake-up socket.
    Socket(SocketListener),
    /// A PostgreSQL store's `LISTEN`ing connection.
    Postgres(greenlight_store::pg::Listener),
}

impl Listener {
    /// The listener for the store at `db` (a file, or a `postgres://` URL).
    pub fn bind(db: &Path) -> std::io::Result<Listener> {
        match db.to_str().filter(|d| greenlight_store::pg::is_url(d)) {
            Some(url) => greenlight_store::pg::PgTarget::parse(url)
                .and_then(|target| {
                    greenlight_store::pg::Listener::listen(
                        &target,
                        &[greenlight_store::CHANGES_CHANNEL],
                    )
                })
                .map(Listener::Postgres)
                .map_err(std::io::Error::other),
            None => SocketListener::bind(db).map(Listener::Socket),
        }
    }

    /// The socket's path, which a stop pokes (a PostgreSQL listener has none: it wakes at
    /// least every wait's timeout).
    pub fn path(&self) -> Option<&Path> {
        match self {
            Listener::Socket(s) => Some(s.path()),
            Listener::Postgres(_) => None,
        }
    }

    /// Waits until woken or `timeout` passed. A PostgreSQL connection that broke makes this
    /// wait the whole timeout, so the caller's poll goes on.
    pub fn wait(&self, timeout: Duration) {
        match self {
            Listener::Socket(s) => s.wait(timeout),
            Listener::Postgres(l) => {
                if l.wait(timeout).is_err() {
                    std::thread::sleep(timeout);
                }
            }
        }
    }
}

/// This server's socket in the wake directory; removed on drop.
#[derive(Debug)]
pub struct SocketListener {
    socket: UnixDatagram,
    path: PathBuf,
    dir: PathBuf,
}

impl SocketListener {
    /// Binds a socket of this process's own in the wake directory of the state file at `db`
    /// (making the directory, and removing sockets there whose server is gone).
    pub fn bind(db: &Path) -> std::io::Result<SocketListener> {
        let dir = wake::dir_for(db);
        let name = format!(
            "{}.{:x}.{}",
            std::process::id(),
            nonce(),
            SERVERS.fetch_add(1, Ordering::Relaxed)
        );
        let path = dir.join(name);
        let mut attempt = 0;
        let socket = loop {
            attempt += 1;
            std::fs::create_dir_all(&dir)?;
            remove_stale(&dir);
            match UnixDatagram::bind(&path) {
                Ok(socket) => break socket,
                Err(e) if e.kind() == ErrorKind::NotFound && attempt < BIND_ATTEMPTS => {}
                Err(e) => return Err(e),
            }
        };
        Ok(SocketListener { socket, path, dir })
    }

    /// The socket's path (what writers send to).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits until poked or `timeout` passed; every poke already queued is taken with the first,
    /// so one look at the file answers them all.
    pub fn wait(&self, timeout: Duration) {
        let mut byte = [0u8; 16];
        if self.socket.set_read_timeout(Some(timeout)).is_err()
            || self.socket.recv(&mut byte).is_err()
        {
            return;
        }
        if self.socket.set_nonblocking(true).is_ok() {
            while self.socket.recv(&mut byte).is_ok() {}
            let _ = self.socket.set_nonblocking(false);
        }
    }
}

/// Pokes the listener at `path` (what a stop does, so the poller sees it at once).
pub fn interrupt(path: &Path) {
    if let Ok(socket) = UnixDatagram::unbound() {
        let _ = socket.set_nonblocking(true);
        let _ = socket.send_to(wake::POKE, path);
    }
}

impl Drop for SocketListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        // Fails, as it should, while another server's socket is still there.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Removes the sockets in `dir` nobody listens on: a socket whose process is gone refuses a
/// connection (`ECONNREFUSED`); a live one, another server's, is left alone.
fn remove_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_socket()) {
            continue;
        }
        let path = entry.path();
        let refused = UnixDatagram::unbound()
            .and_then(|probe| probe.connect(&path))
            .is_err_and(|e| e.kind() == ErrorKind::ConnectionRefused);
        if refused {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// A few bits that differ between two servers started with the same pid (one killed, its pid
/// reused; or two pid namespaces sharing the state directory).
fn nonce() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
}
