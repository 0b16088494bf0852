//! One run's use of a Remote Execution API cluster (`options.remote`): each gate's action (the
//! workspace as an input root, the command, the gate's declared env, the platform), the shared
//! action cache read before the gates and written after them, and `run: remote` gates executed
//! on the cluster's workers.
//!
//! The cluster never decides a verdict by being away: a cluster that cannot be reached, or that
//! fails mid-run, turns remote off for the rest of the run with one warning, and the gates run
//! here. What is published follows the local cache's rules (clean PASS or FAIL whose workspace
//! did not move while it ran; never FLAKY, TIMEOUT or interrupted), and `shared-read` never
//! publishes.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use greenlight_digest::matchers::MatcherSet;
use greenlight_proc::ProcessEnv;
use tokio::sync::Mutex;

use crate::capture::Capture;
use crate::config::{GateSpec, GateV2, Loaded, RemoteCache, RemoteOptions, RunOn};
use crate::exec::{Interrupt, InterruptWatch, OutputSink};
use crate::remote::{
    ActionSpec, Cluster, Digest, Endpoint, LocalResult, Outcome, RemoteSettings, SavedDigests,
};
use crate::report::{Attempt, AttemptStatus, GateReport, RemoteMark, RemoteSource};
use crate::workspace_key::Listing;

/// The environment variable that points every verify.yaml at another cluster (a CI runner's
/// own, a developer's tunnel) without editing the file; `off` turns remote off. The front end
/// reads it ([`RemoteSettings::endpoint_override`]).
pub const ENDPOINT_VAR: &str = "GREENLIGHT_REMOTE_ENDPOINT";

/// How long connecting (and the capabilities check) may take before the run goes on locally.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a remote gate may wait for a worker on top of its own time limit before the run
/// gives up on it: a cluster with no worker offering the gate's platform queues it forever.
const QUEUE_ALLOWANCE: Duration = Duration::from_secs(120);

/// The remote half of a run's plan.
pub(crate) struct RemotePlan {
    settings: RemoteSettings,
    options: RemoteOptions,
    refresh: bool,
    /// `--explain`: a replay says where it came from.
    explain: bool,
    digests_file: Option<PathBuf>,
    /// The verify.yaml, as an absolute path (left out of the input root).
    config_path: PathBuf,
    ready: Option<Arc<RemoteRun>>,
    hits: HashMap<usize, Outcome>,
    /// Problems worth a line on stderr.
    pub warnings: Vec<String>,
}

/// What the gates of a run share while they execute remotely.
pub(crate) struct RemoteRun {
    remote: Arc<dyn Cluster>,
    /// The digest of the workspace's input root on the cluster.
    root: Digest,
    /// Per gate index: its action's digest.
    actions: HashMap<usize, Digest>,
    /// The second attempt of a gate with `retryOnFail`: never cached, so a pass after a failure
    /// (FLAKY) is never what a later lookup finds.
    retry_actions: HashMap<usize, Digest>,
    /// Whether the input root is on the cluster yet (uploaded once, by the first remote gate).
    uploaded: Mutex<Option<Result<(), String>>>,
    can_execute: bool,
    /// `cache: off` or `--no-cache`: Execute never answers from the cluster's cache.
    skip_lookup: bool,
    endpoint: String,
    platform: BTreeMap<String, String>,
    /// Set once the cluster failed mid-run: later gates run here without trying it.
    broken: AtomicBool,
    /// Warnings of the gates' remote attempts, collected at the end of the run.
    warnings: std::sync::Mutex<Vec<String>>,
}

/// How a remote attempt ended.
pub(crate) enum RemoteAttempt {
    /// The cluster ran it (or replayed it from its cache inside Execute).
    Done(Box<(Attempt, RemoteMark)>),
    /// The cluster could not run it: run it here (the warning is kept for the run's end).
    RunHere,
}

impl RemotePlan {
    /// Keeps the file digests of this run in memory only (the cache directory is unusable).
    pub(crate) fn keep_no_file_digests(&mut self) {
        self.digests_file = None;
    }

    /// The plan for `config`, when it declares a cluster (and `GREENLIGHT_REMOTE_ENDPOINT` is
    /// not `off`). `settings`: how this front end reaches clusters (`None`: it cannot, and the
    /// gates run here, saying so).
    pub(crate) fn new(
        config: &Loaded,
        settings: Option<&RemoteSettings>,
        refresh: bool,
        explain: bool,
        cache_dir: Option<&Path>,
    ) -> Result<Option<Self>, String> {
        let Some(mut options) = config.v2.as_ref().and_then(|v2| v2.options.remote.clone()) else {
            return Ok(None);
        };
        let Some(settings) = settings else {
            return Err(format!(
                "greenlight: the remote cluster at {} is not used for this run: this front end \
                 has no remote execution; gates run here",
                options.endpoint
            ));
        };
        let mut warnings = Vec::new();
        if let Some(over) = &settings.endpoint_override {
            if over.trim() == "off" {
                return Ok(None);
            }
            match crate::config::v2::endpoint_url(over) {
                Ok(url) => options.endpoint = url,
                Err(why) => warnings.push(format!(
                    "greenlight: {ENDPOINT_VAR} is ignored: {why}; using {} from verify.yaml",
                    options.endpoint
                )),
            }
        }
        Ok(Some(RemotePlan {
            settings: settings.clone(),
            options,
            refresh,
            explain,
            digests_file: cache_dir.map(|dir| dir.join("remote")),
            config_path: config
                .path
                .as_std_path()
                .canonicalize()
                .unwrap_or_else(|_| config.path.clone().into_std_path_buf()),
            ready: None,
            hits: HashMap::new(),
            warnings,
        }))
    }

    fn off(&mut self, why: String) {
        self.warnings.push(format!(
            "greenlight: the remote cluster at {} is not used for this run: {why}; gates run here",
            self.options.endpoint
        ));
        self.ready = None;
        self.hits.clear();
    }

    /// Connects, builds the input root from `listing`, prepares every gate's action (its
    /// declared `env` valued from `env`) and looks the cacheable ones up in the cluster's
    /// action cache.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn prepare(
        &mut self,
        config: &Loaded,
        listing: &Listing,
        cwd_in_worktree: &str,
        key_outputs: &HashMap<String, String>,
        env: &ProcessEnv,
        interrupt: &mut InterruptWatch,
    ) -> Result<(), Interrupt> {
        let Some(v2) = &config.v2 else { return Ok(()) };
        let endpoint = Endpoint {
            url: self.options.endpoint.clone(),
            instance: self.options.instance.clone(),
            ca_file: self.options.ca_file.clone().map(Into::into),
            token_file: self.options.token_file.clone().map(Into::into),
        };
        let connect =
            tokio::time::timeout(CONNECT_TIMEOUT, self.settings.backend.connect(&endpoint));
        let remote = tokio::select! {
            connected = connect => match connected {
                Ok(Ok(remote)) => remote,
                Ok(Err(error)) => {
                    self.off(error.to_string());
                    return Ok(());
                }
                Err(_) => {
                    self.off(format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()));
                    return Ok(());
                }
            },
            signal = interrupted(interrupt) => return Err(signal),
        };
        let wants_remote_run = v2.gates.iter().any(|g| g.run == RunOn::Remote);
        if wants_remote_run && !remote.can_execute() {
            self.warnings.push(format!(
                "greenlight: the cluster at {} offers no execution; `run: remote` gates run here",
                self.options.endpoint
            ));
        }
        let root = match self.input_root(&remote, listing).await {
            Ok(root) => root,
            Err(why) => {
                self.off(format!(
                    "the workspace could not be read as an input root ({why})"
                ));
                return Ok(());
            }
        };
        let mut actions = HashMap::new();
        let mut retry_actions = HashMap::new();
        for (index, (gate, extra)) in config.gates.iter().zip(&v2.gates).enumerate() {
            let spec = |retry| {
                action_spec(
                    &self.options.platform,
                    gate,
                    extra,
                    &v2.options.keys,
                    cwd_in_worktree,
                    key_outputs,
                    env,
                    retry || self.options.cache == RemoteCache::Off,
                )
            };
            actions.insert(index, remote.prepare(&spec(false), &root));
            if gate.retry_on_fail {
                retry_actions.insert(index, remote.prepare(&spec(true), &root));
            }
        }
        let run = Arc::new(RemoteRun {
            can_execute: remote.can_execute(),
            skip_lookup: self.options.cache == RemoteCache::Off || self.refresh,
            remote,
            root,
            actions,
            retry_actions,
            uploaded: Mutex::new(None),
            endpoint: self.options.endpoint.clone(),
            platform: self.options.platform.clone(),
            broken: AtomicBool::new(false),
            warnings: std::sync::Mutex::new(Vec::new()),
        });
        if self.options.cache != RemoteCache::Off && !self.refresh {
            let lookups = config
                .gates
                .iter()
                .enumerate()
                .filter(|(index, _)| v2.gates[*index].cache)
                .filter_map(|(index, _)| Some((index, run.actions.get(&index)?)))
                .map(|(index, action)| {
                    let remote = &run.remote;
                    async move { (index, remote.lookup(action).await) }
                });
            let found = tokio::select! {
                found = futures_util::future::join_all(lookups) => found,
                signal = interrupted(interrupt) => return Err(signal),
            };
            for (index, result) in found {
                match result {
                    Ok(Some(outcome)) => {
                        // A failure of a gate with a retry is not replayed: the retry is what
                        // tells FLAKY from FAIL, so it must run.
                        let retried = config.gates[index].retry_on_fail && outcome.exit_code != 0;
                        if !retried && !outcome.timed_out {
                            self.hits.insert(index, outcome);
                        }
                    }
                    Ok(None) => {}
                    Err(error) => {
                        self.off(format!("its action cache failed ({error})"));
                        return Ok(());
                    }
                }
            }
        }
        self.ready = Some(run);
        Ok(())
    }

    /// The workspace as an input root, with file digests remembered between runs. The
    /// verify.yaml itself is left out: what a gate is (command, env, time limit, platform) is
    /// in its action already, so editing one gate, or the cache mode, does not make every
    /// other gate miss.
    async fn input_root(
        &self,
        remote: &Arc<dyn Cluster>,
        listing: &Listing,
    ) -> Result<Digest, String> {
        let mut files = listing_files(listing);
        if let Ok(config) = self.config_path.strip_prefix(&listing.top) {
            files.retain(|f| f != config);
        }
        let top = listing.top.clone();
        let digests_file = self
            .digests_file
            .as_deref()
            .map(|dir| digests_path(dir, &top));
        let remote = Arc::clone(remote);
        tokio::task::spawn_blocking(move || {
            let saved = digests_file
                .as_deref()
                .map(|path| (path, load_digests(path)));
            let digests = saved.as_ref().map(|(path, saved)| SavedDigests {
                path,
                saved: saved.as_deref(),
            });
            remote
                .input_root(&top, &files, digests)
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// Gate `index`'s result from the cluster's action cache, as a report.
    pub(crate) fn replay(
        &mut self,
        config: &Loaded,
        index: usize,
        at: Duration,
        matchers: &MatcherSet,
    ) -> Option<GateReport> {
        let run = self.ready.as_ref()?;
        let outcome = self.hits.get(&index)?;
        let action = run.actions.get(&index)?;
        let gate = &config.gates[index];
        let attempt = attempt_from(outcome, config.options.max_log_tail_bytes, matchers, gate);
        let mut report = GateReport::from_attempt(gate, attempt);
        report.started_ms = Some(at.as_millis() as u64);
        report.cached = Some(action.hash.clone());
        if self.explain {
            report.explain = Some(format!(
                "replayed: the action cache of {} holds this exact action{}",
                self.options.endpoint,
                outcome
                    .worker
                    .as_deref()
                    .map(|w| format!(" (run by {w})"))
                    .unwrap_or_default()
            ));
        }
        report.remote = Some(RemoteMark {
            source: RemoteSource::ActionCache,
            action: action.hash.clone(),
            worker: outcome.worker.clone(),
            operation: None,
        });
        Some(report)
    }

    /// What `run: remote` gates execute with, once prepared (none when remote is off).
    pub(crate) fn runner(&self) -> Option<Arc<RemoteRun>> {
        self.ready.clone()
    }

    /// Moves the warnings of the gates' remote attempts into this plan's.
    pub(crate) fn collect_warnings(&mut self) {
        if let Some(run) = &self.ready {
            self.warnings.extend(run.take_warnings());
        }
    }

    /// Publishes the results this machine measured, when the cache is `shared`, the result is
    /// clean, and the workspace is still the one the gates ran on (`after`: the listing read
    /// after the gates).
    pub(crate) async fn publish(
        &mut self,
        config: &Loaded,
        selected: &[usize],
        gates: &[GateReport],
        after: Option<&Listing>,
    ) {
        if self.options.cache != RemoteCache::Shared {
            return;
        }
        let Some(run) = self.ready.clone() else {
            return;
        };
        let Some(v2) = &config.v2 else { return };
        if run.is_broken() {
            return;
        }
        let candidates: Vec<(usize, &GateReport)> = selected
            .iter()
            .filter_map(|&index| {
                let report = gates.iter().find(|g| g.id == config.gates[index].id)?;
                let publishable = report.cached.is_none()
                    && report.remote.is_none()
                    && v2.gates[index].cache
                    && crate::plan::storable(report);
                publishable.then_some((index, report))
            })
            .collect();
        if candidates.is_empty() {
            return;
        }
        // A result belongs to the tree it ran on: when the workspace moved while the gates ran,
        // nothing is published (the local cache's rule, for the same reason).
        let Some(after) = after else { return };
        match self.input_root(&run.remote, after).await {
            Ok(now) if now == run.root => {}
            _ => return,
        }
        for (index, report) in candidates {
            let (Some(action), Some(first)) = (run.actions.get(&index), report.attempts.first())
            else {
                continue;
            };
            let finished = SystemTime::now();
            let local = LocalResult {
                exit_code: first.exit_code.unwrap_or(1),
                stdout: first.tail.clone().into_bytes(),
                stderr: Vec::new(),
                started: finished.checked_sub(first.duration).unwrap_or(finished),
                finished,
            };
            if let Err(error) = run.remote.publish(action, &local).await {
                self.warnings.push(format!(
                    "greenlight: gate {} was not published to {}: {error}",
                    config.gates[index].id, self.options.endpoint
                ));
                if error.unreachable {
                    return;
                }
            }
        }
    }
}

impl RemoteRun {
    fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }

    /// Remote is off for the rest of the run; the first failure is the one warned about.
    fn mark_broken(&self, why: &str) {
        if !self.broken.swap(true, Ordering::Relaxed)
            && let Ok(mut warnings) = self.warnings.lock()
        {
            warnings.push(format!(
                "greenlight: the remote cluster at {} failed ({why}); this and later gates run here",
                self.endpoint
            ));
        }
    }

    /// The warnings of the gates' remote attempts so far.
    pub(crate) fn take_warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default()
    }

    /// Whether a gate with these v2 settings runs on the cluster.
    pub(crate) fn runs(&self, extra: Option<&GateV2>) -> bool {
        self.can_execute && extra.is_some_and(|g| g.run == RunOn::Remote) && !self.is_broken()
    }

    /// Runs gate `index` on the cluster: uploads the input root once, executes, and turns the
    /// result into an attempt. The second attempt of a retried gate skips the cluster's cache
    /// and is never cached (a pass after a failure is FLAKY, not a result to replay).
    ///
    /// `resume`: an operation an earlier, killed run of this gate left on the cluster; it is
    /// re-attached (WaitExecution) instead of executing again, unless the cluster no longer
    /// knows it. `on_started` hears the action digest and the operation name as soon as the
    /// cluster names it, so a caller can persist them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn attempt(
        &self,
        index: usize,
        gate: &GateSpec,
        number: u8,
        tail_bytes: usize,
        matchers: &MatcherSet,
        resume: Option<&str>,
        on_started: &mut (dyn FnMut(&str, &str) + Send),
        on_output: &mut dyn OutputSink,
        interrupt: &mut InterruptWatch,
    ) -> Result<RemoteAttempt, Interrupt> {
        let retry = number > 1;
        let action = match retry {
            true => self.retry_actions.get(&index),
            false => self.actions.get(&index),
        };
        let Some(action) = action else {
            return Ok(RemoteAttempt::RunHere);
        };
        if let Err(why) = self.upload_root().await {
            self.mark_broken(&why);
            return Ok(RemoteAttempt::RunHere);
        }
        let started = Instant::now();
        let mut operation = None;
        let limit = Duration::from_secs(u64::from(gate.timeout_sec)) + QUEUE_ALLOWANCE;
        let action_hash = action.hash.clone();
        let resumed = match resume {
            Some(name) => {
                operation = Some(name.to_owned());
                let wait = self.remote.wait(name);
                tokio::select! {
                    done = tokio::time::timeout(limit, wait) => match done {
                        // Gone from the cluster (finished long ago, or the cluster restarted):
                        // execute instead; the action cache answers a finished one at once.
                        Ok(Err(error)) if !error.unreachable => None,
                        other => Some(other),
                    },
                    signal = interrupted(interrupt) => {
                        // A signal ends this process, not the remote gate: a resume comes back to it.
                        return Err(signal);
                    }
                }
            }
            None => None,
        };
        let outcome = match resumed {
            Some(done) => done,
            None => {
                let skip_lookup = retry || self.skip_lookup;
                let mut on_name = |name: &str| {
                    operation = Some(name.to_owned());
                    on_started(&action_hash, name);
                };
                let execute = self.remote.execute(action, skip_lookup, &mut on_name);
                tokio::select! {
                    done = tokio::time::timeout(limit, execute) => done,
                    signal = interrupted(interrupt) => {
                        if let Some(name) = &operation {
                            let _ = self.remote.cancel(name).await;
                        }
                        return Err(signal);
                    }
                }
            }
        };
        let outcome = match outcome {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(error)) if error.unreachable => {
                self.mark_broken(&error.to_string());
                return Ok(RemoteAttempt::RunHere);
            }
            Ok(Err(error)) => {
                let why = format!("the cluster at {} could not run it: {error}", self.endpoint);
                let mut attempt = Attempt::blank(AttemptStatus::Fail).cannot_start(why);
                attempt.duration = started.elapsed();
                let mark = self.mark(action, None, operation);
                return Ok(RemoteAttempt::Done(Box::new((attempt, mark))));
            }
            Err(_) => {
                let mut attempt = Attempt::blank(AttemptStatus::Timeout);
                let why = format!(
                    "no worker of {} finished it within {}s (its time limit plus {}s in the queue); \
                     check that a worker offers the platform properties {:?}",
                    self.endpoint,
                    limit.as_secs(),
                    QUEUE_ALLOWANCE.as_secs(),
                    self.platform
                );
                if let Some(name) = &operation {
                    let _ = self.remote.cancel(name).await;
                }
                attempt.exit_code = Some(124);
                attempt.tail = format!("greenlight: {why}\n");
                attempt.output_bytes = attempt.tail.len() as u64;
                attempt.duration = started.elapsed();
                let mark = self.mark(action, None, operation);
                return Ok(RemoteAttempt::Done(Box::new((attempt, mark))));
            }
        };
        on_output.chunk(&outcome.stdout);
        on_output.chunk(&outcome.stderr);
        let mut attempt = attempt_from(&outcome, tail_bytes, matchers, gate);
        if outcome.duration.is_none() {
            attempt.duration = started.elapsed();
        }
        let mut mark = self.mark(
            action,
            outcome.worker.clone(),
            operation.or(outcome.operation.clone()),
        );
        if outcome.cached {
            mark.source = RemoteSource::ActionCache;
        }
        Ok(RemoteAttempt::Done(Box::new((attempt, mark))))
    }

    fn mark(
        &self,
        action: &Digest,
        worker: Option<String>,
        operation: Option<String>,
    ) -> RemoteMark {
        RemoteMark {
            source: RemoteSource::Executed,
            action: action.hash.clone(),
            worker,
            operation,
        }
    }

    /// The input root, uploaded once per run (what the cluster already has is skipped by
    /// FindMissingBlobs; `execute` uploads the action's own Command and Action itself).
    async fn upload_root(&self) -> Result<(), String> {
        let mut uploaded = self.uploaded.lock().await;
        if uploaded.is_none() {
            *uploaded = Some(
                self.remote
                    .upload_root(&self.root)
                    .await
                    .map_err(|e| e.to_string()),
            );
        }
        uploaded.clone().unwrap_or(Ok(()))
    }
}

/// The action of one gate: `/bin/sh -c <command>` in the gate's directory of the input root,
/// with the values of the gate's declared `env` (nothing else of this machine's environment:
/// PATH or HOME in the key would make every machine miss), the cluster's platform properties,
/// and the `keys` outputs (which the backend makes one more property). `uncached`: a retry, or
/// a cluster used with `cache: off`, whose result the cluster must neither keep nor merge with
/// another run. `env`: where the declared variables' values come from.
#[allow(clippy::too_many_arguments)]
pub(crate) fn action_spec(
    platform: &BTreeMap<String, String>,
    gate: &GateSpec,
    extra: &GateV2,
    option_keys: &[String],
    cwd_in_worktree: &str,
    key_outputs: &HashMap<String, String>,
    env: &ProcessEnv,
    uncached: bool,
) -> ActionSpec {
    let env = extra
        .env
        .iter()
        .filter_map(|name| {
            let value = env.get(name)?;
            Some((name.clone(), value.to_string_lossy().into_owned()))
        })
        .collect();
    let keys = option_keys
        .iter()
        .chain(&extra.keys)
        .filter_map(|command| key_outputs.get(command).cloned())
        .collect();
    ActionSpec {
        argv: vec!["/bin/sh".into(), "-c".into(), gate.command.clone()],
        env,
        platform: platform.clone(),
        keys,
        working_directory: if cwd_in_worktree == "." {
            String::new()
        } else {
            cwd_in_worktree.to_owned()
        },
        timeout: Some(Duration::from_secs(u64::from(gate.timeout_sec))),
        do_not_cache: uncached || !extra.cache,
    }
}

/// The files of the listing that go into the input root (submodules are directories of their
/// own repository and are left out).
fn listing_files(listing: &Listing) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    listing
        .entries
        .iter()
        .filter(|file| file.mode != b"160000")
        .map(|file| PathBuf::from(std::ffi::OsStr::from_bytes(&file.path)))
        .collect()
}

/// Where the file digests of the worktree at `top` are remembered.
fn digests_path(dir: &Path, top: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let id = blake3::hash(top.as_os_str().as_bytes()).to_hex();
    dir.join(format!("digests-{}", &id[..16]))
}

/// The file digests remembered at `path` in the cache directory, read as every cache file is
/// (without blocking, regular files only): a FIFO there would hold the run forever. Anything
/// unreadable is `None`: the backend starts them empty and replaces the file at its next save.
fn load_digests(path: &Path) -> Option<Vec<u8>> {
    crate::file::read_bounded(path, MAX_DIGESTS_BYTES).ok()
}

/// The largest file digests file read back: a line per file of the worktree, so 1 GiB is
/// millions of files; a larger one starts empty.
const MAX_DIGESTS_BYTES: u64 = 1 << 30;

/// A remote result as an attempt: the same tail, digest and status a local run of the same
/// output would give.
fn attempt_from(
    outcome: &Outcome,
    tail_bytes: usize,
    matchers: &MatcherSet,
    gate: &GateSpec,
) -> Attempt {
    let mut tail = greenlight_proc::tail::TailBuffer::new(tail_bytes);
    // The paths it prints are the cluster's checkout's, not this machine's.
    let mut capture = Capture::with_matchers(0, matchers, &gate.command, None);
    for bytes in [&outcome.stdout, &outcome.stderr] {
        tail.push(bytes);
        capture.chunk(bytes);
    }
    let (status, exit_code, digest_exit) = if outcome.timed_out {
        (AttemptStatus::Timeout, Some(124), None)
    } else if outcome.exit_code == 0 {
        (AttemptStatus::Pass, Some(0), Some(0))
    } else {
        (
            AttemptStatus::Fail,
            Some(outcome.exit_code),
            Some(outcome.exit_code),
        )
    };
    Attempt {
        exit_code,
        duration: outcome.duration.unwrap_or_default(),
        tail: tail.text(),
        output_bytes: tail.total_bytes(),
        digest: Some(capture.finish(digest_exit).1),
        ..Attempt::blank(status)
    }
}

/// Resolves with the signal once the run is interrupted (never, when nothing can interrupt it
/// any more).
async fn interrupted(watch: &mut InterruptWatch) -> Interrupt {
    loop {
        if let Some(signal) = *watch.borrow_and_update() {
            return signal;
        }
        if watch.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    /// An ordinary read of a FIFO in the cache directory waits for a writer forever.
    #[test]
    fn a_fifo_where_the_file_digests_belong_starts_them_empty_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("digests-0123456789abcdef");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(super::load_digests(&path).is_none());
        });
        let answer = rx.recv_timeout(Duration::from_secs(5));
        if answer.is_err() {
            // Release the blocked reader before failing, so the test process can end.
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
        }
        assert_eq!(answer, Ok(true), "reading the digests blocked on a FIFO");
    }
}
