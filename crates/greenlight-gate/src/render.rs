//! Renderers: the stdout line contract (CommandMate's grammar, byte for byte), the stderr
//! reason blocks, and the JSON document.
//!
//! Only `GATE …` and `RESULT …` lines are ever produced for stdout; everything a human needs to
//! act on goes to the stderr text, so stdout stays parseable.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::report::{
    Attempt, AttemptStatus, GateReport, GateVerdict, RemoteSource, RunReport, RunResult,
    WorkEvidenceReport,
};

fn secs(d: Duration) -> u64 {
    d.as_secs()
}

/// One decimal second, the spelling of the `[mutex]`/`[flaky]` markers.
fn marker_secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

fn waited_field(attempt: &Attempt) -> String {
    attempt
        .waited
        .map(|w| format!(" waited={}s", secs(w)))
        .unwrap_or_default()
}

/// The work-evidence line.
pub fn work_evidence_line(report: &WorkEvidenceReport) -> String {
    let (word, evidence, require_commit) = match report {
        WorkEvidenceReport::Skip => return "GATE work-evidence SKIP reason=flag".to_owned(),
        WorkEvidenceReport::Pass {
            evidence,
            require_commit,
        } => ("PASS", evidence, *require_commit),
        WorkEvidenceReport::Fail {
            evidence,
            require_commit,
        } => ("FAIL", evidence, *require_commit),
    };
    let flag = if require_commit {
        " requireCommit=true"
    } else {
        ""
    };
    format!(
        "GATE work-evidence {word} commits={} uncommitted={}{flag}",
        evidence.commits, evidence.uncommitted
    )
}

/// A gate's line.
pub fn gate_line(gate: &GateReport) -> String {
    let mut line = verdict_line(gate);
    if let Some(short) = gate.cached_short() {
        line.push_str(&format!(" cached={short}"));
    }
    if let Some(mark) = gate
        .remote
        .as_ref()
        .filter(|m| m.source == RemoteSource::Executed)
    {
        let on = mark
            .worker
            .as_deref()
            .filter(|w| !w.is_empty())
            .unwrap_or("cluster");
        line.push_str(&format!(" remote={}", on.replace(char::is_whitespace, "_")));
    }
    line
}

/// Why a gate was skipped as its line says it (`primary-checkout`, `needs:build`, …).
pub fn skip_reason(gate: &GateReport) -> String {
    match (gate.skip_reason, &gate.needs_failed) {
        (Some(crate::report::SkipReason::Needs), Some(id)) => format!("needs:{id}"),
        (reason, _) => reason.map(|r| r.as_str()).unwrap_or("unknown").to_owned(),
    }
}

fn verdict_line(gate: &GateReport) -> String {
    let id = &gate.id;
    let Some(first) = gate.attempts.first() else {
        let reason = skip_reason(gate);
        return format!("GATE {id} SKIP reason={reason}");
    };
    let waited = waited_field(first);
    let code = |a: &Attempt| a.exit_code.map(|c| c.to_string()).unwrap_or_default();
    match (gate.verdict, gate.attempts.as_slice()) {
        (GateVerdict::Skip, _) => {
            let reason = skip_reason(gate);
            format!("GATE {id} SKIP reason={reason}{waited}")
        }
        (GateVerdict::Flaky | GateVerdict::Fail, [a, b]) => {
            let word = if gate.verdict == GateVerdict::Flaky {
                "FLAKY"
            } else {
                "FAIL"
            };
            format!(
                "GATE {id} {word} exit={},{} duration={}s,{}s{waited}",
                code(a),
                code(b),
                secs(a.duration),
                secs(b.duration)
            )
        }
        (GateVerdict::Timeout, _) => format!(
            "GATE {id} TIMEOUT exit=124 duration={}s{waited}",
            secs(first.duration)
        ),
        (verdict, _) => {
            let word = if verdict == GateVerdict::Pass {
                "PASS"
            } else {
                "FAIL"
            };
            format!(
                "GATE {id} {word} exit={} duration={}s{waited}",
                code(first),
                secs(first.duration)
            )
        }
    }
}

/// The env-clean line, when `requireEnvClean` is set.
pub const ENV_CLEAN_LINE: &str = "GATE env-clean SKIP reason=no-baseline";

/// The final line.
pub fn result_line(result: RunResult) -> String {
    format!("RESULT {}", result.as_str())
}

/// The closing line for a person (stderr): the gates by verdict, red first, and how long the run
/// took: `2 gates: 1 red, 1 green in 1m17s`. `None` when no gate was decided (work-evidence
/// failed, the config was refused, or a signal ended the run).
pub fn summary_line(report: &RunReport, elapsed: Duration) -> Option<String> {
    if report.gates.is_empty() || report.interrupted.is_some() {
        return None;
    }
    let count = |verdict: GateVerdict| report.gates.iter().filter(|g| g.verdict == verdict).count();
    let parts: Vec<String> = [
        (GateVerdict::Fail, "red"),
        (GateVerdict::Timeout, "timed out"),
        (GateVerdict::Flaky, "flaky"),
        (GateVerdict::Skip, "skipped"),
        (GateVerdict::Pass, "green"),
    ]
    .into_iter()
    .filter_map(|(verdict, word)| {
        let n = count(verdict);
        (n > 0).then(|| format!("{n} {word}"))
    })
    .collect();
    let total = report.gates.len();
    let noun = if total == 1 { "gate" } else { "gates" };
    Some(format!(
        "{total} {noun}: {} in {}",
        parts.join(", "),
        summary_duration(elapsed)
    ))
}

/// `0.4s` under a minute, `1m17s` from there on.
fn summary_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 60 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}m{:02}s", secs / 60, secs % 60)
    }
}

/// Every stdout line of a finished run, in order.
pub fn stdout_lines(report: &RunReport) -> Vec<String> {
    let mut lines = vec![work_evidence_line(&report.work_evidence)];
    lines.extend(report.gates.iter().map(gate_line));
    if report.env_clean_skipped {
        lines.push(ENV_CLEAN_LINE.to_owned());
    }
    if let Some(result) = report.result {
        lines.push(result_line(result));
    }
    lines
}

/// What to show of an attempt's output: the digest when it explains the failure, else the
/// tail, else an explicit line saying why there is nothing.
fn output_block(out: &mut String, id: &str, label: &str, attempt: &Attempt, tail_limit: usize) {
    if tail_limit == 0 {
        let _ = writeln!(
            out,
            "--- gate {id} ({label}): log tail disabled (maxLogTailBytes=0) ---"
        );
        return;
    }
    if let Some(reason) = &attempt.start_error {
        let _ = writeln!(
            out,
            "--- gate {id} ({label}): its command could not be started ---"
        );
        let _ = writeln!(out, "greenlight: {reason}");
        let _ = writeln!(out, "--- end gate {id} ---");
        return;
    }
    if attempt.output_bytes == 0 {
        let _ = writeln!(out, "--- gate {id} ({label}): no output captured ---");
        return;
    }
    if let Some(compact) = compact_digest(attempt, tail_limit) {
        let _ = writeln!(
            out,
            "--- gate {id} ({label}): digest of {} bytes of output ---",
            attempt.output_bytes
        );
        out.push_str(&compact);
        if !compact.ends_with('\n') {
            out.push('\n');
        }
        let _ = writeln!(out, "--- end gate {id} ---");
        return;
    }
    // Never worse than the tail: what was parsed is named before it, marked not complete. The
    // names get a digest's least room: under a small maxLogTailBytes the "not complete" line
    // alone would leave none for a single name.
    if let Some(named) = named_failures(attempt, tail_limit.max(MIN_DIGEST_BUDGET)) {
        let _ = writeln!(
            out,
            "--- gate {id} ({label}): failures parsed from {} bytes of output ---",
            attempt.output_bytes
        );
        out.push_str(&named);
    }
    let shown = if attempt.output_bytes as usize > tail_limit {
        format!("last {tail_limit} of {} bytes", attempt.output_bytes)
    } else {
        format!("all {} bytes", attempt.output_bytes)
    };
    let _ = writeln!(out, "--- gate {id} ({label}): {shown} ---");
    out.push_str(&attempt.tail);
    if !attempt.tail.ends_with('\n') {
        out.push('\n');
    }
    let _ = writeln!(out, "--- end gate {id} ---");
}

/// The compact digest of a failed attempt, when the output was recognised completely and every
/// failure fits in the tail budget (all or nothing: a digest is never cut to fit).
pub fn compact_digest(attempt: &Attempt, budget: usize) -> Option<String> {
    let digest = attempt.digest.as_ref()?;
    if attempt.status == AttemptStatus::Pass
        || digest.classification != greenlight_digest::Classification::Recognised
    {
        return None;
    }
    digest.compact(budget.max(MIN_DIGEST_BUDGET))
}

/// The parsed failures of a failed attempt named within `budget` (see
/// [`greenlight_digest::Digest::named_failures`]), for when [`compact_digest`] gives nothing:
/// `None` when it passed, has no digest or nothing was parsed.
pub fn named_failures(attempt: &Attempt, budget: usize) -> Option<String> {
    let digest = attempt.digest.as_ref()?;
    if attempt.status == AttemptStatus::Pass {
        return None;
    }
    digest.named_failures(budget)
}

/// The least room a digest gets even under a small `maxLogTailBytes`: a digest is already the
/// short form, and a budget below a few lines would hide it behind a raw tail that says less.
pub const MIN_DIGEST_BUDGET: usize = 2048;

fn mutex_marker(out: &mut String, gate: &GateReport, attempt: &Attempt) {
    if let (Some(name), Some(waited)) = (&gate.mutex, attempt.waited) {
        let lock = attempt
            .lock_path
            .as_deref()
            .map(Path::display)
            .map(|d| d.to_string())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "[mutex] name={name} waited={} lock={lock}",
            marker_secs(waited)
        );
    }
}

fn spawn_hint(out: &mut String, gate: &GateReport, attempt: &Attempt, cwd: &Path) {
    if attempt.output_bytes == 0 && matches!(attempt.exit_code, Some(126 | 127)) {
        let code = attempt.exit_code.unwrap_or_default();
        let meaning = if code == 127 {
            "not found"
        } else {
            "found but not executable"
        };
        let _ = writeln!(
            out,
            "greenlight: gate {} exited {code} with no output: the command may not have started (it was probably {meaning}). Check that it exists and is executable in {}: {}",
            gate.id,
            cwd.display(),
            gate.command
        );
    }
}

fn leftovers_note(out: &mut String, gate: &GateReport, attempt: &Attempt) {
    if !attempt.leftovers.is_empty() && attempt.status == AttemptStatus::Timeout {
        let _ = writeln!(
            out,
            "greenlight: gate {} timed out; {} process(es) outlived SIGTERM and were killed at the end of the grace period:",
            gate.id,
            attempt.leftovers.len()
        );
        for p in &attempt.leftovers {
            let _ = writeln!(out, "  killed pid {} {}", p.pid, p.command);
        }
    } else if !attempt.leftovers.is_empty() {
        let _ = writeln!(
            out,
            "greenlight: gate {} left {} process(es) running after it ended; all were killed:",
            gate.id,
            attempt.leftovers.len()
        );
        for p in &attempt.leftovers {
            let how = if p.escaped {
                " (had escaped the gate's process group)"
            } else {
                ""
            };
            let _ = writeln!(out, "  leaked pid {} {}{how}", p.pid, p.command);
        }
    }
    if attempt.pipe_left_open {
        let _ = writeln!(
            out,
            "greenlight: gate {}'s output pipe stayed open after all its known processes ended; a process outside its reach may still hold it",
            gate.id
        );
    }
}

/// What greenlight did around a gate's attempts, a line each: processes it left and that were
/// killed, locks reclaimed or broken. Empty when there was nothing to say.
pub fn gate_notes(gate: &GateReport) -> String {
    let mut out = String::new();
    for attempt in &gate.attempts {
        leftovers_note(&mut out, gate, attempt);
        if let (Some(why), true) = (
            &attempt.ownerless_lock,
            attempt.status != AttemptStatus::MutexSkip,
        ) {
            let lock = attempt
                .lock_path
                .as_deref()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "greenlight: reclaimed the lock {lock}: {why}, and it was older than the gate's {}s timeout",
                gate.timeout_sec
            );
        }
        if let Some(stale) = &attempt.broke_stale_lock {
            let _ = writeln!(
                out,
                "greenlight: broke a stale lock (recorded holder pid {} on this host no longer exists)",
                stale.owner.pid
            );
            if !stale.ended.is_empty() {
                let _ = writeln!(
                    out,
                    "greenlight: first ended {} process(es) the dead holder pid {} had left running under the lock:",
                    stale.ended.len(),
                    stale.owner.pid
                );
                for p in &stale.ended {
                    let _ = writeln!(out, "  pid {} {}", p.pid, p.command);
                }
            }
        }
    }
    out
}

/// The stderr text for one finished gate (may be empty for a clean pass).
pub fn gate_stderr(gate: &GateReport, tail_limit: usize, cwd: &Path) -> String {
    let mut out = gate_notes(gate);
    let id = &gate.id;
    let Some(first) = gate.attempts.first() else {
        return out;
    };
    match gate.verdict {
        GateVerdict::Skip => {
            let _ = writeln!(out, "--- gate {id} (SKIP reason=mutex-wait) ---");
            mutex_marker(&mut out, gate, first);
            if let Some(holder) = &first.lock_holder {
                let _ = writeln!(out, "[mutex] held by pid {} on {}", holder.pid, holder.host);
            }
            if !first.lock_survivors.is_empty() {
                let _ = writeln!(
                    out,
                    "greenlight: the holder is dead, but {} process(es) it left under the lock would not end even on SIGKILL, so the lock was not taken:",
                    first.lock_survivors.len()
                );
                for p in &first.lock_survivors {
                    let _ = writeln!(out, "  pid {} {}", p.pid, p.command);
                }
            }
            if let Some(why) = &first.ownerless_lock {
                let _ = writeln!(
                    out,
                    "greenlight: the lock names no holder: {why}. greenlight reclaims such a lock once it is older than the gate's timeout ({}s, at least {}s); remove the directory by hand if no run holds it",
                    gate.timeout_sec,
                    crate::lock::OWNERLESS_MIN_AGE.as_secs()
                );
            }
            let _ = writeln!(
                out,
                "greenlight: gate {id} waits on mutex '{}', which stayed held for its whole {}s budget, so its command never started. This is a resource conflict, not a verdict on the work: re-run when the other run ends, or raise timeoutSec.",
                gate.mutex.as_deref().unwrap_or_default(),
                gate.timeout_sec
            );
            let _ = writeln!(out, "--- end gate {id} ---");
        }
        GateVerdict::Pass => mutex_marker(&mut out, gate, first),
        GateVerdict::Timeout => {
            mutex_marker(&mut out, gate, first);
            let label = format!("TIMEOUT after {}s", gate.timeout_sec);
            output_block(&mut out, id, &label, first, tail_limit);
        }
        GateVerdict::Flaky | GateVerdict::Fail if gate.attempts.len() == 2 => {
            let second = &gate.attempts[1];
            let outcome = if gate.verdict == GateVerdict::Flaky {
                "flaky"
            } else {
                "fail"
            };
            let verdict = if gate.passed == Some(true) {
                "pass"
            } else {
                "fail"
            };
            let word = if gate.verdict == GateVerdict::Flaky {
                "FLAKY"
            } else {
                "FAIL"
            };
            let code = |a: &Attempt| a.exit_code.unwrap_or_default();
            let _ = writeln!(
                out,
                "[flaky] runs=2 outcome={outcome} exit={},{} duration={},{} verdict={verdict}",
                code(first),
                code(second),
                marker_secs(first.duration),
                marker_secs(second.duration)
            );
            mutex_marker(&mut out, gate, first);
            let _ = writeln!(
                out,
                "--- [flaky] run 1/2: failed exit={} duration={} ---",
                code(first),
                marker_secs(first.duration)
            );
            output_block(
                &mut out,
                id,
                &format!("{word} run 1/2 exit={}", code(first)),
                first,
                tail_limit,
            );
            let passed = if second.status == AttemptStatus::Pass {
                "passed"
            } else {
                "failed"
            };
            let _ = writeln!(
                out,
                "--- [flaky] run 2/2: {passed} exit={} duration={} ---",
                code(second),
                marker_secs(second.duration)
            );
            output_block(
                &mut out,
                id,
                &format!("{word} run 2/2 exit={}", code(second)),
                second,
                tail_limit,
            );
            spawn_hint(&mut out, gate, second, cwd);
        }
        GateVerdict::Flaky | GateVerdict::Fail => {
            if let Some(status) = gate.retry_without_verdict {
                let what = match status {
                    AttemptStatus::Timeout => "timeout",
                    _ => "mutex-skip",
                };
                let _ = writeln!(
                    out,
                    "[flaky] retry reached no verdict ({what}); the first run's FAIL stands"
                );
            }
            mutex_marker(&mut out, gate, first);
            let code = first.exit_code.unwrap_or_default();
            output_block(
                &mut out,
                id,
                &format!("FAIL exit={code}"),
                first,
                tail_limit,
            );
            spawn_hint(&mut out, gate, first, cwd);
        }
    }
    out
}

/// What work-evidence is, said whenever it stops a run.
pub const WORK_EVIDENCE_MEANS: &str = "greenlight: work-evidence runs the gates only on work \
done here: a commit since the base ref, or an uncommitted change, other than CommandMate's \
contracts and greenlight's own files. Where the tree is clean by design (CI on a fresh checkout, \
a first try right after committing the config), pass --skip-work-evidence.";

/// The stderr explanation of a failed work-evidence line, if any.
pub fn work_evidence_stderr(report: &WorkEvidenceReport) -> Option<String> {
    let WorkEvidenceReport::Fail {
        evidence,
        require_commit,
    } = report
    else {
        return None;
    };
    if evidence.commits == 0 && evidence.uncommitted == 0 {
        let what = if evidence.any_status || evidence.commits_all > 0 {
            format!(
                "greenlight: the only changes here are execution contracts under {} (the \
                 orchestrator's evidence, not the agent's) or greenlight's own files ({}, \
                 *{}, greenlight's hook handlers in {}); none of them is work",
                crate::evidence::CONTRACT_DIR,
                crate::own_files::OWN_DIR,
                crate::own_files::BACKUP_SUFFIX,
                crate::own_files::HOOK_SETTINGS.join(", ")
            )
        } else {
            "greenlight: no commits since the base ref and no uncommitted changes: nothing was \
             done here yet, so no gate ran"
                .to_owned()
        };
        return Some(format!("{what}\n{WORK_EVIDENCE_MEANS}"));
    }
    if *require_commit {
        return Some(
            "greenlight: options.requireCommit is set: uncommitted changes are not work evidence, commit them.".to_owned(),
        );
    }
    None
}

/// The stderr note about gate processes of killed greenlight runs that this run ended.
pub fn orphans_stderr(report: &RunReport) -> Option<String> {
    orphans_note(&report.orphans_ended)
}

/// The note about gate processes of killed greenlight runs that the sweep every entry point
/// makes ([`crate::sweep_orphaned_gates`]) ended; `None` when it ended none.
pub fn orphans_note(ended: &[crate::exec::LeftoverProcess]) -> Option<String> {
    if ended.is_empty() {
        return None;
    }
    let mut out = format!(
        "greenlight: ended {} gate process(es) left running by an earlier greenlight that was killed before it could end them:\n",
        ended.len()
    );
    for p in ended {
        let _ = writeln!(out, "  pid {} {}", p.pid, p.command);
    }
    Some(out)
}

/// The stderr note naming the processes of this run that no one gate can be named for (the
/// warning says that nothing was cached because of them).
pub fn leftovers_stderr(report: &RunReport) -> Option<String> {
    if report.leftovers.is_empty() {
        return None;
    }
    let mut out = format!(
        "greenlight: {} process(es) were still running once every gate had ended; all were killed:\n",
        report.leftovers.len()
    );
    for p in &report.leftovers {
        let _ = writeln!(out, "  leaked pid {} {}", p.pid, p.command);
    }
    Some(out)
}

/// The stderr explanation of the env-clean line.
pub const ENV_CLEAN_NOTE: &str = "greenlight: options.requireEnvClean is set, but the env-clean gate needs the baseline snapshot CommandMate records at task creation; a run from a shell has none, so the gate is reported as SKIP and judged by nothing here. Run `commandmate verify` for its verdict.";

/// The JSON document of `--format json`.
pub fn json(report: &RunReport, config_path: &Path, cwd: &Path) -> serde_json::Value {
    serde_json::json!({
        "greenlight_version": env!("CARGO_PKG_VERSION"),
        "config": config_path,
        "cwd": cwd,
        "result": report.result,
        "exit_code": report.exit_code(),
        "interrupted": report.interrupted.map(|i| if i.exit_code() == 130 { "SIGINT" } else { "SIGTERM" }),
        "base_ref": report.base_ref,
        "work_evidence": report.work_evidence,
        "primary_checkout": report.primary_checkout,
        "gates": report.gates.iter().map(gate_json).collect::<Vec<_>>(),
        "env_clean": report.env_clean_skipped.then(|| serde_json::json!({"verdict": "SKIP", "reason": "no-baseline"})),
        "orphans_ended": report.orphans_ended,
        "leftovers": report.leftovers,
    })
}

fn gate_json(gate: &GateReport) -> serde_json::Value {
    serde_json::json!({
        "id": gate.id,
        "command": gate.command,
        "verdict": gate.verdict.word(),
        "passed": gate.passed,
        "skip_reason": gate.skip_reason,
        "exit_codes": gate.attempts.iter().filter(|a| a.status != AttemptStatus::MutexSkip).map(|a| a.exit_code).collect::<Vec<_>>(),
        "durations_ms": gate.attempts.iter().filter(|a| a.status != AttemptStatus::MutexSkip).map(|a| a.duration.as_millis() as u64).collect::<Vec<_>>(),
        "waited_ms": gate.attempts.first().and_then(|a| a.waited).map(|w| w.as_millis() as u64),
        "mutex": gate.mutex,
        "timeout_sec": gate.timeout_sec,
        "retry_without_verdict": gate.retry_without_verdict,
        "attempts": gate.attempts,
        "needs": gate.needs,
        "needs_failed": gate.needs_failed,
        "started_ms": gate.started_ms,
        "cached": gate.cached.is_some(),
        "cache_key": gate.cache_key,
        "explain": gate.explain,
        "remote": gate.remote,
    })
}

/// The one stderr line that ends a run which judged nothing (`not_started`, `skipped`): why,
/// and what to do about it. `None` for every other result.
pub fn result_hint(report: &RunReport, config: &Path, cwd: &Path) -> Option<String> {
    if report.interrupted.is_some() {
        return None;
    }
    match report.result? {
        RunResult::NotStarted => {
            let (evidence, require_commit) = match &report.work_evidence {
                WorkEvidenceReport::Fail {
                    evidence,
                    require_commit,
                } => (evidence, *require_commit),
                _ => return None,
            };
            let base = &report.base_ref;
            let (why, todo) = if require_commit && evidence.uncommitted > 0 {
                (
                    format!("no commit since {base}, and options.requireCommit is set"),
                    "commit the changes",
                )
            } else if evidence.any_status || evidence.commits_all > 0 {
                (
                    format!(
                        "only execution contracts or greenlight's own files changed since {base}"
                    ),
                    "change or commit the work itself",
                )
            } else {
                (
                    format!("no commit and no change since {base} in {}", cwd.display()),
                    "make a change or a commit",
                )
            };
            Some(format!(
                "greenlight: RESULT not_started ({why}): {todo}, or pass --skip-work-evidence to \
                 run the gates anyway"
            ))
        }
        RunResult::Skipped => {
            let primary = report
                .gates
                .iter()
                .any(|g| g.skip_reason == Some(crate::report::SkipReason::PrimaryCheckout));
            if primary {
                Some(format!(
                    "greenlight: RESULT skipped: {} is the primary checkout and \
                     skipInPrimaryCheckout is on, so no gate ran; run in a linked worktree \
                     (`git worktree add ../<name>`), or set `skipInPrimaryCheckout: false` under \
                     options: in {}",
                    cwd.display(),
                    config.display()
                ))
            } else {
                Some(
                    "greenlight: RESULT skipped: a gate reached no verdict because its mutex lock \
                     stayed held for its whole timeout; re-run when the other run ends, or raise \
                     that gate's timeoutSec"
                        .to_owned(),
                )
            }
        }
        RunResult::Passed | RunResult::Failed => None,
    }
}
