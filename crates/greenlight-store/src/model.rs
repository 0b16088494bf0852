//! The values the store hands out and takes in: plain data, no database handles.
//!
//! Every closed set of names is an enum whose text form (`as_str` written, `from_name` read) is
//! exactly what the database holds: the domain's words (goal states, gate verdicts, dispatch
//! outcomes, agent families) come from `greenlight-types`, the store's own (dispatch steps, tool
//! call states) are declared here. Open vocabularies owned by the goal loop (pause reasons, turn
//! outcomes, dispatch reasons) are kebab-case strings checked on the way in.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

pub use greenlight_types::{DispatchOutcome, Family, GateVerdict, GoalState};

/// Milliseconds since the Unix epoch, UTC.
pub type Millis = i64;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

id_type!(
    /// A goal's row id; never reused, so an id in an old log still names one goal.
    GoalId
);
id_type!(
    /// A gate's row id (stable across removals, unlike its 1-based number).
    GateId
);
id_type!(
    /// A dispatch ledger row id.
    DispatchId
);
id_type!(
    /// A gate run row id.
    GateRunId
);

macro_rules! name_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// The name as stored and shown.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// The value named `text`, if it is one.
            pub fn from_name(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

name_enum!(
    /// What a dispatch was for.
    DispatchStep {
        /// An agent turn (the work).
        Agent = "agent",
        /// The judge's question after every gate passed.
        Judge = "judge",
    }
);

name_enum!(
    /// How the digest read a gate's output (`run_gates.digest_class`), in the digest's own
    /// words; history calls them exact, partial and raw.
    DigestClass {
        /// Read completely: its compact form stands in for the output ("exact").
        Recognised = "recognised",
        /// A known format, read in part: the evidence names what was parsed, then the tail
        /// ("partial").
        Partial = "partial",
        /// No known format: the evidence is the output's tail ("raw").
        Unrecognised = "unrecognised",
    }
);

/// Which agent runtime a goal drives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default, schemars::JsonSchema)]
pub struct AgentSpec {
    /// `claude`, `codex`, `command` or `openai`.
    pub family: Family,
    /// The model id, when one was chosen.
    pub model: Option<String>,
    /// The argv template of the `command` family.
    pub argv_template: Option<Vec<String>>,
    /// The server of the `openai` family.
    pub endpoint: Option<AgentEndpoint>,
}

/// Where an `openai` goal's model is served. Never the API key: only the name of the variable
/// it is read from when the goal runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AgentEndpoint {
    /// The server's base URL (`http://127.0.0.1:8080/v1`).
    pub base_url: String,
    /// The environment variable holding the API key.
    pub api_key_env: String,
    /// `native`, `tags` or `auto`.
    pub tool_format: String,
}

name_enum!(
    /// Where a recorded tool call stands.
    ToolCallStatus {
        /// Written before the call had any effect; never left this way by a finished call.
        Intent = "intent",
        /// It ran and returned its result.
        Ok = "ok",
        /// It ran, or tried to, and failed; the model was told why.
        Error = "error",
        /// Refused before any effect (a path outside the worktree, bad arguments).
        Refused = "refused",
        /// The model's call could not be read; nothing ran.
        Violation = "violation",
        /// Its dispatch was cut short (a crash, found on resume): whether it had its effect is
        /// unknown.
        Interrupted = "interrupted",
    }
);

/// A tool call about to run.
#[derive(Debug, Clone)]
pub struct NewToolCall {
    /// The dispatch it belongs to (must be in flight).
    pub dispatch: DispatchId,
    /// 1-based position among the dispatch's calls.
    pub seq: u32,
    /// The model request that produced it.
    pub step: u32,
    /// The model's id for it.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments as JSON text (or the raw text of an unreadable call).
    pub arguments: String,
}

/// A recorded tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ToolCallRecord {
    /// The dispatch.
    pub dispatch: DispatchId,
    /// 1-based position among the dispatch's calls.
    pub seq: u32,
    /// The model request that produced it.
    pub step: u32,
    /// The model's id for it.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments as JSON text.
    pub arguments: String,
    /// Where it stands.
    pub status: ToolCallStatus,
    /// What the model was sent.
    pub result: Option<String>,
    /// Wall time of the call.
    pub wall_ms: Option<u64>,
    /// When the intent was recorded.
    pub started_at: Millis,
    /// When it ended.
    pub ended_at: Option<Millis>,
}

/// Everything needed to create a goal.
#[derive(Debug, Clone)]
pub struct NewGoal {
    /// The worktree; it must exist, and is stored canonicalised.
    pub worktree: PathBuf,
    /// The goal as the user wrote it.
    pub text: String,
    /// The agent runtime.
    pub agent: AgentSpec,
    /// The judge model id; `None` means no judge.
    pub judge: Option<String>,
    /// The turn budget.
    pub max_turns: u32,
    /// Consecutive failures a gate may have before the goal pauses.
    pub retries: u32,
    /// Per-gate timeout.
    pub gate_timeout_sec: u32,
    /// The gates, in order.
    pub gates: Vec<NewGate>,
}

/// A gate to create: its command, and optionally its own time limit and machine-wide mutex.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewGate {
    /// The shell command.
    pub command: String,
    /// Its time limit in seconds; `None` = the goal's `gate_timeout_sec`.
    pub timeout_sec: Option<u32>,
    /// The name of the machine-wide lock it runs under (verify.yaml's `mutex`).
    pub mutex: Option<String>,
}

impl From<&str> for NewGate {
    fn from(command: &str) -> Self {
        NewGate {
            command: command.to_owned(),
            ..NewGate::default()
        }
    }
}

impl From<String> for NewGate {
    fn from(command: String) -> Self {
        NewGate {
            command,
            ..NewGate::default()
        }
    }
}

/// Why a goal is paused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Pause {
    /// A kebab-case reason name (the goal loop owns the list).
    pub reason: String,
    /// What happened and what to do, for people.
    pub detail: Option<String>,
}

/// A goal as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Goal {
    /// Row id.
    pub id: GoalId,
    /// Canonical worktree path.
    #[serde(serialize_with = "crate::model::lossy_path")]
    pub worktree: PathBuf,
    /// The goal text.
    pub text: String,
    /// Current state.
    pub state: GoalState,
    /// Set exactly when `state` is paused.
    pub pause: Option<Pause>,
    /// The agent runtime.
    pub agent: AgentSpec,
    /// The judge model id, if any.
    pub judge: Option<String>,
    /// The turn budget.
    pub max_turns: u32,
    /// The retry bound per gate.
    pub retries: u32,
    /// Per-gate timeout in seconds (for gates without their own).
    pub gate_timeout_sec: u32,
    /// The model id the start-of-goal probe found answering; `None` until probed (and for the
    /// command family, whose programs are not chat models and are not probed).
    pub model_probed: Option<String>,
    /// Turns started since creation or the last resume.
    pub turns_used: u32,
    /// Creation time.
    pub created_at: Millis,
    /// Time of the last change to this row.
    pub updated_at: Millis,
}

/// The last recorded result of a gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct LastResult {
    /// The verdict.
    pub verdict: GateVerdict,
    /// The exit code, when the process exited (none when killed).
    pub exit_code: Option<i32>,
    /// The workspace key it ran against; `None` = unknown.
    pub workspace_key: Option<String>,
    /// The evidence text given to the agent.
    pub evidence: Option<String>,
    /// When it was recorded.
    pub at: Millis,
}

/// A gate of a goal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Gate {
    /// Row id.
    pub id: GateId,
    /// The goal it belongs to.
    pub goal: GoalId,
    /// 1-based number among the goal's live gates (what `gate remove N` takes); `None` once
    /// removed.
    pub number: Option<usize>,
    /// The shell command.
    pub command: String,
    /// Its own time limit in seconds; `None` = the goal's `gate_timeout_sec`.
    pub timeout_sec: Option<u32>,
    /// The machine-wide lock it runs under, if any.
    pub mutex: Option<String>,
    /// Consecutive failures; a pass resets it to 0.
    pub attempts: u32,
    /// The last recorded run, if any.
    pub last: Option<LastResult>,
    /// Soft-deleted (kept for audit).
    pub removed: bool,
}

/// One turn of a goal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Turn {
    /// The goal.
    pub goal: GoalId,
    /// 1-based, increasing for the goal's whole life (resume does not restart it).
    pub number: u32,
    /// Start time.
    pub started_at: Millis,
    /// End time; `None` while open.
    pub ended_at: Option<Millis>,
    /// Kebab-case outcome name, set when ended.
    pub outcome: Option<String>,
}

/// A gate run to record.
#[derive(Debug, Clone)]
pub struct NewGateRun {
    /// The goal.
    pub goal: GoalId,
    /// The gate (must be live).
    pub gate: GateId,
    /// The turn it ran after, if any.
    pub turn: Option<u32>,
    /// What it decided.
    pub verdict: GateVerdict,
    /// The exit code, if the process exited.
    pub exit_code: Option<i32>,
    /// Wall time (0 for a replay).
    pub duration_ms: u64,
    /// The workspace key; `None` = unknown.
    pub workspace_key: Option<String>,
    /// True when this is the recorded result reused because the key was unchanged.
    pub replayed: bool,
    /// The compact digest, when the output was recognised.
    pub digest: Option<serde_json::Value>,
    /// The evidence text given to the agent.
    pub evidence: Option<String>,
}

/// A gate run as stored.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct GateRun {
    /// Row id.
    pub id: GateRunId,
    /// The goal.
    pub goal: GoalId,
    /// The gate.
    pub gate: GateId,
    /// The turn, if any.
    pub turn: Option<u32>,
    /// The gate's consecutive-failure count after this run (0 after a pass).
    pub attempt: u32,
    /// What it decided.
    pub verdict: GateVerdict,
    /// The exit code, if any.
    pub exit_code: Option<i32>,
    /// Wall time.
    pub duration_ms: u64,
    /// The workspace key; `None` = unknown.
    pub workspace_key: Option<String>,
    /// Reused result.
    pub replayed: bool,
    /// Compact digest.
    pub digest: Option<serde_json::Value>,
    /// Evidence text.
    pub evidence: Option<String>,
    /// When it was recorded.
    pub at: Millis,
}

/// Token and cost figures as the runtime reported them; every field is `None` when not
/// reported (never 0, never estimated).
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Tokens {
    /// Input tokens.
    pub input: Option<u64>,
    /// Output tokens.
    pub output: Option<u64>,
    /// Cache-read input tokens.
    pub cache_read: Option<u64>,
    /// Cache-creation input tokens.
    pub cache_write: Option<u64>,
    /// Cost in US dollars.
    pub cost_usd: Option<f64>,
    /// Where the figures came from (e.g. `claude-json`, `codex-jsonl`).
    pub source: Option<String>,
}

/// A dispatch about to start.
#[derive(Debug, Clone)]
pub struct NewDispatch {
    /// The goal.
    pub goal: GoalId,
    /// Agent turn or judge.
    pub step: DispatchStep,
    /// The turn (must exist).
    pub turn: u32,
    /// 1-based attempt within the turn.
    pub attempt: u32,
    /// Runtime family.
    pub family: Family,
    /// Model id, if chosen.
    pub model: Option<String>,
}

/// How a dispatch ended.
#[derive(Debug, Clone)]
pub struct DispatchEnd {
    /// Final outcome (not in-flight).
    pub outcome: DispatchOutcome,
    /// Wall time, when measured.
    pub wall_ms: Option<u64>,
    /// Token figures.
    pub tokens: Tokens,
    /// Kebab-case failure reason.
    pub reason: Option<String>,
    /// Detail for people.
    pub detail: Option<String>,
    /// What the agent (or judge) answered, when it answered.
    pub reply: Option<String>,
}

/// A dispatch ledger row.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Dispatch {
    /// Row id.
    pub id: DispatchId,
    /// Agent turn or judge.
    pub step: DispatchStep,
    /// The goal.
    pub goal: GoalId,
    /// The turn.
    pub turn: u32,
    /// Attempt within the turn.
    pub attempt: u32,
    /// Runtime family.
    pub family: Family,
    /// Model id.
    pub model: Option<String>,
    /// Outcome so far.
    pub outcome: DispatchOutcome,
    /// Wall time.
    pub wall_ms: Option<u64>,
    /// Token figures.
    pub tokens: Tokens,
    /// Failure reason.
    pub reason: Option<String>,
    /// Detail.
    pub detail: Option<String>,
    /// The reply, when there was one.
    pub reply: Option<String>,
    /// Start time.
    pub started_at: Millis,
    /// End time.
    pub ended_at: Option<Millis>,
}

/// One entry of the append-only event log.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Event {
    /// Position in the log: contiguous from 1 for the whole database.
    pub seq: i64,
    /// The goal, when the event is about one.
    pub goal: Option<GoalId>,
    /// The turn, when the event is about one.
    pub turn: Option<u32>,
    /// Kebab-case kind.
    pub kind: String,
    /// Kind-specific JSON object.
    pub payload: serde_json::Value,
    /// When it was appended.
    pub at: Millis,
}

/// What crash recovery changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Recovered {
    /// Ledger rows turned from in-flight into interrupted.
    pub dispatches: Vec<DispatchId>,
    /// Turns that were open and are now ended as interrupted.
    pub turns: Vec<u32>,
    /// Tool calls recorded as intents whose dispatch was cut short, now `interrupted`, as
    /// `(dispatch, seq)`: their effect may or may not have happened.
    pub tool_calls: Vec<(DispatchId, u32)>,
    /// The open turn left open because its dispatch finished `ok`: it owes its gate phase.
    pub gates_owed: Vec<u32>,
}

pub(crate) fn lossy_path<S: serde::Serializer>(
    p: &std::path::Path,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

/// True when `s` is kebab-case: `[a-z0-9]+(-[a-z0-9]+)*`.
pub(crate) fn is_kebab(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}
