//! The scheduler's decisions, pure: from a checked plan and what has been recorded, what to do
//! now.
//!
//! The one rule that keeps resume exact: the scheduler holds nothing but what [`Scheduler::apply`]
//! folded in from recorded [`Event`]s, so replaying a run's events rebuilds the same cursor, and a
//! step that finished is never started again. No clock, no I/O: the runtime runs each
//! [`Action`], records what happened as an event, and asks again.
//!
//! Budget: a boundary (an agent step, a fan-out, a gate) reserves its worst case
//! ([`crate::plan::worst_case`]) when it starts; one that does not fit what is left is not
//! started, and when nothing else can run the run pauses before it, never halfway through.

use std::collections::{BTreeMap, BTreeSet};

use greenlight_types::Reason;

use crate::plan::{self, FailureClass, Fanout, JoinPolicy, Kind, Plan, Step};

/// What happened, as the runtime records it (and stores, as JSON: the field names are the
/// stored contract a resume reads back).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    /// A dispatch started: `step`'s agent (or fan-out member `item`), attempt `attempt`.
    Dispatched {
        /// The agent or fan-out step.
        step: String,
        /// The member's item key, for a fan-out.
        item: Option<String>,
        /// 1-based, counting the first.
        attempt: u64,
    },
    /// That dispatch ended.
    Settled {
        /// The agent or fan-out step.
        step: String,
        /// The member's item key, for a fan-out.
        item: Option<String>,
        /// Ok, or why not.
        outcome: Outcome,
    },
    /// A gate step started.
    GateStarted {
        /// The gate step.
        step: String,
    },
    /// A gate step's verdict.
    Judged {
        /// The gate step.
        step: String,
        /// Whether the work passed.
        passed: bool,
    },
    /// A paused run was resumed with this pause's argument.
    Resumed {
        /// The pause step.
        step: String,
    },
    /// A member's landing started.
    LandStarted {
        /// The land step.
        step: String,
        /// The member.
        item: String,
    },
    /// A member landed, or did not (and why).
    Landed {
        /// The land step.
        step: String,
        /// The member.
        item: String,
        /// `None`: the target advanced.
        failure: Option<Reason>,
    },
}

/// How a dispatch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// The agent delivered.
    Ok,
    /// It did not: the reason, and the failure's class when it has one a retry may name.
    Failed {
        /// Why, from the one closed list.
        reason: Reason,
        /// The class `retry.on` is matched against; `None` is never retried.
        class: Option<FailureClass>,
    },
}

/// What the runtime should do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Dispatch `step`'s agent (or member `item`), attempt `attempt`.
    Dispatch {
        /// The agent or fan-out step.
        step: String,
        /// The member's item key, for a fan-out.
        item: Option<String>,
        /// 1-based.
        attempt: u64,
    },
    /// Run a gate step and record its verdict.
    RunGate {
        /// The gate step.
        step: String,
    },
    /// Land one member of a fan-out.
    Land {
        /// The land step.
        step: String,
        /// The member.
        item: String,
    },
    /// Nothing else can run: stop at this pause until resumed with its argument.
    Pause {
        /// The pause step.
        step: String,
    },
    /// Nothing else can run and the next boundary's worst case does not fit: stop before it.
    AwaitBudget {
        /// The boundary that could not reserve.
        before: String,
        /// Its worst case, in dispatch units.
        need: u64,
        /// What is left.
        left: u64,
        /// Always [`Reason::BudgetExhausted`].
        reason: Reason,
    },
    /// The run is over.
    Finished(End),
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// Every step finished.
    Completed,
    /// A gate's fail route ended the run at this label.
    Terminal(String),
    /// A step failed, for this reason.
    Failed {
        /// The step.
        step: String,
        /// Why.
        reason: Reason,
    },
}

/// An event that does not fit the plan: a record from another plan, or a corrupt one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// What did not fit.
    pub event: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a recorded event does not fit the plan: {}", self.event)
    }
}

/// One dispatchable unit: an agent step, or one member of a fan-out.
#[derive(Debug, Clone, Default)]
struct Unit {
    /// The number of its last dispatch, counted over every round.
    attempts: u64,
    /// Its dispatches before this round: a redo starts a new round, whose retries are counted
    /// from here, and whose first dispatch is numbered after the last round's (every dispatch
    /// of a unit has a number of its own, as the ledger keeps them).
    round_start: u64,
    in_flight: bool,
    /// `None` while it may still run.
    done: Option<Result<(), Reason>>,
}

#[derive(Debug, Clone, Default)]
struct GateRun {
    in_flight: bool,
    passed: Option<bool>,
    redos: u64,
}

type UnitKey = (String, Option<String>);

/// The cursor of one run of a plan.
pub struct Scheduler<'p> {
    plan: &'p Plan,
    /// The plan's steps by id (the first, should a checked plan ever repeat one).
    by_id: BTreeMap<&'p str, &'p Step>,
    /// Dispatch units the run may reserve in all.
    budget: u64,
    units: BTreeMap<UnitKey, Unit>,
    gates: BTreeMap<String, GateRun>,
    resumed: BTreeSet<String>,
    /// Per land step and member: `None` while landing.
    landings: BTreeMap<(String, String), Option<Option<Reason>>>,
    /// Boundaries that reserved their worst case.
    started: BTreeSet<String>,
    terminal: Option<String>,
    failure: Option<(String, Reason)>,
}

impl<'p> Scheduler<'p> {
    /// A run that has recorded nothing yet. `budget` is the run's dispatch units (the plan's
    /// `budget.dispatches`, its worst case when it has none, plus any extension).
    pub fn new(plan: &'p Plan, budget: u64) -> Self {
        let mut by_id = BTreeMap::new();
        for step in &plan.steps {
            by_id.entry(step.id.as_str()).or_insert(step);
        }
        Scheduler {
            plan,
            by_id,
            budget,
            units: BTreeMap::new(),
            gates: BTreeMap::new(),
            resumed: BTreeSet::new(),
            landings: BTreeMap::new(),
            started: BTreeSet::new(),
            terminal: None,
            failure: None,
        }
    }

    /// The dispatch units the run may use when neither the plan nor the run sets a budget.
    pub fn default_budget(plan: &Plan) -> u64 {
        plan.budget
            .dispatches
            .unwrap_or_else(|| plan::summary(plan).worst_case_dispatches)
    }

    /// Units reserved by the boundaries started so far.
    pub fn reserved(&self) -> u64 {
        self.started
            .iter()
            .filter_map(|id| self.step(id))
            .map(|s| plan::worst_case(self.plan, s))
            .sum()
    }

    fn step(&self, id: &str) -> Option<&'p Step> {
        self.by_id.get(id).copied()
    }

    /// Folds one recorded event in.
    pub fn apply(&mut self, event: &Event) -> Result<(), Mismatch> {
        let mismatch = || Mismatch {
            event: format!("{event:?}"),
        };
        match event {
            Event::Dispatched {
                step,
                item,
                attempt,
            } => {
                self.agent_of(step, item.as_deref()).ok_or_else(mismatch)?;
                let unit = self.units.entry((step.clone(), item.clone())).or_default();
                // A unit that finished is never dispatched again; a record that says otherwise
                // is not this plan's (or not a record greenlight wrote).
                if unit.done.is_some() || unit.in_flight {
                    return Err(mismatch());
                }
                self.started.insert(step.clone());
                unit.attempts = *attempt;
                unit.in_flight = true;
            }
            Event::Settled {
                step,
                item,
                outcome,
            } => {
                let agent = self.agent_of(step, item.as_deref()).ok_or_else(mismatch)?;
                let unit = self
                    .units
                    .get_mut(&(step.clone(), item.clone()))
                    .ok_or_else(mismatch)?;
                unit.in_flight = false;
                unit.done = match outcome {
                    Outcome::Ok => Some(Ok(())),
                    Outcome::Failed { reason, class } => {
                        let retry = agent.retry.as_ref();
                        let retried = class
                            .is_some_and(|c| retry.is_some_and(|r| r.on.contains(&c)))
                            && unit.attempts - unit.round_start
                                < retry.map_or(1, |r| r.max_attempts);
                        if retried { None } else { Some(Err(*reason)) }
                    }
                };
                if let (Some(Err(reason)), None) = (unit.done, item) {
                    self.failure.get_or_insert((step.clone(), reason));
                }
            }
            Event::GateStarted { step } => {
                self.gate_of(step).ok_or_else(mismatch)?;
                self.started.insert(step.clone());
                self.gates.entry(step.clone()).or_default().in_flight = true;
            }
            Event::Judged { step, passed } => {
                let gate = self.gate_of(step).ok_or_else(mismatch)?;
                let run = self.gates.entry(step.clone()).or_default();
                run.in_flight = false;
                if *passed {
                    run.passed = Some(true);
                } else {
                    match gate.fail_route.as_deref() {
                        Some(route) if route.starts_with("terminal:") => {
                            run.passed = Some(false);
                            self.terminal = Some(route["terminal:".len()..].to_owned());
                        }
                        Some(route) if run.redos < gate.max_redos => {
                            // Redo: the route runs again as a new round, then the gate.
                            run.redos += 1;
                            let key = (route.to_owned(), None);
                            let before = self.units.get(&key).map_or(0, |u| u.attempts);
                            self.units.insert(
                                key,
                                Unit {
                                    attempts: before,
                                    round_start: before,
                                    ..Unit::default()
                                },
                            );
                        }
                        _ => {
                            run.passed = Some(false);
                            self.failure
                                .get_or_insert((step.clone(), Reason::GateFailed));
                        }
                    }
                }
            }
            Event::Resumed { step } => {
                match self.step(step).map(|s| &s.kind) {
                    Some(Kind::Pause(_)) => self.resumed.insert(step.clone()),
                    _ => return Err(mismatch()),
                };
            }
            Event::LandStarted { step, item } => {
                self.land_of(step).ok_or_else(mismatch)?;
                self.landings.insert((step.clone(), item.clone()), None);
            }
            Event::Landed {
                step,
                item,
                failure,
            } => {
                self.land_of(step).ok_or_else(mismatch)?;
                self.landings
                    .insert((step.clone(), item.clone()), Some(*failure));
            }
        }
        Ok(())
    }

    /// The agent that `step` (or its member `item`) runs, when the pair names one.
    fn agent_of(&self, step: &str, item: Option<&str>) -> Option<&'p plan::Agent> {
        match (&self.step(step)?.kind, item) {
            (Kind::Agent(a), None) => Some(a),
            (Kind::Fanout(f), Some(item)) if f.items.iter().any(|i| i == item) => Some(&f.template),
            _ => None,
        }
    }

    fn gate_of(&self, step: &str) -> Option<&'p plan::Gate> {
        match &self.step(step)?.kind {
            Kind::Gate(g) => Some(g),
            _ => None,
        }
    }

    fn land_of(&self, step: &str) -> Option<&'p plan::Land> {
        match &self.step(step)?.kind {
            Kind::Land(l) => Some(l),
            _ => None,
        }
    }

    /// Whether anything is running.
    fn in_flight(&self) -> bool {
        self.units.values().any(|u| u.in_flight)
            || self.gates.values().any(|g| g.in_flight)
            || self.landings.values().any(Option::is_none)
    }

    /// The members of a fan-out that run, in item order.
    fn members(fanout: &Fanout) -> &[String] {
        let active = usize::try_from(plan::active_items(fanout)).unwrap_or(usize::MAX);
        &fanout.items[..active.min(fanout.items.len())]
    }

    fn unit(&self, step: &str, item: Option<&str>) -> Option<&Unit> {
        self.units.get(&(step.to_owned(), item.map(str::to_owned)))
    }

    /// Whether `step` finished well: what a step that needs it waits for. For a fan-out, every
    /// member that runs has finished (well or not): its join decides.
    fn passed(&self, step: &Step) -> bool {
        match &step.kind {
            Kind::Agent(_) => self
                .unit(&step.id, None)
                .is_some_and(|u| u.done == Some(Ok(()))),
            Kind::Fanout(f) => Self::members(f).iter().all(|i| {
                self.unit(&step.id, Some(i))
                    .is_some_and(|u| u.done.is_some())
            }),
            Kind::Join(j) => self.join(j.policy, &j.fanout) == Some(true),
            Kind::Gate(_) => self
                .gates
                .get(&step.id)
                .is_some_and(|g| g.passed == Some(true)),
            Kind::Pause(_) => self.resumed.contains(&step.id),
            Kind::Land(l) => self.land_candidates(&l.fanout).iter().all(|i| {
                matches!(
                    self.landings.get(&(step.id.clone(), (*i).clone())),
                    Some(Some(_))
                )
            }),
        }
    }

    /// A join's decision once every member of its fan-out finished; `None` before.
    fn join(&self, policy: JoinPolicy, fanout: &str) -> Option<bool> {
        let Some(Kind::Fanout(f)) = self.step(fanout).map(|s| &s.kind) else {
            return None;
        };
        let mut outcomes = Vec::new();
        for item in Self::members(f) {
            outcomes.push(self.unit(fanout, Some(item))?.done?.is_ok());
        }
        Some(decide(policy, f.items.len() as u64, &outcomes))
    }

    /// The members a land step lands: those whose dispatch finished well, in item order.
    fn land_candidates(&self, fanout: &str) -> Vec<&'p String> {
        match self.step(fanout).map(|s| &s.kind) {
            Some(Kind::Fanout(f)) => Self::members(f)
                .iter()
                .filter(|i| {
                    self.unit(fanout, Some(i))
                        .is_some_and(|u| u.done == Some(Ok(())))
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether everything `step` waits for, directly or through other steps, finished well.
    fn ready(&self, step: &Step) -> bool {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&str> = plan::deps(step);
        while let Some(id) = todo.pop() {
            if !seen.insert(id) {
                continue;
            }
            match self.step(id) {
                Some(dep) if self.passed(dep) => todo.extend(plan::deps(dep)),
                _ => return false,
            }
        }
        true
    }

    /// What to do now: every action that may start, or the one way the run stops.
    pub fn next(&self) -> Vec<Action> {
        let end = match (&self.terminal, &self.failure) {
            (Some(label), _) => Some(End::Terminal(label.clone())),
            (None, Some((step, reason))) => Some(End::Failed {
                step: step.clone(),
                reason: *reason,
            }),
            (None, None) => None,
        };
        if let Some(end) = end {
            // An ending starts nothing new; what runs is let finish, so its result is recorded.
            return if self.in_flight() {
                Vec::new()
            } else {
                vec![Action::Finished(end)]
            };
        }
        let mut actions = Vec::new();
        let mut waiting: Option<Action> = None;
        let mut reserved = self.reserved();
        for step in &self.plan.steps {
            if self.passed(step) || !self.ready(step) {
                continue;
            }
            // A boundary that has not started reserves its worst case first.
            let reservable = matches!(step.kind, Kind::Agent(_) | Kind::Fanout(_) | Kind::Gate(_));
            if reservable && !self.started.contains(&step.id) {
                let need = plan::worst_case(self.plan, step);
                let left = self.budget.saturating_sub(reserved);
                if need > left {
                    waiting.get_or_insert(Action::AwaitBudget {
                        before: step.id.clone(),
                        need,
                        left,
                        reason: Reason::BudgetExhausted,
                    });
                    continue;
                }
                reserved += need;
            }
            match &step.kind {
                Kind::Agent(_) => {
                    let unit = self.unit(&step.id, None).cloned().unwrap_or_default();
                    if !unit.in_flight && unit.done.is_none() {
                        actions.push(Action::Dispatch {
                            step: step.id.clone(),
                            item: None,
                            attempt: unit.attempts + 1,
                        });
                    }
                }
                Kind::Fanout(f) => {
                    let running = Self::members(f)
                        .iter()
                        .filter(|i| self.unit(&step.id, Some(i)).is_some_and(|u| u.in_flight))
                        .count() as u64;
                    let mut window = f.max_fanout.saturating_sub(running);
                    for item in Self::members(f) {
                        if window == 0 {
                            break;
                        }
                        let unit = self.unit(&step.id, Some(item)).cloned().unwrap_or_default();
                        if !unit.in_flight && unit.done.is_none() {
                            actions.push(Action::Dispatch {
                                step: step.id.clone(),
                                item: Some(item.clone()),
                                attempt: unit.attempts + 1,
                            });
                            window -= 1;
                        }
                    }
                }
                Kind::Gate(_) => {
                    if !self.gates.get(&step.id).is_some_and(|g| g.in_flight) {
                        actions.push(Action::RunGate {
                            step: step.id.clone(),
                        });
                    }
                }
                Kind::Join(j) => {
                    if self.join(j.policy, &j.fanout) == Some(false) {
                        // As for any failure: nothing new starts, what runs is let finish.
                        return if self.in_flight() {
                            Vec::new()
                        } else {
                            vec![Action::Finished(End::Failed {
                                step: step.id.clone(),
                                reason: Reason::JoinFailed,
                            })]
                        };
                    }
                }
                Kind::Pause(_) => {
                    waiting.get_or_insert(Action::Pause {
                        step: step.id.clone(),
                    });
                }
                Kind::Land(l) => {
                    // One member at a time: the target moves under each landing.
                    let landing = self
                        .landings
                        .iter()
                        .any(|((s, _), state)| *s == step.id && state.is_none());
                    let next = self
                        .land_candidates(&l.fanout)
                        .into_iter()
                        .find(|i| !self.landings.contains_key(&(step.id.clone(), (*i).clone())));
                    if let (false, Some(item)) = (landing, next) {
                        actions.push(Action::Land {
                            step: step.id.clone(),
                            item: item.clone(),
                        });
                    }
                }
            }
        }
        if !actions.is_empty() || self.in_flight() {
            return actions;
        }
        if let Some(stop) = waiting {
            return vec![stop];
        }
        // Every member was tried; one that did not land fails the run, after the others landed.
        if let Some(((step, _), reason)) = self
            .landings
            .iter()
            .find_map(|(key, state)| Some((key, (*state)??)))
        {
            return vec![Action::Finished(End::Failed {
                step: step.clone(),
                reason,
            })];
        }
        vec![Action::Finished(End::Completed)]
    }
}

/// A join's decision from its members' outcomes (`true`: passed), with `declared` items in the
/// fan-out. A member that ran is never skipped: every outcome counts.
///
/// `all-declared` passes when every declared item ran and passed (a truncated fan-out fails it);
/// `all-activated` when every member that ran passed; `any` when one did; `quorum:n` when n did.
pub fn decide(policy: JoinPolicy, declared: u64, outcomes: &[bool]) -> bool {
    let passed = outcomes.iter().filter(|p| **p).count() as u64;
    let ran = outcomes.len() as u64;
    match policy {
        JoinPolicy::AllDeclared => ran == declared && passed == ran,
        JoinPolicy::AllActivated => passed == ran,
        JoinPolicy::Any => passed >= 1,
        JoinPolicy::Quorum(n) => passed >= n,
    }
}
