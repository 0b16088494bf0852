//! Verify and hook runs recorded in the state database as streams of their own (`run-N`), with
//! the same gate frames a goal's gate phase writes, so a watcher lists them beside the goals.
//!
//! Recording is a view, never a verdict: a state database that cannot be opened or written
//! turns recording off for the rest of the run with one warning, and the run's output and exit
//! code stay exactly what they would have been.

use std::path::{Path, PathBuf};
use std::time::Instant;

use greenlight_gate::{GateReport, GateVerdict as LineVerdict, RunEvent};
use greenlight_store::greenlight_stream::{
    FrameBody, GateVerdict, MAX_TEXT_BYTES, RunKind, bounded,
};
use greenlight_store::{RunId, Store};

/// Set to `1` to record nothing (as `greenlight verify --no-record` does).
pub const NO_RECORD_VAR: &str = "GREENLIGHT_NO_RECORD";

/// Runs are kept this long; older ones are pruned whenever a run is recorded.
pub const RUN_TTL_MS: i64 = 30 * 24 * 60 * 60 * 1000;

/// Bytes of a failing gate's output tail put in its `gate-finished` frame when its digest did
/// not recognise the output.
const TAIL_IN_FRAME: usize = 2048;

/// Whether the environment turns recording off.
pub fn disabled_by_env() -> bool {
    std::env::var_os(NO_RECORD_VAR).is_some_and(|v| v == "1")
}

/// One gate as the run numbers it: its id and its command.
#[derive(Debug, Clone)]
pub struct RunGate {
    /// The gate id.
    pub id: String,
    /// Its command.
    pub command: String,
}

/// Records one run; every method is best effort.
#[derive(Debug)]
pub struct Recorder {
    /// `None` once recording failed (or never started).
    live: Option<(Store, RunId)>,
    gates: Vec<RunGate>,
    started: Instant,
    /// The one warning to show, until taken.
    warning: Option<String>,
    how_to_turn_off: &'static str,
}

impl Recorder {
    /// A recorder that records nothing.
    pub fn off() -> Self {
        Self {
            live: None,
            gates: Vec::new(),
            started: Instant::now(),
            warning: None,
            how_to_turn_off: "",
        }
    }

    /// Opens the state database (`state`, else the default path) and records the run's start,
    /// pruning runs older than [`RUN_TTL_MS`]. `how_to_turn_off` ends the warning shown if the
    /// database cannot be used (e.g. "pass --no-record or set GREENLIGHT_NO_RECORD=1").
    pub fn start(
        state: Option<&Path>,
        kind: RunKind,
        worktree: &Path,
        gates: Vec<RunGate>,
        how_to_turn_off: &'static str,
    ) -> Self {
        let mut recorder = Self {
            live: None,
            gates,
            started: Instant::now(),
            warning: None,
            how_to_turn_off,
        };
        let path = match state {
            Some(p) => Ok(p.to_path_buf()),
            None => greenlight_store::default_state_path(),
        };
        let commands: Vec<String> = recorder.gates.iter().map(|g| g.command.clone()).collect();
        let begun = path.and_then(|path| {
            let mut store = Store::open(&path)?;
            // A run record is a view: a power cut may lose its last frames, and an fsync per
            // gate would cost more than the gates (docs/state.md, "The cost of recording").
            store.relax_durability()?;
            let run = store.write(|tx| {
                tx.prune_runs(tx.now() - RUN_TTL_MS)?;
                tx.begin_run(kind, worktree, &commands)
            })?;
            Ok((store, run))
        });
        match begun {
            Ok(live) => recorder.live = Some(live),
            Err(e) => recorder.fail(state, &e),
        }
        recorder
    }

    /// The run's id, while it is being recorded.
    pub fn run(&self) -> Option<RunId> {
        self.live.as_ref().map(|(_, run)| *run)
    }

    /// The warning to show once (recording failed and is off now), if not shown yet.
    pub fn take_warning(&mut self) -> Option<String> {
        self.warning.take()
    }

    fn fail(&mut self, state: Option<&Path>, error: &greenlight_store::Error) {
        let path = self
            .live
            .as_ref()
            .map(|(store, _)| store.path().to_path_buf())
            .or_else(|| state.map(Path::to_path_buf))
            .or_else(|| greenlight_store::default_state_path().ok())
            .unwrap_or_else(|| PathBuf::from("the state database"));
        if self.live.take().is_some() || self.warning.is_none() {
            self.warning = Some(format!(
                "greenlight: cannot record this run in {} ({error}); it goes on unrecorded ({})",
                path.display(),
                self.how_to_turn_off
            ));
        }
    }

    fn append(&mut self, body: &FrameBody) {
        let Some((store, run)) = &mut self.live else {
            return;
        };
        let run = *run;
        if let Err(e) = store.write(|tx| tx.append_frame(run.stream(), body)) {
            self.fail(None, &e);
        }
    }

    fn number(&self, id: &str) -> u32 {
        let index = self.gates.iter().position(|g| g.id == id).unwrap_or(0);
        u32::try_from(index + 1).unwrap_or(u32::MAX)
    }

    /// One event of the gate runner.
    pub fn event(&mut self, event: &RunEvent<'_>) {
        if self.live.is_none() {
            return;
        }
        match event {
            // A retry is the same gate still running: one start per gate.
            RunEvent::GateStarted { id, attempt: 1 } => {
                let body = FrameBody::GateStarted {
                    gate: self.number(id),
                    of: u32::try_from(self.gates.len()).unwrap_or(u32::MAX),
                    command: self
                        .gates
                        .iter()
                        .find(|g| g.id == *id)
                        .map(|g| g.command.clone())
                        .unwrap_or_default(),
                    turn: None,
                };
                self.append(&body);
            }
            RunEvent::GateFinished(gate) => {
                let body = gate_finished(self.number(&gate.id), gate);
                self.append(&body);
            }
            _ => {}
        }
    }

    /// Records the run's end with its result and exit code.
    pub fn finish(&mut self, result: &str, exit_code: i32) {
        let duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let Some((store, run)) = &mut self.live else {
            return;
        };
        let run = *run;
        if let Err(e) = store.write(|tx| tx.finish_run(run, result, exit_code, duration_ms)) {
            self.fail(None, &e);
        }
        self.live = None;
    }
}

/// The `gate-finished` frame of a gate as the runner reported it: the last attempt's exit code,
/// the time of all attempts, and for a gate that did not pass its digest (or its output's tail).
pub fn gate_finished(number: u32, gate: &GateReport) -> FrameBody {
    let last = gate.attempts.last();
    let duration: std::time::Duration = gate.attempts.iter().map(|a| a.duration).sum();
    let failing = gate
        .attempts
        .iter()
        .rev()
        .find(|a| a.exit_code != Some(0))
        .filter(|_| gate.passed != Some(true));
    let digest = match failing {
        Some(attempt) => attempt
            .digest
            .as_ref()
            .and_then(|d| d.compact(MAX_TEXT_BYTES))
            .or_else(|| {
                let tail = &attempt.tail;
                let mut start = tail.len().saturating_sub(TAIL_IN_FRAME);
                while !tail.is_char_boundary(start) {
                    start += 1;
                }
                (!tail.is_empty()).then(|| tail[start..].to_owned())
            }),
        None => last.and_then(|a| a.digest.as_ref()?.compact(MAX_TEXT_BYTES)),
    };
    FrameBody::GateFinished {
        gate: number,
        command: gate.command.clone(),
        verdict: match gate.verdict {
            LineVerdict::Pass => GateVerdict::Pass,
            LineVerdict::Fail => GateVerdict::Fail,
            LineVerdict::Flaky => GateVerdict::Flaky,
            LineVerdict::Timeout => GateVerdict::Timeout,
            LineVerdict::Skip => GateVerdict::Skip,
        },
        exit_code: last.and_then(|a| a.exit_code),
        duration_ms: last.map(|_| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)),
        digest: digest.map(|d| bounded(&d, MAX_TEXT_BYTES).0),
        replayed: false,
        turn: None,
    }
}
