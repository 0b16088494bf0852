//! What a file's bytes hashed to, remembered by its change-sensitive metadata, so a warm listing
//! stats every file and reads only those that changed.
//!
//! The one rule: **an entry is trusted only when any later write must change its metadata.**
//! The metadata is size, mtime and ctime in nanoseconds, inode, device and mode. A write always
//! sets ctime (which no user can set back), but to the file system's clock tick: a second write
//! in the same tick keeps the stamp. So a file whose ctime is within [`Stat::settled`]'s margin
//! of the moment it was read is never remembered (git's "racy" rule, in our own words).
//!
//! The file is written whole to a temporary file and renamed into place, and carries a BLAKE3
//! checksum of its body: a truncated or damaged file, or one in an older format, is ignored
//! (every file is read again), never believed. It is as trustworthy as the user account that
//! writes the result cache beside it.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The change-sensitive metadata of a file: what the cache and the during-run check compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stat {
    /// Bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Status change time, nanoseconds since the epoch.
    pub ctime_ns: i128,
    /// Inode number.
    pub ino: u64,
    /// Device number.
    pub dev: u64,
    /// File type and permission bits.
    pub mode: u32,
}

/// How close to a read a ctime may be before the file counts as still settling, on a file system
/// with sub-second stamps. Linux stamps files from its coarse clock, which advances once a tick
/// (1/HZ: 1 to 10 ms); 20 ms is two of the slowest ticks.
pub const FINE_MARGIN: Duration = Duration::from_millis(20);

/// The same margin where stamps are whole seconds (both nanosecond fields 0): FAT keeps 2 s.
pub const COARSE_MARGIN: Duration = Duration::from_secs(2);

impl Stat {
    /// The metadata of `meta`.
    pub fn of(meta: &std::fs::Metadata) -> Stat {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Stat {
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
            mode: meta.mode(),
        }
    }

    /// The metadata of a raw `stat` record, the same fields [`Stat::of`] takes.
    pub fn of_raw(raw: &rustix::fs::Stat) -> Stat {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Stat {
            size: raw.st_size as u64,
            mtime_ns: ns(raw.st_mtime, raw.st_mtime_nsec as i64),
            ctime_ns: ns(raw.st_ctime, raw.st_ctime_nsec as i64),
            ino: raw.st_ino,
            dev: raw.st_dev,
            mode: raw.st_mode,
        }
    }

    /// How close to a read this file's last change must not be.
    pub fn margin(&self) -> Duration {
        let whole = |ns: i128| ns % 1_000_000_000 == 0;
        if whole(self.ctime_ns) && whole(self.mtime_ns) {
            COARSE_MARGIN
        } else {
            FINE_MARGIN
        }
    }

    /// Whether a write after `read_at` must change this metadata: the file's last change is
    /// more than [`Stat::margin`] before it (ctime, and mtime, which may be in the future).
    pub fn settled(&self, read_at: SystemTime) -> bool {
        let at = read_at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        let margin = self.margin().as_nanos() as i128;
        self.ctime_ns.max(self.mtime_ns) + margin < at
    }
}

/// Path → (metadata, id) of files whose id is known for that metadata: one buffer holding
/// every path and id back to back, and the entries sorted by path. A warm run loads, looks up
/// and compares tens of thousands of these; a map of two owned vectors per path cost more than
/// the `lstat` calls they save.
#[derive(Debug, Default, Clone)]
pub struct StatCache {
    bytes: Vec<u8>,
    /// Sorted by path, one per path.
    entries: Vec<Slot>,
}

/// One entry: where its path and id lie in [`StatCache::bytes`], and its metadata.
#[derive(Debug, Clone, Copy)]
struct Slot {
    path: (usize, usize),
    id: (usize, usize),
    stat: Stat,
}

const MAGIC: &[u8] = b"greenlight-stat-cache 1\n";

/// The largest cache file read: 64 MiB is about a million paths.
const MAX_BYTES: u64 = 64 << 20;

impl StatCache {
    fn path_of(&self, slot: &Slot) -> &[u8] {
        &self.bytes[slot.path.0..slot.path.1]
    }

    fn id_of(&self, slot: &Slot) -> &[u8] {
        &self.bytes[slot.id.0..slot.id.1]
    }

    fn find(&self, path: &[u8]) -> Result<usize, usize> {
        self.entries
            .binary_search_by(|slot| self.path_of(slot).cmp(path))
    }

    /// The remembered id of `path`, when its metadata is still `stat`.
    pub fn get(&self, path: &[u8], stat: &Stat) -> Option<&[u8]> {
        let slot = &self.entries[self.find(path).ok()?];
        (slot.stat == *stat).then(|| self.id_of(slot))
    }

    /// Remembers `id` for `path` at `stat`. Cheapest in path order, as a listing inserts.
    pub fn insert(&mut self, path: Vec<u8>, stat: Stat, id: Vec<u8>) {
        let slot = self.append(&path, stat, &id);
        let in_order = self
            .entries
            .last()
            .is_none_or(|last| self.path_of(last) < path.as_slice());
        if in_order {
            self.entries.push(slot);
            return;
        }
        match self.find(&path) {
            Ok(i) => self.entries[i] = slot,
            Err(i) => self.entries.insert(i, slot),
        }
    }

    /// A cache of `entries` (a later entry for the same path wins), sorted once.
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = (&'a [u8], Stat, &'a [u8])>,
    ) -> StatCache {
        let mut cache = StatCache::default();
        for (path, stat, id) in entries {
            let slot = cache.append(path, stat, id);
            cache.entries.push(slot);
        }
        cache.normalise();
        cache
    }

    /// Appends `path` and `id` to the byte buffer and returns the slot naming them; the caller
    /// puts the slot in its place among the entries.
    fn append(&mut self, path: &[u8], stat: Stat, id: &[u8]) -> Slot {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(path);
        self.bytes.extend_from_slice(id);
        Slot {
            path: (at, at + path.len()),
            id: (at + path.len(), self.bytes.len()),
            stat,
        }
    }

    /// Sorts the entries by path and keeps the last one of each path.
    fn normalise(&mut self) {
        let bytes = &self.bytes;
        let path = |slot: &Slot| &bytes[slot.path.0..slot.path.1];
        if self.entries.is_sorted_by(|a, b| path(a) < path(b)) {
            return;
        }
        // Stable, so entries of one path stay in insertion order and the last one is kept.
        self.entries.sort_by(|a, b| path(a).cmp(path(b)));
        let mut kept: Vec<Slot> = Vec::with_capacity(self.entries.len());
        for slot in self.entries.drain(..) {
            match kept.last_mut() {
                Some(last) if path(last) == path(&slot) => *last = slot,
                _ => kept.push(slot),
            }
        }
        self.entries = kept;
    }

    /// The number of remembered files.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether `self` and `other` remember the same things.
    pub fn same_as(&self, other: &StatCache) -> bool {
        self.entries.len() == other.entries.len()
            && self.entries.iter().zip(&other.entries).all(|(a, b)| {
                a.stat == b.stat
                    && self.path_of(a) == other.path_of(b)
                    && self.id_of(a) == other.id_of(b)
            })
    }

    /// Where the cache of the worktree at `top` lives in `dir`.
    pub fn path_in(dir: &Path, top: &Path) -> PathBuf {
        use std::os::unix::ffi::OsStrExt as _;
        let id = blake3::hash(top.as_os_str().as_bytes()).to_hex();
        dir.join(format!("stat-{}", &id[..16]))
    }

    /// Reads the cache at `path`; anything missing, damaged or not a regular file is an empty
    /// cache. Opened without blocking, so a FIFO put in its place cannot stop a run.
    pub fn load(path: &Path) -> StatCache {
        Self::read(path).unwrap_or_default()
    }

    fn read(path: &Path) -> Option<StatCache> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(path)
            .ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > MAX_BYTES {
            return None;
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(MAX_BYTES).read_to_end(&mut bytes).ok()?;
        let body = bytes.strip_prefix(MAGIC)?;
        let (body, sum) = body.split_at_checked(body.len().checked_sub(32)?)?;
        if blake3::hash(body).as_bytes() != sum {
            return None;
        }
        let mut cache = StatCache {
            bytes: Vec::with_capacity(body.len()),
            entries: Vec::new(),
        };
        let mut rest = body;
        while !rest.is_empty() {
            let len = u32::from_le_bytes(take(&mut rest, 4)?.try_into().ok()?) as usize;
            let path = take(&mut rest, len)?;
            let mut n = |size: usize| take(&mut rest, size);
            let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
            let i128_of = |b: &[u8]| i128::from_le_bytes(b.try_into().unwrap_or([0; 16]));
            let stat = Stat {
                size: u64_of(n(8)?),
                mtime_ns: i128_of(n(16)?),
                ctime_ns: i128_of(n(16)?),
                ino: u64_of(n(8)?),
                dev: u64_of(n(8)?),
                mode: u32::from_le_bytes(n(4)?.try_into().ok()?),
            };
            let id_len = u32::from_le_bytes(n(4)?.try_into().ok()?) as usize;
            let id = n(id_len)?;
            let slot = cache.append(path, stat, id);
            cache.entries.push(slot);
        }
        // Written in path order; a file from an older writer is sorted here.
        cache.normalise();
        Some(cache)
    }

    /// Writes the cache to `path`: a temporary file beside it, then a rename, so a reader sees
    /// the old file or the new one, whole.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let mut body = Vec::with_capacity(self.bytes.len() + self.entries.len() * 72);
        for slot in &self.entries {
            let (path, stat, id) = (self.path_of(slot), slot.stat, self.id_of(slot));
            body.extend_from_slice(&(path.len() as u32).to_le_bytes());
            body.extend_from_slice(path);
            body.extend_from_slice(&stat.size.to_le_bytes());
            body.extend_from_slice(&stat.mtime_ns.to_le_bytes());
            body.extend_from_slice(&stat.ctime_ns.to_le_bytes());
            body.extend_from_slice(&stat.ino.to_le_bytes());
            body.extend_from_slice(&stat.dev.to_le_bytes());
            body.extend_from_slice(&stat.mode.to_le_bytes());
            body.extend_from_slice(&(id.len() as u32).to_le_bytes());
            body.extend_from_slice(id);
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut temp = tempfile::Builder::new().prefix(".stat-").tempfile_in(dir)?;
        temp.write_all(MAGIC)?;
        temp.write_all(&body)?;
        temp.write_all(blake3::hash(&body).as_bytes())?;
        temp.as_file().sync_data()?;
        temp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }
}

fn take<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (head, tail) = rest.split_at_checked(n)?;
    *rest = tail;
    Some(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(n: u64) -> Stat {
        Stat {
            size: n,
            mtime_ns: 1_700_000_000_123_456_789,
            ctime_ns: 1_700_000_000_123_456_790,
            ino: n * 7,
            dev: 3,
            mode: 0o100644,
        }
    }

    #[test]
    fn a_saved_cache_loads_as_it_was_and_a_damaged_one_loads_empty() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("stat-x");
        let mut cache = StatCache::default();
        cache.insert(b"a/\xffb".to_vec(), stat(1), b"id-one".to_vec());
        cache.insert(b"c".to_vec(), stat(2), b"id-two".to_vec());
        cache.save(&path).expect("saved");
        let loaded = StatCache::load(&path);
        assert!(loaded.same_as(&cache));
        assert_eq!(loaded.get(b"c", &stat(2)), Some(&b"id-two"[..]));
        assert_eq!(loaded.get(b"c", &stat(3)), None, "other metadata, no id");

        // Any flipped byte, a truncation, or a FIFO in its place: empty, never believed.
        let bytes = std::fs::read(&path).expect("read");
        for at in [0, MAGIC.len() + 3, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            std::fs::write(&path, &bad).expect("write");
            assert_eq!(StatCache::load(&path).len(), 0, "flipped byte {at}");
        }
        std::fs::write(&path, &bytes[..bytes.len() - 5]).expect("write");
        assert_eq!(StatCache::load(&path).len(), 0);
        std::fs::remove_file(&path).expect("rm");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        assert_eq!(StatCache::load(&path).len(), 0);
    }

    /// Entries inserted out of path order, or twice, or loaded from a file written in any
    /// order, are found, and the last insert of a path wins.
    #[test]
    fn entries_in_any_order_are_found_and_the_last_insert_wins() {
        let mut cache = StatCache::default();
        for (path, n) in [("m/b", 1), ("m/a", 2), ("z", 3), ("a", 4), ("m/a", 5)] {
            cache.insert(path.into(), stat(n), format!("id-{n}").into_bytes());
        }
        assert_eq!(cache.len(), 4);
        assert_eq!(cache.get(b"m/a", &stat(5)), Some(&b"id-5"[..]));
        assert_eq!(cache.get(b"m/a", &stat(2)), None, "replaced");
        for (path, n) in [("m/b", 1), ("z", 3), ("a", 4)] {
            let id = format!("id-{n}");
            assert_eq!(cache.get(path.as_bytes(), &stat(n)), Some(id.as_bytes()));
        }
        let built = StatCache::from_entries([
            (&b"z"[..], stat(3), &b"id-3"[..]),
            (b"m/b", stat(1), b"id-1"),
            (b"a", stat(9), b"old"),
            (b"m/a", stat(5), b"id-5"),
            (b"a", stat(4), b"id-4"),
        ]);
        assert!(built.same_as(&cache));

        // A file whose entries are not in path order (an older writer) loads sorted.
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("stat-x");
        let mut body = Vec::new();
        for (p, n) in [("z", 3u64), ("m/b", 1), ("a", 4), ("m/a", 5)] {
            let s = stat(n);
            let id = format!("id-{n}");
            body.extend_from_slice(&(p.len() as u32).to_le_bytes());
            body.extend_from_slice(p.as_bytes());
            body.extend_from_slice(&s.size.to_le_bytes());
            body.extend_from_slice(&s.mtime_ns.to_le_bytes());
            body.extend_from_slice(&s.ctime_ns.to_le_bytes());
            body.extend_from_slice(&s.ino.to_le_bytes());
            body.extend_from_slice(&s.dev.to_le_bytes());
            body.extend_from_slice(&s.mode.to_le_bytes());
            body.extend_from_slice(&(id.len() as u32).to_le_bytes());
            body.extend_from_slice(id.as_bytes());
        }
        let file = [MAGIC, &body, blake3::hash(&body).as_bytes()].concat();
        std::fs::write(&path, file).expect("write");
        assert!(StatCache::load(&path).same_as(&cache));
    }

    #[test]
    fn a_file_changed_within_the_margin_of_its_read_is_not_settled() {
        let changed = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_790);
        let s = stat(1);
        assert!(!s.settled(changed + Duration::from_millis(5)));
        assert!(s.settled(changed + Duration::from_millis(25)));
        let whole = Stat {
            mtime_ns: 1_700_000_000_000_000_000,
            ctime_ns: 1_700_000_000_000_000_000,
            ..s
        };
        let at = UNIX_EPOCH + Duration::from_secs(1_700_000_001);
        assert!(!whole.settled(at), "whole-second stamps need 2 s");
        assert!(whole.settled(at + Duration::from_secs(2)));
    }
}
