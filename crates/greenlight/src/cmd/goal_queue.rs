//! `greenlight goal submit` and `greenlight goal worker`: goals put on the store's queue, and
//! the workers, on any machine that reaches the store, that claim and run them and the workflow
//! runs `workflow submit` queues (whose own side is [`super::workflow_queue`]).
//!
//! A worker runs each item it claims with the ordinary loop (a goal's, or a workflow run's), in
//! a worktree it prepares from the item's repository and base (kept under its work directory,
//! so a worker that restarts on the same machine resumes in the tree the last one left). While
//! it runs an item it renews the lease; the store it runs on is fenced on the claim's epoch, so
//! once the lease is lost (the worker stalled past it and another took the item) it cannot
//! write one more row of that item's run, and it stops the run's agents. The rules of claiming
//! live in the store's queue.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use greenlight_goal::drive::{DriveOptions, GoalRequest, OpenAiArgs, parse_agent, plan_goal};
use greenlight_goal::engine::Finish;
use greenlight_proc::{Interrupt, InterruptWatch};
use greenlight_store::{
    Fence, GoalId, GoalState, NewQueueItem, QueueItem, QueueItemId, QueueKind, Reads, Store,
};
use serde::{Deserialize, Serialize};

use crate::agents::EveryFamily;
use crate::duration::parse_duration;
use crate::goal_run::{CliResult, LoopArgs, exit};

/// Arguments of `greenlight goal submit`.
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// What the agent must achieve.
    pub goal: String,
    #[command(flatten)]
    pub place: QueuePlace,
    #[command(flatten)]
    pub agent: super::goal::AgentArgs,
    /// A gate command; repeat for several [default: the gates of the base's verify.yaml].
    #[arg(long = "gate", value_name = "CMD")]
    pub gates: Vec<String>,
    #[command(flatten)]
    pub limits: super::goal::GoalLimits,
}

/// Where a queued item's worktree comes from and who may take it: `goal submit`'s and
/// `workflow submit`'s.
#[derive(Debug, clap::Args)]
pub struct QueuePlace {
    /// Where workers get the code: a path or URL every worker can `git clone` [default: the
    /// repository of the current directory].
    #[arg(long, value_name = "PATH|URL")]
    pub repo: Option<String>,
    /// The commit the item's worktree starts from [default: HEAD of the current directory,
    /// resolved to its commit now].
    #[arg(long, value_name = "COMMIT")]
    pub base: Option<String>,
    /// A label a worker must have to take the item (`goal worker --labels`); repeat for several.
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
}

/// Arguments of `greenlight goal worker`.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// How many items (goals, workflow runs) this worker runs at once, each in a slot process
    /// of its own (named NAME/0, NAME/1, … in the queue's records).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub capacity: u32,
    /// This worker's labels, comma-separated: it takes only items whose labels it all has.
    #[arg(long, value_delimiter = ',', value_name = "LABEL,…")]
    pub labels: Vec<String>,
    /// Where the goals' worktrees are prepared [default: beside the state database, or for a
    /// PostgreSQL store in the temporary directory].
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// How long a claim holds without renewal; a worker that dies loses its goals to another
    /// after this long. Renewed every third of it.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub lease: Duration,
    /// This worker's name in the queue's records [default: HOST:PID].
    #[arg(long)]
    pub name: Option<String>,
    /// Exit once every queued item has ended (for batches and tests) instead of waiting for more.
    #[arg(long)]
    pub until_empty: bool,
    #[command(flatten)]
    pub loop_args: LoopArgs,
}

/// The goal request a queue item carries: `goal run`'s arguments, without the worktree.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct QueuedGoal {
    text: String,
    agent: String,
    model: Option<String>,
    base_url: Option<String>,
    api_key_env: Option<String>,
    tool_format: Option<String>,
    gates: Vec<String>,
    max_turns: u32,
    retries: u32,
    gate_timeout_ms: Option<u64>,
    judge: String,
}

impl QueuedGoal {
    fn openai(&self) -> OpenAiArgs {
        OpenAiArgs {
            base_url: self.base_url.clone(),
            api_key_env: self.api_key_env.clone(),
            tool_format: self.tool_format.clone(),
        }
    }

    fn request(&self, worktree: PathBuf) -> GoalRequest {
        GoalRequest {
            worktree,
            text: self.text.clone(),
            agent: self.agent.clone(),
            model: self.model.clone(),
            openai: self.openai(),
            gates: self.gates.clone(),
            max_turns: self.max_turns,
            retries: self.retries,
            gate_timeout: self.gate_timeout_ms.map(Duration::from_millis),
            judge: self.judge.clone(),
        }
    }
}

fn git_out(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = greenlight_proc::git::output(greenlight_proc::git::command(dir).args(args))
        .map_err(|e| format!("git {} in {}: {e}", args.join(" "), dir.display()))?;
    Ok(String::from_utf8_lossy(&out).trim().to_owned())
}

/// `goal submit`: checks what can be checked here (the agent's words, the labels, the base),
/// then queues the goal.
pub fn submit(
    store: &mut Store,
    cwd: &Path,
    args: SubmitArgs,
    families: &EveryFamily,
) -> CliResult {
    let usage = |m: String| (exit::USAGE, m);
    let agent = args.agent.agent.clone().unwrap_or_else(|| "claude".into());
    // The agent as `goal run` would read it: a typo is refused now, not on a worker later.
    parse_agent(
        &agent,
        args.agent.model.clone(),
        &args.agent.openai(),
        families,
    )
    .map_err(usage)?;
    if args.gates.iter().any(|g| g.trim().is_empty()) {
        return Err(usage(
            "--gate needs a command: an empty gate would pass without judging anything".into(),
        ));
    }
    let spec = QueuedGoal {
        text: args.goal,
        agent,
        model: args.agent.model,
        base_url: args.agent.base_url,
        api_key_env: args.agent.api_key_env,
        tool_format: args.agent.tool_format,
        gates: args.gates,
        max_turns: args.limits.max_turns,
        retries: args.limits.retries,
        gate_timeout_ms: args
            .limits
            .gate_timeout
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        judge: args.limits.judge,
    };
    let spec_json = serde_json::to_string(&spec).map_err(|e| (exit::ERROR, e.to_string()))?;
    let queued =
        queue_item(store, cwd, QueueKind::Goal, args.place, spec_json).map_err(|e| match e {
            NotQueued::Usage(why) => usage(why),
            NotQueued::Store(why) => (exit::ERROR, why),
        })?;
    outln!(
        "greenlight: queued goal item {} ({} at {})",
        queued.id,
        queued.repository,
        queued.base
    );
    Ok(exit::DONE)
}

/// An item on the queue, and where its worktree comes from.
pub(super) struct Queued {
    pub(super) id: QueueItemId,
    pub(super) repository: String,
    pub(super) base: String,
}

/// Why a submit put nothing on the queue.
pub(super) enum NotQueued {
    /// The submitter's to fix (a repository or base that cannot be resolved, a bad label).
    Usage(String),
    /// The store failed.
    Store(String),
}

/// Puts one item of `kind` on the queue: its repository and base (`--repo`, `--base`) resolved
/// here, defaulting to the repository of `cwd` and its HEAD's commit now, so every worker starts
/// from the same commit whatever the branch does later.
pub(super) fn queue_item(
    store: &mut Store,
    cwd: &Path,
    kind: QueueKind,
    place: QueuePlace,
    spec_json: String,
) -> Result<Queued, NotQueued> {
    let QueuePlace {
        repo,
        base,
        mut labels,
    } = place;
    let repository = match repo {
        Some(r) => r,
        None => git_out(cwd, &["rev-parse", "--show-toplevel"]).map_err(|e| {
            NotQueued::Usage(format!(
                "{e}; pass --repo PATH|URL naming what workers clone"
            ))
        })?,
    };
    let base = match base {
        Some(b) => b,
        None => git_out(cwd, &["rev-parse", "HEAD"])
            .map_err(|e| NotQueued::Usage(format!("{e}; pass --base COMMIT")))?,
    };
    labels.sort();
    labels.dedup();
    let id = store
        .write(|tx| {
            tx.submit_queue_item(&NewQueueItem {
                kind,
                repository: repository.clone(),
                base: base.clone(),
                spec_json,
                labels,
            })
        })
        .map_err(|e| match e {
            greenlight_store::Error::BadLabel { .. } => NotQueued::Usage(e.to_string()),
            e => NotQueued::Store(e.to_string()),
        })?;
    Ok(Queued {
        id,
        repository,
        base,
    })
}

/// How many times an item that fails to start (its clone or its goal cannot be made) is
/// claimed before it ends as failed.
const MAX_CLAIMS: u64 = 3;

/// Why a claimed item did not end.
pub(super) enum Failed {
    /// Another worker holds it now.
    LeaseLost,
    /// Anything else, said in words.
    Other(String),
}

impl From<String> for Failed {
    fn from(e: String) -> Failed {
        Failed::Other(e)
    }
}

impl From<greenlight_store::Error> for Failed {
    fn from(e: greenlight_store::Error) -> Failed {
        match e {
            greenlight_store::Error::LeaseLost { .. } => Failed::LeaseLost,
            e => Failed::Other(e.to_string()),
        }
    }
}

/// How a claimed item's run stopped: `outcome` ends the item; `None` gives it back (the worker
/// was told to stop and the run can be resumed by the next holder).
pub(super) struct Ran {
    pub(super) outcome: Option<String>,
    /// What ran, for the worker's log (`goal 4`, `workflow run 2`).
    pub(super) subject: String,
}

/// What a worker process's slot runs with.
struct Worker {
    state: PathBuf,
    name: String,
    labels: Vec<String>,
    work_dir: PathBuf,
    lease: Duration,
    until_empty: bool,
    options: DriveOptions,
}

/// `goal worker`: claims and runs queued goals until stopped (or, with `--until-empty`, until
/// every queued goal has ended). One slot per process: with `--capacity` above 1 this process
/// supervises that many slot processes ([`super::worker_slots`]).
pub fn worker(state: &Path, args: WorkerArgs) -> CliResult {
    let env = crate::environment::get();
    let slot = super::worker_slots::slot_of(&env.vars).map_err(|e| (exit::USAGE, e))?;
    let name = match &slot {
        Some(slot) => slot.name.clone(),
        None => args.name.clone().unwrap_or_else(|| {
            format!(
                "{}:{}",
                greenlight_gate::lock::host_name(),
                std::process::id()
            )
        }),
    };
    let work_dir = args
        .work_dir
        .clone()
        .unwrap_or_else(|| greenlight_store::local_anchor(state).with_extension("queue-work"));
    std::fs::create_dir_all(&work_dir).map_err(|e| {
        (
            exit::ERROR,
            format!(
                "cannot create the work directory {}: {e}; pass --work-dir DIR",
                work_dir.display()
            ),
        )
    })?;
    if slot.is_none() && args.capacity > 1 {
        return super::worker_slots::supervise(args.capacity, &name);
    }
    let families = EveryFamily::from_process_env();
    let worker = Arc::new(Worker {
        state: state.to_path_buf(),
        name,
        labels: args.labels.clone(),
        work_dir,
        lease: args.lease.max(Duration::from_secs(1)),
        until_empty: args.until_empty,
        options: DriveOptions {
            agent_timeout: args.loop_args.agent_timeout,
            kill_grace: env.kill_grace,
            remote: Some(crate::remote::settings()),
            agent_search_path: env.vars.var("PATH").unwrap_or_default(),
            lock_root: env.lock_root.clone(),
            env: super::worker_slots::without_slot_var(&env.vars),
            cache: greenlight_run::cache_place::cache_settings(Some(state), env),
            agent_checked: false,
        },
    });
    let index = slot.as_ref().map_or(0, |slot| slot.index);
    if slot.is_none() {
        errln!(
            "greenlight: worker {} taking work from {}{}",
            worker.name,
            state.display(),
            if worker.labels.is_empty() {
                String::new()
            } else {
                format!(" (labels {})", worker.labels.join(","))
            }
        );
    } else {
        errln!("greenlight: worker slot {index} is {}", worker.name);
    }
    let ran = greenlight_proc::run_main(|signals| async move {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async move {
                let result = run_slot(&worker, index, signals.clone(), &families).await;
                match *signals.borrow() {
                    Some(signal) => Ok(signal.exit_code()),
                    None => result,
                }
            })
            .await
    });
    ran.unwrap_or_else(|e| {
        Err((
            exit::ERROR,
            format!("cannot start the async runtime or its signal handlers: {e}"),
        ))
    })
}

/// The slot: claim, run, end; again, until stopped.
async fn run_slot(
    worker: &Arc<Worker>,
    slot: u32,
    mut signals: InterruptWatch,
    families: &EveryFamily,
) -> CliResult {
    let mut store = Store::open(&worker.state).map_err(|e| (exit::ERROR, e.to_string()))?;
    let listener = idle_listener(&worker.state);
    loop {
        if signals.borrow().is_some() {
            return Ok(exit::DONE);
        }
        let lease_ms = u64::try_from(worker.lease.as_millis()).unwrap_or(u64::MAX);
        let claimed = match store.claim_queue_item(&worker.name, &worker.labels, lease_ms) {
            Ok(c) => c,
            Err(e) => {
                // The store is unreachable or refused: say so, wait, try again (nothing is
                // held, so nothing is lost).
                errln!("greenlight: worker slot {slot}: cannot claim: {e}");
                wait_idle(&listener, &mut signals, Duration::from_secs(2)).await;
                continue;
            }
        };
        let Some((item, fence)) = claimed else {
            // Open items include those other slots and workers are running: one of them may
            // still be given back.
            if worker.until_empty && store.queue_open_count().is_ok_and(|n| n == 0) {
                return Ok(exit::DONE);
            }
            // A lease that runs out sends no notification, so idle slots look again at least
            // every second.
            wait_idle(&listener, &mut signals, Duration::from_secs(1)).await;
            continue;
        };
        let ran = run_item(worker, &mut store, &item, fence, &signals, families).await;
        store.set_fence(None);
        match ran {
            Ok(outcome) => errln!("greenlight: worker slot {slot}: item {} {outcome}", item.id),
            Err(Failed::LeaseLost) => errln!(
                "greenlight: worker slot {slot}: item {}: its lease was lost to another worker; \
                 stopped working on it",
                item.id
            ),
            Err(Failed::Other(e)) => {
                // Given back for another try (another worker, or this one later); after
                // MAX_CLAIMS claims the item ends as failed, naming why, so a goal that cannot
                // start anywhere does not go round for ever.
                let next = if fence.epoch >= MAX_CLAIMS {
                    let outcome = format!("failed: {e}");
                    store.write(|tx| tx.end_queue_item(fence, &outcome))
                } else {
                    store.write(|tx| tx.release_queue_item(fence))
                };
                errln!(
                    "greenlight: worker slot {slot}: item {}: {e}{}",
                    item.id,
                    match next {
                        Ok(()) if fence.epoch >= MAX_CLAIMS =>
                            format!(" (ended as failed after {MAX_CLAIMS} claims)"),
                        Ok(()) => " (given back to the queue)".to_owned(),
                        Err(e) => format!(" (and it could not be given back: {e})"),
                    }
                );
            }
        }
    }
}

/// What an idle slot waits on: PostgreSQL's queue notifications, or nothing (SQLite: a short
/// sleep, all on one machine).
fn idle_listener(state: &Path) -> Option<Arc<greenlight_store::pg::Listener>> {
    let url = state.to_str().filter(|s| greenlight_store::pg::is_url(s))?;
    let target = greenlight_store::pg::PgTarget::parse(url).ok()?;
    greenlight_store::pg::Listener::listen(&target, &[greenlight_store::QUEUE_CHANNEL])
        .ok()
        .map(Arc::new)
}

async fn wait_idle(
    listener: &Option<Arc<greenlight_store::pg::Listener>>,
    signals: &mut InterruptWatch,
    most: Duration,
) {
    let wait = async {
        match listener {
            Some(l) => {
                let l = Arc::clone(l);
                let _ = tokio::task::spawn_blocking(move || l.wait(most)).await;
            }
            None => tokio::time::sleep(most.min(Duration::from_millis(200))).await,
        }
    };
    tokio::select! {
        () = wait => {}
        _ = signals.changed() => {}
    }
}

/// Runs one claimed item to its end (or until the worker stops or loses the lease); says how.
async fn run_item(
    worker: &Arc<Worker>,
    store: &mut Store,
    item: &QueueItem,
    fence: Fence,
    signals: &InterruptWatch,
    families: &EveryFamily,
) -> Result<String, Failed> {
    let worktree = prepare_worktree(&worker.work_dir, item).await?;
    store.set_fence(Some(fence));
    // Each slot has its own stop: the process's signals, or a lost lease.
    let (stop_tx, stop) = tokio::sync::watch::channel(None::<Interrupt>);
    let lost = Arc::new(AtomicBool::new(false));
    let renewer = tokio::task::spawn_local(renew_lease(
        Arc::clone(worker),
        fence,
        signals.clone(),
        stop_tx,
        Arc::clone(&lost),
    ));
    let ran = match item.kind {
        QueueKind::Goal => run_goal(worker, store, item, fence, &worktree, stop, families).await,
        QueueKind::Workflow => {
            super::workflow_queue::run_item(store, item, &worktree, &worker.options, stop, families)
                .await
        }
    };
    renewer.abort();
    if lost.load(Ordering::SeqCst) {
        return Err(Failed::LeaseLost);
    }
    let Ran { outcome, subject } = ran?;
    match outcome {
        Some(outcome) => {
            store.write(|tx| tx.end_queue_item(fence, &outcome))?;
            Ok(format!("ended: {outcome} ({subject})"))
        }
        None => {
            // Stopped by a signal: the run is paused or interrupted; the next worker resumes it.
            store.write(|tx| tx.release_queue_item(fence))?;
            Ok(format!(
                "given back to the queue ({subject} stopped by the worker's stop)"
            ))
        }
    }
}

/// Runs a goal item: the goal its last holder made, or a new one, driven with the ordinary loop.
async fn run_goal(
    worker: &Arc<Worker>,
    store: &mut Store,
    item: &QueueItem,
    fence: Fence,
    worktree: &Path,
    mut stop: InterruptWatch,
    families: &EveryFamily,
) -> Result<Ran, Failed> {
    let spec: QueuedGoal = serde_json::from_str(&item.spec_json)
        .map_err(|e| format!("its request is not one this greenlight reads: {e}"))?;
    let goal = match item.goal {
        Some(goal) => match store.goal(goal)? {
            Some(g) if g.state == GoalState::Done => {
                // The last holder finished the goal but died before ending the item.
                return Ok(Ran {
                    outcome: Some("done".into()),
                    subject: format!("goal {goal}, already done"),
                });
            }
            Some(g) if g.worktree != worktree => {
                store.write(|tx| tx.move_goal_worktree(goal, worktree))?;
                goal
            }
            Some(_) => goal,
            None => return Err(format!("its goal {goal} is not in the store").into()),
        },
        None => create_goal(store, item, fence, &spec, worktree, families)?,
    };
    let mut on_started = |_: greenlight_goal::drive::Started<'_>| {};
    let mut on_progress = |_: greenlight_goal::Progress<'_>| {};
    let mut said_waiting = false;
    let driven = loop {
        let driven = greenlight_goal::drive(
            store,
            goal,
            &worker.options,
            families,
            &mut stop,
            &mut on_started,
            &mut on_progress,
        )
        .await;
        // The goal's runner on this machine is alive: a holder that stalled past its lease
        // (stopped, suspended). It stops its run once it notices the lost lease (its every write
        // is refused), freeing the goal; until then this worker holds the item and waits, as
        // failing it would end a goal nothing is wrong with.
        let Err(greenlight_goal::Error::AlreadyRunning { holder, .. }) = &driven else {
            break driven;
        };
        if !said_waiting {
            errln!(
                "greenlight: worker: item {}: goal {goal} is still run here{} by a holder that \
                 lost its lease; waiting for it to stop",
                item.id,
                holder.as_deref().unwrap_or("")
            );
            said_waiting = true;
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(250)) => {}
            _ = stop.changed() => {}
        }
        if stop.borrow().is_some() {
            return Ok(Ran {
                outcome: None,
                subject: format!("goal {goal}, still run by its last holder"),
            });
        }
    };
    let driven = match driven {
        Ok(d) => d,
        Err(greenlight_goal::Error::Store(greenlight_store::Error::LeaseLost { .. })) => {
            return Err(Failed::LeaseLost);
        }
        Err(e) => return Err(e.to_string().into()),
    };
    let stopped_by_signal = stop.borrow().is_some();
    let outcome = match driven.finish {
        Finish::Done => Some("done".to_owned()),
        Finish::Paused { reason, .. }
            if stopped_by_signal && reason == greenlight_agent::Reason::PausedByUser =>
        {
            None
        }
        Finish::Paused { reason, .. } => Some(format!("paused:{}", reason.as_str())),
        Finish::NotActive(GoalState::Done) => Some("done".into()),
        Finish::NotActive(state) => Some(
            driven
                .pause
                .map(|(reason, _)| format!("paused:{reason}"))
                .unwrap_or_else(|| state.to_string()),
        ),
    };
    Ok(Ran {
        outcome,
        subject: format!("goal {goal}"),
    })
}

fn create_goal(
    store: &mut Store,
    item: &QueueItem,
    fence: Fence,
    spec: &QueuedGoal,
    worktree: &Path,
    families: &EveryFamily,
) -> Result<GoalId, String> {
    let planned = plan_goal(spec.request(worktree.to_path_buf()), families)?;
    let config = planned.config.as_ref().map(|c| c.to_json());
    store
        .write(|tx| {
            let id = tx.create_goal(&planned.goal)?;
            tx.set_gate_config(id, config.as_deref())?;
            tx.attach_queue_goal(fence.item, id)?;
            Ok::<_, greenlight_store::Error>(id)
        })
        .map_err(|e| format!("item {}: {e}", item.id))
}

/// Renews the lease every third of it; on a renewal refused (another worker took the item) or
/// on the process's signal, tells the goal's run to stop.
async fn renew_lease(
    worker: Arc<Worker>,
    fence: Fence,
    mut signals: InterruptWatch,
    stop: tokio::sync::watch::Sender<Option<Interrupt>>,
    lost: Arc<AtomicBool>,
) {
    let every = worker.lease / 3;
    let lease_ms = u64::try_from(worker.lease.as_millis()).unwrap_or(u64::MAX);
    let mut store = match Store::open(&worker.state) {
        Ok(s) => s,
        Err(e) => {
            errln!("greenlight: worker: cannot open the store to renew leases: {e}");
            return;
        }
    };
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = signals.changed() => {
                let _ = stop.send(*signals.borrow());
                // Keep renewing while the run pauses the goal and gives the item back.
            }
        }
        match store.renew_queue_lease(fence, &worker.name, lease_ms) {
            Ok(true) => {}
            Ok(false) => {
                lost.store(true, Ordering::SeqCst);
                let _ = stop.send(Some(Interrupt::Term));
                return;
            }
            // Unreachable for now: the lease still runs; the next renewal tries again, and the
            // fence refuses every write once another worker holds the item.
            Err(e) => errln!(
                "greenlight: worker: cannot renew the lease of item {}: {e}",
                fence.item
            ),
        }
    }
}

/// The item's worktree under the work directory: the one a worker on this machine left (it
/// holds that worker's progress), else a fresh clone of the repository at the base.
async fn prepare_worktree(work_dir: &Path, item: &QueueItem) -> Result<PathBuf, String> {
    let dir = work_dir.join(format!("item-{}", item.id));
    if dir.join(".git").exists() {
        return dir.canonicalize().map_err(|e| e.to_string());
    }
    let partial = work_dir.join(format!(".item-{}.partial", item.id));
    let _ = std::fs::remove_dir_all(&partial);
    // Cloned into a scratch name, checked out, then renamed: a worker killed half-way leaves a
    // scratch directory the next one removes, never a half-made worktree under the real name.
    let partial_str = partial.to_string_lossy().into_owned();
    run_git(
        work_dir,
        &[
            "clone",
            "--quiet",
            "--no-checkout",
            &item.repository,
            &partial_str,
        ],
    )
    .await?;
    run_git(&partial, &["checkout", "--quiet", "--detach", &item.base]).await?;
    std::fs::rename(&partial, &dir)
        .map_err(|e| format!("cannot move the clone into {}: {e}", dir.display()))?;
    dir.canonicalize().map_err(|e| e.to_string())
}

async fn run_git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let dir = dir.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    // greenlight-proc's git runner: the child is this process's helper, so the goal loop's
    // reaping of adopted processes never takes its exit status.
    tokio::task::spawn_blocking(move || {
        git_out(&dir, &args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .map_err(|e| format!("git did not finish: {e}"))?
}
