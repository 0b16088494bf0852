//! Queries, shared by [`Store`](crate::Store) (outside a transaction) and [`Tx`](crate::Tx)
//! (inside one, seeing its own uncommitted writes).
//!
//! Reading never changes anything; row decoding lives here once, so a stored value this binary
//! cannot read back surfaces as [`Error::Corrupt`] naming the column, never as a panic.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::db::{OptionalExtension, Row, params};

use crate::Error;
use crate::model::{
    AgentEndpoint, AgentSpec, Dispatch, DispatchId, DispatchOutcome, DispatchStep, Event, Family,
    Gate, GateId, GateRun, GateRunId, GateVerdict, Goal, GoalId, GoalState, LastResult, Pause,
    Tokens, ToolCallRecord, ToolCallStatus, Turn,
};

pub(crate) mod sealed {
    /// Access to the connection; sealed so only this crate can implement [`super::Reads`].
    pub trait Access {
        fn conn(&self) -> crate::db::Conn<'_>;
        fn db_path(&self) -> &std::path::Path;
    }
}

pub(crate) const GOAL_COLUMNS: &str = "id, worktree, text, state, pause_reason, pause_detail, \
     agent_family, agent_model, agent_argv, judge, max_turns, retries, gate_timeout_sec, \
     turns_used, created_at, updated_at, model_probed, agent_endpoint";

const GATE_COLUMNS: &str = "id, goal_id, command, attempts, last_verdict, last_exit_code, \
     last_workspace_key, last_evidence, last_at, removed, timeout_sec, mutex";

const GATE_RUN_COLUMNS: &str = "id, goal_id, gate_id, turn, attempt, verdict, exit_code, \
     duration_ms, workspace_key, replayed, digest, evidence, created_at";

const DISPATCH_COLUMNS: &str = "id, goal_id, turn, attempt, family, model, outcome, wall_ms, \
     tokens_in, tokens_out, cache_read_tokens, cache_write_tokens, cost_usd, token_source, \
     reason, detail, started_at, ended_at, step, reply";

/// Read access to the state. Implemented by [`Store`](crate::Store) and [`Tx`](crate::Tx).
pub trait Reads: sealed::Access {
    /// The goal with this id, if any.
    fn goal(&self, id: GoalId) -> Result<Option<Goal>, Error> {
        let sql = format!("SELECT {GOAL_COLUMNS} FROM goals WHERE id = ?1");
        let raw = self
            .conn()
            .query_row(&sql, [id.0], RawGoal::from_row)
            .optional();
        raw.map_err(|e| sql_err(self, e))?
            .map(|r| r.decode(self.db_path()))
            .transpose()
    }

    /// The active or paused goal of `worktree` (canonicalised when it exists), if any.
    fn live_goal(&self, worktree: &Path) -> Result<Option<Goal>, Error> {
        let key = std::fs::canonicalize(worktree).unwrap_or_else(|_| worktree.to_path_buf());
        let sql = format!(
            "SELECT {GOAL_COLUMNS} FROM goals WHERE worktree = ?1 AND state IN ('active', 'paused')"
        );
        let raw = self
            .conn()
            .query_row(&sql, [key.as_os_str().as_bytes()], RawGoal::from_row)
            .optional();
        raw.map_err(|e| sql_err(self, e))?
            .map(|r| r.decode(self.db_path()))
            .transpose()
    }

    /// One page of the goal list, newest first: archived goals (done or cleared and unchanged
    /// for [`crate::ARCHIVE_AFTER_MS`]) only when the page asks for them.
    fn goal_page(&self, page: &crate::GoalPage) -> Result<Vec<Goal>, Error> {
        crate::listing::goal_page(self, page)
    }

    /// The goals and runs with an event or frame after these positions, and the positions now.
    fn changes_since(&self, event_seq: i64, frame_position: i64) -> Result<crate::Changes, Error> {
        crate::listing::changes_since(self, event_seq, frame_position)
    }

    /// Every goal ever created, oldest first (cleared and done ones included).
    fn goals(&self) -> Result<Vec<Goal>, Error> {
        let sql = format!("SELECT {GOAL_COLUMNS} FROM goals ORDER BY id");
        let raws = collect(self, &sql, (), RawGoal::from_row)?;
        raws.into_iter().map(|r| r.decode(self.db_path())).collect()
    }

    /// The goal's live gates in order, numbered from 1.
    fn gates(&self, goal: GoalId) -> Result<Vec<Gate>, Error> {
        let sql = format!(
            "SELECT {GATE_COLUMNS} FROM gates WHERE goal_id = ?1 AND removed = 0 ORDER BY position"
        );
        let raws = collect(self, &sql, [goal.0], RawGate::from_row)?;
        raws.into_iter()
            .enumerate()
            .map(|(i, r)| r.decode(self.db_path(), Some(i + 1)))
            .collect()
    }

    /// All the goal's gates in order, removed ones included (with no number).
    fn all_gates(&self, goal: GoalId) -> Result<Vec<Gate>, Error> {
        let sql = format!("SELECT {GATE_COLUMNS} FROM gates WHERE goal_id = ?1 ORDER BY position");
        let raws = collect(self, &sql, [goal.0], RawGate::from_row)?;
        let mut live = 0;
        raws.into_iter()
            .map(|r| {
                let number = if r.removed {
                    None
                } else {
                    live += 1;
                    Some(live)
                };
                r.decode(self.db_path(), number)
            })
            .collect()
    }

    /// The goal's turns, in order.
    fn turns(&self, goal: GoalId) -> Result<Vec<Turn>, Error> {
        collect(
            self,
            "SELECT goal_id, number, started_at, ended_at, outcome FROM turns \
             WHERE goal_id = ?1 ORDER BY number",
            [goal.0],
            |r| {
                Ok(Turn {
                    goal: GoalId(r.get(0)?),
                    number: r.get(1)?,
                    started_at: r.get(2)?,
                    ended_at: r.get(3)?,
                    outcome: r.get(4)?,
                })
            },
        )
    }

    /// The goal's gate runs, oldest first.
    fn gate_runs(&self, goal: GoalId) -> Result<Vec<GateRun>, Error> {
        let sql =
            format!("SELECT {GATE_RUN_COLUMNS} FROM gate_runs WHERE goal_id = ?1 ORDER BY id");
        let raws = collect(self, &sql, [goal.0], RawGateRun::from_row)?;
        raws.into_iter().map(|r| r.decode(self.db_path())).collect()
    }

    /// The goal's dispatch ledger, oldest first.
    fn dispatches(&self, goal: GoalId) -> Result<Vec<Dispatch>, Error> {
        let sql =
            format!("SELECT {DISPATCH_COLUMNS} FROM dispatches WHERE goal_id = ?1 ORDER BY id");
        let raws = collect(self, &sql, [goal.0], RawDispatch::from_row)?;
        raws.into_iter().map(|r| r.decode(self.db_path())).collect()
    }

    /// The tool calls recorded for a dispatch, in order.
    fn tool_calls(&self, dispatch: DispatchId) -> Result<Vec<ToolCallRecord>, Error> {
        let raws = collect(
            self,
            "SELECT dispatch_id, seq, step, call_id, tool, arguments, status, result, wall_ms, \
             started_at, ended_at FROM tool_calls WHERE dispatch_id = ?1 ORDER BY seq",
            [dispatch.0],
            |r| {
                Ok((
                    (r.get::<i64>(0)?, r.get::<u32>(1)?, r.get::<u32>(2)?),
                    (
                        r.get::<String>(3)?,
                        r.get::<String>(4)?,
                        r.get::<String>(5)?,
                    ),
                    (
                        r.get::<String>(6)?,
                        r.get::<Option<String>>(7)?,
                        r.get::<Option<i64>>(8)?,
                    ),
                    (r.get::<i64>(9)?, r.get::<Option<i64>>(10)?),
                ))
            },
        )?;
        raws.into_iter()
            .map(
                |(
                    (d, seq, step),
                    (call_id, tool, arguments),
                    (status, result, wall),
                    (started_at, ended_at),
                )| {
                    Ok(ToolCallRecord {
                        dispatch: DispatchId(d),
                        seq,
                        step,
                        call_id,
                        tool,
                        arguments,
                        status: named(
                            self.db_path(),
                            "tool_calls.status",
                            status,
                            ToolCallStatus::from_name,
                        )?,
                        result,
                        wall_ms: wall.and_then(|w| u64::try_from(w).ok()),
                        started_at,
                        ended_at,
                    })
                },
            )
            .collect()
    }

    /// One ledger row.
    fn dispatch(&self, id: DispatchId) -> Result<Option<Dispatch>, Error> {
        let sql = format!("SELECT {DISPATCH_COLUMNS} FROM dispatches WHERE id = ?1");
        let raw = self
            .conn()
            .query_row(&sql, [id.0], RawDispatch::from_row)
            .optional();
        raw.map_err(|e| sql_err(self, e))?
            .map(|r| r.decode(self.db_path()))
            .transpose()
    }

    /// Up to `limit` events with `seq > after`, in order; only the goal's when `goal` is given
    /// (what `goal log --follow` polls with the last seq it showed).
    fn events_after(
        &self,
        goal: Option<GoalId>,
        after: i64,
        limit: usize,
    ) -> Result<Vec<Event>, Error> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let raws = collect(
            self,
            "SELECT seq, goal_id, turn, kind, payload, at FROM events \
             WHERE seq > ?1 AND (CAST(?2 AS BIGINT) IS NULL OR goal_id = ?2) ORDER BY seq LIMIT ?3",
            params![after, goal.map(|g| g.0), limit],
            |r| {
                Ok((
                    r.get::<i64>(0)?,
                    r.get::<Option<i64>>(1)?,
                    r.get::<Option<u32>>(2)?,
                    r.get::<String>(3)?,
                    r.get::<String>(4)?,
                    r.get::<i64>(5)?,
                ))
            },
        )?;
        raws.into_iter()
            .map(|(seq, goal, turn, kind, payload, at)| {
                let payload = serde_json::from_str(&payload).map_err(|_| Error::Corrupt {
                    path: self.db_path().to_path_buf(),
                    what: "events.payload",
                    found: payload,
                })?;
                Ok(Event {
                    seq,
                    goal: goal.map(GoalId),
                    turn,
                    kind,
                    payload,
                    at,
                })
            })
            .collect()
    }

    /// The highest event seq (0 when the log is empty).
    fn last_seq(&self) -> Result<i64, Error> {
        // Cached: the server asks after every commit it is woken for.
        self.conn()
            .query_row("SELECT COALESCE(MAX(seq), 0) FROM events", (), |r| r.get(0))
            .map_err(|e| sql_err(self, e))
    }

    /// The remote operation `gate` was last running under: `(action digest, operation name)`.
    fn remote_operation(&self, gate: GateId) -> Result<Option<(String, String)>, Error> {
        self.conn()
            .query_row(
                "SELECT action, operation FROM remote_operations WHERE gate_id = ?1",
                params![gate.0],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| sql_err(self, e))
    }

    /// The base commit recorded for a hook session in a worktree, if any.
    fn hook_base(&self, session_id: &str, worktree: &Path) -> Result<Option<String>, Error> {
        self.conn()
            .query_row(
                "SELECT base FROM hook_bases WHERE session_id = ?1 AND worktree = ?2",
                params![session_id, worktree.as_os_str().as_bytes()],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| sql_err(self, e))
    }

    /// The verify.yaml snapshot (JSON) recorded for a hook session in a worktree, if any.
    fn hook_config(&self, session_id: &str, worktree: &Path) -> Result<Option<String>, Error> {
        self.conn()
            .query_row(
                "SELECT config FROM hook_configs WHERE session_id = ?1 AND worktree = ?2",
                params![session_id, worktree.as_os_str().as_bytes()],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| sql_err(self, e))
    }

    /// The verify.yaml snapshot (JSON) `goal`'s gates are run and keyed by; `None` when it
    /// had none (or was created before snapshots were kept).
    fn gate_config(&self, goal: GoalId) -> Result<Option<String>, Error> {
        self.conn()
            .query_row(
                "SELECT gate_config FROM goals WHERE id = ?1",
                params![goal.0],
                |r| r.get(0),
            )
            .optional()
            .map(Option::flatten)
            .map_err(|e| sql_err(self, e))
    }

    /// The Stop hook's consecutive block count for a session (0 when unknown).
    fn hook_blocks(&self, session_id: &str) -> Result<u32, Error> {
        self.conn()
            .query_row(
                "SELECT blocks FROM hook_sessions WHERE session_id = ?1",
                [session_id],
                |r| r.get(0),
            )
            .optional()
            .map(|b| b.unwrap_or(0))
            .map_err(|e| sql_err(self, e))
    }

    /// `stream`'s frames after seq `after`, in order, at most `max`.
    fn frames_after(
        &self,
        stream: greenlight_stream::StreamId,
        after: u64,
        max: usize,
    ) -> Result<Vec<greenlight_stream::Frame>, Error> {
        crate::frames::frames_after(self, stream, after, max)
    }

    /// `(oldest, head)` of `stream`: its lowest stored seq and its last; `(1, 0)` when it has
    /// no frame.
    fn frame_bounds(&self, stream: greenlight_stream::StreamId) -> Result<(u64, u64), Error> {
        crate::frames::frame_bounds(self, stream)
    }

    /// Frames of every stream committed after the file-wide position `after` (see
    /// [`Reads::last_frame_position`]), with their positions, at most `max`: how a server
    /// learns what other processes committed.
    fn frames_since(
        &self,
        after: i64,
        max: usize,
    ) -> Result<Vec<(i64, greenlight_stream::Frame)>, Error> {
        crate::frames::frames_since(self, after, max)
    }

    /// The file-wide position of the last committed frame (0 when none).
    fn last_frame_position(&self) -> Result<i64, Error> {
        crate::frames::last_frame_position(self)
    }

    /// The most recent verify and hook runs, newest first, at most `max`.
    fn runs(&self, max: usize) -> Result<Vec<crate::Run>, Error> {
        crate::frames::runs(self, max)
    }

    /// The run with this id.
    fn run(&self, id: crate::RunId) -> Result<Option<crate::Run>, Error> {
        crate::frames::run(self, id)
    }

    /// The newest runs of a repository (and of the worktree itself), newest first, at most `max`.
    fn runs_in(&self, scope: &crate::HistoryScope, max: usize) -> Result<Vec<crate::Run>, Error> {
        crate::history::runs_in(self, scope, max)
    }

    /// The gate rows of one run, in the order the gates were decided.
    fn run_gates(&self, run: crate::RunId) -> Result<Vec<crate::RunGateRow>, Error> {
        crate::history::run_gates(self, run)
    }

    /// One gate's newest rows in scope (skips and cached results included), newest first.
    fn gate_rows(
        &self,
        scope: &crate::HistoryScope,
        gate: &str,
        max: usize,
    ) -> Result<Vec<crate::RunGateRow>, Error> {
        crate::history::gate_rows(self, scope, gate, max)
    }

    /// Every gate id with a row in scope, sorted.
    fn history_gates(&self, scope: &crate::HistoryScope) -> Result<Vec<String>, Error> {
        crate::history::gate_ids(self, scope)
    }

    /// Per gate in scope, sorted by id: count, duration percentiles (nearest rank), failure and
    /// flaky rates over its newest `window` samples (decided, not skipped, not cached), and its
    /// newest verdict of any kind.
    fn gate_stats(
        &self,
        scope: &crate::HistoryScope,
        window: usize,
    ) -> Result<Vec<crate::GateStats>, Error> {
        crate::history::gate_stats(self, scope, window)
    }

    /// The workflow run with this id.
    fn workflow_run(&self, id: crate::WorkflowRunId) -> Result<Option<crate::WorkflowRun>, Error> {
        crate::workflow::workflow_run(self, id)
    }

    /// The most recent workflow runs, newest first, at most `max`.
    fn workflow_runs(&self, max: usize) -> Result<Vec<crate::WorkflowRun>, Error> {
        crate::workflow::workflow_runs(self, max)
    }

    /// A workflow run's events, in order (the scheduler's input on resume).
    fn workflow_events(
        &self,
        run: crate::WorkflowRunId,
    ) -> Result<Vec<crate::WorkflowEvent>, Error> {
        crate::workflow::workflow_events(self, run)
    }

    /// A workflow run's dispatch ledger, oldest first.
    fn workflow_dispatches(
        &self,
        run: crate::WorkflowRunId,
    ) -> Result<Vec<crate::WorkflowDispatch>, Error> {
        crate::workflow::workflow_dispatches(self, run)
    }

    /// A workflow run's member worktrees, oldest first.
    fn workflow_members(
        &self,
        run: crate::WorkflowRunId,
    ) -> Result<Vec<crate::WorkflowMember>, Error> {
        crate::workflow::workflow_members(self, run)
    }

    /// The queue item with this id.
    fn queue_item(&self, id: crate::QueueItemId) -> Result<Option<crate::QueueItem>, Error> {
        crate::queue::queue_item(self, id)
    }

    /// Every queue item, oldest first.
    fn queue_items(&self) -> Result<Vec<crate::QueueItem>, Error> {
        crate::queue::queue_items(self)
    }

    /// How many queue items are queued or claimed (not ended).
    fn queue_open_count(&self) -> Result<u64, Error> {
        crate::queue::open_count(self)
    }

    /// Every claim of a queue item, in order.
    fn queue_claims(&self, id: crate::QueueItemId) -> Result<Vec<crate::QueueClaim>, Error> {
        crate::queue::queue_claims(self, id)
    }

    /// A workflow run with its events, ledger and members (read them in one
    /// [`Store::read`](crate::Store::read) snapshot so they agree).
    fn workflow_record(
        &self,
        run: crate::WorkflowRunId,
    ) -> Result<Option<crate::WorkflowRecord>, Error> {
        crate::workflow::workflow_record(self, run)
    }
}

pub(crate) fn sql_err<A: sealed::Access + ?Sized>(a: &A, e: crate::db::DbError) -> Error {
    Error::sql(a.db_path(), e)
}

pub(crate) fn collect<A, T, P>(
    a: &A,
    sql: &str,
    params: P,
    f: impl FnMut(&Row) -> crate::db::DbResult<T>,
) -> Result<Vec<T>, Error>
where
    A: sealed::Access + ?Sized,
    P: crate::db::Params,
{
    a.conn()
        .query_map(sql, params, f)
        .map_err(|e| sql_err(a, e))
}

fn corrupt(path: &Path, what: &'static str, found: impl Into<String>) -> Error {
    Error::Corrupt {
        path: path.to_path_buf(),
        what,
        found: found.into(),
    }
}

fn named<T>(
    path: &Path,
    what: &'static str,
    text: String,
    parse: fn(&str) -> Option<T>,
) -> Result<T, Error> {
    parse(&text).ok_or_else(|| corrupt(path, what, text))
}

fn to_u64(path: &Path, what: &'static str, v: Option<i64>) -> Result<Option<u64>, Error> {
    v.map(|n| u64::try_from(n).map_err(|_| corrupt(path, what, n.to_string())))
        .transpose()
}

pub(crate) fn path_from_blob(bytes: Vec<u8>) -> PathBuf {
    PathBuf::from(OsString::from_vec(bytes))
}

pub(crate) struct RawGoal {
    id: i64,
    worktree: Vec<u8>,
    text: String,
    state: String,
    pause_reason: Option<String>,
    pause_detail: Option<String>,
    family: String,
    model: Option<String>,
    argv: Option<String>,
    judge: Option<String>,
    max_turns: u32,
    retries: u32,
    gate_timeout_sec: u32,
    turns_used: u32,
    created_at: i64,
    updated_at: i64,
    model_probed: Option<String>,
    endpoint: Option<String>,
}

impl RawGoal {
    pub(crate) fn from_row(r: &Row) -> crate::db::DbResult<Self> {
        Ok(RawGoal {
            id: r.get(0)?,
            worktree: r.get(1)?,
            text: r.get(2)?,
            state: r.get(3)?,
            pause_reason: r.get(4)?,
            pause_detail: r.get(5)?,
            family: r.get(6)?,
            model: r.get(7)?,
            argv: r.get(8)?,
            judge: r.get(9)?,
            max_turns: r.get(10)?,
            retries: r.get(11)?,
            gate_timeout_sec: r.get(12)?,
            turns_used: r.get(13)?,
            created_at: r.get(14)?,
            updated_at: r.get(15)?,
            model_probed: r.get(16)?,
            endpoint: r.get(17)?,
        })
    }

    pub(crate) fn decode(self, path: &Path) -> Result<Goal, Error> {
        let state = named(path, "goals.state", self.state, GoalState::from_name)?;
        let argv_template = match self.argv {
            None => None,
            Some(text) => Some(
                serde_json::from_str::<Vec<String>>(&text)
                    .map_err(|_| corrupt(path, "goals.agent_argv", text))?,
            ),
        };
        let endpoint = match self.endpoint {
            None => None,
            Some(text) => Some(
                serde_json::from_str::<AgentEndpoint>(&text)
                    .map_err(|_| corrupt(path, "goals.agent_endpoint", text))?,
            ),
        };
        Ok(Goal {
            id: GoalId(self.id),
            worktree: path_from_blob(self.worktree),
            text: self.text,
            state,
            pause: self.pause_reason.map(|reason| Pause {
                reason,
                detail: self.pause_detail,
            }),
            agent: AgentSpec {
                family: named(path, "goals.agent_family", self.family, Family::from_name)?,
                model: self.model,
                argv_template,
                endpoint,
            },
            judge: self.judge,
            max_turns: self.max_turns,
            retries: self.retries,
            gate_timeout_sec: self.gate_timeout_sec,
            model_probed: self.model_probed,
            turns_used: self.turns_used,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

struct RawGate {
    id: i64,
    goal: i64,
    command: String,
    attempts: u32,
    verdict: Option<String>,
    exit_code: Option<i32>,
    key: Option<String>,
    evidence: Option<String>,
    at: Option<i64>,
    removed: bool,
    timeout_sec: Option<u32>,
    mutex: Option<String>,
}

impl RawGate {
    fn from_row(r: &Row) -> crate::db::DbResult<Self> {
        Ok(RawGate {
            id: r.get(0)?,
            goal: r.get(1)?,
            command: r.get(2)?,
            attempts: r.get(3)?,
            verdict: r.get(4)?,
            exit_code: r.get(5)?,
            key: r.get(6)?,
            evidence: r.get(7)?,
            at: r.get(8)?,
            removed: r.get(9)?,
            timeout_sec: r.get(10)?,
            mutex: r.get(11)?,
        })
    }

    fn decode(self, path: &Path, number: Option<usize>) -> Result<Gate, Error> {
        let last = match (self.verdict, self.at) {
            (Some(v), Some(at)) => Some(LastResult {
                verdict: named(path, "gates.last_verdict", v, GateVerdict::from_name)?,
                exit_code: self.exit_code,
                workspace_key: self.key,
                evidence: self.evidence,
                at,
            }),
            _ => None,
        };
        Ok(Gate {
            id: GateId(self.id),
            goal: GoalId(self.goal),
            number,
            command: self.command,
            timeout_sec: self.timeout_sec,
            mutex: self.mutex,
            attempts: self.attempts,
            last,
            removed: self.removed,
        })
    }
}

pub(crate) struct RawGateRun {
    id: i64,
    goal: i64,
    gate: i64,
    turn: Option<u32>,
    attempt: u32,
    verdict: String,
    exit_code: Option<i32>,
    duration_ms: i64,
    key: Option<String>,
    replayed: bool,
    digest: Option<String>,
    evidence: Option<String>,
    at: i64,
}

impl RawGateRun {
    pub(crate) fn from_row(r: &Row) -> crate::db::DbResult<Self> {
        Ok(RawGateRun {
            id: r.get(0)?,
            goal: r.get(1)?,
            gate: r.get(2)?,
            turn: r.get(3)?,
            attempt: r.get(4)?,
            verdict: r.get(5)?,
            exit_code: r.get(6)?,
            duration_ms: r.get(7)?,
            key: r.get(8)?,
            replayed: r.get(9)?,
            digest: r.get(10)?,
            evidence: r.get(11)?,
            at: r.get(12)?,
        })
    }

    pub(crate) fn decode(self, path: &Path) -> Result<GateRun, Error> {
        let digest = match self.digest {
            None => None,
            Some(text) => Some(
                serde_json::from_str(&text).map_err(|_| corrupt(path, "gate_runs.digest", text))?,
            ),
        };
        Ok(GateRun {
            id: GateRunId(self.id),
            goal: GoalId(self.goal),
            gate: GateId(self.gate),
            turn: self.turn,
            attempt: self.attempt,
            verdict: named(
                path,
                "gate_runs.verdict",
                self.verdict,
                GateVerdict::from_name,
            )?,
            exit_code: self.exit_code,
            duration_ms: to_u64(path, "gate_runs.duration_ms", Some(self.duration_ms))?
                .unwrap_or(0),
            workspace_key: self.key,
            replayed: self.replayed,
            digest,
            evidence: self.evidence,
            at: self.at,
        })
    }
}

pub(crate) struct RawDispatch {
    id: i64,
    goal: i64,
    turn: u32,
    attempt: u32,
    family: String,
    model: Option<String>,
    outcome: String,
    wall_ms: Option<i64>,
    tokens_in: Option<i64>,
    tokens_out: Option<i64>,
    cache_read: Option<i64>,
    cache_write: Option<i64>,
    cost_usd: Option<f64>,
    source: Option<String>,
    reason: Option<String>,
    detail: Option<String>,
    started_at: i64,
    ended_at: Option<i64>,
    step: String,
    reply: Option<String>,
}

impl RawDispatch {
    pub(crate) fn from_row(r: &Row) -> crate::db::DbResult<Self> {
        Ok(RawDispatch {
            id: r.get(0)?,
            goal: r.get(1)?,
            turn: r.get(2)?,
            attempt: r.get(3)?,
            family: r.get(4)?,
            model: r.get(5)?,
            outcome: r.get(6)?,
            wall_ms: r.get(7)?,
            tokens_in: r.get(8)?,
            tokens_out: r.get(9)?,
            cache_read: r.get(10)?,
            cache_write: r.get(11)?,
            cost_usd: r.get(12)?,
            source: r.get(13)?,
            reason: r.get(14)?,
            detail: r.get(15)?,
            started_at: r.get(16)?,
            ended_at: r.get(17)?,
            step: r.get(18)?,
            reply: r.get(19)?,
        })
    }

    pub(crate) fn decode(self, path: &Path) -> Result<Dispatch, Error> {
        Ok(Dispatch {
            id: DispatchId(self.id),
            goal: GoalId(self.goal),
            turn: self.turn,
            attempt: self.attempt,
            step: named(path, "dispatches.step", self.step, DispatchStep::from_name)?,
            family: named(path, "dispatches.family", self.family, Family::from_name)?,
            model: self.model,
            outcome: named(
                path,
                "dispatches.outcome",
                self.outcome,
                DispatchOutcome::from_name,
            )?,
            wall_ms: to_u64(path, "dispatches.wall_ms", self.wall_ms)?,
            tokens: Tokens {
                input: to_u64(path, "dispatches.tokens_in", self.tokens_in)?,
                output: to_u64(path, "dispatches.tokens_out", self.tokens_out)?,
                cache_read: to_u64(path, "dispatches.cache_read_tokens", self.cache_read)?,
                cache_write: to_u64(path, "dispatches.cache_write_tokens", self.cache_write)?,
                cost_usd: self.cost_usd,
                source: self.source,
            },
            reason: self.reason,
            detail: self.detail,
            reply: self.reply,
            started_at: self.started_at,
            ended_at: self.ended_at,
        })
    }
}
