//! The workspace key: an exact content key of a worktree, so a gate result recorded against one
//! state of the files is reused only when every tracked and untracked-but-not-ignored file still
//! has the same bytes.
//!
//! The one rule: **the key is derived from content, never from `git status`**. A status line says
//! *that* a file differs from HEAD, not *how*; a key built from it stays the same while an agent
//! rewrites an already-modified file, and the stale failure is replayed forever.
//!
//! How: the key hashes the listing `git add -A && git ls-files -s` would produce (mode, blob id
//! and path of every file), together with HEAD, without staging anything:
//! 1. one `git ls-files --stage -m -o --exclude-standard` gives the index's blob ids, which stand
//!    for the worktree's bytes except where git sees a difference, and names those differences:
//!    files that differ from the index (git compares stat data and, for entries written in the
//!    same second as the index, the content itself: the "racy git" rule) and untracked files
//!    that are not ignored;
//! 2. those files are hashed by `git hash-object --stdin-paths` (with the same attributes and
//!    filters `git add` would apply, and without writing an object); deleted ones drop out;
//! 3. the merged listing is hashed by `git hash-object --stdin`.
//!
//! It writes nothing at all: not the user's index, not an object, not a temporary file. (The
//! first version copied the index to a temporary `GIT_INDEX_FILE` and ran `git add -A` and
//! `git write-tree`; on a 20,000-file repository that wrote a 1.6 MB index and ~300 loose objects
//! per call and measured 5-13x the time of `git status`, against a target of 3x. The listing is
//! the same facts, read instead of written.)
//!
//! Decisions:
//! - **HEAD is part of the key.** The files alone are the content, but gates may read history (a
//!   "has a commit" check, a diff against a base): after the agent commits without changing a
//!   byte, such a gate must run again. A false "changed" costs one gate run; a false "unchanged"
//!   replays a stale failure, so the key errs towards changed.
//! - **Submodules** are recorded by git as the commit they have checked out, which says nothing
//!   of edits inside them. Each checked-out submodule (and any untracked embedded repository) is
//!   keyed recursively and folded in; if any of them is unknown, the whole key is unknown.
//! - **A file that vanishes while the listing is made counts as deleted** (an editor's swap
//!   file, a database journal): `hash-object` is asked again for the rest, so a tree that
//!   churns does not turn the cache off for the run.
//! - **Any git failure is `Unknown`**, never an error: the caller then simply runs the gate.
//! - Paths are bytes end to end (`-z` output, `OsStr`), so non-UTF-8 and non-ASCII names key
//!   exactly. The one exception is a changed file whose name holds a newline, which
//!   `hash-object --stdin-paths` cannot take: that makes the key `Unknown`.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The key of a worktree's content, or why it could not be computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkspaceKey {
    /// Lowercase hex; equal keys mean identical content (and HEAD).
    Known(String),
    /// Git could not produce a key (not a repository, git missing, a git error); run the gate.
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

/// How deep submodules inside submodules are followed before giving up with `Unknown`.
const MAX_SUBMODULE_DEPTH: usize = 8;

/// Bumped whenever the listing format changes, so keys from an older greenlight never match.
const FORMAT: &str = "greenlight-workspace-key 1";

/// The content key of the worktree containing `worktree` (a subdirectory keys its whole
/// worktree). Blocking: it runs three or four short git processes and writes nothing.
pub fn workspace_key(worktree: &Path) -> WorkspaceKey {
    match key(worktree, 0) {
        Ok(k) => WorkspaceKey::Known(k),
        Err(reason) => WorkspaceKey::Unknown { reason },
    }
}

/// One line of the listing: a git mode and an id (a blob id, `l<hex>` for a symlink's target,
/// `s<key>` for a checked-out submodule's own key). Borrowed from git's output where possible:
/// the listing has an entry per file, so per-entry allocations would dominate the cost.
type Entry<'a> = (Cow<'a, [u8]>, Cow<'a, [u8]>);

const GITLINK: &[u8] = b"160000";

/// Every file of a worktree as the key sees it: `(path, mode, id)` sorted by path, with the
/// worktree's top directory and HEAD. What the result cache narrows to a gate's inputs.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// The worktree's top directory.
    pub top: PathBuf,
    /// HEAD's commit, if there is one.
    pub head: Option<String>,
    /// Path bytes, git mode, id (blob id, `l<hex>` link target, `s<key>` submodule).
    pub entries: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
}

/// The listing of the worktree containing `worktree`. Blocking; writes nothing.
pub fn listing(worktree: &Path) -> Result<Listing, String> {
    with_listing(worktree, 0, |top, head, listing| {
        Ok(Listing {
            top: top.to_path_buf(),
            head: head.map(str::to_owned),
            entries: listing
                .iter()
                .map(|(path, (mode, id))| (path.to_vec(), mode.to_vec(), id.to_vec()))
                .collect(),
        })
    })
}

fn key(worktree: &Path, depth: usize) -> Result<String, String> {
    with_listing(worktree, depth, |top, head, listing| {
        let head = head.unwrap_or("none");
        let mut description = Vec::with_capacity(listing.len() * 64 + 64);
        description.extend_from_slice(format!("{FORMAT}\nhead {head}\n").as_bytes());
        for (path, (mode, id)) in listing {
            for part in [mode.as_ref(), b" ", id.as_ref(), b"\t", path, b"\0"] {
                description.extend_from_slice(part);
            }
        }
        let hashed = git(top, &["hash-object", "--stdin"], Some(&description))?;
        let hashed = String::from_utf8_lossy(&hashed).trim().to_owned();
        if hashed.is_empty() || !hashed.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "`git hash-object --stdin` in {} printed `{hashed}`",
                top.display()
            ));
        }
        Ok(hashed)
    })
}

type Listed<'a> = BTreeMap<&'a [u8], Entry<'a>>;

fn with_listing<R>(
    worktree: &Path,
    depth: usize,
    finish: impl FnOnce(&Path, Option<&str>, &Listed<'_>) -> Result<R, String>,
) -> Result<R, String> {
    if depth > MAX_SUBMODULE_DEPTH {
        return Err(format!(
            "submodules nested deeper than {MAX_SUBMODULE_DEPTH} levels at {}",
            worktree.display()
        ));
    }
    let repo = Repo::locate(worktree)?;
    let top = repo.top.as_path();

    // One pass over the index and the worktree. Tags: `H`/`S` an index entry (cached,
    // skip-worktree), `M` unmerged, `C` differs from the index (deletions included), `?`
    // untracked and not ignored. Every tagged record but `?` is in `--stage` form.
    let ls_files = [
        "ls-files",
        "-z",
        "-t",
        "--stage",
        "-m",
        "-o",
        "--exclude-standard",
    ];
    let out = git(top, &ls_files, None)?;
    let mut listing: BTreeMap<&[u8], Entry<'_>> = BTreeMap::new();
    // Paths to re-read from disk; a set, since an unmerged path appears once per stage.
    let mut changed: BTreeSet<&[u8]> = BTreeSet::new();
    for record in out.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let (tag, rest) = match record {
            [tag, b' ', rest @ ..] => (*tag, rest),
            _ => return Err(odd_record(top, record)),
        };
        if tag == b'?' {
            changed.insert(rest);
            continue;
        }
        let StageRecord {
            mode,
            oid,
            stage,
            path,
        } = parse_stage(rest).ok_or_else(|| odd_record(top, record))?;
        if tag == b'C' || stage != b"0" {
            // Changed, or unmerged: what counts is the worktree file.
            changed.insert(path);
        } else {
            listing.insert(path, (Cow::Borrowed(mode), Cow::Borrowed(oid)));
        }
    }

    // Re-read every changed or untracked path from disk; collect the regular files to hash.
    let mut to_hash: Vec<(&[u8], &'static [u8])> = Vec::new();
    for path in changed {
        if let Some(dir) = path.strip_suffix(b"/") {
            // An untracked embedded repository: git would record it as a gitlink.
            let sub = key(&top.join(OsStr::from_bytes(dir)), depth + 1)?;
            let id = format!("s{sub}").into_bytes();
            listing.insert(dir, (Cow::Borrowed(GITLINK), Cow::Owned(id)));
            continue;
        }
        if listing
            .get(path)
            .is_some_and(|(mode, _)| mode.as_ref() == GITLINK)
        {
            continue; // a submodule whose HEAD moved: keyed by content below
        }
        let full = top.join(OsStr::from_bytes(path));
        match std::fs::symlink_metadata(&full) {
            Err(_) => {
                listing.remove(path); // deleted (or a parent became a file)
            }
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&full)
                    .map_err(|e| format!("cannot read the link {}: {e}", full.display()))?;
                let id = format!("l{}", hex(target.as_os_str().as_bytes())).into_bytes();
                listing.insert(path, (Cow::Borrowed(b"120000"), Cow::Owned(id)));
            }
            Ok(meta) if meta.is_dir() => {
                listing.remove(path); // a file replaced by a directory; its files are untracked
            }
            Ok(meta) if !meta.is_file() => {
                // A FIFO, socket or device: `git hash-object` would open it and wait forever.
                return Err(format!(
                    "{} is not a regular file (a FIFO, socket or device): it cannot be keyed",
                    full.display()
                ));
            }
            Ok(meta) => {
                let executable = meta.permissions().mode() & 0o100 != 0;
                to_hash.push((path, if executable { b"100755" } else { b"100644" }));
            }
        }
    }
    if let Some((path, _)) = to_hash.iter().find(|(p, _)| p.contains(&b'\n')) {
        return Err(format!(
            "{} has a newline in its name, which `git hash-object --stdin-paths` cannot read",
            String::from_utf8_lossy(path)
        ));
    }
    for (path, mode, oid) in hash_files(top, to_hash)? {
        listing.insert(path, (Cow::Borrowed(mode), Cow::Owned(oid)));
    }

    // Checked-out submodules are keyed by their own content, not the commit git records.
    for (path, (mode, id)) in listing.iter_mut() {
        if mode.as_ref() == GITLINK && !id.starts_with(b"s") {
            let sub = top.join(OsStr::from_bytes(path));
            if sub.join(".git").exists() {
                *id = Cow::Owned(format!("s{}", key(&sub, depth + 1)?).into_bytes());
            }
        }
    }

    finish(top, repo.head.as_deref(), &listing)
}

/// A hashed file: its path, its mode and its blob id.
type Hashed<'a> = (&'a [u8], &'static [u8], Vec<u8>);

/// How many times the files are hashed again after some of them vanished.
const VANISHED_RETRIES: usize = 5;

/// Blob ids of `files` (paths under `top`, with the mode each is listed with), as `git add`
/// would compute them. A file can vanish between the scan and git reading it (an editor's swap
/// file, a database journal): git then fails, the file counts as deleted, and the rest are
/// hashed again; a failure that is not a vanished file is an error.
fn hash_files<'a>(
    top: &Path,
    mut files: Vec<(&'a [u8], &'static [u8])>,
) -> Result<Vec<Hashed<'a>>, String> {
    let mut retries = 0;
    loop {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        let mut input = Vec::new();
        for (path, _) in &files {
            input.extend_from_slice(path);
            input.push(b'\n');
        }
        let hashed = match git(top, &["hash-object", "--stdin-paths"], Some(&input)) {
            Ok(hashed) => hashed,
            Err(why) => {
                let before = files.len();
                files.retain(|(path, _)| {
                    std::fs::symlink_metadata(top.join(OsStr::from_bytes(path)))
                        .is_ok_and(|meta| meta.is_file())
                });
                retries += 1;
                if files.len() == before || retries > VANISHED_RETRIES {
                    return Err(why);
                }
                continue;
            }
        };
        let oids: Vec<&[u8]> = hashed
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        if oids.len() != files.len() {
            return Err(format!(
                "`git hash-object --stdin-paths` in {} gave {} ids for {} files",
                top.display(),
                oids.len(),
                files.len()
            ));
        }
        return Ok(files
            .into_iter()
            .zip(oids)
            .map(|((path, mode), oid)| (path, mode, oid.to_vec()))
            .collect());
    }
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
    let shown = || format!("`git {}` in {}", args.join(" "), dir.display());
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
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", shown()))?;
    let stdin = child.stdin.take();
    let out = std::thread::scope(|s| {
        if let (Some(bytes), Some(mut stdin)) = (input, stdin) {
            // A write error (git exited early) shows up as git's own failure below.
            s.spawn(move || {
                let _ = stdin.write_all(bytes);
            });
        }
        child.wait_with_output()
    })
    .map_err(|e| format!("waiting for {}: {e}", shown()))?;
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

    /// A file gone between the scan and the hashing counts as deleted; the others keep the ids
    /// git gives them alone.
    #[test]
    fn a_file_that_vanished_before_hashing_drops_out_and_the_rest_are_hashed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let top = dir.path();
        let run = |args: &[&str]| git(top, args, None).expect("git runs");
        run(&["init", "-q"]);
        std::fs::write(top.join("a"), "one\n").expect("write");
        std::fs::write(top.join("b"), "two\n").expect("write");
        let alone = |name: &str| {
            String::from_utf8(run(&["hash-object", name]))
                .expect("hex")
                .trim()
                .to_owned()
        };
        let files: Vec<(&[u8], &'static [u8])> = vec![
            (b"a", b"100644"),
            (b"journal", b"100644"),
            (b"b", b"100755"),
        ];
        let hashed = hash_files(top, files).expect("the rest are hashed");
        let got: Vec<(String, String)> = hashed
            .iter()
            .map(|(path, mode, oid)| {
                (
                    format!(
                        "{} {}",
                        String::from_utf8_lossy(path),
                        String::from_utf8_lossy(mode)
                    ),
                    String::from_utf8_lossy(oid).into_owned(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a 100644".to_owned(), alone("a")),
                ("b 100755".to_owned(), alone("b")),
            ]
        );

        // A file replaced by a directory in between drops out as the scan drops one.
        std::fs::create_dir(top.join("d")).expect("mkdir");
        let hashed = hash_files(top, vec![(b"d".as_slice(), b"100644".as_slice())]);
        assert!(hashed.is_ok_and(|h| h.is_empty()));
    }
}
