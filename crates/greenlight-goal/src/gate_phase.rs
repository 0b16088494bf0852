//! One gate, run for the goal loop: the same process-group and tail discipline as `verify`,
//! plus the workspace key that decides whether it needs to run at all.
//!
//! The rule that keeps the unchanged-workspace skip honest: the key is a hash of content (every
//! tracked and untracked-but-not-ignored file), the gate's command and its budget. Anything git
//! cannot answer makes the key unknown, and an unknown key always runs the gate.

use std::path::Path;
use std::time::Duration;

use greenlight_digest::{Classification, Digest};
use greenlight_gate::{
    Attempt, AttemptStatus, Capture, ExecSpec, Interrupt, InterruptWatch, OutputSink, Termination,
    WorkspaceKey, workspace_key,
};

use crate::prompt::{self, EVIDENCE_OUTPUT_BYTES, OutputEvidence};

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
    /// The exit code (124 for a timeout).
    pub exit_code: Option<i32>,
    /// Wall time of the command.
    pub duration: Duration,
    /// What the agent gets to read about it.
    pub output: OutputEvidence,
    /// The digest of the whole output.
    pub digest: Digest,
    /// The digest in a few lines, when it recognised the output.
    pub compact: Option<String>,
    /// greenlight was interrupted while the gate ran (its processes are gone).
    pub interrupted: Option<Interrupt>,
    /// The last bytes of output, as verify would show them (what the cache stores).
    pub tail: String,
    /// Bytes written in all.
    pub output_bytes: u64,
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
/// it comes.
pub async fn run_gate(
    worktree: &Path,
    command: &str,
    timeout: Duration,
    kill_grace: Duration,
    extra_env: &[(String, String)],
    live: &mut dyn OutputSink,
    interrupt: &mut InterruptWatch,
) -> std::io::Result<GateResult> {
    let spec = ExecSpec {
        command,
        cwd: worktree,
        timeout,
        kill_grace,
        tail_bytes: EVIDENCE_OUTPUT_BYTES,
        extra_env,
        // The loop runs one thing at a time: the agent has finished before any gate starts.
        claim_adopted: true,
    };
    let mut capture = Capture::new(EVIDENCE_OUTPUT_BYTES, command);
    let mut tee = Tee {
        capture: &mut capture,
        live,
    };
    let outcome = greenlight_gate::run_gate(&spec, &mut tee, interrupt).await?;
    let (exit_code, timed_out, interrupted) = match outcome.termination {
        Termination::Exited(code) => (Some(code), false, None),
        Termination::TimedOut => (Some(124), true, None),
        Termination::Interrupted(signal) => (None, false, Some(signal)),
    };
    let digest_exit = if timed_out { None } else { exit_code };
    let (head, digest) = capture.finish(digest_exit);
    let (compact, output) = evidence(
        &digest,
        exit_code,
        &head,
        &outcome.tail.text(),
        outcome.tail.total_bytes(),
    );
    Ok(GateResult {
        passed: exit_code == Some(0) && !timed_out,
        timed_out,
        exit_code,
        duration: outcome.duration,
        output,
        digest,
        compact,
        interrupted,
        tail: outcome.tail.text(),
        output_bytes: outcome.tail.total_bytes(),
        clean: outcome.leftovers.is_empty() && !outcome.pipe_left_open,
    })
}

/// What the agent reads of a gate's output: the compact digest of a failure when the output
/// was recognised, else an excerpt of head and tail.
fn evidence(
    digest: &Digest,
    exit_code: Option<i32>,
    head: &[u8],
    tail: &str,
    total: u64,
) -> (Option<String>, OutputEvidence) {
    let compact = (digest.classification == Classification::Recognised)
        .then(|| digest.compact(EVIDENCE_OUTPUT_BYTES))
        .flatten();
    let output = match compact.clone() {
        Some(text) if exit_code != Some(0) => OutputEvidence::Digest(text),
        _ => prompt::excerpt(head, tail, total, EVIDENCE_OUTPUT_BYTES),
    };
    (compact, output)
}

/// A gate the cluster ran (`run: remote`), as the loop's result: the same evidence a local run
/// of the same output gives. The tail stands in for the head (the cluster's output arrives
/// whole, and the tail holds all of it unless it was longer than the evidence budget).
pub(crate) fn result_of(attempt: &Attempt) -> GateResult {
    let timed_out = attempt.status == AttemptStatus::Timeout;
    let digest = attempt.digest.clone().unwrap_or_else(|| {
        let options = greenlight_digest::DigestOptions::default();
        greenlight_digest::digest(attempt.tail.as_bytes(), attempt.exit_code, &options)
    });
    let (compact, output) = evidence(
        &digest,
        attempt.exit_code,
        attempt.tail.as_bytes(),
        &attempt.tail,
        attempt.output_bytes,
    );
    GateResult {
        passed: attempt.status == AttemptStatus::Pass,
        timed_out,
        exit_code: attempt.exit_code,
        duration: attempt.duration,
        output,
        digest,
        compact,
        interrupted: None,
        tail: attempt.tail.clone(),
        output_bytes: attempt.output_bytes,
        clean: attempt.start_error.is_none(),
    }
}
