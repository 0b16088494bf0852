//! One gate, run for the goal loop: the same process-group and tail discipline as `verify`,
//! plus the workspace key that decides whether it needs to run at all.
//!
//! The rule that keeps the unchanged-workspace skip honest: the key is a hash of content (every
//! tracked and untracked-but-not-ignored file), the gate's command and its budget. Anything git
//! cannot answer makes the key unknown, and an unknown key always runs the gate.

use std::path::Path;
use std::time::Duration;

use greenlight_digest::Classification;
use greenlight_gate::{
    Attempt, AttemptStatus, Capture, ExecSpec, Interrupt, InterruptWatch, OutputSink, Termination,
    WorkspaceKey, workspace_key,
};

use crate::prompt::{self, EVIDENCE_OUTPUT_BYTES, OUTPUT_TAIL_BYTES, OutputEvidence};

/// The key a gate result is recorded under: content of the worktree + the gate's command and
/// budget. `None` when git could not say (then the gate runs).
pub fn result_key(worktree: &Path, command: &str, timeout_sec: u32) -> Option<String> {
    match workspace_key(worktree) {
        WorkspaceKey::Known(tree) => {
            let mut hasher = blake3::Hasher::new();
            for part in [tree.as_str(), command, &timeout_sec.to_string()] {
                hasher.update(part.as_bytes());
                hasher.update(&[0]);
            }
            Some(hasher.finalize().to_hex().to_string())
        }
        WorkspaceKey::Unknown { .. } => None,
    }
}

/// How one gate run ended.
#[derive(Debug)]
pub struct GateResult {
    /// Exit 0.
    pub passed: bool,
    /// Ran out of time.
    pub timed_out: bool,
    /// The run as `verify` reports an attempt: exit code (124 for a timeout), wall time, the
    /// tail of its output, how many bytes it wrote, and the digest of all of it.
    pub attempt: Attempt,
    /// What the agent gets to read about a failure.
    pub output: OutputEvidence,
    /// The digest in a few lines, when it recognised the output.
    pub compact: Option<String>,
    /// greenlight was interrupted while the gate ran (its processes are gone).
    pub interrupted: Option<Interrupt>,
    /// Nothing was left running and the output pipe closed: a result the cache may keep.
    pub clean: bool,
}

/// Both the capture and a live watcher see each chunk.
struct Tee<'a> {
    capture: &'a mut Capture,
    live: &'a mut dyn OutputSink,
}

impl OutputSink for Tee<'_> {
    fn chunk(&mut self, bytes: &[u8]) {
        self.capture.chunk(bytes);
        self.live.chunk(bytes);
    }
}

/// Runs `command` in `worktree` and turns its output into evidence; `live` sees the output as
/// it comes. `lock_root`: the scope of the orphaned-gate sweep (the run's lock root).
#[allow(clippy::too_many_arguments)]
pub async fn run_gate(
    worktree: &Path,
    command: &str,
    timeout: Duration,
    kill_grace: Duration,
    extra_env: &[(String, String)],
    lock_root: &Path,
    live: &mut dyn OutputSink,
    interrupt: &mut InterruptWatch,
) -> std::io::Result<GateResult> {
    let spec = ExecSpec {
        command,
        cwd: worktree,
        timeout,
        kill_grace,
        tail_bytes: OUTPUT_TAIL_BYTES,
        extra_env,
        lock_root,
        // The loop runs one thing at a time: the agent has finished before any gate starts.
        claim_adopted: true,
    };
    // No head: the evidence is the tail, as verify's (the digest still reads everything).
    let mut capture = Capture::new(0, command, Some(worktree));
    let mut tee = Tee {
        capture: &mut capture,
        live,
    };
    let outcome = greenlight_gate::run_gate(&spec, &mut tee, interrupt).await?;
    let (status, exit_code, interrupted) = match outcome.termination {
        Termination::Exited(0) => (AttemptStatus::Pass, Some(0), None),
        Termination::Exited(code) => (AttemptStatus::Fail, Some(code), None),
        Termination::TimedOut => (AttemptStatus::Timeout, Some(124), None),
        Termination::Interrupted(signal) => (AttemptStatus::Fail, None, Some(signal)),
    };
    let digest_exit = if status == AttemptStatus::Timeout {
        None
    } else {
        exit_code
    };
    let (_, digest) = capture.finish(digest_exit);
    let clean = outcome.leftovers.is_empty() && !outcome.pipe_left_open;
    let attempt = Attempt {
        exit_code,
        duration: outcome.duration,
        tail: outcome.tail.text(),
        output_bytes: outcome.tail.total_bytes(),
        digest: Some(digest),
        ..Attempt::blank(status)
    };
    Ok(GateResult {
        interrupted,
        clean,
        ..result_of(attempt)
    })
}

/// A gate's attempt as the loop's result: what the agent reads of a failure is
/// [`prompt::failure_output`], the rule every front end shows a failed gate by.
fn result_of(attempt: Attempt) -> GateResult {
    let compact = attempt
        .digest
        .as_ref()
        .filter(|d| d.classification == Classification::Recognised)
        .and_then(|d| d.compact(EVIDENCE_OUTPUT_BYTES));
    GateResult {
        passed: attempt.status == AttemptStatus::Pass,
        timed_out: attempt.status == AttemptStatus::Timeout,
        output: prompt::failure_output(&attempt),
        compact,
        interrupted: None,
        clean: attempt.start_error.is_none(),
        attempt,
    }
}

/// A gate the cluster ran (`run: remote`), as the loop's result: the same evidence a local run
/// of the same output gives.
pub(crate) fn remote_result(mut attempt: Attempt) -> GateResult {
    if attempt.digest.is_none() {
        let options = greenlight_digest::DigestOptions::default();
        attempt.digest = Some(greenlight_digest::digest(
            attempt.tail.as_bytes(),
            attempt.exit_code,
            &options,
        ));
    }
    result_of(attempt)
}
