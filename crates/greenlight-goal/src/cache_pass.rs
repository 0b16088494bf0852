//! The verify result cache seen from the goal loop: a gate that the goal's version 2
//! verify.yaml declares with the same command and time limit replays a stored PASS instead of
//! running, and a clean result the loop measured is stored for `verify` and the Stop hook.
//!
//! The verify.yaml is the goal's snapshot (taken when it started, or at a person's `goal gate
//! add`), never the worktree's file: an agent that rewrites the file during its turn cannot
//! change what the gate is keyed by, nor send it to a cluster of its choosing.
//!
//! Under `options.remote`, the cluster's action cache is read and written the same way (a
//! PASS some machine published replays; a clean result is published).
//!
//! Only a PASS is replayed here: a failure is the agent's evidence, and the loop has its own
//! rule for those (replayed at most once in a row). The key is verify's — the gate's declared
//! inputs, env and keys — so a pass is shared across the three ways gates run.

use std::path::Path;
use std::time::Duration;

use greenlight_gate::cache::CacheSettings;
use greenlight_gate::config::{Loaded, Snapshot};
use greenlight_gate::{CachePlan, GateReport, Interrupt, InterruptWatch, OutputSink, RunOptions};

use crate::gate_phase::{self, GateResult};
use crate::prompt::OUTPUT_TAIL_BYTES;

/// What the goal's verify.yaml snapshot (as the store keeps it) means; `None` when there is
/// none, or when it cannot be read back (then no gate uses the cache: it runs).
pub(crate) fn snapshot_config(json: Option<&str>) -> Option<Loaded> {
    Snapshot::from_json(json?)?.load().ok()
}

/// One goal gate's place in the cache.
pub(crate) struct GoalCache {
    loaded: Loaded,
    index: usize,
    plan: CachePlan,
}

impl GoalCache {
    /// The cache of the gate running `command` with `timeout_sec` in `worktree`, when the
    /// goal's verify.yaml snapshot `loaded` declares that gate; its keys commands and remote
    /// cluster as the loop's `run` settings say. `Err`: interrupted while a `keys` command ran.
    pub(crate) async fn open(
        worktree: &Path,
        loaded: &Loaded,
        command: &str,
        timeout_sec: u32,
        settings: &CacheSettings,
        run: &crate::engine::Settings,
        interrupt: &mut InterruptWatch,
    ) -> Result<Option<GoalCache>, Interrupt> {
        let loaded = loaded.clone();
        let Some(index) = loaded
            .gates
            .iter()
            .position(|g| g.command == command && g.timeout_sec == timeout_sec)
        else {
            return Ok(None);
        };
        let options = RunOptions {
            cwd: worktree.to_path_buf(),
            base_ref: None,
            only: None,
            skip_work_evidence: true,
            kill_grace: run.kill_grace,
            lock_root: run.lock_root.clone(),
            env: run.env.clone(),
            extra_env: Vec::new(),
            cache: Some(settings.clone()),
            remote: run.remote.clone(),
            sweep_adopted: true,
        };
        let mut plan = CachePlan::start(&loaded, &options, &[index], None);
        plan.prepare(&loaded, &options, interrupt).await?;
        Ok(Some(GoalCache {
            loaded,
            index,
            plan,
        }))
    }

    /// The stored PASS of this gate, if its key hits.
    pub(crate) fn replayed_pass(&mut self) -> Option<GateReport> {
        self.plan
            .replay(&self.loaded, self.index, Duration::ZERO)
            .filter(|report| report.passed == Some(true))
    }

    /// Runs the gate on the cluster when verify.yaml says `run: remote` (`None`: it runs here).
    /// `resume`: the operation a killed earlier run left; `on_started` persists the new one.
    pub(crate) async fn run_remote(
        &self,
        resume: Option<&str>,
        on_started: &mut (dyn FnMut(&str, &str) + Send),
        live: &mut dyn OutputSink,
        interrupt: &mut InterruptWatch,
    ) -> Option<Result<GateResult, Interrupt>> {
        let ran = self
            .plan
            .run_remote(
                &self.loaded,
                self.index,
                OUTPUT_TAIL_BYTES,
                resume,
                on_started,
                live,
                interrupt,
            )
            .await?;
        Some(ran.map(|(attempt, _)| gate_phase::remote_result(attempt)))
    }

    /// Stores what the loop measured, when it ended cleanly (the cache's own rules decide the
    /// rest: inputs unchanged since the start, PASS or FAIL only), locally and, under
    /// `options.remote` with `cache: shared`, in the cluster's action cache.
    pub(crate) async fn store(&mut self, result: &GateResult) {
        if result.timed_out || result.interrupted.is_some() || !result.clean {
            return;
        }
        let report =
            GateReport::from_attempt(&self.loaded.gates[self.index], result.attempt.clone());
        let gates = std::slice::from_ref(&report);
        self.plan
            .store_results(&self.loaded, &[self.index], gates)
            .await;
        self.plan
            .publish_remote(&self.loaded, &[self.index], gates)
            .await;
    }
}
