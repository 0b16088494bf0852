//! The bot session with the grid: `CreateBotSession`, then an `UpdateBotSession` loop that
//! reports running and finished leases and picks up new ones, and `BOT_TERMINATING` on the way
//! out.
//!
//! Three rules keep BuildGrid's scheduler and this loop in step (each one cost a stalled job
//! when it was missing):
//! - `CreateBotSession` is called with a deadline under 3.75 s. BuildGrid long-polls a call for
//!   80 % of its deadline unless that is under 3 s; a lease assigned while Create was
//!   long-polling never reached the bot and waited for the session's keepalive to expire.
//! - Every lease not yet seen is started, whether it comes `PENDING` or already `ACTIVE`
//!   (BuildGrid hands leases out `ACTIVE`), and is reported back `ACTIVE`, never `PENDING`.
//! - On the way out the session says `BOT_TERMINATING`, and every lease it held goes back
//!   `COMPLETED` with `UNAVAILABLE`, which BuildGrid retries on another worker at once rather
//!   than after the keepalive.
//!
//! Only an idle session long-polls (an `UpdateBotSession` with a long deadline, which the grid
//! holds until it has work); with leases running, each update is short and the loop paces
//! itself: a quick poll while there is room for more leases, a heartbeat when full, and at once
//! when a lease finishes. The echoed `version` is the grid's, as BuildGrid requires.

use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

use bazel_remote_apis::google::rpc::Status;
use greenlight_proc::{Interrupt, InterruptWatch};
use greenlight_remote::{Endpoint, Remote};
use tokio::sync::{mpsc, watch};
use tonic::Code;
use tonic::transport::Channel;

use crate::caches::Caches;
use crate::grid::{Failure, bots_client, judge, shown};
use crate::lease::{self, Completion, Context};
use crate::proto::bots_client::BotsClient;
use crate::proto::{
    BotSession, BotStatus, CreateBotSessionRequest, Device, Lease, LeaseState,
    UpdateBotSessionRequest, Worker, device, worker,
};
use crate::sweep::Scope;
use crate::{Config, Event, WorkerError};

/// The deadline of every call that must not be long-polled: under the 3.75 s below which
/// BuildGrid answers at once (it waits 80 % of the deadline, and not at all under 3 s).
const SHORT_CALL: Duration = Duration::from_secs(3);
/// The deadline of an idle session's long poll. BuildGrid holds it for 80 % of the smaller of
/// this and its keepalive timeout, then answers with no lease.
const LONG_POLL: Duration = Duration::from_secs(60);
/// How often a session with room for more leases asks for them while leases run (BuildGrid
/// long-polls only sessions without leases). Its assigner runs every 0.1 s in the test grid.
const BUSY_POLL: Duration = Duration::from_millis(250);
/// How often a full session says it is alive (and learns of withdrawn leases); shorter when the
/// grid's expiry is closer than three of these.
const HEARTBEAT: Duration = Duration::from_secs(2);
/// A long poll answered sooner than this with nothing to do was not held by the grid (a
/// keepalive under 3.75 s makes BuildGrid answer at once): the next one waits [`BUSY_POLL`].
const IDLE_CALL_FLOOR: Duration = Duration::from_secs(1);
/// How often orphans of dead workers are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(3);
/// The longest wait between tries after a failed call.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long stopped leases get beyond the kill grace to report before they are dropped (a
/// dropped run SIGKILLs its group).
const STOP_MARGIN: Duration = Duration::from_secs(5);
/// How many `BOT_TERMINATING` updates hand back leases assigned during the shutdown.
const TERMINATING_ROUNDS: usize = 3;

/// One running lease.
struct Running {
    stop: watch::Sender<Option<Interrupt>>,
    task: tokio::task::JoinHandle<()>,
    /// The grid no longer lists it: its completion is not reported.
    withdrawn: bool,
}

/// Runs the worker until `interrupt` fires: connects, sweeps, serves leases, and on the way out
/// ends running leases and hands them back. Returns an error only for what stops it before
/// that (an unreachable grid at the start, a refused session, a refused credential).
pub async fn serve(
    config: Config,
    interrupt: InterruptWatch,
    on_event: impl Fn(Event) + 'static,
) -> Result<(), WorkerError> {
    let events: Rc<dyn Fn(Event)> = Rc::new(on_event);
    let cache_dir = prepare_cache_dir(&config.cache_dir)?;
    let scope = Scope::new(&cache_dir);
    report_sweep(&events, &scope).await;

    let endpoint = Endpoint {
        url: config.grid.clone(),
        instance: config.instance.clone(),
        ..Endpoint::default()
    };
    // A stop asked for while the grid is still being reached is a stop, not a wait.
    let mut stop = interrupt.clone();
    let remote = tokio::select! {
        remote = Remote::connect(&endpoint) => remote?,
        _ = stop.wait_for(Option::is_some) => return Ok(()),
    };
    let client = bots_client(&config.grid)?;
    let ctx = Context {
        remote,
        worker: config.name.clone(),
        caches: Caches::new(&cache_dir),
        scope: scope.clone(),
    };
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async move {
            let sweeper = tokio::task::spawn_local(sweep_forever(events.clone(), scope));
            let mut session = Session::new(config, client, ctx, events);
            let served = session.run(interrupt).await;
            sweeper.abort();
            served
        })
        .await
}

/// The cache directory, made if missing, as an absolute path (its spelling is the sweep scope).
fn prepare_cache_dir(dir: &std::path::Path) -> Result<PathBuf, WorkerError> {
    let error = |source| WorkerError::CacheDir {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(error)?;
    std::fs::canonicalize(dir).map_err(error)
}

async fn report_sweep(events: &Rc<dyn Fn(Event)>, scope: &Scope) {
    let scope = scope.clone();
    if let Ok(swept) = tokio::task::spawn_blocking(move || scope.sweep()).await
        && (!swept.processes.is_empty() || swept.directories > 0)
    {
        events(Event::Swept {
            processes: swept.processes,
            directories: swept.directories,
        });
    }
}

async fn sweep_forever(events: Rc<dyn Fn(Event)>, scope: Scope) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        report_sweep(&events, &scope).await;
    }
}

/// What the loop does after a failed update.
enum Recovery {
    Retry,
    Stop,
}

struct Session {
    config: Config,
    client: BotsClient<Channel>,
    ctx: Context,
    events: Rc<dyn Fn(Event)>,
    /// The session's name and the grid's version of it (echoed on every update).
    name: String,
    version: String,
    /// When the grid will drop the session unless it hears from it.
    expires: Option<SystemTime>,
    running: HashMap<String, Running>,
    /// Finished leases not yet acknowledged by the grid.
    finished: Vec<Lease>,
    done_tx: mpsc::UnboundedSender<(String, Completion)>,
    done_rx: mpsc::UnboundedReceiver<(String, Completion)>,
}

impl Session {
    fn new(
        config: Config,
        client: BotsClient<Channel>,
        ctx: Context,
        events: Rc<dyn Fn(Event)>,
    ) -> Self {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Self {
            config,
            client,
            ctx,
            events,
            name: String::new(),
            version: String::new(),
            expires: None,
            running: HashMap::new(),
            finished: Vec::new(),
            done_tx,
            done_rx,
        }
    }

    async fn run(&mut self, mut interrupt: InterruptWatch) -> Result<(), WorkerError> {
        if let Err(status) = self.create().await {
            return Err(self.refused(&status));
        }
        let mut backoff = Duration::ZERO;
        loop {
            if interrupt.borrow().is_some() {
                break;
            }
            self.absorb_finished();
            let idle = self.running.is_empty() && self.finished.is_empty();
            let (request, reported) =
                self.request(BotStatus::Ok, if idle { LONG_POLL } else { SHORT_CALL });
            let asked = Instant::now();
            let answer = tokio::select! {
                _ = interrupt.changed() => break,
                answer = self.client.update_bot_session(request) => answer,
            };
            let started = match answer {
                Ok(session) => {
                    backoff = Duration::ZERO;
                    self.acknowledge(&reported);
                    self.apply(session.into_inner())
                }
                Err(status) => match self.recover(&status, &mut backoff, &mut interrupt).await? {
                    Recovery::Retry => continue,
                    Recovery::Stop => break,
                },
            };
            if let Some(pace) = self.pace(idle, started > 0, asked.elapsed())
                && self.pause(pace, &mut interrupt).await
            {
                break;
            }
        }
        self.shut_down().await;
        Ok(())
    }

    /// After a failed update: waits and retries a hiccup, makes a new session when the grid
    /// forgot this one (its leases are already back in the grid's queue, so they are ended and
    /// not reported), and gives up on a refusal.
    async fn recover(
        &mut self,
        status: &tonic::Status,
        backoff: &mut Duration,
        interrupt: &mut InterruptWatch,
    ) -> Result<Recovery, WorkerError> {
        match judge(status) {
            Failure::Transient => {
                *backoff = (*backoff * 2).clamp(Duration::from_millis(500), MAX_BACKOFF);
                (self.events)(Event::GridTrouble {
                    detail: shown(status),
                    retry_in: *backoff,
                });
                Ok(if self.pause(*backoff, interrupt).await {
                    Recovery::Stop
                } else {
                    Recovery::Retry
                })
            }
            Failure::SessionLost => {
                (self.events)(Event::SessionLost {
                    detail: shown(status),
                });
                self.stop_all(true).await;
                self.finished.clear();
                Ok(if self.recreate(interrupt).await? {
                    Recovery::Retry
                } else {
                    Recovery::Stop
                })
            }
            Failure::Fatal => {
                self.stop_all(true).await;
                Err(self.refused(status))
            }
        }
    }

    /// Waits for `how_long`, a finished lease, or the interrupt; true on the interrupt.
    async fn pause(&mut self, how_long: Duration, interrupt: &mut InterruptWatch) -> bool {
        tokio::select! {
            _ = interrupt.changed() => true,
            done = self.done_rx.recv() => {
                if let Some((id, completion)) = done {
                    self.finish(id, completion);
                }
                false
            }
            () = tokio::time::sleep(how_long) => false,
        }
    }

    /// How long to wait before the next update: not at all with a finished lease to report, an
    /// idle session (its next call is a long poll), or leases just started and room for more
    /// (jobs come in bursts: the grid assigns the next one right after the first), unless the
    /// last call was a long poll the grid answered at once with nothing (then as while busy:
    /// never a spin).
    fn pace(&self, long_polled: bool, just_started: bool, last_call: Duration) -> Option<Duration> {
        let room = self.busy() < self.config.capacity;
        if !self.finished.is_empty() || (just_started && room) {
            return None;
        }
        if self.running.is_empty() {
            return (long_polled && last_call < IDLE_CALL_FLOOR).then_some(BUSY_POLL);
        }
        Some(if room { BUSY_POLL } else { self.heartbeat() })
    }

    /// The heartbeat interval: [`HEARTBEAT`], or a third of the time left before the grid's
    /// expiry when that is sooner.
    fn heartbeat(&self) -> Duration {
        let left = self
            .expires
            .and_then(|at| at.duration_since(SystemTime::now()).ok())
            .unwrap_or(HEARTBEAT * 3);
        (left / 3).clamp(Duration::from_millis(100), HEARTBEAT)
    }

    /// The worker as the scheduler sees it: the properties on its primary device, the capacity
    /// in its configs (BuildGrid reads both there).
    fn worker(&self) -> Worker {
        Worker {
            devices: vec![Device {
                handle: self.config.name.clone(),
                properties: self
                    .config
                    .properties
                    .iter()
                    .map(|(key, value)| device::Property {
                        key: key.clone(),
                        value: value.clone(),
                    })
                    .collect(),
            }],
            properties: Vec::new(),
            configs: vec![worker::Config {
                key: "capacity".to_owned(),
                value: self.config.capacity.to_string(),
            }],
        }
    }

    /// Asks for a session (a short call: see the module's first rule) and takes in its leases.
    async fn create(&mut self) -> Result<(), tonic::Status> {
        let mut request = tonic::Request::new(CreateBotSessionRequest {
            parent: self.config.instance.clone(),
            bot_session: Some(BotSession {
                bot_id: self.config.name.clone(),
                status: BotStatus::Ok as i32,
                worker: Some(self.worker()),
                ..Default::default()
            }),
        });
        request.set_timeout(SHORT_CALL);
        let session = self.client.create_bot_session(request).await?.into_inner();
        self.name = session.name.clone();
        self.version = session.version.clone();
        (self.events)(Event::Connected {
            session: session.name.clone(),
        });
        self.apply(session);
        Ok(())
    }

    fn refused(&self, status: &tonic::Status) -> WorkerError {
        if status.code() == Code::Unimplemented {
            return WorkerError::NoBotsService {
                url: self.config.grid.clone(),
                detail: status.message().to_owned(),
            };
        }
        WorkerError::SessionRefused {
            url: self.config.grid.clone(),
            instance: self.config.instance.clone(),
            detail: shown(status),
        }
    }

    /// Makes a new session after the grid forgot the old one, trying again while the grid is
    /// away; gives up only on a refusal no retry can change. `Ok(false)` when interrupted.
    async fn recreate(&mut self, interrupt: &mut InterruptWatch) -> Result<bool, WorkerError> {
        let mut backoff = Duration::from_millis(500);
        loop {
            match self.create().await {
                Ok(()) => return Ok(true),
                Err(status) if matches!(judge(&status), Failure::Fatal) => {
                    return Err(self.refused(&status));
                }
                Err(status) => {
                    (self.events)(Event::GridTrouble {
                        detail: shown(&status),
                        retry_in: backoff,
                    });
                    if self.pause(backoff, interrupt).await {
                        return Ok(false);
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// An update carrying every running lease (`ACTIVE`) and every finished one not yet
    /// acknowledged (`COMPLETED`); returns it with the ids of the finished ones it reports.
    fn request(
        &self,
        status: BotStatus,
        deadline: Duration,
    ) -> (tonic::Request<UpdateBotSessionRequest>, Vec<String>) {
        let mut leases: Vec<Lease> = self
            .running
            .iter()
            .filter(|(_, r)| !r.withdrawn)
            .map(|(id, _)| Lease {
                id: id.clone(),
                state: LeaseState::Active as i32,
                ..Default::default()
            })
            .collect();
        leases.sort_by(|a, b| a.id.cmp(&b.id));
        let reported: Vec<String> = self.finished.iter().map(|l| l.id.clone()).collect();
        leases.extend(self.finished.iter().cloned());
        let mut request = tonic::Request::new(UpdateBotSessionRequest {
            name: self.name.clone(),
            bot_session: Some(BotSession {
                name: self.name.clone(),
                bot_id: self.config.name.clone(),
                status: status as i32,
                worker: Some(self.worker()),
                leases,
                version: self.version.clone(),
                ..Default::default()
            }),
            update_mask: None,
        });
        request.set_timeout(deadline);
        (request, reported)
    }

    /// Forgets finished leases the grid has now been told about.
    fn acknowledge(&mut self, reported: &[String]) {
        self.finished.retain(|l| !reported.contains(&l.id));
    }

    /// Takes in the grid's view: new leases start, leases it no longer lists are withdrawn.
    /// Returns how many started.
    fn apply(&mut self, session: BotSession) -> usize {
        self.version = session.version;
        self.expires = session.expire_time.and_then(|t| {
            let secs = u64::try_from(t.seconds).ok()?;
            SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs))
        });
        let listed: Vec<&Lease> = session
            .leases
            .iter()
            .filter(|l| {
                l.state == LeaseState::Pending as i32 || l.state == LeaseState::Active as i32
            })
            .collect();
        for (id, running) in self.running.iter_mut() {
            if !running.withdrawn && !listed.iter().any(|l| &l.id == id) {
                running.withdrawn = true;
                running.stop.send_replace(Some(Interrupt::Term));
                (self.events)(Event::LeaseWithdrawn { lease: id.clone() });
            }
        }
        let mut started = 0;
        for lease in listed {
            let known = self.running.contains_key(&lease.id)
                || self.finished.iter().any(|f| f.id == lease.id);
            if !known && self.start(lease) {
                started += 1;
            }
        }
        started
    }

    /// Leases running that the grid still counts (a withdrawn one is only being ended).
    fn busy(&self) -> usize {
        self.running.values().filter(|r| !r.withdrawn).count()
    }

    /// Starts a lease, or hands it back when the capacity is full; true when it started.
    fn start(&mut self, lease: &Lease) -> bool {
        if self.busy() >= self.config.capacity {
            // More than the capacity we offered: hand it back for another worker.
            self.finished.push(completed(
                &lease.id,
                unavailable(format!(
                    "worker {} already runs its capacity of {} leases",
                    self.config.name, self.config.capacity
                )),
                None,
            ));
            return false;
        }
        let action = match &lease.payload {
            Some(any) if any.type_url.ends_with(".Action") => {
                greenlight_remote::digest_of(&any.value).to_string()
            }
            Some(any) => any.type_url.clone(),
            None => "no payload".to_owned(),
        };
        (self.events)(Event::LeaseStarted {
            lease: lease.id.clone(),
            action,
        });
        let (stop, stop_rx) = watch::channel(None);
        let ctx = self.ctx.clone();
        let done = self.done_tx.clone();
        let id = lease.id.clone();
        let payload = lease.payload.clone();
        let task = tokio::task::spawn_local(async move {
            let completion = lease::execute(&ctx, payload.as_ref(), stop_rx).await;
            let _ = done.send((id, completion));
        });
        self.running.insert(
            lease.id.clone(),
            Running {
                stop,
                task,
                withdrawn: false,
            },
        );
        true
    }

    fn absorb_finished(&mut self) {
        while let Ok((id, completion)) = self.done_rx.try_recv() {
            self.finish(id, completion);
        }
    }

    fn finish(&mut self, id: String, completion: Completion) {
        let Some(running) = self.running.remove(&id) else {
            return;
        };
        if running.withdrawn {
            return;
        }
        (self.events)(Event::LeaseFinished {
            lease: id.clone(),
            outcome: completion.summary.clone(),
        });
        self.finished
            .push(completed(&id, completion.status, completion.result));
    }

    /// Ends every running lease and waits for each to report (or drops it after the grace);
    /// `forget` drops their completions too (the grid has reassigned them).
    async fn stop_all(&mut self, forget: bool) {
        for running in self.running.values() {
            running.stop.send_replace(Some(Interrupt::Term));
        }
        let limit = Instant::now()
            + greenlight_proc::kill_grace_from(|name| std::env::var_os(name))
            + STOP_MARGIN;
        while !self.running.is_empty() {
            let left = limit.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.done_rx.recv()).await {
                Ok(Some((id, completion))) => {
                    if forget {
                        self.running.remove(&id);
                    } else {
                        self.finish(id, completion);
                    }
                }
                _ => break,
            }
        }
        // Whatever did not report in time is dropped: a dropped run SIGKILLs its group.
        for (id, running) in self.running.drain() {
            running.task.abort();
            if !forget && !running.withdrawn {
                self.finished.push(completed(
                    &id,
                    unavailable(format!("worker {} stopped", self.config.name)),
                    None,
                ));
            }
        }
    }

    /// Says `BOT_TERMINATING`, ends the running leases, and hands every lease back.
    async fn shut_down(&mut self) {
        (self.events)(Event::Stopping {
            running: self.busy(),
        });
        // First stop the grid assigning more, then end what runs.
        let mut handed: Vec<Lease> = Vec::new();
        self.terminating_update(&mut handed).await;
        self.stop_all(false).await;
        for round in 0..TERMINATING_ROUNDS {
            if round > 0 && handed.is_empty() {
                break;
            }
            self.finished.append(&mut handed);
            self.terminating_update(&mut handed).await;
        }
    }

    /// One `BOT_TERMINATING` update; leases the grid assigned meanwhile are collected in
    /// `handed` to be given back in the next one.
    async fn terminating_update(&mut self, handed: &mut Vec<Lease>) {
        let (request, reported) = self.request(BotStatus::BotTerminating, SHORT_CALL);
        let Ok(session) = self.client.update_bot_session(request).await else {
            return;
        };
        self.acknowledge(&reported);
        let session = session.into_inner();
        self.version = session.version;
        for lease in session.leases {
            let fresh = lease.state == LeaseState::Pending as i32
                || lease.state == LeaseState::Active as i32;
            if fresh && !self.running.contains_key(&lease.id) {
                handed.push(completed(
                    &lease.id,
                    unavailable(format!("worker {} is stopping", self.config.name)),
                    None,
                ));
            }
        }
    }
}

fn completed(
    id: &str,
    status: Status,
    result: Option<bazel_remote_apis::google::protobuf::Any>,
) -> Lease {
    Lease {
        id: id.to_owned(),
        state: LeaseState::Completed as i32,
        status: Some(status),
        result,
        ..Default::default()
    }
}

fn unavailable(message: String) -> Status {
    Status {
        code: Code::Unavailable as i32,
        message,
        details: Vec::new(),
    }
}
