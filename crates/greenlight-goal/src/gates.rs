//! The gate phase of a turn: every live gate in order, the first failure ends it.
//!
//! The gates are read from the store when the phase starts (the turn boundary), so a gate added
//! or removed by a person while the agent worked applies to this phase. A gate removed while the
//! phase runs makes the phase start over with the gates as they are now (never a crash); a gate
//! added while it runs makes a passing phase start over, so no goal is done before every live
//! gate has passed.
//!
//! The replay rule: a failed gate whose result key (the worktree's content, the command, its
//! time limit) is unchanged is not run again, its failure is replayed — but at most once in a
//! row. After a replay the gate runs for real, because the key cannot see everything a gate may
//! read (git-ignored files such as `build/`): an agent that fixed only an ignored file loses one
//! turn, never the goal.
//!
//! Each decided gate is also a `run_gates` row (the history every front end reads), written in
//! the transaction that records the goal's own gate run, so `greenlight history` shows the
//! goal's results beside verify's; a replayed failure is marked cached there, since nothing was
//! measured.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use greenlight_agent::Reason;
use greenlight_gate::OutputSink;
use greenlight_gate::lock::{self, Acquired};
use greenlight_proc::InterruptWatch;
use greenlight_store::{
    Gate, GateRun, GateVerdict as RunVerdict, Goal, LastResult, NewGateRun, NewRunGate, Reads,
};

use crate::engine::{Engine, Finish, Step, gate_timeout_sec};
use greenlight_store::greenlight_stream::{GATE_OUTPUT_INTERVAL_MS, GateOutputThrottle};

use crate::cache_pass::GoalCache;
use crate::error::Error;
use crate::frames;
use crate::gate_phase::{self, GateResult, result_key};
use crate::progress::Progress;
use crate::prompt::{self, GateFailure, OutputEvidence};
use greenlight_gate::GateReport;

/// One gate's result, ready to record.
struct Decided {
    run: NewGateRun,
    /// Its history row (`decided_at` is set by the transaction that writes it).
    history: NewRunGate,
    /// The evidence of a failure.
    text: Option<String>,
    /// The compact digest of a pass, when the digest recognised its output.
    summary: Option<String>,
}

/// A running gate's output, shared between the gate's output sink and the loop that turns it
/// into frames.
struct LiveOutput<'a>(&'a Mutex<GateOutputThrottle>);

impl OutputSink for LiveOutput<'_> {
    fn chunk(&mut self, bytes: &[u8]) {
        if let Ok(mut throttle) = self.0.lock() {
            throttle.push(bytes);
        }
    }
}

impl Engine<'_> {
    /// Runs the gate phase of open turn `turn`; next is the judge, another turn, or the end.
    pub(crate) async fn gate_phase(
        &mut self,
        turn: u32,
        interrupt: &mut InterruptWatch,
    ) -> Result<Step, Error> {
        // Paused or cleared from elsewhere while the agent worked, or the agent removed its own
        // worktree: stop before the gates.
        let (goal, gates) = match self.ready()? {
            Ok(ready) => ready,
            Err(stop) => return Ok(stop),
        };
        // The turn's dispatch already ended what it left; this catches what anything else of
        // the agent left since (the start-of-run probe before a resume's owed gate phase).
        let leftovers = greenlight_proc::end_adopted_and_marked(&self.settings.gate_env);
        if !leftovers.is_empty() {
            let goal_id = self.goal;
            self.store
                .write(|tx| crate::turn::record_leftovers(tx, goal_id, turn, &leftovers))?;
            self.report_leftovers(turn, &leftovers);
        }
        let runs = self.store.gate_runs(self.goal)?;
        // How the gates are keyed and where they run: the goal's snapshot of verify.yaml, read
        // from the store at the phase's start like the gates themselves, never from the worktree.
        let config =
            crate::cache_pass::snapshot_config(self.store.gate_config(self.goal)?.as_deref());
        // One git call per phase: the history rows of every worktree of the repository are
        // read together.
        let repository = greenlight_run::record::repository_of(&goal.worktree);
        for (index, gate) in gates.iter().enumerate() {
            let number = index + 1;
            let goal_id = self.goal;
            let started = frames::gate_started(number, gates.len(), &gate.command, turn);
            self.store
                .write(|tx| tx.append_frame(frames::stream(goal_id), &started))?;
            (self.on_progress)(Progress::GateStarted {
                number,
                of: gates.len(),
                command: &gate.command,
            });
            let last_run = runs.iter().rev().find(|r| r.gate == gate.id);
            let name = history_name(config.as_ref(), &gate.command);
            let at = GateAt {
                goal: &goal,
                config: config.as_ref(),
                gate,
                name: &name,
                number,
                of: gates.len(),
                turn,
            };
            let decided = match self.decide_gate(&at, last_run, interrupt).await? {
                Ok(decided) => decided,
                Err(step) => return Ok(step),
            };
            let passed = decided.run.verdict == RunVerdict::Pass;
            let last_attempt = !passed && gate.attempts + 1 >= goal.retries;
            (self.on_progress)(Progress::GateFinished {
                number,
                command: &gate.command,
                passed,
                exit_code: decided.run.exit_code,
                replayed: decided.run.replayed,
                evidence: decided.text.as_deref(),
                last_attempt,
            });
            let step = self.record(&goal, gate, number, turn, repository.as_deref(), decided)?;
            if step != Step::Gates(turn) || !passed {
                return Ok(step);
            }
        }
        // Every gate passed — every gate that was live when the phase began. One added since
        // (by a person, from another terminal) has judged nothing yet: run the phase again
        // rather than call the goal done without it.
        let live: Vec<_> = self.store.gates(self.goal)?.iter().map(|g| g.id).collect();
        if live.iter().any(|id| !gates.iter().any(|g| g.id == *id)) {
            return Ok(Step::Gates(turn));
        }
        if self.settings.judge.is_some() {
            return Ok(Step::Judge(turn));
        }
        let goal_id = self.goal;
        self.store.write(|tx| {
            tx.end_turn(goal_id, turn, "done")?;
            tx.complete_goal(goal_id)
        })?;
        Ok(Step::Finish(Finish::Done))
    }

    /// Records one gate's result. Returns `Step::Gates(turn)` to go on with the next gate (after
    /// a pass) or to start the phase over (the gate was removed meanwhile); else what follows a
    /// failure.
    fn record(
        &mut self,
        goal: &Goal,
        gate: &Gate,
        number: usize,
        turn: u32,
        repository: Option<&std::path::Path>,
        decided: Decided,
    ) -> Result<Step, Error> {
        let goal_id = self.goal;
        let retries = goal.retries;
        let detail = format!(
            "gate {number} (`{}`) failed {retries} time(s) in a row; fix it by hand and `greenlight goal resume`, or drop it with `greenlight goal gate remove {number}`",
            gate.command
        );
        let passed = decided.run.verdict == RunVerdict::Pass;
        let finished = frames::gate_finished(
            number,
            &gate.command,
            &decided.run,
            decided.text.as_deref().or(decided.summary.as_deref()),
        );
        let written = self.store.write(|tx| {
            let recorded = tx.record_gate_run(&decided.run)?;
            let history = NewRunGate {
                decided_at: tx.now(),
                ..decided.history.clone()
            };
            tx.record_goal_run_gate(goal_id, Some(turn), repository, &history)?;
            tx.append_frame(frames::stream(goal_id), &finished)?;
            if !passed {
                tx.end_turn(goal_id, turn, Reason::GateFailed.as_str())?;
                if recorded.attempt >= retries {
                    tx.pause_goal(goal_id, Reason::RetriesExhausted.as_str(), Some(&detail))?;
                }
            }
            Ok::<_, greenlight_store::Error>(recorded)
        });
        let recorded = match written {
            Ok(recorded) => recorded,
            // Removed (by a person, from another terminal) while it ran: nothing was written;
            // the phase starts over with the gates as they are now.
            Err(greenlight_store::Error::GateNotLive { .. }) => return Ok(Step::Gates(turn)),
            Err(e) => return Err(e.into()),
        };
        if passed {
            return Ok(Step::Gates(turn));
        }
        if recorded.attempt >= retries {
            return Ok(Step::Finish(Finish::Paused {
                reason: Reason::RetriesExhausted,
                detail,
            }));
        }
        self.evidence = decided.text;
        Ok(Step::Turn)
    }

    /// Runs the gate, or replays its last failure when nothing it can see changed. `Err`
    /// carries the step that ends the phase early (interrupted, worktree gone).
    async fn decide_gate(
        &mut self,
        at: &GateAt<'_>,
        last_run: Option<&GateRun>,
        interrupt: &mut InterruptWatch,
    ) -> Result<Result<Decided, Step>, Error> {
        let timeout_sec = gate_timeout_sec(at.goal, at.gate);
        let key = result_key(&at.goal.worktree, &at.gate.command, timeout_sec);
        let replayed_last = last_run.is_some_and(|r| r.replayed);
        let unchanged = at.gate.last.as_ref().filter(|last| {
            last.verdict != RunVerdict::Pass
                && key.is_some()
                && last.workspace_key == key
                && !replayed_last
        });
        if let Some(last) = unchanged {
            return Ok(Ok(at.replay(last, key)));
        }
        let mut cache = match (&self.settings.cache, at.config) {
            (None, _) | (_, None) => None,
            (Some(settings), Some(config)) => {
                let opened = GoalCache::open(
                    &at.goal.worktree,
                    config,
                    &at.gate.command,
                    timeout_sec,
                    settings,
                    self.settings,
                    interrupt,
                )
                .await;
                match opened {
                    Ok(cache) => cache,
                    Err(signal) => return Ok(Err(Step::Finish(self.interrupted(signal, None)?))),
                }
            }
        };
        if let Some(pass) = cache.as_mut().and_then(GoalCache::replayed_pass) {
            return Ok(Ok(at.cached_pass(&pass, key)));
        }
        let timeout = Duration::from_secs(u64::from(timeout_sec));
        // A gate with a mutex runs under the same machine-wide lock `verify` takes, waiting up
        // to its own time limit as `verify` does.
        let _guard = match &at.gate.mutex {
            None => None,
            Some(name) => {
                let acquired = lock::acquire(&self.settings.lock_root, name, timeout, interrupt)
                    .await
                    .map_err(|source| Error::LockRoot {
                        root: self.settings.lock_root.clone(),
                        source,
                    })?;
                match acquired {
                    Acquired::Held { guard, .. } => Some(guard),
                    Acquired::Interrupted(signal) => {
                        return Ok(Err(Step::Finish(self.interrupted(signal, None)?)));
                    }
                    Acquired::GaveUp { waited, holder, .. } => {
                        return Ok(Ok(at.lock_given_up(name, waited, holder)));
                    }
                }
            }
        };
        let started = Instant::now();
        let throttle = Mutex::new(GateOutputThrottle::new(
            u32::try_from(at.number).unwrap_or(u32::MAX),
        ));
        let mut live = LiveOutput(&throttle);
        if let Some(cache) = cache.as_ref()
            && let Some(decided) = self
                .remote_gate(at, cache, &throttle, started, key.clone(), interrupt)
                .await?
        {
            return Ok(decided);
        }
        let settings = self.settings;
        let run = gate_phase::run_gate(
            &at.goal.worktree,
            &at.gate.command,
            timeout,
            settings.kill_grace,
            &settings.gate_env,
            &settings.lock_root,
            &mut live,
            interrupt,
        );
        tokio::pin!(run);
        let mut tick = tokio::time::interval(Duration::from_millis(GATE_OUTPUT_INTERVAL_MS));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let goal_id = self.goal;
        let result = loop {
            tokio::select! {
                r = &mut run => break r,
                _ = tick.tick() => {
                    let now = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    let frame = throttle.lock().ok().and_then(|mut t| t.poll(now));
                    if let Some(frame) = frame {
                        self.store.write(|tx| tx.append_frame(frames::stream(goal_id), &frame))?;
                    }
                }
            }
        };
        let rest = throttle.lock().ok().and_then(|mut t| t.finish());
        if let Some(frame) = rest {
            self.store
                .write(|tx| tx.append_frame(frames::stream(goal_id), &frame))?;
        }
        let result = match result {
            Ok(result) => result,
            // Removed while an earlier gate ran: the same pause, not a machine error.
            Err(_) if !at.goal.worktree.is_dir() => {
                return Ok(Err(self.worktree_missing(at.goal)?));
            }
            Err(source) => {
                return Err(Error::GateSpawn {
                    command: at.gate.command.clone(),
                    source,
                });
            }
        };
        if let Some(signal) = result.interrupted {
            // The turn stays open: its dispatch finished, so resume owes it this gate phase
            // rather than a new dispatch.
            return Ok(Err(Step::Finish(self.interrupted(signal, None)?)));
        }
        if let Some(cache) = cache.as_mut() {
            cache.store(&result).await;
        }
        Ok(Ok(at.ran(&result, started.elapsed(), key)))
    }
}

impl Engine<'_> {
    /// A `run: remote` gate on the cluster: re-attached to the operation a killed run left,
    /// or executed, its operation persisted as soon as the cluster names it and forgotten once
    /// decided. `None`: it is not remote here (or the cluster failed), so it runs locally.
    async fn remote_gate(
        &mut self,
        at: &GateAt<'_>,
        cache: &GoalCache,
        throttle: &Mutex<GateOutputThrottle>,
        started: Instant,
        key: Option<String>,
        interrupt: &mut InterruptWatch,
    ) -> Result<Option<Result<Decided, Step>>, Error> {
        let gate_id = at.gate.id;
        let resume = self.store.remote_operation(gate_id)?.map(|(_, op)| op);
        let store = &mut *self.store;
        let mut persisted: Result<(), greenlight_store::Error> = Ok(());
        let mut on_started = |action: &str, operation: &str| {
            persisted = store.write(|tx| tx.begin_remote_operation(gate_id, action, operation));
        };
        let mut live = LiveOutput(throttle);
        let ran = cache
            .run_remote(resume.as_deref(), &mut on_started, &mut live, interrupt)
            .await;
        persisted?;
        let Some(ran) = ran else {
            self.store.write(|tx| tx.end_remote_operation(gate_id))?;
            return Ok(None);
        };
        let goal_id = self.goal;
        let rest = throttle.lock().ok().and_then(|mut t| t.finish());
        if let Some(frame) = rest {
            self.store
                .write(|tx| tx.append_frame(frames::stream(goal_id), &frame))?;
        }
        let result = match ran {
            Ok(result) => result,
            // The operation stays recorded: a resume re-attaches to it.
            Err(signal) => return Ok(Some(Err(Step::Finish(self.interrupted(signal, None)?)))),
        };
        self.store.write(|tx| tx.end_remote_operation(gate_id))?;
        Ok(Some(Ok(at.ran(&result, started.elapsed(), key))))
    }
}

/// The name a goal's gate has in history: the id of the gate of the goal's verify.yaml that
/// runs the same command (so its rows join verify's), else the command itself, the only name a
/// `--gate CMD` has.
fn history_name(config: Option<&greenlight_gate::config::Loaded>, command: &str) -> String {
    config
        .and_then(|c| c.gates.iter().find(|g| g.command == command))
        .map_or_else(|| command.to_owned(), |g| g.id.clone())
}

/// One gate at its place in one turn's phase: what every record of its result shares.
struct GateAt<'g> {
    goal: &'g Goal,
    /// The goal's verify.yaml snapshot, when it has one.
    config: Option<&'g greenlight_gate::config::Loaded>,
    gate: &'g Gate,
    /// Its name in history ([`history_name`]).
    name: &'g str,
    /// 1-based, and the number of gates in the phase.
    number: usize,
    of: usize,
    turn: u32,
}

impl GateAt<'_> {
    /// The evidence of a failure of this gate (this failure counted in its attempt).
    fn evidence(&self, exit_code: Option<i32>, timed_out: bool, output: OutputEvidence) -> String {
        prompt::evidence(&GateFailure {
            number: self.number,
            of: self.of,
            command: &self.gate.command,
            exit_code,
            timed_out,
            attempt: self.gate.attempts + 1,
            max_attempts: self.goal.retries,
            output,
        })
    }

    fn run(&self, verdict: RunVerdict, exit_code: Option<i32>, duration: Duration) -> NewGateRun {
        NewGateRun {
            goal: self.goal.id,
            gate: self.gate.id,
            turn: Some(self.turn),
            verdict,
            exit_code,
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            workspace_key: None,
            replayed: false,
            digest: None,
            evidence: None,
        }
    }

    /// The history row of this gate's result: `ran` is the deciding attempt's time when the
    /// gate ran now (`None`: nothing ran, so no attempt and no duration), `cached` when the
    /// result was replayed rather than measured, `digest` how its output was read.
    fn history(
        &self,
        verdict: RunVerdict,
        exit_code: Option<i32>,
        ran: Option<Duration>,
        cached: bool,
        digest: Option<greenlight_store::DigestTelemetry>,
    ) -> NewRunGate {
        NewRunGate {
            gate: self.name.to_owned(),
            verdict,
            exit_code,
            duration_ms: ran.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            attempts: u32::from(ran.is_some()),
            cached,
            decided_at: 0,
            digest,
        }
    }

    /// The last failure again: nothing the key sees changed since.
    fn replay(&self, last: &LastResult, key: Option<String>) -> Decided {
        let previous = last.evidence.clone().unwrap_or_default();
        let text = self.evidence(
            last.exit_code,
            last.verdict == RunVerdict::Timeout,
            OutputEvidence::Unchanged {
                previous: previous.clone(),
            },
        );
        let run = NewGateRun {
            workspace_key: key,
            replayed: true,
            // What the gate still waits on stays the original failure, so a second unchanged
            // turn quotes the tool's output, not this notice.
            evidence: Some(previous),
            ..self.run(last.verdict, last.exit_code, Duration::ZERO)
        };
        Decided {
            history: self.history(last.verdict, last.exit_code, None, true, None),
            run,
            text: Some(text),
            summary: None,
        }
    }

    /// A PASS replayed from verify's result cache: the gate's declared inputs, env and keys are
    /// exactly as when it passed.
    fn cached_pass(&self, pass: &GateReport, key: Option<String>) -> Decided {
        let attempt = pass.attempts.last();
        let run = NewGateRun {
            workspace_key: key,
            replayed: true,
            digest: attempt
                .and_then(|a| a.digest.as_ref())
                .and_then(|d| serde_json::to_value(d).ok()),
            ..self.run(
                RunVerdict::Pass,
                Some(0),
                attempt.map_or(Duration::ZERO, |a| a.duration),
            )
        };
        Decided {
            // The cached pass's own measurement, as verify records a cache hit.
            history: self.history(
                RunVerdict::Pass,
                Some(0),
                Some(attempt.map_or(Duration::ZERO, |a| a.duration)),
                true,
                None,
            ),
            run,
            text: None,
            summary: Some(format!(
                "replayed from verify's result cache (key {})",
                pass.cached_short().unwrap_or("?")
            )),
        }
    }

    /// The gate's mutex stayed held for its whole time limit: a timeout naming the holder.
    fn lock_given_up(&self, name: &str, waited: Duration, holder: Option<lock::Owner>) -> Decided {
        let who = holder
            .map(|h| format!(" (held by pid {} on {})", h.pid, h.host))
            .unwrap_or_default();
        let note = format!(
            "greenlight waited {}s for the machine-wide lock `{name}`{who} and gave up; the gate did not run",
            waited.as_secs()
        );
        let output = OutputEvidence::Complete(note);
        let text = self.evidence(None, true, output);
        // No workspace key: not a judgement of this content, so never replayed.
        let run = NewGateRun {
            evidence: Some(text.clone()),
            ..self.run(RunVerdict::Timeout, None, waited)
        };
        Decided {
            // The gate never started: a timeout with no attempt, not a duration of the gate.
            history: self.history(RunVerdict::Timeout, None, None, false, None),
            run,
            text: Some(text),
            summary: None,
        }
    }

    /// What a real run of the gate came to.
    fn ran(&self, result: &GateResult, took: Duration, key: Option<String>) -> Decided {
        let exit_code = result.attempt.exit_code;
        let text = (!result.passed)
            .then(|| self.evidence(exit_code, result.timed_out, result.output.clone()));
        let verdict = if result.passed {
            RunVerdict::Pass
        } else if result.timed_out {
            RunVerdict::Timeout
        } else {
            RunVerdict::Fail
        };
        let run = NewGateRun {
            workspace_key: key,
            digest: result
                .attempt
                .digest
                .as_ref()
                .and_then(|d| serde_json::to_value(d).ok()),
            evidence: text.clone(),
            ..self.run(verdict, exit_code, took)
        };
        let digest = result
            .attempt
            .digest
            .as_ref()
            .map(greenlight_run::record::digest_telemetry);
        Decided {
            history: self.history(verdict, exit_code, Some(took), false, digest),
            run,
            text,
            summary: result.compact.clone().filter(|_| result.passed),
        }
    }
}
