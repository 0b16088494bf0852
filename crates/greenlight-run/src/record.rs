//! Verify and hook runs recorded in the state database as streams of their own (`run-N`), with
//! the same gate frames a goal's gate phase writes, so a watcher lists them beside the goals.
//!
//! Each decided gate also gets a `run_gates` row (verdict, exit code, the deciding attempt's
//! time, and how the digest read its output: classification, format and reasons, never the
//! command or the output), written in the same batch transaction as its frame, and the run
//! keeps its repository's common git directory, so `greenlight history` reads every worktree
//! together.
//!
//! Recording is a view, never a verdict: a state database that cannot be opened or written
//! turns recording off for the rest of the run with one warning, and the run's output and exit
//! code stay exactly what they would have been.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Instant;

use greenlight_digest::{Classification, Digest};
use greenlight_gate::{GateReport, RunEvent};
use greenlight_store::greenlight_stream::{FrameBody, MAX_TEXT_BYTES, RunKind, bounded};
use greenlight_store::{DigestClass, DigestTelemetry, NewRunGate, RunId, Store, WallClock as _};

use crate::evidence::{Shown, shown_attempt};

/// Set to `1` to record nothing (as `greenlight verify --no-record` does); read into
/// [`RunEnv::no_record`](crate::RunEnv::no_record).
pub const NO_RECORD_VAR: &str = "GREENLIGHT_NO_RECORD";

/// Runs are kept this long; older ones are pruned whenever a run is recorded.
pub const RUN_TTL_MS: i64 = 30 * 24 * 60 * 60 * 1000;

/// Bytes of a failing gate's output tail put in its `gate-finished` frame when its digest did
/// not recognise the output.
const TAIL_IN_FRAME: usize = 2048;

/// One gate as the run numbers it: its id and its command.
#[derive(Debug, Clone)]
pub struct RunGate {
    /// The gate id.
    pub id: String,
    /// Its command.
    pub command: String,
}

/// What the caller hands the writer thread.
enum Message {
    Frame(FrameBody),
    Gate(NewRunGate),
    Finish {
        result: String,
        exit_code: i32,
        duration_ms: u64,
    },
}

/// Records one run; every method is best effort and none waits for the database except
/// [`Recorder::finish`].
///
/// A thread of its own owns the database: it opens (and migrates) the file while the run probes
/// git and starts its first gate, and writes whatever frames have queued up in one transaction,
/// so recording overlaps the gates instead of adding a commit to each (measured by
/// `scripts/bench-verify.sh`, recording on and off).
#[derive(Debug)]
pub struct Recorder {
    /// `None` once finished (or when recording is off).
    queue: Option<mpsc::Sender<Message>>,
    writer: Option<std::thread::JoinHandle<Option<RunId>>>,
    /// The one warning to show, set by the writer when the database cannot be used.
    warning: Arc<Mutex<Option<String>>>,
    gates: Vec<RunGate>,
    started: Instant,
}

fn lock(m: &Mutex<Option<String>>) -> std::sync::MutexGuard<'_, Option<String>> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Recorder {
    /// A recorder that records nothing.
    pub fn off() -> Self {
        Self {
            queue: None,
            writer: None,
            warning: Arc::new(Mutex::new(None)),
            gates: Vec::new(),
            started: Instant::now(),
        }
    }

    /// Starts recording the run in the state database `state` (`None`: no place could be
    /// chosen, which the warning says), pruning
    /// runs older than [`RUN_TTL_MS`]. `how_to_turn_off` ends the warning shown if the database
    /// cannot be used (e.g. "pass --no-record or set GREENLIGHT_NO_RECORD=1").
    pub fn start(
        state: Option<&Path>,
        kind: RunKind,
        worktree: &Path,
        gates: Vec<RunGate>,
        how_to_turn_off: &'static str,
    ) -> Self {
        let warning = Arc::new(Mutex::new(None));
        let (queue, inbox) = mpsc::channel();
        let path = state
            .map(Path::to_path_buf)
            .ok_or(greenlight_store::Error::NoStatePath);
        let commands: Vec<String> = gates.iter().map(|g| g.command.clone()).collect();
        let worktree = worktree.to_path_buf();
        let shared = Arc::clone(&warning);
        let writer = std::thread::Builder::new()
            .name("greenlight-record".into())
            .spawn(move || {
                let shown = path.as_ref().ok().cloned();
                match path.and_then(|path| write_run(&path, kind, &worktree, &commands, &inbox)) {
                    Ok(run) => Some(run),
                    Err(e) => {
                        let path = shown.unwrap_or_else(|| PathBuf::from("the state database"));
                        *lock(&shared) = Some(format!(
                            "greenlight: cannot record this run in {} ({e}); it goes on \
                             unrecorded ({how_to_turn_off})",
                            path.display()
                        ));
                        None
                    }
                }
            });
        match writer {
            Ok(writer) => Self {
                queue: Some(queue),
                writer: Some(writer),
                warning,
                gates,
                started: Instant::now(),
            },
            Err(e) => {
                *lock(&warning) = Some(format!(
                    "greenlight: cannot record this run ({e}); it goes on unrecorded \
                     ({how_to_turn_off})"
                ));
                Self {
                    queue: None,
                    writer: None,
                    warning,
                    gates,
                    started: Instant::now(),
                }
            }
        }
    }

    /// The warning to show once (recording failed and is off now), if there is one not shown yet.
    pub fn take_warning(&mut self) -> Option<String> {
        lock(&self.warning).take()
    }

    fn append(&mut self, body: FrameBody) {
        if let Some(queue) = &self.queue {
            // A writer that gave up has dropped its end; its warning says why.
            let _ = queue.send(Message::Frame(body));
        }
    }

    fn number(&self, id: &str) -> u32 {
        let index = self.gates.iter().position(|g| g.id == id).unwrap_or(0);
        u32::try_from(index + 1).unwrap_or(u32::MAX)
    }

    /// One event of the gate runner.
    pub fn event(&mut self, event: &RunEvent<'_>) {
        if self.queue.is_none() {
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
                self.append(body);
            }
            RunEvent::GateFinished(gate) => {
                let body = gate_finished(self.number(&gate.id), gate);
                self.append(body);
                let row = run_gate(gate, greenlight_store::SystemClock.now_ms());
                if let Some(queue) = &self.queue {
                    let _ = queue.send(Message::Gate(row));
                }
            }
            _ => {}
        }
    }

    /// Records the run's end with its result and exit code, and waits until every frame is
    /// written (or recording failed: then [`Recorder::take_warning`] says why). Returns the
    /// run's id when it was recorded whole.
    pub fn finish(&mut self, result: &str, exit_code: i32) -> Option<RunId> {
        let duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if let Some(queue) = self.queue.take() {
            let _ = queue.send(Message::Finish {
                result: result.to_owned(),
                exit_code,
                duration_ms,
            });
        }
        self.writer
            .take()
            .and_then(|writer| writer.join().ok().flatten())
    }
}

impl Drop for Recorder {
    /// A run that ends without `finish` (an early return) still lets the writer end: its queue
    /// closes, and what was queued is written.
    fn drop(&mut self) {
        self.queue = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// The writer thread: opens the file, begins the run, then writes what has queued up, one
/// transaction per batch, until the run finishes or the caller goes away.
fn write_run(
    path: &Path,
    kind: RunKind,
    worktree: &Path,
    commands: &[String],
    inbox: &mpsc::Receiver<Message>,
) -> Result<RunId, greenlight_store::Error> {
    // One git call, here on the writer's thread while the run probes git on its own.
    let repository = repository_of(worktree);
    let mut store = Store::open(path)?;
    // A run record is a view: a power cut may lose its last frames, and an fsync per batch
    // would cost more than the gates (docs/state.md, "The cost of recording").
    store.relax_durability()?;
    let run = store.write(|tx| {
        tx.prune_runs(tx.now() - RUN_TTL_MS)?;
        // Runs whose process is gone (a verify killed with SIGKILL) end as interrupted here,
        // so they are not shown running for good.
        tx.close_abandoned_runs()?;
        tx.begin_run_in(kind, worktree, repository.as_deref(), commands)
    })?;
    while let Ok(first) = inbox.recv() {
        let mut batch = vec![first];
        batch.extend(inbox.try_iter());
        let finished = write_batch(&mut store, run, batch)?;
        if finished {
            break;
        }
    }
    Ok(run)
}

/// Writes one batch in one transaction; `true` when it held the run's end.
fn write_batch(
    store: &mut Store,
    run: RunId,
    batch: Vec<Message>,
) -> Result<bool, greenlight_store::Error> {
    store.write(|tx| {
        let mut finished = false;
        for message in &batch {
            match message {
                Message::Frame(body) => {
                    tx.append_frame(run.stream(), body)?;
                }
                Message::Gate(row) => tx.record_run_gate(run, row)?,
                Message::Finish {
                    result,
                    exit_code,
                    duration_ms,
                } => {
                    tx.finish_run(run, result, *exit_code, *duration_ms)?;
                    finished = true;
                }
            }
        }
        Ok(finished)
    })
}

/// The common git directory of the repository `dir` is in, canonical: what every worktree of
/// one repository shares. `None` outside a repository or when git cannot answer (best effort:
/// history then falls back to the worktree alone).
pub fn repository_of(dir: &Path) -> Option<PathBuf> {
    let common = greenlight_proc::git::line(dir, &["rev-parse", "--git-common-dir"])?;
    // git answers relative to `dir` (`.git`) in the primary checkout, absolute in a linked one.
    std::fs::canonicalize(dir.join(common)).ok()
}

/// The `run_gates` row of a decided gate: the deciding attempt is the last one kept (a retry
/// that reached no verdict is not kept, so the first FAIL's attempt is then the last).
pub fn run_gate(gate: &GateReport, decided_at: i64) -> NewRunGate {
    let last = gate.attempts.last();
    NewRunGate {
        gate: gate.id.clone(),
        verdict: gate.verdict,
        exit_code: last.and_then(|a| a.exit_code),
        duration_ms: last.map(|a| u64::try_from(a.duration.as_millis()).unwrap_or(u64::MAX)),
        attempts: u32::try_from(gate.attempts.len()).unwrap_or(u32::MAX),
        // Replayed from the result cache rather than measured by this run.
        cached: gate.cached.is_some(),
        decided_at,
        digest: telemetry_of(gate),
    }
}

/// How the digest read the output of the attempt an agent is shown for `gate` (a FLAKY gate's
/// failed first run, else its last). `None` for a result replayed from the cache (its output
/// was read when it was measured, and counting it again would weigh one reading twice) and for
/// an attempt with no digest (it never started).
pub fn telemetry_of(gate: &GateReport) -> Option<DigestTelemetry> {
    if gate.cached.is_some() {
        return None;
    }
    let attempt = shown_attempt(gate, Shown::Deciding)?;
    attempt.digest.as_ref().map(digest_telemetry)
}

/// A digest's classification, format and reasons, as the words the store keeps: the observe
/// telemetry of one reading, with nothing of the command or the output in it.
pub fn digest_telemetry(digest: &Digest) -> DigestTelemetry {
    DigestTelemetry {
        class: match digest.classification {
            Classification::Recognised => DigestClass::Recognised,
            Classification::Partial => DigestClass::Partial,
            Classification::Unrecognised => DigestClass::Unrecognised,
        },
        format: digest.format.map(|f| f.name().to_owned()),
        reasons: digest.reasons.iter().map(|r| r.name().to_owned()).collect(),
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
        verdict: gate.verdict,
        exit_code: last.and_then(|a| a.exit_code),
        // A result replayed from the cache did not run now: no wall time, as for the goal
        // loop's replays.
        duration_ms: last
            .filter(|_| gate.cached.is_none())
            .map(|_| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)),
        digest: digest.map(|d| bounded(&d, MAX_TEXT_BYTES).0),
        replayed: gate.cached.is_some(),
        turn: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenlight_digest::{DigestOptions, Format, digest};
    use greenlight_store::{HistoryScope, greenlight_stream::GateVerdict};
    use greenlight_store::{Reads, RowSource};

    /// The store's checks take every format name the digest can give (a name they refused
    /// would turn a goal's gate record into an error), and the reading reads back as written.
    #[test]
    fn every_format_name_and_a_real_readings_reasons_are_stored_and_read_back() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("s.db")).expect("open");
        let cut = digest(
            b"running 1 test\ntest a ... FAILED\n",
            Some(101),
            &DigestOptions::default(),
        );
        let mut readings: Vec<DigestTelemetry> = Format::ALL
            .iter()
            .map(|f| DigestTelemetry {
                class: DigestClass::Partial,
                format: Some(f.name().to_owned()),
                reasons: Vec::new(),
            })
            .collect();
        readings.push(digest_telemetry(&cut));
        assert!(!readings.last().expect("one").reasons.is_empty());
        let run = store
            .write(|tx| {
                let run = tx.begin_run_in(RunKind::Verify, dir.path(), None, &[])?;
                for (i, reading) in readings.iter().enumerate() {
                    tx.record_run_gate(
                        run,
                        &NewRunGate {
                            gate: format!("g{i}"),
                            verdict: GateVerdict::Fail,
                            exit_code: Some(1),
                            duration_ms: Some(1),
                            attempts: 1,
                            cached: false,
                            decided_at: 1,
                            digest: Some(reading.clone()),
                        },
                    )?;
                }
                Ok::<_, greenlight_store::Error>(run)
            })
            .expect("every reading is stored");
        let rows = store.run_gates(run).expect("rows");
        assert!(rows.iter().all(|r| r.source == RowSource::Run(run)));
        let back: Vec<DigestTelemetry> = rows.into_iter().filter_map(|r| r.digest).collect();
        assert_eq!(back, readings);
        let scope = HistoryScope {
            repository: None,
            worktree: dir.path().to_path_buf(),
        };
        assert_eq!(
            store.gate_stats(&scope, 100).expect("stats").len(),
            readings.len()
        );
    }
}
