//! Scripted fake `claude` and `codex` executables that reproduce measured CLI behaviour.
//!
//! The fakes are python3 scripts in this crate's `fakes/` directory. [`FakeAgent::install`]
//! writes a small wrapper named `claude` or `codex` into a fresh temp dir that fixes the scenario
//! and knobs for that one install, so tests never mutate their own environment and can run in
//! parallel. Every invocation appends one JSON line to a log that [`FakeAgent::invocations`]
//! reads back (argv, stdin, cwd, pid, process group, environment names, extra pids).

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Which CLI to fake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeCli {
    /// `claude -p --output-format stream-json --verbose` (or `json`).
    Claude,
    /// `codex exec --json`.
    Codex,
}

impl FakeCli {
    /// The executable name.
    pub fn name(self) -> &'static str {
        match self {
            FakeCli::Claude => "claude",
            FakeCli::Codex => "codex",
        }
    }
}

/// A measured behaviour for the fake to reproduce. Not every scenario exists for both CLIs; see
/// the docstring at the top of each fake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// A normal answer with usage (both).
    Ok,
    /// A normal answer without usage (both).
    NoUsage,
    /// claude: `subtype:"success"`, `is_error:true`, exit 1.
    IsError,
    /// claude: `is_error:true` with exit 0.
    IsErrorExit0,
    /// claude: banner lines before the envelope.
    Banner,
    /// claude: a success envelope with exit 1.
    SuccessNonzero,
    /// Exit 0 with nothing on stdout (both).
    Mute,
    /// Never answers (both).
    Hang,
    /// codex: non-terminal `error` events forever, ignoring SIGTERM, with a stubborn grandchild.
    ErrorForever,
    /// codex: non-terminal `error` events, then an ordinary answer.
    ErrorThenOk,
    /// codex: `turn.failed`, exit 1.
    TurnFailed,
    /// Writes the file named by [`FakeAgentBuilder::write`] under the cwd, then answers (both).
    Write,
    /// As [`Scenario::Ok`], pausing one second after the first piece of activity (both).
    Slow,
}

impl Scenario {
    /// The scenario name the fakes read from `FAKE_AGENT_SCENARIO`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scenario::Ok => "ok",
            Scenario::NoUsage => "no-usage",
            Scenario::IsError => "is-error",
            Scenario::IsErrorExit0 => "is-error-exit0",
            Scenario::Banner => "banner",
            Scenario::SuccessNonzero => "success-nonzero",
            Scenario::Mute => "mute",
            Scenario::Hang => "hang",
            Scenario::ErrorForever => "error-forever",
            Scenario::ErrorThenOk => "error-then-ok",
            Scenario::TurnFailed => "turn-failed",
            Scenario::Write => "write",
            Scenario::Slow => "slow",
        }
    }
}

/// One recorded invocation of a fake.
#[derive(Debug, Clone, Deserialize)]
pub struct Invocation {
    /// The arguments after the executable.
    pub argv: Vec<String>,
    /// Everything read from stdin.
    pub stdin: String,
    /// The working directory.
    pub cwd: PathBuf,
    /// The fake's pid.
    pub pid: i32,
    /// The fake's process group.
    pub pgid: i32,
    /// The names of every environment variable the fake saw.
    pub env_names: Vec<String>,
    /// Pids of processes the fake left behind (grandchildren).
    pub extra_pids: Vec<i32>,
}

/// Knobs for one install.
#[derive(Debug, Clone)]
pub struct FakeAgentBuilder {
    cli: FakeCli,
    scenario: Scenario,
    answer: Option<String>,
    good_models: Option<Vec<String>>,
    write: Option<String>,
}

impl FakeAgentBuilder {
    /// The answer text (default `OK`).
    pub fn answer(mut self, text: &str) -> Self {
        self.answer = Some(text.into());
        self
    }

    /// Only these model ids answer; any other fails as the real CLI does for an unknown model.
    pub fn good_models(mut self, ids: &[&str]) -> Self {
        self.good_models = Some(ids.iter().map(|s| s.to_string()).collect());
        self
    }

    /// The file (relative to the dispatch cwd) the `write` scenario writes.
    pub fn write(mut self, path: &str) -> Self {
        self.write = Some(path.into());
        self
    }

    /// Writes the wrapper into a fresh temp dir.
    pub fn install(self) -> io::Result<FakeAgent> {
        let dir = tempfile::Builder::new()
            .prefix("greenlight-fake-")
            .tempdir()?;
        let log = dir.path().join("invocations.jsonl");
        let script = fakes_dir().join(self.cli.name());
        let python = python3()?;
        let mut text = String::from("#!/bin/sh\n");
        let mut set = |k: &str, v: &str| {
            text.push_str(&format!("{k}={}\nexport {k}\n", sh_quote(v)));
        };
        set("FAKE_AGENT_SCENARIO", self.scenario.as_str());
        set("FAKE_AGENT_LOG", &log.to_string_lossy());
        set("PYTHONDONTWRITEBYTECODE", "1");
        if let Some(answer) = &self.answer {
            set("FAKE_AGENT_ANSWER", answer);
        }
        if let Some(models) = &self.good_models {
            set("FAKE_AGENT_GOOD_MODELS", &models.join(","));
        }
        if let Some(write) = &self.write {
            set("FAKE_AGENT_WRITE", write);
        }
        text.push_str(&format!(
            "exec {} {} \"$@\"\n",
            sh_quote(&python.to_string_lossy()),
            sh_quote(&script.to_string_lossy())
        ));
        let bin = dir.path().join(self.cli.name());
        fs::write(&bin, text)?;
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o755))?;
        Ok(FakeAgent { dir, bin, log })
    }
}

/// An installed fake CLI; removed with its temp dir when dropped.
#[derive(Debug)]
pub struct FakeAgent {
    dir: tempfile::TempDir,
    bin: PathBuf,
    log: PathBuf,
}

impl FakeAgent {
    /// Starts configuring a fake.
    pub fn builder(cli: FakeCli, scenario: Scenario) -> FakeAgentBuilder {
        FakeAgentBuilder {
            cli,
            scenario,
            answer: None,
            good_models: None,
            write: None,
        }
    }

    /// Installs a fake with default knobs.
    pub fn install(cli: FakeCli, scenario: Scenario) -> io::Result<FakeAgent> {
        Self::builder(cli, scenario).install()
    }

    /// The executable to pass as `--bin`.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// The directory holding the executable (to put first on `PATH`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Every invocation so far, oldest first. Empty when the fake never ran.
    pub fn invocations(&self) -> Vec<Invocation> {
        let Ok(text) = fs::read_to_string(&self.log) else {
            return Vec::new();
        };
        text.lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

/// Where the fake scripts live.
pub fn fakes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fakes")
}

/// Whether a process with this pid still exists (and is not a zombie).
pub fn pid_alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Pids of live (non-zombie) processes in a process group.
pub fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let (_, rest) = stat.rsplit_once(')')?;
                    let fields: Vec<&str> = rest.split_whitespace().collect();
                    // fields[0] = state, fields[1] = ppid, fields[2] = pgrp
                    let state = *fields.first()?;
                    let pgrp: i32 = fields.get(2)?.parse().ok()?;
                    Some(pgrp == pgid && state != "Z" && state != "X")
                })
                .unwrap_or(false)
        })
        .collect()
}

/// The real python3 interpreter (not a version-manager shim, which would need this process's
/// environment to work, while a dispatch may run the fake with a scrubbed or replaced one).
fn python3() -> io::Result<PathBuf> {
    let missing = |why: String| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "python3 is needed by the fake agent CLIs but {why}; install it (apt-get install python3)"
            ),
        )
    };
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|err| missing(format!("cannot be run: {err}")))?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || path.is_empty() {
        return Err(missing("did not report its executable".into()));
    }
    Ok(PathBuf::from(path))
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}
