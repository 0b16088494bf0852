//! One run's use of the result cache (a verify run, or one gate of the goal loop): the keys of
//! its gates, the replays, and the results stored at the end.
//!
//! The rules that keep a replay exact:
//! - the workspace listing is read once before the gates; after them, only the paths the
//!   gates to store may read are listed again, and a result is stored only when every one of
//!   its inputs has the same bytes *and* the same metadata (size, mtime and ctime in
//!   nanoseconds, inode) as before, so a gate whose inputs changed while it ran (an agent still
//!   editing, a formatter rewriting files, a file changed and changed back) is never stored;
//! - its `keys` commands are run again after the gates, and a result is stored only when each
//!   prints exactly what it printed before them;
//! - a gate that reads a path which cannot be keyed exactly (a FIFO, an unreadable file) has
//!   no key for the run: it runs, and `--explain` says why;
//! - only PASS and FAIL are stored, and only when every attempt exited on its own: no timeout,
//!   no FLAKY, no interrupt, no leftover process, no pipe left open, no start failure (and the
//!   runner stores nothing of a run that left a process no one gate can be named for);
//! - any problem with the cache (no directory, a key file that is not private) turns it off for
//!   the run with a warning; it never changes a verdict.

use std::collections::HashMap;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::cache::{
    self, CacheSettings, Entry, GateKey, KeyContext, KeyParts, Store, StoredAttempt,
};
use crate::config::{CacheMode, Loaded};
use crate::exec::{self, ExecSpec, Interrupt, InterruptWatch, OutputSink, Termination};
use crate::remote_plan::{RemotePlan, RemoteRun};
use crate::report::{Attempt, AttemptStatus, GateReport, GateVerdict, RemoteMark};
use crate::runner::RunOptions;
use crate::status::StatusRun;
use crate::workspace_key::{self, Listing, StatCache};

/// How long a `keys` command may run.
const KEY_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// The cache as one run uses it.
pub struct CachePlan {
    settings: Option<CacheSettings>,
    listing_thread: Option<JoinHandle<Result<Listing, String>>>,
    listing: Option<Listing>,
    store: Option<Store>,
    /// Per gate index: its key (when it has one).
    keys: HashMap<usize, GateKey>,
    /// Per gate index: why it ran or replayed (`--explain`).
    explain: HashMap<usize, String>,
    /// Output hash of every key command, run once.
    key_outputs: HashMap<String, String>,
    /// Where the gates run, relative to the worktree's top.
    cwd_in_worktree: String,
    /// The cluster of `options.remote`, when the file declares one.
    remote: Option<RemotePlan>,
    /// The listing read after the gates for the remote publish.
    after: Option<Listing>,
    /// Where `keys` commands run and how they are ended (kept for their second run).
    key_runner: Option<(RunOptions, InterruptWatch)>,
    /// Problems worth a line on stderr.
    pub warnings: Vec<String>,
}

impl CachePlan {
    /// Decides whether this run uses the cache and, if so, starts reading the listing.
    /// `status`: the run's `git status`, whose untracked files the listing takes.
    pub fn start(
        config: &Loaded,
        options: &RunOptions,
        selected: &[usize],
        status: Option<&StatusRun>,
    ) -> CachePlan {
        let wants = config.cache() == CacheMode::Local
            && selected
                .iter()
                .any(|&i| config.gate_v2(i).is_some_and(|g| g.cache));
        let mut warnings = Vec::new();
        let remote = RemotePlan::new(
            config,
            options.remote.as_ref(),
            options.cache.as_ref().is_some_and(|c| c.refresh),
            options.cache.as_ref().is_some_and(|c| c.explain),
            options.cache.as_ref().map(|c| c.dir.as_path()),
        )
        .unwrap_or_else(|why| {
            warnings.push(why);
            None
        });
        let settings = options.cache.clone().filter(|_| wants);
        let listing_thread = (settings.is_some() || remote.is_some()).then(|| {
            let cwd = options.cwd.clone();
            let dir = settings.as_ref().map(|s| s.dir.clone());
            let status = status.map(StatusRun::shared);
            std::thread::spawn(move || {
                let known = |top: &Path| {
                    dir.as_deref()
                        .map(|dir| StatCache::load(&StatCache::path_in(dir, top)))
                        .unwrap_or_default()
                };
                workspace_key::listing_with(&cwd, known, None, status.as_deref())
            })
        });
        CachePlan {
            settings,
            listing_thread,
            listing: None,
            store: None,
            keys: HashMap::new(),
            explain: HashMap::new(),
            key_outputs: HashMap::new(),
            cwd_in_worktree: ".".to_owned(),
            remote,
            after: None,
            key_runner: None,
            warnings,
        }
    }

    fn off(&mut self, why: String) {
        self.warnings.push(format!(
            "greenlight: the result cache is off for this run: {why}"
        ));
        self.settings = None;
        self.store = None;
        self.keys.clear();
    }

    /// Opens the store, runs the key commands, and computes every cacheable gate's key.
    pub async fn prepare(
        &mut self,
        config: &Loaded,
        options: &RunOptions,
        interrupt: &mut InterruptWatch,
    ) -> Result<(), Interrupt> {
        if self.settings.is_none() && self.remote.is_none() {
            return Ok(());
        }
        let listing = match self.listing_thread.take().map(JoinHandle::join) {
            Some(Ok(Ok(listing))) => listing,
            Some(Ok(Err(why))) => {
                self.remote_off();
                self.off(format!("the workspace could not be listed ({why})"));
                return Ok(());
            }
            _ => {
                self.remote_off();
                self.off("the workspace listing failed".into());
                return Ok(());
            }
        };
        let Some(v2) = &config.v2 else {
            return Ok(());
        };
        let commands: Vec<&String> = v2
            .options
            .keys
            .iter()
            .chain(v2.gates.iter().flat_map(|g| &g.keys))
            .collect();
        let key_outputs = run_key_commands(commands, options, interrupt).await?;
        self.key_runner = Some((options.clone(), interrupt.clone()));
        self.cwd_in_worktree = cwd_in(&listing.top, &options.cwd);
        // Files the cache wrote inside the worktree would be inputs of every gate that reads the
        // whole workspace, so no such gate could ever replay; the cache is never in a worktree.
        let cache_inside = options
            .cache
            .as_ref()
            .is_some_and(|c| is_within(&c.dir, &listing.top));
        if let Some(remote) = &mut self.remote {
            if cache_inside {
                remote.keep_no_file_digests();
            }
            let prepared = remote
                .prepare(
                    config,
                    &listing,
                    &self.cwd_in_worktree,
                    &key_outputs,
                    &options.env,
                    interrupt,
                )
                .await;
            self.warnings.append(&mut remote.warnings);
            prepared?;
        }
        // Carried for `store_results`: the key outputs do not change within a run.
        self.key_outputs = key_outputs;
        let Some(settings) = self.settings.clone() else {
            self.listing = Some(listing);
            return Ok(());
        };
        // The state directory (the cache's key, the run records) changes on every run: inside
        // the worktree it is an input of every whole-workspace gate, which then never replays.
        let inside = if cache_inside {
            Some((
                "cache directory",
                settings.dir.as_path(),
                "its own entries would change every gate's inputs; set GREENLIGHT_CACHE_DIR or XDG_CACHE_HOME to a directory outside it",
            ))
        } else {
            let state_dir = settings.key_file.parent();
            state_dir.filter(|dir| is_within(dir, &listing.top)).map(|dir| {
                (
                    "state directory",
                    dir,
                    "the files greenlight keeps there change every gate's inputs; set GREENLIGHT_STATE or XDG_STATE_HOME to a place outside it",
                )
            })
        };
        if let Some((what, dir, why)) = inside {
            self.off(format!(
                "the {what} {} is inside this worktree ({}), where {why}",
                dir.display(),
                listing.top.display()
            ));
            self.listing = Some(listing);
            return Ok(());
        }
        let store = match settings.open() {
            Ok(store) => store,
            Err(why) => {
                self.off(why);
                self.listing = Some(listing);
                return Ok(());
            }
        };
        // Only now is the cache known to be outside the worktree: the stat cache is written
        // beside the entries (a failure costs the next run some reading, nothing else).
        let _ = listing.save_stat_cache(&settings.dir);
        let context = self.key_context(config, &listing);
        let env = |name: &str| options.env.var(name);
        let mut keys = HashMap::new();
        let mut explain = HashMap::new();
        let mut warnings = Vec::new();
        for (index, (gate, extra)) in config.gates.iter().zip(&v2.gates).enumerate() {
            if !extra.cache {
                if settings.explain {
                    explain.insert(index, "ran: `cache: false` on this gate".to_owned());
                }
                continue;
            }
            if let Some(why) = cache::uncacheable(&listing, extra) {
                if settings.explain {
                    explain.insert(index, format!("ran: {why}"));
                }
                continue;
            }
            match cache::gate_key(&context, gate, extra, &env) {
                Ok(key) => {
                    keys.insert(index, key);
                }
                Err(why) => warnings.push(format!(
                    "greenlight: gate {} has no cache key: {why}",
                    gate.id
                )),
            }
        }
        self.keys = keys;
        self.explain.extend(explain);
        self.warnings.extend(warnings);
        self.store = Some(store);
        self.listing = Some(listing);
        Ok(())
    }

    /// What every gate's key is computed against, for one listing of the worktree.
    fn key_context<'a>(&'a self, config: &'a Loaded, listing: &'a Listing) -> KeyContext<'a> {
        let option_keys = config.v2.as_ref().map_or(&[][..], |v2| &v2.options.keys);
        KeyContext::new(
            listing,
            &self.cwd_in_worktree,
            &self.key_outputs,
            option_keys,
            config.options.max_log_tail_bytes,
        )
    }

    fn remote_off(&mut self) {
        if let Some(mut remote) = self.remote.take() {
            self.warnings.append(&mut remote.warnings);
        }
    }

    /// The stored result of gate `index`, as a report, when its key hits the local cache or
    /// the cluster's action cache (local first: it costs no round trip).
    pub fn replay(&mut self, config: &Loaded, index: usize, at: Duration) -> Option<GateReport> {
        if let Some(report) = self.replay_local(config, index, at) {
            return Some(report);
        }
        let matchers = config.gate_v2(index).map(|g| &g.matcher_set)?;
        self.remote.as_mut()?.replay(config, index, at, matchers)
    }

    /// What `run: remote` gates execute with, when the cluster is there.
    pub(crate) fn remote_runner(&self) -> Option<std::sync::Arc<RemoteRun>> {
        self.remote.as_ref()?.runner()
    }

    /// Runs gate `index` on the cluster when verify.yaml says `run: remote` and the cluster
    /// can (`None` otherwise, or when the cluster failed: then it runs here). `resume` is the
    /// operation a killed earlier run left; `on_started` hears the action digest and operation
    /// name to persist. What the goal loop uses; verify runs remote gates in its scheduler.
    #[allow(clippy::too_many_arguments)]
    pub async fn run_remote(
        &self,
        config: &Loaded,
        index: usize,
        tail_bytes: usize,
        resume: Option<&str>,
        on_started: &mut (dyn FnMut(&str, &str) + Send),
        output: &mut dyn OutputSink,
        interrupt: &mut InterruptWatch,
    ) -> Option<Result<(Attempt, RemoteMark), Interrupt>> {
        let run = self.remote_runner()?;
        let extra = config.gate_v2(index)?;
        if !run.runs(Some(extra)) {
            return None;
        }
        let gate = &config.gates[index];
        let ran = run
            .attempt(
                index,
                gate,
                1,
                tail_bytes,
                &extra.matcher_set,
                resume,
                on_started,
                output,
                interrupt,
            )
            .await;
        match ran {
            Ok(crate::remote_plan::RemoteAttempt::Done(done)) => Some(Ok(*done)),
            Ok(crate::remote_plan::RemoteAttempt::RunHere) => None,
            Err(signal) => Some(Err(signal)),
        }
    }

    /// Publishes this run's clean local results to the cluster's action cache (`cache:
    /// shared`), reading the workspace again unless the local store already did.
    pub async fn publish_remote(
        &mut self,
        config: &Loaded,
        selected: &[usize],
        gates: &[GateReport],
    ) {
        let Some(remote) = &mut self.remote else {
            return;
        };
        if self.after.is_none()
            && let Some(before) = &self.listing
        {
            let top = before.top.clone();
            self.after = tokio::task::spawn_blocking(move || workspace_key::listing(&top))
                .await
                .ok()
                .and_then(Result::ok);
        }
        remote
            .publish(config, selected, gates, self.after.as_ref())
            .await;
        remote.collect_warnings();
        self.warnings.append(&mut remote.warnings);
    }

    /// Moves what the gates' remote attempts warned about into [`CachePlan::warnings`] (a run
    /// that publishes nothing still says the cluster failed).
    pub fn collect_remote_warnings(&mut self) {
        if let Some(remote) = &mut self.remote {
            remote.collect_warnings();
            self.warnings.append(&mut remote.warnings);
        }
    }

    fn replay_local(&mut self, config: &Loaded, index: usize, at: Duration) -> Option<GateReport> {
        let settings = self.settings.as_ref()?;
        let key = self.keys.get(&index)?;
        let store = self.store.as_ref()?;
        let gate = &config.gates[index];
        let entry = if settings.refresh {
            None
        } else {
            store.get(&key.key).unwrap_or_else(|why| {
                self.warnings
                    .push(format!("greenlight: gate {} ran: {why}", gate.id));
                None
            })
        };
        let Some(entry) = entry.filter(|e| e.command == gate.command) else {
            if settings.explain {
                let why = if settings.refresh {
                    "ran: --no-cache".to_owned()
                } else {
                    let name = cache::record_name(&self.listing.as_ref()?.top, &gate.id);
                    let last: Option<KeyParts> = store
                        .record(&name)
                        .unwrap_or_else(|why| {
                            self.warnings.push(format!("greenlight: {why}"));
                            None
                        })
                        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
                    let v2 = config.gate_v2(index)?;
                    format!(
                        "ran: {}",
                        cache::explain_miss(last.as_ref(), &key.parts, self.listing.as_ref()?, v2)
                    )
                };
                self.explain.insert(index, why);
            }
            return None;
        };
        let mut report = GateReport::skipped(gate, None);
        report.verdict = entry.verdict;
        report.passed = Some(entry.verdict == GateVerdict::Pass);
        report.attempts = entry.attempts.iter().map(replayed).collect();
        report.started_ms = Some(at.as_millis() as u64);
        report.cached = Some(key.key.clone());
        report.cache_key = Some(key.key.clone());
        if settings.explain {
            let age = cache::created_now().saturating_sub(entry.created_ms) / 1000;
            report.explain = Some(format!(
                "replayed: inputs, env and keys match the result stored {age}s ago"
            ));
        }
        Some(report)
    }

    /// The key and explanation a running gate carries into its report (either may be absent:
    /// a gate without a key can still say why it has none).
    pub fn decision(&self, index: usize) -> (Option<String>, Option<String>) {
        let key = self.keys.get(&index).map(|k| k.key.clone());
        (key, self.explain.get(&index).cloned())
    }

    /// Stores the results that may be stored: those whose inputs are, byte for byte and in
    /// their metadata, what they were before the gates, and whose `keys` commands print what
    /// they printed then. Only the paths those gates may read are listed again.
    pub async fn store_results(
        &mut self,
        config: &Loaded,
        selected: &[usize],
        gates: &[GateReport],
    ) {
        let (Some(_), Some(before), Some(v2)) = (&self.store, &self.listing, &config.v2) else {
            return;
        };
        let candidates: Vec<(usize, &GateReport)> = selected
            .iter()
            .filter_map(|&index| {
                let report = gates.iter().find(|g| g.id == config.gates[index].id)?;
                (report.cached.is_none() && storable(report) && self.keys.contains_key(&index))
                    .then_some((index, report))
            })
            .collect();
        if candidates.is_empty() {
            return;
        }
        let mut roots: Option<Vec<Vec<u8>>> = Some(Vec::new());
        for &(index, _) in &candidates {
            match (cache::input_roots(&v2.gates[index]), &mut roots) {
                (Some(more), Some(all)) => all.extend(more),
                _ => roots = None,
            }
        }
        let top = before.top.clone();
        let known = before.stat_cache().clone();
        let listed = tokio::task::spawn_blocking(move || {
            workspace_key::listing_with(&top, |_| known, roots.as_deref(), None)
        })
        .await;
        let after = match listed {
            Ok(Ok(after)) => after,
            Ok(Err(why)) => {
                self.warnings.push(format!(
                    "greenlight: results not cached: the workspace could not be listed again ({why})"
                ));
                return;
            }
            Err(_) => return,
        };
        let Some(now_keys) = self.rerun_key_commands(config, &candidates).await else {
            return; // interrupted: nothing more is stored
        };
        let (Some(store), Some(before)) = (&self.store, &self.listing) else {
            return;
        };
        let mut warnings = Vec::new();
        for (index, report) in candidates {
            let Some(key) = self.keys.get(&index) else {
                continue;
            };
            let gate = &config.gates[index];
            let extra = &v2.gates[index];
            if cache::inputs_unchanged(before, &after, extra).is_err() {
                continue; // its inputs changed while it ran: the result belongs to no one state
            }
            let keys_same = key
                .parts
                .keys
                .iter()
                .all(|(command, hash)| now_keys.get(command) == Some(hash));
            if !keys_same {
                continue; // a `keys` command printed something else after the gate
            }
            let entry = Entry {
                key: key.key.clone(),
                gate: gate.id.clone(),
                command: gate.command.clone(),
                verdict: report.verdict,
                attempts: report.attempts.iter().map(stored).collect(),
                created_ms: cache::created_now(),
            };
            if let Err(why) = store.put(&entry) {
                warnings.push(format!("greenlight: gate {} not cached: {why}", gate.id));
                continue;
            }
            let mut parts = key.parts.clone();
            parts.inputs = cache::input_map(before, extra);
            if let Ok(json) = serde_json::to_vec(&parts) {
                let _ = store.put_record(&cache::record_name(&before.top, &gate.id), &json);
            }
        }
        self.warnings.extend(warnings);
    }

    /// The outputs of the `keys` commands of `candidates` (and `options.keys`), run again after
    /// the gates; `None` when interrupted.
    async fn rerun_key_commands(
        &mut self,
        config: &Loaded,
        candidates: &[(usize, &GateReport)],
    ) -> Option<HashMap<String, String>> {
        let v2 = config.v2.as_ref()?;
        let commands: Vec<&String> = v2
            .options
            .keys
            .iter()
            .chain(candidates.iter().flat_map(|&(i, _)| &v2.gates[i].keys))
            .collect();
        if commands.is_empty() {
            return Some(HashMap::new());
        }
        let (options, interrupt) = self.key_runner.as_mut()?;
        run_key_commands(commands, options, interrupt).await.ok()
    }
}

impl Drop for CachePlan {
    /// A run that ends before its gates (no work, the primary checkout, an interrupt) still
    /// waits for the listing it started: its git process must not outlive the command.
    fn drop(&mut self) {
        if let Some(thread) = self.listing_thread.take() {
            let _ = thread.join();
        }
    }
}

/// Whether a result may be stored: PASS or FAIL, every attempt ended on its own and cleanly.
pub(crate) fn storable(report: &GateReport) -> bool {
    matches!(report.verdict, GateVerdict::Pass | GateVerdict::Fail)
        && report.retry_without_verdict.is_none()
        && !report.attempts.is_empty()
        && report.attempts.iter().all(|a| {
            matches!(a.status, AttemptStatus::Pass | AttemptStatus::Fail)
                && a.leftovers.is_empty()
                && !a.pipe_left_open
                && a.start_error.is_none()
        })
}

fn stored(attempt: &Attempt) -> StoredAttempt {
    StoredAttempt {
        status: attempt.status,
        exit_code: attempt.exit_code,
        duration_ms: attempt.duration.as_millis() as u64,
        tail: attempt.tail.clone(),
        output_bytes: attempt.output_bytes,
        digest: attempt.digest.clone(),
    }
}

fn replayed(attempt: &StoredAttempt) -> Attempt {
    Attempt {
        exit_code: attempt.exit_code,
        duration: Duration::from_millis(attempt.duration_ms),
        tail: attempt.tail.clone(),
        output_bytes: attempt.output_bytes,
        digest: attempt.digest.clone(),
        ..Attempt::blank(attempt.status)
    }
}

/// `cwd` relative to the worktree's top, `.` at the top.
fn cwd_in(top: &Path, cwd: &Path) -> String {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    match cwd.strip_prefix(top) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => cwd.to_string_lossy().into_owned(),
    }
}

/// Hashes every byte a `keys` command prints, as it streams: memory stays bounded whatever
/// the output's size.
struct HashingSink(blake3::Hasher);

impl OutputSink for HashingSink {
    fn chunk(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// Runs each distinct command once; command → hash of how it ended and everything it printed.
async fn run_key_commands(
    commands: Vec<&String>,
    options: &RunOptions,
    interrupt: &mut InterruptWatch,
) -> Result<HashMap<String, String>, Interrupt> {
    let mut outputs = HashMap::new();
    for command in commands {
        if !outputs.contains_key(command) {
            let hash = run_key_command(command, options, interrupt).await?;
            outputs.insert(command.clone(), hash);
        }
    }
    Ok(outputs)
}

/// Runs one `keys` command in the worktree and hashes how it ended and every byte it printed.
async fn run_key_command(
    command: &str,
    options: &RunOptions,
    interrupt: &mut InterruptWatch,
) -> Result<String, Interrupt> {
    let spec = ExecSpec {
        command,
        cwd: &options.cwd,
        timeout: KEY_COMMAND_TIMEOUT,
        kill_grace: options.kill_grace,
        tail_bytes: 0,
        extra_env: &[],
        lock_root: &options.lock_root,
        claim_adopted: false,
    };
    let mut output = HashingSink(blake3::Hasher::new());
    let ended = match exec::run(&spec, &mut output, interrupt).await {
        Ok(outcome) => match outcome.termination {
            Termination::Exited(code) => format!("exit {code}"),
            Termination::TimedOut => "timeout".to_owned(),
            Termination::Interrupted(signal) => return Err(signal),
        },
        Err(error) => format!("cannot start: {error}"),
    };
    let mut hasher = blake3::Hasher::new();
    hasher.update(ended.as_bytes());
    hasher.update(b"\0");
    hasher.update(output.0.finalize().as_bytes());
    Ok(hasher.finalize().to_hex().to_string())
}

/// Whether `dir` is `top` or lies under it. The nearest part of `dir` that exists decides,
/// with its links resolved (the cache directory may not exist yet, and what is made later is
/// made inside that part); a relative `dir` is taken from the process's directory, as the store
/// opens it.
fn is_within(dir: &Path, top: &Path) -> bool {
    let absolute = if dir.is_relative() {
        std::env::current_dir().map_or_else(|_| dir.to_path_buf(), |cwd| cwd.join(dir))
    } else {
        dir.to_path_buf()
    };
    let top = std::fs::canonicalize(top).unwrap_or_else(|_| top.to_path_buf());
    absolute
        .ancestors()
        .find_map(|part| std::fs::canonicalize(part).ok())
        .is_some_and(|real| real.starts_with(&top))
}

#[cfg(test)]
mod tests {
    use super::is_within;

    #[test]
    fn a_cache_directory_is_within_the_worktree_through_links_and_before_it_exists() {
        let top = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let top = top.path();
        assert!(is_within(top, top));
        assert!(is_within(&top.join("not/yet/made"), top));
        assert!(!is_within(&outside.path().join("cache"), top));
        // A link from outside into the worktree is inside; one from inside out is not.
        let into = outside.path().join("into");
        std::os::unix::fs::symlink(top, &into).unwrap_or_else(|e| panic!("{e}"));
        assert!(is_within(&into.join("greenlight"), top));
        let out_of = top.join("out");
        std::os::unix::fs::symlink(outside.path(), &out_of).unwrap_or_else(|e| panic!("{e}"));
        assert!(!is_within(&out_of.join("greenlight"), top));
        // A sibling whose name starts with the worktree's is not inside it.
        let sibling = format!("{}-cache", top.display());
        assert!(!is_within(std::path::Path::new(&sibling), top));
    }
}
