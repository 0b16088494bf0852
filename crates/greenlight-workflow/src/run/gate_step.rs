//! A gate step's verify.yaml gates, run by greenlight-gate's runner in a member's or the
//! run's worktree.
//!
//! The rule that keeps a verdict honest: the gates are the verify.yaml read when the run
//! started, from the worktree it was started in (kept in memory as a snapshot and re-read from
//! it, never from disk), so an agent that edits verify.yaml in its worktree does not change what
//! judges it. The work-evidence step is skipped: the landed barrier already says whether the
//! agent delivered.

use std::path::PathBuf;
use std::time::Duration;

use greenlight_gate::cache::CacheSettings;
use greenlight_gate::config::Loaded;
use greenlight_gate::{RemoteSettings, RunOptions, RunResult};
use greenlight_proc::{InterruptWatch, ProcessEnv};

use crate::run::worktrees::Tree;

/// What gates run with, as the binary read it once.
#[derive(Debug, Clone)]
pub struct GateSettings {
    /// SIGTERM → SIGKILL grace.
    pub kill_grace: Duration,
    /// Where mutex locks live.
    pub lock_root: PathBuf,
    /// The environment gates inherit.
    pub env: ProcessEnv,
    /// The result cache (v2 files).
    pub cache: Option<CacheSettings>,
    /// Remote execution (v2 files).
    pub remote: Option<RemoteSettings>,
}

/// How a gate run in one worktree ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// Every selected gate passed.
    pub passed: bool,
    /// The gates that did not pass, for a person.
    pub failed: Vec<String>,
}

/// The gate runner's options for gates in `cwd`, with `extra_env` on top of the inherited
/// environment; every gate of the config, no work-evidence, `base` as the base ref (the run's
/// base commit: a gate that diffs against the base sees the run's, whatever `origin/HEAD` is).
/// Agents run beside these gates, so the runner claims no adopted process for a gate
/// (`sweep_adopted` off); the run's end sweeps them ([`crate::run::run`]).
pub fn options(
    settings: &GateSettings,
    cwd: PathBuf,
    extra_env: Vec<(String, String)>,
    base: &str,
) -> RunOptions {
    RunOptions {
        cwd,
        base_ref: Some(base.to_owned()),
        only: None,
        skip_work_evidence: true,
        kill_grace: settings.kill_grace,
        lock_root: settings.lock_root.clone(),
        env: settings.env.clone(),
        extra_env,
        cache: settings.cache.clone(),
        remote: settings.remote.clone(),
        // A workflow's agents run beside its gates: a gate ends only what carries its token.
        sweep_adopted: false,
    }
}

/// Runs `only` (every gate when `None`) of `config` in `tree`. `Err`: the run could not judge
/// (interrupted, a gate id the file lacks, the worktree gone) — never a pass.
pub async fn run(
    config: &Loaded,
    only: Option<Vec<String>>,
    tree: &Tree,
    base: &str,
    settings: &GateSettings,
    interrupt: &mut InterruptWatch,
) -> Result<Judged, String> {
    let options = RunOptions {
        only,
        ..options(settings, tree.path.clone(), tree.env(), base)
    };
    let report = greenlight_gate::run(config, &options, &mut |_| {}, interrupt)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(signal) = report.interrupted {
        return Err(format!("the gates were interrupted ({signal:?})"));
    }
    let failed: Vec<String> = report
        .gates
        .iter()
        .filter(|g| g.passed != Some(true))
        .map(|g| g.id.clone())
        .collect();
    Ok(Judged {
        passed: report.result == Some(RunResult::Passed) && failed.is_empty(),
        failed,
    })
}
