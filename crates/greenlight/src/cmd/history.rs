//! `greenlight history`: the recorded verify and hook runs of this repository and each gate's
//! figures (runs, p50, p95, failure and flaky rates, and how often its evidence was exact,
//! partial or raw), or one gate's recent rows; a goal's gate runs are among them.
//!
//! Rendering only: the scope (every worktree of the repository) comes from
//! `greenlight_run::record::repository_of`, the rows and figures from the store.

use std::path::PathBuf;

use greenlight_run::record::repository_of;
use greenlight_server::dashboard::{RUNNING, duration, utc};
use greenlight_store::{
    DEFAULT_STATS_WINDOW, DigestClass, DigestTelemetry, GateStats, HistoryScope, Reads, RowSource,
    Run, RunGateRow, Store,
};
use serde_json::{Value, json};

/// Exit codes of `greenlight history`.
pub mod exit {
    /// Shown (or nothing recorded yet).
    pub const OK: i32 = 0;
    /// The state database cannot be read.
    pub const ERROR: i32 = 1;
    /// Usage: a gate with no history.
    pub const USAGE: i32 = 2;
}

/// Arguments of `greenlight history`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Show this gate's recent results and figures instead of the runs.
    #[arg(long, value_name = "ID")]
    pub gate: Option<String>,
    /// How many recent runs (or, with --gate, results) to list.
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,
    // An installed binary has no docs/ beside it, so help points into the repository.
    #[arg(long, help = concat!(
        "One JSON document (fields: docs/reference/json.md at ", env!("CARGO_PKG_REPOSITORY"), ")"
    ))]
    pub json: bool,
    /// A directory of the repository whose history to show [default: the current directory].
    #[arg(short = 'C', long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// The state database: a file, or a postgres:// URL [default: $GREENLIGHT_STORE, else $GREENLIGHT_STATE, else $XDG_STATE_HOME/greenlight/state.db].
    #[arg(long, visible_alias = "store", value_name = "PATH|URL")]
    pub state: Option<PathBuf>,
}

/// Runs the subcommand and returns the process exit code.
pub fn run(args: Args) -> i32 {
    match show(&args) {
        Ok(code) => code,
        Err((code, message)) => {
            errln!("greenlight: {message}");
            code
        }
    }
}

/// Which runs belong to the repository `cwd` is in: every worktree of it (they run the same
/// gates), and the directory itself (runs recorded outside git, or before runs kept their
/// repository).
pub fn scope(cwd: Option<&std::path::Path>) -> HistoryScope {
    let dir = cwd.map_or_else(|| PathBuf::from("."), std::path::Path::to_path_buf);
    let worktree = dir.canonicalize().unwrap_or(dir);
    HistoryScope {
        repository: repository_of(&worktree),
        worktree,
    }
}

/// The state database if it exists (`None`: nothing was ever recorded there).
pub fn open_existing(state: Option<&std::path::Path>) -> Result<Option<Store>, (i32, String)> {
    let path = crate::environment::get()
        .state_path(state)
        .map_err(|e| (exit::ERROR, e.to_string()))?;
    if !path.exists() {
        return Ok(None);
    }
    Store::open(&path)
        .map(Some)
        .map_err(|e| (exit::ERROR, e.to_string()))
}

fn show(args: &Args) -> Result<i32, (i32, String)> {
    let scope = scope(args.cwd.as_deref());
    let mut store = open_existing(args.state.as_deref())?;
    if let Some(store) = store.as_mut() {
        // A run whose process is gone is closed as interrupted before it is shown, as serve and
        // the next recorded run do; a file we cannot write still shows what it holds.
        if let Err(e) = store.close_abandoned_runs() {
            errln!("greenlight: warning: cannot close runs whose process is gone: {e}");
        }
    }
    let failed = |e: greenlight_store::Error| (exit::ERROR, e.to_string());
    let limit = usize::try_from(args.limit).unwrap_or(usize::MAX);
    let (runs, stats) = match &store {
        Some(store) => (
            store.runs_in(&scope, limit).map_err(failed)?,
            store
                .gate_stats(&scope, DEFAULT_STATS_WINDOW)
                .map_err(failed)?,
        ),
        None => (Vec::new(), Vec::new()),
    };
    // A goal's gate phase writes gate rows without a run: a repository where only goals ran
    // still has history.
    let Some(store) = store.filter(|_| !runs.is_empty() || !stats.is_empty()) else {
        if args.json {
            outln!(
                "{}",
                pretty(&json!({ "scope": scope_json(&scope), "runs": [], "gates": [] }))
            );
        } else {
            outln!(
                "no recorded runs for {} yet: `greenlight verify` records each run",
                scope.worktree.display()
            );
        }
        return Ok(exit::OK);
    };
    match &args.gate {
        None => {
            if args.json {
                let doc = json!({
                    "scope": scope_json(&scope),
                    "window": DEFAULT_STATS_WINDOW,
                    "runs": runs.iter().map(run_json).collect::<Vec<_>>(),
                    "gates": stats.iter().map(stats_json).collect::<Vec<_>>(),
                });
                outln!("{}", pretty(&doc));
            } else {
                render_runs(&runs);
                outln!();
                render_stats(&stats);
            }
        }
        Some(gate) => {
            let Some(figures) = stats.iter().find(|s| s.gate == *gate) else {
                let known: Vec<&str> = stats.iter().map(|s| s.gate.as_str()).collect();
                return Err((
                    exit::USAGE,
                    format!(
                        "no recorded results for gate `{gate}` in this repository; gates with history: {}",
                        if known.is_empty() {
                            "none".to_owned()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
            };
            let rows = store.gate_rows(&scope, gate, limit).map_err(failed)?;
            if args.json {
                let doc = json!({
                    "scope": scope_json(&scope),
                    "window": DEFAULT_STATS_WINDOW,
                    "gate": gate,
                    "stats": stats_json(figures),
                    "rows": rows.iter().map(row_json).collect::<Vec<_>>(),
                });
                outln!("{}", pretty(&doc));
            } else {
                render_gate(figures, &rows);
            }
        }
    }
    Ok(exit::OK)
}

fn pretty(doc: &Value) -> String {
    serde_json::to_string_pretty(doc).unwrap_or_default()
}

fn scope_json(scope: &HistoryScope) -> Value {
    json!({
        "repository": scope.repository.as_ref().map(|p| p.to_string_lossy()),
        "worktree": scope.worktree.to_string_lossy(),
    })
}

fn run_json(run: &Run) -> Value {
    json!({
        "id": run.id.0,
        "kind": run.kind.as_str(),
        "worktree": run.worktree.to_string_lossy(),
        "result": run.result,
        "exit_code": run.exit_code,
        "gates": run.gates,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "duration_ms": run.ended_at.map(|end| end - run.started_at),
    })
}

fn stats_json(s: &GateStats) -> Value {
    json!({
        "gate": s.gate,
        "samples": s.samples,
        "p50_ms": s.p50_ms,
        "p95_ms": s.p95_ms,
        "p99_ms": s.p99_ms,
        "failure_rate": s.failure_rate,
        "flaky_rate": s.flaky_rate,
        "evidence": { "exact": s.exact, "partial": s.partial, "raw": s.raw },
        "last_verdict": s.last_verdict.as_str(),
        "last_at": s.last_at,
    })
}

/// What a user calls a digest's reading: exact (its compact form stood in for the output),
/// partial (what was parsed, then the tail), raw (the tail alone).
fn evidence_word(class: DigestClass) -> &'static str {
    match class {
        DigestClass::Recognised => "exact",
        DigestClass::Partial => "partial",
        DigestClass::Unrecognised => "raw",
    }
}

fn digest_json(d: &DigestTelemetry) -> Value {
    json!({
        "evidence": evidence_word(d.class),
        "classification": d.class.as_str(),
        "format": d.format,
        "reasons": d.reasons,
    })
}

fn row_json(r: &RunGateRow) -> Value {
    let (run, goal, turn) = match r.source {
        RowSource::Run(run) => (Some(run.0), None, None),
        RowSource::Goal { goal, turn } => (None, Some(goal.0), turn),
    };
    json!({
        "run": run,
        "goal": goal,
        "turn": turn,
        "digest": r.digest.as_ref().map(digest_json),
        "verdict": r.verdict.as_str(),
        "exit_code": r.exit_code,
        "duration_ms": r.duration_ms,
        "attempts": r.attempts,
        "cached": r.cached,
        "decided_at": r.decided_at,
    })
}

/// Left-aligned columns, two spaces apart.
fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<w$}  "));
            }
        }
        outln!("{}", text.trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

fn ms(v: Option<u64>) -> String {
    v.map_or_else(
        || "-".to_owned(),
        |v| duration(i64::try_from(v).unwrap_or(i64::MAX)),
    )
}

fn percent(rate: f64) -> String {
    format!("{:.1}", rate * 100.0)
}

fn render_runs(runs: &[Run]) {
    outln!("recent runs (newest first)");
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.id.0.to_string(),
                utc(r.started_at),
                r.kind.as_str().to_owned(),
                r.result.clone().unwrap_or_else(|| RUNNING.to_owned()),
                r.ended_at
                    .map_or_else(|| "-".to_owned(), |end| duration(end - r.started_at)),
                r.gates.to_string(),
            ]
        })
        .collect();
    table(
        &["run", "when", "kind", "result", "duration", "gates"],
        &rows,
    );
}

fn render_stats(stats: &[GateStats]) {
    outln!(
        "gates (the newest {DEFAULT_STATS_WINDOW} measured runs of each; p50/p95 by nearest rank)"
    );
    let rows: Vec<Vec<String>> = stats
        .iter()
        .map(|s| {
            vec![
                s.gate.clone(),
                s.samples.to_string(),
                ms(s.p50_ms),
                ms(s.p95_ms),
                percent(s.failure_rate),
                percent(s.flaky_rate),
                s.exact.to_string(),
                s.partial.to_string(),
                s.raw.to_string(),
                format!("{} {}", s.last_verdict.as_str(), utc(s.last_at)),
            ]
        })
        .collect();
    table(
        &[
            "gate", "runs", "p50", "p95", "fail%", "flaky%", "exact", "partial", "raw", "last",
        ],
        &rows,
    );
    outln!(
        "exact: the digest read the whole output; partial: part of it, the rest as a tail; raw: only the tail"
    );
}

/// Which run decided a row: `run 12`, or `goal 3 turn 2`.
fn source(r: &RunGateRow) -> String {
    match r.source {
        RowSource::Run(run) => format!("run {}", run.0),
        RowSource::Goal {
            goal,
            turn: Some(turn),
        } => format!("goal {goal} turn {turn}"),
        RowSource::Goal { goal, turn: None } => format!("goal {goal}"),
    }
}

/// How a row's output was read: `exact pytest`, `partial pytest: no-summary`, `raw`, or `-`
/// when nothing was read now (a skip, a cached or replayed result).
fn reading(d: Option<&DigestTelemetry>) -> String {
    let Some(d) = d else {
        return "-".to_owned();
    };
    let mut text = evidence_word(d.class).to_owned();
    if let Some(format) = &d.format {
        text.push(' ');
        text.push_str(format);
    }
    if !d.reasons.is_empty() {
        text.push_str(": ");
        text.push_str(&d.reasons.join(", "));
    }
    text
}

fn render_gate(s: &GateStats, rows: &[RunGateRow]) {
    outln!(
        "gate {}: {} measured runs, p50 {}, p95 {}, p99 {} (nearest rank), fail {}%, flaky {}%, evidence exact {} partial {} raw {}, last {} at {}",
        s.gate,
        s.samples,
        ms(s.p50_ms),
        ms(s.p95_ms),
        ms(s.p99_ms),
        percent(s.failure_rate),
        percent(s.flaky_rate),
        s.exact,
        s.partial,
        s.raw,
        s.last_verdict.as_str(),
        utc(s.last_at)
    );
    outln!();
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                source(r),
                utc(r.decided_at),
                r.verdict.as_str().to_owned(),
                r.exit_code
                    .map_or_else(|| "-".to_owned(), |c| c.to_string()),
                ms(r.duration_ms),
                r.attempts.to_string(),
                if r.cached { "yes" } else { "no" }.to_owned(),
                reading(r.digest.as_ref()),
            ]
        })
        .collect();
    table(
        &[
            "from", "when", "verdict", "exit", "duration", "attempts", "cached", "evidence",
        ],
        &table_rows,
    );
}
