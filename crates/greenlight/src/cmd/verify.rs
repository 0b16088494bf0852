//! `greenlight verify`: run a verify.yaml's gates and print CommandMate's line contract.
//!
//! stdout carries only `GATE …` and `RESULT …` lines (or one JSON document with `--format
//! json`); reasons, tails, progress and `--github` annotations go to stderr (GitHub reads
//! workflow commands from both streams); `--junit` writes a file.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use camino::Utf8PathBuf;
use greenlight_gate::{RunEvent, RunReport, config, exit, render};
use greenlight_run::{Observer, RecordAs, Recording, SessionOptions, VerifySession};
use greenlight_store::greenlight_stream::RunKind;

/// Output format of `greenlight verify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// CommandMate's `GATE …` / `RESULT …` lines.
    Text,
    // An installed binary has no docs/ beside it, so help points into the repository.
    #[value(help = concat!(
        "One JSON document (fields: docs/reference/json.md at ", env!("CARGO_PKG_REPOSITORY"), ")"
    ))]
    Json,
}

/// Arguments of `greenlight verify`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The verify.yaml to read [default: .greenlight/verify.yaml, else .commandmate/verify.yaml,
    /// in the worktree or above]. Version 2 is read only from a .greenlight directory.
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The worktree the gates run in [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// The ref work-evidence counts commits from; wins over options.baseRef.
    #[arg(long, value_name = "REF")]
    pub base_ref: Option<String>,
    /// Run only these gates (comma-separated ids).
    #[arg(long, value_name = "IDS", value_delimiter = ',')]
    pub gates: Option<Vec<String>>,
    /// Do not check that work happened here before running gates. A base ref is still
    /// required and must name a commit (as CommandMate's runner requires).
    #[arg(long)]
    pub skip_work_evidence: bool,
    /// text (the line contract) or json.
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
    // An installed binary has no docs/ beside it, so help points into the repository.
    #[arg(long, value_name = "FILE", help = concat!(
        "Also write a JUnit XML report here: one test case per gate (docs/reports.md at ",
        env!("CARGO_PKG_REPOSITORY"), ")"
    ))]
    pub junit: Option<PathBuf>,
    #[arg(long, help = concat!(
        "Also print GitHub Actions annotations, on stderr so stdout keeps its contract \
         (docs/reports.md at ", env!("CARGO_PKG_REPOSITORY"), ")"
    ))]
    pub github: bool,
    /// Do not record this run in the state database (what `greenlight serve`'s dashboard and
    /// `greenlight history` show); GREENLIGHT_NO_RECORD=1 does the same. Runs are recorded
    /// otherwise.
    #[arg(long)]
    pub no_record: bool,
    /// The state database runs are recorded in [default: $GREENLIGHT_STATE, else
    /// $XDG_STATE_HOME/greenlight/state.db].
    #[arg(long, visible_alias = "store", value_name = "PATH|URL")]
    pub state: Option<PathBuf>,
    /// Run every gate (a version 2 file replays unchanged results from the cache) and store
    /// the fresh results.
    #[arg(long)]
    pub no_cache: bool,
    /// Say on stderr, per gate, why it ran (no entry, which inputs/env/keys differ) or was
    /// replayed from the cache.
    #[arg(long)]
    pub explain: bool,
    /// Run no gate: print a diff of the config setting each gate's timeoutSec to its recorded
    /// p99 x 1.5, rounded up (gates with 5 or more recorded runs).
    #[arg(long, conflicts_with_all = ["format", "junit", "github", "gates"])]
    pub suggest_timeouts: bool,
}

/// Runs the subcommand and returns the process exit code.
pub fn run(args: Args) -> i32 {
    if args.suggest_timeouts {
        return suggest_timeouts(&args);
    }
    // Bounded: a git call verify waits on can hang, and a signal must still end the run.
    let grace = crate::environment::get().kill_grace;
    match greenlight_proc::run_main_bounded(grace, |interrupt| verify(args, interrupt)) {
        Ok(code) => code,
        Err(e) => {
            errln!("greenlight: cannot start the async runtime or its signal handlers: {e}");
            exit::CONFIG_ERROR
        }
    }
}

/// The worktree (absolute) and the config file verify reads. Without `--config`: the one
/// [`config::locate`] finds from `--cwd`, whose gates run where it belongs (none found:
/// greenlight's own path, so the error names where one goes); with it: that file, run in
/// `--cwd` (CommandMate's contract).
fn paths(args: &Args) -> Result<(PathBuf, Utf8PathBuf), i32> {
    let cwd = args.cwd.clone().unwrap_or_else(|| PathBuf::from("."));
    let cwd = std::path::absolute(&cwd).unwrap_or(cwd);
    let (cwd, config_path) = match &args.config {
        Some(path) => (cwd, path.clone()),
        None => match config::locate(&cwd) {
            Some(found) => {
                if let Some(warning) = found.shadow_warning() {
                    errln!("{warning}");
                }
                (found.root(), found.path)
            }
            // Neither home has one: reading greenlight's says "not found" where it belongs.
            None => (cwd.clone(), config::Home::Greenlight.file_in(&cwd)),
        },
    };
    match Utf8PathBuf::from_path_buf(config_path) {
        Ok(p) => Ok((cwd, p)),
        Err(p) => {
            errln!(
                "greenlight: {}: the config path is not valid UTF-8; pass --config with a UTF-8 path",
                p.display()
            );
            Err(exit::CONFIG_ERROR)
        }
    }
}

/// `--suggest-timeouts`: the config read as verify reads it, the gates' recorded durations,
/// and a unified diff of the file on stdout (nothing when nothing would change). Runs no gate.
fn suggest_timeouts(args: &Args) -> i32 {
    use greenlight_run::timeouts::{self, MIN_SAMPLES};
    let (cwd, config_path) = match paths(args) {
        Ok(paths) => paths,
        Err(code) => return code,
    };
    // Read once: the diff is of exactly the text that was judged.
    let read = config::read_text(&config_path)
        .and_then(|text| Ok((config::parse(&config_path, &text)?, text)));
    let (config, text) = match read {
        Ok(read) => read,
        Err(errors) => {
            print_config_errors(&errors, "nothing suggested");
            return exit::CONFIG_ERROR;
        }
    };
    let stats = match super::history::open_existing(args.state.as_deref()) {
        Ok(Some(store)) => {
            let scope = super::history::scope(Some(&cwd));
            match greenlight_store::Reads::gate_stats(
                &store,
                &scope,
                greenlight_store::DEFAULT_STATS_WINDOW,
            ) {
                Ok(stats) => stats,
                Err(e) => {
                    errln!("greenlight: {e}");
                    return 1;
                }
            }
        }
        Ok(None) => Vec::new(),
        Err((code, message)) => {
            errln!("greenlight: {message}");
            return code;
        }
    };
    let plan = match timeouts::plan(&config_path, &config, &text, &stats) {
        Ok(plan) => plan,
        Err(e) => {
            errln!("greenlight: {e}");
            return exit::CONFIG_ERROR;
        }
    };
    for (gate, samples) in &plan.too_few {
        errln!(
            "greenlight: {gate}: {samples} recorded run(s), fewer than {MIN_SAMPLES}: its timeoutSec is left as it is"
        );
    }
    for (gate, mutex) in &plan.under_mutex {
        errln!(
            "greenlight: {gate}: takes mutex `{mutex}`, and its timeoutSec also bounds the wait for the mutex, which the history does not measure: its timeoutSec is left as it is"
        );
    }
    for p in &plan.proposals {
        let verb = if p.changes() { "proposed" } else { "kept" };
        errln!(
            "greenlight: {}: p99 {} ms over {} run(s): timeoutSec {} {verb} (now {})",
            p.gate,
            p.p99_ms,
            p.samples,
            p.suggested_sec,
            p.current_sec
        );
    }
    // Headers relative to the worktree, so `| git apply` (or `patch -p1`) works from there.
    let label = config_path
        .as_std_path()
        .strip_prefix(&cwd)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| config_path.as_str().trim_start_matches('/').to_owned());
    out!("{}", plan.diff(&label));
    exit::PASSED
}

async fn verify(args: Args, interrupt: greenlight_proc::InterruptWatch) -> i32 {
    let started = Instant::now();
    let json = args.format == OutputFormat::Json;
    let (cwd, config_path) = match paths(&args) {
        Ok(paths) => paths,
        Err(code) => return code,
    };
    let config = match config::load_any(&config_path) {
        Ok(c) => c,
        Err(errors) => {
            print_config_errors(&errors, "no gate ran");
            let messages: Vec<String> = errors.0.iter().map(|e| e.to_string()).collect();
            if json {
                print_json_error(&messages);
            }
            if let Some(path) = &args.junit {
                write_junit(path, &greenlight_gate::junit::config_error(&messages));
            }
            if args.github {
                for message in &messages {
                    errln!(
                        "::error title=greenlight config::{}",
                        greenlight_gate::github::escape_data(message)
                    );
                }
            }
            return exit::CONFIG_ERROR;
        }
    };

    // A stdout nobody reads any more (`| head -c1`) ends the run as SIGTERM does: the running
    // gate ended, its lock released.
    // The signals as caught, read directly after a wait that kept the runtime from forwarding.
    let signals = interrupt.clone();
    let mut interrupt = crate::out::interrupt_with_closed_stdout(interrupt);

    let record = (!args.no_record).then(|| RecordAs {
        kind: RunKind::Verify,
        worktree: cwd.canonicalize().unwrap_or_else(|_| cwd.clone()),
        how_to_turn_off: "pass --no-record or set GREENLIGHT_NO_RECORD=1 to turn recording off",
    });
    let session = VerifySession::new(
        config,
        SessionOptions {
            base_ref: args.base_ref.clone(),
            only: args.gates.clone(),
            skip_work_evidence: args.skip_work_evidence,
            no_cache: args.no_cache,
            explain: args.explain,
            state: args.state.clone(),
            record,
            remote: Some(crate::remote::settings()),
            ..SessionOptions::new(cwd.clone(), crate::environment::get())
        },
    );
    let explain = args.explain;
    let progress = Progress::start();
    // Gate output is shown as a terminal would show it only on a terminal; a log file or a CI
    // viewer gets it without escape sequences or carriage-return overwrites.
    let plain_stderr = !std::io::stderr().is_terminal();
    let tail_limit = session.config().options.max_log_tail_bytes;
    let mut observer = Shown {
        progress: &progress,
        json,
        explain,
        plain_stderr,
        tail_limit,
        cwd: &cwd,
    };
    let ran = session.run(&mut observer, &mut interrupt).await;
    let mut recording = ran.recording;
    let result = ran.report;
    progress.finished(None);
    let report: RunReport = match result {
        Ok(r) => r,
        // A signal ended what the run waited on (a git call killed once the ending bound had
        // passed): the run was interrupted, whatever error that wait then returned.
        Err(e) if let Some(signal) = *signals.borrow() => {
            finish_recording(&mut recording, "interrupted", signal.exit_code());
            errln!(
                "greenlight: interrupted by {} before the gates ran ({e}); no RESULT",
                signal.name()
            );
            return signal.exit_code();
        }
        Err(e) => {
            finish_recording(&mut recording, "error", exit::CONFIG_ERROR);
            errln!("greenlight: {e}");
            if json {
                print_json_error(&[e.to_string()]);
            }
            if let Some(path) = &args.junit {
                write_junit(
                    path,
                    &greenlight_gate::junit::config_error(&[e.to_string()]),
                );
            }
            if args.github {
                errln!(
                    "::error title=greenlight::{}",
                    greenlight_gate::github::escape_data(&e.to_string())
                );
            }
            return exit::CONFIG_ERROR;
        }
    };
    for warning in &report.warnings {
        errln!("{warning}");
    }
    let notes = [
        render::orphans_stderr(&report),
        render::leftovers_stderr(&report),
    ];
    for note in notes.into_iter().flatten() {
        // Command lines come from /proc: whatever a gate's process put there.
        if plain_stderr {
            err!("{}", greenlight_digest::terminal_text(&note));
        } else {
            err!("{note}");
        }
    }
    if report.env_clean_skipped {
        if !json {
            out_contract_line(render::ENV_CLEAN_LINE);
        }
        errln!("{}", render::ENV_CLEAN_NOTE);
    }
    if let Some(signal) = report.interrupted {
        let name = if crate::out::stdout_failed() {
            "a closed stdout"
        } else {
            signal.name()
        };
        errln!(
            "greenlight: interrupted by {name}: the running gate's processes were ended and its lock released; no RESULT"
        );
    }
    if args.github {
        let prefix = github_prefix(&cwd);
        for line in greenlight_gate::github::lines(&report, &cwd, prefix.as_deref(), tail_limit) {
            errln!("{line}");
        }
    }
    let junit_written = match &args.junit {
        Some(path) => write_junit(path, &greenlight_gate::junit::report(&report, tail_limit)),
        None => true,
    };
    if json {
        let doc = render::json(&report, config_path.as_std_path(), &cwd);
        out_line(&serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else if let Some(result) = report.result {
        out_contract_line(&render::result_line(result));
    }
    // The summary closes what happened; a hint on what to do, when there is one, comes last.
    if let Some(summary) = render::summary_line(&report, started.elapsed()) {
        errln!("{}", crate::colour::summary(&summary));
    }
    if let Some(hint) = render::result_hint(&report, config_path.as_std_path(), &cwd) {
        errln!("{hint}");
    }
    // A report CI asked for and did not get must not pass quietly.
    let code = if junit_written {
        report.exit_code()
    } else {
        exit::CONFIG_ERROR
    };
    let result = match (report.interrupted, report.result) {
        (Some(_), _) | (None, None) => "interrupted".to_owned(),
        (None, Some(result)) => result.as_str().replace('_', "-"),
    };
    finish_recording(&mut recording, &result, code);
    code
}

/// What the terminal shows while the gates run: the line contract on stdout, reasons, tails
/// and progress on stderr.
struct Shown<'a> {
    progress: &'a Progress,
    json: bool,
    explain: bool,
    plain_stderr: bool,
    tail_limit: usize,
    cwd: &'a std::path::Path,
}

impl Observer for Shown<'_> {
    fn event(&mut self, event: RunEvent<'_>) {
        let progress = self.progress;
        match event {
            RunEvent::WorkEvidence(we) => {
                if !self.json {
                    out_contract_line(&render::work_evidence_line(we));
                }
                if let Some(note) = render::work_evidence_stderr(we) {
                    progress.err(&format!("{note}\n"));
                }
            }
            RunEvent::GateStarted { id, attempt } => progress.started(id, attempt),
            // The tail in the report is what the terminal shows; the whole output is for `mcp`.
            RunEvent::GateOutput { .. } => {}
            RunEvent::GateFinished(gate) => {
                progress.finished(Some(&gate.id));
                if !self.json {
                    out_contract_line(&render::gate_line(gate));
                }
                if self.explain
                    && let Some(why) = &gate.explain
                {
                    progress.err(&format!("greenlight: {}: {why}\n", gate.id));
                }
                let text = render::gate_stderr(gate, self.tail_limit, self.cwd);
                if self.plain_stderr {
                    progress.err(&greenlight_digest::terminal_text(&text));
                } else {
                    progress.err(&text);
                }
            }
        }
    }

    /// Shown as soon as recording fails, between the gates' lines.
    fn recording_warning(&mut self, warning: String) -> Option<String> {
        self.progress.err(&format!("{warning}\n"));
        None
    }
}

fn finish_recording(recording: &mut Recording, result: &str, code: i32) {
    if let Some(warning) = recording.finish(result, code).warning {
        errln!("{warning}");
    }
}

/// Writes the JUnit report (creating its directory); says why on stderr when it cannot.
fn write_junit(path: &std::path::Path, report: &greenlight_gate::junit::Report) -> bool {
    let xml = match report.to_string() {
        Ok(xml) => xml,
        Err(e) => {
            errln!("greenlight: cannot render the JUnit report: {e}");
            return false;
        }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        errln!(
            "greenlight: --junit {}: cannot create {}: {e}",
            path.display(),
            dir.display()
        );
        return false;
    }
    match std::fs::write(path, xml) {
        Ok(()) => true,
        Err(e) => {
            errln!(
                "greenlight: --junit {}: cannot write the report: {e}; pass a writable path",
                path.display()
            );
            false
        }
    }
}

/// The path from GitHub's workspace (the repository root in a job) to the gates' directory, so
/// annotations name files from the repository root; none outside GitHub Actions.
fn github_prefix(cwd: &std::path::Path) -> Option<PathBuf> {
    let workspace = crate::environment::get().vars.get("GITHUB_WORKSPACE")?;
    let workspace = std::fs::canonicalize(workspace).ok()?;
    let cwd = std::fs::canonicalize(cwd).ok()?;
    cwd.strip_prefix(&workspace).ok().map(PathBuf::from)
}

/// Every problem of the config on stderr, then how many and what was not done because of them.
fn print_config_errors(errors: &config::ConfigErrors, consequence: &str) {
    for error in &errors.0 {
        errln!("{error}");
    }
    errln!(
        "greenlight: {} problem(s) in the config; {consequence}",
        errors.0.len()
    );
}

fn print_json_error(errors: &[String]) {
    let doc = serde_json::json!({
        "greenlight_version": env!("CARGO_PKG_VERSION"),
        "result": "config_error",
        "exit_code": exit::CONFIG_ERROR,
        "errors": errors,
    });
    out_line(&serde_json::to_string_pretty(&doc).unwrap_or_default());
}

fn out_line(line: &str) {
    outln!("{line}");
}

/// A `GATE …` or `RESULT …` line, its verdict word coloured only when stdout is a terminal.
fn out_contract_line(line: &str) {
    outln!(
        "{}",
        crate::colour::contract_line(line, crate::colour::Stream::Stdout)
    );
}

/// Live progress on a terminal's stderr: the running gate and its elapsed time. Silent when
/// stderr is not a terminal, so logs and the stdout contract never see it.
struct Progress {
    state: Option<Arc<Mutex<ProgressState>>>,
}

struct ProgressState {
    /// Every running gate (v2 runs several at once), in the order they started.
    running: Vec<(String, u8, Instant)>,
    drawn: bool,
}

impl Progress {
    fn start() -> Self {
        let tty = std::io::stderr().is_terminal()
            && crate::environment::get()
                .vars
                .get("TERM")
                .is_none_or(|t| t != "dumb");
        if !tty {
            return Self { state: None };
        }
        let state = Arc::new(Mutex::new(ProgressState {
            running: Vec::new(),
            drawn: false,
        }));
        let ticker = Arc::clone(&state);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            loop {
                tick.tick().await;
                if let Ok(mut s) = ticker.lock()
                    && !s.running.is_empty()
                {
                    let gates: Vec<String> = s
                        .running
                        .iter()
                        .map(|(id, attempt, since)| {
                            let retry = if *attempt > 1 { " (retry)" } else { "" };
                            format!("{id}{retry} {}s", since.elapsed().as_secs())
                        })
                        .collect();
                    let style = anstyle::Style::new().dimmed();
                    let line = format!("\r\x1b[2K{style}running {}{style:#}", gates.join(", "));
                    let mut err = anstream::stderr().lock();
                    let _ = err.write_all(line.as_bytes());
                    let _ = err.flush();
                    s.drawn = true;
                }
            }
        });
        Self { state: Some(state) }
    }

    /// A gate attempt started (a retry replaces its first attempt).
    fn started(&self, id: &str, attempt: u8) {
        if let Some(state) = &self.state
            && let Ok(mut s) = state.lock()
        {
            Self::clear(&mut s);
            s.running.retain(|(running, _, _)| running != id);
            s.running.push((id.to_owned(), attempt, Instant::now()));
        }
    }

    /// A gate is decided (`None`: the run is over).
    fn finished(&self, id: Option<&str>) {
        if let Some(state) = &self.state
            && let Ok(mut s) = state.lock()
        {
            Self::clear(&mut s);
            s.running
                .retain(|(running, _, _)| id.is_some_and(|id| running != id));
        }
    }

    fn clear(s: &mut ProgressState) {
        if s.drawn {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(b"\r\x1b[2K");
            s.drawn = false;
        }
    }

    fn err(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        if let Some(state) = &self.state
            && let Ok(mut s) = state.lock()
        {
            Self::clear(&mut s);
        }
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
    }
}
