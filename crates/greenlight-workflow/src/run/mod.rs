//! The runtime: a checked plan driven to its end, a pause, or an interrupt, every step recorded
//! before it is acted on.
//!
//! The one rule that makes a kill harmless: each [`Entry`] is persisted (with its frame) before
//! the runtime acts on it, and the [`Scheduler`] is fed only what was persisted. A resume
//! replays the records into a fresh scheduler, so nothing that finished is dispatched again; a
//! dispatch that was in flight at the kill never settled, and is dispatched again (from its
//! worktree's last accepted commit).
//!
//! The parts, one job each: [`preflight`] (before anything runs), [`worktrees`] (linked git
//! worktrees, one per member), [`dispatch`] (one agent dispatch and the landed barrier),
//! [`gate_step`] (verify.yaml gates in a worktree), [`limits`] (wall clock, spend, extensions),
//! [`replay`] (what a resume feeds the scheduler) and [`journal`] (the seam to the state
//! database). This module is the loop that asks the scheduler and runs what it says.

pub mod dispatch;
pub mod gate_step;
pub mod journal;
pub mod limits;
pub mod preflight;
pub mod replay;
pub mod store_journal;
pub mod worktrees;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use greenlight_gate::config::{Loaded, Snapshot};
use greenlight_proc::{Interrupt, InterruptWatch};
use greenlight_types::Reason;

use crate::plan::{self, Kind, Plan};
use crate::resume::{self, Recorded, Refusal};
use crate::schedule::{Action, End, Event, Outcome, Scheduler};
use dispatch::{Agents, Dispatched, Job};
use gate_step::GateSettings;
use journal::{Entry, Journal, JournalError, NewRun};
use limits::{Limits, Spent};
use worktrees::{Tree, WorktreeError, Worktrees};

/// What `greenlight workflow run` was asked.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The plan file, as given (recorded, and named in the resume command).
    pub plan_path: String,
    /// The checked plan.
    pub plan: Plan,
    /// The directory the run is started in (its repository's worktree is the base's home).
    pub start_dir: PathBuf,
    /// `--run-id`.
    pub run_id: Option<String>,
    /// `--resume`.
    pub resume: Option<String>,
    /// `--arg k=v`.
    pub args: BTreeMap<String, String>,
    /// `--budget`.
    pub budget: Option<u64>,
    /// `--max-wall-clock`.
    pub max_wall_clock: Option<Duration>,
    /// `--budget-extra`.
    pub budget_extra: Option<u64>,
    /// `--wall-clock-extra`.
    pub wall_clock_extra: Option<Duration>,
    /// `--tokens-extra`.
    pub tokens_extra: Option<u64>,
    /// `--cost-extra`.
    pub cost_extra_usd: Option<f64>,
}

/// How the runtime runs things, as the binary read it once.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Gates' settings.
    pub gates: GateSettings,
    /// An agent step's deadline when it sets no `timeoutSec`.
    pub agent_timeout: Duration,
}

/// How one invocation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// Every step finished.
    Completed,
    /// A step failed.
    Failed {
        /// The step.
        step: String,
        /// Why.
        reason: Reason,
        /// For a person.
        detail: String,
    },
    /// A fail route ended the run at this label.
    Terminal(String),
    /// Stopped at or before a step; `--resume` carries on.
    Paused {
        /// The step.
        step: String,
        /// Why (`None`: a pause step).
        reason: Option<Reason>,
        /// For a person.
        message: String,
    },
    /// A signal stopped it; `--resume` carries on.
    Interrupted(Interrupt),
}

/// What an invocation reports.
#[derive(Debug, Clone)]
pub struct Report {
    /// The run's id.
    pub run: String,
    /// How it ended.
    pub ended: Ended,
    /// Worktrees kept for a person (a failed or terminal run keeps them all).
    pub kept: Vec<Tree>,
    /// Dispatches started by this invocation.
    pub dispatched: u64,
}

/// Why a run did not start or could not go on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad argument or a plan the preflight refused: nothing ran.
    #[error("{0}")]
    Input(String),
    /// A resume refused, with the reason.
    #[error("{}", .0.message)]
    Refused(Refusal),
    /// The state database.
    #[error("the state database: {0}")]
    Journal(#[from] JournalError),
    /// git.
    #[error("{0}")]
    Worktree(#[from] WorktreeError),
    /// A landing could not be decided (git failed, the target names no commit or has no
    /// verify.yaml): no verdict on the member is recorded, so a resume lands it again.
    #[error(
        "land step `{step}`, member `{item}`: {error}; nothing was recorded for the member: fix that, then `--resume {run}` lands it again"
    )]
    Land {
        /// The run.
        run: String,
        /// The land step.
        step: String,
        /// The member.
        item: String,
        /// What went wrong.
        error: String,
    },
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The step name the run's own worktree is recorded under (no step id can start with `_`).
const RUN_TREE: &str = "_run";

/// A unit's key: the step and, for a fan-out, the member.
type Unit = (String, Option<String>);

/// What a finished piece of work hands back to the loop.
enum Done {
    Dispatch {
        unit: Unit,
        done: Box<Dispatched>,
    },
    Gate {
        step: String,
        verdict: Result<(bool, String), String>,
        ledger: Vec<Dispatched>,
        /// The worktrees it judged, free again.
        judged: Vec<PathBuf>,
    },
    Land {
        step: String,
        item: String,
        branch: String,
        landed: Result<crate::land::LandOutcome, String>,
    },
}

type Work<'a> = Pin<Box<dyn std::future::Future<Output = Done> + 'a>>;

/// The verify.yaml files a run judges by, read back from its records.
struct GateFiles {
    /// The snapshot itself, for a land step's gates.
    snapshot: Option<Snapshot>,
    config: Option<Loaded>,
    files: BTreeMap<String, Loaded>,
}

impl GateFiles {
    fn load(config: &Option<Snapshot>, files: &BTreeMap<String, Snapshot>) -> Result<Self, Error> {
        let load = |s: &Snapshot| s.load().map_err(|e| Error::Input(e.to_string()));
        Ok(GateFiles {
            snapshot: config.clone(),
            config: config.as_ref().map(load).transpose()?,
            files: files
                .iter()
                .map(|(k, s)| Ok((k.clone(), load(s)?)))
                .collect::<Result<_, Error>>()?,
        })
    }
}

/// Drives `launch` to its end, a pause or an interrupt.
pub async fn run(
    launch: Launch,
    settings: &Settings,
    agents: &dyn Agents,
    journal: &mut dyn Journal,
    interrupt: InterruptWatch,
) -> Result<Report, Error> {
    let plan = &launch.plan;
    let args = preflight::arguments(plan, &launch.args).map_err(Error::Input)?;
    let top = worktrees::toplevel(&launch.start_dir)?;
    let resuming = launch.resume.is_some();
    let extra = limits::Extension {
        dispatches: launch.budget_extra.unwrap_or(0),
        wall_clock_sec: launch.wall_clock_extra.map_or(0, |d| d.as_secs().max(1)),
        tokens: launch.tokens_extra.unwrap_or(0),
        cost_usd: launch.cost_extra_usd.unwrap_or(0.0),
    };
    if !resuming && !extra.is_empty() {
        return Err(Error::Input(
            "--budget-extra, --wall-clock-extra, --tokens-extra and --cost-extra extend a paused run; give them with --resume ID"
                .into(),
        ));
    }
    if !(extra.cost_usd.is_finite() && extra.cost_usd >= 0.0) {
        return Err(Error::Input(format!(
            "--cost-extra {}: give a number of US dollars, 0 or more",
            extra.cost_usd
        )));
    }

    // Who the run is: a recorded one checked for resuming, or a new one (recorded once the
    // preflight passed).
    let recorded = match &launch.resume {
        Some(id) => {
            let recorded = journal.recorded(id)?;
            let facts = recorded.as_ref().map(|r| Recorded {
                plan_digest: r.run.plan_digest.clone(),
                args_hash: r.run.args_hash.clone(),
                finished: r.finished,
            });
            resume::check(id, facts.as_ref(), plan, &args).map_err(Error::Refused)?;
            recorded
        }
        None => {
            if let Some(id) = &launch.run_id {
                if !id.parse::<i64>().is_ok_and(|n| n > 0) {
                    return Err(Error::Input(format!(
                        "--run-id `{id}`: a run id is a positive number"
                    )));
                }
                if journal.recorded(id)?.is_some() {
                    return Err(Error::Input(format!(
                        "--run-id {id}: a run with this id is recorded; resume it with --resume {id}, or choose another id"
                    )));
                }
            }
            None
        }
    };
    let shown_id = launch.resume.clone().unwrap_or_else(|| "new".into());

    // The agents: probed once per run; a resume probes what the run recorded and refuses a
    // model that no longer answers.
    let mut probed: BTreeMap<preflight::AgentKey, String> = BTreeMap::new();
    let mut fresh: Vec<Entry> = Vec::new();
    match &recorded {
        Some(run) => {
            for (_, entry) in &run.entries {
                if let Entry::Probed {
                    agent,
                    asked,
                    answered,
                } = entry
                {
                    let key = (agent.clone(), (asked != "default").then(|| asked.clone()));
                    if preflight::probe(agents, &key).await.is_err() {
                        return Err(Error::Refused(Refusal {
                            reason: Reason::ResumeModelUnavailable,
                            message: format!(
                                "run `{shown_id}` dispatched agent `{agent}` as model `{answered}`, which no longer answers its probe; bring the agent back, or start a new run"
                            ),
                        }));
                    }
                    probed.insert(key, answered.clone());
                }
            }
        }
        None => {
            preflight::containment(plan, &top).map_err(Error::Input)?;
            let (config, files) = preflight::gates(plan, &top).map_err(Error::Input)?;
            for key in preflight::agents_used(plan) {
                let answered = preflight::probe(agents, &key)
                    .await
                    .map_err(|e| Error::Input(format!("probe-failed: {e}")))?;
                fresh.push(Entry::Probed {
                    agent: key.0.clone(),
                    asked: key.1.clone().unwrap_or_else(|| "default".into()),
                    answered: answered.clone(),
                });
                probed.insert(key, answered);
            }
            fresh.insert(0, Entry::Gates { config, files });
        }
    }

    // The run's first record, or the resume's extension.
    let base_budget = match &recorded {
        Some(run) => run.run.budget,
        None => launch
            .budget
            .unwrap_or_else(|| Scheduler::default_budget(plan)),
    };
    let run_row = match &recorded {
        Some(run) => run.run.clone(),
        None => {
            let base = plan.base.clone().unwrap_or_else(|| "HEAD".into());
            let base_commit = worktrees::resolve(&top, &base).map_err(|_| {
                Error::Input(format!(
                    "the plan's base `{base}` names no commit in {}; name a branch, tag or commit",
                    top.display()
                ))
            })?;
            NewRun {
                name: plan.name.clone(),
                plan_path: launch.plan_path.clone(),
                started_in: top.to_string_lossy().into_owned(),
                base_commit,
                plan_digest: plan::digest(plan),
                args_hash: plan::args_hash(plan, &args),
                plan_json: String::from_utf8_lossy(&plan::canonical_bytes(plan)).into_owned(),
                args: args.clone(),
                budget: base_budget,
                wall_clock_sec: launch
                    .max_wall_clock
                    .map(|d| d.as_secs().max(1))
                    .or(plan.budget.wall_clock_sec),
                token_cap: plan.budget.tokens,
                cost_cap_usd: plan.budget.cost_usd,
            }
        }
    };
    let mut entries: Vec<(u64, Entry)> = recorded.map(|r| r.entries).unwrap_or_default();
    if !extra.is_empty() {
        let spent = Spent::of(&entries, now_ms());
        let first = Limits {
            dispatches: run_row.budget,
            wall_clock_sec: run_row.wall_clock_sec,
            tokens: run_row.token_cap,
            cost_usd: run_row.cost_cap_usd,
        };
        limits::check_extension(&spent, &first, &extra)
            .map_err(|(reason, message)| Error::Refused(Refusal { reason, message }))?;
        fresh.push(Entry::Extended {
            dispatches: extra.dispatches,
            wall_clock_sec: extra.wall_clock_sec,
            tokens: extra.tokens,
            cost_usd: extra.cost_usd,
        });
    }
    let id = match &launch.resume {
        Some(id) => id.clone(),
        None => journal.create(&run_row, launch.run_id.as_deref())?,
    };
    let trees = Worktrees::new(&top, &id)?;
    fresh.insert(0, Entry::Segment { resume: resuming });

    let mut driver = Driver {
        plan,
        args: &args,
        settings,
        agents,
        journal,
        trees,
        id: id.clone(),
        run: run_row,
        probed,
        entries: Vec::new(),
        made: BTreeMap::new(),
        fresh: BTreeSet::new(),
        started: BTreeSet::new(),
        ok_units: BTreeSet::new(),
        joins_told: BTreeSet::new(),
        failures: BTreeMap::new(),
        dispatched: 0,
    };
    for entry in fresh {
        driver.record(entry)?;
    }
    driver.entries.splice(0..0, std::mem::take(&mut entries));
    let ended = driver.drive(resuming, interrupt).await;
    // Every agent and gate of this invocation is done (or was ended with its work): whatever is
    // still this process's child was adopted from one of them, even a descendant that cleared
    // its environment and so carries no token a gate could claim it by. It ends here.
    greenlight_proc::end_adopted();
    ended
}

struct Driver<'a> {
    plan: &'a Plan,
    args: &'a BTreeMap<String, String>,
    settings: &'a Settings,
    agents: &'a dyn Agents,
    journal: &'a mut dyn Journal,
    trees: Worktrees,
    id: String,
    run: NewRun,
    probed: BTreeMap<preflight::AgentKey, String>,
    /// Everything recorded, this invocation's included.
    entries: Vec<(u64, Entry)>,
    /// The worktrees made, by unit (`None`, `None`: the run's own).
    made: BTreeMap<(Option<String>, Option<String>), Tree>,
    /// Worktrees made by this invocation that no agent has worked in yet: clean, so their
    /// first dispatch needs no reset.
    fresh: BTreeSet<PathBuf>,
    /// Boundaries started (a dispatch or a gate recorded).
    started: BTreeSet<String>,
    /// Units whose last settle was ok.
    ok_units: BTreeSet<Unit>,
    /// Joins whose decision was recorded.
    joins_told: BTreeSet<String>,
    /// Why each unit or gate last failed, for a person.
    failures: BTreeMap<Unit, String>,
    dispatched: u64,
}

impl<'a> Driver<'a> {
    /// Persists `entry`, then keeps it.
    fn record(&mut self, entry: Entry) -> Result<(), Error> {
        self.journal.append(&self.id, &entry)?;
        self.entries.push((now_ms(), entry));
        Ok(())
    }

    /// Persists a scheduler event, then folds it in.
    fn event(&mut self, scheduler: &mut Scheduler<'_>, event: Event) -> Result<(), Error> {
        self.record(Entry::Event {
            event: event.clone(),
            via: None,
        })?;
        self.fold(scheduler, &event)
    }

    /// Folds an event (recorded now or replayed) into the scheduler and this driver's view.
    fn fold(&mut self, scheduler: &mut Scheduler<'_>, event: &Event) -> Result<(), Error> {
        scheduler
            .apply(event)
            .map_err(|m| Error::Input(format!("run `{}`: {m}", self.id)))?;
        match event {
            Event::Dispatched { step, .. } | Event::GateStarted { step } => {
                self.started.insert(step.clone());
            }
            Event::Settled {
                step,
                item,
                outcome,
            } => {
                let unit = (step.clone(), item.clone());
                if *outcome == Outcome::Ok {
                    self.ok_units.insert(unit);
                } else {
                    self.ok_units.remove(&unit);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn limits(&self) -> Limits {
        let (mut dispatches, mut wall) = (self.run.budget, self.run.wall_clock_sec);
        let (mut tokens, mut cost) = (self.run.token_cap, self.run.cost_cap_usd);
        for (_, entry) in &self.entries {
            if let Entry::Extended {
                dispatches: d,
                wall_clock_sec: w,
                tokens: t,
                cost_usd: c,
            } = entry
            {
                dispatches += d;
                if *w > 0 {
                    wall = Some(wall.unwrap_or(0) + w);
                }
                // Only a cap the run has is extended (the extension's check refuses others).
                tokens = tokens.map(|cap| cap + t);
                cost = cost.map(|cap| cap + c);
            }
        }
        Limits {
            dispatches,
            wall_clock_sec: wall,
            tokens,
            cost_usd: cost,
        }
    }

    /// The worktree `unit` runs in: a member's own, or the run's (made from the base). Made now
    /// when it is not yet.
    fn tree_for(&mut self, step: &str, item: Option<&str>) -> Result<Tree, Error> {
        let key = match item {
            Some(item) => (Some(step.to_owned()), Some(item.to_owned())),
            None => (None, None),
        };
        if let Some(tree) = self.made.get(&key) {
            return Ok(tree.clone());
        }
        if let Some(item) = item {
            self.make_members(&[(step.to_owned(), item.to_owned())])?;
            return self.made.get(&key).cloned().ok_or_else(|| {
                Error::Input(format!("the worktree of `{step}` [{item}] was not made"))
            });
        }
        let tree = self.trees.tree(None, None, 0);
        self.refuse_lost(&tree)?;
        self.trees
            .check_branch(&tree)
            .map_err(|e| Error::Input(e.to_string()))?;
        if self.trees.ensure(&tree, &self.run.base_commit)? {
            self.created(&tree)?;
        }
        self.made.insert(key, tree.clone());
        Ok(tree)
    }

    /// Makes the worktrees of `members` (step, item) not made yet, all at once, so a fan-out's
    /// window starts together rather than one `git worktree add` after another. A member starts
    /// from the run's own worktree as its steps left it (what the steps before the fan-out
    /// wrote), or from the base when no step made that worktree yet (nothing was written: the
    /// same tree, without making one nobody works in). Every worktree made is recorded before
    /// an error of another is returned.
    fn make_members(&mut self, members: &[(String, String)]) -> Result<(), Error> {
        let mut wanted: Vec<Tree> = Vec::new();
        for (step, item) in members {
            let key = (Some(step.clone()), Some(item.clone()));
            if self.made.contains_key(&key)
                || wanted
                    .iter()
                    .any(|t| t.item.as_ref() == Some(item) && t.step.as_ref() == Some(step))
            {
                continue;
            }
            wanted.push(self.trees.tree(
                Some(step),
                Some(item),
                member_index(self.plan, step, item),
            ));
        }
        if wanted.is_empty() {
            return Ok(());
        }
        for tree in &wanted {
            self.refuse_lost(tree)?;
        }
        self.trees
            .check_branches(&wanted)
            .map_err(|e| Error::Input(e.to_string()))?;
        let from = match self.made.get(&(None, None)) {
            Some(own) => self.trees.head(own)?,
            None => self.run.base_commit.clone(),
        };
        let mut first_error = None;
        for (tree, made) in wanted.iter().zip(self.trees.ensure_all(&wanted, &from)) {
            match made {
                Ok(fresh) => {
                    if fresh {
                        self.created(tree)?;
                        self.fresh.insert(tree.path.clone());
                    }
                    self.made
                        .insert((tree.step.clone(), tree.item.clone()), tree.clone());
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Refuses to make `tree` again when the run recorded making it: it is not on disk (replay
    /// takes every recorded tree that is), so the work done in it is gone with it (made on
    /// another machine, or removed by hand), and a fresh tree from the base would be judged and
    /// landed in its place.
    fn refuse_lost(&self, tree: &Tree) -> Result<(), Error> {
        let made_at = self
            .entries
            .iter()
            .rev()
            .find_map(|(_, entry)| match entry {
                Entry::Worktree {
                    step,
                    item,
                    path,
                    state,
                    ..
                } if state == "created"
                    && *item == tree.item
                    && (item.is_none() || tree.step.as_ref() == Some(step)) =>
                {
                    Some(path.clone())
                }
                _ => None,
            });
        let Some(made_at) = made_at else {
            return Ok(());
        };
        let unit = match (&tree.step, &tree.item) {
            (Some(step), Some(item)) => format!("`{step}` [{item}]"),
            _ => "the run".to_owned(),
        };
        Err(Error::Refused(Refusal {
            reason: Reason::StaleInputRefused,
            message: format!(
                "run `{}` made the worktree of {unit} at {made_at}, and it is not there now (made on another machine, or removed): the work done in it cannot be judged or landed here; resume where it was made, or start a new run",
                self.id,
            ),
        }))
    }

    /// Records that `tree` was made.
    fn created(&mut self, tree: &Tree) -> Result<(), Error> {
        self.record(Entry::Worktree {
            step: tree.step.clone().unwrap_or_else(|| RUN_TREE.to_owned()),
            item: tree.item.clone(),
            branch: tree.branch.clone(),
            path: tree.path.to_string_lossy().into_owned(),
            state: "created".into(),
        })
    }

    /// Every worktree the run recorded making, whether made by this invocation or not.
    fn recorded_trees(&self) -> Vec<Tree> {
        let mut out: Vec<Tree> = Vec::new();
        for (_, entry) in &self.entries {
            if let Entry::Worktree {
                step, item, state, ..
            } = entry
                && state == "created"
            {
                let tree = match item {
                    Some(item) => {
                        self.trees
                            .tree(Some(step), Some(item), member_index(self.plan, step, item))
                    }
                    None => self.trees.tree(None, None, 0),
                };
                if !out.contains(&tree) {
                    out.push(tree);
                }
            }
        }
        out
    }

    fn agent_of(&self, step: &str) -> Option<&'a plan::Agent> {
        self.plan
            .steps
            .iter()
            .find(|s| s.id == step)
            .and_then(|s| match &s.kind {
                Kind::Agent(a) => Some(a),
                Kind::Fanout(f) => Some(&f.template),
                _ => None,
            })
    }

    fn model_for(
        &self,
        agent: &Option<String>,
        model: &Option<String>,
    ) -> Option<(String, String)> {
        let spec = agent.as_ref().or(self.plan.agent.as_ref())?.clone();
        let key = (
            spec.clone(),
            model.clone().or_else(|| self.plan.model.clone()),
        );
        let answered = self.probed.get(&key)?.clone();
        Some((spec, answered))
    }

    /// The replayed cursor: the recorded events, less what never settled, plus a check that
    /// each finished `file` unit's writes still exist.
    fn replay(&mut self, scheduler: &mut Scheduler<'_>) -> Result<(), Error> {
        let recorded: Vec<Entry> = self.entries.iter().map(|(_, e)| e.clone()).collect();
        let events = replay::events(&recorded);
        let mut fixes = Vec::new();
        for (step, item) in replay::unsettled(&events) {
            fixes.push(Entry::Abandoned { step, item });
        }
        let mut done_units: Vec<Unit> = Vec::new();
        for event in &events {
            if let Event::Settled {
                step,
                item,
                outcome: Outcome::Ok,
            } = event
            {
                done_units.push((step.clone(), item.clone()));
            }
        }
        for (step, item) in done_units {
            let Some(agent) = self.agent_of(&step) else {
                continue;
            };
            if agent.deliverable != plan::Deliverable::File {
                continue;
            }
            let tree = match &item {
                Some(i) => self
                    .trees
                    .tree(Some(&step), Some(i), member_index(self.plan, &step, i)),
                None => self.trees.tree(None, None, 0),
            };
            let no_args = BTreeMap::new();
            if let Some(missing) = agent
                .writes
                .iter()
                .map(|w| plan::fill(w, item.as_deref(), &no_args))
                .find(|w| !tree.path.join(w).exists())
            {
                fixes.push(Entry::Rerun {
                    step: step.clone(),
                    item: item.clone(),
                    missing,
                });
            } else if tree.path.exists() {
                // Settled and not yet committed when the run was killed: the work is kept.
                self.trees
                    .commit(&tree, &commit_message(&self.id, &step, item.as_deref()))?;
            }
        }
        for fix in fixes {
            self.record(fix)?;
        }
        let recorded: Vec<Entry> = self.entries.iter().map(|(_, e)| e.clone()).collect();
        for event in replay::events(&recorded) {
            self.fold(scheduler, &event)?;
        }
        for tree in self.recorded_trees() {
            if tree.path.join(".git").exists() {
                let key = (tree.step.clone(), tree.item.clone());
                self.made.insert(key, tree);
            }
        }
        Ok(())
    }

    /// Records each join's decision once all its members finished.
    fn tell_joins(&mut self) -> Result<(), Error> {
        for step in &self.plan.steps {
            let Kind::Join(join) = &step.kind else {
                continue;
            };
            if self.joins_told.contains(&step.id) {
                continue;
            }
            let Some(Kind::Fanout(f)) = self
                .plan
                .steps
                .iter()
                .find(|s| s.id == join.fanout)
                .map(|s| &s.kind)
            else {
                continue;
            };
            let active = usize::try_from(plan::active_items(f)).unwrap_or(usize::MAX);
            let members = &f.items[..active.min(f.items.len())];
            let mut outcomes = Vec::new();
            let (mut passed_items, mut failed_items) = (Vec::new(), Vec::new());
            for item in members {
                let unit = (join.fanout.clone(), Some(item.clone()));
                match self.settled(&unit) {
                    Some(ok) => {
                        outcomes.push(ok);
                        if ok {
                            &mut passed_items
                        } else {
                            &mut failed_items
                        }
                        .push(item.clone());
                    }
                    None => break,
                }
            }
            if outcomes.len() == members.len() {
                let passed = crate::schedule::decide(join.policy, f.items.len() as u64, &outcomes);
                self.joins_told.insert(step.id.clone());
                self.record(Entry::JoinDecided {
                    step: step.id.clone(),
                    policy: join.policy.text(),
                    passed,
                    passed_items,
                    failed_items,
                })?;
            }
        }
        Ok(())
    }

    /// Whether `unit` finished for good: `Some(ok)`; `None` while it may run again.
    fn settled(&self, unit: &Unit) -> Option<bool> {
        let mut last = None;
        for (_, entry) in &self.entries {
            if let Entry::Event {
                event:
                    Event::Settled {
                        step,
                        item,
                        outcome,
                    },
                ..
            } = entry
                && (step, item) == (&unit.0, &unit.1)
            {
                last = Some(*outcome);
            }
        }
        match last? {
            Outcome::Ok => Some(true),
            Outcome::Failed { class, .. } => {
                // A failure with a class the step retries on, and attempts left, runs again.
                let agent = self.agent_of(&unit.0)?;
                let attempts = self
                    .entries
                    .iter()
                    .filter(|(_, e)| {
                        matches!(e, Entry::Event { event: Event::Dispatched { step, item, .. }, .. }
                            if (step, item) == (&unit.0, &unit.1))
                    })
                    .count() as u64;
                let retried = class.is_some_and(|c| {
                    agent
                        .retry
                        .as_ref()
                        .is_some_and(|r| r.on.contains(&c) && attempts < r.max_attempts)
                });
                (!retried).then_some(false)
            }
        }
    }

    /// The worktrees a gate step judges: the members of the fan-out whose join it needs that
    /// finished well, or else the run's own.
    fn gate_trees(&mut self, step: &plan::Step) -> Result<Vec<Tree>, Error> {
        let mut out = Vec::new();
        for need in &step.needs {
            let Some(Kind::Join(join)) = self
                .plan
                .steps
                .iter()
                .find(|s| &s.id == need)
                .map(|s| &s.kind)
            else {
                continue;
            };
            let Some(Kind::Fanout(f)) = self
                .plan
                .steps
                .iter()
                .find(|s| s.id == join.fanout)
                .map(|s| &s.kind)
            else {
                continue;
            };
            for item in &f.items {
                if self
                    .ok_units
                    .contains(&(join.fanout.clone(), Some(item.clone())))
                {
                    out.push(self.tree_for(&join.fanout, Some(item))?);
                }
            }
        }
        if out.is_empty() {
            out.push(self.tree_for(&step.id, None)?);
        }
        Ok(out)
    }

    async fn drive(
        mut self,
        resuming: bool,
        mut interrupt: InterruptWatch,
    ) -> Result<Report, Error> {
        let plan = self.plan;
        let limits = self.limits();
        let mut scheduler = Scheduler::new(plan, limits.dispatches);
        if resuming {
            self.replay(&mut scheduler)?;
        }
        let gate_files = self.gate_files()?;
        let gate_files = &gate_files;
        let mut work: FuturesUnordered<Work<'_>> = FuturesUnordered::new();
        // The worktrees an agent works in now, and those a gate judges now: a worktree holds one
        // of them at a time, so no gate judges a tree an agent is still writing. Gates and
        // landings otherwise run beside agents: their runner ends only what carries a gate's
        // own token (`sweep_adopted` off), and the run's end sweeps whatever else is left.
        let mut busy_trees: BTreeSet<PathBuf> = BTreeSet::new();
        let mut judged_trees: BTreeSet<PathBuf> = BTreeSet::new();
        // One landing at a time: each lands on a target another may be moving.
        let mut landing = false;
        let ended = loop {
            self.tell_joins()?;
            // A limit reached (or a person's pause request) starts no new boundary.
            let stop_new = match Spent::of(&self.entries, now_ms()).over(&limits) {
                Some(why) => Some((Some(Reason::BudgetExhausted), why)),
                None if self.journal.pause_requested(&self.id)? => Some((
                    Some(Reason::PausedByUser),
                    "a person asked the run to pause (`greenlight workflow pause`)".to_owned(),
                )),
                None => None,
            };
            let mut blocked: Option<String> = None;
            let mut stop: Option<Ended> = None;
            let actions = scheduler.next();
            // The members about to start get their worktrees at once.
            let members: Vec<(String, String)> = actions
                .iter()
                .filter_map(|a| match a {
                    Action::Dispatch {
                        step,
                        item: Some(item),
                        ..
                    } if stop_new.is_none() || self.started.contains(step) => {
                        Some((step.clone(), item.clone()))
                    }
                    _ => None,
                })
                .collect();
            self.make_members(&members)?;
            for action in actions {
                let step_of = |a: &Action| match a {
                    Action::Dispatch { step, .. } | Action::RunGate { step } => Some(step.clone()),
                    _ => None,
                };
                if let (Some(step), Some(_)) = (step_of(&action), &stop_new)
                    && !self.started.contains(&step)
                {
                    blocked.get_or_insert(step);
                    continue;
                }
                match action {
                    Action::Dispatch {
                        step,
                        item,
                        attempt,
                    } => {
                        let tree = self.tree_for(&step, item.as_deref())?;
                        // One agent at a time in a worktree: a second waits for the first.
                        if busy_trees.contains(&tree.path) || judged_trees.contains(&tree.path) {
                            continue;
                        }
                        let Some(agent) = self.agent_of(&step) else {
                            continue;
                        };
                        let Some((spec, model)) = self.model_for(&agent.agent, &agent.model) else {
                            return Err(Error::Input(format!(
                                "step `{step}` names an agent the run did not probe"
                            )));
                        };
                        // Every attempt starts from the worktree's last accepted commit (one
                        // just made is at it already).
                        if !self.fresh.remove(&tree.path) {
                            self.trees.reset(&tree)?;
                        }
                        let (dispatcher, _) = self
                            .agents
                            .dispatcher(&spec, Some(&model), &tree.env())
                            .map_err(Error::Input)?;
                        let event = Event::Dispatched {
                            step: step.clone(),
                            item: item.clone(),
                            attempt,
                        };
                        self.record(Entry::Event {
                            event: event.clone(),
                            via: Some(journal::Via {
                                family: dispatcher.family().as_str().to_owned(),
                                model: model.clone(),
                                worktree: tree.path.to_string_lossy().into_owned(),
                            }),
                        })?;
                        self.fold(&mut scheduler, &event)?;
                        self.dispatched += 1;
                        let prompt = plan::fill(&agent.prompt, item.as_deref(), self.args);
                        let timeout = self.settings.agent_timeout;
                        busy_trees.insert(tree.path.clone());
                        work.push(Box::pin(async move {
                            let done = dispatch::run(
                                dispatcher.as_ref(),
                                Job {
                                    agent,
                                    step: &step,
                                    item: item.as_deref(),
                                    attempt,
                                    prompt,
                                    model,
                                    tree: &tree,
                                    default_timeout: timeout,
                                },
                            )
                            .await;
                            Done::Dispatch {
                                unit: (step, item),
                                done: Box::new(done),
                            }
                        }));
                    }
                    Action::RunGate { step } => {
                        let Some(gate_step) = plan.steps.iter().find(|s| s.id == step) else {
                            continue;
                        };
                        let Kind::Gate(gate) = &gate_step.kind else {
                            continue;
                        };
                        let targets = self.gate_trees(gate_step)?;
                        if targets
                            .iter()
                            .any(|t| busy_trees.contains(&t.path) || judged_trees.contains(&t.path))
                        {
                            continue;
                        }
                        let verdict_agent = match &gate.verdict {
                            Some(v) => {
                                let (spec, model) = self
                                    .model_for(&v.agent, &v.model)
                                    .ok_or_else(|| {
                                        Error::Input(format!(
                                            "gate `{step}`'s verdict names an agent the run did not probe"
                                        ))
                                    })?;
                                let (d, _) = self
                                    .agents
                                    .dispatcher(&spec, Some(&model), &targets[0].env())
                                    .map_err(Error::Input)?;
                                Some((d, model))
                            }
                            None => None,
                        };
                        self.event(&mut scheduler, Event::GateStarted { step: step.clone() })?;
                        let judged: Vec<PathBuf> = targets.iter().map(|t| t.path.clone()).collect();
                        judged_trees.extend(judged.iter().cloned());
                        let settings = &self.settings.gates;
                        let agent_timeout = self.settings.agent_timeout;
                        let mut gate_interrupt = interrupt.clone();
                        let args = self.args;
                        let base = self.run.base_commit.clone();
                        work.push(Box::pin(async move {
                            let mut ledger = Vec::new();
                            let verdict = judge(
                                gate,
                                &step,
                                &targets,
                                &base,
                                gate_files,
                                settings,
                                verdict_agent,
                                agent_timeout,
                                args,
                                &mut ledger,
                                &mut gate_interrupt,
                            )
                            .await;
                            Done::Gate {
                                step,
                                verdict,
                                ledger,
                                judged,
                            }
                        }));
                    }
                    Action::Land { step, item } => {
                        if landing {
                            continue;
                        }
                        let Some(Kind::Land(land)) =
                            plan.steps.iter().find(|s| s.id == step).map(|s| &s.kind)
                        else {
                            continue;
                        };
                        let member = self.tree_for(&land.fanout, Some(&item))?;
                        self.record(Entry::Event {
                            event: Event::LandStarted {
                                step: step.clone(),
                                item: item.clone(),
                            },
                            via: Some(journal::Via {
                                family: String::new(),
                                model: String::new(),
                                worktree: member.branch.clone(),
                            }),
                        })?;
                        self.fold(
                            &mut scheduler,
                            &Event::LandStarted {
                                step: step.clone(),
                                item: item.clone(),
                            },
                        )?;
                        landing = true;
                        let repo = self.trees.top().to_path_buf();
                        let run_id = self.id.clone();
                        let options = gate_step::options(
                            &self.settings.gates,
                            repo.clone(),
                            Vec::new(),
                            &self.run.base_commit,
                        );
                        let mut land_interrupt = interrupt.clone();
                        work.push(Box::pin(async move {
                            let landing = crate::land::Landing {
                                repo: &repo,
                                run_id: &run_id,
                                step: &step,
                                item: &item,
                                member: &member.branch,
                                target: &land.target,
                                strategy: land.strategy,
                                gates: &land.gates,
                                judged_by: match &gate_files.snapshot {
                                    Some(s) => crate::land::GateSource::Snapshot(s.clone()),
                                    None => crate::land::GateSource::TargetTip,
                                },
                            };
                            let landed = crate::land::land(&landing, &options, &mut land_interrupt)
                                .await
                                .map_err(|e| e.to_string());
                            Done::Land {
                                branch: member.branch.clone(),
                                step,
                                item,
                                landed,
                            }
                        }));
                    }
                    Action::Pause { step } => {
                        let Some(Kind::Pause(pause)) =
                            plan.steps.iter().find(|s| s.id == step).map(|s| &s.kind)
                        else {
                            continue;
                        };
                        if resuming && self.args.contains_key(&pause.resume_arg) {
                            self.event(&mut scheduler, Event::Resumed { step: step.clone() })?;
                            stop = None;
                            break;
                        }
                        stop = Some(Ended::Paused {
                            step: step.clone(),
                            reason: None,
                            message: format!(
                                "paused at `{step}` ({}); resume with --arg {}=VALUE",
                                pause.state, pause.resume_arg
                            ),
                        });
                    }
                    Action::AwaitBudget {
                        before,
                        need,
                        left,
                        reason,
                    } => {
                        stop = Some(Ended::Paused {
                            step: before.clone(),
                            reason: Some(reason),
                            message: format!(
                                "paused before `{before}`: it may take {need} dispatch units and {left} are left; resume with --budget-extra N"
                            ),
                        });
                    }
                    Action::Finished(end) => {
                        stop = Some(match end {
                            End::Completed => Ended::Completed,
                            End::Terminal(label) => Ended::Terminal(label),
                            End::Failed { step, reason } => Ended::Failed {
                                detail: self.failure_detail(&step),
                                step,
                                reason,
                            },
                        });
                    }
                }
            }
            if work.is_empty() {
                if let Some(ended) = stop {
                    break ended;
                }
                if let (Some(step), Some((reason, why))) = (blocked, stop_new.clone()) {
                    break Ended::Paused {
                        message: format!("paused before `{step}`: {why}"),
                        step,
                        reason,
                    };
                }
                // A pause step resumed, or the scheduler has more now: ask again.
                continue;
            }
            let done = tokio::select! {
                done = work.next() => done,
                _ = interrupt.changed() => {
                    // Dropping the work ends every agent's and gate's process group; what was
                    // in flight never settled, and a resume dispatches it again.
                    drop(work);
                    let signal = (*interrupt.borrow()).unwrap_or(Interrupt::Int);
                    break Ended::Interrupted(signal);
                }
            };
            let Some(done) = done else { continue };
            // A gate or landing cut short by a signal reached no verdict: nothing is recorded
            // for it (a resume starts it again), and the run stops as interrupted.
            if let Some(signal) = *interrupt.borrow()
                && matches!(
                    &done,
                    Done::Gate {
                        verdict: Err(_),
                        ..
                    } | Done::Land { landed: Err(_), .. }
                )
            {
                break Ended::Interrupted(signal);
            }
            match done {
                Done::Dispatch { unit, done } => {
                    let tree = self.tree_for(&unit.0, unit.1.as_deref())?;
                    busy_trees.remove(&tree.path);
                    let outcome = done.outcome;
                    self.record(Entry::Ledger {
                        row: done.row.clone(),
                    })?;
                    self.record(Entry::Event {
                        via: None,
                        event: Event::Settled {
                            step: unit.0.clone(),
                            item: unit.1.clone(),
                            outcome,
                        },
                    })?;
                    self.fold(
                        &mut scheduler,
                        &Event::Settled {
                            step: unit.0.clone(),
                            item: unit.1.clone(),
                            outcome,
                        },
                    )?;
                    if let Some(detail) = &done.detail {
                        self.failures.insert(unit.clone(), detail.clone());
                    }
                    if outcome == Outcome::Ok {
                        self.trees
                            .commit(&tree, &commit_message(&self.id, &unit.0, unit.1.as_deref()))?;
                    }
                }
                Done::Land {
                    step,
                    item,
                    branch,
                    landed,
                } => {
                    landing = false;
                    let (failure, outcome, commit, summary) = match &landed {
                        Ok(outcome) => {
                            let commit = match outcome {
                                crate::land::LandOutcome::Landed { new, .. } => Some(new.clone()),
                                _ => None,
                            };
                            let failure = outcome.failure();
                            let word = failure.map_or("landed", |r| r.as_str()).to_owned();
                            (failure, word, commit, outcome.summary())
                        }
                        // Could not land: no verdict on the member (an interrupt stopped the
                        // run above). The run ends with the error; a resume lands it again.
                        Err(error) => {
                            return Err(Error::Land {
                                run: self.id.clone(),
                                step,
                                item,
                                error: error.clone(),
                            });
                        }
                    };
                    if failure.is_some() {
                        self.failures
                            .insert((step.clone(), Some(item.clone())), summary.clone());
                    }
                    self.record(Entry::LandEnded {
                        step: step.clone(),
                        item: item.clone(),
                        branch,
                        outcome,
                        commit,
                        summary,
                    })?;
                    self.event(
                        &mut scheduler,
                        Event::Landed {
                            step,
                            item,
                            failure,
                        },
                    )?;
                }
                Done::Gate {
                    step,
                    verdict,
                    ledger,
                    judged,
                } => {
                    for tree in &judged {
                        judged_trees.remove(tree);
                    }
                    for row in ledger {
                        self.record(Entry::Ledger { row: row.row })?;
                    }
                    match verdict {
                        Ok((passed, detail)) => {
                            if !passed {
                                self.failures.insert((step.clone(), None), detail);
                            }
                            self.event(&mut scheduler, Event::Judged { step, passed })?;
                        }
                        Err(why) => {
                            // Could not judge: never a pass. The gate is judged failed.
                            self.failures.insert((step.clone(), None), why);
                            self.event(
                                &mut scheduler,
                                Event::Judged {
                                    step,
                                    passed: false,
                                },
                            )?;
                        }
                    }
                }
            }
        };
        self.finish(ended)
    }

    fn gate_files(&self) -> Result<GateFiles, Error> {
        for (_, entry) in &self.entries {
            if let Entry::Gates { config, files } = entry {
                return GateFiles::load(config, files);
            }
        }
        Ok(GateFiles {
            snapshot: None,
            config: None,
            files: BTreeMap::new(),
        })
    }

    fn failure_detail(&self, step: &str) -> String {
        // A join failed because of its fan-out's members: theirs are the reasons to show.
        let step = match self
            .plan
            .steps
            .iter()
            .find(|s| s.id == step)
            .map(|s| &s.kind)
        {
            Some(Kind::Join(join)) => join.fanout.as_str(),
            _ => step,
        };
        self.failures
            .iter()
            .filter(|((s, _), _)| s == step)
            .map(|((_, item), d)| match item {
                Some(item) => format!("{item}: {d}"),
                None => d.clone(),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Records how the invocation ended and tidies the worktrees: removed when the run
    /// completed, kept (and listed) when it failed or ended at a terminal route, left for the
    /// resume otherwise.
    fn finish(mut self, ended: Ended) -> Result<Report, Error> {
        let mut kept = Vec::new();
        match &ended {
            Ended::Completed | Ended::Failed { .. } | Ended::Terminal(_) => {
                let (status, step, reason) = match &ended {
                    Ended::Completed => ("completed", None, None),
                    Ended::Failed { step, reason, .. } => {
                        ("failed", Some(step.clone()), Some(*reason))
                    }
                    Ended::Terminal(label) => ("terminal", Some(label.clone()), None),
                    _ => ("completed", None, None),
                };
                let keep = status != "completed";
                let trees = self.recorded_trees();
                if keep {
                    kept.clone_from(&trees);
                } else {
                    self.trees.remove_all(&trees)?;
                }
                for tree in trees {
                    self.record(Entry::Worktree {
                        step: tree.step.clone().unwrap_or_else(|| RUN_TREE.to_owned()),
                        item: tree.item.clone(),
                        branch: tree.branch.clone(),
                        path: tree.path.to_string_lossy().into_owned(),
                        state: if keep { "kept" } else { "removed" }.into(),
                    })?;
                }
                if !keep {
                    self.trees.tidy();
                }
                self.record(Entry::Finished {
                    status: status.into(),
                    step,
                    reason,
                })?;
            }
            Ended::Paused {
                step,
                reason,
                message,
            } => {
                self.record(Entry::Paused {
                    reason: *reason,
                    step: step.clone(),
                    message: message.clone(),
                })?;
            }
            Ended::Interrupted(_) => {}
        }
        Ok(Report {
            run: self.id,
            ended,
            kept,
            dispatched: self.dispatched,
        })
    }
}

/// A member's `CM_WORKTREE_INDEX`: 1 and up, in plan order over every fan-out's items (the
/// run's own worktree is 0).
fn member_index(plan: &Plan, step: &str, item: &str) -> u64 {
    let mut index = 0u64;
    for s in &plan.steps {
        if let Kind::Fanout(f) = &s.kind {
            for i in &f.items {
                index += 1;
                if s.id == step && i == item {
                    return index;
                }
            }
        }
    }
    index + 1
}

fn commit_message(run: &str, step: &str, item: Option<&str>) -> String {
    match item {
        Some(item) => format!("workflow wf-{run}: {step} [{item}]"),
        None => format!("workflow wf-{run}: {step}"),
    }
}

/// A gate step judged: its verify.yaml gates in every target worktree (all must pass), or its
/// verdict agent's `GATE: PASS|FAIL`. `Err`: it could not judge, which is never a pass.
#[allow(clippy::too_many_arguments)]
async fn judge(
    gate: &plan::Gate,
    step: &str,
    targets: &[Tree],
    base: &str,
    files: &GateFiles,
    settings: &GateSettings,
    verdict_agent: Option<(std::sync::Arc<dyn greenlight_agent::Dispatcher>, String)>,
    agent_timeout: Duration,
    args: &BTreeMap<String, String>,
    ledger: &mut Vec<Dispatched>,
    interrupt: &mut InterruptWatch,
) -> Result<(bool, String), String> {
    if let (Some(verdict), Some((dispatcher, model))) = (&gate.verdict, verdict_agent) {
        let agent = plan::Agent {
            prompt: verdict.prompt.clone(),
            agent: verdict.agent.clone(),
            model: verdict.model.clone(),
            deliverable: plan::Deliverable::ReturnValue,
            reads: Vec::new(),
            writes: Vec::new(),
            idempotent: false,
            retry: None,
            timeout_sec: verdict.timeout_sec,
            extensions: BTreeMap::new(),
        };
        let done = dispatch::run(
            dispatcher.as_ref(),
            Job {
                agent: &agent,
                step,
                item: None,
                attempt: 1,
                prompt: plan::fill(&verdict.prompt, None, args),
                model,
                tree: &targets[0],
                default_timeout: agent_timeout,
            },
        )
        .await;
        let verdict = dispatch::verdict_of(&done);
        ledger.push(done);
        return match verdict {
            Ok(true) => Ok((true, String::new())),
            Ok(false) => Ok((false, "the verdict agent answered GATE: FAIL".into())),
            Err((reason, why)) => Err(format!("{reason}: {why}")),
        };
    }
    let (config, only) = match &gate.verify {
        Some(file) => (files.files.get(file), None),
        None => (files.config.as_ref(), Some(gate.gates.clone())),
    };
    let config = config.ok_or("the run recorded no verify.yaml for this gate")?;
    let mut failed = Vec::new();
    for tree in targets {
        let judged = gate_step::run(config, only.clone(), tree, base, settings, interrupt).await?;
        if !judged.passed {
            let at = tree
                .item
                .clone()
                .unwrap_or_else(|| "the run's worktree".into());
            failed.push(format!("{at}: {}", judged.failed.join(", ")));
        }
    }
    if failed.is_empty() {
        Ok((true, String::new()))
    } else {
        Ok((false, format!("gates failed in {}", failed.join("; "))))
    }
}
