//! The cache's files: one authenticated entry per key under `<dir>/entries/`, written
//! atomically, read back only when its MAC checks out, evicted least recently used.
//!
//! An entry is `greenlight-cache 1\n<mac>\n<json>`; the MAC is BLAKE3 keyed with the user's
//! cache key (32 random bytes, mode 0600, in the state directory) over the cache key and the
//! JSON. A truncated, corrupt or foreign entry (another key wrote it) fails the check and is a
//! miss. The clock of an entry is its file's mtime, refreshed on every hit: eviction removes the
//! oldest first until the whole is under 90 % of the bound.
//!
//! Every file here is opened through [`crate::file`] (`O_NONBLOCK`, then what was opened is
//! checked): anyone who can write the directory can put a FIFO, a socket, a device or a link to
//! one where an entry or the key belongs, and an ordinary `open` of a FIFO waits for a writer
//! forever, where no signal ends verify. Such an entry is a miss with a warning; such a key
//! turns the cache off for the run.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::file::{self, FileError};
use crate::report::{AttemptStatus, GateVerdict};

const MAGIC: &str = "greenlight-cache 1\n";
/// Largest entry read back; a larger file is not one of ours.
const MAX_ENTRY_BYTES: u64 = 64 << 20;
/// Default bound of the whole cache: 2 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;

/// What a cached gate result holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    /// The full key (hex).
    pub key: String,
    /// The gate id it was stored for.
    pub gate: String,
    /// The command that ran.
    pub command: String,
    /// PASS or FAIL.
    #[serde(with = "greenlight_types::gate_verdict_word")]
    pub verdict: GateVerdict,
    /// Every attempt as it ran.
    pub attempts: Vec<StoredAttempt>,
    /// When it was stored (ms since the epoch).
    pub created_ms: u64,
}

/// One attempt of a stored result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StoredAttempt {
    /// Pass or fail.
    pub status: AttemptStatus,
    /// The exit code.
    pub exit_code: Option<i32>,
    /// How long it ran, originally.
    pub duration_ms: u64,
    /// The output tail, as shown.
    pub tail: String,
    /// Bytes written in all.
    pub output_bytes: u64,
    /// Its digest.
    pub digest: Option<greenlight_digest::Digest>,
}

/// The entries directory and the key that authenticates them.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    mac_key: [u8; 32],
    max_bytes: u64,
}

/// Sizes as `greenlight cache stats` shows them.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Stats {
    /// The entries directory.
    pub dir: PathBuf,
    /// Entry files.
    pub entries: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The bound.
    pub max_bytes: u64,
    /// mtime of the oldest entry (ms since the epoch).
    pub oldest_ms: Option<u64>,
    /// mtime of the newest.
    pub newest_ms: Option<u64>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn mtime_ms(meta: &fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

impl Store {
    /// Opens (creating) the cache under `dir` with the MAC key in `key_file` (created with 32
    /// random bytes, mode 0600, when missing). A key file readable by others, or not owned by
    /// this user, is refused: anyone who can read it can forge entries.
    pub fn open(dir: &Path, key_file: &Path, max_bytes: u64) -> Result<Store, String> {
        let entries = dir.join("entries");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&entries)
            .map_err(|e| {
                format!(
                    "cannot create the cache directory {}: {e}",
                    entries.display()
                )
            })?;
        let mac_key = load_or_create_key(key_file)?;
        Ok(Store {
            dir: dir.to_path_buf(),
            mac_key,
            max_bytes,
        })
    }

    /// The directory holding everything.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, key: &str) -> PathBuf {
        let shard = key.get(..2).unwrap_or("00");
        self.dir.join("entries").join(shard).join(key)
    }

    fn mac(&self, key: &str, json: &[u8]) -> String {
        let mut hasher = blake3::Hasher::new_keyed(&self.mac_key);
        hasher.update(b"greenlight-cache-entry\0");
        hasher.update(key.as_bytes());
        hasher.update(b"\0");
        hasher.update(json);
        hasher.finalize().to_hex().to_string()
    }

    /// The entry stored under `key`, if there is one that checks out (`Ok(None)`: none, or a
    /// damaged or foreign one). A hit refreshes the entry's clock for eviction. `Err` says why
    /// something that is not a regular file sits where the entry belongs: a miss too, worth a
    /// warning.
    pub fn get(&self, key: &str) -> Result<Option<Entry>, String> {
        let path = self.path_of(key);
        let bytes = match read_cache_file(&path)? {
            Some(bytes) => bytes,
            None => return Ok(None),
        };
        let entry = self.check(key, &bytes);
        if entry.is_some() {
            // By path, opening nothing: the path may have become a FIFO since it was read.
            use rustix::fs::{AtFlags, CWD, Timespec, Timestamps, UTIME_NOW, UTIME_OMIT};
            let times = Timestamps {
                last_access: Timespec {
                    tv_sec: 0,
                    tv_nsec: UTIME_OMIT,
                },
                last_modification: Timespec {
                    tv_sec: 0,
                    tv_nsec: UTIME_NOW,
                },
            };
            let _ = rustix::fs::utimensat(CWD, &path, &times, AtFlags::SYMLINK_NOFOLLOW);
        }
        Ok(entry)
    }

    /// The entry in `bytes` when its MAC checks out under this key and it names `key`.
    fn check(&self, key: &str, bytes: &[u8]) -> Option<Entry> {
        let rest = bytes.strip_prefix(MAGIC.as_bytes())?;
        let newline = rest.iter().position(|&b| b == b'\n')?;
        let (mac, json) = (&rest[..newline], &rest[newline + 1..]);
        let expected = self.mac(key, json);
        // Both are hex of fixed length; a comparison that stops early leaks nothing useful to
        // someone who can already write here.
        if mac != expected.as_bytes() {
            return None;
        }
        let entry: Entry = serde_json::from_slice(json).ok()?;
        (entry.key == key).then_some(entry)
    }

    /// Stores `entry` under its key: written to a temporary file beside it and renamed into
    /// place, so a reader sees the old entry, the new one or none, never half of one. Then
    /// evicts past the bound.
    pub fn put(&self, entry: &Entry) -> Result<(), String> {
        let path = self.path_of(&entry.key);
        let Some(shard) = path.parent() else {
            return Err("cache entry has no directory".into());
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(shard)
            .map_err(|e| format!("cannot create {}: {e}", shard.display()))?;
        let json = serde_json::to_vec(entry).map_err(|e| format!("cannot encode an entry: {e}"))?;
        let mac = self.mac(&entry.key, &json);
        let mut temp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(shard)
            .map_err(|e| format!("cannot write in {}: {e}", shard.display()))?;
        let write = |f: &mut fs::File| -> std::io::Result<()> {
            f.write_all(MAGIC.as_bytes())?;
            f.write_all(mac.as_bytes())?;
            f.write_all(b"\n")?;
            f.write_all(&json)?;
            f.sync_data()
        };
        write(temp.as_file_mut()).map_err(|e| format!("cannot write a cache entry: {e}"))?;
        temp.persist(&path)
            .map_err(|e| format!("cannot move a cache entry into place: {}", e.error))?;
        self.evict(self.max_bytes)?;
        Ok(())
    }

    fn entry_files(&self) -> Vec<(PathBuf, u64, u64)> {
        let mut files = Vec::new();
        let Ok(shards) = fs::read_dir(self.dir.join("entries")) else {
            return files;
        };
        for shard in shards.flatten() {
            let Ok(entries) = fs::read_dir(shard.path()) else {
                continue;
            };
            for entry in entries.flatten() {
                if let Ok(meta) = entry.metadata()
                    && meta.is_file()
                {
                    files.push((entry.path(), meta.len(), mtime_ms(&meta)));
                }
            }
        }
        files
    }

    /// Removes the least recently used entries until the cache is under 90 % of `max_bytes`
    /// (nothing when it is under `max_bytes`). Returns how many were removed.
    pub fn evict(&self, max_bytes: u64) -> Result<usize, String> {
        let mut files = self.entry_files();
        let total: u64 = files.iter().map(|f| f.1).sum();
        if total <= max_bytes {
            return Ok(0);
        }
        files.sort_by_key(|f| f.2);
        let target = max_bytes / 10 * 9;
        let mut left = total;
        let mut removed = 0;
        for (path, len, _) in files {
            if left <= target {
                break;
            }
            // Gone already (another run evicted it) is as good as removed.
            if fs::remove_file(&path).is_ok() {
                removed += 1;
            }
            left = left.saturating_sub(len);
        }
        Ok(removed)
    }

    /// Counts and sizes.
    pub fn stats(&self) -> Stats {
        let files = self.entry_files();
        Stats {
            dir: self.dir.clone(),
            entries: files.len() as u64,
            bytes: files.iter().map(|f| f.1).sum(),
            max_bytes: self.max_bytes,
            oldest_ms: files.iter().map(|f| f.2).min(),
            newest_ms: files.iter().map(|f| f.2).max(),
        }
    }

    /// Removes every entry (and the explain records). Returns how many entries went.
    pub fn clear(&self) -> Result<usize, String> {
        let count = self.entry_files().len();
        for sub in ["entries", "last"] {
            let path = self.dir.join(sub);
            match fs::remove_dir_all(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("cannot remove {}: {e}", path.display())),
            }
        }
        Ok(count)
    }

    /// Writes a small JSON record beside the entries (the explain records), atomically.
    pub fn put_record(&self, name: &str, json: &[u8]) -> Result<(), String> {
        let dir = self.dir.join("last");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let mut temp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&dir)
            .map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
        temp.as_file_mut()
            .write_all(json)
            .map_err(|e| format!("cannot write a cache record: {e}"))?;
        temp.persist(dir.join(name))
            .map_err(|e| format!("cannot move a cache record into place: {}", e.error))?;
        Ok(())
    }

    /// A record written by [`Store::put_record`] (`Ok(None)` when there is none); `Err` as for
    /// [`Store::get`].
    pub fn record(&self, name: &str) -> Result<Option<Vec<u8>>, String> {
        read_cache_file(&self.dir.join("last").join(name))
    }
}

/// The bytes of the cache file at `path`, without blocking: `None` when it is missing, too
/// large to be one of ours or unreadable (a miss, as a damaged entry is); `Err` naming the path
/// when it is not a regular file.
fn read_cache_file(path: &Path) -> Result<Option<Vec<u8>>, String> {
    match file::read_bounded(path, MAX_ENTRY_BYTES) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(FileError::NotRegular { kind, .. }) => Err(format!(
            "{} is {kind}, not a regular file: treated as a miss (remove it; the next stored \
             result replaces it)",
            path.display()
        )),
        Err(_) => Ok(None),
    }
}

/// Now, for entries' `created_ms`.
pub fn created_now() -> u64 {
    now_ms()
}

fn load_or_create_key(path: &Path) -> Result<[u8; 32], String> {
    if let Some(parent) = path.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    match read_key(path) {
        Ok(Some(key)) => return Ok(key),
        Ok(None) => {}
        Err(e) => return Err(e),
    }
    let mut key = [0u8; 32];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .map_err(|e| format!("cannot read random bytes for the cache key: {e}"))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::Builder::new()
        .prefix(".cache-key-")
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(|e| format!("cannot write the cache key in {}: {e}", dir.display()))?;
    temp.as_file_mut()
        .write_all(blake3::Hash::from_bytes(key).to_hex().as_bytes())
        .and_then(|()| temp.as_file_mut().sync_data())
        .map_err(|e| format!("cannot write the cache key: {e}"))?;
    // The first of two racing runs wins; the other reads what it wrote.
    match temp.persist_noclobber(path) {
        Ok(_) => Ok(key),
        Err(_) => {
            read_key(path)?.ok_or_else(|| format!("cannot read the cache key {}", path.display()))
        }
    }
}

fn read_key(path: &Path) -> Result<Option<[u8; 32]>, String> {
    let not_hex = || {
        format!(
            "the cache key {} is not 64 hex digits; remove it (a new one is made) and run again",
            path.display()
        )
    };
    let (file, meta) = match file::open_regular(path) {
        Ok(opened) => opened,
        Err(FileError::NotFound { .. }) => return Ok(None),
        Err(FileError::NotRegular { kind, .. }) => {
            return Err(format!(
                "the cache key {} is {kind}, not a regular file; remove it (a new one is made) \
                 and run again",
                path.display()
            ));
        }
        Err(e) => {
            return Err(format!(
                "cannot read the cache key {}: {}",
                path.display(),
                e.reason()
            ));
        }
    };
    let uid = rustix::process::getuid().as_raw();
    if meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(format!(
            "the cache key {} is not private to this user (owner {}, mode {:o}); remove it or \
             `chmod 600` it, then run again",
            path.display(),
            meta.uid(),
            meta.mode() & 0o777
        ));
    }
    let bytes = match file::read_opened(path, file, &meta, 128) {
        Ok(bytes) => bytes,
        Err(FileError::TooLarge { .. }) => return Err(not_hex()),
        Err(e) => {
            return Err(format!(
                "cannot read the cache key {}: {}",
                path.display(),
                e.reason()
            ));
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    match blake3::Hash::from_hex(text.trim()) {
        Ok(hash) => Ok(Some(*hash.as_bytes())),
        Err(_) => Err(not_hex()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn entry(key: &str) -> Entry {
        Entry {
            key: key.to_owned(),
            gate: "g".into(),
            command: "true".into(),
            verdict: GateVerdict::Pass,
            attempts: Vec::new(),
            created_ms: 0,
        }
    }

    /// A hit moves the entry's clock to now (eviction is least recently used), by path, without
    /// opening the file; a FIFO in its place is a miss that names it, at once.
    #[test]
    fn a_hit_refreshes_the_clock_and_a_fifo_in_its_place_is_a_named_miss() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &dir.path().join("cache.key"), 1 << 20).unwrap();
        let key = "ab".repeat(32);
        store.put(&entry(&key)).unwrap();
        let path = store.path_of(&key);
        let long_ago = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        assert_eq!(store.get(&key).unwrap(), Some(entry(&key)));
        let refreshed = fs::metadata(&path).unwrap().modified().unwrap();
        assert!(
            refreshed > long_ago,
            "the hit left the clock at {refreshed:?}"
        );

        fs::remove_file(&path).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        let why = store.get(&key).unwrap_err();
        assert!(
            why.contains(&path.display().to_string()) && why.contains("a FIFO"),
            "{why}"
        );
        assert_eq!(
            store.get(&"cd".repeat(32)),
            Ok(None),
            "no entry is no warning"
        );
    }
}
