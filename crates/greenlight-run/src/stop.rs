//! The Stop hook: Claude Code's or Codex's Stop / SubagentStop payload in, one decision out
//! (allow the stop, or block it with the gates' evidence as the agent's next instruction); and
//! the SessionStart hook, which records the commit the session's work is counted from.
//!
//! The one rule that keeps it simple: **only red gates block, and nothing else ever does.** A
//! broken verify.yaml, a git or state-database failure, a run that judged nothing,
//! greenlight's own block cap: every one of these allows the stop and says why in
//! `systemMessage`, so a misconfiguration can cost a user a message but never trap an agent.
//!
//! The pieces, from pure to impure: [`parse_payload`] (bytes → [`Payload`]), [`judge`] (a
//! finished [`RunReport`] → green / red with its evidence / no verdict), [`cap_step`] (how many
//! blocks so far → block again or give up), and [`run`], which finds the config, runs the gates
//! through `greenlight_gate::run` and keeps the per-session count in greenlight's state
//! database.
//!
//! Decisions that differ from `greenlight verify` (written in docs/integrations/claude-code.md):
//! - work-evidence decides only whether there is anything to judge, counted from the session's
//!   base (recorded once per session and worktree, at SessionStart or else at the first Stop,
//!   so a push and fetch cannot move it): no commits since it and no uncommitted changes allows
//!   the stop without running a gate, unless the session's last stop was blocked red; with no
//!   record, the gates run. `requireCommit` is not applied (an agent that has not committed
//!   yet is asked to fix its gates, not to commit);
//! - no verify.yaml allows the stop silently: a user-level hook fires in every repository;
//! - `skipInPrimaryCheckout` is not applied: the hook fires in the checkout the agent is working
//!   in, so that checkout is the one to judge, primary or not.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use camino::Utf8PathBuf;
use greenlight_gate::config::Snapshot;
use greenlight_gate::status::SharedStatus;
use greenlight_gate::{
    Attempt, GateReport, GateVerdict, InterruptWatch, RunEvent, RunReport, RunResult, config,
    render, resolve_base_ref, verify_base_ref, work_evidence,
};
use greenlight_store::greenlight_stream::RunKind;
use greenlight_store::{Reads as _, Store};
use serde::Deserialize;

use crate::Error;
use crate::evidence::{self, Budget, Output, Shown, cut_to};
use crate::session::{RecordAs, SessionOptions, VerifySession};

/// greenlight's own limit on consecutive blocks for one session. Claude Code ends the turn
/// anyway after 8 consecutive blocks (field notes §4); greenlight gives up first, with a
/// message that says the gates are still red, instead of leaving the ending to the agent.
pub const DEFAULT_MAX_BLOCKS: u32 = 5;

/// Bytes of evidence in one block reason: the default `maxLogTailBytes` of verify.yaml, so one
/// failing gate's evidence here is what `greenlight verify` shows for it on stderr, and a reason
/// never crowds the agent's context on every blocked stop.
pub const REASON_BUDGET: usize = 8192;

/// The least room one failing gate gets when several share the budget: a few lines of digest
/// or tail say more than a per-gate slice too thin to show one failure.
const MIN_GATE_BUDGET: usize = 640;

/// Hook sessions untouched for this long are forgotten (their count can only matter to a
/// session that is still running).
const SESSION_TTL_MS: i64 = 30 * 24 * 60 * 60 * 1000;

/// How many config problems `systemMessage` lists before saying how many more there are.
const MAX_CONFIG_ERRORS_SHOWN: usize = 5;

/// The Stop / SubagentStop payload both agents send on stdin. Unknown fields are ignored and
/// every field may be missing: the agents add fields between versions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Payload {
    /// The agent session; the block cap is counted per session.
    pub session_id: Option<String>,
    /// The directory the session runs in [default: the hook's own working directory].
    pub cwd: Option<PathBuf>,
    /// `Stop` or `SubagentStop`.
    pub hook_event_name: Option<String>,
    /// True when the agent is already continuing because a Stop hook blocked. Recorded only:
    /// greenlight keeps its own count rather than trusting the agent's.
    pub stop_hook_active: Option<bool>,
    /// The agent's final message of the turn (unused; accepted so the shape is documented).
    pub last_assistant_message: Option<String>,
    /// Claude Code: the subagent that is stopping (SubagentStop).
    pub agent_id: Option<String>,
    /// Codex: the turn that is ending.
    pub turn_id: Option<String>,
    /// Codex: the model of the turn.
    pub model: Option<String>,
    /// Both agents: the transcript file.
    pub transcript_path: Option<String>,
    /// SessionStart: `startup`, `resume`, `clear` or `compact` (recorded only).
    pub source: Option<String>,
}

impl Payload {
    /// The key the block count is kept under: the session id, and for a subagent the subagent
    /// too, so a subagent's blocks do not use up its parent's. Without a session id, the
    /// directory stands in (a count per directory is still a bound).
    pub fn session_key(&self, cwd: &Path) -> String {
        let base = match self.session_id.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => id.to_owned(),
            None => format!("cwd:{}", cwd.display()),
        };
        if self.hook_event_name.as_deref() == Some("SubagentStop") {
            format!(
                "{base}/subagent/{}",
                self.agent_id.as_deref().unwrap_or_default()
            )
        } else {
            base
        }
    }

    /// The key the session's base commit is kept under: the session id (a subagent shares its
    /// session's base), or the directory when there is none.
    pub fn base_key(&self, cwd: &Path) -> String {
        match self.session_id.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => id.to_owned(),
            None => format!("cwd:{}", cwd.display()),
        }
    }
}

/// Reads the hook payload. Bytes that are not UTF-8 are replaced, never dropped; anything that
/// is not one JSON object of the expected field types is refused.
pub fn parse_payload(bytes: &[u8]) -> Result<Payload, Error> {
    let text = String::from_utf8_lossy(bytes);
    if text.trim().is_empty() {
        return Err(Error::HookPayload {
            detail: "stdin is empty".to_owned(),
        });
    }
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::HookPayload {
        detail: format!("not JSON: {e}"),
    })?;
    if !value.is_object() {
        return Err(Error::HookPayload {
            detail: format!("expected a JSON object, found {}", json_kind(&value)),
        });
    }
    serde_json::from_value(value).map_err(|e| Error::HookPayload {
        detail: e.to_string(),
    })
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// What the hook answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Let the agent stop, optionally telling the user something.
    Allow {
        /// Shown to the user by the agent (never to the model).
        system_message: Option<String>,
    },
    /// Keep the agent working; `reason` becomes its next instruction.
    Block {
        /// The gates' evidence.
        reason: String,
    },
}

impl Decision {
    /// The one JSON object for stdout, or `None` when nothing needs saying (a silent allow).
    pub fn to_json(&self) -> Option<String> {
        let value = match self {
            Decision::Allow {
                system_message: None,
            } => return None,
            Decision::Allow {
                system_message: Some(message),
            } => serde_json::json!({ "systemMessage": message }),
            Decision::Block { reason } => {
                serde_json::json!({ "decision": "block", "reason": reason })
            }
        };
        Some(value.to_string())
    }

    fn allow_saying(message: String) -> Self {
        Decision::Allow {
            system_message: Some(message),
        }
    }
}

/// What [`judge`] makes of a finished run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// Every gate that ran passed.
    Green,
    /// At least one gate counts as failed.
    Red {
        /// The failing gate ids, in config order.
        failing: Vec<String>,
        /// The evidence, within the budget.
        evidence: String,
    },
    /// Nothing was judged (every gate skipped, or the run was interrupted).
    NoVerdict {
        /// Why, for `systemMessage`.
        why: String,
    },
}

/// Judges a finished run: pure, so every answer the hook can give is testable without a repo.
pub fn judge(report: &RunReport, root: &Path, budget: usize) -> Judged {
    if report.interrupted.is_some() {
        return Judged::NoVerdict {
            why: "the gate run was interrupted by a signal before it finished".to_owned(),
        };
    }
    match report.result {
        Some(RunResult::Passed) => Judged::Green,
        Some(RunResult::Failed) => {
            let failing: Vec<&GateReport> = report
                .gates
                .iter()
                .filter(|g| g.passed == Some(false))
                .collect();
            Judged::Red {
                failing: failing.iter().map(|g| g.id.clone()).collect(),
                evidence: evidence(report, &failing, root, budget),
            }
        }
        _ => {
            let skipped: Vec<String> = report
                .gates
                .iter()
                .filter(|g| g.passed.is_none())
                .map(render::gate_line)
                .collect();
            Judged::NoVerdict {
                why: if skipped.is_empty() {
                    "no gate reached a verdict".to_owned()
                } else {
                    format!("no gate reached a verdict ({})", skipped.join("; "))
                },
            }
        }
    }
}

/// The block reason: which gates failed, their commands and exit codes, and for each its
/// compact digest when the output was recognised, else a bounded tail; never over `budget`.
pub fn evidence(report: &RunReport, failing: &[&GateReport], root: &Path, budget: usize) -> String {
    let mut out = String::new();
    let ids: Vec<&str> = failing.iter().map(|g| g.id.as_str()).collect();
    let _ = writeln!(
        out,
        "greenlight: {} of {} gates are red ({}). Fix what they report below, then finish again; \
         `greenlight verify` in {} shows the same.",
        failing.len(),
        report.gates.len(),
        ids.join(", "),
        root.display()
    );
    for g in report.gates.iter().filter(|g| g.passed.is_none()) {
        let _ = writeln!(out, "(not judged: {})", render::gate_line(g));
    }
    let per_gate = (budget.saturating_sub(out.len()) / failing.len().max(1)).max(MIN_GATE_BUDGET);
    for gate in failing {
        out.push('\n');
        out.push_str(&gate_evidence(gate, per_gate));
    }
    cut_to(out, budget)
}

fn gate_evidence(gate: &GateReport, budget: usize) -> String {
    let mut out = String::new();
    let code = |a: &Attempt| {
        a.exit_code
            .map(|c| c.to_string())
            .unwrap_or_else(|| "none".to_owned())
    };
    let shown = evidence::shown_attempt(gate, Shown::Deciding);
    let Some(attempt) = shown else {
        let _ = writeln!(out, "gate {} {}", gate.id, render::gate_line(gate));
        return out;
    };
    let what = match gate.verdict {
        GateVerdict::Timeout => format!("TIMEOUT after {}s (exit 124)", gate.timeout_sec),
        GateVerdict::Flaky => format!(
            "FLAKY: failed (exit {}), then passed on its retry; a flaky gate counts as red \
             unless the gate sets flakyIsPass",
            code(attempt)
        ),
        _ if gate.attempts.len() == 2 => format!(
            "FAIL exit={} (and exit={} on its retry)",
            code(&gate.attempts[0]),
            code(attempt)
        ),
        _ => format!("FAIL exit={}", code(attempt)),
    };
    let _ = writeln!(out, "gate {}: {what}", gate.id);
    let _ = writeln!(out, "command: {}", gate.command);
    let room = budget.saturating_sub(out.len());
    let budget = Budget {
        digest: room,
        digest_must_fit: true,
        // Room for the line that says how much of the output this is.
        tail: room.saturating_sub(64),
        tail_from_line: true,
    };
    match evidence::attempt_output(attempt, budget) {
        Output::Nothing => {
            let _ = writeln!(out, "(no output)");
        }
        Output::Digest(compact) => {
            out.push_str(&compact);
            if !compact.ends_with('\n') {
                out.push('\n');
            }
        }
        Output::Partial { named, tail } => {
            out.push_str(&named);
            tail_block(&mut out, &tail, attempt.output_bytes);
        }
        Output::Tail { text, .. } => tail_block(&mut out, &text, attempt.output_bytes),
    }
    out
}

/// The end of the output, under a line saying how much of it this is.
fn tail_block(out: &mut String, tail: &str, total: u64) {
    let _ = writeln!(out, "last {} of {total} bytes of output:", tail.len());
    out.push_str(tail);
    if !tail.ends_with('\n') {
        out.push('\n');
    }
}

/// One step of the consecutive-block cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapStep {
    /// Block; this is block number `nth` in a row.
    Block {
        /// 1-based.
        nth: u32,
    },
    /// The cap is reached: allow the stop and start counting afresh.
    GiveUp {
        /// Blocks in a row before this stop.
        blocked: u32,
    },
}

/// Decides whether a red run blocks again, from the blocks already made in a row.
pub fn cap_step(blocks_so_far: u32, max_blocks: u32) -> CapStep {
    if blocks_so_far >= max_blocks {
        CapStep::GiveUp {
            blocked: blocks_so_far,
        }
    } else {
        CapStep::Block {
            nth: blocks_so_far + 1,
        }
    }
}

/// What the command line passes to [`run`].
#[derive(Debug, Clone)]
pub struct StopOptions {
    /// The consecutive-block cap (0: never block, only report).
    pub max_blocks: u32,
    /// The state database; `None` means the environment's default.
    pub state_path: Option<PathBuf>,
    /// What the process environment says (the gates' grace and lock root among it).
    pub env: crate::RunEnv,
    /// Bytes of evidence in a block reason.
    pub reason_budget: usize,
    /// How the gates reach a verify.yaml's remote cluster.
    pub remote: Option<greenlight_gate::RemoteSettings>,
}

/// The hook's answer plus the lines it wants on stderr (for the agent's debug log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopOutcome {
    /// What to tell the agent.
    pub decision: Decision,
    /// Human notes for stderr, one per line.
    pub notes: Vec<String>,
}

impl StopOutcome {
    fn allow_saying(message: String) -> Self {
        StopOutcome {
            notes: vec![message.clone()],
            decision: Decision::allow_saying(message),
        }
    }
}

/// Runs the hook: config, gates, cap. Never fails: every problem becomes an allowed stop that
/// says what is wrong.
pub async fn run(
    payload: &Payload,
    options: &StopOptions,
    interrupt: &mut InterruptWatch,
) -> StopOutcome {
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let cwd = match &payload.cwd {
        Some(cwd) => here.join(cwd),
        None => here,
    };
    let mut notes = Vec::new();
    let (root, mut config) = match session_config(payload, &cwd, options, &mut notes) {
        Ok(found) => found,
        Err(outcome) => return outcome,
    };

    // Is there anything to judge? HEAD must name a commit for the runner at all.
    if verify_base_ref(&root, "HEAD").is_err() {
        return StopOutcome::allow_saying(format!(
            "greenlight: {} has no commit yet, so the gates cannot run; commit once and the next \
             stop will be judged",
            root.display()
        ));
    }
    // Work is counted from the base recorded when the session began (SessionStart, else its
    // first Stop), never from the base ref as it is now: an agent that pushes its commits and
    // fetches would otherwise move the base past its own work and be let go unjudged.
    let top = greenlight_install::settings_file::project_root(&root);
    let key = payload.base_key(&cwd);
    match with_store(options, |store| store.hook_base(&key, &top)) {
        Ok(Some(base)) => match work_evidence(&root, &base, &SharedStatus::start(&root)) {
            // A session whose last stop was blocked red is judged again even with nothing new
            // to count: its red gates are still its own.
            Ok(found)
                if found.commits == 0
                    && found.uncommitted == 0
                    && with_store(options, |store| {
                        store.hook_blocks(&payload.session_key(&cwd))
                    })
                    .map_or(true, |blocks| blocks == 0) =>
            {
                return StopOutcome {
                    decision: Decision::Allow {
                        system_message: None,
                    },
                    notes: vec![format!(
                        "greenlight: no commits since {} (where this session began) and no \
                         uncommitted changes in {}: nothing to judge, no gate ran",
                        short(&base),
                        root.display()
                    )],
                };
            }
            Ok(_) => {}
            Err(e) => notes.push(format!(
                "greenlight: cannot count work since {} ({e}); running the gates anyway",
                short(&base)
            )),
        },
        Ok(None) => {
            let recorded = session_base(&root, config.options.base_ref.as_deref()).map(|base| {
                with_store(options, |store| {
                    store.write(|tx| {
                        let recorded = tx.hook_record_base(&key, &top, &base)?;
                        tx.prune_hook_bases(tx.now() - SESSION_TTL_MS)?;
                        Ok(recorded)
                    })
                })
            });
            let what = match recorded {
                Some(Ok(base)) => format!("recorded {} as its base now", short(&base)),
                Some(Err(e)) => format!("and it cannot be recorded ({e})"),
                None => "and none can be found".to_owned(),
            };
            notes.push(format!(
                "greenlight: no base commit was recorded when this session began (no SessionStart \
                 hook ran) {what}; greenlight cannot tell what the session changed, so the gates \
                 run on HEAD"
            ));
        }
        Err(e) => notes.push(format!(
            "greenlight: cannot read this session's base from the state database ({e}); running \
             the gates on HEAD"
        )),
    }

    config.options.skip_in_primary_checkout = false;
    let session = VerifySession::new(
        config,
        SessionOptions {
            base_ref: Some("HEAD".to_owned()),
            skip_work_evidence: true,
            state: options.state_path.clone(),
            record: Some(RecordAs {
                kind: RunKind::Hook,
                worktree: root.clone(),
                how_to_turn_off: "set GREENLIGHT_NO_RECORD=1 in the agent's environment to turn \
                                  recording off",
            }),
            remote: options.remote.clone(),
            // The hook replays what verify stored: a gate whose key is unchanged is not re-run.
            ..SessionOptions::new(root.clone(), &options.env)
        },
    );
    let ran = session.run(&mut |_: RunEvent<'_>| {}, interrupt).await;
    let mut recording = ran.recording;
    let report = match ran.report {
        Ok(report) => report,
        Err(e) => {
            notes.extend(recording.finish("error", 0).warning);
            let mut outcome = StopOutcome::allow_saying(format!(
                "greenlight: could not run the gates ({e}); letting the agent stop"
            ));
            notes.append(&mut outcome.notes);
            outcome.notes = notes;
            return outcome;
        }
    };
    notes.extend(
        report
            .gates
            .iter()
            .map(render::gate_line)
            .chain(report.result.map(render::result_line)),
    );
    // What verify would print on stderr beside its gate lines: a cache turned off, a result not
    // stored, processes ended. The hook's stderr is the only place a user can see them.
    notes.extend(report.warnings.iter().cloned());
    notes.extend(
        report
            .gates
            .iter()
            .map(render::gate_notes)
            .chain(render::orphans_stderr(&report))
            .chain(render::leftovers_stderr(&report))
            .filter(|note| !note.is_empty())
            .map(|note| note.trim_end().to_owned()),
    );

    let key = payload.session_key(&cwd);
    let judged = judge(&report, &root, options.reason_budget);
    let outcome = match judged {
        Judged::Green => {
            if let Err(e) = with_store(options, |store| {
                store.write(|tx| {
                    tx.hook_reset(&key)?;
                    tx.prune_hook_sessions(tx.now() - SESSION_TTL_MS)
                })
            }) {
                notes.push(format!(
                    "greenlight: the gates are green, but the block count could not be reset: {e}"
                ));
            }
            Decision::Allow {
                system_message: None,
            }
        }
        Judged::NoVerdict { why } => Decision::allow_saying(format!(
            "greenlight: {why}; the gates are not green, but nothing was judged, so the agent may \
             stop"
        )),
        Judged::Red { failing, evidence } => {
            let max = options.max_blocks;
            let step = with_store(options, |store| {
                store.write(|tx| {
                    let so_far = tx.hook_blocks(&key)?;
                    let step = cap_step(so_far, max);
                    match step {
                        CapStep::Block { .. } => {
                            tx.hook_block(&key)?;
                        }
                        CapStep::GiveUp { .. } => tx.hook_reset(&key)?,
                    }
                    tx.prune_hook_sessions(tx.now() - SESSION_TTL_MS)?;
                    Ok::<_, greenlight_store::Error>(step)
                })
            });
            let ids = failing.join(", ");
            match step {
                Ok(CapStep::Block { nth }) => Decision::Block {
                    reason: format!(
                        "{evidence}\n(greenlight block {nth} of at most {max} in a row for this \
                         session)"
                    ),
                },
                Ok(CapStep::GiveUp { blocked }) => Decision::allow_saying(format!(
                    "greenlight: the gates are still red ({ids}) after {blocked} blocks in a row; \
                     letting the agent stop. Run `greenlight verify` in {} to see them.",
                    root.display()
                )),
                Err(e) => Decision::allow_saying(format!(
                    "greenlight: the gates are red ({ids}), but the block count cannot be kept \
                     ({e}), so greenlight lets the agent stop rather than risk trapping it. Run \
                     `greenlight verify` in {} to see them.",
                    root.display()
                )),
            }
        }
    };
    let word = if matches!(outcome, Decision::Block { .. }) {
        "block"
    } else {
        "allow"
    };
    notes.extend(recording.finish(word, 0).warning);
    if let Decision::Allow {
        system_message: Some(m),
    } = &outcome
    {
        notes.push(m.clone());
    }
    StopOutcome {
        decision: outcome,
        notes,
    }
}

/// The verify.yaml this session is judged by, and the worktree it belongs to: the snapshot
/// recorded when the session began (at SessionStart, else at its first Stop), never the file as
/// the agent may have rewritten it since; without a record, the file as it is now, recorded
/// for the rest of the session. `Err`: the stop is allowed (no file, or a broken one).
fn session_config(
    payload: &Payload,
    cwd: &Path,
    options: &StopOptions,
    notes: &mut Vec<String>,
) -> Result<(PathBuf, config::Loaded), StopOutcome> {
    let top = greenlight_install::settings_file::project_root(cwd);
    let key = payload.base_key(cwd);
    // Only a state database that exists can hold a record: a user-level hook in a repository
    // without gates must not create one on every stop.
    let state_exists = options
        .env
        .state_path(options.state_path.as_deref())
        .is_ok_and(|path| path.exists());
    let recorded = state_exists
        .then(|| with_store(options, |store| store.hook_config(&key, &top)).ok())
        .flatten()
        .flatten()
        .and_then(|json| Snapshot::from_json(&json));
    if let Some(snapshot) = recorded {
        match snapshot.load() {
            Ok(config) => {
                let path = Utf8PathBuf::from(&snapshot.path);
                if config::read_text(&path).ok().as_deref() != Some(snapshot.text.as_str()) {
                    notes.push(format!(
                        "greenlight: {path} changed since this session began (or is gone); the \
                         gates are judged as the file declared them then (a new session reads \
                         it again)"
                    ));
                }
                return Ok((root_of(path.as_std_path(), cwd), config));
            }
            Err(errors) => notes.push(format!(
                "greenlight: the verify.yaml recorded when this session began cannot be read \
                 back ({errors}); reading the file as it is now"
            )),
        }
    }
    let Some(found) = config::locate(cwd) else {
        // Silent: a user-level hook fires in every repository, and most have no gates to run.
        return Err(StopOutcome {
            decision: Decision::Allow {
                system_message: None,
            },
            notes: vec![format!(
                "greenlight: no {} or {} in {} or above it in the worktree, so no gate ran \
                 (`greenlight init --write` drafts one)",
                config::Home::Greenlight.relative().display(),
                config::Home::CommandMate.relative().display(),
                cwd.display()
            )],
        });
    };
    notes.extend(found.shadow_warning());
    let root = found.root();
    let config_path = found.path;
    let config_path = Utf8PathBuf::from_path_buf(config_path).map_err(|p| {
        StopOutcome::allow_saying(format!(
            "greenlight: {}: the path is not valid UTF-8, so the gates cannot be read; no gate ran",
            p.display()
        ))
    })?;
    let (snapshot, config) = Snapshot::take(&config_path).map_err(|errors| {
        let shown: Vec<String> = errors
            .iter()
            .take(MAX_CONFIG_ERRORS_SHOWN)
            .map(|e| e.to_string())
            .collect();
        let more = errors.len().saturating_sub(shown.len());
        let more = if more > 0 {
            format!("\n(and {more} more; run `greenlight verify` to see all)")
        } else {
            String::new()
        };
        StopOutcome::allow_saying(format!(
            "greenlight: the verify.yaml is broken, so no gate ran; fix it and the next stop \
             will be judged:\n{}{more}",
            shown.join("\n")
        ))
    })?;
    // From now on this session is judged by the file as it is now.
    let json = snapshot.to_json();
    let recorded = with_store(options, |store| {
        store.write(|tx| tx.hook_record_config(&key, &top, &json))
    });
    match recorded {
        // Another hook of the session recorded first (a race with SessionStart): its wins.
        Ok(first) if first != json => {
            if let Some(config) = Snapshot::from_json(&first).and_then(|s| s.load().ok()) {
                return Ok((root, config));
            }
        }
        Ok(_) => {}
        Err(e) => notes.push(format!(
            "greenlight: cannot record this session's verify.yaml in the state database ({e}); \
             the next stop reads the file again"
        )),
    }
    Ok((root, config))
}

/// The worktree a verify.yaml belongs to (`cwd` for a path with no parent to speak of).
fn root_of(config_path: &Path, cwd: &Path) -> PathBuf {
    Some(config::root_of(config_path))
        .filter(|root| !root.as_os_str().is_empty())
        .unwrap_or_else(|| cwd.to_path_buf())
}

/// The commit a session's work is counted from: where HEAD meets the base ref (`baseRef`, else
/// `origin/HEAD`), or HEAD itself when no base ref resolves. `None` without a commit.
pub fn session_base(root: &Path, base_ref: Option<&str>) -> Option<String> {
    let from_ref = resolve_base_ref(root, None, base_ref)
        .ok()
        .and_then(|r| git_line(root, &["merge-base", &r, "HEAD"]));
    from_ref.or_else(|| git_line(root, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]))
}

fn git_line(dir: &Path, args: &[&str]) -> Option<String> {
    greenlight_proc::git::line(dir, args)
}

/// A commit id as people read it.
fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// The SessionStart hook: records the commit this session's work will be counted from, in the
/// worktree the payload names. Never blocks and prints nothing for the agent (SessionStart
/// output becomes the model's context); the returned lines are for stderr.
pub fn record_session_start(payload: &Payload, options: &StopOptions) -> Vec<String> {
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let cwd = match &payload.cwd {
        Some(cwd) => here.join(cwd),
        None => here,
    };
    if git_line(&cwd, &["rev-parse", "--is-inside-work-tree"]).is_none() {
        return Vec::new();
    }
    let top = greenlight_install::settings_file::project_root(&cwd);
    // The config as it is now, when there is a readable one: the session is judged by it (an
    // agent that rewrites it later changes nothing), and its baseRef (else origin/HEAD) says
    // where the session's work is counted from.
    let snapshot = config::locate(&cwd)
        .and_then(|found| Utf8PathBuf::from_path_buf(found.path).ok())
        .and_then(|p| Snapshot::take(&p).ok());
    let base_ref = snapshot
        .as_ref()
        .and_then(|(_, c)| c.config.options.base_ref.clone());
    let Some(base) = session_base(&top, base_ref.as_deref()) else {
        return Vec::new();
    };
    let key = payload.base_key(&cwd);
    let json = snapshot.map(|(s, _)| s.to_json());
    match with_store(options, |store| {
        store.write(|tx| {
            let recorded = tx.hook_record_base(&key, &top, &base)?;
            if let Some(json) = &json {
                tx.hook_record_config(&key, &top, json)?;
            }
            tx.prune_hook_bases(tx.now() - SESSION_TTL_MS)?;
            Ok(recorded)
        })
    }) {
        Ok(_) => Vec::new(),
        Err(e) => vec![format!(
            "greenlight hook session-start: cannot record where this session began ({e}); the \
             Stop hook will run the gates on HEAD"
        )],
    }
}

fn with_store<T>(
    options: &StopOptions,
    f: impl FnOnce(&mut Store) -> Result<T, greenlight_store::Error>,
) -> Result<T, greenlight_store::Error> {
    let path = options.env.state_path(options.state_path.as_deref())?;
    let mut store = Store::open(&path)?;
    f(&mut store)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn payload_ignores_unknown_fields_and_tolerates_missing_ones() {
        let p =
            parse_payload(br#"{"cwd":"/x","future_field":[1,2],"stop_hook_active":true}"#).unwrap();
        assert_eq!(p.cwd.as_deref(), Some(Path::new("/x")));
        assert_eq!(p.stop_hook_active, Some(true));
        assert_eq!(p.session_id, None);
        let p = parse_payload(b"{}").unwrap();
        assert_eq!(p, Payload::default());
    }

    #[test]
    fn payload_that_is_not_an_object_or_has_wrong_types_is_refused() {
        for bad in [
            &b""[..],
            b"  \n",
            b"not json",
            b"[1]",
            b"\"Stop\"",
            br#"{"cwd": 5}"#,
            br#"{"stop_hook_active": "yes"}"#,
        ] {
            let e = parse_payload(bad).unwrap_err();
            assert!(
                e.to_string().contains("greenlight hook stop"),
                "{e} for {bad:?}"
            );
        }
    }

    #[test]
    fn non_utf8_bytes_in_the_payload_are_replaced_not_refused() {
        let p = parse_payload(b"{\"last_assistant_message\":\"caf\xe9\"}").unwrap();
        assert_eq!(p.last_assistant_message.as_deref(), Some("caf\u{fffd}"));
    }

    #[test]
    fn subagents_count_apart_from_their_session() {
        let mut p = Payload {
            session_id: Some("s1".into()),
            hook_event_name: Some("Stop".into()),
            ..Payload::default()
        };
        assert_eq!(p.session_key(Path::new("/r")), "s1");
        p.hook_event_name = Some("SubagentStop".into());
        p.agent_id = Some("a7".into());
        assert_eq!(p.session_key(Path::new("/r")), "s1/subagent/a7");
        p.session_id = None;
        p.hook_event_name = None;
        assert_eq!(p.session_key(Path::new("/r")), "cwd:/r");
    }

    #[test]
    fn the_cap_blocks_n_times_then_gives_up() {
        let steps: Vec<CapStep> = (0..=3).map(|n| cap_step(n, 3)).collect();
        assert_eq!(
            steps,
            vec![
                CapStep::Block { nth: 1 },
                CapStep::Block { nth: 2 },
                CapStep::Block { nth: 3 },
                CapStep::GiveUp { blocked: 3 }
            ]
        );
        assert_eq!(cap_step(0, 0), CapStep::GiveUp { blocked: 0 });
    }

    #[test]
    fn a_silent_allow_prints_nothing_and_a_block_is_one_object() {
        assert_eq!(
            Decision::Allow {
                system_message: None
            }
            .to_json(),
            None
        );
        let block = Decision::Block {
            reason: "a \"b\"\nc".into(),
        }
        .to_json()
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&block).unwrap();
        assert_eq!(v["decision"], "block");
        assert_eq!(v["reason"], "a \"b\"\nc");
    }
}
