//! The workspace key against real git repositories in temp dirs.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use greenlight_gate::{WorkspaceKey, workspace_key};

/// A temp dir holding a git repository (or not).
struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        let r = Repo::bare_dir();
        r.git(&["init", "-q", "-b", "main"]);
        r
    }

    fn bare_dir() -> Repo {
        Repo {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn git_in(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "protocol.file.allow=always"])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .output()
            .expect("git must be installed to run these tests");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn git(&self, args: &[&str]) -> String {
        Repo::git_in(self.path(), args)
    }

    fn write(&self, rel: impl AsRef<Path>, content: &str) {
        let p = self.path().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(p, content).expect("write file");
    }

    fn commit_all(&self, msg: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", msg]);
    }

    fn key(&self) -> String {
        key_of(self.path())
    }

    fn status(&self) -> String {
        self.git(&["status", "--porcelain"])
    }

    fn loose_objects(&self) -> usize {
        count_files(&self.path().join(".git/objects"))
    }
}

fn key_of(dir: &Path) -> String {
    match workspace_key(dir) {
        WorkspaceKey::Known(k) => {
            assert!(
                !k.is_empty() && k.bytes().all(|b| b.is_ascii_hexdigit()),
                "not hex: {k}"
            );
            k
        }
        WorkspaceKey::Unknown { reason } => {
            panic!("expected a key for {}: {reason}", dir.display())
        }
    }
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| {
                    if e.path().is_dir() {
                        count_files(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

fn committed_repo() -> Repo {
    let r = Repo::new();
    r.write("src/lib.rs", "pub fn answer() -> u32 { 41 }\n");
    r.write("README.md", "hello\n");
    r.write(".gitignore", "*.log\ntarget/\n");
    r.commit_all("init");
    r
}

#[test]
fn an_unchanged_worktree_keeps_its_key() {
    let r = committed_repo();
    r.write("src/lib.rs", "pub fn answer() -> u32 { 42 }\n");
    r.write("notes.txt", "untracked\n");
    let first = r.key();
    assert_eq!(r.key(), first);
    assert_eq!(r.key(), first);
}

/// A repaired file whose `git status` line did not change must change the key: a key built
/// from HEAD plus `git status --porcelain` replayed the stale failure until the goal paused
/// (the bug that made another agent harness remove its unchanged-workspace skip).
#[test]
fn content_change_behind_identical_status_line_changes_the_key() {
    let r = committed_repo();
    r.write("src/lib.rs", "pub fn answer() -> u32 { 40 }\n");
    let (status_before, key_before) = (r.status(), r.key());
    r.write("src/lib.rs", "pub fn answer() -> u32 { 42 }\n"); // same length, same status line
    let (status_after, key_after) = (r.status(), r.key());
    assert_eq!(
        status_before, status_after,
        "the precondition: git status cannot tell them apart"
    );
    assert_eq!(status_after, " M src/lib.rs\n");
    assert_ne!(key_before, key_after);
}

#[test]
fn an_untracked_file_content_change_changes_the_key() {
    let r = committed_repo();
    r.write("new_test.rs", "fn a() {}\n");
    let before = (r.status(), r.key());
    r.write("new_test.rs", "fn b() {}\n");
    let after = (r.status(), r.key());
    assert_eq!(before.0, after.0);
    assert_ne!(before.1, after.1);
}

#[test]
fn an_ignored_file_change_keeps_the_key() {
    let r = committed_repo();
    r.write("build.log", "one\n");
    let before = r.key();
    r.write("build.log", "two, longer\n");
    r.write("target/debug/out", "binary\n");
    assert_eq!(r.key(), before);
}

#[test]
fn deleting_or_adding_a_file_changes_the_key() {
    let r = committed_repo();
    let clean = r.key();
    std::fs::remove_file(r.path().join("README.md")).expect("rm");
    let deleted = r.key();
    assert_ne!(deleted, clean);
    r.write("README.md", "hello\n");
    assert_eq!(r.key(), clean, "restoring the bytes restores the key");
}

#[test]
fn a_commit_without_content_change_changes_the_key_because_head_is_part_of_it() {
    let r = committed_repo();
    r.write("src/lib.rs", "pub fn answer() -> u32 { 42 }\n");
    let before = r.key();
    r.commit_all("fix");
    assert_ne!(
        r.key(),
        before,
        "gates may read history, so HEAD is keyed too"
    );
}

#[test]
fn a_directory_outside_any_repository_is_unknown() {
    let r = Repo::bare_dir();
    r.write("file.txt", "x\n");
    match workspace_key(r.path()) {
        WorkspaceKey::Unknown { reason } => assert!(reason.contains("git rev-parse"), "{reason}"),
        WorkspaceKey::Known(k) => panic!("a plain directory has no key, got {k}"),
    }
    assert!(matches!(
        workspace_key(&r.path().join("missing")),
        WorkspaceKey::Unknown { .. }
    ));
}

#[test]
fn the_users_index_and_object_store_are_untouched() {
    let r = committed_repo();
    r.write("src/lib.rs", "pub fn answer() -> u32 { 42 }\n");
    r.write("untracked.txt", "new content\n");
    let status = r.status(); // (git status itself may refresh the index: read it before the snapshot)
    let index = r.path().join(".git/index");
    let (bytes, mtime) = (
        std::fs::read(&index).expect("index"),
        std::fs::metadata(&index)
            .expect("meta")
            .modified()
            .expect("mtime"),
    );
    let objects = r.loose_objects();
    r.key();
    assert_eq!(std::fs::read(&index).expect("index"), bytes, "index bytes");
    assert_eq!(
        std::fs::metadata(&index)
            .expect("meta")
            .modified()
            .expect("mtime"),
        mtime,
        "index mtime"
    );
    assert_eq!(
        r.loose_objects(),
        objects,
        "no objects written into the user's repository"
    );
    assert_eq!(r.status(), status);
    assert!(!r.path().join(".git/index.lock").exists());
}

/// Every file under `dir` with its size and modification time.
fn snapshot(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let meta = e.metadata().expect("metadata");
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                out.push((e.path(), meta.len(), meta.modified().expect("mtime")));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn nothing_is_written_into_the_repository_even_when_git_fails() {
    let r = committed_repo();
    r.write("src/lib.rs", "pub fn answer() -> u32 { 42 }\n");
    r.write("untracked.txt", "x\n");
    r.status();
    let before = snapshot(r.path());
    r.key();
    r.key();
    assert_eq!(
        snapshot(r.path()),
        before,
        "after success: no index refresh, no object, no lock"
    );

    // A corrupt index makes git fail: the key is unknown and still nothing is written.
    std::fs::write(r.path().join(".git/index"), b"DIRC garbage").expect("corrupt index");
    let corrupt = snapshot(r.path());
    match workspace_key(r.path()) {
        WorkspaceKey::Unknown { reason } => assert!(reason.contains("ls-files"), "{reason}"),
        WorkspaceKey::Known(k) => panic!("a corrupt index cannot give a key, got {k}"),
    }
    assert_eq!(snapshot(r.path()), corrupt, "after an error");
}

#[test]
fn a_repository_without_commits_has_a_key_that_follows_content() {
    let r = Repo::new();
    let empty = r.key();
    r.write("a.txt", "one\n");
    let one = r.key();
    assert_ne!(one, empty);
    r.write("a.txt", "two\n");
    assert_ne!(r.key(), one);
    let unstaged = r.key();
    r.git(&["add", "a.txt"]);
    assert_eq!(
        r.key(),
        unstaged,
        "staging changes no content, so not the key"
    );
    r.git(&["rm", "-q", "--cached", "a.txt"]);
    assert_eq!(r.key(), unstaged);
}

#[test]
fn a_linked_worktree_is_keyed_by_its_own_files_and_index() {
    let r = committed_repo();
    let outside = tempfile::tempdir().expect("temp dir");
    let linked = outside.path().join("linked");
    r.git(&[
        "worktree",
        "add",
        "-q",
        linked.to_str().expect("utf-8 temp path"),
        "-b",
        "side",
    ]);
    let wt_index = PathBuf::from(
        Repo::git_in(
            &linked,
            &["rev-parse", "--path-format=absolute", "--git-path", "index"],
        )
        .trim(),
    );
    let index_before = std::fs::read(&wt_index).expect("linked index");
    let a = key_of(&linked);
    std::fs::write(linked.join("README.md"), "changed in the linked worktree\n").expect("write");
    let b = key_of(&linked);
    assert_ne!(a, b);
    assert_eq!(
        std::fs::read(&wt_index).expect("linked index"),
        index_before
    );
}

#[test]
fn non_ascii_and_non_utf8_paths_are_keyed_by_content() {
    let r = committed_repo();
    r.write("données/é.txt", "un\n");
    let raw_name = OsStr::from_bytes(b"bin-\xff.dat");
    std::fs::write(r.path().join(raw_name), b"\x00\x01").expect("write non-UTF-8 name");
    let first = r.key();
    assert_eq!(r.key(), first);
    std::fs::write(r.path().join(raw_name), b"\x00\x02").expect("rewrite");
    let second = r.key();
    assert_ne!(second, first);
    r.write("données/é.txt", "deux\n");
    assert_ne!(r.key(), second);
}

#[test]
fn edits_inside_a_checked_out_submodule_change_the_key() {
    let sub = Repo::new();
    sub.write("lib.txt", "v1\n");
    sub.commit_all("sub init");
    let r = committed_repo();
    r.git(&[
        "submodule",
        "add",
        "-q",
        sub.path().to_str().expect("utf-8 temp path"),
        "vendor/sub",
    ]);
    r.commit_all("add submodule");
    let before = r.key();
    assert_eq!(r.key(), before);
    let file = r.path().join("vendor/sub/lib.txt");
    std::fs::write(&file, "v2\n").expect("edit inside the submodule");
    let edited = r.key();
    assert_ne!(edited, before, "the submodule's own content is keyed");
    std::fs::write(&file, "v3\n").expect("edit again");
    assert_ne!(
        r.key(),
        edited,
        "even when the submodule's status line stays the same"
    );
    std::fs::write(&file, "v1\n").expect("restore");
    assert_eq!(r.key(), before);

    // Its files are listed as the worktree's own, under its path (so `inputs` globs reach
    // them), with its own ignore rules.
    std::fs::write(r.path().join("vendor/sub/.gitignore"), "*.tmp\n").expect("write");
    std::fs::write(r.path().join("vendor/sub/scratch.tmp"), "x\n").expect("write");
    let listing = greenlight_gate::listing(r.path()).expect("listed");
    let paths: Vec<String> = listing
        .entries
        .iter()
        .map(|f| String::from_utf8_lossy(&f.path).into_owned())
        .filter(|p| p.starts_with("vendor/sub"))
        .collect();
    assert_eq!(
        paths,
        ["vendor/sub", "vendor/sub/.gitignore", "vendor/sub/lib.txt"]
    );
}

/// An edit in the same second as the index write, same size, with the old mtime put back: only
/// git's racy-entry rule (re-read entries not older than the index) can see it.
#[test]
fn a_same_size_edit_with_the_old_mtime_restored_changes_the_key() {
    let r = committed_repo();
    let file = r.path().join("src/lib.rs");
    let mtime = std::fs::metadata(&file)
        .expect("meta")
        .modified()
        .expect("mtime");
    let before = r.key();
    std::fs::write(&file, "pub fn answer() -> u32 { 43 }\n").expect("same-size edit");
    std::fs::File::options()
        .write(true)
        .open(&file)
        .expect("open")
        .set_modified(mtime)
        .expect("restore mtime");
    assert_ne!(r.key(), before);
}

#[test]
fn mode_and_symlink_target_changes_change_the_key() {
    use std::os::unix::fs::PermissionsExt;
    let r = committed_repo();
    std::os::unix::fs::symlink("README.md", r.path().join("link")).expect("symlink");
    let before = r.key();
    let script = r.path().join("src/lib.rs");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let exec = r.key();
    assert_ne!(exec, before, "the executable bit is content to git");
    std::fs::remove_file(r.path().join("link")).expect("rm link");
    std::os::unix::fs::symlink("src/lib.rs", r.path().join("link")).expect("relink");
    assert_ne!(
        r.key(),
        exec,
        "a symlink is keyed by its target, not the file it points to"
    );
}

#[test]
fn edits_inside_an_untracked_embedded_repository_change_the_key() {
    let r = committed_repo();
    let nested = r.path().join("nested");
    std::fs::create_dir(&nested).expect("mkdir");
    Repo::git_in(&nested, &["init", "-q"]);
    std::fs::write(nested.join("a.txt"), "one\n").expect("write");
    Repo::git_in(&nested, &["add", "a.txt"]);
    Repo::git_in(&nested, &["commit", "-q", "-m", "x"]);
    let before = r.key();
    std::fs::write(nested.join("a.txt"), "two\n").expect("edit");
    assert_ne!(r.key(), before);
}

#[test]
fn a_conflicted_merge_is_keyed_by_the_worktree_files() {
    let r = committed_repo();
    r.git(&["checkout", "-q", "-b", "other"]);
    r.write("README.md", "theirs\n");
    r.commit_all("theirs");
    r.git(&["checkout", "-q", "main"]);
    r.write("README.md", "ours\n");
    r.commit_all("ours");
    let merge = Command::new("git")
        .args(["merge", "-q", "other"])
        .current_dir(r.path())
        .output()
        .expect("git merge");
    assert!(!merge.status.success(), "the precondition: a conflict");
    let conflicted = r.key();
    r.write("README.md", "resolved\n");
    let resolved = r.key();
    assert_ne!(resolved, conflicted);
    r.git(&["add", "README.md"]);
    assert_eq!(r.key(), resolved, "marking it resolved changes no content");
}
