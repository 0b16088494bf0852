//! The workspace key: an exact content key of a worktree, so a gate result recorded against one
//! state of the files is reused only when every tracked and untracked-but-not-ignored file still
//! has the same bytes on disk.
//!
//! The one rule: **the key is the bytes on disk, never git's view of them.** A status line says
//! *that* a file differs from HEAD, not *how*; an index blob id is the file after git's filters
//! (a CRLF file under `text=auto` has its LF version's id), and git trusts the index's
//! `assume-unchanged` and `skip-worktree` bits and its own stat data. None of those is read:
//! 1. one `git ls-files --stage -o --exclude-standard` names the files (the index's paths, and
//!    untracked files that are not ignored); its ids and flags are not used, only the paths and
//!    which entries are submodules;
//! 2. every path is `lstat`ed, and every regular file's bytes are hashed with BLAKE3, unless
//!    the [`StatCache`] knows the id for exactly that metadata; a symlink is keyed by its target;
//! 3. a submodule with a `.git` is listed the same way and its files join the listing under its
//!    path; a submodule path without one (contents copied in) is read file by file, everything
//!    in it.
//!
//! It writes nothing into the repository: not the index, not an object, not a temporary file.
//!
//! Decisions:
//! - **What cannot be keyed exactly is named, not guessed** ([`Listing::unkeyable`]): a FIFO,
//!   socket or device, a file that cannot be read, a file that kept changing while it was read,
//!   a submodule git cannot list. The result cache then does not cache the gates that read it,
//!   and [`workspace_key`] is `Unknown`.
//! - **A file that changed within a clock tick of the listing is read again** once the tick has
//!   passed (see [`stat_cache`]): until then a second write could keep its stamps, and the
//!   metadata recorded here would not show it. So every later write changes what
//!   [`Listing::entries`] holds for it, which the result cache compares after a gate.
//! - **HEAD is part of the key** ([`workspace_key`]; the result cache leaves it out): after the
//!   agent commits without changing a byte, a gate that reads history must run again.
//! - **A file that vanishes while the listing is made counts as deleted** (an editor's swap
//!   file, a database journal).
//! - **Any git failure is an error** (`Unknown` for [`workspace_key`]): the caller then simply
//!   runs the gate.
//! - Paths are bytes end to end (`-z` output, `OsStr`), so non-UTF-8 and non-ASCII names key
//!   exactly.

pub mod stat_cache;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::Read as _;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::SystemTime;

pub use stat_cache::{Stat, StatCache};

use crate::status::SharedStatus;

/// The key of a worktree's content, or why it could not be computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkspaceKey {
    /// Lowercase hex; equal keys mean identical bytes (and HEAD).
    Known(String),
    /// No exact key (not a repository, git missing, a git error, a file that cannot be keyed
    /// exactly); run the gate.
    Unknown {
        /// What went wrong, for logs.
        reason: String,
    },
}

impl WorkspaceKey {
    /// The hex key, if known.
    pub fn known(&self) -> Option<&str> {
        match self {
            WorkspaceKey::Known(k) => Some(k),
            WorkspaceKey::Unknown { .. } => None,
        }
    }
}

/// How deep submodules inside submodules are followed before giving up.
const MAX_SUBMODULE_DEPTH: usize = 8;

/// Bumped whenever the listing format changes, so keys from an older greenlight never match.
const FORMAT: &str = "greenlight-workspace-key 2";

const GITLINK: &[u8] = b"160000";
const SYMLINK: &[u8] = b"120000";
const EXECUTABLE: &[u8] = b"100755";
const REGULAR: &[u8] = b"100644";

/// One file of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedFile {
    /// Path bytes, relative to the worktree's top (a submodule's files under its path).
    pub path: Vec<u8>,
    /// `100644`, `100755`, `120000` (a symlink) or `160000` (a submodule's own entry).
    pub mode: &'static [u8],
    /// BLAKE3 hex of the bytes; `l<hex>` a link's target; `s<head>` a submodule's HEAD,
    /// `g<commit>` the commit recorded for a submodule path that is not checked out.
    pub id: Vec<u8>,
    /// The metadata the id was read at (`None` for a submodule's own entry).
    pub stat: Option<Stat>,
}

/// Every file of a worktree as the key sees it, sorted by path, with the worktree's top
/// directory and HEAD. What the result cache narrows to a gate's inputs.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// The worktree's top directory.
    pub top: PathBuf,
    /// HEAD's commit, if there is one.
    pub head: Option<String>,
    /// The files, sorted by path.
    pub entries: Vec<ListedFile>,
    /// Paths that cannot be keyed exactly, and why.
    pub unkeyable: BTreeMap<Vec<u8>, String>,
    /// What this listing learnt, for [`Listing::save_stat_cache`].
    learnt: StatCache,
    /// Whether that differs from the cache it was listed with.
    learnt_anything: bool,
}

impl Listing {
    /// The first unkeyable path `keep` selects, with why.
    pub fn first_unkeyable(&self, keep: impl Fn(&[u8]) -> bool) -> Option<(&[u8], &str)> {
        self.unkeyable
            .iter()
            .find(|(path, _)| keep(path))
            .map(|(path, why)| (path.as_slice(), why.as_str()))
    }

    /// What this listing knows as a stat cache: the settled files' ids.
    pub fn stat_cache(&self) -> &StatCache {
        &self.learnt
    }

    /// Writes what this listing learnt to the stat cache file of its worktree in `dir`, when it
    /// differs from the cache it was listed with.
    pub fn save_stat_cache(&self, dir: &Path) -> std::io::Result<()> {
        if !self.learnt_anything {
            return Ok(());
        }
        self.learnt.save(&StatCache::path_in(dir, &self.top))
    }
}

/// The content key of the worktree containing `worktree` (a subdirectory keys its whole
/// worktree). Blocking: it runs two short git processes, reads every file, writes nothing.
pub fn workspace_key(worktree: &Path) -> WorkspaceKey {
    let listing = match listing(worktree) {
        Ok(listing) => listing,
        Err(reason) => return WorkspaceKey::Unknown { reason },
    };
    if let Some((path, why)) = listing.first_unkeyable(|_| true) {
        return WorkspaceKey::Unknown {
            reason: format!(
                "{} cannot be keyed exactly: {why}",
                String::from_utf8_lossy(path)
            ),
        };
    }
    let mut hasher = blake3::Hasher::new();
    hasher.update(FORMAT.as_bytes());
    hasher.update(b"\nhead ");
    hasher.update(listing.head.as_deref().unwrap_or("none").as_bytes());
    hasher.update(b"\n");
    for file in &listing.entries {
        for part in [file.mode, b" ", &file.id, b"\t", &file.path, b"\0"] {
            hasher.update(part);
        }
    }
    WorkspaceKey::Known(hasher.finalize().to_hex().to_string())
}

/// The listing of the worktree containing `worktree`, every file read. Blocking; writes
/// nothing.
pub fn listing(worktree: &Path) -> Result<Listing, String> {
    listing_with(worktree, |_| StatCache::default(), None, None)
}

/// The listing of the worktree containing `worktree`, taking ids from `known(top)` where a
/// file's metadata is unchanged. `under`: only paths under these (worktree-relative, no glob),
/// for a second look at what some gates depend on; `None` lists everything. `status`: the
/// run's git reads of this worktree, whose index listing names the tracked files and whose
/// `git status` the untracked ones, so nothing is listed again (the tracked files are read
/// while status runs).
pub fn listing_with(
    worktree: &Path,
    known: impl FnOnce(&Path) -> StatCache + Send,
    under: Option<&[Vec<u8>]>,
    status: Option<&SharedStatus>,
) -> Result<Listing, String> {
    let repo = Repo::locate(worktree)?;
    let mut found = Found::default();
    // Status lists the whole worktree: a listing of some paths lists its untracked ones itself.
    let status = status.filter(|_| under.is_none());
    // The stat cache is read and parsed while git lists the paths: both take tens of
    // milliseconds on a large worktree, and neither needs the other.
    let known = std::thread::scope(|s| {
        let known = s.spawn(|| known(&repo.top));
        let listed = match status {
            // The run has read the index already.
            Some(status) => status
                .index()
                .map_err(|failure| {
                    format!("`git ls-files` in {} failed: {failure}", worktree.display())
                })
                .and_then(|index| take_records(&repo.top, b"", index, 0, &mut found)),
            None => collect(&repo.top, b"", under, 0, &mut found),
        };
        let known = known.join().unwrap_or_default();
        listed.map(|()| known)
    })?;
    let started = SystemTime::now();
    let mut read = read_all(&repo.top, &found.files, &known);
    if let Some(status) = status {
        let status = status.wait().map_err(|failure| {
            format!("`git status` in {} failed: {failure}", worktree.display())
        })?;
        found.files.clear();
        for path in crate::status::untracked(status) {
            take_untracked(&repo.top, b"", path, 0, &mut found);
        }
        read.extend(read_all(&repo.top, &found.files, &known));
    }
    let Found {
        mut files,
        mut unkeyable,
        mut entries,
    } = found;
    files.clear();
    let mut unsettled = Vec::new();
    for (path, result) in read {
        match result {
            Read::Gone => {}
            Read::Unkeyable(why) => {
                unkeyable.insert(path, why);
            }
            Read::File { mode, id, stat } => {
                if stat.settled(started) {
                    entries.push(ListedFile {
                        path,
                        mode,
                        id,
                        stat: Some(stat),
                    });
                } else {
                    unsettled.push((path, stat));
                }
            }
        }
    }
    settle(&repo.top, unsettled, &mut entries, &mut unkeyable);
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    entries.dedup_by(|a, b| a.path == b.path);
    // Every settled file read is remembered; a submodule's own entry has no metadata.
    let learnt = StatCache::from_entries(
        entries
            .iter()
            .filter_map(|e| Some((e.path.as_slice(), e.stat?, e.id.as_slice()))),
    );
    let learnt_anything = !learnt.same_as(&known);
    Ok(Listing {
        top: repo.top,
        head: repo.head,
        entries,
        unkeyable,
        learnt,
        learnt_anything,
    })
}

/// How many times a file still changing is read again before it counts as unkeyable.
const SETTLE_ROUNDS: usize = 3;

/// Reads again, once their clock tick has passed, the files that changed too close to being
/// read; those still changing after [`SETTLE_ROUNDS`] are unkeyable.
fn settle(
    top: &Path,
    mut unsettled: Vec<(Vec<u8>, Stat)>,
    entries: &mut Vec<ListedFile>,
    unkeyable: &mut BTreeMap<Vec<u8>, String>,
) {
    for _ in 0..SETTLE_ROUNDS {
        if unsettled.is_empty() {
            return;
        }
        let margin = unsettled
            .iter()
            .map(|(_, stat)| stat.margin())
            .max()
            .unwrap_or_default();
        std::thread::sleep(margin);
        let at = SystemTime::now();
        let paths: Vec<Vec<u8>> = unsettled.drain(..).map(|(path, _)| path).collect();
        for (path, result) in read_all(top, &paths, &StatCache::default()) {
            match result {
                Read::Gone => {}
                Read::Unkeyable(why) => {
                    unkeyable.insert(path, why);
                }
                Read::File { mode, id, stat } if stat.settled(at) => {
                    entries.push(ListedFile {
                        path,
                        mode,
                        id,
                        stat: Some(stat),
                    });
                }
                Read::File { stat, .. } => unsettled.push((path, stat)),
            }
        }
    }
    for (path, _) in unsettled {
        unkeyable.insert(
            path,
            "it kept changing while the workspace was listed (or its change time is in the future)"
                .to_owned(),
        );
    }
}

/// What the git pass found: files still to read, entries already known, unkeyable paths.
#[derive(Default)]
struct Found {
    files: Vec<Vec<u8>>,
    entries: Vec<ListedFile>,
    unkeyable: BTreeMap<Vec<u8>, String>,
}

/// Lists the repository at `top` (its paths prefixed with `prefix` in the result), recursing
/// into submodules and copied-in submodule directories.
fn collect(
    top: &Path,
    prefix: &[u8],
    under: Option<&[Vec<u8>]>,
    depth: usize,
    found: &mut Found,
) -> Result<(), String> {
    let mut args: Vec<OsString> = [
        "-c",
        "core.fsmonitor=false",
        "-c",
        "core.untrackedCache=false",
        "ls-files",
        "-z",
        "-t",
        "--stage",
        "-o",
        "--exclude-standard",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    if let Some(under) = under {
        args.push("--".into());
        for path in under {
            let mut spec = OsString::from(":(literal)");
            spec.push(OsStr::from_bytes(path));
            args.push(spec);
        }
    }
    let out = git_os(top, &args, None)?;
    take_records(top, prefix, &out, depth, found)
}

/// The files of `ls-files -z --stage` records (`-t` or `-v` tags; with `-o`, untracked ones
/// too) of the repository at `top`, listed under `prefix`.
fn take_records(
    top: &Path,
    prefix: &[u8],
    out: &[u8],
    depth: usize,
    found: &mut Found,
) -> Result<(), String> {
    let joined = |path: &[u8]| [prefix, path].concat();
    let mut last: Option<&[u8]> = None;
    for record in out.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let (tag, rest) = match record {
            [tag, b' ', rest @ ..] => (*tag, rest),
            _ => return Err(odd_record(top, record)),
        };
        if tag == b'?' {
            take_untracked(top, prefix, rest, depth, found);
            continue;
        }
        let record = parse_stage(rest).ok_or_else(|| odd_record(top, record))?;
        if last == Some(record.path) {
            continue; // an unmerged path, once per stage
        }
        last = Some(record.path);
        if record.mode == GITLINK {
            let dir = top.join(OsStr::from_bytes(record.path));
            submodule(&dir, &joined(record.path), Some(record.oid), depth, found);
        } else {
            found.files.push(joined(record.path));
        }
    }
    Ok(())
}

/// An untracked path of the repository at `top`: a file to read, or (ending with `/`) an
/// embedded repository, listed as a submodule.
fn take_untracked(top: &Path, prefix: &[u8], path: &[u8], depth: usize, found: &mut Found) {
    let joined = |path: &[u8]| [prefix, path].concat();
    match path.strip_suffix(b"/") {
        Some(dir) => submodule(
            &top.join(OsStr::from_bytes(dir)),
            &joined(dir),
            None,
            depth,
            found,
        ),
        None => found.files.push(joined(path)),
    }
}

/// A submodule at `dir` (listed as `path`): a checked-out one is listed as a repository of its
/// own, a directory without `.git` is read whole, anything git cannot list is unkeyable.
fn submodule(dir: &Path, path: &[u8], recorded: Option<&[u8]>, depth: usize, found: &mut Found) {
    let mut prefix = path.to_vec();
    prefix.push(b'/');
    if std::fs::symlink_metadata(dir.join(".git")).is_ok() {
        if depth >= MAX_SUBMODULE_DEPTH {
            found.unkeyable.insert(
                path.to_vec(),
                format!("submodules nested deeper than {MAX_SUBMODULE_DEPTH} levels"),
            );
            return;
        }
        let head = match Repo::locate(dir) {
            Ok(repo) if repo.top == dir || dir.canonicalize().is_ok_and(|d| d == repo.top) => {
                repo.head
            }
            Ok(_) | Err(_) => {
                found.unkeyable.insert(
                    path.to_vec(),
                    "it holds a `.git` that git cannot open as a repository".to_owned(),
                );
                return;
            }
        };
        if let Err(why) = collect(dir, &prefix, None, depth + 1, found) {
            found.unkeyable.insert(path.to_vec(), why);
            return;
        }
        let id = format!("s{}", head.as_deref().unwrap_or("none"));
        found.entries.push(ListedFile {
            path: path.to_vec(),
            mode: GITLINK,
            id: id.into_bytes(),
            stat: None,
        });
        return;
    }
    if std::fs::symlink_metadata(dir).is_ok_and(|meta| !meta.is_dir()) {
        // A file or a link where the submodule should be: keyed as what it is (a link is never
        // followed into another directory).
        found.files.push(path.to_vec());
        return;
    }
    if let Some(recorded) = recorded {
        let mut id = b"g".to_vec();
        id.extend_from_slice(recorded);
        found.entries.push(ListedFile {
            path: path.to_vec(),
            mode: GITLINK,
            id,
            stat: None,
        });
    }
    walk(dir, &prefix, found);
}

/// Every file under `dir` (listed under `prefix`), for a submodule path whose contents were
/// copied in: git lists none of them, and no ignore rule applies.
fn walk(dir: &Path, prefix: &[u8], found: &mut Found) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return; // not there: an uninitialised submodule, nothing on disk to read
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(why) => {
                found.unkeyable.insert(
                    prefix.to_vec(),
                    format!("its directory cannot be read ({why})"),
                );
                continue;
            }
        };
        let name = entry.file_name();
        let path = [prefix, name.as_bytes()].concat();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => {
                let mut sub = path;
                sub.push(b'/');
                walk(&entry.path(), &sub, found);
            }
            _ => found.files.push(path),
        }
    }
}

/// What reading one path found.
enum Read {
    /// Nothing there (deleted, or a directory: its files are listed on their own).
    Gone,
    /// Cannot be keyed exactly, and why.
    Unkeyable(String),
    /// A file or link: its mode, id and the metadata the id was read at.
    File {
        mode: &'static [u8],
        id: Vec<u8>,
        stat: Stat,
    },
}

/// Reads every path (relative to `top`), on a few threads; ids come from `known` where the
/// metadata is unchanged.
fn read_all(top: &Path, paths: &[Vec<u8>], known: &StatCache) -> Vec<(Vec<u8>, Read)> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let chunk = paths.len().div_ceil(threads).max(256);
    std::thread::scope(|s| {
        let handles: Vec<_> = paths
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    let mut buffer = vec![0u8; 64 << 10];
                    let mut dir = Parent::default();
                    part.iter()
                        .map(|path| {
                            let read = read_one(top, path, known, &mut dir, &mut buffer);
                            (path.clone(), read)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|_| Vec::new()))
            .collect()
    })
}

/// The directory of the paths being read, held open so each `lstat` looks up one name instead
/// of walking the whole path again (the listing's paths come directory by directory). The
/// directory is opened by its path, following links as that path's lookup would, so what is
/// found is what `lstat` of the whole path finds.
#[derive(Default)]
struct Parent {
    /// The directory's path relative to the top, and its descriptor (`None`: it could not be
    /// opened, and its files are examined by their whole path, errors and all).
    open: Option<(Vec<u8>, Option<rustix::fd::OwnedFd>)>,
}

impl Parent {
    /// The metadata of `path` (relative to `top`), not following a link in its last part.
    fn lstat(&mut self, top: &Path, path: &[u8], full: &Path) -> std::io::Result<Stat> {
        use rustix::fs::{AtFlags, Mode, OFlags};
        let (dir, name) = match path.iter().rposition(|&b| b == b'/') {
            Some(slash) => (&path[..slash], &path[slash + 1..]),
            None => (&path[..0], path),
        };
        if self.open.as_ref().is_none_or(|(open, _)| open != dir) {
            let fd = rustix::fs::open(
                top.join(OsStr::from_bytes(dir)),
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .ok();
            self.open = Some((dir.to_vec(), fd));
        }
        match self.open.as_ref().and_then(|(_, fd)| fd.as_ref()) {
            Some(fd) if !name.is_empty() => {
                rustix::fs::statat(fd, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW)
                    .map(|raw| Stat::of_raw(&raw))
                    .map_err(std::io::Error::from)
            }
            _ => std::fs::symlink_metadata(full).map(|meta| Stat::of(&meta)),
        }
    }
}

/// How many times a file that changed while it was read is read again.
const READ_TRIES: usize = 3;

fn read_one(
    top: &Path,
    path: &[u8],
    known: &StatCache,
    dir: &mut Parent,
    buffer: &mut [u8],
) -> Read {
    use rustix::fs::FileType;
    let full = top.join(OsStr::from_bytes(path));
    for _ in 0..READ_TRIES {
        let stat = match dir.lstat(top, path, &full) {
            Ok(stat) => stat,
            Err(e) if is_gone(&e) => return Read::Gone,
            Err(e) => return Read::Unkeyable(format!("it cannot be examined ({e})")),
        };
        let kind = FileType::from_raw_mode(stat.mode);
        if kind == FileType::Directory {
            return Read::Gone;
        }
        if kind == FileType::Symlink {
            let target = match std::fs::read_link(&full) {
                Ok(target) => target,
                Err(e) if is_gone(&e) => return Read::Gone,
                Err(e) => return Read::Unkeyable(format!("its link cannot be read ({e})")),
            };
            let id = format!("l{}", hex(target.as_os_str().as_bytes())).into_bytes();
            match dir.lstat(top, path, &full) {
                Ok(again) if again == stat => {
                    return Read::File {
                        mode: SYMLINK,
                        id,
                        stat,
                    };
                }
                _ => continue,
            }
        }
        if kind != FileType::RegularFile {
            let what = match kind {
                FileType::Fifo => "a FIFO",
                FileType::Socket => "a socket",
                _ => "a device",
            };
            return Read::Unkeyable(format!("it is {what}, whose bytes are not fixed"));
        }
        let mode = if stat.mode & 0o100 != 0 {
            EXECUTABLE
        } else {
            REGULAR
        };
        if let Some(id) = known.get(path, &stat) {
            return Read::File {
                mode,
                id: id.to_vec(),
                stat,
            };
        }
        match hash_file(&full, &stat, buffer) {
            Ok(Some(id)) => return Read::File { mode, id, stat },
            Ok(None) => continue, // changed while read: again
            Err(e) if is_gone(&e) => return Read::Gone,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => continue,
            Err(e) => return Read::Unkeyable(format!("it cannot be read ({e})")),
        }
    }
    Read::Unkeyable("it kept changing while it was read".to_owned())
}

fn is_gone(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// BLAKE3 hex of the file at `full`, when it is still the file `stat` describes before and
/// after the read (`None`: it changed meanwhile). Opened without following a link and without
/// blocking, so a path swapped for a FIFO or a link cannot stall or mislead the read.
fn hash_file(full: &Path, stat: &Stat, buffer: &mut [u8]) -> std::io::Result<Option<Vec<u8>>> {
    use rustix::fs::OFlags;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32)
        .open(full)?;
    let opened = file.metadata()?;
    if !opened.is_file() || Stat::of(&opened) != *stat {
        return Ok(None);
    }
    let mut hasher = blake3::Hasher::new();
    loop {
        let n = file.read(buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    if Stat::of(&file.metadata()?) != *stat {
        return Ok(None);
    }
    Ok(Some(hasher.finalize().to_hex().as_bytes().to_vec()))
}

fn odd_record(top: &Path, record: &[u8]) -> String {
    format!(
        "`git ls-files` in {} printed an unexpected record `{}`",
        top.display(),
        String::from_utf8_lossy(record)
    )
}

/// One `git ls-files --stage` record, borrowed from git's output.
#[derive(Debug, PartialEq, Eq)]
struct StageRecord<'a> {
    mode: &'a [u8],
    oid: &'a [u8],
    stage: &'a [u8],
    path: &'a [u8],
}

/// `<mode> SP <oid> SP <stage> TAB <path>` → its four parts.
fn parse_stage(record: &[u8]) -> Option<StageRecord<'_>> {
    let tab = record.iter().position(|&b| b == b'\t')?;
    let (meta, path) = (&record[..tab], &record[tab + 1..]);
    let mut parts = meta.split(|&b| b == b' ');
    let (mode, oid, stage) = (parts.next()?, parts.next()?, parts.next()?);
    Some(StageRecord {
        mode,
        oid,
        stage,
        path,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

struct Repo {
    top: PathBuf,
    head: Option<String>,
}

impl Repo {
    fn locate(worktree: &Path) -> Result<Repo, String> {
        const TOP: &[&str] = &["rev-parse", "--show-toplevel"];
        // HEAD in the same call saves a process; an unborn HEAD (no commits yet) makes that
        // call fail, and the second one tells it apart from "not a repository".
        let (out, head) = match git(worktree, &[TOP, &["HEAD"]].concat(), None) {
            Ok(out) => (out, true),
            Err(_) => (git(worktree, TOP, None)?, false),
        };
        let lines: Vec<&[u8]> = out
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        let want = if head { 2 } else { 1 };
        if lines.len() != want {
            return Err(format!(
                "`git rev-parse` in {} printed {} lines, expected {want} (a path with a newline?)",
                worktree.display(),
                lines.len()
            ));
        }
        Ok(Repo {
            top: PathBuf::from(OsString::from_vec(lines[0].to_vec())),
            head: head.then(|| String::from_utf8_lossy(lines[1]).into_owned()),
        })
    }
}

/// Run git in its own process group and wait for it (reaped by `wait_with_output`); any failure
/// becomes a reason naming the command and the directory. Input is written from a second thread
/// so a large output cannot block git while it still has input to read.
fn git(dir: &Path, args: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>, String> {
    git_os(dir, args, input)
}

fn git_os(dir: &Path, args: &[impl AsRef<OsStr>], input: Option<&[u8]>) -> Result<Vec<u8>, String> {
    let shown = || {
        let words: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        format!("`git {}` in {}", words.join(" "), dir.display())
    };
    // The key must describe the worktree it was asked about, whatever GIT_DIR & co. say.
    let mut cmd = greenlight_proc::git::command(dir);
    cmd.args(args)
        // Read-only commands may still refresh the index opportunistically; this forbids it.
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = greenlight_proc::git::run(&mut cmd, input)
        .map_err(|e| format!("cannot run {}: {e}", shown()))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "{} failed ({}): {}",
            shown(),
            out.status,
            stderr.trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A verify takes the untracked files from its `git status` instead of `ls-files -o`: the
    /// two listings must be the same on every layout that decides what is untracked (nested
    /// and negated ignore rules, `info/exclude`, a tracked file under an ignored directory, an
    /// untracked directory tree, an embedded repository, a checked-out submodule with its own
    /// untracked file, names with spaces, newlines and bytes that are not UTF-8).
    #[test]
    fn untracked_files_from_the_runs_status_list_as_ls_files_lists_them() {
        let dir = tempfile::tempdir().expect("temp dir");
        let top = dir.path().join("repo");
        let script = r#"
            set -e
            export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
            git init -q -b main sub-origin && cd sub-origin
            git -c user.name=t -c user.email=t@t commit -q --allow-empty -m sub && cd ..
            git init -q -b main repo && cd repo
            printf 'build/\n*.log\n!keep.log\n' > .gitignore
            mkdir -p src/deep/er build docs
            printf 'tracked\n' > src/a.txt
            printf 'tracked, under an ignored directory\n' > build/forced.txt
            git add .gitignore src/a.txt && git add -f build/forced.txt
            git -c protocol.file.allow=always submodule add -q ../sub-origin sub
            git -c user.name=t -c user.email=t@t commit -q -m one
            printf 'untracked\n' > src/deep/er/new.txt
            printf 'x\n' > 'src/with space.txt'
            printf 'x\n' > "$(printf 'src/new\nline')"
            printf 'x\n' > "$(printf 'src/\377bytes')"
            printf 'x\n' > build/ignored.txt
            printf 'x\n' > debug.log
            printf 'x\n' > keep.log
            printf 'docs/private\n' >> .git/info/exclude
            printf 'x\n' > docs/private && printf 'x\n' > docs/public
            printf '*.tmp\n' > docs/.gitignore && printf 'x\n' > docs/a.tmp
            git init -q embedded && printf 'x\n' > embedded/inside.txt
            printf 'x\n' > sub/untracked-in-sub.txt
        "#;
        let made = std::process::Command::new("sh")
            .args(["-c", script])
            .current_dir(dir.path())
            .output()
            .expect("sh");
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
        let shown = |listing: Listing| {
            let files: Vec<(Vec<u8>, Vec<u8>)> = listing
                .entries
                .into_iter()
                .map(|f| (f.path, f.id))
                .collect();
            (files, listing.unkeyable)
        };
        let listed = shown(listing(&top).expect("ls-files listing"));
        // A run started in a subdirectory shares git reads of the whole worktree too.
        for cwd in [top.clone(), top.join("src/deep")] {
            let status = SharedStatus::start(&cwd);
            let shared = listing_with(&cwd, |_| StatCache::default(), None, Some(&status))
                .expect("listing with the run's status");
            assert_eq!(shown(shared), listed, "from {}", cwd.display());
        }
        let paths: Vec<&[u8]> = listed.0.iter().map(|(p, _)| p.as_slice()).collect();
        for expected in [
            "src/deep/er/new.txt",
            "src/with space.txt",
            "src/new\nline",
            "keep.log",
            "docs/public",
            "build/forced.txt",
            "embedded/inside.txt",
            "sub/untracked-in-sub.txt",
        ] {
            assert!(paths.contains(&expected.as_bytes()), "{expected:?} missing");
        }
        assert!(
            paths.contains(&b"src/\xffbytes".as_slice()),
            "the non-UTF-8 name is missing"
        );
        for ignored in [
            "debug.log",
            "build/ignored.txt",
            "docs/private",
            "docs/a.tmp",
        ] {
            assert!(!paths.contains(&ignored.as_bytes()), "{ignored} is listed");
        }
    }

    #[test]
    fn stage_records_split_into_mode_oid_stage_and_byte_path() {
        let rec = b"100644 0123abcd 0\tdir/\xff name";
        let parts = StageRecord {
            mode: b"100644",
            oid: b"0123abcd",
            stage: b"0",
            path: b"dir/\xff name",
        };
        assert_eq!(parse_stage(rec), Some(parts));
        assert_eq!(parse_stage(b"100644 0123abcd 0 no tab"), None);
    }

    /// Each path is examined as its whole path's lookup finds it, though the lookup starts
    /// from its directory held open: a directory reached through a link is read through it,
    /// one that is a loop of links makes its files unkeyable (not deleted), and a file whose
    /// directory went away is gone.
    #[test]
    fn a_path_is_examined_as_its_whole_lookup_finds_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let top = dir.path();
        std::fs::create_dir(top.join("real")).expect("mkdir");
        std::fs::write(top.join("real/f"), "bytes").expect("write");
        std::os::unix::fs::symlink("real", top.join("via")).expect("link");
        std::os::unix::fs::symlink("loop", top.join("loop")).expect("link");
        let paths: Vec<Vec<u8>> = ["real/f", "via/f", "loop/f", "none/f", "top"]
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect();
        std::fs::write(top.join("top"), "at the top").expect("write");
        let read = read_all(top, &paths, &StatCache::default());
        let shown: Vec<String> = read
            .iter()
            .map(|(path, read)| {
                let what = match read {
                    Read::Gone => "gone".to_owned(),
                    Read::Unkeyable(why) => {
                        format!("unkeyable: {}", &why[..why.find(" (").unwrap_or(why.len())])
                    }
                    Read::File { id, .. } => String::from_utf8_lossy(id).into_owned(),
                };
                format!("{} {what}", String::from_utf8_lossy(path))
            })
            .collect();
        let bytes = blake3::hash(b"bytes").to_hex();
        let at_top = blake3::hash(b"at the top").to_hex();
        assert_eq!(
            shown,
            [
                format!("real/f {bytes}"),
                format!("via/f {bytes}"),
                "loop/f unkeyable: it cannot be examined".to_owned(),
                "none/f gone".to_owned(),
                format!("top {at_top}"),
            ]
        );
    }

    /// A file gone between the scan and its read counts as deleted, a directory drops out (its
    /// files are listed on their own), a FIFO is unkeyable without being opened, and a file's
    /// id is the BLAKE3 of its bytes, taken from the stat cache only for the same metadata.
    #[test]
    fn each_path_is_read_as_what_is_on_disk_now() {
        let dir = tempfile::tempdir().expect("temp dir");
        let top = dir.path();
        std::fs::write(top.join("a"), "one\r\n").expect("write");
        std::fs::create_dir(top.join("d")).expect("mkdir");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            top.join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        let paths: Vec<Vec<u8>> = ["a", "journal", "d", "fifo"]
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect();
        let read = read_all(top, &paths, &StatCache::default());
        let shown: Vec<String> = read
            .iter()
            .map(|(path, read)| {
                let what = match read {
                    Read::Gone => "gone".to_owned(),
                    Read::Unkeyable(why) => format!("unkeyable: {why}"),
                    Read::File { mode, id, .. } => format!(
                        "{} {}",
                        String::from_utf8_lossy(mode),
                        String::from_utf8_lossy(id)
                    ),
                };
                format!("{} {what}", String::from_utf8_lossy(path))
            })
            .collect();
        let one = blake3::hash(b"one\r\n").to_hex();
        assert_eq!(
            shown,
            [
                format!("a 100644 {one}"),
                "journal gone".to_owned(),
                "d gone".to_owned(),
                "fifo unkeyable: it is a FIFO, whose bytes are not fixed".to_owned(),
            ]
        );

        // The stat cache answers only for the metadata it knows.
        let stat = Stat::of(&std::fs::symlink_metadata(top.join("a")).expect("stat"));
        let mut known = StatCache::default();
        known.insert(b"a".to_vec(), stat, b"remembered".to_vec());
        let id = |known: &StatCache| match read_all(top, &paths[..1], known).remove(0).1 {
            Read::File { id, .. } => String::from_utf8(id).expect("hex"),
            _ => panic!("a is a file"),
        };
        assert_eq!(id(&known), "remembered");
        std::fs::write(top.join("a"), "two\r\n").expect("write"); // same size, new ctime
        assert_eq!(id(&known), blake3::hash(b"two\r\n").to_hex().as_str());
    }
}
