//! The schema, as an append-only list of migration steps keyed by `PRAGMA user_version`.
//!
//! Step N takes a database from version N-1 to N. A released step is never edited: a change is a
//! new step at the end. Each step runs in the same IMMEDIATE transaction as its version bump,
//! so a database is always exactly at one version.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use crate::db::Conn;

use crate::Error;

/// The migration steps; `MIGRATIONS[i]` produces version `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // Version 1: the goal loop and the Stop hook.
    r#"
CREATE TABLE goals (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    worktree         BLOB    NOT NULL,
    text             TEXT    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('active', 'paused', 'done', 'cleared')),
    pause_reason     TEXT    CHECK (pause_reason NOT GLOB '*[^a-z0-9-]*'),
    pause_detail     TEXT,
    agent_family     TEXT    NOT NULL,
    agent_model      TEXT,
    agent_argv       TEXT    CHECK (agent_argv IS NULL OR json_valid(agent_argv)),
    judge            TEXT,
    max_turns        INTEGER NOT NULL CHECK (max_turns >= 0),
    retries          INTEGER NOT NULL CHECK (retries >= 0),
    gate_timeout_sec INTEGER NOT NULL CHECK (gate_timeout_sec >= 0),
    turns_used       INTEGER NOT NULL DEFAULT 0 CHECK (turns_used >= 0),
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    CHECK ((state = 'paused') = (pause_reason IS NOT NULL))
);
-- One live goal per worktree; done and cleared rows stay for audit and do not count.
CREATE UNIQUE INDEX goals_one_live_per_worktree ON goals (worktree)
    WHERE state IN ('active', 'paused');

CREATE TABLE gates (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    goal_id            INTEGER NOT NULL REFERENCES goals (id),
    position           INTEGER NOT NULL,
    command            TEXT    NOT NULL,
    attempts           INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_verdict       TEXT    CHECK (last_verdict IN ('pass', 'fail', 'timeout')),
    last_exit_code     INTEGER,
    last_workspace_key TEXT,
    last_evidence      TEXT,
    last_at            INTEGER,
    removed            INTEGER NOT NULL DEFAULT 0 CHECK (removed IN (0, 1)),
    removed_at         INTEGER,
    created_at         INTEGER NOT NULL,
    UNIQUE (goal_id, position)
);

CREATE TABLE turns (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    goal_id    INTEGER NOT NULL REFERENCES goals (id),
    number     INTEGER NOT NULL CHECK (number >= 1),
    started_at INTEGER NOT NULL,
    ended_at   INTEGER,
    outcome    TEXT    CHECK (outcome NOT GLOB '*[^a-z0-9-]*'),
    UNIQUE (goal_id, number),
    CHECK ((ended_at IS NULL) = (outcome IS NULL))
);

CREATE TABLE gate_runs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    goal_id       INTEGER NOT NULL REFERENCES goals (id),
    gate_id       INTEGER NOT NULL REFERENCES gates (id),
    turn          INTEGER,
    attempt       INTEGER NOT NULL CHECK (attempt >= 0),
    verdict       TEXT    NOT NULL CHECK (verdict IN ('pass', 'fail', 'timeout')),
    exit_code     INTEGER,
    duration_ms   INTEGER NOT NULL CHECK (duration_ms >= 0),
    workspace_key TEXT,
    replayed      INTEGER NOT NULL CHECK (replayed IN (0, 1)),
    digest        TEXT    CHECK (digest IS NULL OR json_valid(digest)),
    evidence      TEXT,
    created_at    INTEGER NOT NULL,
    FOREIGN KEY (goal_id, turn) REFERENCES turns (goal_id, number)
);
CREATE INDEX gate_runs_by_goal ON gate_runs (goal_id, id);

CREATE TABLE dispatches (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    goal_id            INTEGER NOT NULL REFERENCES goals (id),
    turn               INTEGER NOT NULL,
    attempt            INTEGER NOT NULL CHECK (attempt >= 1),
    family             TEXT    NOT NULL,
    model              TEXT,
    outcome            TEXT    NOT NULL
        CHECK (outcome IN ('in-flight', 'ok', 'null', 'error', 'interrupted')),
    wall_ms            INTEGER CHECK (wall_ms >= 0),
    -- NULL means "the runtime did not report it"; 0 means it reported zero.
    tokens_in          INTEGER CHECK (tokens_in >= 0),
    tokens_out         INTEGER CHECK (tokens_out >= 0),
    cache_read_tokens  INTEGER CHECK (cache_read_tokens >= 0),
    cache_write_tokens INTEGER CHECK (cache_write_tokens >= 0),
    cost_usd           REAL    CHECK (cost_usd >= 0),
    token_source       TEXT,
    reason             TEXT    CHECK (reason NOT GLOB '*[^a-z0-9-]*'),
    detail             TEXT,
    started_at         INTEGER NOT NULL,
    ended_at           INTEGER,
    FOREIGN KEY (goal_id, turn) REFERENCES turns (goal_id, number),
    CHECK ((outcome = 'in-flight') = (ended_at IS NULL))
);
CREATE INDEX dispatches_by_goal ON dispatches (goal_id, id);
CREATE INDEX dispatches_in_flight ON dispatches (goal_id) WHERE outcome = 'in-flight';

-- seq is the rowid: with no deletes and rolled-back inserts leaving no trace it is contiguous.
CREATE TABLE events (
    seq     INTEGER PRIMARY KEY,
    goal_id INTEGER REFERENCES goals (id),
    turn    INTEGER,
    kind    TEXT    NOT NULL CHECK (kind NOT GLOB '*[^a-z0-9-]*' AND kind <> ''),
    payload TEXT    NOT NULL CHECK (json_valid(payload)),
    at      INTEGER NOT NULL
);
CREATE INDEX events_by_goal ON events (goal_id, seq);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;

CREATE TABLE hook_sessions (
    session_id TEXT    PRIMARY KEY,
    blocks     INTEGER NOT NULL CHECK (blocks >= 0),
    updated_at INTEGER NOT NULL
);
"#,
    // Version 2: the judge's dispatches go in the ledger too, told apart from the agent's turns
    // (crash recovery looks only at the agent's, to decide whether a turn still owes its gates).
    r#"
ALTER TABLE dispatches ADD COLUMN step TEXT NOT NULL DEFAULT 'agent' CHECK (step IN ('agent', 'judge'));
"#,
    // Version 3: what a resume needs to carry on exactly: the reply of each dispatch (the judge
    // after a crash judges the agent's real reply, and its failure streaks are read back from
    // the ledger), each gate's own time limit and mutex (verify.yaml's `timeoutSec` and
    // `mutex`), and the model id the start-of-goal probe found answering.
    r#"
ALTER TABLE dispatches ADD COLUMN reply TEXT;
ALTER TABLE gates ADD COLUMN timeout_sec INTEGER CHECK (timeout_sec IS NULL OR timeout_sec >= 1);
ALTER TABLE gates ADD COLUMN mutex TEXT CHECK (mutex IS NULL OR mutex <> '');
ALTER TABLE goals ADD COLUMN model_probed TEXT;
"#,
    // Version 4: the Stop hook's per-session base commit, recorded once (at SessionStart, else
    // at the session's first Stop) so that a later push or fetch cannot move where the
    // session's work is counted from. Self-contained: no other table refers to it.
    r#"
CREATE TABLE hook_bases (
    session_id  TEXT    NOT NULL,
    worktree    BLOB    NOT NULL,
    base        TEXT    NOT NULL CHECK (length(base) > 0),
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, worktree)
);
"#,
    // Version 5: live frames. Each stream (a goal's, or a recorded verify or hook run's) numbers
    // its frames 1, 2, 3, … with no hole: the seq is assigned inside the transaction that
    // persists the frame. `id` is the file-wide order a server polls to publish frames that
    // other processes committed. Frames may be pruned (old runs), never changed.
    r#"
CREATE TABLE runs (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    kind       TEXT    NOT NULL CHECK (kind IN ('verify', 'hook')),
    worktree   BLOB    NOT NULL,
    gates      INTEGER NOT NULL CHECK (gates >= 0),
    result     TEXT    CHECK (result IS NULL OR (result <> '' AND result NOT GLOB '*[^a-z0-9-]*')),
    exit_code  INTEGER,
    started_at INTEGER NOT NULL,
    ended_at   INTEGER,
    CHECK ((result IS NULL) = (ended_at IS NULL))
);
CREATE INDEX runs_by_start ON runs (started_at);
CREATE TABLE frames (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    stream TEXT    NOT NULL CHECK (stream <> ''),
    seq    INTEGER NOT NULL CHECK (seq >= 1),
    kind   TEXT    NOT NULL CHECK (kind NOT GLOB '*[^a-z0-9-]*' AND kind <> ''),
    body   TEXT    NOT NULL CHECK (json_valid(body)),
    at     INTEGER NOT NULL,
    UNIQUE (stream, seq)
);
CREATE TRIGGER frames_no_update BEFORE UPDATE ON frames
    BEGIN SELECT RAISE(ABORT, 'frames are never changed'); END;
"#,
    // Version 6: the openai family. A goal keeps the server it talks to (base URL, the name of
    // the variable holding the key — never the key —, the tool format), so a resume talks to
    // the same one; and every tool call greenlight runs for a model is recorded write-ahead:
    // its row is committed as `intent` before the call has any effect and completed after.
    r#"
ALTER TABLE goals ADD COLUMN agent_endpoint TEXT
    CHECK (agent_endpoint IS NULL OR json_valid(agent_endpoint));
CREATE TABLE tool_calls (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    dispatch_id INTEGER NOT NULL REFERENCES dispatches (id),
    seq         INTEGER NOT NULL CHECK (seq >= 1),
    step        INTEGER NOT NULL CHECK (step >= 1),
    call_id     TEXT    NOT NULL,
    tool        TEXT    NOT NULL,
    arguments   TEXT    NOT NULL,
    status      TEXT    NOT NULL
        CHECK (status IN ('intent', 'ok', 'error', 'refused', 'violation', 'interrupted')),
    result      TEXT,
    wall_ms     INTEGER CHECK (wall_ms >= 0),
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER,
    UNIQUE (dispatch_id, seq),
    CHECK ((status = 'intent') = (ended_at IS NULL))
);
"#,
    // Version 7: run history. Each gate a verify or hook run decided gets a row (the verdict,
    // the deciding attempt's exit code and time, how many attempts, whether the result was
    // replayed from a cache), so durations and failure rates are a query rather than a parse
    // of frame bodies; and each run keeps its repository's common git directory, so the runs
    // of every worktree of one repository are read together (NULL when unknown: not a git
    // directory, or recorded before this version).
    r#"
ALTER TABLE runs ADD COLUMN repository BLOB CHECK (repository IS NULL OR length(repository) > 0);
CREATE INDEX runs_by_repository ON runs (repository, id);
CREATE TABLE run_gates (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      INTEGER NOT NULL REFERENCES runs (id),
    gate        TEXT    NOT NULL CHECK (gate <> ''),
    verdict     TEXT    NOT NULL CHECK (verdict IN ('pass', 'fail', 'flaky', 'timeout', 'skip')),
    exit_code   INTEGER,
    duration_ms INTEGER CHECK (duration_ms IS NULL OR duration_ms >= 0),
    attempts    INTEGER NOT NULL CHECK (attempts >= 0),
    cached      INTEGER NOT NULL DEFAULT 0 CHECK (cached IN (0, 1)),
    decided_at  INTEGER NOT NULL,
    UNIQUE (run_id, gate),
    CHECK ((attempts = 0) = (duration_ms IS NULL))
);
-- "The newest rows of gate X": history and the timeout suggestion read them newest first.
CREATE INDEX run_gates_by_gate ON run_gates (gate, decided_at DESC, run_id DESC);
"#,
    // Version 8: the remote operation a goal's `run: remote` gate is running under, written
    // as soon as the cluster names it and removed when the gate is decided, so a goal killed
    // while the gate runs on the cluster re-attaches to it (WaitExecution) on resume instead of
    // starting it again.
    r#"
CREATE TABLE remote_operations (
    gate_id     INTEGER PRIMARY KEY REFERENCES gates (id),
    action      TEXT    NOT NULL CHECK (length(action) = 64),
    operation   TEXT    NOT NULL CHECK (operation <> ''),
    started_at  INTEGER NOT NULL
);
"#,
    // Version 9: what decides how gates are run and keyed, fixed when it began: a goal's
    // verify.yaml as it was at `goal run` (or at a person's `goal gate add`), and a hook
    // session's as it was at its SessionStart or first Stop, each a JSON snapshot of the file
    // and the files it names. A goal or session never reads the worktree's file again, so an
    // agent that rewrites it cannot steer the gates that judge it.
    r#"
ALTER TABLE goals ADD COLUMN gate_config TEXT
    CHECK (gate_config IS NULL OR json_valid(gate_config));
CREATE TABLE hook_configs (
    session_id  TEXT    NOT NULL,
    worktree    BLOB    NOT NULL,
    config      TEXT    NOT NULL CHECK (json_valid(config)),
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, worktree)
);
"#,
    // Version 10: many runs on one machine. A run names its owner (pid, start time, pid
    // namespace, host and boot), so a greenlight that finds the owner gone closes the run as
    // interrupted instead of showing it running forever. Each gate row carries its run's
    // repository and worktree, so "a gate's newest rows in this repository" is one index range
    // instead of a join over every row; goals get the indexes of a paged list.
    r#"
ALTER TABLE runs ADD COLUMN owner_pid   INTEGER;
ALTER TABLE runs ADD COLUMN owner_start INTEGER;
ALTER TABLE runs ADD COLUMN owner_pidns TEXT;
ALTER TABLE runs ADD COLUMN owner_host  TEXT;
CREATE INDEX runs_open ON runs (id) WHERE ended_at IS NULL;
CREATE INDEX runs_by_worktree ON runs (worktree, id);
ALTER TABLE run_gates ADD COLUMN repository BLOB;
ALTER TABLE run_gates ADD COLUMN worktree BLOB;
UPDATE run_gates SET
    repository = (SELECT r.repository FROM runs r WHERE r.id = run_gates.run_id),
    worktree   = (SELECT r.worktree FROM runs r WHERE r.id = run_gates.run_id);
DROP INDEX run_gates_by_gate;
CREATE INDEX run_gates_by_repository ON run_gates (repository, gate, decided_at DESC, run_id DESC)
    WHERE repository IS NOT NULL;
CREATE INDEX run_gates_by_worktree ON run_gates (worktree, gate, decided_at DESC, run_id DESC);
CREATE INDEX goals_live_by_id ON goals (id) WHERE state IN ('active', 'paused');
CREATE INDEX goals_by_updated ON goals (updated_at);
"#,
    // Version 11: observe telemetry and the goal loop's gate runs in history. Each gate row
    // keeps how the digest read the deciding attempt's output (its classification, format name
    // and reasons: words, never the command or the output), NULL when no attempt's output was
    // read now (a skip, a cached or replayed result). A row is a verify or hook run's (`run_id`)
    // or a goal's (`goal_id`, with its turn), so history reads both from one table. `run_id`
    // becomes nullable, which SQLite can only do by rebuilding the table; nothing refers to
    // `run_gates`, so dropping the old one breaks no key.
    r#"
CREATE TABLE run_gates_v11 (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id         INTEGER REFERENCES runs (id),
    goal_id        INTEGER REFERENCES goals (id),
    turn           INTEGER CHECK (turn IS NULL OR turn >= 1),
    gate           TEXT    NOT NULL CHECK (gate <> ''),
    verdict        TEXT    NOT NULL CHECK (verdict IN ('pass', 'fail', 'flaky', 'timeout', 'skip')),
    exit_code      INTEGER,
    duration_ms    INTEGER CHECK (duration_ms IS NULL OR duration_ms >= 0),
    attempts       INTEGER NOT NULL CHECK (attempts >= 0),
    cached         INTEGER NOT NULL DEFAULT 0 CHECK (cached IN (0, 1)),
    decided_at     INTEGER NOT NULL,
    repository     BLOB,
    worktree       BLOB,
    digest_class   TEXT    CHECK (digest_class IN ('recognised', 'partial', 'unrecognised')),
    digest_format  TEXT    CHECK (digest_format <> '' AND digest_format NOT GLOB '*[^a-z0-9-]*'),
    digest_reasons TEXT    CHECK (digest_reasons NOT GLOB '*[^a-z0-9,-]*'),
    UNIQUE (run_id, gate),
    CHECK ((attempts = 0) = (duration_ms IS NULL)),
    CHECK ((run_id IS NULL) <> (goal_id IS NULL)),
    CHECK (goal_id IS NOT NULL OR turn IS NULL),
    CHECK ((digest_class IS NULL) = (digest_reasons IS NULL)),
    CHECK (digest_class IS NOT NULL OR digest_format IS NULL)
);
INSERT INTO run_gates_v11 (id, run_id, gate, verdict, exit_code, duration_ms, attempts, cached,
    decided_at, repository, worktree)
    SELECT id, run_id, gate, verdict, exit_code, duration_ms, attempts, cached, decided_at,
        repository, worktree
    FROM run_gates;
DROP TABLE run_gates;
ALTER TABLE run_gates_v11 RENAME TO run_gates;
-- Newest first by the row's own id: a goal's rows have no run to break a tie with.
CREATE INDEX run_gates_by_repository ON run_gates (repository, gate, decided_at DESC, id DESC)
    WHERE repository IS NOT NULL;
CREATE INDEX run_gates_by_worktree ON run_gates (worktree, gate, decided_at DESC, id DESC);
"#,
    // Version 12: workflow runs. A run row holds what a resume must compare and carry on with
    // (plan digest, argument hash, the plan and arguments themselves, each probed model's
    // answering id), its budget and the extensions granted, where it stands, and its owner (as
    // `runs` name theirs, so a run whose process died is seen as interrupted). Its events are
    // the scheduler's input on resume, numbered per run; its dispatches are the ledger the
    // budget's spend is counted from (tokens and cost NULL when the agent did not say, never
    // 0); its members are the linked worktrees it made, so a kept one is always listed.
    r#"
CREATE TABLE workflow_runs (
    id                    INTEGER PRIMARY KEY AUTOINCREMENT,
    name                  TEXT    NOT NULL,
    plan_path             BLOB    NOT NULL,
    repository            BLOB    NOT NULL,
    worktree              BLOB    NOT NULL,
    base_commit           TEXT    NOT NULL,
    plan_digest           TEXT    NOT NULL,
    args_hash             TEXT    NOT NULL,
    plan_json             TEXT    NOT NULL CHECK (json_valid(plan_json)),
    args_json             TEXT    NOT NULL CHECK (json_valid(args_json)),
    models_json           TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(models_json)),
    budget_units          INTEGER CHECK (budget_units >= 0),
    extensions            INTEGER NOT NULL DEFAULT 0 CHECK (extensions >= 0),
    extension_units       INTEGER NOT NULL DEFAULT 0 CHECK (extension_units >= 0),
    token_cap             INTEGER CHECK (token_cap >= 0),
    cost_cap_usd          REAL    CHECK (cost_cap_usd >= 0),
    wall_clock_ms         INTEGER CHECK (wall_clock_ms >= 0),
    wall_clock_extensions INTEGER NOT NULL DEFAULT 0 CHECK (wall_clock_extensions >= 0),
    wall_clock_extra_ms   INTEGER NOT NULL DEFAULT 0 CHECK (wall_clock_extra_ms >= 0),
    status                TEXT    NOT NULL CHECK (status IN ('running', 'paused', 'completed',
                                  'failed', 'terminal', 'interrupted')),
    detail_reason         TEXT    CHECK (detail_reason <> '' AND detail_reason NOT GLOB '*[^a-z0-9-]*'),
    detail_step           TEXT,
    detail_label          TEXT,
    detail_message        TEXT,
    pause_requested_at    INTEGER,
    owner_pid             INTEGER,
    owner_start           INTEGER,
    owner_pidns           TEXT,
    owner_host            TEXT,
    started_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL,
    ended_at              INTEGER,
    CHECK ((status IN ('completed', 'failed', 'terminal')) = (ended_at IS NOT NULL)),
    CHECK (status NOT IN ('paused', 'failed', 'terminal') OR detail_reason IS NOT NULL),
    CHECK (status = 'running' OR pause_requested_at IS NULL)
);
CREATE INDEX workflow_runs_open ON workflow_runs (id) WHERE status = 'running';

CREATE TABLE workflow_events (
    run_id INTEGER NOT NULL REFERENCES workflow_runs (id),
    seq    INTEGER NOT NULL CHECK (seq >= 1),
    event  TEXT    NOT NULL CHECK (json_valid(event)),
    at     INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE workflow_dispatches (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id     INTEGER NOT NULL REFERENCES workflow_runs (id),
    step       TEXT    NOT NULL CHECK (step <> ''),
    item       TEXT,
    attempt    INTEGER NOT NULL CHECK (attempt >= 1),
    family     TEXT    NOT NULL,
    model      TEXT,
    worktree   BLOB,
    started_at INTEGER NOT NULL,
    ended_at   INTEGER,
    wall_ms    INTEGER CHECK (wall_ms >= 0),
    tokens_in  INTEGER CHECK (tokens_in >= 0),
    tokens_out INTEGER CHECK (tokens_out >= 0),
    cost_usd   REAL    CHECK (cost_usd >= 0),
    outcome    TEXT    NOT NULL CHECK (outcome <> '' AND outcome NOT GLOB '*[^a-z0-9-]*'),
    reason     TEXT    CHECK (reason <> '' AND reason NOT GLOB '*[^a-z0-9-]*'),
    CHECK ((outcome = 'in-flight') = (ended_at IS NULL))
);
CREATE UNIQUE INDEX workflow_dispatches_one_attempt
    ON workflow_dispatches (run_id, step, ifnull(item, char(0)), attempt);
CREATE INDEX workflow_dispatches_in_flight ON workflow_dispatches (run_id)
    WHERE ended_at IS NULL;

CREATE TABLE workflow_members (
    run_id     INTEGER NOT NULL REFERENCES workflow_runs (id),
    step       TEXT    NOT NULL CHECK (step <> ''),
    item       TEXT,
    branch     TEXT    NOT NULL,
    worktree   BLOB    NOT NULL,
    state      TEXT    NOT NULL CHECK (state IN ('created', 'removed', 'kept')),
    why_kept   TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    CHECK ((state = 'kept') = (why_kept IS NOT NULL))
);
CREATE UNIQUE INDEX workflow_members_one_per_item
    ON workflow_members (run_id, step, ifnull(item, char(0)));
"#,
    // Version 13: the queue of goals any worker may claim (`goal submit`, `goal worker`).
    r#"
CREATE TABLE queue_items (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    kind         TEXT    NOT NULL CHECK (kind = 'goal'),
    repository   TEXT    NOT NULL CHECK (repository <> ''),
    base         TEXT    NOT NULL CHECK (base <> ''),
    spec         TEXT    NOT NULL CHECK (json_valid(spec)),
    state        TEXT    NOT NULL CHECK (state IN ('queued', 'claimed', 'ended')),
    goal_id      INTEGER REFERENCES goals (id),
    lease_owner  TEXT,
    lease_epoch  INTEGER NOT NULL DEFAULT 0 CHECK (lease_epoch >= 0),
    lease_until  INTEGER,
    outcome      TEXT    CHECK (outcome <> ''),
    submitted_at INTEGER NOT NULL,
    ended_at     INTEGER,
    CHECK ((state = 'claimed') = (lease_owner IS NOT NULL AND lease_until IS NOT NULL)),
    CHECK ((state = 'ended') = (outcome IS NOT NULL AND ended_at IS NOT NULL))
);
CREATE INDEX queue_items_open ON queue_items (id) WHERE state <> 'ended';
CREATE TABLE queue_labels (
    item_id INTEGER NOT NULL REFERENCES queue_items (id),
    label   TEXT    NOT NULL CHECK (label <> ''),
    PRIMARY KEY (item_id, label)
);
-- Every claim of an item, in order: who held it under which epoch.
CREATE TABLE queue_claims (
    item_id    INTEGER NOT NULL REFERENCES queue_items (id),
    epoch      INTEGER NOT NULL CHECK (epoch >= 1),
    worker     TEXT    NOT NULL CHECK (worker <> ''),
    claimed_at INTEGER NOT NULL,
    PRIMARY KEY (item_id, epoch)
);
"#,
    // Version 14: the queue carries workflow runs too (`workflow submit`): an item is a goal or
    // a workflow run, and names the run its first worker started. SQLite cannot change a CHECK
    // in place, so the three queue tables are rebuilt: the new ones reference each other, and
    // renaming them onto the old names carries those references along.
    r#"
CREATE TABLE queue_items_v14 (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    kind         TEXT    NOT NULL CHECK (kind IN ('goal', 'workflow')),
    repository   TEXT    NOT NULL CHECK (repository <> ''),
    base         TEXT    NOT NULL CHECK (base <> ''),
    spec         TEXT    NOT NULL CHECK (json_valid(spec)),
    state        TEXT    NOT NULL CHECK (state IN ('queued', 'claimed', 'ended')),
    goal_id      INTEGER REFERENCES goals (id),
    workflow_run INTEGER REFERENCES workflow_runs (id),
    lease_owner  TEXT,
    lease_epoch  INTEGER NOT NULL DEFAULT 0 CHECK (lease_epoch >= 0),
    lease_until  INTEGER,
    outcome      TEXT    CHECK (outcome <> ''),
    submitted_at INTEGER NOT NULL,
    ended_at     INTEGER,
    CHECK ((state = 'claimed') = (lease_owner IS NOT NULL AND lease_until IS NOT NULL)),
    CHECK ((state = 'ended') = (outcome IS NOT NULL AND ended_at IS NOT NULL)),
    CHECK (kind = 'goal' OR goal_id IS NULL),
    CHECK (kind = 'workflow' OR workflow_run IS NULL)
);
INSERT INTO queue_items_v14 (id, kind, repository, base, spec, state, goal_id, lease_owner,
    lease_epoch, lease_until, outcome, submitted_at, ended_at)
    SELECT id, kind, repository, base, spec, state, goal_id, lease_owner, lease_epoch,
        lease_until, outcome, submitted_at, ended_at
    FROM queue_items;
CREATE TABLE queue_labels_v14 (
    item_id INTEGER NOT NULL REFERENCES queue_items_v14 (id),
    label   TEXT    NOT NULL CHECK (label <> ''),
    PRIMARY KEY (item_id, label)
);
INSERT INTO queue_labels_v14 SELECT item_id, label FROM queue_labels;
CREATE TABLE queue_claims_v14 (
    item_id    INTEGER NOT NULL REFERENCES queue_items_v14 (id),
    epoch      INTEGER NOT NULL CHECK (epoch >= 1),
    worker     TEXT    NOT NULL CHECK (worker <> ''),
    claimed_at INTEGER NOT NULL,
    PRIMARY KEY (item_id, epoch)
);
INSERT INTO queue_claims_v14 SELECT item_id, epoch, worker, claimed_at FROM queue_claims;
DROP TABLE queue_labels;
DROP TABLE queue_claims;
DROP TABLE queue_items;
ALTER TABLE queue_items_v14 RENAME TO queue_items;
ALTER TABLE queue_labels_v14 RENAME TO queue_labels;
ALTER TABLE queue_claims_v14 RENAME TO queue_claims;
CREATE INDEX queue_items_open ON queue_items (id) WHERE state <> 'ended';
"#,
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Bring `conn` up to [`SCHEMA_VERSION`], one transaction per step.
///
/// The version is re-read inside each IMMEDIATE transaction, so two processes opening a fresh
/// file at once do not both apply a step: the second waits, then finds it done.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), Error> {
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|source| Error::Open {
                path: path.to_path_buf(),
                source: source.into(),
            })?;
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|source| Error::Open {
                path: path.to_path_buf(),
                source: source.into(),
            })?;
        if version > SCHEMA_VERSION {
            return Err(Error::SchemaTooNew {
                path: path.to_path_buf(),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        let Ok(done) = usize::try_from(version) else {
            return Err(Error::Corrupt {
                path: path.to_path_buf(),
                what: "PRAGMA user_version",
                found: version.to_string(),
            });
        };
        let Some(step) = MIGRATIONS.get(done) else {
            return Ok(());
        };
        let next = version + 1;
        let failed = |source: rusqlite::Error| Error::Migrate {
            path: path.to_path_buf(),
            version: next,
            source: source.into(),
        };
        tx.execute_batch(step).map_err(failed)?;
        tx.pragma_update(None, "user_version", next)
            .map_err(failed)?;
        tx.commit().map_err(failed)?;
    }
}

/// A PostgreSQL store at version [`PG_BASELINE_VERSION`], made in one step: the same tables as
/// a SQLite file after `MIGRATIONS[..12]`, in PostgreSQL's types. (No PostgreSQL store older
/// than that exists, so its history is not replayed.)
const PG_BASELINE: &str = include_str!("schema_pg.sql");

/// The version [`PG_BASELINE`] produces.
const PG_BASELINE_VERSION: i64 = 12;

/// The PostgreSQL spelling of each step after the baseline: `PG_STEPS[i]` produces version
/// `PG_BASELINE_VERSION + 1 + i`, the same version `MIGRATIONS` gives a SQLite file.
const PG_STEPS: &[&str] = &[
    // Version 13: the queue.
    r#"
CREATE TABLE queue_items (
    id           BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    kind         TEXT    NOT NULL CHECK (kind = 'goal'),
    repository   TEXT    NOT NULL CHECK (repository <> ''),
    base         TEXT    NOT NULL CHECK (base <> ''),
    spec         TEXT    NOT NULL CHECK (json_valid(spec)),
    state        TEXT    NOT NULL CHECK (state IN ('queued', 'claimed', 'ended')),
    goal_id      BIGINT  REFERENCES goals (id),
    lease_owner  TEXT,
    lease_epoch  BIGINT  NOT NULL DEFAULT 0 CHECK (lease_epoch >= 0),
    lease_until  BIGINT ,
    outcome      TEXT    CHECK (outcome <> ''),
    submitted_at BIGINT  NOT NULL,
    ended_at     BIGINT ,
    CHECK ((state = 'claimed') = (lease_owner IS NOT NULL AND lease_until IS NOT NULL)),
    CHECK ((state = 'ended') = (outcome IS NOT NULL AND ended_at IS NOT NULL))
);
CREATE INDEX queue_items_open ON queue_items (id) WHERE state <> 'ended';
CREATE TABLE queue_labels (
    item_id BIGINT  NOT NULL REFERENCES queue_items (id),
    label   TEXT    NOT NULL CHECK (label <> ''),
    PRIMARY KEY (item_id, label)
);
-- Every claim of an item, in order: who held it under which epoch.
CREATE TABLE queue_claims (
    item_id    BIGINT  NOT NULL REFERENCES queue_items (id),
    epoch      BIGINT  NOT NULL CHECK (epoch >= 1),
    worker     TEXT    NOT NULL CHECK (worker <> ''),
    claimed_at BIGINT  NOT NULL,
    PRIMARY KEY (item_id, epoch)
);
"#,
    // Version 14: workflow runs on the queue.
    r#"
ALTER TABLE queue_items DROP CONSTRAINT queue_items_kind_check;
ALTER TABLE queue_items ADD CONSTRAINT queue_items_kind_check CHECK (kind IN ('goal', 'workflow'));
ALTER TABLE queue_items ADD COLUMN workflow_run BIGINT REFERENCES workflow_runs (id);
ALTER TABLE queue_items ADD CHECK (kind = 'goal' OR goal_id IS NULL);
ALTER TABLE queue_items ADD CHECK (kind = 'workflow' OR workflow_run IS NULL);
"#,
];

const _: () = assert!(
    PG_BASELINE_VERSION + PG_STEPS.len() as i64 == SCHEMA_VERSION,
    "every SQLite migration step needs its PostgreSQL spelling"
);

/// Bring a PostgreSQL store up to [`SCHEMA_VERSION`], one transaction per step, each under the
/// store's write lock so two processes opening a new database at once apply each step once.
pub(crate) fn migrate_postgres(conn: Conn<'_>, path: &Path) -> Result<(), Error> {
    let open_err = |source| Error::Open {
        path: path.to_path_buf(),
        source,
    };
    // Without the lock first: a current store (every open but the first) costs one query.
    if pg_version(conn).ok() == Some(SCHEMA_VERSION) {
        return Ok(());
    }
    loop {
        conn.batch(crate::PG_BEGIN_WRITE).map_err(open_err)?;
        let version = conn
            .batch("CREATE TABLE IF NOT EXISTS greenlight_schema (version BIGINT NOT NULL)")
            .and_then(|()| pg_version(conn));
        let version = match version {
            Ok(v) => v,
            Err(e) => {
                let _ = conn.batch("ROLLBACK");
                return Err(open_err(e));
            }
        };
        let step = match version {
            v if v == SCHEMA_VERSION => None,
            v if v > SCHEMA_VERSION => {
                let _ = conn.batch("ROLLBACK");
                return Err(Error::SchemaTooNew {
                    path: path.to_path_buf(),
                    found: v,
                    supported: SCHEMA_VERSION,
                });
            }
            0 => Some(PG_BASELINE),
            v => match usize::try_from(v - PG_BASELINE_VERSION)
                .ok()
                .and_then(|i| PG_STEPS.get(i))
            {
                Some(step) => Some(*step),
                None => {
                    let _ = conn.batch("ROLLBACK");
                    return Err(Error::Corrupt {
                        path: path.to_path_buf(),
                        what: "greenlight_schema.version",
                        found: v.to_string(),
                    });
                }
            },
        };
        let Some(step) = step else {
            conn.batch("COMMIT").map_err(open_err)?;
            return Ok(());
        };
        let next = if version == 0 {
            PG_BASELINE_VERSION
        } else {
            version + 1
        };
        let applied = conn.batch(step).and_then(|()| {
            conn.execute("DELETE FROM greenlight_schema", ())?;
            conn.execute(
                "INSERT INTO greenlight_schema (version) VALUES (?1)",
                [next],
            )?;
            conn.batch("COMMIT")
        });
        if let Err(source) = applied {
            let _ = conn.batch("ROLLBACK");
            return Err(Error::Migrate {
                path: path.to_path_buf(),
                version: next,
                source,
            });
        }
    }
}

/// The version a PostgreSQL store records (0: none yet).
fn pg_version(conn: Conn<'_>) -> Result<i64, crate::db::DbError> {
    use crate::db::OptionalExtension;
    conn.query_row("SELECT MAX(version) FROM greenlight_schema", (), |r| {
        r.get::<Option<i64>>(0)
    })
    .optional()
    .map(|v| v.flatten().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state file as a greenlight of schema `version` left it: that version's migrations
    /// applied, nothing after. The directory is returned so the file lives as long as the test.
    fn file_at_version(version: usize) -> (tempfile::TempDir, std::path::PathBuf, Connection) {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join(format!("v{version}.db"));
        let conn = Connection::open(&path).expect("open");
        for step in &MIGRATIONS[..version] {
            conn.execute_batch(step).expect("old step");
        }
        conn.pragma_update(None, "user_version", version as i64)
            .expect("version");
        (dir, path, conn)
    }

    /// A file written by a version-2 greenlight keeps its rows; the new columns read as NULL.
    #[test]
    fn a_version_2_file_migrates_to_the_current_version_with_its_rows_intact() {
        let (_dir, path, mut conn) = file_at_version(2);
        conn.execute_batch(
            "INSERT INTO goals (worktree, text, state, agent_family, max_turns, retries, \
             gate_timeout_sec, created_at, updated_at) VALUES (x'2f77', 'g', 'active', 'command', 3, 2, 300, 1, 1); \
             INSERT INTO gates (goal_id, position, command, created_at) VALUES (1, 1, 'make', 1); \
             INSERT INTO turns (goal_id, number, started_at) VALUES (1, 1, 1); \
             INSERT INTO dispatches (goal_id, turn, attempt, family, outcome, started_at) \
             VALUES (1, 1, 1, 'command', 'in-flight', 1);",
        )
        .expect("rows");
        migrate(&mut conn, &path).expect("migrate");
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .expect("version");
        assert_eq!(version, SCHEMA_VERSION);
        let row: (
            String,
            Option<u32>,
            Option<String>,
            Option<String>,
            Option<String>,
        ) = conn
            .query_row(
                "SELECT g.command, g.timeout_sec, g.mutex, d.reply, o.model_probed \
                 FROM gates g, dispatches d, goals o",
                (),
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .expect("row");
        assert_eq!(row, ("make".to_owned(), None, None, None, None));
    }

    /// A version-5 file (before the openai family) keeps its goals: no endpoint, no tool calls,
    /// and the new table takes rows for its dispatches.
    #[test]
    fn a_version_5_file_gains_the_endpoint_column_and_the_tool_call_table() {
        let (_dir, path, mut conn) = file_at_version(5);
        conn.execute_batch(
            "INSERT INTO goals (worktree, text, state, agent_family, max_turns, retries, \
             gate_timeout_sec, created_at, updated_at) VALUES (x'2f77', 'g', 'active', 'claude', 3, 2, 300, 1, 1); \
             INSERT INTO turns (goal_id, number, started_at) VALUES (1, 1, 1); \
             INSERT INTO dispatches (goal_id, turn, attempt, family, outcome, started_at) \
             VALUES (1, 1, 1, 'claude', 'in-flight', 1);",
        )
        .expect("rows");
        migrate(&mut conn, &path).expect("migrate");
        let endpoint: Option<String> = conn
            .query_row("SELECT agent_endpoint FROM goals", [], |r| r.get(0))
            .expect("row");
        assert_eq!(endpoint, None);
        conn.execute(
            "INSERT INTO tool_calls (dispatch_id, seq, step, call_id, tool, arguments, status, started_at) \
             VALUES (1, 1, 1, 'c', 'run', '{}', 'intent', 2)",
            (),
        )
        .expect("a tool call row");
        let bad = conn.execute(
            "INSERT INTO tool_calls (dispatch_id, seq, step, call_id, tool, arguments, status, started_at, ended_at) \
             VALUES (1, 2, 1, 'c', 'run', '{}', 'intent', 2, 3)",
            (),
        );
        assert!(bad.is_err(), "an intent has no end");
    }

    /// A version-6 file keeps its runs: they have no repository and no gate rows, the new
    /// table takes rows for them, and its checks refuse a verdict it does not know.
    #[test]
    fn a_version_6_file_gains_the_repository_column_and_the_run_gate_table() {
        let (_dir, path, mut conn) = file_at_version(6);
        conn.execute_batch(
            "INSERT INTO runs (kind, worktree, gates, result, exit_code, started_at, ended_at) \
             VALUES ('verify', x'2f77', 2, 'passed', 0, 1, 2);",
        )
        .expect("rows");
        migrate(&mut conn, &path).expect("migrate");
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .expect("version");
        assert_eq!(version, SCHEMA_VERSION);
        let (repository, rows): (Option<Vec<u8>>, i64) = conn
            .query_row(
                "SELECT repository, (SELECT COUNT(*) FROM run_gates) FROM runs",
                (),
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("row");
        assert_eq!((repository, rows), (None, 0));
        conn.execute(
            "INSERT INTO run_gates (run_id, gate, verdict, exit_code, duration_ms, attempts, \
             decided_at) VALUES (1, 'unit', 'flaky', 0, 40, 2, 2)",
            (),
        )
        .expect("a gate row");
        let cached: i64 = conn
            .query_row("SELECT cached FROM run_gates", [], |r| r.get(0))
            .expect("cached");
        assert_eq!(cached, 0, "cached defaults to 0");
        for bad in [
            // a verdict outside the closed list
            "(1, 'lint', 'passed', 0, 1, 1, 2)",
            // a gate recorded twice in one run
            "(1, 'unit', 'pass', 0, 1, 1, 2)",
            // a duration with no attempt
            "(1, 'skip-me', 'skip', NULL, 5, 0, 2)",
            // a run that does not exist
            "(9, 'other', 'pass', 0, 1, 1, 2)",
        ] {
            conn.pragma_update(None, "foreign_keys", true).expect("fk");
            let refused = conn.execute(
                &format!(
                    "INSERT INTO run_gates (run_id, gate, verdict, exit_code, duration_ms, \
                     attempts, decided_at) VALUES {bad}"
                ),
                (),
            );
            assert!(refused.is_err(), "{bad} must be refused");
        }
    }

    /// A version-8 file's gate rows gain their run's repository and worktree, so history reads
    /// them from the new indexes; its open runs have no owner and are never judged.
    #[test]
    fn a_version_8_file_copies_each_runs_scope_onto_its_gate_rows() {
        let (_dir, path, mut conn) = file_at_version(8);
        conn.execute_batch(
            "INSERT INTO runs (kind, worktree, gates, started_at, repository) \
             VALUES ('verify', x'2f77', 1, 1, x'2f72');
             INSERT INTO run_gates (run_id, gate, verdict, exit_code, duration_ms, attempts, \
             decided_at) VALUES (1, 'unit', 'pass', 0, 40, 1, 2);",
        )
        .expect("rows");
        migrate(&mut conn, &path).expect("migrate");
        let copied: (Vec<u8>, Vec<u8>, Option<i64>) = conn
            .query_row(
                "SELECT g.repository, g.worktree, r.owner_pid FROM run_gates g \
                 JOIN runs r ON r.id = g.run_id",
                (),
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .expect("row");
        assert_eq!(copied, (b"/r".to_vec(), b"/w".to_vec(), None));
    }

    /// A version-10 file keeps every gate row (ids, scope and figures) through the rebuild of
    /// `run_gates`: the old rows have no telemetry and belong to their run; the new table takes
    /// a goal's row and refuses a row that is both a run's and a goal's, or a class it does not
    /// know.
    #[test]
    fn a_version_10_file_keeps_its_gate_rows_and_gains_telemetry_and_goal_rows() {
        let (_dir, path, mut conn) = file_at_version(10);
        conn.execute_batch(
            "INSERT INTO runs (kind, worktree, gates, started_at, repository) \
             VALUES ('verify', x'2f77', 2, 1, x'2f72');
             INSERT INTO run_gates (run_id, gate, verdict, exit_code, duration_ms, attempts, \
             cached, decided_at, repository, worktree) VALUES \
             (1, 'unit', 'fail', 1, 40, 1, 0, 2, x'2f72', x'2f77'), \
             (1, 'lint', 'skip', NULL, NULL, 0, 0, 3, x'2f72', x'2f77');
             INSERT INTO goals (worktree, text, state, agent_family, max_turns, retries, \
             gate_timeout_sec, created_at, updated_at) VALUES (x'2f77', 'g', 'active', 'command', 3, 2, 300, 1, 1);",
        )
        .expect("rows");
        conn.pragma_update(None, "foreign_keys", true).expect("fk");
        migrate(&mut conn, &path).expect("migrate");
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .expect("version");
        assert_eq!(version, SCHEMA_VERSION);
        // id, run, gate, duration, classification, worktree
        type Kept = (i64, i64, String, Option<i64>, Option<String>, Vec<u8>);
        let rows: Vec<Kept> = conn
            .prepare(
                "SELECT id, run_id, gate, duration_ms, digest_class, worktree FROM run_gates \
                 WHERE goal_id IS NULL ORDER BY id",
            )
            .expect("prepare")
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            })
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        assert_eq!(
            rows,
            [
                (1, 1, "unit".to_owned(), Some(40), None, b"/w".to_vec()),
                (2, 1, "lint".to_owned(), None, None, b"/w".to_vec()),
            ]
        );
        let fk: i64 = conn
            .query_row("SELECT COUNT(*) FROM pragma_foreign_key_check", [], |r| {
                r.get(0)
            })
            .expect("fk check");
        assert_eq!(fk, 0, "every row still refers to its run");
        conn.execute(
            "INSERT INTO run_gates (goal_id, turn, gate, verdict, exit_code, duration_ms, \
             attempts, decided_at, digest_class, digest_format, digest_reasons) \
             VALUES (1, 1, 'unit', 'pass', 0, 30, 1, 4, 'partial', 'pytest', 'no-summary')",
            (),
        )
        .expect("a goal's row with telemetry");
        for bad in [
            // both a run's and a goal's
            "(1, 1, 1, 'both', 'pass', 0, 1, 1, 5, NULL, NULL, NULL)",
            // neither
            "(NULL, NULL, NULL, 'none', 'pass', 0, 1, 1, 5, NULL, NULL, NULL)",
            // a class the digest does not have
            "(NULL, 1, 1, 'odd', 'pass', 0, 1, 1, 5, 'exact', NULL, '')",
            // a class without its reasons
            "(NULL, 1, 1, 'half', 'pass', 0, 1, 1, 5, 'partial', 'pytest', NULL)",
            // reasons that are not words (output pasted in)
            "(NULL, 1, 1, 'text', 'fail', 1, 1, 1, 5, 'partial', 'pytest', 'FAILED test_a.py')",
            // a format without a classification
            "(NULL, 1, 1, 'fmt', 'fail', 1, 1, 1, 5, NULL, 'pytest', NULL)",
        ] {
            let refused = conn.execute(
                &format!(
                    "INSERT INTO run_gates (run_id, goal_id, turn, gate, verdict, exit_code, \
                     duration_ms, attempts, decided_at, digest_class, digest_format, \
                     digest_reasons) VALUES {bad}"
                ),
                (),
            );
            assert!(refused.is_err(), "{bad} must be refused");
        }
    }

    /// A version-11 file keeps its goals and runs and gains the empty workflow tables, whose
    /// checks refuse what a workflow run cannot be: an ended status without its end, a pause
    /// without its reason, an event that is not JSON, a settled dispatch still "in flight", a
    /// kept worktree without its why.
    #[test]
    fn a_version_11_file_gains_the_workflow_tables_and_their_checks() {
        let (_dir, path, mut conn) = file_at_version(11);
        conn.execute_batch(
            "INSERT INTO runs (kind, worktree, gates, started_at) VALUES ('verify', x'2f77', 1, 1);",
        )
        .expect("rows");
        migrate(&mut conn, &path).expect("migrate");
        let (version, runs, workflows): (i64, i64, i64) = conn
            .query_row(
                "SELECT (SELECT user_version FROM pragma_user_version),                  (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM workflow_runs)",
                (),
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .expect("counts");
        assert_eq!((version, runs, workflows), (SCHEMA_VERSION, 1, 0));
        conn.pragma_update(None, "foreign_keys", true).expect("fk");
        let run = |status: &str, reason: &str, ended: &str| {
            format!(
                "INSERT INTO workflow_runs (name, plan_path, repository, worktree, base_commit,                  plan_digest, args_hash, plan_json, args_json, status, detail_reason,                  started_at, updated_at, ended_at) VALUES ('p', x'70', x'72', x'77', 'c', 'd',                  'h', '{{}}', '{{}}', '{status}', {reason}, 1, 1, {ended})"
            )
        };
        conn.execute(&run("running", "NULL", "NULL"), [])
            .expect("a running run");
        for bad in [
            run("completed", "NULL", "NULL"),
            run("running", "NULL", "5"),
            run("paused", "NULL", "NULL"),
            run("paused", "'Budget Gone'", "NULL"),
            run("stopped", "NULL", "NULL"),
            "INSERT INTO workflow_events (run_id, seq, event, at) VALUES (1, 1, 'not json', 1)"
                .into(),
            "INSERT INTO workflow_events (run_id, seq, event, at) VALUES (9, 1, '{}', 1)".into(),
            "INSERT INTO workflow_dispatches (run_id, step, attempt, family, started_at, ended_at,              outcome) VALUES (1, 's', 1, 'command', 1, 2, 'in-flight')"
                .into(),
            "INSERT INTO workflow_members (run_id, step, branch, worktree, state, created_at,              updated_at) VALUES (1, 's', 'b', x'77', 'kept', 1, 1)"
                .into(),
        ] {
            assert!(conn.execute(&bad, []).is_err(), "{bad} must be refused");
        }
    }
    /// A version-13 queue keeps its items, labels and claims through the rebuild; the rebuilt
    /// tables still refuse a label or claim of no item, and take a workflow item.
    #[test]
    fn a_version_13_queue_keeps_its_rows_and_takes_workflow_items() {
        let (_dir, path, mut conn) = file_at_version(13);
        conn.execute_batch(
            "INSERT INTO queue_items (kind, repository, base, spec, state, lease_owner, \
             lease_epoch, lease_until, submitted_at) \
             VALUES ('goal', '/r', 'abc', '{}', 'claimed', 'w1', 1, 99, 5); \
             INSERT INTO queue_labels (item_id, label) VALUES (1, 'gpu'); \
             INSERT INTO queue_claims (item_id, epoch, worker, claimed_at) VALUES (1, 1, 'w1', 6);",
        )
        .expect("rows");
        migrate(&mut conn, &path).expect("migrate");
        // The kind's checks, without keys (so a refusal here is the check's).
        for bad in [
            "UPDATE queue_items SET workflow_run = 1 WHERE kind = 'goal'",
            "INSERT INTO queue_items (kind, repository, base, spec, state, goal_id, \
             submitted_at) VALUES ('workflow', '/r', 'abc', '{}', 'queued', 1, 7)",
        ] {
            assert!(conn.execute(bad, []).is_err(), "{bad} must be refused");
        }
        conn.pragma_update(None, "foreign_keys", true).expect("fk");
        let kept: (String, String, i64, String, String) = conn
            .query_row(
                "SELECT q.kind, q.lease_owner, q.lease_until, l.label, c.worker \
                 FROM queue_items q JOIN queue_labels l ON l.item_id = q.id \
                 JOIN queue_claims c ON c.item_id = q.id",
                (),
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .expect("the rows kept");
        assert_eq!(
            kept,
            ("goal".into(), "w1".into(), 99, "gpu".into(), "w1".into())
        );
        conn.execute(
            "INSERT INTO queue_items (kind, repository, base, spec, state, submitted_at) \
             VALUES ('workflow', '/r', 'abc', '{}', 'queued', 7)",
            [],
        )
        .expect("a workflow item");
        let id: i64 = conn
            .query_row("SELECT MAX(id) FROM queue_items", (), |r| r.get(0))
            .expect("id");
        assert_eq!(id, 2, "ids go on from the old table's");
        for bad in [
            "INSERT INTO queue_labels (item_id, label) VALUES (9, 'x')",
            "INSERT INTO queue_claims (item_id, epoch, worker, claimed_at) VALUES (9, 1, 'w', 1)",
            "INSERT INTO queue_items (kind, repository, base, spec, state, submitted_at) \
             VALUES ('build', '/r', 'abc', '{}', 'queued', 7)",
        ] {
            assert!(conn.execute(bad, []).is_err(), "{bad} must be refused");
        }
    }
}
