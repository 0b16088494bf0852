//! A verify session: one run of a verify.yaml's gates, put together the same way whichever front
//! end asks (`greenlight verify`, the MCP `verify` tool, the Stop hook).
//!
//! The one rule that keeps it simple: a front end says *what* it wants (a [`SessionOptions`])
//! and renders what comes back; how that becomes the runner's options, the result cache, the
//! recorder and its gate list is decided here, once. A new flag or rule lands in this file.

use std::path::PathBuf;

use greenlight_gate::config::{GateSpec, Loaded};
use greenlight_gate::remote::RemoteSettings;
use greenlight_gate::{InterruptWatch, RunEvent, RunOptions, RunReport};
use greenlight_store::RunId;
use greenlight_store::greenlight_stream::RunKind;

use crate::RunEnv;
use crate::record::{Recorder, RunGate};

/// How a front end wants its run recorded in the state database.
#[derive(Debug, Clone)]
pub struct RecordAs {
    /// The kind of run (`verify`, `hook`).
    pub kind: RunKind,
    /// The worktree the run is recorded under.
    pub worktree: PathBuf,
    /// How the user turns recording off, ending the warning shown when the database cannot be
    /// used (each front end has its own switch).
    pub how_to_turn_off: &'static str,
}

/// What a front end asks of a verify run.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// The worktree the gates run in.
    pub cwd: PathBuf,
    /// The ref work-evidence counts commits from; wins over the config's `baseRef`.
    pub base_ref: Option<String>,
    /// Run only these gate ids (and, for version 2, what they need).
    pub only: Option<Vec<String>>,
    /// Do not check that work happened since the base ref.
    pub skip_work_evidence: bool,
    /// Run every gate and store the fresh results (no replay from the result cache).
    pub no_cache: bool,
    /// Say per gate why it ran or was replayed from the result cache.
    pub explain: bool,
    /// The state database (`None`: the environment's default); the cache key lives beside it.
    pub state: Option<PathBuf>,
    /// Record the run (`None`: the front end's own switch turned recording off). The
    /// environment's `GREENLIGHT_NO_RECORD=1` turns it off as well.
    pub record: Option<RecordAs>,
    /// What the process environment says: the kill grace, the lock root, the default state
    /// database, `GREENLIGHT_NO_RECORD`, and the variables the gates' keys read.
    pub env: RunEnv,
    /// How the gates reach the cluster a verify.yaml names (`None`: this front end has no
    /// remote execution, and such gates run here with one warning).
    pub remote: Option<RemoteSettings>,
}

impl SessionOptions {
    /// A run of every gate in `cwd`, work-evidence checked, the cache on, not recorded, in the
    /// environment `env`.
    pub fn new(cwd: PathBuf, env: &RunEnv) -> Self {
        SessionOptions {
            cwd,
            base_ref: None,
            only: None,
            skip_work_evidence: false,
            no_cache: false,
            explain: false,
            state: None,
            record: None,
            env: env.clone(),
            remote: None,
        }
    }
}

/// What a front end sees while the gates run.
pub trait Observer {
    /// One event of the gate runner, after the recorder has seen it.
    fn event(&mut self, event: RunEvent<'_>);

    /// Recording failed and is off for the rest of the run. Return the warning to have it
    /// again from [`Recording::finish`] instead (the default: shown with the run's end).
    fn recording_warning(&mut self, warning: String) -> Option<String> {
        Some(warning)
    }
}

impl<F: FnMut(RunEvent<'_>)> Observer for F {
    fn event(&mut self, event: RunEvent<'_>) {
        self(event);
    }
}

/// One verify run, ready to start.
#[derive(Debug)]
pub struct VerifySession {
    config: Loaded,
    options: RunOptions,
    record: Option<RecordAs>,
    /// The state database the run is recorded in (`None`: no place could be chosen).
    state: Option<PathBuf>,
}

impl VerifySession {
    /// The session of `config` as `options` ask for it.
    pub fn new(config: Loaded, options: SessionOptions) -> Self {
        let cache = crate::cache_place::cache_settings(options.state.as_deref(), &options.env).map(
            |mut settings| {
                settings.refresh = options.no_cache;
                settings.explain = options.explain;
                settings
            },
        );
        let record = options.record.filter(|_| !options.env.no_record);
        let state = options.env.state_path(options.state.as_deref()).ok();
        VerifySession {
            config,
            options: RunOptions {
                cwd: options.cwd,
                base_ref: options.base_ref,
                only: options.only,
                skip_work_evidence: options.skip_work_evidence,
                kill_grace: options.env.kill_grace,
                lock_root: options.env.lock_root,
                env: options.env.vars,
                extra_env: Vec::new(),
                cache,
                remote: options.remote,
                sweep_adopted: true,
            },
            record,
            state,
        }
    }

    /// The config the gates come from.
    pub fn config(&self) -> &Loaded {
        &self.config
    }

    /// The runner's options this session runs with.
    pub fn run_options(&self) -> &RunOptions {
        &self.options
    }

    /// The gates the runner will report, in config order (a selection with what it needs), or
    /// why the selection is refused.
    pub fn gates(&self) -> Result<Vec<&GateSpec>, greenlight_gate::Error> {
        greenlight_gate::selected_gates(&self.config, self.options.only.as_deref())
    }

    /// Runs the gates: recording starts first (on a thread of its own), every runner event
    /// goes to the recorder and then to `observer`. The run's end is recorded by
    /// [`Recording::finish`], with the words the front end reports it in.
    pub async fn run(self, observer: &mut dyn Observer, interrupt: &mut InterruptWatch) -> Ran {
        let mut recorder = match &self.record {
            None => Recorder::off(),
            Some(how) => {
                let gates = self
                    .gates()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|g| RunGate {
                        id: g.id.clone(),
                        command: g.command.clone(),
                    })
                    .collect();
                Recorder::start(
                    self.state.as_deref(),
                    how.kind,
                    &how.worktree,
                    gates,
                    how.how_to_turn_off,
                )
            }
        };
        let mut kept = Vec::new();
        let mut warn = |recorder: &mut Recorder, observer: &mut dyn Observer| {
            if let Some(warning) = recorder.take_warning() {
                kept.extend(observer.recording_warning(warning));
            }
        };
        warn(&mut recorder, observer);
        let report = greenlight_gate::run(
            &self.config,
            &self.options,
            &mut |event| {
                recorder.event(&event);
                warn(&mut recorder, observer);
                observer.event(event);
            },
            interrupt,
        )
        .await;
        Ran {
            config: self.config,
            report,
            recording: Recording { recorder, kept },
        }
    }
}

/// A finished run, its end not yet recorded.
#[derive(Debug)]
pub struct Ran {
    /// The config the gates came from.
    pub config: Loaded,
    /// The report, or why the gates could not run.
    pub report: Result<RunReport, greenlight_gate::Error>,
    /// The run's record, waiting for its end.
    pub recording: Recording,
}

/// A run's record in the state database, until [`Recording::finish`] writes its end.
#[derive(Debug)]
pub struct Recording {
    recorder: Recorder,
    /// Warnings the observer handed back, for the run's end.
    kept: Vec<String>,
}

/// What recording the run's end gave.
#[derive(Debug, Default)]
pub struct Recorded {
    /// The run's id, when it was recorded whole.
    pub run: Option<RunId>,
    /// The recording warning not shown yet, if any.
    pub warning: Option<String>,
}

impl Recording {
    /// Records the run's end as `result` with `exit_code` and waits until every frame is
    /// written.
    pub fn finish(&mut self, result: &str, exit_code: i32) -> Recorded {
        let run = self.recorder.finish(result, exit_code);
        let mut warnings = std::mem::take(&mut self.kept);
        warnings.extend(self.recorder.take_warning());
        Recorded {
            run,
            // The recorder warns once, so there is at most one.
            warning: warnings.into_iter().next(),
        }
    }
}
