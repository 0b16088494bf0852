//! Real git repositories in temp dirs: a primary checkout with an `origin/HEAD` to count work
//! from, and linked worktrees beside it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cli::Cli;
use crate::run::Run;

/// A git repository (or linked worktree) in a temp dir that is removed on drop.
pub struct TempRepo {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    locks: PathBuf,
}

fn git_at(dir: &Path, args: &[&str]) -> String {
    // A test run inside a git hook must still build its fixture where it asked to.
    let out = greenlight_proc::git::command(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "greenlight tests")
        .env("GIT_AUTHOR_EMAIL", "tests@greenlight.invalid")
        .env("GIT_COMMITTER_NAME", "greenlight tests")
        .env("GIT_COMMITTER_EMAIL", "tests@greenlight.invalid")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl TempRepo {
    /// A primary checkout with one commit on `main`, and `origin/HEAD` pointing at it, so
    /// work-evidence has a base and counts nothing yet.
    pub fn primary() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("greenlight-test")
            .tempdir()
            .unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = base.join("repo");
        let home = base.join("home");
        let locks = base.join("locks");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(&home).unwrap();
        git_at(&root, &["init", "-q", "-b", "main"]);
        git_at(&root, &["config", "user.name", "greenlight tests"]);
        git_at(&root, &["config", "user.email", "tests@greenlight.invalid"]);
        git_at(&root, &["config", "commit.gpgsign", "false"]);
        fs::write(root.join("README"), "fixture\n").unwrap();
        git_at(&root, &["add", "README"]);
        git_at(&root, &["commit", "-q", "-m", "initial"]);
        git_at(&root, &["update-ref", "refs/remotes/origin/main", "HEAD"]);
        git_at(
            &root,
            &[
                "symbolic-ref",
                "refs/remotes/origin/HEAD",
                "refs/remotes/origin/main",
            ],
        );
        Self {
            _dir: dir,
            root,
            home,
            locks,
        }
    }

    /// A linked worktree (branch `work`) of a fresh primary checkout: where gates really run.
    pub fn worktree() -> Self {
        let mut repo = Self::primary();
        let wt = repo.root.parent().unwrap().join("wt");
        git_at(
            &repo.root,
            &["worktree", "add", "-q", "-b", "work", wt.to_str().unwrap()],
        );
        repo.root = wt;
        repo
    }

    /// A linked worktree with one commit of work on it.
    pub fn worktree_with_commit() -> Self {
        let repo = Self::worktree();
        repo.write("src/work.txt", "work\n");
        repo.commit_all("work");
        repo
    }

    /// The checkout's root directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The directory `HOME` points at for commands run through [`TempRepo::greenlight`].
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The `CM_VERIFY_LOCK_ROOT` of commands run through [`TempRepo::greenlight`].
    pub fn lock_root(&self) -> &Path {
        &self.locks
    }

    /// Writes a file (creating directories), relative to the root.
    pub fn write(&self, rel: &str, contents: impl AsRef<[u8]>) {
        crate::files::write_file(&self.root.join(rel), contents);
    }

    /// Plants the mutex lock `name` under the lock root exactly as CommandMate's runner makes
    /// one (`mkdir`, then an `owner` JSON record), held by `pid` on `host`; returns its directory.
    pub fn plant_lock(&self, name: &str, pid: i64, host: &str, token: &str) -> PathBuf {
        let dir = self.locks.join(format!("{name}.lock"));
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("owner"),
            format!(
                "{{\"pid\":{pid},\"host\":\"{host}\",\"token\":\"{token}\",\"acquiredAt\":1700000000000}}\n"
            ),
        )
        .unwrap();
        dir
    }

    /// Reads a file relative to the root, if it exists.
    pub fn read(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.root.join(rel)).ok()
    }

    /// Waits up to `limit` until a fixture script has written at least `count` pids to `rel`
    /// (one a line), and returns them all.
    pub fn wait_for_pids(&self, rel: &str, count: usize, limit: std::time::Duration) -> Vec<i32> {
        crate::procs::wait_until(
            limit,
            &format!("{rel} never held {count} pids (the script never started)"),
            || {
                let pids = crate::procs::pids_in(&self.read(rel).unwrap_or_default());
                (pids.len() >= count).then_some(pids)
            },
        )
    }

    /// Runs git in the checkout and returns its trimmed stdout.
    pub fn git(&self, args: &[&str]) -> String {
        git_at(&self.root, args)
    }

    /// `git add -A && git commit`.
    pub fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
    }

    /// Writes the config where greenlight reads a file of its version: a `version: 2` file in
    /// greenlight's home, `.greenlight/verify.yaml` (greenlight's own file: not work), anything
    /// else in CommandMate's, `.commandmate/verify.yaml` (left uncommitted: it counts as one
    /// uncommitted entry, as CommandMate counts it).
    pub fn verify_yaml(&self, text: &str) {
        if greenlight_gate::config::is_v2(text) {
            self.greenlight_yaml(text);
        } else {
            self.write(".commandmate/verify.yaml", text);
        }
    }

    /// Writes `.greenlight/verify.yaml`, whatever its version.
    pub fn greenlight_yaml(&self, text: &str) {
        self.write(".greenlight/verify.yaml", text);
    }

    /// Runs the real `greenlight` binary in the checkout with an isolated HOME and lock root.
    pub fn greenlight<I, S>(&self, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.cli(args).run()
    }

    /// The `greenlight` command as [`TempRepo::greenlight`] runs it, for tests that feed its
    /// stdin, set its environment or bound its time before running it.
    pub fn cli<I, S>(&self, args: I) -> Cli
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        Cli::from_command(self.command(args))
            .filter_path(&self.root, "[REPO]")
            .filter_path(self.root.parent().unwrap(), "[TMP]")
    }

    /// The `greenlight` command, set up as [`TempRepo::greenlight`] runs it, for tests that
    /// need to signal it or feed its stdin.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = Command::new(crate::run::greenlight_bin());
        cmd.args(args)
            .current_dir(&self.root)
            .env("HOME", &self.home)
            .env("CM_VERIFY_LOCK_ROOT", &self.locks)
            .env("NO_COLOR", "1")
            .env_remove("CM_WORKTREE_INDEX")
            .env_remove("CM_WORKTREE_ID")
            .env_remove("GREENLIGHT_STATE")
            .env("XDG_STATE_HOME", self.home.join("state"))
            .env_remove("GREENLIGHT_CACHE_DIR")
            .env("XDG_CACHE_HOME", self.home.join("cache"));
        cmd
    }
}
