//! The goal loop: agent turn → gates → evidence back → bounded retries → judge → done.
//!
//! Every step is committed to the store before the next begins, and every state change is one
//! transaction, so a `kill -9` anywhere leaves a state `resume` can continue from: an in-flight
//! dispatch becomes `interrupted` and is tried again within the turn budget, and a turn whose
//! dispatch had finished runs its gates before anything is dispatched again.
//!
//! The loop is a small state machine: each step ([`Step`]) does one thing — check the agent,
//! run a turn ([`crate::turn`]), run the gate phase ([`crate::gates`]), ask the judge
//! ([`crate::judge`]) — and returns the step that comes next. Everything a step needs to know
//! about earlier steps is read back from the store, never carried in memory, so a resumed loop
//! behaves exactly like one that never stopped.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use greenlight_agent::{Dispatcher, Family, Reason};
use greenlight_proc::{Interrupt, InterruptWatch};
use greenlight_store::{Gate, GateVerdict as RunVerdict, Goal, GoalId, GoalState, Reads, Store};

use crate::error::Error;
use crate::frames;
use crate::gate_phase::result_key;
use crate::progress::Progress;

/// How many judge answers outside the verdict grammar, in a row, pause the goal.
pub const JUDGE_UNPARSEABLE_LIMIT: u32 = 3;
/// How many failed judge dispatches, in a row, pause the goal (hermes pauses after 5).
pub const JUDGE_FAILED_LIMIT: u32 = 5;

/// What the loop needs besides the store.
pub struct Settings {
    /// The agent's runtime.
    pub agent: Arc<dyn Dispatcher>,
    /// The agent's family.
    pub family: Family,
    /// The model id the agent runs with.
    pub model: String,
    /// The judge's model id (same family), or none to finish when the gates pass.
    pub judge: Option<String>,
    /// How long one agent turn may take.
    pub dispatch_timeout: Duration,
    /// SIGTERM → SIGKILL grace for gates.
    pub kill_grace: Duration,
    /// Variables every gate of this run carries (the goal's run marker; the agent's come from
    /// its dispatcher's environment).
    pub gate_env: Vec<(String, String)>,
    /// The agent's executable as the family starts it (a name looked up on `PATH`, or a path):
    /// checked before anything runs, so an agent that cannot start pauses the goal at once
    /// instead of spending every turn. `None` skips the check.
    pub agent_bin: Option<PathBuf>,
    /// The `PATH` an agent named without a path is looked up on (the binary's environment).
    pub agent_search_path: OsString,
    /// Probe the model before the first turn (claude and codex: an allowlist says an id is
    /// spellable, only a probe says it answers). The command family runs programs that are not
    /// chat models, so it is not probed.
    pub probe: bool,
    /// Where gates with a `mutex` take their machine-wide lock (the one `verify` uses).
    pub lock_root: PathBuf,
    /// The environment the gates inherit: a declared `env`'s values in a cache key or a remote
    /// action come from here.
    pub env: greenlight_proc::ProcessEnv,
    /// verify's result cache, shared with the loop for gates a version 2 verify.yaml declares;
    /// `None`: no cache.
    pub cache: Option<greenlight_gate::cache::CacheSettings>,
    /// How gates reach the remote cluster of the goal's verify.yaml.
    pub remote: Option<greenlight_gate::RemoteSettings>,
}

/// How a run of the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// Every gate passed (and the judge agreed).
    Done,
    /// The goal paused; `greenlight goal resume` continues it.
    Paused {
        /// The reason, a member of the closed list.
        reason: Reason,
        /// What happened and what to do.
        detail: String,
    },
    /// The goal was not active when the loop looked (done, cleared, or paused elsewhere).
    NotActive(GoalState),
}

/// What the loop does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Start a turn: prompt, dispatch the agent.
    Turn,
    /// Run the gate phase of this open turn.
    Gates(u32),
    /// Every gate of this open turn passed: ask the judge.
    Judge(u32),
    /// Stop.
    Finish(Finish),
}

/// Drives one goal until it is done or paused.
pub struct Engine<'a> {
    pub(crate) store: &'a mut Store,
    pub(crate) goal: GoalId,
    pub(crate) settings: &'a Settings,
    pub(crate) on_progress: &'a mut dyn FnMut(Progress<'_>),
    /// The evidence the next turn is sent: the last failure, or the judge's rejection.
    pub(crate) evidence: Option<String>,
}

impl<'a> Engine<'a> {
    /// An engine for `goal`.
    pub fn new(
        store: &'a mut Store,
        goal: GoalId,
        settings: &'a Settings,
        on_progress: &'a mut dyn FnMut(Progress<'_>),
    ) -> Self {
        Self {
            store,
            goal,
            settings,
            on_progress,
            evidence: None,
        }
    }

    /// Runs the loop. Returns when the goal is done, paused, or not active.
    pub async fn run(&mut self, interrupt: &mut InterruptWatch) -> Result<Finish, Error> {
        match self.run_steps(interrupt).await {
            // Someone else moved the goal on (`goal pause` or `goal clear` from another terminal)
            // between our read and our write. That write's transaction rolled back whole, so the
            // store is as it was: their decision stands and any open turn still owes its gates.
            Err(Error::Store(greenlight_store::Error::InvalidTransition { from, .. }))
                if from != GoalState::Active =>
            {
                Ok(Finish::NotActive(from))
            }
            Err(error) => {
                // The stream's last word says why it ends. Best effort: when the store itself
                // failed, this write fails too and the error still reaches the caller.
                let goal = self.goal;
                let frame = frames::harness_error(&error);
                let _ = self
                    .store
                    .write(|tx| tx.append_frame(frames::stream(goal), &frame));
                Err(error)
            }
            other => other,
        }
    }

    async fn run_steps(&mut self, interrupt: &mut InterruptWatch) -> Result<Finish, Error> {
        let mut step = self.start(interrupt).await?;
        loop {
            step = match step {
                Step::Turn => self.turn(interrupt).await?,
                Step::Gates(turn) => self.gate_phase(turn, interrupt).await?,
                Step::Judge(turn) => self.judge(turn, interrupt).await?,
                Step::Finish(finish) => return Ok(finish),
            };
        }
    }

    /// Recovers what a crash left, checks the agent can run, and decides the first step: an open
    /// turn's owed gate phase, the gates first when the worktree changed since the last failure,
    /// else a new turn.
    async fn start(&mut self, interrupt: &mut InterruptWatch) -> Result<Step, Error> {
        let goal_id = self.goal;
        let recovered = self.store.write(|tx| {
            let recovered = tx.recover_interrupted(goal_id)?;
            // A dispatch a crash cut short ends its turn on the stream as it did in the store.
            for &turn in &recovered.turns {
                tx.append_frame(frames::stream(goal_id), &frames::turn_interrupted(turn))?;
            }
            Ok::<_, greenlight_store::Error>(recovered)
        })?;
        self.evidence = self.pending_evidence()?;
        let goal = self.goal_row()?;
        if goal.state != GoalState::Active {
            return Ok(Step::Finish(Finish::NotActive(goal.state)));
        }
        if let Some(finish) = self.check_agent(&goal, interrupt).await? {
            return Ok(Step::Finish(finish));
        }
        // A turn cut short after its dispatch finished still owes its gate phase: the store
        // left it open, and its gates run before anything is dispatched again.
        if let Some(&turn) = recovered.gates_owed.last() {
            return Ok(Step::Gates(turn));
        }
        if self.changed_since_failure(&goal)? {
            if !goal.worktree.is_dir() {
                return self.worktree_missing(&goal);
            }
            return match self.begin_turn(&goal, "")? {
                Ok(turn) => {
                    (self.on_progress)(Progress::GatesFirst { turn });
                    Ok(Step::Gates(turn))
                }
                Err(finish) => Ok(Step::Finish(finish)),
            };
        }
        Ok(Step::Turn)
    }

    /// Whether the worktree differs from what the first failing gate last judged (someone fixed
    /// it by hand while the goal was paused): its evidence is stale, so the gates run first.
    fn changed_since_failure(&self, goal: &Goal) -> Result<bool, Error> {
        let gates = self.store.gates(self.goal)?;
        let Some((gate, last)) = gates.iter().find_map(|g| {
            g.last
                .as_ref()
                .filter(|l| l.verdict != RunVerdict::Pass)
                .map(|l| (g, l))
        }) else {
            return Ok(false);
        };
        let key = result_key(&goal.worktree, &gate.command, gate_timeout_sec(goal, gate));
        Ok(key.is_none() || key != last.workspace_key)
    }

    /// Starts a turn that sends `prompt` (empty: it dispatches nothing), or the pause that a
    /// spent turn budget calls for.
    pub(crate) fn begin_turn(
        &mut self,
        goal: &Goal,
        prompt: &str,
    ) -> Result<Result<u32, Finish>, Error> {
        let goal_id = self.goal;
        let written = self.store.write(|tx| {
            let turn = tx.begin_turn(goal_id)?;
            tx.append_frame(frames::stream(goal_id), &frames::turn_started(turn, prompt))?;
            Ok(turn)
        });
        match written {
            Ok(turn) => Ok(Ok(turn)),
            Err(greenlight_store::Error::TurnBudgetSpent { .. }) => Ok(Err(self.pause(
                Reason::TurnBudgetExhausted,
                format!(
                    "used all {} turns without green gates; `greenlight goal resume` grants a new turn budget",
                    goal.max_turns
                ),
                None,
            )?)),
            Err(e) => Err(e.into()),
        }
    }

    /// The goal's row.
    pub(crate) fn goal_row(&self) -> Result<Goal, Error> {
        self.store
            .goal(self.goal)?
            .ok_or(Error::NoSuchGoal(self.goal.0))
    }

    /// The goal and its live gates when a turn or a gate phase may go on, else the step that
    /// ends it: paused or cleared from elsewhere (the turn stays open, so a resume runs its
    /// gates without dispatching again), the worktree gone (no attempt is charged; once it is
    /// back, resume runs the gates), or no gates left (never done without one).
    pub(crate) fn ready(&mut self) -> Result<Result<(Goal, Vec<Gate>), Step>, Error> {
        let goal = self.goal_row()?;
        if goal.state != GoalState::Active {
            return Ok(Err(Step::Finish(Finish::NotActive(goal.state))));
        }
        if !goal.worktree.is_dir() {
            return self.worktree_missing(&goal).map(Err);
        }
        let gates = self.store.gates(self.goal)?;
        if gates.is_empty() {
            return self.no_gates().map(Err);
        }
        Ok(Ok((goal, gates)))
    }

    /// Pauses the goal, ending `turn` with its outcome in the same transaction.
    pub(crate) fn pause(
        &mut self,
        reason: Reason,
        detail: String,
        turn: Option<(u32, &str)>,
    ) -> Result<Finish, Error> {
        let goal = self.goal;
        self.store.write(|tx| {
            if let Some((turn, outcome)) = turn {
                tx.end_turn(goal, turn, outcome)?;
            }
            tx.pause_goal(goal, reason.as_str(), Some(&detail))
        })?;
        Ok(Finish::Paused { reason, detail })
    }

    /// Pauses because the worktree is gone; any open turn stays open (nothing is charged).
    pub(crate) fn worktree_missing(&mut self, goal: &Goal) -> Result<Step, Error> {
        let finish = self.pause(
            Reason::WorktreeMissing,
            format!(
                "the worktree {} is gone; restore it, then `greenlight goal resume`",
                goal.worktree.display()
            ),
            None,
        )?;
        Ok(Step::Finish(finish))
    }

    /// Pauses because the goal has no gate left (they vanished despite the store's guard, e.g.
    /// an older greenlight removed them): nothing could say it is done. Any open turn stays
    /// open, so once a gate is added the resume runs it.
    pub(crate) fn no_gates(&mut self) -> Result<Step, Error> {
        let finish = self.pause(
            Reason::NoGates,
            "the goal has no gates, so nothing can say it is done; add one with `greenlight goal gate add CMD`, then `greenlight goal resume`".to_owned(),
            None,
        )?;
        Ok(Step::Finish(finish))
    }

    /// Pauses because a person asked (Ctrl-C, SIGTERM).
    pub(crate) fn interrupted(
        &mut self,
        signal: Interrupt,
        turn: Option<(u32, &str)>,
    ) -> Result<Finish, Error> {
        let name = if signal == Interrupt::Int {
            "Ctrl-C"
        } else {
            "SIGTERM"
        };
        self.pause(
            Reason::PausedByUser,
            format!("paused by {name}; `greenlight goal resume` continues where it stopped"),
            turn,
        )
    }

    /// The evidence the next turn starts from: the first gate whose last result failed.
    fn pending_evidence(&self) -> Result<Option<String>, Error> {
        let gates = self.store.gates(self.goal)?;
        Ok(gates
            .iter()
            .filter_map(|g| g.last.as_ref())
            .find(|last| last.verdict != RunVerdict::Pass)
            .and_then(|last| last.evidence.clone()))
    }
}

/// A gate's time limit: its own, else the goal's.
pub(crate) fn gate_timeout_sec(goal: &Goal, gate: &greenlight_store::Gate) -> u32 {
    gate.timeout_sec.unwrap_or(goal.gate_timeout_sec)
}
