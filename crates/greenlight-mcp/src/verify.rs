//! The `verify` tool: the same run as `greenlight verify` (same config reader, runner, verdicts,
//! recorded run), answered as structured evidence, with progress while gates run and a
//! cancellation that ends the gates' process groups exactly as Ctrl-C does.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use camino::Utf8PathBuf;
use greenlight_gate::{GateReport, RunEvent, RunReport, config, render};
use greenlight_proc::{Interrupt, InterruptWatch};
use greenlight_run::evidence::{self, Budget, Output, Shown};
use greenlight_run::{RecordAs, SessionOptions, VerifySession};
use greenlight_store::greenlight_stream::RunKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::evidence::Spool;
use crate::progress::Progress;

/// Arguments of `verify`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyArgs {
    /// The worktree the gates run in (absolute, or relative to the server's directory)
    /// [default: the server's working directory]. Its `.greenlight/verify.yaml` (else
    /// `.commandmate/verify.yaml`), there or above it, declares the gates.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Run only these gate ids (in the config's order).
    #[serde(default)]
    pub gates: Option<Vec<String>>,
    /// The ref work-evidence counts commits from; wins over the config's `baseRef`.
    #[serde(default)]
    pub base_ref: Option<String>,
    /// Do not check that work happened since the base ref before running gates.
    #[serde(default)]
    pub skip_work_evidence: bool,
    /// Run every gate even when a version 2 file's result cache holds its result for exactly
    /// this content, and store the fresh results.
    #[serde(default)]
    pub no_cache: bool,
    /// Say for each gate of a version 2 file why it ran (no stored result, or which inputs, env
    /// values or key outputs differ from the last one) or was replayed, in its `explain`.
    #[serde(default)]
    pub explain: bool,
}

/// What `verify` answers: the run's verdict and each gate's.
#[derive(Debug, Serialize, JsonSchema)]
pub struct VerifyOutput {
    /// `passed`, `failed`, `not_started` (work-evidence found no work), `skipped` (no gate
    /// reached a verdict) or `interrupted` (cancelled).
    pub result: String,
    /// The exit code `greenlight verify` would have exited with (0 only when every gate passed).
    pub exit_code: i32,
    /// The run's id: pass it to `evidence` to read a gate's whole output (`run-N` is also the
    /// run's page on `greenlight serve`'s dashboard).
    pub run_id: String,
    /// The work-evidence line (`GATE work-evidence PASS …`), when it was checked.
    pub work_evidence: Option<String>,
    /// Every selected gate in config order (gates not reached before a cancel are absent).
    pub gates: Vec<GateOutcome>,
    /// Problems that did not change any verdict (evidence not kept, run not recorded).
    pub warnings: Vec<String>,
}

/// One gate's verdict.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GateOutcome {
    /// The gate id.
    pub id: String,
    /// `PASS`, `FAIL`, `FLAKY`, `TIMEOUT` or `SKIP`.
    pub verdict: String,
    /// Whether it counts as passed (`null` when it reached no verdict).
    pub passed: Option<bool>,
    /// The last attempt's exit code (124 for a timeout; `null` when it never ran).
    pub exit_code: Option<i32>,
    /// Wall time of all its attempts, in milliseconds.
    pub duration_ms: u64,
    /// How many times it ran (2 after a retry).
    pub attempts: u8,
    /// Why it was skipped (`primary-checkout`, `mutex-wait`, `needs:<id>`, …).
    pub skip_reason: Option<String>,
    /// The result was replayed from the result cache (verify.yaml v2): nothing ran, and the
    /// duration is the original run's.
    pub cached: bool,
    /// Why it ran or was replayed from the result cache (only with the `explain` argument, for
    /// a version 2 file's gates).
    pub explain: Option<String>,
    /// Bytes it printed (last attempt).
    pub output_bytes: u64,
    /// The exact failures, when the output was recognised completely (a failing gate only).
    pub digest_compact: Option<String>,
    /// The failures parsed from its output, named, when there is no compact digest: ends with
    /// a line saying the list is not complete; `tail` follows it (a failing gate only).
    pub failures_named: Option<String>,
    /// The end of its output when there is no compact digest (a failing gate only).
    pub tail: Option<String>,
    /// Processes it left running, which greenlight killed.
    pub leftovers: u32,
}

/// Why `verify` could not run (the call answers with `isError` and these lines).
#[derive(Debug)]
pub struct CannotRun(pub Vec<String>);

/// The gate that is running, for the heartbeat.
#[derive(Clone)]
struct Running {
    /// Its number in the run (1-based).
    n: usize,
    id: String,
    attempt: u8,
    since: Instant,
}

/// Bytes of a failing gate's tail put in the answer when it has no compact digest.
const TAIL_IN_ANSWER: usize = 4096;

/// How often a running gate is reported while it runs: under every client's idle limit.
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// What a verify call needs from the server.
pub struct VerifyContext {
    /// The worktree, already checked to be a directory.
    pub cwd: PathBuf,
    /// The state database runs are recorded in (`None`: the default path).
    pub state: Option<PathBuf>,
    /// Where evidence is kept (`None`: not kept, with a warning).
    pub evidence_root: Option<PathBuf>,
    /// Progress notifications (a no-op without a progress token).
    pub progress: Progress,
    /// Fires when the call is cancelled or the server is told to stop.
    pub interrupt: InterruptWatch,
    /// How the gates reach a verify.yaml's remote cluster.
    pub remote: Option<greenlight_gate::RemoteSettings>,
    /// What the server's environment says.
    pub env: greenlight_run::RunEnv,
}

/// Runs the gates on a thread of its own (the gate runner's future stays on one thread), and
/// answers when they are done. `Err` when verify could not run at all.
/// `turn` (the server's one-verify-at-a-time guard) is held until the gates are done, even when
/// the call that started them is dropped.
pub async fn run_on_thread(
    args: VerifyArgs,
    turn: tokio::sync::OwnedMutexGuard<()>,
    ctx: VerifyContext,
) -> Result<VerifyOutput, CannotRun> {
    let thread = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CannotRun(vec![format!("cannot start the gates' runtime: {e}")]))?;
        runtime.block_on(run(&args, ctx))
    });
    match thread.await {
        Ok(outcome) => outcome,
        Err(e) => Err(CannotRun(vec![format!("the verify thread failed: {e}")])),
    }
}

/// Runs the gates. `Err` when verify could not run at all.
async fn run(args: &VerifyArgs, mut ctx: VerifyContext) -> Result<VerifyOutput, CannotRun> {
    let Some(found) = config::locate(&ctx.cwd) else {
        return Err(CannotRun(vec![format!(
            "no {} or {} in {} or above it in the worktree; write one (`greenlight init --write` drafts it) or pass the worktree that has one as `cwd`",
            config::Home::Greenlight.relative().display(),
            config::Home::CommandMate.relative().display(),
            ctx.cwd.display()
        )]));
    };
    let shadowed = found.shadow_warning();
    // The gates run where their file belongs, as `greenlight verify` runs them.
    ctx.cwd = found.root();
    let config_path = Utf8PathBuf::from_path_buf(found.path).map_err(|p| {
        CannotRun(vec![format!(
            "{}: the config path is not valid UTF-8; run verify in a worktree with a UTF-8 path",
            p.display()
        )])
    })?;
    let config = config::load_any(&config_path).map_err(|errors| {
        let mut lines: Vec<String> = errors.0.iter().map(|e| e.to_string()).collect();
        lines.push(format!(
            "{} problem(s) in the config; no gate ran",
            errors.0.len()
        ));
        CannotRun(lines)
    })?;
    let session = VerifySession::new(
        config,
        SessionOptions {
            base_ref: args.base_ref.clone(),
            only: args.gates.clone(),
            skip_work_evidence: args.skip_work_evidence,
            no_cache: args.no_cache,
            explain: args.explain,
            state: ctx.state.clone(),
            record: Some(RecordAs {
                kind: RunKind::Verify,
                worktree: ctx.cwd.clone(),
                how_to_turn_off: "set GREENLIGHT_NO_RECORD=1 in the server's environment to turn \
                                  recording off",
            }),
            remote: ctx.remote.clone(),
            ..SessionOptions::new(ctx.cwd.clone(), &ctx.env)
        },
    );
    let ids: Vec<String> = session
        .gates()
        .map_err(|e| CannotRun(vec![e.to_string()]))?
        .iter()
        .map(|g| g.id.clone())
        .collect();
    let total = ids.len();
    let mut warnings: Vec<String> = shadowed.into_iter().collect();
    let mut spool = match &ctx.evidence_root {
        Some(root) => match Spool::start(root, &ids) {
            Ok(spool) => Some(spool),
            Err(e) => {
                warnings.push(format!(
                    "cannot keep the gates' whole output ({e}); `evidence` has nothing for this run"
                ));
                None
            }
        },
        None => {
            warnings.push(
                "no state directory (set HOME, XDG_STATE_HOME or GREENLIGHT_STATE), so the gates' whole output is not kept for `evidence`".into(),
            );
            None
        }
    };

    let progress = ctx.progress;
    progress.send(format!("verify: {total} gate(s) in {}", ctx.cwd.display()));
    // Every gate running now (a v2 file runs several at once), in the order they started.
    let running: Arc<Mutex<Vec<Running>>> = Arc::new(Mutex::new(Vec::new()));
    let (beat_stop, mut beat_stopped) = watch::channel(false);
    let heartbeat = {
        let running = Arc::clone(&running);
        let progress = progress.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(HEARTBEAT) => {}
                    _ = beat_stopped.changed() => return,
                }
                let now = running.lock().map(|r| r.clone()).unwrap_or_default();
                for Running {
                    n,
                    id,
                    attempt,
                    since,
                } in now
                {
                    let retry = if attempt > 1 { " (retry)" } else { "" };
                    progress.send(format!(
                        "gate {n}/{total} {id}{retry}: running for {} s",
                        since.elapsed().as_secs()
                    ));
                }
            }
        })
    };

    let mut finished = 0usize;
    let mut on_event = |event: RunEvent<'_>| match event {
        RunEvent::WorkEvidence(we) => {
            progress.send(render::work_evidence_line(we));
        }
        RunEvent::GateStarted { id, attempt } => {
            let n = ids.iter().position(|g| g == id).map_or(0, |i| i + 1);
            if let Ok(mut slot) = running.lock() {
                slot.retain(|r| r.id != id);
                slot.push(Running {
                    n,
                    id: id.to_owned(),
                    attempt,
                    since: Instant::now(),
                });
            }
            let what = if attempt > 1 { "retrying" } else { "started" };
            progress.send(format!("gate {n}/{total} {id}: {what}"));
        }
        RunEvent::GateOutput { id, attempt, bytes } => {
            if let Some(spool) = spool.as_mut() {
                spool.chunk(id, attempt, bytes);
            }
        }
        RunEvent::GateFinished(gate) => {
            finished += 1;
            if let Ok(mut slot) = running.lock() {
                slot.retain(|r| r.id != gate.id);
            }
            let ms: u128 = gate.attempts.iter().map(|a| a.duration.as_millis()).sum();
            let how = match (gate.skip_reason, gate.cached_short()) {
                (Some(_), _) => format!("reason={}", render::skip_reason(gate)),
                (None, Some(key)) => format!("cached={key}"),
                (None, None) => format!("in {:.1} s", ms as f64 / 1000.0),
            };
            progress.send(format!(
                "gate {finished}/{total} {}: {} {how}",
                gate.id,
                gate.verdict.word(),
            ));
        }
    };
    let mut interrupt = ctx.interrupt;
    let ran = session.run(&mut on_event, &mut interrupt).await;
    let _ = beat_stop.send(true);
    let _ = heartbeat.await;
    let config = ran.config;
    let mut recording = ran.recording;
    let report: RunReport = match ran.report {
        Ok(report) => report,
        Err(e) => {
            recording.finish("error", greenlight_gate::exit::CONFIG_ERROR);
            // The runner's advice names the command line's flags; here they are arguments.
            let message = e
                .to_string()
                .replace("--base-ref", "the `base_ref` argument")
                .replace("--skip-work-evidence", "the `skip_work_evidence` argument");
            return Err(CannotRun(vec![message]));
        }
    };
    warnings.extend(report.warnings.iter().cloned());
    let exit_code = report.exit_code();
    let result_word = match (report.interrupted, report.result) {
        (Some(_), _) => "interrupted",
        (None, Some(result)) => result.as_str(),
        (None, None) => "failed",
    };
    let recorded = recording.finish(result_word, exit_code);
    warnings.extend(recorded.warning);
    let run_id = recorded.run.map(|id| id.stream().to_string());
    let run_id = run_id.unwrap_or_else(|| {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        format!("local-{ms}-{}", std::process::id())
    });
    if let Some(spool) = spool
        && let Some(e) = spool.finish(&run_id)
    {
        warnings.push(format!(
            "the gates' whole output was not kept completely ({e}); `evidence` may miss some"
        ));
    }
    let tail_limit = config.options.max_log_tail_bytes;
    Ok(VerifyOutput {
        result: result_word.to_owned(),
        exit_code,
        run_id,
        work_evidence: match report.work_evidence {
            greenlight_gate::WorkEvidenceReport::Skip => None,
            ref we => Some(render::work_evidence_line(we)),
        },
        gates: report
            .gates
            .iter()
            .map(|g| outcome(g, tail_limit))
            .collect(),
        warnings,
    })
}

fn outcome(gate: &GateReport, tail_limit: usize) -> GateOutcome {
    let last = gate.attempts.last();
    let budget = Budget {
        digest: tail_limit,
        digest_must_fit: false,
        tail: TAIL_IN_ANSWER,
        tail_from_line: false,
    };
    let shown = evidence::shown_attempt(gate, Shown::LastNonZero)
        .map(|attempt| evidence::attempt_output(attempt, budget));
    let (digest_compact, failures_named, tail) = match shown {
        Some(Output::Digest(compact)) => (Some(compact), None, None),
        Some(Output::Partial { named, tail }) => (None, Some(named), Some(tail)),
        Some(Output::Tail { text, .. }) if !text.is_empty() => (None, None, Some(text)),
        _ => (None, None, None),
    };
    GateOutcome {
        id: gate.id.clone(),
        verdict: gate.verdict.word().to_owned(),
        passed: gate.passed,
        exit_code: last.and_then(|a| a.exit_code),
        duration_ms: gate
            .attempts
            .iter()
            .map(|a| u64::try_from(a.duration.as_millis()).unwrap_or(u64::MAX))
            .sum(),
        attempts: u8::try_from(gate.attempts.len()).unwrap_or(u8::MAX),
        skip_reason: gate.skip_reason.map(|_| render::skip_reason(gate)),
        cached: gate.cached.is_some(),
        explain: gate.explain.clone(),
        output_bytes: last.map_or(0, |a| a.output_bytes),
        digest_compact,
        failures_named,
        tail,
        leftovers: u32::try_from(
            gate.attempts
                .iter()
                .map(|a| a.leftovers.len())
                .sum::<usize>(),
        )
        .unwrap_or(u32::MAX),
    }
}

/// The compact text of an answer, for clients that read only text: the line contract, then
/// each failing gate's digest or tail.
pub fn text(output: &VerifyOutput) -> String {
    let mut out = String::new();
    if let Some(line) = &output.work_evidence {
        out.push_str(line);
        out.push('\n');
    }
    for gate in &output.gates {
        let exit = gate
            .exit_code
            .map_or_else(|| "-".to_owned(), |c| c.to_string());
        let mut line = format!(
            "GATE {} {} exit={exit} duration_ms={}",
            gate.id, gate.verdict, gate.duration_ms
        );
        if let Some(reason) = &gate.skip_reason {
            line.push_str(&format!(" reason={reason}"));
        }
        if gate.cached {
            line.push_str(" cached=true");
        }
        out.push_str(&line);
        out.push('\n');
        if let Some(digest) = &gate.digest_compact {
            out.push_str(digest.trim_end());
            out.push('\n');
        } else if let Some(tail) = &gate.tail {
            if let Some(named) = &gate.failures_named {
                out.push_str(named);
            }
            out.push_str("--- output tail ---\n");
            out.push_str(tail.trim_end());
            out.push('\n');
        }
    }
    out.push_str(&format!(
        "RESULT {} exit={} run_id={}\n",
        output.result, output.exit_code, output.run_id
    ));
    for warning in &output.warnings {
        out.push_str(&format!("warning: {warning}\n"));
    }
    out
}

/// A watch that fires on the server's own signals, on its shutdown (its input ended), or on
/// this call's cancellation, which ends the gates as the Ctrl-C of `greenlight verify` does.
pub fn call_interrupt(
    mut signals: InterruptWatch,
    mut shutdown: InterruptWatch,
    cancelled: tokio_util::sync::CancellationToken,
) -> (InterruptWatch, tokio::task::JoinHandle<()>) {
    let now = signals.borrow().or(*shutdown.borrow());
    let (tx, rx) = watch::channel(now);
    let task = tokio::spawn(async move {
        tokio::select! {
            received = signals.wait_for(Option::is_some) => {
                if let Ok(received) = received {
                    let _ = tx.send(*received);
                }
            }
            received = shutdown.wait_for(Option::is_some) => {
                if let Ok(received) = received {
                    let _ = tx.send(*received);
                }
            }
            () = cancelled.cancelled() => {
                let _ = tx.send(Some(Interrupt::Int));
            }
        }
    });
    (rx, task)
}
