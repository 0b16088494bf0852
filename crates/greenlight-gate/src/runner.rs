//! A verify run: from a loaded config to a [`RunReport`]: gates in config order (v1), or as
//! their needs and `jobs` allow (v2), with cached results replayed.
//!
//! Every gate runs even after one fails (unless it needs the one that failed), so one run
//! reports every finding. Progress leaves as
//! [`RunEvent`]s the moment it happens; the caller renders them.

use std::cell::RefCell;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use greenlight_digest::matchers::MatcherSet;
use greenlight_proc::ProcessEnv;

use crate::cache::CacheSettings;
use crate::capture::Capture;
use crate::config::{Config, GateSpec, GateV2, Loaded};
use crate::error::Error;
use crate::evidence;
use crate::exec::{
    self, ExecSpec, Interrupt, InterruptWatch, LeftoverProcess, OutputSink, Termination,
};
use crate::lock::{self, Acquired};
use crate::plan::CachePlan;
use crate::remote::RemoteSettings;
use crate::remote_plan::{RemoteAttempt, RemoteRun};
use crate::report::{
    Attempt, AttemptStatus, GateReport, GateVerdict, RemoteMark, RunReport, SkipReason,
    WorkEvidenceReport, decide,
};
use crate::status::SharedStatus;

/// What the command line adds to a config.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The worktree the gates run in.
    pub cwd: PathBuf,
    /// `--base-ref`, which wins over `options.baseRef`.
    pub base_ref: Option<String>,
    /// `--gates`: run only these ids (validated against the config).
    pub only: Option<Vec<String>>,
    /// `--skip-work-evidence`.
    pub skip_work_evidence: bool,
    /// SIGTERM → SIGKILL grace.
    pub kill_grace: Duration,
    /// Where mutex locks live (and the scope of the orphaned-gate sweep).
    pub lock_root: PathBuf,
    /// The environment the gates inherit, as the front end read it: the values of a gate's
    /// declared `env` in its cache key and its remote action come from here.
    pub env: ProcessEnv,
    /// Variables every gate gets on top of the inherited environment (a workflow member's
    /// `CM_WORKTREE_INDEX`/`CM_WORKTREE_ID`, so mutex gates and ports stay apart).
    pub extra_env: Vec<(String, String)>,
    /// The result cache (v2 files only); `None`: no cache.
    pub cache: Option<CacheSettings>,
    /// How the cluster of `options.remote` is reached (v2 files only); `None`: this front end
    /// has no remote execution, and such a file's gates run here.
    pub remote: Option<RemoteSettings>,
    /// Whether this run may take every child this process adopted for a gate's leftover: true
    /// when nothing else of this process runs children beside the gates (`verify`, the goal
    /// loop), which then ends even an escapee that cleared its environment. False in a process
    /// that runs other work at once (a workflow's agents beside its gates): each gate then ends
    /// only what carries its own token, and the process sweeps what is left once all is done.
    pub sweep_adopted: bool,
}

/// Something that happened during a run, in order.
#[derive(Debug)]
pub enum RunEvent<'a> {
    /// The work-evidence line is decided.
    WorkEvidence(&'a WorkEvidenceReport),
    /// A gate attempt is starting (or waiting for its mutex).
    GateStarted {
        /// The gate id.
        id: &'a str,
        /// 1 or 2.
        attempt: u8,
    },
    /// A chunk of a running gate's output (stdout and stderr interleaved as written), for a
    /// consumer that keeps or shows all of it; the report keeps only the tail.
    GateOutput {
        /// The gate id.
        id: &'a str,
        /// 1 or 2.
        attempt: u8,
        /// The bytes, as the gate wrote them (not necessarily UTF-8, not line-aligned).
        bytes: &'a [u8],
    },
    /// A gate is decided.
    GateFinished(&'a GateReport),
}

/// The gates `--gates` names, checked against the config before anything runs.
fn select_gates<'c>(
    config: &'c Config,
    only: Option<&[String]>,
) -> Result<Vec<&'c GateSpec>, Error> {
    let Some(only) = only else {
        return Ok(config.gates.iter().collect());
    };
    if only.is_empty() {
        return Err(Error::EmptyGateSelection);
    }
    for id in only {
        if !config.gates.iter().any(|g| &g.id == id) {
            let known = config
                .gates
                .iter()
                .map(|g| g.id.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(Error::UnknownGate {
                id: id.clone(),
                known,
            });
        }
    }
    Ok(config
        .gates
        .iter()
        .filter(|g| only.contains(&g.id))
        .collect())
}

/// Runs the selected gates of `config` and reports everything.
///
/// v1 gates run one after another in file order. v2 gates run up to `jobs` at once as their
/// `needs` allow, and replay cached results; either way [`RunEvent::GateFinished`] arrives in
/// config order (a gate is reported once it and every gate before it are decided), so the line
/// contract reads the same.
pub async fn run(
    config: &Loaded,
    options: &RunOptions,
    on_event: &mut dyn FnMut(RunEvent<'_>),
    interrupt: &mut InterruptWatch,
) -> Result<RunReport, Error> {
    if !options.cwd.is_dir() {
        return Err(Error::CwdNotADirectory {
            cwd: options.cwd.clone(),
        });
    }
    let selected = selection(config, options.only.as_deref())?;
    // The run's one `git status`, for work-evidence and the workspace listing, starts first:
    // it is the longest git call of a run, and nothing it needs comes from the others.
    let status = (!options.skip_work_evidence).then(|| SharedStatus::start(&options.cwd));
    // Two independent git calls, at once; "not a repository" is still the error said first.
    let (checkout, base_ref) = std::thread::scope(|s| {
        let base_ref = s.spawn(|| {
            evidence::resolve_base_ref(
                &options.cwd,
                options.base_ref.as_deref(),
                config.options.base_ref.as_deref(),
            )
        });
        let checkout = evidence::probe_checkout(&options.cwd);
        (checkout, base_ref.join())
    });
    let checkout = checkout?;
    let base_ref = base_ref.unwrap_or(Err(Error::NoBaseRef))?;
    // The workspace listing for cache keys is read while work-evidence runs its own git.
    let mut plan = CachePlan::start(config, options, &selected, status.as_ref());

    let mut report = RunReport {
        base_ref: base_ref.clone(),
        work_evidence: WorkEvidenceReport::Skip,
        primary_checkout: None,
        gates: Vec::new(),
        env_clean_skipped: false,
        result: None,
        interrupted: None,
        orphans_ended: exec::sweep_orphaned_gates(&options.lock_root),
        leftovers: Vec::new(),
        warnings: Vec::new(),
    };
    let require_commit = config.options.require_commit;
    if let Some(status) = &status {
        let found = evidence::work_evidence(&options.cwd, &base_ref, status)?;
        let no_work = found.commits == 0 && found.uncommitted == 0;
        let no_commit = require_commit && found.commits == 0;
        report.work_evidence = if no_work || no_commit {
            WorkEvidenceReport::Fail {
                evidence: found,
                require_commit,
            }
        } else {
            WorkEvidenceReport::Pass {
                evidence: found,
                require_commit,
            }
        };
        on_event(RunEvent::WorkEvidence(&report.work_evidence));
        if no_work || no_commit {
            report.result = Some(crate::report::RunResult::NotStarted);
            return Ok(report);
        }
    } else {
        // CommandMate refuses a base ref that names no commit even when nothing counts from it.
        evidence::verify_base_ref(&options.cwd, &base_ref)?;
        on_event(RunEvent::WorkEvidence(&report.work_evidence));
    }

    let primary = checkout.primary;
    report.primary_checkout = Some(primary);
    if primary && config.options.skip_in_primary_checkout {
        for &index in &selected {
            let mut gate =
                GateReport::skipped(&config.gates[index], Some(SkipReason::PrimaryCheckout));
            gate.needs = needs_of(config, index);
            on_event(RunEvent::GateFinished(&gate));
            report.gates.push(gate);
        }
    } else {
        let prepared = plan.prepare(config, options, interrupt).await;
        // What a `keys` command left (adopted, its token dropped) is no gate's; it ends here.
        if options.sweep_adopted {
            report.leftovers = exec::end_adopted();
        }
        if let Err(signal) = prepared {
            report.interrupted = Some(signal);
            return Ok(report);
        }
        let scheduled = schedule(config, options, &selected, &mut plan, on_event, interrupt).await;
        report.gates = scheduled.gates;
        report.leftovers.extend(scheduled.leftovers);
        if let Some(signal) = scheduled.interrupted {
            report.interrupted = Some(signal);
            plan.collect_remote_warnings();
            report.warnings.append(&mut plan.warnings);
            return Ok(report);
        }
        if report.leftovers.is_empty() {
            plan.store_results(config, &selected, &report.gates).await;
            plan.publish_remote(config, &selected, &report.gates).await;
        } else {
            // Any gate of the run may have started them, so no result of it is known clean.
            plan.collect_remote_warnings();
            report
                .warnings
                .push(unnamed_leftovers_warning(&report.leftovers));
        }
    }
    report.warnings.append(&mut plan.warnings);
    report.env_clean_skipped = config.options.require_env_clean;
    report.result = Some(decide(&report.gates));
    Ok(report)
}

/// Why a run with processes no gate can be named for stored nothing.
fn unnamed_leftovers_warning(leftovers: &[LeftoverProcess]) -> String {
    let pids = leftovers
        .iter()
        .map(|p| p.pid.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "greenlight: no result of this run was cached: {} process(es) (pid {pids}) were still \
         running once no gate was, started by gates that ran at once or by a `keys` command, so \
         no one gate can be named for them; all were killed",
        leftovers.len()
    )
}

fn needs_of(config: &Loaded, index: usize) -> Vec<String> {
    config
        .gate_v2(index)
        .map(|g| g.needs.clone())
        .unwrap_or_default()
}

/// The gates a run with `--gates` reports, in config order: the selection and, for v2, every
/// gate it needs, transitively.
pub fn selected_gates<'c>(
    config: &'c Loaded,
    only: Option<&[String]>,
) -> Result<Vec<&'c GateSpec>, Error> {
    Ok(selection(config, only)?
        .into_iter()
        .map(|i| &config.gates[i])
        .collect())
}

/// The indices of the gates to run: `--gates` (checked against the config) and, for v2, every
/// gate they need, transitively, so a selected gate never starts without what it needs.
fn selection(config: &Loaded, only: Option<&[String]>) -> Result<Vec<usize>, Error> {
    let chosen = select_gates(config, only)?;
    let mut wanted: Vec<bool> = config
        .gates
        .iter()
        .map(|g| chosen.iter().any(|c| c.id == g.id))
        .collect();
    let mut grew = true;
    while grew {
        grew = false;
        for index in 0..wanted.len() {
            if !wanted[index] {
                continue;
            }
            for need in needs_of(config, index) {
                if let Some(at) = config.gates.iter().position(|g| g.id == need)
                    && !wanted[at]
                {
                    wanted[at] = true;
                    grew = true;
                }
            }
        }
    }
    Ok((0..wanted.len()).filter(|&i| wanted[i]).collect())
}

enum Slot {
    Waiting,
    Running,
    Done(Box<GateReport>),
    /// Ended by an interrupt before a verdict.
    Cut,
}

type GateFuture<'f> = Pin<Box<dyn Future<Output = (usize, Result<GateReport, Interrupted>)> + 'f>>;

/// What the scheduler hands back: the decided gates in config order, the interrupt that cut
/// the run short, and the processes no one gate can be named for.
struct Scheduled {
    gates: Vec<GateReport>,
    interrupted: Option<Interrupt>,
    leftovers: Vec<LeftoverProcess>,
}

/// Runs the selected gates as their needs and `jobs` allow; reports them in config order.
///
/// Leftovers: with more than one gate at once no gate may claim what the subreaper adopts
/// (`claim_adopted`), so a process that left its gate's group and dropped the token would
/// outlive the run. Each time no gate is running, everything still adopted is ended: the
/// gates started since the last such moment (a phase) are all done, and nothing else here
/// starts processes. A phase of one gate names that gate (its last attempt gets them, so its
/// result is not stored); otherwise they are the run's.
async fn schedule(
    config: &Loaded,
    options: &RunOptions,
    selected: &[usize],
    plan: &mut CachePlan,
    on_event: &mut dyn FnMut(RunEvent<'_>),
    interrupt: &mut InterruptWatch,
) -> Scheduled {
    let jobs = config.jobs().max(1);
    let started = Instant::now();
    let events = RefCell::new(on_event);
    let mut slots: Vec<Slot> = selected.iter().map(|_| Slot::Waiting).collect();
    // Needs as positions in `selected` (the selection holds every need).
    let needs: Vec<Vec<usize>> = selected
        .iter()
        .map(|&index| {
            needs_of(config, index)
                .iter()
                .filter_map(|id| selected.iter().position(|&s| config.gates[s].id == *id))
                .collect()
        })
        .collect();
    let context = AttemptContext {
        config,
        options,
        // Only a gate running alone, in a process running nothing else, may claim every
        // process the subreaper adopts.
        claim_adopted: jobs == 1 && options.sweep_adopted,
        remote: plan.remote_runner(),
    };
    let no_matchers = MatcherSet::default();
    let mut running: FuturesUnordered<GateFuture<'_>> = FuturesUnordered::new();
    let mut emitted = 0;
    let mut interrupted = None;
    let mut phase: Vec<usize> = Vec::new();
    let mut leftovers = Vec::new();
    loop {
        if interrupted.is_none() {
            for at in 0..slots.len() {
                if !matches!(slots[at], Slot::Waiting) {
                    continue;
                }
                let index = selected[at];
                let gate = &config.gates[index];
                let mut blocked = false;
                let mut failed = None;
                for &need in &needs[at] {
                    match &slots[need] {
                        Slot::Done(r) if r.passed == Some(true) => {}
                        Slot::Done(_) | Slot::Cut => {
                            failed = Some(config.gates[selected[need]].id.clone());
                            break;
                        }
                        Slot::Waiting | Slot::Running => blocked = true,
                    }
                }
                if let Some(id) = failed {
                    let mut report = GateReport::skipped(gate, Some(SkipReason::Needs));
                    report.needs = needs_of(config, index);
                    report.needs_failed = Some(id);
                    slots[at] = Slot::Done(Box::new(report));
                    continue;
                }
                if blocked {
                    continue;
                }
                if let Some(mut hit) = plan.replay(config, index, started.elapsed()) {
                    hit.needs = needs_of(config, index);
                    slots[at] = Slot::Done(Box::new(hit));
                    continue;
                }
                if running.len() >= jobs {
                    continue;
                }
                slots[at] = Slot::Running;
                phase.push(at);
                let started_ms = started.elapsed().as_millis() as u64;
                let gate_needs = needs_of(config, index);
                let mut watch = interrupt.clone();
                let events = &events;
                let context = &context;
                let (cache_key, explain) = plan.decision(index);
                let matchers = config
                    .gate_v2(index)
                    .map_or(&no_matchers, |g| &g.matcher_set);
                running.push(Box::pin(async move {
                    let mut sink = |event: RunEvent<'_>| (events.borrow_mut())(event);
                    let remote = context
                        .remote
                        .as_deref()
                        .filter(|r| r.runs(context.config_v2(index)));
                    let result = run_gate(
                        gate,
                        (index, remote),
                        matchers,
                        context,
                        &mut sink,
                        &mut watch,
                    )
                    .await;
                    let result = result.map(|mut report| {
                        report.started_ms = Some(started_ms);
                        report.needs = gate_needs;
                        if cache_key.is_some() {
                            report.cache_key = cache_key;
                        }
                        if explain.is_some() {
                            report.explain = explain;
                        }
                        report
                    });
                    (at, result)
                }));
            }
        }
        while let Some(Slot::Done(report)) = slots.get(emitted) {
            (events.borrow_mut())(RunEvent::GateFinished(report));
            emitted += 1;
        }
        if emitted == slots.len() {
            break;
        }
        let Some((at, result)) = running.next().await else {
            break;
        };
        match result {
            Ok(report) => slots[at] = Slot::Done(Box::new(report)),
            Err((signal, partial)) => {
                interrupted = Some(signal);
                slots[at] = partial.map_or(Slot::Cut, |p| Slot::Done(Box::new(p)));
            }
        }
        if running.is_empty() {
            end_phase(
                options.sweep_adopted,
                &mut slots,
                &mut phase,
                &mut leftovers,
            );
        }
    }
    drop(running);
    end_phase(
        options.sweep_adopted,
        &mut slots,
        &mut phase,
        &mut leftovers,
    );
    let mut gates = Vec::new();
    for (at, slot) in slots.into_iter().enumerate() {
        if let Slot::Done(report) = slot {
            if at >= emitted {
                (events.borrow_mut())(RunEvent::GateFinished(&report));
            }
            gates.push(*report);
        }
    }
    Scheduled {
        gates,
        interrupted,
        leftovers,
    }
}

/// Ends what the gates of a finished phase left adopted: the gate's own when the phase had one
/// gate (before its report is emitted: a phase ends as its last gate is decided), else the run's.
/// Without `sweep` (other work of this process may be running) nothing adopted is claimed: each
/// gate's own leftovers were ended by their token as it ended.
fn end_phase(
    sweep: bool,
    slots: &mut [Slot],
    phase: &mut Vec<usize>,
    run: &mut Vec<LeftoverProcess>,
) {
    let gates = std::mem::take(phase);
    if !sweep {
        return;
    }
    let left = exec::end_adopted();
    if left.is_empty() {
        return;
    }
    if let [only] = gates[..]
        && let Some(Slot::Done(report)) = slots.get_mut(only)
        && let Some(last) = report.attempts.last_mut()
    {
        last.leftovers.extend(left);
        return;
    }
    run.extend(left);
}

/// What every attempt of a run shares.
struct AttemptContext<'a> {
    config: &'a Loaded,
    options: &'a RunOptions,
    claim_adopted: bool,
    /// The cluster `run: remote` gates execute on, when there is one.
    remote: Option<Arc<RemoteRun>>,
}

impl AttemptContext<'_> {
    fn config_v2(&self, index: usize) -> Option<&GateV2> {
        self.config.gate_v2(index)
    }
}

/// Where one gate's attempts run: its index, and the cluster when it runs there.
type Placement<'r> = (usize, Option<&'r RemoteRun>);

type Interrupted = (Interrupt, Option<GateReport>);

/// One gate with its optional retry. `Err` carries the interrupt and what was done so far; a
/// gate that cannot be started is a FAIL, never an error of the run.
async fn run_gate(
    gate: &GateSpec,
    placement: Placement<'_>,
    matchers: &MatcherSet,
    context: &AttemptContext<'_>,
    on_event: &mut dyn FnMut(RunEvent<'_>),
    interrupt: &mut InterruptWatch,
) -> Result<GateReport, Interrupted> {
    let mut report = GateReport::skipped(gate, None);
    on_event(RunEvent::GateStarted {
        id: &gate.id,
        attempt: 1,
    });
    let first = match attempt(gate, placement, matchers, context, 1, on_event, interrupt).await {
        Ok((a, mark)) => {
            report.remote = mark;
            a
        }
        Err(signal) => return Err((signal, None)),
    };
    let first_status = first.status;
    report.attempts.push(first);
    match first_status {
        AttemptStatus::MutexSkip => {
            report.verdict = GateVerdict::Skip;
            report.skip_reason = Some(SkipReason::MutexWait);
            report.passed = None;
        }
        AttemptStatus::Pass => {
            report.verdict = GateVerdict::Pass;
            report.passed = Some(true);
        }
        AttemptStatus::Timeout => {
            report.verdict = GateVerdict::Timeout;
            report.passed = Some(false);
        }
        AttemptStatus::Fail if gate.retry_on_fail => {
            on_event(RunEvent::GateStarted {
                id: &gate.id,
                attempt: 2,
            });
            let second =
                match attempt(gate, placement, matchers, context, 2, on_event, interrupt).await {
                    Ok((a, mark)) => {
                        report.remote = mark.or(report.remote.take());
                        a
                    }
                    Err(signal) => {
                        report.verdict = GateVerdict::Fail;
                        report.passed = Some(false);
                        return Err((signal, Some(report)));
                    }
                };
            match second.status {
                AttemptStatus::Pass => {
                    report.verdict = GateVerdict::Flaky;
                    report.passed = Some(gate.flaky_is_pass);
                    report.attempts.push(second);
                }
                AttemptStatus::Fail => {
                    report.verdict = GateVerdict::Fail;
                    report.passed = Some(false);
                    report.attempts.push(second);
                }
                other => {
                    // The retry judged nothing, so the first run's FAIL stands.
                    report.verdict = GateVerdict::Fail;
                    report.passed = Some(false);
                    report.retry_without_verdict = Some(other);
                }
            }
        }
        AttemptStatus::Fail => {
            report.verdict = GateVerdict::Fail;
            report.passed = Some(false);
        }
    }
    Ok(report)
}

/// A gate's output on its way to the capture, also handed to the run's consumer as it arrives.
struct Tee<'a, 'e> {
    capture: &'a mut Capture,
    id: &'a str,
    attempt: u8,
    on_event: &'a mut (dyn FnMut(RunEvent<'_>) + 'e),
}

impl OutputSink for Tee<'_, '_> {
    fn chunk(&mut self, bytes: &[u8]) {
        self.capture.chunk(bytes);
        (self.on_event)(RunEvent::GateOutput {
            id: self.id,
            attempt: self.attempt,
            bytes,
        });
    }
}

/// A remote gate's output, handed to the run's consumer as it arrives (the attempt builds its
/// own tail and digest from the same bytes).
struct EventsOnly<'a, 'e> {
    id: &'a str,
    attempt: u8,
    on_event: &'a mut (dyn FnMut(RunEvent<'_>) + 'e),
}

impl OutputSink for EventsOnly<'_, '_> {
    fn chunk(&mut self, bytes: &[u8]) {
        (self.on_event)(RunEvent::GateOutput {
            id: self.id,
            attempt: self.attempt,
            bytes,
        });
    }
}

/// One attempt: on the cluster for a `run: remote` gate (its mutex is this machine's and does
/// not apply there), else the mutex (if any), then the command here. The lock is held for this
/// attempt only. A cluster that cannot run it sends it here.
async fn attempt(
    gate: &GateSpec,
    (index, remote): Placement<'_>,
    matchers: &MatcherSet,
    context: &AttemptContext<'_>,
    number: u8,
    on_event: &mut dyn FnMut(RunEvent<'_>),
    interrupt: &mut InterruptWatch,
) -> Result<(Attempt, Option<RemoteMark>), Interrupt> {
    let config = context.config;
    if let Some(remote) = remote {
        let tail_bytes = config.options.max_log_tail_bytes;
        let mut sink = EventsOnly {
            id: &gate.id,
            attempt: number,
            on_event: &mut *on_event,
        };
        let ran = remote
            .attempt(
                index,
                gate,
                number,
                tail_bytes,
                matchers,
                None,
                &mut |_, _| {},
                &mut sink,
                interrupt,
            )
            .await?;
        if let RemoteAttempt::Done(done) = ran {
            let (attempt, mark) = *done;
            return Ok((attempt, Some(mark)));
        }
    }
    local_attempt(gate, matchers, context, number, on_event, interrupt)
        .await
        .map(|a| (a, None))
}

/// One attempt here: the mutex (if any), then the command.
async fn local_attempt(
    gate: &GateSpec,
    matchers: &MatcherSet,
    context: &AttemptContext<'_>,
    number: u8,
    on_event: &mut dyn FnMut(RunEvent<'_>),
    interrupt: &mut InterruptWatch,
) -> Result<Attempt, Interrupt> {
    let (config, options) = (context.config, context.options);
    let budget = Duration::from_secs(u64::from(gate.timeout_sec));
    let mut result = Attempt::blank(AttemptStatus::MutexSkip);
    let mut guard = None;
    if let Some(name) = &gate.mutex {
        let acquired = match lock::acquire(&options.lock_root, name, budget, interrupt).await {
            Ok(acquired) => acquired,
            Err(source) => {
                let why = Error::LockRoot {
                    root: options.lock_root.clone(),
                    source,
                };
                return Ok(result.cannot_start(why.to_string()));
            }
        };
        match acquired {
            Acquired::Held {
                guard: g,
                waited,
                broke_stale,
                reclaimed_ownerless,
            } => {
                result.waited = Some(waited);
                result.lock_path = Some(g.path().to_path_buf());
                result.broke_stale_lock = broke_stale;
                result.ownerless_lock = reclaimed_ownerless;
                guard = Some(g);
            }
            Acquired::GaveUp {
                path,
                waited,
                holder,
                ownerless,
                survivors,
            } => {
                result.waited = Some(waited);
                result.lock_path = Some(path);
                result.lock_holder = holder;
                result.lock_survivors = survivors;
                result.ownerless_lock = ownerless;
                return Ok(result);
            }
            Acquired::Interrupted(signal) => return Err(signal),
        }
    }
    let spec = ExecSpec {
        command: &gate.command,
        cwd: &options.cwd,
        timeout: budget,
        kill_grace: options.kill_grace,
        tail_bytes: config.options.max_log_tail_bytes,
        extra_env: &options.extra_env,
        lock_root: &options.lock_root,
        // Only when this gate runs alone and nothing else here spawns meanwhile.
        claim_adopted: context.claim_adopted,
    };
    let mut capture = Capture::with_matchers(0, matchers, &gate.command, Some(&options.cwd));
    let mut tee = Tee {
        capture: &mut capture,
        id: &gate.id,
        attempt: number,
        on_event,
    };
    let outcome = exec::run(&spec, &mut tee, interrupt).await;
    if let Some(guard) = guard {
        guard.release();
    }
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(source) => {
            let why = Error::Spawn {
                id: gate.id.clone(),
                source,
            };
            return Ok(result.cannot_start(why.to_string()));
        }
    };
    let digest_exit = match outcome.termination {
        Termination::Exited(code) => Some(code),
        _ => None, // killed: never a clean run, whatever the text says
    };
    result.digest = Some(capture.finish(digest_exit).1);
    result.duration = outcome.duration;
    result.tail = outcome.tail.text();
    result.output_bytes = outcome.tail.total_bytes();
    result.leftovers = outcome.leftovers;
    result.pipe_left_open = outcome.pipe_left_open;
    match outcome.termination {
        Termination::Exited(0) => {
            result.status = AttemptStatus::Pass;
            result.exit_code = Some(0);
        }
        Termination::Exited(code) => {
            result.status = AttemptStatus::Fail;
            result.exit_code = Some(code);
        }
        Termination::TimedOut => {
            result.status = AttemptStatus::Timeout;
            result.exit_code = Some(124);
        }
        Termination::Interrupted(signal) => return Err(signal),
    }
    Ok(result)
}
