//! What a run found: per-attempt facts, gate verdicts, the run's result and its exit code.
//!
//! Pure data. The runner fills it in; renderers turn it into the line contract or JSON.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::evidence::WorkEvidence;
use crate::lock::Owner;
use crate::procs::LeftoverProcess;

/// Exit codes of `greenlight verify`, shared with CommandMate's runner.
pub mod exit {
    /// Every gate that ran passed.
    pub const PASSED: i32 = 0;
    /// The config, the command line or the git context is unusable; no RESULT line.
    pub const CONFIG_ERROR: i32 = 2;
    /// A gate failed, timed out, or was FLAKY without `flakyIsPass`.
    pub const FAILED: i32 = 20;
    /// work-evidence found no work (or no commit under `requireCommit`); no gate ran.
    pub const NOT_STARTED: i32 = 21;
    /// No gate reached a verdict (all skipped, or a mutex never came free). Not green.
    pub const SKIPPED: i32 = 22;
    /// Interrupted by SIGINT.
    pub const INTERRUPTED_INT: i32 = 130;
    /// Interrupted by SIGTERM.
    pub const INTERRUPTED_TERM: i32 = 143;
}

/// The run's verdict, as on the RESULT line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunResult {
    /// exit 0
    Passed,
    /// exit 20
    Failed,
    /// exit 21
    NotStarted,
    /// exit 22
    Skipped,
}

impl RunResult {
    /// The word on the RESULT line.
    pub fn as_str(self) -> &'static str {
        match self {
            RunResult::Passed => "passed",
            RunResult::Failed => "failed",
            RunResult::NotStarted => "not_started",
            RunResult::Skipped => "skipped",
        }
    }

    /// The process exit code.
    pub fn exit_code(self) -> i32 {
        match self {
            RunResult::Passed => exit::PASSED,
            RunResult::Failed => exit::FAILED,
            RunResult::NotStarted => exit::NOT_STARTED,
            RunResult::Skipped => exit::SKIPPED,
        }
    }
}

/// How one attempt of a gate ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttemptStatus {
    /// Exit 0.
    Pass,
    /// Nonzero exit.
    Fail,
    /// The budget ran out (exit reported as 124).
    Timeout,
    /// The mutex never came free; the command never started.
    MutexSkip,
}

/// One attempt of one gate.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    /// How it ended.
    pub status: AttemptStatus,
    /// The exit code (124 for a timeout; none when the command never started).
    pub exit_code: Option<i32>,
    /// How long the command ran, lock wait excluded.
    #[serde(rename = "duration_ms", serialize_with = "ser_ms")]
    pub duration: Duration,
    /// How long it waited for its mutex; none when the gate declares no mutex.
    #[serde(rename = "waited_ms", serialize_with = "ser_opt_ms")]
    pub waited: Option<Duration>,
    /// The last `maxLogTailBytes` of output, valid UTF-8.
    pub tail: String,
    /// How many bytes the command wrote in all.
    pub output_bytes: u64,
    /// Processes still alive after the command ended (all killed).
    pub leftovers: Vec<LeftoverProcess>,
    /// The output pipe stayed open after everything found was killed.
    pub pipe_left_open: bool,
    /// The lock directory, for a mutex gate.
    pub lock_path: Option<PathBuf>,
    /// Who held the mutex when the wait gave up.
    pub lock_holder: Option<Owner>,
    /// A dead same-host holder whose lock this attempt broke, with what of its run was ended
    /// first.
    pub broke_stale_lock: Option<crate::lock::StaleHolder>,
    /// With a mutex skip: the holder was dead, but these processes of its run would not end,
    /// so its lock was not taken.
    pub lock_survivors: Vec<LeftoverProcess>,
    /// The mutex's lock directory had no readable owner record (why). With a verdict, this
    /// attempt reclaimed it as older than the gate's timeout; with a mutex skip, it was not
    /// that old yet.
    pub ownerless_lock: Option<String>,
    /// The digest of the attempt's whole output (none when the command never started).
    pub digest: Option<greenlight_digest::Digest>,
    /// Why the command could not be started at all (its mutex lock could not be made, or
    /// `/bin/sh` could not be spawned); the attempt is then a FAIL with exit 126, the shell's
    /// "cannot execute", and this reason is also its output.
    pub start_error: Option<String>,
}

impl Attempt {
    /// An attempt with `status` and nothing else known yet: no exit code, no output, no lock,
    /// no leftovers. The runner fills in what happens; a replay fills in what was stored.
    pub fn blank(status: AttemptStatus) -> Attempt {
        Attempt {
            status,
            exit_code: None,
            duration: Duration::ZERO,
            waited: None,
            tail: String::new(),
            output_bytes: 0,
            leftovers: Vec::new(),
            pipe_left_open: false,
            lock_path: None,
            lock_holder: None,
            broke_stale_lock: None,
            lock_survivors: Vec::new(),
            ownerless_lock: None,
            digest: None,
            start_error: None,
        }
    }

    /// This attempt as one whose command could not be started (here, or on the cluster): the
    /// gate's FAIL, never the run's end, so the other gates' verdicts stand and nothing reads a
    /// gate that never ran as green. The reason is the attempt's output too, as a shell-based
    /// runner would show the shell's own complaint.
    pub(crate) fn cannot_start(mut self, reason: String) -> Attempt {
        self.status = AttemptStatus::Fail;
        self.exit_code = Some(CANNOT_START_EXIT);
        self.tail = format!("greenlight: {reason}\n");
        self.output_bytes = self.tail.len() as u64;
        self.start_error = Some(reason);
        self
    }
}

/// The exit code a gate that could not be started is reported with: what a shell reports for a
/// command it cannot execute, so the line contract keeps an integer there.
pub const CANNOT_START_EXIT: i32 = 126;

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

fn ser_opt_ms<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&(d.as_millis() as u64)),
        None => s.serialize_none(),
    }
}

/// Why a gate was not run, or not judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// `skipInPrimaryCheckout` and this is the primary checkout.
    PrimaryCheckout,
    /// `--skip-work-evidence`.
    Flag,
    /// The mutex stayed held for the whole budget.
    MutexWait,
    /// env-clean has no baseline outside CommandMate.
    NoBaseline,
    /// A gate it needs did not pass (the id is in [`GateReport::needs_failed`]).
    Needs,
}

impl SkipReason {
    /// The spelling on the GATE line.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::PrimaryCheckout => "primary-checkout",
            SkipReason::Flag => "flag",
            SkipReason::MutexWait => "mutex-wait",
            SkipReason::NoBaseline => "no-baseline",
            SkipReason::Needs => "needs",
        }
    }
}

/// The verdict word on a gate's line: the one [`greenlight_types::GateVerdict`], written in the
/// line contract's upper case (`PASS`) wherever a report or a cache entry is serialised.
pub use greenlight_types::GateVerdict;

/// One gate's whole story.
#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    /// The gate id.
    pub id: String,
    /// Its command.
    pub command: String,
    /// The word on its line.
    #[serde(with = "greenlight_types::gate_verdict_word")]
    pub verdict: GateVerdict,
    /// Whether it counts as a pass toward the RESULT (`None` when it reached no verdict).
    pub passed: Option<bool>,
    /// Why it was skipped.
    pub skip_reason: Option<SkipReason>,
    /// Its mutex, if declared.
    pub mutex: Option<String>,
    /// Its timeout.
    pub timeout_sec: u32,
    /// One entry per attempt (none for a primary-checkout skip).
    pub attempts: Vec<Attempt>,
    /// The retry reached no verdict of its own, so the first FAIL stands.
    pub retry_without_verdict: Option<AttemptStatus>,
    /// The gates it needs (v2).
    pub needs: Vec<String>,
    /// The need that did not pass, for a `SKIP reason=needs:<id>`.
    pub needs_failed: Option<String>,
    /// Milliseconds from the run's start to this gate's start (none when it never started).
    pub started_ms: Option<u64>,
    /// The cache key, when the gate's result was replayed from the cache.
    pub cached: Option<String>,
    /// The gate's cache key, when it has one (replayed or not).
    pub cache_key: Option<String>,
    /// Why it ran or replayed (`--explain`).
    pub explain: Option<String>,
    /// What the remote cluster did for it: replayed its action cache entry, or ran it.
    pub remote: Option<RemoteMark>,
}

/// A gate result that came from the remote cluster (`options.remote`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemoteMark {
    /// Where the result came from.
    pub source: RemoteSource,
    /// The action digest (SHA-256 hex): the gate's key on the cluster.
    pub action: String,
    /// The worker that ran it, when the cluster says.
    pub worker: Option<String>,
    /// The operation the cluster ran it under (`run: remote`).
    pub operation: Option<String>,
}

/// Where a remote result came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RemoteSource {
    /// The cluster's action cache: some machine ran this exact action before.
    ActionCache,
    /// A worker of the cluster ran it now.
    Executed,
}

impl GateReport {
    /// The report of `gate` decided by one attempt that exited on its own (PASS or FAIL), as a
    /// caller that runs gates itself (the goal loop) hands it to the cache.
    pub fn from_attempt(gate: &crate::config::GateSpec, attempt: Attempt) -> GateReport {
        let pass = attempt.status == AttemptStatus::Pass;
        GateReport {
            verdict: if pass {
                GateVerdict::Pass
            } else {
                GateVerdict::Fail
            },
            passed: Some(pass),
            attempts: vec![attempt],
            ..GateReport::skipped(gate, None)
        }
    }

    /// `gate` with no attempt: SKIP for `reason` (`None` while its verdict is still to come).
    pub fn skipped(gate: &crate::config::GateSpec, reason: Option<SkipReason>) -> GateReport {
        GateReport {
            id: gate.id.clone(),
            command: gate.command.clone(),
            verdict: GateVerdict::Skip,
            passed: None,
            skip_reason: reason,
            mutex: gate.mutex.clone(),
            timeout_sec: gate.timeout_sec,
            attempts: Vec::new(),
            retry_without_verdict: None,
            needs: Vec::new(),
            needs_failed: None,
            started_ms: None,
            cached: None,
            cache_key: None,
            explain: None,
            remote: None,
        }
    }

    /// The first 12 hex digits of the cache key of a replayed result.
    pub fn cached_short(&self) -> Option<&str> {
        self.cached.as_deref().map(|k| k.get(..12).unwrap_or(k))
    }
}

/// The work-evidence gate's line.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "verdict", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WorkEvidenceReport {
    /// Work was found (and a commit, under `requireCommit`).
    Pass {
        /// The counts.
        #[serde(flatten)]
        evidence: WorkEvidence,
        /// `options.requireCommit`.
        require_commit: bool,
    },
    /// No work, or no commit under `requireCommit`.
    Fail {
        /// The counts.
        #[serde(flatten)]
        evidence: WorkEvidence,
        /// `options.requireCommit`.
        require_commit: bool,
    },
    /// `--skip-work-evidence`.
    Skip,
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The base ref work-evidence counted from.
    pub base_ref: String,
    /// The work-evidence line.
    pub work_evidence: WorkEvidenceReport,
    /// Whether this is the primary checkout (none when work-evidence stopped the run first).
    pub primary_checkout: Option<bool>,
    /// The gates, in config order (only those selected by `--gates`).
    pub gates: Vec<GateReport>,
    /// `options.requireEnvClean`: reported as skipped, never judged here.
    pub env_clean_skipped: bool,
    /// The verdict; none when interrupted.
    pub result: Option<RunResult>,
    /// The signal that ended the run early.
    #[serde(serialize_with = "ser_interrupt")]
    pub interrupted: Option<crate::exec::Interrupt>,
    /// Gate processes of earlier greenlight runs that were killed before they could clean up,
    /// ended by this run before its first gate.
    pub orphans_ended: Vec<LeftoverProcess>,
    /// Processes of this run still alive once no gate was running that no one gate can be named
    /// for (gates ran at once, or a `keys` command left them): all killed, and no result of the
    /// run was stored. A process one gate can be named for is in that gate's attempt instead.
    pub leftovers: Vec<LeftoverProcess>,
    /// Problems that changed nothing but are worth a line on stderr (the cache could not be
    /// used, a result could not be stored).
    pub warnings: Vec<String>,
}

fn ser_interrupt<S: serde::Serializer>(
    i: &Option<crate::exec::Interrupt>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match i {
        Some(crate::exec::Interrupt::Int) => s.serialize_some("SIGINT"),
        Some(crate::exec::Interrupt::Term) => s.serialize_some("SIGTERM"),
        None => s.serialize_none(),
    }
}

impl RunReport {
    /// The process exit code of this run.
    pub fn exit_code(&self) -> i32 {
        match (self.interrupted, self.result) {
            (Some(signal), _) => signal.exit_code(),
            (None, Some(result)) => result.exit_code(),
            (None, None) => exit::FAILED,
        }
    }
}

/// Decides the RESULT from the gates: a real failure outranks a missing verdict, and a run that
/// judged nothing is never green.
pub fn decide(gates: &[GateReport]) -> RunResult {
    let ran = gates
        .iter()
        .filter(|g| {
            g.attempts
                .iter()
                .any(|a| a.status != AttemptStatus::MutexSkip)
        })
        .count();
    if ran == 0 {
        RunResult::Skipped
    } else if gates.iter().any(|g| g.passed == Some(false)) {
        RunResult::Failed
    } else if gates.iter().any(|g| g.passed.is_none()) {
        RunResult::Skipped
    } else {
        RunResult::Passed
    }
}
