//! Run history: one `run_gates` row per gate a verify or hook run decided, and what is read
//! back from them: a repository's recent runs, one gate's recent rows, and per-gate statistics
//! (duration percentiles, failure and flaky rates).
//!
//! The rule: statistics are computed from stored rows only, over a fixed window of the newest
//! samples, so the same file always gives the same figures. A sample is a decided row (not a
//! skip) whose result was measured here (not replayed from a cache).

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use greenlight_stream::GateVerdict;
use rusqlite::params;

use crate::Error;
use crate::frames::{Run, RunId};
use crate::model::Millis;
use crate::read::collect;
use crate::read::sealed::Access;
use crate::tx::Tx;

/// How many of a gate's newest samples its statistics cover unless the caller says otherwise.
pub const DEFAULT_STATS_WINDOW: usize = 100;

/// A gate decided in a recorded run, as the recorder hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRunGate {
    /// The gate id from verify.yaml.
    pub gate: String,
    /// Its verdict.
    pub verdict: GateVerdict,
    /// The deciding attempt's exit code (none when it never started or was killed).
    pub exit_code: Option<i32>,
    /// How long the deciding attempt ran; none when no attempt ran (a skip).
    pub duration_ms: Option<u64>,
    /// How many attempts it took (0 for a skip that ran nothing, 2 after a retry).
    pub attempts: u32,
    /// The result was replayed from a cache rather than measured by this run.
    pub cached: bool,
    /// When the gate was decided.
    pub decided_at: Millis,
}

/// A stored `run_gates` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunGateRow {
    /// The run that decided it.
    pub run: RunId,
    /// The gate id.
    pub gate: String,
    /// Its verdict.
    pub verdict: GateVerdict,
    /// The deciding attempt's exit code.
    pub exit_code: Option<i32>,
    /// How long the deciding attempt ran.
    pub duration_ms: Option<u64>,
    /// How many attempts it took.
    pub attempts: u32,
    /// Replayed from a cache.
    pub cached: bool,
    /// When it was decided.
    pub decided_at: Millis,
}

/// Which runs a history read covers: those of `repository` (every worktree of one repository:
/// they run the same gates), plus those recorded in `worktree` itself, which covers runs from
/// before the repository was recorded and directories that are not in a git repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryScope {
    /// The repository's common git directory, canonical; `None` when unknown.
    pub repository: Option<PathBuf>,
    /// The worktree, canonical.
    pub worktree: PathBuf,
}

/// One gate's figures over its newest samples.
#[derive(Debug, Clone, PartialEq)]
pub struct GateStats {
    /// The gate id.
    pub gate: String,
    /// How many samples the figures cover (at most the window).
    pub samples: u32,
    /// Median duration (nearest rank); none without samples.
    pub p50_ms: Option<u64>,
    /// 95th percentile duration (nearest rank).
    pub p95_ms: Option<u64>,
    /// 99th percentile duration (nearest rank).
    pub p99_ms: Option<u64>,
    /// (fail + timeout) / samples; 0 without samples.
    pub failure_rate: f64,
    /// flaky / samples; 0 without samples.
    pub flaky_rate: f64,
    /// The verdict of the gate's newest row of any kind (a skip or a cached result included).
    pub last_verdict: GateVerdict,
    /// When that row was decided.
    pub last_at: Millis,
}

/// The nearest-rank percentile of sorted values: the smallest value with at least `p` percent
/// of the values at or below it (rank `ceil(p / 100 × n)`, from 1). No interpolation, so every
/// figure is a duration that was measured. `None` for no values.
pub fn nearest_rank(sorted: &[u64], p: u32) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let rank = (usize::try_from(p).unwrap_or(100).min(100) * n).div_ceil(100);
    sorted.get(rank.max(1) - 1).copied()
}

impl Tx<'_> {
    /// Records a run starting as [`Tx::begin_run`] does, with the repository it ran in (its
    /// common git directory), so history can read every worktree of the repository together.
    pub fn begin_run_in(
        &self,
        kind: greenlight_stream::RunKind,
        worktree: &Path,
        repository: Option<&Path>,
        gates: &[String],
    ) -> Result<RunId, Error> {
        let run = self.begin_run(kind, worktree, gates)?;
        if let Some(repository) = repository.filter(|r| !r.as_os_str().is_empty()) {
            self.exec(
                "UPDATE runs SET repository = ?2 WHERE id = ?1",
                params![run.0, repository.as_os_str().as_bytes()],
            )?;
        }
        Ok(run)
    }

    /// Records one gate the run decided. A run records each gate once.
    pub fn record_run_gate(&self, run: RunId, row: &NewRunGate) -> Result<(), Error> {
        let duration = row
            .duration_ms
            .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX));
        // The run's repository and worktree are copied onto the row: history reads a gate's
        // newest rows in scope from one index, without joining every row to its run.
        let added = self.exec(
            "INSERT INTO run_gates (run_id, gate, verdict, exit_code, duration_ms, attempts, \
             cached, decided_at, repository, worktree) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, r.repository, r.worktree \
             FROM runs r WHERE r.id = ?1",
            params![
                run.0,
                row.gate,
                row.verdict.as_str(),
                row.exit_code,
                duration,
                row.attempts,
                row.cached,
                row.decided_at
            ],
        )?;
        if added == 0 {
            return Err(Error::UnknownRun { run: run.0 });
        }
        Ok(())
    }
}

/// The two keys a scope matches on, each with its own index: `runs.repository` and
/// `runs.worktree`, copied onto every `run_gates` row. A read runs once per key, each a range
/// of one index newest first, and [`merge_newest`] joins them; an `OR` of the two would make
/// SQLite read every row in scope and sort them.
fn scope_keys(scope: &HistoryScope) -> Vec<(&'static str, Vec<u8>)> {
    let mut keys = Vec::with_capacity(2);
    if let Some(repository) = scope.repository.as_ref() {
        keys.push(("repository", repository.as_os_str().as_bytes().to_vec()));
    }
    keys.push(("worktree", scope.worktree.as_os_str().as_bytes().to_vec()));
    keys
}

fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Both keys' answers, newest first by `order` (descending), each row once, at most `max`.
fn merge_newest<T, K: Ord + Copy>(
    lists: Vec<Vec<T>>,
    order: impl Fn(&T) -> K,
    max: usize,
) -> Vec<T> {
    let mut all: Vec<T> = lists.into_iter().flatten().collect();
    all.sort_by_key(|item| std::cmp::Reverse(order(item)));
    all.dedup_by_key(|item| order(item));
    all.truncate(max);
    all
}

/// The newest runs whose `column` (a scope key) is `?1`, at most `?2`.
fn runs_sql(column: &str) -> String {
    format!("SELECT id FROM runs WHERE {column} = ?1 ORDER BY id DESC LIMIT ?2")
}

/// A gate's (`?2`) newest rows whose `column` is `?1`, at most `?3`; `measured`: samples only.
fn newest_rows_sql(column: &str, measured: bool) -> String {
    let filter = if measured { MEASURED } else { "" };
    format!(
        "SELECT {ROW_COLUMNS} FROM run_gates g WHERE g.{column} = ?1 AND g.gate = ?2 {filter} \
         ORDER BY g.decided_at DESC, g.run_id DESC LIMIT ?3"
    )
}

/// The distinct gates of rows whose `column` is `?1`, one index lookup per gate.
fn gate_ids_sql(column: &str) -> String {
    format!(
        "WITH RECURSIVE ids(gate) AS ( \
           SELECT (SELECT MIN(gate) FROM run_gates WHERE {column} = ?1) \
           UNION ALL \
           SELECT (SELECT MIN(gate) FROM run_gates WHERE {column} = ?1 AND gate > ids.gate) \
           FROM ids WHERE ids.gate IS NOT NULL) \
         SELECT gate FROM ids WHERE gate IS NOT NULL"
    )
}

/// The newest runs in scope, newest first, at most `max`.
pub(crate) fn runs_in<A: Access + ?Sized>(
    a: &A,
    scope: &HistoryScope,
    max: usize,
) -> Result<Vec<Run>, Error> {
    let mut lists = Vec::new();
    for (column, key) in scope_keys(scope) {
        lists.push(collect(
            a,
            &runs_sql(column),
            params![key, limit(max)],
            |r| r.get::<_, i64>(0),
        )?);
    }
    let mut runs = Vec::new();
    for id in merge_newest(lists, |id| *id, max) {
        if let Some(run) = crate::frames::run(a, RunId(id))? {
            runs.push(run);
        }
    }
    Ok(runs)
}

const ROW_COLUMNS: &str = "g.run_id, g.gate, g.verdict, g.exit_code, g.duration_ms, g.attempts, \
     g.cached, g.decided_at";

type RawRow = (
    i64,
    String,
    String,
    Option<i32>,
    Option<i64>,
    u32,
    bool,
    i64,
);

fn raw_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
    ))
}

/// Newest first: when it was decided, then the run.
fn row_order(raw: &RawRow) -> (i64, i64) {
    (raw.7, raw.0)
}

fn decode_row<A: Access + ?Sized>(a: &A, raw: RawRow) -> Result<RunGateRow, Error> {
    let (run, gate, verdict, exit_code, duration_ms, attempts, cached, decided_at) = raw;
    let corrupt = |what, found: String| Error::Corrupt {
        path: a.db_path().to_path_buf(),
        what,
        found,
    };
    let verdict = GateVerdict::from_name(&verdict)
        .ok_or_else(|| corrupt("run_gates.verdict", verdict.clone()))?;
    let duration_ms = duration_ms
        .map(|ms| u64::try_from(ms).map_err(|_| corrupt("run_gates.duration_ms", ms.to_string())))
        .transpose()?;
    Ok(RunGateRow {
        run: RunId(run),
        gate,
        verdict,
        exit_code,
        duration_ms,
        attempts,
        cached,
        decided_at,
    })
}

/// The rows of one run, in the order they were decided.
pub(crate) fn run_gates<A: Access + ?Sized>(a: &A, run: RunId) -> Result<Vec<RunGateRow>, Error> {
    let sql = format!("SELECT {ROW_COLUMNS} FROM run_gates g WHERE g.run_id = ?1 ORDER BY g.id");
    let raws = collect(a, &sql, [run.0], raw_row)?;
    raws.into_iter().map(|raw| decode_row(a, raw)).collect()
}

/// What a sample is: a decided row (not a skip) that was measured here (not replayed).
const MEASURED: &str = "AND g.cached = 0 AND g.verdict <> 'skip' AND g.duration_ms IS NOT NULL";

/// `gate`'s newest raw rows in scope, newest first, at most `max`; `measured` keeps samples
/// only. Each key reads one range of its `(key, gate, decided_at DESC, run_id DESC)` index.
fn newest_rows<A: Access + ?Sized>(
    a: &A,
    scope: &HistoryScope,
    gate: &str,
    measured: bool,
    max: usize,
) -> Result<Vec<RawRow>, Error> {
    let mut lists = Vec::new();
    for (column, key) in scope_keys(scope) {
        let sql = newest_rows_sql(column, measured);
        lists.push(collect(a, &sql, params![key, gate, limit(max)], raw_row)?);
    }
    Ok(merge_newest(lists, row_order, max))
}

/// `gate`'s newest rows in scope (every kind), newest first, at most `max`.
pub(crate) fn gate_rows<A: Access + ?Sized>(
    a: &A,
    scope: &HistoryScope,
    gate: &str,
    max: usize,
) -> Result<Vec<RunGateRow>, Error> {
    newest_rows(a, scope, gate, false, max)?
        .into_iter()
        .map(|raw| decode_row(a, raw))
        .collect()
}

/// Every gate id with a row in scope, sorted. Each key's distinct gates are read by skipping
/// through its index (one lookup per gate, not one per row).
pub(crate) fn gate_ids<A: Access + ?Sized>(
    a: &A,
    scope: &HistoryScope,
) -> Result<Vec<String>, Error> {
    let mut ids = Vec::new();
    for (column, key) in scope_keys(scope) {
        let sql = gate_ids_sql(column);
        ids.extend(collect(a, &sql, params![key], |r| r.get::<_, String>(0))?);
    }
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// Per gate in scope (sorted by id): its figures over its newest `window` samples.
pub(crate) fn gate_stats<A: Access + ?Sized>(
    a: &A,
    scope: &HistoryScope,
    window: usize,
) -> Result<Vec<GateStats>, Error> {
    let corrupt = |what, found: String| Error::Corrupt {
        path: a.db_path().to_path_buf(),
        what,
        found,
    };
    let mut stats = Vec::new();
    for gate in gate_ids(a, scope)? {
        // The newest row of any kind says what the gate did last; the samples give the figures.
        let Some(last) = newest_rows(a, scope, &gate, false, 1)?.pop() else {
            continue;
        };
        let last = decode_row(a, last)?;
        let mut durations = Vec::new();
        let (mut failed, mut flaky) = (0u32, 0u32);
        for raw in newest_rows(a, scope, &gate, true, window)? {
            let row = decode_row(a, raw)?;
            let ms = row
                .duration_ms
                .ok_or_else(|| corrupt("run_gates.duration_ms", "NULL".to_owned()))?;
            durations.push(ms);
            match row.verdict {
                GateVerdict::Fail | GateVerdict::Timeout => failed += 1,
                GateVerdict::Flaky => flaky += 1,
                _ => {}
            }
        }
        durations.sort_unstable();
        let n = u32::try_from(durations.len()).unwrap_or(u32::MAX);
        let rate = |k: u32| {
            if n == 0 {
                0.0
            } else {
                f64::from(k) / f64::from(n)
            }
        };
        stats.push(GateStats {
            p50_ms: nearest_rank(&durations, 50),
            p95_ms: nearest_rank(&durations, 95),
            p99_ms: nearest_rank(&durations, 99),
            failure_rate: rate(failed),
            flaky_rate: rate(flaky),
            samples: n,
            gate,
            last_verdict: last.verdict,
            last_at: last.decided_at,
        });
    }
    Ok(stats)
}

/// Deletes the gate rows of runs started before `before` (called by `prune_runs` first, since
/// the rows refer to their run).
pub(crate) fn prune_rows(tx: &Tx<'_>, before: Millis) -> Result<usize, Error> {
    tx.exec(
        "DELETE FROM run_gates WHERE run_id IN (SELECT id FROM runs WHERE started_at < ?1)",
        [before],
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use greenlight_stream::RunKind;

    use super::*;
    use crate::{Reads, StepClock, Store};

    fn open(path: &Path) -> Store {
        Store::open_with_clock(path, Arc::new(StepClock::new(1_000, 1))).expect("open")
    }

    fn row(gate: &str, verdict: GateVerdict, ms: u64, at: Millis) -> NewRunGate {
        NewRunGate {
            gate: gate.into(),
            verdict,
            exit_code: Some(i32::from(verdict != GateVerdict::Pass)),
            duration_ms: Some(ms),
            attempts: 1,
            cached: false,
            decided_at: at,
        }
    }

    /// One finished run in `worktree` of `repository` with these gate rows.
    fn run_with(store: &mut Store, repo: Option<&str>, worktree: &str, rows: &[NewRunGate]) {
        store
            .write(|tx| {
                let run = tx.begin_run_in(
                    RunKind::Verify,
                    Path::new(worktree),
                    repo.map(Path::new),
                    &[],
                )?;
                for r in rows {
                    tx.record_run_gate(run, r)?;
                }
                tx.finish_run(run, "passed", 0, 1).map(|_| ())
            })
            .expect("run");
    }

    fn scope(repo: Option<&str>, worktree: &str) -> HistoryScope {
        HistoryScope {
            repository: repo.map(PathBuf::from),
            worktree: PathBuf::from(worktree),
        }
    }

    #[test]
    fn nearest_rank_takes_the_smallest_value_covering_the_share() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&v, 50), Some(50));
        assert_eq!(nearest_rank(&v, 95), Some(95));
        assert_eq!(nearest_rank(&v, 99), Some(99));
        assert_eq!(nearest_rank(&[7, 9, 30], 50), Some(9));
        assert_eq!(nearest_rank(&[7, 9, 30], 99), Some(30));
        assert_eq!(nearest_rank(&[5], 1), Some(5));
        assert_eq!(nearest_rank(&[], 50), None);
    }

    #[test]
    fn stats_cover_the_newest_window_of_measured_decided_rows_of_the_repository() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = open(&dir.path().join("s.db"));
        // 20 runs across two worktrees of one repository: unit takes 10, 20, … 200 ms.
        for i in 1..=20u64 {
            let verdict = match i {
                3 | 4 => GateVerdict::Fail,
                5 => GateVerdict::Timeout,
                6 => GateVerdict::Flaky,
                _ => GateVerdict::Pass,
            };
            let wt = if i % 2 == 0 { "/r/a" } else { "/r/b" };
            let at = i64::try_from(i).expect("small") * 100;
            run_with(
                &mut store,
                Some("/r/.git"),
                wt,
                &[row("unit", verdict, i * 10, at)],
            );
        }
        // Neither a skip, nor a cached result, nor another repository's run is a sample.
        let mut skip = row("unit", GateVerdict::Skip, 0, 5_000);
        (skip.duration_ms, skip.attempts) = (None, 0);
        let mut cached = row("unit", GateVerdict::Fail, 99_999, 4_000);
        cached.cached = true;
        run_with(&mut store, Some("/r/.git"), "/r/a", &[cached]);
        run_with(&mut store, Some("/r/.git"), "/r/a", &[skip]);
        run_with(
            &mut store,
            Some("/other/.git"),
            "/o",
            &[row("unit", GateVerdict::Fail, 1, 9_000)],
        );

        let stats = store
            .gate_stats(&scope(Some("/r/.git"), "/r/a"), 100)
            .expect("stats");
        assert_eq!(stats.len(), 1);
        let unit = &stats[0];
        assert_eq!(unit.samples, 20);
        assert_eq!(
            (unit.p50_ms, unit.p95_ms, unit.p99_ms),
            (Some(100), Some(190), Some(200))
        );
        assert!(
            (unit.failure_rate - 3.0 / 20.0).abs() < 1e-9,
            "{}",
            unit.failure_rate
        );
        assert!(
            (unit.flaky_rate - 1.0 / 20.0).abs() < 1e-9,
            "{}",
            unit.flaky_rate
        );
        // The newest row of any kind is the skip.
        assert_eq!(
            (unit.last_verdict, unit.last_at),
            (GateVerdict::Skip, 5_000)
        );

        // A window of 5: the newest five samples (160 … 200 ms), none failing.
        let recent = store
            .gate_stats(&scope(Some("/r/.git"), "/r/a"), 5)
            .expect("stats");
        assert_eq!(
            (recent[0].samples, recent[0].p50_ms, recent[0].failure_rate),
            (5, Some(180), 0.0)
        );

        // A scope without a repository sees only its own worktree's runs.
        let own = store.gate_stats(&scope(None, "/r/b"), 100).expect("stats");
        assert_eq!(own[0].samples, 10);
        assert_eq!(
            store.history_gates(&scope(None, "/nowhere")).expect("ids"),
            Vec::<String>::new()
        );
        assert_eq!(
            store
                .runs_in(&scope(Some("/r/.git"), "/x"), 100)
                .expect("runs")
                .len(),
            22
        );
        let rows = store
            .gate_rows(&scope(Some("/r/.git"), "/x"), "unit", 3)
            .expect("rows");
        let verdicts: Vec<GateVerdict> = rows.iter().map(|r| r.verdict).collect();
        assert_eq!(
            verdicts,
            [GateVerdict::Skip, GateVerdict::Fail, GateVerdict::Pass]
        );
        assert!(rows[1].cached);
    }

    /// Every history query reads one range of an index, newest first: no table scan and no
    /// sort of every row in scope (which made `history` take seconds on a month of runs).
    #[test]
    fn every_history_query_is_an_index_range_without_a_scan_or_a_sort() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = open(&dir.path().join("s.db"));
        run_with(
            &mut store,
            Some("/r/.git"),
            "/r/a",
            &[row("unit", GateVerdict::Pass, 5, 1)],
        );
        use rusqlite::types::Value;
        let key = || Value::Blob(b"/r/.git".to_vec());
        let gate = || Value::Text("unit".into());
        let mut queries = Vec::new();
        for column in ["repository", "worktree"] {
            let index = format!("run_gates_by_{column}");
            queries.push((
                format!("runs_by_{column}"),
                runs_sql(column),
                vec![key(), Value::Integer(100)],
            ));
            for measured in [false, true] {
                queries.push((
                    index.clone(),
                    newest_rows_sql(column, measured),
                    vec![key(), gate(), Value::Integer(100)],
                ));
            }
            queries.push((index, gate_ids_sql(column), vec![key()]));
        }
        for (index, sql, values) in queries {
            let plan: Vec<String> = collect(
                &store,
                &format!("EXPLAIN QUERY PLAN {sql}"),
                rusqlite::params_from_iter(values),
                |r| r.get::<_, String>(3),
            )
            .expect("plan");
            let text = plan.join("\n");
            assert!(
                text.contains(&format!("USING INDEX {index}"))
                    || text.contains(&format!("USING COVERING INDEX {index}")),
                "{sql}\n{text}"
            );
            assert!(
                // A scan of the recursive CTE's own rows or of a constant row reads no table.
                !plan.iter().any(|step| step.starts_with("SCAN")
                    && !matches!(step.as_str(), "SCAN CONSTANT ROW" | "SCAN ids"))
                    && !text.contains("TEMP B-TREE"),
                "{sql}\n{text}"
            );
        }
    }

    #[test]
    fn pruning_a_run_deletes_its_gate_rows() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = open(&dir.path().join("s.db"));
        run_with(
            &mut store,
            None,
            "/w",
            &[row("unit", GateVerdict::Pass, 5, 1)],
        );
        let kept_from = store.write(|tx| Ok::<_, Error>(tx.now())).expect("now");
        run_with(
            &mut store,
            None,
            "/w",
            &[row("unit", GateVerdict::Fail, 6, 2)],
        );
        let pruned = store.write(|tx| tx.prune_runs(kept_from)).expect("prune");
        assert_eq!(pruned, 1);
        let rows = store
            .gate_rows(&scope(None, "/w"), "unit", 10)
            .expect("rows");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].verdict, GateVerdict::Fail);
        let runs = store.runs(10).expect("runs");
        assert_eq!(store.run_gates(runs[0].id).expect("rows").len(), 1);
    }
}
