//! Run history: one `run_gates` row per gate a verify or hook run, or a goal's gate phase,
//! decided, and what is read back from them: a repository's recent runs, one gate's recent
//! rows, and per-gate statistics (duration percentiles, failure and flaky rates, and how often
//! the digest read the gate's output exactly, partly or not at all).
//!
//! The rule: statistics are computed from stored rows only, over a fixed window of the newest
//! samples, so the same file always gives the same figures. A sample is a decided row (not a
//! skip) whose result was measured here (not replayed from a cache or a goal's last failure).

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::db::{Param, Value, params};
use greenlight_stream::GateVerdict;

use crate::Error;
use crate::frames::{Run, RunId};
use crate::model::{DigestClass, GoalId, Millis};
use crate::read::collect;
use crate::read::sealed::Access;
use crate::tx::Tx;

/// How many of a gate's newest samples its statistics cover unless the caller says otherwise.
pub const DEFAULT_STATS_WINDOW: usize = 100;

/// Observe telemetry of one gate row: what the digest made of the deciding attempt's output,
/// in words only (no command text, no output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestTelemetry {
    /// The classification.
    pub class: DigestClass,
    /// The format's name (`pytest`, `mixed`, …); none when no format was seen.
    pub format: Option<String>,
    /// The reasons' names (`no-summary`, …), sorted; empty when recognised.
    pub reasons: Vec<String>,
}

/// Where a gate row came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowSource {
    /// A recorded verify or hook run.
    Run(RunId),
    /// A goal's gate phase, after this turn.
    Goal {
        /// The goal.
        goal: GoalId,
        /// The turn whose gate phase decided it.
        turn: Option<u32>,
    },
}

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
    /// How the digest read the deciding attempt's output; none when no output was read now (a
    /// skip, a cached or replayed result, a gate that never started).
    pub digest: Option<DigestTelemetry>,
}

/// A stored `run_gates` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunGateRow {
    /// The run (or goal) that decided it.
    pub source: RowSource,
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
    /// How the digest read its output.
    pub digest: Option<DigestTelemetry>,
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
    /// Samples that did not pass (fail, timeout, flaky: the runs whose output became an
    /// agent's evidence) whose output the digest read completely (`recognised`).
    pub exact: u32,
    /// Such samples whose output it read in part (`partial`).
    pub partial: u32,
    /// Such samples whose output it could not read (`unrecognised`): the evidence was a raw
    /// tail.
    pub raw: u32,
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
        // The run's repository and worktree are copied onto the row: history reads a gate's
        // newest rows in scope from one index, without joining every row to its run.
        let added = self.insert_gate_row(
            // ?2 and ?3 are NULL, typed so PostgreSQL can plan a parameter it never compares.
            "?1, CAST(?2 AS BIGINT), CAST(?3 AS BIGINT), r.repository, r.worktree",
            "runs r WHERE r.id = ?1",
            [&run.0, &Value::Null, &Value::Null],
            row,
        )?;
        if added == 0 {
            return Err(Error::UnknownRun { run: run.0 });
        }
        Ok(())
    }

    /// Records one gate a goal's gate phase decided after `turn`, in the goal's worktree and
    /// `repository` (its common git directory), so history shows it beside verify's rows.
    pub fn record_goal_run_gate(
        &self,
        goal: GoalId,
        turn: Option<u32>,
        repository: Option<&Path>,
        row: &NewRunGate,
    ) -> Result<(), Error> {
        let repository = repository
            .filter(|r| !r.as_os_str().is_empty())
            .map(|r| r.as_os_str().as_bytes().to_vec());
        let added = self.insert_gate_row(
            "NULL, ?1, ?2, ?3, g.worktree",
            "goals g WHERE g.id = ?1",
            [&goal.0, &turn, &repository],
            row,
        )?;
        if added == 0 {
            return Err(Error::NoSuchGoal(goal));
        }
        Ok(())
    }

    /// The one INSERT of a gate row. `scope` selects (run_id, goal_id, turn, repository,
    /// worktree) `from` a run or a goal, over the `keys` `?1`…`?3`; the row's fields are
    /// `?4`… . Returns how many rows were added (0: no such run or goal).
    fn insert_gate_row(
        &self,
        scope: &str,
        from: &str,
        keys: [&dyn Param; 3],
        row: &NewRunGate,
    ) -> Result<usize, Error> {
        let duration = row
            .duration_ms
            .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX));
        let digest = row.digest.as_ref();
        let reasons = digest.map(|d| d.reasons.join(","));
        let fields: [&dyn Param; 10] = [
            &row.gate,
            &row.verdict.as_str(),
            &row.exit_code,
            &duration,
            &row.attempts,
            &row.cached,
            &row.decided_at,
            &digest.map(|d| d.class.as_str()),
            &digest.and_then(|d| d.format.as_deref()),
            &reasons,
        ];
        self.exec(
            &format!(
                "INSERT INTO run_gates (run_id, goal_id, turn, repository, worktree, gate, \
                 verdict, exit_code, duration_ms, attempts, cached, decided_at, digest_class, \
                 digest_format, digest_reasons) \
                 SELECT {scope}, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13 FROM {from}"
            ),
            keys.iter()
                .chain(&fields)
                .map(|p| p.value())
                .collect::<Vec<Value>>(),
        )
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
         ORDER BY g.decided_at DESC, g.id DESC LIMIT ?3"
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
            |r| r.get::<i64>(0),
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

const ROW_COLUMNS: &str = "g.id, g.run_id, g.goal_id, g.turn, g.gate, g.verdict, g.exit_code, \
     g.duration_ms, g.attempts, g.cached, g.decided_at, g.digest_class, g.digest_format, \
     g.digest_reasons";

/// A `run_gates` row as SQLite gives it, before its words are checked.
struct RawRow {
    id: i64,
    run: Option<i64>,
    goal: Option<i64>,
    turn: Option<u32>,
    gate: String,
    verdict: String,
    exit_code: Option<i32>,
    duration_ms: Option<i64>,
    attempts: u32,
    cached: bool,
    decided_at: i64,
    digest_class: Option<String>,
    digest_format: Option<String>,
    digest_reasons: Option<String>,
}

fn raw_row(r: &crate::db::Row) -> crate::db::DbResult<RawRow> {
    Ok(RawRow {
        id: r.get(0)?,
        run: r.get(1)?,
        goal: r.get(2)?,
        turn: r.get(3)?,
        gate: r.get(4)?,
        verdict: r.get(5)?,
        exit_code: r.get(6)?,
        duration_ms: r.get(7)?,
        attempts: r.get(8)?,
        cached: r.get(9)?,
        decided_at: r.get(10)?,
        digest_class: r.get(11)?,
        digest_format: r.get(12)?,
        digest_reasons: r.get(13)?,
    })
}

/// Newest first: when it was decided, then the row (unique, so the merge of both keys' answers
/// keeps each row once).
fn row_order(raw: &RawRow) -> (i64, i64) {
    (raw.decided_at, raw.id)
}

fn decode_row<A: Access + ?Sized>(a: &A, raw: RawRow) -> Result<RunGateRow, Error> {
    let corrupt = |what, found: String| Error::Corrupt {
        path: a.db_path().to_path_buf(),
        what,
        found,
    };
    let verdict = GateVerdict::from_name(&raw.verdict)
        .ok_or_else(|| corrupt("run_gates.verdict", raw.verdict.clone()))?;
    let duration_ms = raw
        .duration_ms
        .map(|ms| u64::try_from(ms).map_err(|_| corrupt("run_gates.duration_ms", ms.to_string())))
        .transpose()?;
    let source = match (raw.run, raw.goal) {
        (Some(run), None) => RowSource::Run(RunId(run)),
        (None, Some(goal)) => RowSource::Goal {
            goal: GoalId(goal),
            turn: raw.turn,
        },
        (run, goal) => return Err(corrupt("run_gates.run_id", format!("{run:?}/{goal:?}"))),
    };
    let digest = match raw.digest_class {
        None => None,
        Some(class) => Some(DigestTelemetry {
            class: DigestClass::from_name(&class)
                .ok_or_else(|| corrupt("run_gates.digest_class", class.clone()))?,
            format: raw.digest_format,
            reasons: raw
                .digest_reasons
                .unwrap_or_default()
                .split(',')
                .filter(|r| !r.is_empty())
                .map(str::to_owned)
                .collect(),
        }),
    };
    Ok(RunGateRow {
        source,
        gate: raw.gate,
        verdict,
        exit_code: raw.exit_code,
        duration_ms,
        attempts: raw.attempts,
        cached: raw.cached,
        decided_at: raw.decided_at,
        digest,
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
        ids.extend(collect(a, &sql, params![key], |r| r.get::<String>(0))?);
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
        let (mut exact, mut partial, mut raw_tail) = (0u32, 0u32, 0u32);
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
            // Evidence is what an agent reads of a gate that did not pass; how a passing
            // output reads says nothing about how its failures will.
            let evidence = row.digest.filter(|_| row.verdict != GateVerdict::Pass);
            match evidence.map(|d| d.class) {
                Some(DigestClass::Recognised) => exact += 1,
                Some(DigestClass::Partial) => partial += 1,
                Some(DigestClass::Unrecognised) => raw_tail += 1,
                None => {}
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
            exact,
            partial,
            raw: raw_tail,
            samples: n,
            gate,
            last_verdict: last.verdict,
            last_at: last.decided_at,
        });
    }
    Ok(stats)
}

/// Deletes the gate rows of runs started before `before` (called by `prune_runs` first, since
/// the rows refer to their run), and goals' rows decided before it: history keeps one span.
/// (A goal's own record of its gate runs, `gate_runs`, is kept with the goal.)
pub(crate) fn prune_rows(tx: &Tx<'_>, before: Millis) -> Result<usize, Error> {
    tx.exec(
        "DELETE FROM run_gates WHERE run_id IN (SELECT id FROM runs WHERE started_at < ?1) \
         OR (goal_id IS NOT NULL AND decided_at < ?1)",
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
            digest: None,
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
        use crate::db::Value;
        let key = || Value::Blob(b"/r/.git".to_vec());
        let gate = || Value::Text("unit".into());
        let mut queries = Vec::new();
        for column in ["repository", "worktree"] {
            let index = format!("run_gates_by_{column}");
            queries.push((
                format!("runs_by_{column}"),
                runs_sql(column),
                vec![key(), Value::Int(100)],
            ));
            for measured in [false, true] {
                queries.push((
                    index.clone(),
                    newest_rows_sql(column, measured),
                    vec![key(), gate(), Value::Int(100)],
                ));
            }
            queries.push((index, gate_ids_sql(column), vec![key()]));
        }
        for (index, sql, values) in queries {
            let plan: Vec<String> =
                collect(&store, &format!("EXPLAIN QUERY PLAN {sql}"), values, |r| {
                    r.get::<String>(3)
                })
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

    fn read(class: DigestClass, format: Option<&str>, reasons: &[&str]) -> DigestTelemetry {
        DigestTelemetry {
            class,
            format: format.map(str::to_owned),
            reasons: reasons.iter().map(|r| (*r).to_owned()).collect(),
        }
    }

    /// A goal's gate rows are samples beside verify's: the stats and a gate's rows read both,
    /// say which goal and turn, and count how the digest read each measured output (a replayed
    /// failure is neither a duration nor a reading).
    #[test]
    fn goal_rows_and_digest_readings_are_counted_with_the_runs_of_the_repository() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = open(&dir.path().join("s.db"));
        let mut exact = row("unit", GateVerdict::Fail, 10, 100);
        exact.digest = Some(read(DigestClass::Recognised, Some("pytest"), &[]));
        let mut partial = row("unit", GateVerdict::Fail, 20, 200);
        partial.digest = Some(read(
            DigestClass::Partial,
            Some("pytest"),
            &["no-summary", "output-after-summary"],
        ));
        run_with(&mut store, Some("/r/.git"), "/r/a", &[exact]);
        run_with(&mut store, Some("/r/.git"), "/r/a", &[partial]);
        let goal = store
            .write(|tx| {
                tx.create_goal(&crate::NewGoal {
                    worktree: dir.path().to_path_buf(),
                    text: "green".into(),
                    agent: crate::AgentSpec::default(),
                    judge: None,
                    max_turns: 3,
                    retries: 3,
                    gate_timeout_sec: 60,
                    gates: Vec::new(),
                })
            })
            .expect("goal");
        let mut raw = row("unit", GateVerdict::Fail, 30, 300);
        raw.digest = Some(read(DigestClass::Unrecognised, None, &["no-known-format"]));
        let mut replayed = row("unit", GateVerdict::Fail, 0, 400);
        (replayed.duration_ms, replayed.attempts, replayed.cached) = (None, 0, true);
        // A pass's reading is kept on its row, and is no evidence: not counted.
        let mut passed = row("unit", GateVerdict::Pass, 40, 500);
        passed.digest = Some(read(DigestClass::Unrecognised, None, &["empty-output"]));
        store
            .write(|tx| {
                tx.record_goal_run_gate(goal, Some(1), Some(Path::new("/r/.git")), &raw)?;
                tx.record_goal_run_gate(goal, Some(2), Some(Path::new("/r/.git")), &replayed)?;
                tx.record_goal_run_gate(goal, Some(3), Some(Path::new("/r/.git")), &passed)
            })
            .expect("goal rows");

        let stats = store
            .gate_stats(&scope(Some("/r/.git"), "/r/a"), 100)
            .expect("stats");
        let unit = &stats[0];
        assert_eq!(
            (unit.samples, unit.exact, unit.partial, unit.raw),
            (4, 1, 1, 1)
        );
        assert_eq!((unit.last_verdict, unit.last_at), (GateVerdict::Pass, 500));
        let rows = store
            .gate_rows(&scope(Some("/r/.git"), "/r/a"), "unit", 10)
            .expect("rows");
        let sources: Vec<RowSource> = rows.iter().map(|r| r.source).collect();
        assert_eq!(
            &sources[..3],
            [
                RowSource::Goal {
                    goal,
                    turn: Some(3)
                },
                RowSource::Goal {
                    goal,
                    turn: Some(2)
                },
                RowSource::Goal {
                    goal,
                    turn: Some(1)
                },
            ]
        );
        assert!(matches!(sources[3], RowSource::Run(_)));
        assert_eq!(rows[1].digest, None);
        assert_eq!(
            rows[3].digest,
            Some(read(
                DigestClass::Partial,
                Some("pytest"),
                &["no-summary", "output-after-summary"]
            ))
        );
        // A goal that does not exist records nothing.
        let missing = store.write(|tx| {
            tx.record_goal_run_gate(
                crate::GoalId(99),
                None,
                None,
                &row("x", GateVerdict::Pass, 1, 1),
            )
        });
        assert!(matches!(missing, Err(Error::NoSuchGoal(_))), "{missing:?}");
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
