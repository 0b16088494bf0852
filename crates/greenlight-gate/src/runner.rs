//! A verify run: from a loaded config to a [`RunReport`], gate after gate, in config order.
//!
//! Every gate runs even after one fails, so one run reports every finding. Progress leaves as
//! [`RunEvent`]s the moment it happens; the caller renders them.

use std::path::PathBuf;
use std::time::Duration;

use crate::capture::Capture;
use crate::config::{Config, GateSpec};
use crate::error::Error;
use crate::evidence;
use crate::exec::{self, ExecSpec, Interrupt, InterruptWatch, OutputSink, Termination};
use crate::lock::{self, Acquired};
use crate::report::{
    Attempt, AttemptStatus, CANNOT_START_EXIT, GateReport, GateVerdict, RunReport, SkipReason,
    WorkEvidenceReport, decide,
};

/// What the command line adds to a config.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The worktree the gates run in.
    pub cwd: PathBuf,
    /// `--base-ref`, which wins over `options.baseRef`.
    pub base_ref: Option<String>,
    /// `--gates`: run only these ids (validated against the config).
    pub only: Option<Vec<String>>,
    /// `--skip-work-evidence`.
    pub skip_work_evidence: bool,
    /// SIGTERM → SIGKILL grace.
    pub kill_grace: Duration,
    /// Where mutex locks live.
    pub lock_root: PathBuf,
}

/// Something that happened during a run, in order.
#[derive(Debug)]
pub enum RunEvent<'a> {
    /// The work-evidence line is decided.
    WorkEvidence(&'a WorkEvidenceReport),
    /// A gate attempt is starting (or waiting for its mutex).
    GateStarted {
        /// The gate id.
        id: &'a str,
        /// 1 or 2.
        attempt: u8,
    },
    /// A chunk of a running gate's output (stdout and stderr interleaved as written), for a
    /// consumer that keeps or shows all of it; the report keeps only the tail.
    GateOutput {
        /// The gate id.
        id: &'a str,
        /// 1 or 2.
        attempt: u8,
        /// The bytes, as the gate wrote them (not necessarily UTF-8, not line-aligned).
        bytes: &'a [u8],
    },
    /// A gate is decided.
    GateFinished(&'a GateReport),
}

/// Checks the `--gates` selection against the config before anything runs.
pub fn select_gates<'c>(
    config: &'c Config,
    only: Option<&[String]>,
) -> Result<Vec<&'c GateSpec>, Error> {
    let Some(only) = only else {
        return Ok(config.gates.iter().collect());
    };
    if only.is_empty() {
        return Err(Error::EmptyGateSelection);
    }
    for id in only {
        if !config.gates.iter().any(|g| &g.id == id) {
            let known = config
                .gates
                .iter()
                .map(|g| g.id.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(Error::UnknownGate {
                id: id.clone(),
                known,
            });
        }
    }
    Ok(config
        .gates
        .iter()
        .filter(|g| only.contains(&g.id))
        .collect())
}

/// Runs the selected gates of `config` and reports everything.
pub async fn run(
    config: &Config,
    options: &RunOptions,
    on_event: &mut dyn FnMut(RunEvent<'_>),
    interrupt: &mut InterruptWatch,
) -> Result<RunReport, Error> {
    if !options.cwd.is_dir() {
        return Err(Error::CwdNotADirectory {
            cwd: options.cwd.clone(),
        });
    }
    let selected = select_gates(config, options.only.as_deref())?;
    let checkout = evidence::probe_checkout(&options.cwd)?;
    let base_ref = evidence::resolve_base_ref(
        &options.cwd,
        options.base_ref.as_deref(),
        config.options.base_ref.as_deref(),
    )?;

    let mut report = RunReport {
        base_ref: base_ref.clone(),
        work_evidence: WorkEvidenceReport::Skip,
        primary_checkout: None,
        gates: Vec::new(),
        env_clean_skipped: false,
        result: None,
        interrupted: None,
        orphans_ended: exec::sweep_orphaned_gates(),
    };
    let require_commit = config.options.require_commit;
    if !options.skip_work_evidence {
        let found = evidence::work_evidence(&options.cwd, &base_ref)?;
        let no_work = found.commits == 0 && found.uncommitted == 0;
        let no_commit = require_commit && found.commits == 0;
        report.work_evidence = if no_work || no_commit {
            WorkEvidenceReport::Fail {
                evidence: found,
                require_commit,
            }
        } else {
            WorkEvidenceReport::Pass {
                evidence: found,
                require_commit,
            }
        };
        on_event(RunEvent::WorkEvidence(&report.work_evidence));
        if no_work || no_commit {
            report.result = Some(crate::report::RunResult::NotStarted);
            return Ok(report);
        }
    } else {
        // CommandMate refuses a base ref that names no commit even when nothing counts from it.
        evidence::verify_base_ref(&options.cwd, &base_ref)?;
        on_event(RunEvent::WorkEvidence(&report.work_evidence));
    }

    let primary = checkout.primary;
    report.primary_checkout = Some(primary);
    for gate in selected {
        let gate_report = if primary && config.options.skip_in_primary_checkout {
            skipped(gate, SkipReason::PrimaryCheckout)
        } else {
            match run_gate(gate, config, options, on_event, interrupt).await {
                Ok(r) => r,
                Err((signal, partial)) => {
                    report.gates.extend(partial);
                    report.interrupted = Some(signal);
                    return Ok(report);
                }
            }
        };
        on_event(RunEvent::GateFinished(&gate_report));
        report.gates.push(gate_report);
    }
    report.env_clean_skipped = config.options.require_env_clean;
    report.result = Some(decide(&report.gates));
    Ok(report)
}

fn skipped(gate: &GateSpec, reason: SkipReason) -> GateReport {
    GateReport {
        id: gate.id.clone(),
        command: gate.command.clone(),
        verdict: GateVerdict::Skip,
        passed: None,
        skip_reason: Some(reason),
        mutex: gate.mutex.clone(),
        timeout_sec: gate.timeout_sec,
        attempts: Vec::new(),
        retry_without_verdict: None,
    }
}

type Interrupted = (Interrupt, Option<GateReport>);

/// One gate with its optional retry. `Err` carries the interrupt and what was done so far; a
/// gate that cannot be started is a FAIL, never an error of the run.
async fn run_gate(
    gate: &GateSpec,
    config: &Config,
    options: &RunOptions,
    on_event: &mut dyn FnMut(RunEvent<'_>),
    interrupt: &mut InterruptWatch,
) -> Result<GateReport, Interrupted> {
    let mut report = skipped(gate, SkipReason::MutexWait);
    report.skip_reason = None;
    on_event(RunEvent::GateStarted {
        id: &gate.id,
        attempt: 1,
    });
    let first = match attempt(gate, config, options, 1, on_event, interrupt).await {
        Ok(a) => a,
        Err(signal) => return Err((signal, None)),
    };
    let first_status = first.status;
    report.attempts.push(first);
    match first_status {
        AttemptStatus::MutexSkip => {
            report.verdict = GateVerdict::Skip;
            report.skip_reason = Some(SkipReason::MutexWait);
            report.passed = None;
        }
        AttemptStatus::Pass => {
            report.verdict = GateVerdict::Pass;
            report.passed = Some(true);
        }
        AttemptStatus::Timeout => {
            report.verdict = GateVerdict::Timeout;
            report.passed = Some(false);
        }
        AttemptStatus::Fail if gate.retry_on_fail => {
            on_event(RunEvent::GateStarted {
                id: &gate.id,
                attempt: 2,
            });
            let second = match attempt(gate, config, options, 2, on_event, interrupt).await {
                Ok(a) => a,
                Err(signal) => {
                    report.verdict = GateVerdict::Fail;
                    report.passed = Some(false);
                    return Err((signal, Some(report)));
                }
            };
            match second.status {
                AttemptStatus::Pass => {
                    report.verdict = GateVerdict::Flaky;
                    report.passed = Some(gate.flaky_is_pass);
                    report.attempts.push(second);
                }
                AttemptStatus::Fail => {
                    report.verdict = GateVerdict::Fail;
                    report.passed = Some(false);
                    report.attempts.push(second);
                }
                other => {
                    // The retry judged nothing, so the first run's FAIL stands.
                    report.verdict = GateVerdict::Fail;
                    report.passed = Some(false);
                    report.retry_without_verdict = Some(other);
                }
            }
        }
        AttemptStatus::Fail => {
            report.verdict = GateVerdict::Fail;
            report.passed = Some(false);
        }
    }
    Ok(report)
}

/// A gate's output on its way to the capture, also handed to the run's consumer as it arrives.
struct Tee<'a, 'e> {
    capture: &'a mut Capture,
    id: &'a str,
    attempt: u8,
    on_event: &'a mut (dyn FnMut(RunEvent<'_>) + 'e),
}

impl OutputSink for Tee<'_, '_> {
    fn chunk(&mut self, bytes: &[u8]) {
        self.capture.chunk(bytes);
        (self.on_event)(RunEvent::GateOutput {
            id: self.id,
            attempt: self.attempt,
            bytes,
        });
    }
}

/// An attempt whose command could not be started: the gate's FAIL, never the run's end, so the
/// other gates' verdicts stand and nothing reads a gate that never ran as green. The reason is
/// the attempt's output too, as a shell-based runner would show the shell's own complaint.
fn cannot_start(mut attempt: Attempt, why: &Error) -> Attempt {
    let reason = why.to_string();
    attempt.status = AttemptStatus::Fail;
    attempt.exit_code = Some(CANNOT_START_EXIT);
    attempt.tail = format!("greenlight: {reason}\n");
    attempt.output_bytes = attempt.tail.len() as u64;
    attempt.start_error = Some(reason);
    attempt
}

/// One attempt: the mutex (if any), then the command. The lock is held for this attempt only.
async fn attempt(
    gate: &GateSpec,
    config: &Config,
    options: &RunOptions,
    number: u8,
    on_event: &mut dyn FnMut(RunEvent<'_>),
    interrupt: &mut InterruptWatch,
) -> Result<Attempt, Interrupt> {
    let budget = Duration::from_secs(u64::from(gate.timeout_sec));
    let mut result = Attempt {
        status: AttemptStatus::MutexSkip,
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
        ownerless_lock: None,
        digest: None,
        start_error: None,
    };
    let mut guard = None;
    if let Some(name) = &gate.mutex {
        let acquired = match lock::acquire(&options.lock_root, name, budget, interrupt).await {
            Ok(acquired) => acquired,
            Err(source) => {
                let why = Error::LockRoot {
                    root: options.lock_root.clone(),
                    source,
                };
                return Ok(cannot_start(result, &why));
            }
        };
        match acquired {
            Acquired::Held {
                guard: g,
                waited,
                broke_stale,
                reclaimed_ownerless,
            } => {
                result.waited = Some(waited);
                result.lock_path = Some(g.path().to_path_buf());
                result.broke_stale_lock = broke_stale;
                result.ownerless_lock = reclaimed_ownerless;
                guard = Some(g);
            }
            Acquired::GaveUp {
                path,
                waited,
                holder,
                ownerless,
            } => {
                result.waited = Some(waited);
                result.lock_path = Some(path);
                result.lock_holder = holder;
                result.ownerless_lock = ownerless;
                return Ok(result);
            }
            Acquired::Interrupted(signal) => return Err(signal),
        }
    }
    let spec = ExecSpec {
        command: &gate.command,
        cwd: &options.cwd,
        timeout: budget,
        kill_grace: options.kill_grace,
        tail_bytes: config.options.max_log_tail_bytes,
        extra_env: &[],
        // Gates run one at a time and nothing else here spawns meanwhile.
        claim_adopted: true,
    };
    let mut capture = Capture::new(0);
    let mut tee = Tee {
        capture: &mut capture,
        id: &gate.id,
        attempt: number,
        on_event,
    };
    let outcome = exec::run(&spec, &mut tee, interrupt).await;
    if let Some(guard) = guard {
        guard.release();
    }
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(source) => {
            let why = Error::Spawn {
                id: gate.id.clone(),
                source,
            };
            return Ok(cannot_start(result, &why));
        }
    };
    let digest_exit = match outcome.termination {
        Termination::Exited(code) => Some(code),
        _ => None, // killed: never a clean run, whatever the text says
    };
    result.digest = Some(capture.finish(digest_exit).1);
    result.duration = outcome.duration;
    result.tail = outcome.tail.text();
    result.output_bytes = outcome.tail.total_bytes();
    result.leftovers = outcome.leftovers;
    result.pipe_left_open = outcome.pipe_left_open;
    match outcome.termination {
        Termination::Exited(0) => {
            result.status = AttemptStatus::Pass;
            result.exit_code = Some(0);
        }
        Termination::Exited(code) => {
            result.status = AttemptStatus::Fail;
            result.exit_code = Some(code);
        }
        Termination::TimedOut => {
            result.status = AttemptStatus::Timeout;
            result.exit_code = Some(124);
        }
        Termination::Interrupted(signal) => return Err(signal),
    }
    Ok(result)
}
