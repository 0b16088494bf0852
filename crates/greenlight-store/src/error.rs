//! The store's one error type: every variant names the input at fault and the way out.

use std::path::PathBuf;

use crate::db::DbError;
use crate::model::{DispatchId, DispatchOutcome, GateVerdict, GoalId, GoalState};

/// Everything that can go wrong opening or changing the state database.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No override and no home directory to derive the default path from.
    #[error(
        "cannot choose a state database: none of GREENLIGHT_STATE, XDG_STATE_HOME or HOME is set; \
         pass --state PATH or set GREENLIGHT_STATE"
    )]
    NoStatePath,

    /// The directory that should hold the database could not be created.
    #[error(
        "cannot create {path} for the state database: {source}; pass --state PATH to put it elsewhere"
    )]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },

    /// A worker's lease on a queue item is gone: another worker claimed it after the lease
    /// ran out, or it ended. Nothing was written.
    #[error(
        "queue item {item} is no longer this worker's (its lease ran out and another worker \
         took it, or it ended); this worker stops working on it and wrote nothing more"
    )]
    LeaseLost {
        /// The item.
        item: i64,
    },

    /// A queue label that is empty or holds other characters than letters, digits and `-_.:=`.
    #[error(
        "label `{label}` cannot be used: a label is letters, digits and `-_.:=`, e.g. gpu or os=linux"
    )]
    BadLabel {
        /// The label as given.
        label: String,
    },

    /// A PostgreSQL store URL that cannot be used as given.
    #[error("the store URL {shown} cannot be used: {why}")]
    StoreUrl {
        /// The URL without its password.
        shown: String,
        /// What is wrong and how to fix it.
        why: String,
    },

    /// SQLite refused to open the file or to apply the connection settings.
    #[error(
        "cannot open the state database {path}: {source}; {}",
        sql_advice(source)
    )]
    Open {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        source: DbError,
    },

    /// Opening failed, and the file system holding the database has no room: SQLite reports a
    /// write that fails for want of space while opening as an I/O error, so the store checks.
    #[error(
        "cannot open the state database {path}: {source}; the disk holding it is full (ENOSPC: \
         nothing more can be written in {dir}); free space there and run the command again, or \
         pass --state PATH on another disk"
    )]
    DiskFull {
        /// The database file.
        path: PathBuf,
        /// Its directory, where the check failed.
        dir: PathBuf,
        /// What SQLite said.
        source: DbError,
    },

    /// The file was written by a newer greenlight whose schema this binary does not know.
    #[error(
        "the state database {path} has schema version {found}, newer than the {supported} this \
         greenlight understands; upgrade greenlight, or pass --state PATH to use another database"
    )]
    SchemaTooNew {
        /// The database file.
        path: PathBuf,
        /// `PRAGMA user_version` found in the file.
        found: i64,
        /// The newest version this binary can migrate to.
        supported: i64,
    },

    /// A migration step failed; the transaction was rolled back and the file is unchanged.
    #[error(
        "cannot migrate the state database {path} to schema version {version}: {source}; \
         the file is unchanged"
    )]
    Migrate {
        /// The database file.
        path: PathBuf,
        /// The version the failed step would have produced.
        version: i64,
        /// What SQLite said.
        source: DbError,
    },

    /// Any other SQLite failure while reading or writing.
    #[error("state database {path}: {source}; {}", sql_advice(source))]
    Sql {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        source: DbError,
    },

    /// `finish_run` on a run that is unknown or already ended.
    #[error("run {run} is unknown or already ended; a run is finished exactly once")]
    RunNotOpen {
        /// The run id.
        run: i64,
    },
    /// A gate row for a run that is not in the file (pruned, or never begun here).
    #[error("run {run} is not in this state file; begin the run before recording its gates")]
    UnknownRun {
        /// The run id.
        run: i64,
    },

    /// A value stored in the database is not one this binary can read back.
    #[error(
        "state database {path}: {what} holds `{found}`, which this greenlight does not know; \
         the file was changed by hand or by another version"
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// Table and column.
        what: &'static str,
        /// The stored value.
        found: String,
    },

    /// The worktree given for a new goal could not be resolved to a canonical path.
    #[error("worktree {path} cannot be resolved: {source}; pass an existing directory")]
    Worktree {
        /// The path as given.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },

    /// The worktree already has a goal that is active or paused.
    #[error(
        "worktree {worktree} already has goal #{existing} ({state}); resume it with \
         `greenlight goal resume` or end it with `greenlight goal clear` before starting another"
    )]
    GoalAlreadyLive {
        /// The canonical worktree path.
        worktree: PathBuf,
        /// The goal that holds the worktree.
        existing: GoalId,
        /// Its state (active or paused).
        state: GoalState,
    },

    /// No goal has this id.
    #[error("goal #{0} does not exist in the state database; `greenlight goal status` lists goals")]
    NoSuchGoal(GoalId),

    /// The goal's state does not allow the requested transition.
    #[error("goal #{goal} is {from}, so it cannot be {action}")]
    InvalidTransition {
        /// The goal.
        goal: GoalId,
        /// Its current state.
        from: GoalState,
        /// What was asked, as a past participle ("paused", "resumed", …).
        action: &'static str,
    },

    /// `gate remove N` named a gate that is not there.
    #[error(
        "goal #{goal} has no gate {n}: it has {live} gate(s), numbered from 1 by \
         `greenlight goal gate list`"
    )]
    NoSuchGate {
        /// The goal.
        goal: GoalId,
        /// The 1-based number asked for.
        n: usize,
        /// How many live gates there are.
        live: usize,
    },

    /// Removing this gate (or all of them) would leave a goal that is not done without gates.
    #[error(
        "goal #{goal} must keep at least one gate: with none, nothing could say it is done; \
         add the replacement first (`greenlight goal gate add CMD`), or end the goal with \
         `greenlight goal clear`"
    )]
    LastGate {
        /// The goal.
        goal: GoalId,
    },

    /// A gate command that is empty or only whitespace (`sh -c ''` exits 0 without judging).
    #[error(
        "goal #{goal}: a gate command must not be empty or only whitespace (an unset $VAR?); \
         give the shell command that judges the work"
    )]
    EmptyGateCommand {
        /// The goal.
        goal: GoalId,
    },

    /// A gate id that does not belong to the goal, or was removed.
    #[error(
        "gate id {gate} is not a live gate of goal #{goal}; `greenlight goal gate list` shows them"
    )]
    GateNotLive {
        /// The goal.
        goal: GoalId,
        /// The gate id.
        gate: i64,
    },

    /// A goal's gate run was given a verdict only verify reaches (`flaky`, `skip`).
    #[error(
        "goal #{goal}: a goal's gate run is recorded as pass, fail or timeout, not `{verdict}`; \
         a goal runs each gate once per phase, so judge the run by its exit code"
    )]
    VerdictNotForGoal {
        /// The goal.
        goal: GoalId,
        /// The verdict that was refused.
        verdict: GateVerdict,
    },

    /// The turn does not exist, or is already ended.
    #[error("goal #{goal} has no open turn {turn}; a turn is ended exactly once")]
    NoOpenTurn {
        /// The goal.
        goal: GoalId,
        /// The turn number.
        turn: u32,
    },

    /// The turn budget is spent; the caller should pause the goal instead.
    #[error(
        "goal #{goal} has used its {max_turns} turns; pause it with reason turn-budget and resume \
         with `greenlight goal resume`"
    )]
    TurnBudgetSpent {
        /// The goal.
        goal: GoalId,
        /// The budget.
        max_turns: u32,
    },

    /// A dispatch row that does not exist.
    #[error("dispatch #{0} does not exist in the ledger")]
    NoSuchDispatch(DispatchId),

    /// A tool call recorded for a dispatch that is not in flight.
    #[error(
        "dispatch #{id} is {outcome}, so no tool call can be recorded for it; tool calls are recorded while their dispatch runs"
    )]
    ToolCallOutsideDispatch {
        /// The ledger row.
        id: DispatchId,
        /// Its recorded outcome.
        outcome: DispatchOutcome,
    },

    /// A tool call that is not (or no longer) an intent.
    #[error(
        "tool call {seq} of dispatch #{dispatch} is not an open intent; a tool call is completed exactly once, after its intent"
    )]
    ToolCallNotOpen {
        /// The dispatch.
        dispatch: DispatchId,
        /// The call's position.
        seq: u32,
    },

    /// A tool call completed as `intent`.
    #[error(
        "tool call {seq} of dispatch #{dispatch} cannot be completed as an intent; give ok, error, refused or violation"
    )]
    ToolCallFinishedAsIntent {
        /// The dispatch.
        dispatch: DispatchId,
        /// The call's position.
        seq: u32,
    },

    /// A dispatch is completed exactly once.
    #[error("dispatch #{id} is already {outcome}; a ledger row is completed exactly once")]
    DispatchNotInFlight {
        /// The ledger row.
        id: DispatchId,
        /// Its recorded outcome.
        outcome: DispatchOutcome,
    },

    /// `finish_dispatch` was given `in-flight` as the final outcome.
    #[error("dispatch #{0} cannot be finished as in-flight; give ok, null, error or interrupted")]
    FinishInFlight(DispatchId),

    /// A reason or outcome name that is not kebab-case.
    #[error(
        "{what} `{found}` must be kebab-case: lowercase ASCII letters and digits joined by single hyphens"
    )]
    NotKebabCase {
        /// Which name.
        what: &'static str,
        /// The value given.
        found: String,
    },

    /// A workflow run id that is not in this state file.
    #[error(
        "no workflow run {run} in this state file; `greenlight workflow list` shows the runs it \
         holds"
    )]
    NoSuchWorkflowRun {
        /// The workflow run id.
        run: i64,
    },

    /// A new workflow run asked for an id that another run already has.
    #[error("workflow run {run} already exists; pick another `--run-id` or resume it")]
    WorkflowRunExists {
        /// The workflow run id.
        run: i64,
    },

    /// A change that needs a running (or resumable) workflow run, on one that is not.
    #[error("workflow run {run} is {status}, so it cannot be {change}")]
    WorkflowRunNotOpen {
        /// The workflow run id.
        run: i64,
        /// Where it stands.
        status: greenlight_types::WorkflowStatus,
        /// What was asked (`paused`, `resumed`, `dispatched to`, …).
        change: &'static str,
    },

    /// A failed or terminal end with no reason given.
    #[error("workflow run {run} cannot end as {status} without a reason; name the reason")]
    WorkflowEndWithoutReason {
        /// The workflow run id.
        run: i64,
        /// The end asked for.
        status: greenlight_types::WorkflowStatus,
    },

    /// A resume of a workflow run another live process is driving.
    #[error(
        "workflow run {run} is running in process {pid} on this or another machine; wait for \
         it, or `greenlight workflow pause {run}` and resume it once it has paused"
    )]
    WorkflowRunOwned {
        /// The workflow run id.
        run: i64,
        /// The owner's pid.
        pid: i64,
    },

    /// A workflow dispatch finished twice, or one that is not in the file.
    #[error("workflow dispatch {dispatch} is unknown or already settled; a dispatch settles once")]
    WorkflowDispatchNotInFlight {
        /// The dispatch's row id.
        dispatch: i64,
    },

    /// A member worktree the run has no row for.
    #[error("workflow run {run} has no member worktree for step `{step}`{}; add it first", item.as_deref().map(|i| format!(" item `{i}`")).unwrap_or_default())]
    NoSuchWorkflowMember {
        /// The workflow run id.
        run: i64,
        /// The step.
        step: String,
        /// The item key.
        item: Option<String>,
    },

    /// Text that should be JSON is not.
    #[error("{what} is not JSON text: {source}")]
    NotJson {
        /// Which value.
        what: &'static str,
        /// What serde_json said.
        source: serde_json::Error,
    },

    /// An event payload or digest that could not be turned into JSON text.
    #[error("{what} cannot be stored as JSON: {source}")]
    Json {
        /// Which value.
        what: &'static str,
        /// What serde_json said.
        source: serde_json::Error,
    },
}

/// What to do about a SQLite failure, by its kind.
fn sql_advice(source: &DbError) -> &'static str {
    use rusqlite::ErrorCode as C;
    if let DbError::Postgres(_) = source {
        return pg_advice(source);
    }
    match sqlite_code(source) {
        Some(C::DatabaseCorrupt | C::NotADatabase) => {
            "the file is damaged; move it (and its -wal and -shm files) aside to start a new \
             state database, or pass --state PATH to use another one"
        }
        Some(C::DiskFull) => {
            "the disk is full (SQLITE_FULL: no space left for the database or its journal); \
             free space, then run the command again"
        }
        Some(C::ReadOnly | C::PermissionDenied | C::CannotOpen) => {
            "the file or its directory is not writable; fix its permissions or pass --state PATH"
        }
        Some(C::DatabaseBusy | C::DatabaseLocked) => {
            "another greenlight held the database too long; run the command again"
        }
        _ => {
            "check the file is a greenlight state database you can write, or pass --state PATH \
             to use another one"
        }
    }
}

fn pg_advice(source: &DbError) -> &'static str {
    if source.to_string().contains("password missing") {
        return "the server asks for a password and the URL gives none: add it to the URL, or \
                name a file holding it with ?password_file=PATH";
    }
    if source.pg_unreachable() {
        return "PostgreSQL cannot be reached: check the server is up and the URL's host, port, \
                user, password and sslmode, then run the command again (workers retry every \
                few seconds and claim nothing until it answers)";
    }
    match source.pg_code() {
        Some("28P01" | "28000") => {
            "PostgreSQL refused the credentials: fix the user or password in the URL (or the \
             file its password_file names)"
        }
        Some("3D000") => {
            "the database in the URL does not exist: create it (`createdb NAME`) or name another"
        }
        Some("42501") => "the user lacks a privilege the store needs on this database: grant it",
        Some("55P03" | "57014") => {
            "another greenlight held the store's write lock too long; run the command again"
        }
        Some("53100") => "the database server's disk is full: free space there, then run again",
        _ => "check the URL names a greenlight store you can write (`greenlight store check`)",
    }
}

fn sqlite_code(source: &DbError) -> Option<rusqlite::ErrorCode> {
    match source {
        DbError::Sqlite(e) => e.sqlite_error_code(),
        _ => None,
    }
}

const SPACE_PROBE_BYTES: usize = 64 * 1024;

/// Whether `dir` has no room left: a probe file is written there (and removed) and the write
/// fails with ENOSPC. Only asked after opening failed, so it costs nothing when all is well.
fn out_of_space(dir: &std::path::Path) -> bool {
    use std::io::Write as _;
    let probe = dir.join(format!(".greenlight-space-probe-{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|mut file| {
            file.write_all(&[0; SPACE_PROBE_BYTES])?;
            file.sync_all()
        });
    let _ = std::fs::remove_file(&probe);
    matches!(written, Err(e) if e.kind() == std::io::ErrorKind::StorageFull)
}

impl Error {
    /// An error from opening `path` becomes [`Error::DiskFull`] when SQLite's failure was one a
    /// full disk causes (an I/O error, "full", "cannot open") and the directory indeed has no
    /// room: otherwise a full disk read "disk I/O error … check the file is a greenlight state
    /// database", and only a write later in the run said the disk was full.
    pub(crate) fn on_open(self, path: &std::path::Path) -> Self {
        use rusqlite::ErrorCode as C;
        let (Error::Open { source, .. } | Error::Migrate { source, .. }) = &self else {
            return self;
        };
        let could_be_space = matches!(
            sqlite_code(source),
            Some(C::SystemIoFailure | C::DiskFull | C::CannotOpen)
        );
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !could_be_space || !out_of_space(&dir) {
            return self;
        }
        match self {
            Error::Open { path, source } | Error::Migrate { path, source, .. } => {
                Error::DiskFull { path, dir, source }
            }
            other => other,
        }
    }

    /// SQLite answered "busy" or "locked": another connection holds the lock right now.
    pub(crate) fn is_busy(&self) -> bool {
        let source = match self {
            Error::Open { source, .. }
            | Error::Migrate { source, .. }
            | Error::Sql { source, .. } => source,
            _ => return false,
        };
        matches!(
            sqlite_code(source),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    }

    pub(crate) fn sql(path: &std::path::Path, source: impl Into<DbError>) -> Self {
        Error::Sql {
            path: path.to_path_buf(),
            source: source.into(),
        }
    }
}
