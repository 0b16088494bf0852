//! Shared fixture of the `goal_*` tests: a real temp git worktree with a one-line "bug"
//! (`value.txt` says `bad`; the gate wants `good`), a scratch dir outside the worktree for
//! scripted agents, their counters and the copies of every prompt they read, and the state
//! database every command of the test shares through `--state`.

#![allow(dead_code, clippy::unwrap_used)] // each test file uses part of it

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use greenlight_testkit::{Run, TempRepo};
use serde_json::Value;

/// The gate every fixture starts with: prints what it found and exits 1 unless the bug is fixed.
pub const GATE: &str = "sh check.sh";

const CHECK: &str = "v=$(cat value.txt)\nif [ \"$v\" = good ]; then echo \"ok: value is good\"; exit 0; fi\necho \"expected value good, got $v\"\nexit 1\n";

/// A worktree, a scratch dir and a state database.
pub struct Fixture {
    /// The worktree the goal runs in.
    pub repo: TempRepo,
    scratch: tempfile::TempDir,
}

impl Fixture {
    /// A linked worktree whose `value.txt` (committed) says `bad`, with `check.sh` committed.
    pub fn new() -> Self {
        let repo = TempRepo::worktree();
        repo.write("value.txt", "bad\n");
        repo.write("check.sh", CHECK);
        repo.commit_all("a value that is wrong, and the check that says so");
        let scratch = tempfile::Builder::new()
            .prefix("greenlight-goal-scratch")
            .tempdir()
            .unwrap();
        Self { repo, scratch }
    }

    /// The scratch dir (outside the worktree).
    pub fn scratch(&self) -> &Path {
        self.scratch.path()
    }

    /// The state database every command of this fixture uses.
    pub fn state(&self) -> PathBuf {
        self.scratch().join("state.db")
    }

    /// Writes an executable `sh` script into the scratch dir and returns its path. In the body,
    /// `$S` is the scratch dir and `$N` the 1-based number of this call (counted per script).
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.scratch().join(name);
        let text = format!(
            "#!/bin/sh\nS='{}'\nN=$(( $(cat \"$S/{name}.calls\" 2>/dev/null || echo 0) + 1 ))\necho $N > \"$S/{name}.calls\"\n[ -n \"$1\" ] && [ -f \"$1\" ] && cp \"$1\" \"$S/{name}.prompt.$N\"\n{body}\n",
            self.scratch().display()
        );
        fs::write(&path, text).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// `--agent` value running `script` with the prompt file and the model id.
    pub fn agent(&self, script: &Path) -> String {
        format!("command:{} {{prompt_file}} {{model}}", script.display())
    }

    /// How many times script `name` ran.
    pub fn calls(&self, name: &str) -> u32 {
        fs::read_to_string(self.scratch().join(format!("{name}.calls")))
            .map(|t| t.trim().parse().unwrap())
            .unwrap_or(0)
    }

    /// The prompt script `name` read on call `n`.
    pub fn prompt(&self, name: &str, n: u32) -> String {
        let path = self.scratch().join(format!("{name}.prompt.{n}"));
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Runs `greenlight goal <args> --state <state>` in the worktree.
    pub fn goal(&self, args: &[&str]) -> Run {
        let mut all = vec!["goal"];
        all.extend_from_slice(args);
        let state = self.state();
        all.extend(["--state", state.to_str().unwrap()]);
        self.repo.greenlight(all)
    }

    /// Runs `greenlight goal <args> --state <state>` in the worktree with extra environment.
    pub fn goal_env(&self, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Run {
        let mut all = vec!["goal"];
        all.extend_from_slice(args);
        let state = self.state();
        all.extend(["--state", state.to_str().unwrap()]);
        let mut cmd = self.repo.command(all);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Run::from_output(cmd.output().unwrap(), &[])
    }

    /// Starts `greenlight goal <args> --state <state>` without waiting.
    pub fn spawn_goal(&self, args: &[&str]) -> Child {
        let mut all = vec!["goal"];
        all.extend_from_slice(args);
        let state = self.state();
        all.extend(["--state", state.to_str().unwrap()]);
        self.repo
            .command(all)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// `goal status --json`, parsed.
    pub fn status(&self) -> Value {
        let out = self.goal(&["status", "--json"]);
        assert_eq!(out.code, 0, "{}", out.render());
        serde_json::from_str(&out.stdout).unwrap()
    }

    /// `goal log --json`, one parsed object per event.
    pub fn log(&self) -> Vec<Value> {
        let out = self.goal(&["log", "--json"]);
        assert_eq!(out.code, 0, "{}", out.render());
        out.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// The kinds of `events`, in order.
pub fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// Events of one kind.
pub fn of_kind(events: &[Value], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["kind"] == kind)
        .cloned()
        .collect()
}

/// Waits until `path` exists (a script's "I am here" marker), or panics after `limit`.
pub fn wait_for(path: &Path, limit: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < limit,
            "{} did not appear within {limit:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The marker is written before the script's next step; give it a moment to get there.
    std::thread::sleep(Duration::from_millis(100));
}

/// Whether a process with this pid still exists (and is not a zombie).
pub fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Reads a pid a script wrote.
pub fn pid_in(path: &Path) -> i32 {
    fs::read_to_string(path).unwrap().trim().parse().unwrap()
}

/// Sends `signal` (e.g. "-KILL") to a pid, or to a process group with a negative pid.
pub fn kill(signal: &str, pid: i32) {
    let _ = std::process::Command::new("kill")
        .args([signal, "--", &pid.to_string()])
        .status();
}

/// Waits for a child and returns its exit code (128 + n for a signal, as a shell reports it).
pub fn wait_code(child: Child) -> (i32, String, String) {
    use std::os::unix::process::ExitStatusExt;
    let out = child.wait_with_output().unwrap();
    let code = out
        .status
        .code()
        .unwrap_or_else(|| 128 + out.status.signal().unwrap_or(0));
    (
        code,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The process group of a live pid.
pub fn pgid_of(pid: i32) -> i32 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit(')').next().unwrap();
    rest.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// Events with the fields that do not depend on time: (seq, turn, kind, payload).
pub fn rows(events: &[Value]) -> Vec<(i64, Value, String, Value)> {
    events
        .iter()
        .map(|e| {
            (
                e["seq"].as_i64().unwrap(),
                e["turn"].clone(),
                e["kind"].as_str().unwrap().to_owned(),
                e["payload"].clone(),
            )
        })
        .collect()
}

/// Asserts the log's seq numbers are 1..=n with no gap and no repeat.
pub fn assert_contiguous(events: &[Value]) {
    let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    let want: Vec<i64> = (1..=seqs.len() as i64).collect();
    assert_eq!(seqs, want, "the event log has a gap or a repeat");
}
