//! The SHA-256 of each input file, remembered by (size, mtime in ns, inode, mode) and kept in
//! a file between runs, so keying an unchanged tree again stats every file and reads none.
//!
//! The file is a cache, never a source of truth: a missing, truncated or foreign file starts
//! an empty cache, and it is replaced atomically (a temporary file renamed over it), so a crash
//! mid-write leaves the old one.

use std::collections::HashMap;
use std::fs::Metadata;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::digest::{Digest, digest_file, hex};
use crate::error::RemoteError;

/// What identifies a file's content without reading it. A rewrite that keeps all four (same
/// size, same mtime to the nanosecond, same inode, same mode) goes unnoticed, as it does for
/// git's index; `RACY_WINDOW` keeps the one common way to get there (two writes within one
/// timestamp tick) out of the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime_ns: i64,
    inode: u64,
    mode: u32,
}

impl Stamp {
    fn of(meta: &Metadata) -> Stamp {
        Stamp {
            size: meta.size(),
            mtime_ns: meta.mtime().saturating_mul(1_000_000_000) + meta.mtime_nsec(),
            inode: meta.ino(),
            mode: meta.mode(),
        }
    }
}

/// A file modified this recently may be modified again within the same timestamp tick
/// without its stamp changing, so its digest is not remembered. Two seconds covers the
/// coarsest common clock (FAT's); everything else ticks in milliseconds or less.
const RACY_WINDOW_NS: i64 = 2_000_000_000;

struct Entry {
    stamp: Stamp,
    hash: [u8; 32],
    used: bool,
}

/// Per-file SHA-256 digests cached by stamp, optionally backed by a file.
#[derive(Default)]
pub struct FileDigests {
    file: Option<PathBuf>,
    /// Keyed by the path's bytes: hashing a `Path` walks its components, which costs more
    /// than the rest of a warm lookup.
    entries: HashMap<Vec<u8>, Entry>,
    changed: bool,
    hits: usize,
    reads: usize,
}

impl std::fmt::Debug for FileDigests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileDigests")
            .field("file", &self.file)
            .field("entries", &self.entries.len())
            .field("hits", &self.hits)
            .field("reads", &self.reads)
            .finish()
    }
}

const MAGIC: &[u8] = b"greenlight file digests v1\n";

impl FileDigests {
    /// A cache that lives in memory only.
    pub fn new() -> FileDigests {
        FileDigests::default()
    }

    /// The cache saved in `file`, or an empty one (to be saved there) when the file is missing
    /// or cannot be parsed. An ordinary read: a caller whose directory others can write reads
    /// the bytes without blocking itself and hands them to [`FileDigests::from_saved`].
    pub fn load(file: &Path) -> FileDigests {
        FileDigests::from_saved(file, std::fs::read(file).ok().as_deref())
    }

    /// The cache whose saved bytes (`None`: nothing could be read) came from `file`, where it
    /// is saved again.
    pub fn from_saved(file: &Path, saved: Option<&[u8]>) -> FileDigests {
        let (entries, changed) = match saved {
            None => (HashMap::new(), false),
            // A file that is not a cache is overwritten at the next save.
            Some(bytes) => match parse(bytes) {
                Some(entries) => (entries, false),
                None => (HashMap::new(), true),
            },
        };
        FileDigests {
            file: Some(file.to_path_buf()),
            entries,
            changed,
            ..FileDigests::default()
        }
    }

    /// The digest of the regular file at `path`, whose metadata (`symlink_metadata`) the
    /// caller already has. Read only when its stamp is not in the cache.
    pub fn digest(&mut self, path: &Path, meta: &Metadata) -> std::io::Result<Digest> {
        let stamp = Stamp::of(meta);
        if let Some(entry) = self.entries.get_mut(path.as_os_str().as_bytes())
            && entry.stamp == stamp
        {
            entry.used = true;
            self.hits += 1;
            return Ok(Digest {
                hash: hex(&entry.hash),
                size: i64::try_from(stamp.size).unwrap_or(i64::MAX),
            });
        }
        self.reads += 1;
        let digest = digest_file(path)?;
        if stamp.mtime_ns <= now_ns() - RACY_WINDOW_NS
            && let Some(hash) = unhex(&digest.hash)
            && digest.len() == stamp.size
        {
            self.entries.insert(
                path.as_os_str().as_bytes().to_vec(),
                Entry {
                    stamp,
                    hash,
                    used: true,
                },
            );
            self.changed = true;
        } else if self.entries.remove(path.as_os_str().as_bytes()).is_some() {
            self.changed = true;
        }
        Ok(digest)
    }

    /// Files whose digest came from the cache since it was loaded.
    pub fn hits(&self) -> usize {
        self.hits
    }

    /// Files that had to be read since it was loaded.
    pub fn reads(&self) -> usize {
        self.reads
    }

    /// How many digests are remembered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes the cache to its file, keeping only the files asked about since it was loaded
    /// (so files deleted from the tree fall out). Atomic: a temporary file in the same
    /// directory, renamed over the old one. Does nothing for an in-memory cache or when
    /// nothing changed.
    pub fn save(&mut self) -> Result<(), RemoteError> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let before = self.entries.len();
        self.entries.retain(|_, e| e.used);
        if !self.changed && self.entries.len() == before {
            return Ok(());
        }
        let io_err = |source| RemoteError::Io {
            path: file.clone(),
            source,
        };
        let dir = match file.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        std::fs::create_dir_all(dir).map_err(io_err)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io_err)?;
        let mut out = std::io::BufWriter::new(tmp.as_file_mut());
        out.write_all(MAGIC).map_err(io_err)?;
        out.write_all(&(self.entries.len() as u64).to_le_bytes())
            .map_err(io_err)?;
        for (name, entry) in &self.entries {
            out.write_all(&(name.len() as u32).to_le_bytes())
                .map_err(io_err)?;
            out.write_all(name).map_err(io_err)?;
            out.write_all(&entry.stamp.size.to_le_bytes())
                .map_err(io_err)?;
            out.write_all(&entry.stamp.mtime_ns.to_le_bytes())
                .map_err(io_err)?;
            out.write_all(&entry.stamp.inode.to_le_bytes())
                .map_err(io_err)?;
            out.write_all(&entry.stamp.mode.to_le_bytes())
                .map_err(io_err)?;
            out.write_all(&entry.hash).map_err(io_err)?;
        }
        out.flush().map_err(io_err)?;
        drop(out);
        tmp.persist(file).map_err(|e| io_err(e.error))?;
        self.changed = false;
        Ok(())
    }
}

/// The entries of a saved cache, or `None` if the bytes are not one.
fn parse(bytes: &[u8]) -> Option<HashMap<Vec<u8>, Entry>> {
    let mut r = Reader(bytes.strip_prefix(MAGIC)?);
    let count = r.u64()?;
    // Each entry is at least 60 bytes: a count larger than the file allows is corruption.
    if count > (bytes.len() / 60) as u64 {
        return None;
    }
    let mut entries = HashMap::with_capacity(count as usize);
    for _ in 0..count {
        let len = r.u32()? as usize;
        let name = r.take(len)?;
        let stamp = Stamp {
            size: r.u64()?,
            mtime_ns: i64::from_le_bytes(r.array()?),
            inode: r.u64()?,
            mode: r.u32()?,
        };
        let hash = r.array::<32>()?;
        entries.insert(
            name.to_vec(),
            Entry {
                stamp,
                hash,
                used: false,
            },
        );
    }
    r.0.is_empty().then_some(entries)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.array()?))
    }
}

fn unhex(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        out[i] = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()?;
    }
    Some(out)
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{File, FileTimes};
    use std::time::Duration;

    fn set_mtime(path: &Path, t: SystemTime) {
        let file = File::options().write(true).open(path).expect("open");
        file.set_times(FileTimes::new().set_modified(t))
            .expect("set mtime");
    }

    fn digest(cache: &mut FileDigests, path: &Path) -> Digest {
        let meta = std::fs::symlink_metadata(path).expect("stat");
        cache.digest(path, &meta).expect("digest")
    }

    /// A moment well outside the racy window.
    fn an_hour_ago() -> SystemTime {
        SystemTime::now() - Duration::from_secs(3600)
    }

    #[test]
    fn an_unchanged_stamp_is_not_read_again_and_a_touched_one_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let then = an_hour_ago();
        std::fs::write(&path, "aaaa").expect("write");
        set_mtime(&path, then);
        let mut cache = FileDigests::new();
        let first = digest(&mut cache, &path);
        assert_eq!(first, crate::digest_of(b"aaaa"));
        assert_eq!((cache.reads(), cache.hits()), (1, 0));

        // Same size, same mtime, same inode: the cache answers without reading, so it still
        // says "aaaa". That stale answer is the proof that no read happened.
        std::fs::write(&path, "bbbb").expect("rewrite");
        set_mtime(&path, then);
        assert_eq!(digest(&mut cache, &path), first);
        assert_eq!((cache.reads(), cache.hits()), (1, 1));

        set_mtime(&path, then + Duration::from_secs(1));
        assert_eq!(digest(&mut cache, &path), crate::digest_of(b"bbbb"));
        assert_eq!((cache.reads(), cache.hits()), (2, 1));
    }

    #[test]
    fn a_recently_modified_file_is_not_remembered() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("fresh");
        std::fs::write(&path, "new").expect("write");
        let mut cache = FileDigests::new();
        digest(&mut cache, &path);
        digest(&mut cache, &path);
        assert_eq!((cache.reads(), cache.hits(), cache.len()), (2, 0, 0));
    }

    #[test]
    fn a_saved_cache_is_loaded_again_and_keeps_only_files_asked_about() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = dir.path().join("state/file-digests");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for p in [&a, &b] {
            std::fs::write(p, p.display().to_string()).expect("write");
            set_mtime(p, an_hour_ago());
        }
        let mut cache = FileDigests::load(&store);
        assert!(cache.is_empty());
        let da = digest(&mut cache, &a);
        digest(&mut cache, &b);
        cache.save().expect("save");

        let mut again = FileDigests::load(&store);
        assert_eq!(again.len(), 2);
        assert_eq!(digest(&mut again, &a), da);
        assert_eq!((again.reads(), again.hits()), (0, 1));
        again.save().expect("save");
        assert_eq!(FileDigests::load(&store).len(), 1, "b was not asked about");
        // No temporary file is left beside it.
        let left: Vec<_> = std::fs::read_dir(store.parent().expect("parent"))
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("file-digests")]);
    }

    #[test]
    fn a_corrupt_cache_file_starts_empty_and_is_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = dir.path().join("file-digests");
        let file = dir.path().join("f");
        std::fs::write(&file, "content").expect("write");
        set_mtime(&file, an_hour_ago());
        let mut good = FileDigests::load(&store);
        digest(&mut good, &file);
        good.save().expect("save");
        let saved = std::fs::read(&store).expect("read");

        let corruptions: Vec<Vec<u8>> = vec![
            b"not a cache at all".to_vec(),
            saved[..saved.len() - 7].to_vec(),
            [saved.as_slice(), b"trailing"].concat(),
            {
                let mut huge = saved.clone();
                huge[MAGIC.len()..MAGIC.len() + 8].copy_from_slice(&u64::MAX.to_le_bytes());
                huge
            },
            Vec::new(),
        ];
        for bytes in corruptions {
            std::fs::write(&store, &bytes).expect("corrupt");
            let mut cache = FileDigests::load(&store);
            assert!(cache.is_empty());
            assert_eq!(digest(&mut cache, &file), crate::digest_of(b"content"));
            cache.save().expect("save over the corrupt file");
            assert_eq!(FileDigests::load(&store).len(), 1);
        }
    }
}
