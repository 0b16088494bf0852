//! Shared fixture of the `goal_*` tests: a real temp git worktree with a one-line "bug"
//! (`value.txt` says `bad`; the gate wants `good`), a scratch dir outside the worktree for
//! scripted agents, their counters and the copies of every prompt they read, and the state
//! database every command of the test shares through `--state`.

#![allow(dead_code, clippy::unwrap_used)] // each test file uses part of it

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use greenlight_testkit::{Run, TempRepo, procs};
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

    /// Waits until a scripted agent or gate has written marker `name` into the scratch dir (its
    /// "I am here"), or panics after `limit`.
    pub fn wait_for_marker(&self, name: &str, limit: Duration) {
        let path = self.scratch().join(name);
        procs::wait_until(limit, &format!("{} did not appear", path.display()), || {
            path.exists().then_some(())
        });
        // The marker is written before the script's next step; give it a moment to get there.
        std::thread::sleep(Duration::from_millis(100));
    }

    /// The pid a script wrote to `name` in the scratch dir.
    pub fn pid_in(&self, name: &str) -> i32 {
        procs::wait_for_pid(&self.scratch().join(name))
    }

    /// Runs `greenlight goal <args> --state <state>` in the worktree.
    pub fn goal(&self, args: &[&str]) -> Run {
        self.repo.greenlight(self.goal_args(args))
    }

    /// Runs `greenlight goal <args> --state <state>` in the worktree with extra environment.
    pub fn goal_env(&self, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Run {
        env.iter()
            .fold(self.repo.cli(self.goal_args(args)), |cli, (k, v)| {
                cli.env(k, v)
            })
            .run()
    }

    /// `goal run <goal> --agent <script> --gate <gate> <extra…>`, run to its end: the goal
    /// against one gate with a scripted agent, the setup most goal tests start from.
    pub fn run_goal(&self, goal: &str, agent: &Path, gate: &str, extra: &[&str]) -> Run {
        let agent = self.agent(agent);
        self.goal(&run_args(goal, &agent, gate, extra))
    }

    /// [`Fixture::run_goal`], started without waiting.
    pub fn spawn_run(&self, goal: &str, agent: &Path, gate: &str, extra: &[&str]) -> Child {
        let agent = self.agent(agent);
        self.spawn_goal(&run_args(goal, &agent, gate, extra))
    }

    /// [`Fixture::run_goal`] as a command not yet started, for a test that chooses its
    /// environment and pipes.
    pub fn run_command(&self, goal: &str, agent: &Path, gate: &str, extra: &[&str]) -> Command {
        let agent = self.agent(agent);
        self.repo
            .command(self.goal_args(&run_args(goal, &agent, gate, extra)))
    }

    /// `goal <args> --state <state>`: every command of the fixture shares its state database.
    fn goal_args(&self, args: &[&str]) -> Vec<String> {
        let mut all = vec!["goal".to_owned()];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        all.extend([
            "--state".to_owned(),
            self.state().to_str().unwrap().to_owned(),
        ]);
        all
    }

    /// `greenlight goal <args> --state <state>` in the worktree, not yet started.
    pub fn goal_command(&self, args: &[&str]) -> Command {
        self.repo.command(self.goal_args(args))
    }

    /// Starts `greenlight goal <args> --state <state>` without waiting.
    pub fn spawn_goal(&self, args: &[&str]) -> Child {
        self.goal_command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// What a person does while a scripted agent or gate waits for the `go` file: adds the gate
    /// `true`, removes gate 1, then lets the script go on.
    pub fn swap_gate_1_for_true_then_go(&self) {
        assert_eq!(self.goal(&["gate", "add", "true"]).code, 0);
        let out = self.goal(&["gate", "remove", "1"]);
        assert_eq!(out.code, 0, "{}", out.render());
        fs::write(self.scratch().join("go"), "").unwrap();
    }

    /// (verdict, replayed) of every recorded gate run, in order.
    pub fn gate_verdicts_and_replays(&self) -> Vec<(Value, Value)> {
        of_kind(&self.log(), "gate-run")
            .iter()
            .map(|r| {
                (
                    r["payload"]["verdict"].clone(),
                    r["payload"]["replayed"].clone(),
                )
            })
            .collect()
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

/// The arguments of `goal run` for one goal, one agent and one gate, then `extra`.
fn run_args<'a>(goal: &'a str, agent: &'a str, gate: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", goal, "--agent", agent, "--gate", gate];
    args.extend_from_slice(extra);
    args
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

/// Waits for a spawned `greenlight` and returns what it produced. Unlike `Run::from_output`,
/// which reports every death by signal as -1, a child a signal ended gets 128 + n, as a shell
/// reports it, so the crash tests can tell SIGKILL (137) apart from the codes greenlight chooses
/// itself when it catches SIGTERM (143) or Ctrl-C (130).
pub fn finish(child: Child) -> Run {
    use std::os::unix::process::ExitStatusExt;
    let out = child.wait_with_output().unwrap();
    let signalled = out.status.signal();
    let mut run = Run::from_output(out, &[]);
    if let Some(n) = signalled {
        run.code = 128 + n;
    }
    run
}

/// Sends `signal` to every process of group `pgid`. Not `procs::signal`: that one signals one
/// pid and asserts delivery, while this sweeps up a group a killed runner left behind, whose
/// members may already be gone.
pub fn kill_group(signal: &str, pgid: i32) {
    let _ = std::process::Command::new("kill")
        .args([signal, "--", &(-pgid).to_string()])
        .status();
}

/// The process group of a live pid.
pub fn pgid_of(pid: i32) -> i32 {
    let fields = greenlight_testkit::procs::stat_fields(&pid.to_string()).unwrap();
    fields[2].parse().unwrap()
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
