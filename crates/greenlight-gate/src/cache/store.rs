//! The cache's files: one authenticated entry per key under `<dir>/entries/`, written
//! atomically, read back only when its MAC checks out, evicted least recently used.
//!
//! An entry is `greenlight-cache 1\n<mac>\n<json>`; the MAC is BLAKE3 keyed with the user's
//! cache key (32 random bytes, mode 0600, in the state directory) over the cache key and the
//! JSON. A truncated, corrupt or foreign entry (another key wrote it) fails the check and is a
//! miss. The clock of an entry is its file's mtime, refreshed on every hit: eviction removes the
//! oldest first until the whole is under 90 % of the bound.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

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

    /// The entry stored under `key`, if there is one that checks out. A hit refreshes the
    /// entry's clock for eviction.
    pub fn get(&self, key: &str) -> Option<Entry> {
        let path = self.path_of(key);
        let file = fs::File::open(&path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > MAX_ENTRY_BYTES {
            return None;
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(MAX_ENTRY_BYTES).read_to_end(&mut bytes).ok()?;
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
        if entry.key != key {
            return None;
        }
        if let Ok(f) = fs::File::options().write(true).open(&path) {
            let _ = f.set_modified(SystemTime::now());
        }
        Some(entry)
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

    /// A record written by [`Store::put_record`].
    pub fn record(&self, name: &str) -> Option<Vec<u8>> {
        let path = self.dir.join("last").join(name);
        let file = fs::File::open(path).ok()?;
        let mut bytes = Vec::new();
        file.take(MAX_ENTRY_BYTES).read_to_end(&mut bytes).ok()?;
        Some(bytes)
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
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read the cache key {}: {e}", path.display())),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read the cache key {}: {e}", path.display()))?;
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
    let mut text = String::new();
    file.take(128)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read the cache key {}: {e}", path.display()))?;
    match blake3::Hash::from_hex(text.trim()) {
        Ok(hash) => Ok(Some(*hash.as_bytes())),
        Err(_) => Err(format!(
            "the cache key {} is not 64 hex digits; remove it (a new one is made) and run again",
            path.display()
        )),
    }
}
