//! The frame kinds: a closed set covering a goal's (or a verify or hook run's) life.
//!
//! Frames are read back with unknown keys refused, so a frame written by a newer greenlight that
//! this one does not understand is an error, not a silently thinner frame.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use greenlight_types::{GateVerdict, RunKind, WorkflowStatus};

/// Which stream a frame belongs to: a goal's (`7`), a verify or hook run's (`run-7`) or a
/// workflow run's (`wf-7`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StreamId {
    /// A goal, by its id.
    Goal(i64),
    /// A recorded `greenlight verify` or `hook stop` run, by its id.
    Run(i64),
    /// A workflow run, by its id.
    Workflow(i64),
}

/// A stream id that is none of `<goal id>`, `run-<run id>` and `wf-<workflow run id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamIdError(pub String);

impl fmt::Display for StreamIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a stream id: expected a goal id (`7`), a run id (`run-7`) or a \
             workflow run id (`wf-7`)",
            self.0
        )
    }
}

impl std::error::Error for StreamIdError {}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamId::Goal(id) => write!(f, "{id}"),
            StreamId::Run(id) => write!(f, "run-{id}"),
            StreamId::Workflow(id) => write!(f, "wf-{id}"),
        }
    }
}

/// A positive decimal id with no sign, no leading zero and no spaces.
fn positive_id(text: &str) -> Option<i64> {
    let canonical =
        !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) && !text.starts_with('0');
    canonical.then(|| text.parse().ok()).flatten()
}

impl FromStr for StreamId {
    type Err = StreamIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parsed = if let Some(run) = s.strip_prefix("run-") {
            positive_id(run).map(StreamId::Run)
        } else if let Some(workflow) = s.strip_prefix("wf-") {
            positive_id(workflow).map(StreamId::Workflow)
        } else {
            positive_id(s).map(StreamId::Goal)
        };
        parsed.ok_or_else(|| StreamIdError(s.to_owned()))
    }
}

impl Serialize for StreamId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for StreamId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for StreamId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "StreamId".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A goal id (`7`), a verify or hook run id (`run-7`) or a workflow run id (`wf-7`).",
            "type": "string",
            "pattern": "^(run-|wf-)?[1-9][0-9]*$"
        })
    }
}

/// One frame of a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Frame {
    /// The stream it belongs to.
    pub stream: StreamId,
    /// Its index in the stream: 1, 2, 3, … with no hole, assigned when it was persisted.
    pub seq: u64,
    /// When it was persisted, milliseconds since the Unix epoch (UTC).
    pub at: i64,
    /// What happened.
    pub body: FrameBody,
}

impl Frame {
    /// The SSE `id:` of this frame: `<stream>:<seq>`, so the cursor alone names its stream.
    pub fn cursor(&self) -> String {
        format!("{}:{}", self.stream, self.seq)
    }
}

/// Which live output of the agent an activity frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ActivityKind {
    /// Text of the agent's answer, as it arrives.
    Text,
    /// The agent's visible reasoning.
    Thinking,
    /// A line of a command agent's stdout (or of output the adapter does not understand).
    Output,
}

/// Where a tool call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ToolStatus {
    /// Called; no result yet.
    Started,
    /// Returned a result.
    Ok,
    /// Returned an error.
    Error,
}

/// Token counts of a turn; each is absent when the runtime did not report it (never 0 for
/// "unknown").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnTokens {
    /// Input tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<u64>,
    /// Output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<u64>,
    /// Cache-read input tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<u64>,
    /// Cache-creation input tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<u64>,
    /// Cost in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// What happened. Internally tagged: `{"type": "gate-finished", …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum FrameBody {
    /// The goal changed state (`active`, `paused`, `done`, `cleared`); a pause says why.
    GoalState {
        /// The new state.
        state: String,
        /// A kebab-case reason (pauses).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// What to do about it (pauses).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// A verify or hook run started (the first frame of a `run-N` stream).
    RunStarted {
        /// Verify or hook.
        kind: RunKind,
        /// The worktree it runs in (lossy UTF-8).
        worktree: String,
        /// The gate commands, in config order.
        gates: Vec<String>,
    },
    /// A verify or hook run ended (the last frame of a `run-N` stream).
    RunFinished {
        /// `passed`, `failed`, `error`, `interrupted`, or for the hook `allow` / `block`.
        result: String,
        /// The exit code the command returned; absent when the run was closed as `interrupted`
        /// by another greenlight because its process was gone (its exit code is unknown).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// Wall time of the whole run.
        duration_ms: u64,
    },
    /// A turn started with this prompt.
    TurnStarted {
        /// The turn's number (1-based, for the goal's whole life).
        turn: u32,
        /// What the agent is sent, cut at [`crate::MAX_PROMPT_BYTES`].
        prompt: String,
        /// The prompt was longer and was cut.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        truncated: bool,
    },
    /// Live output of the agent: answer text, reasoning, or output lines, coalesced.
    Activity {
        /// The turn.
        turn: u32,
        /// Which output.
        kind: ActivityKind,
        /// The text, at most [`crate::MAX_TEXT_BYTES`].
        text: String,
    },
    /// A tool call of the agent: one frame when it starts, one when it returns.
    ToolCall {
        /// The turn.
        turn: u32,
        /// The runtime's id for the call (pairs the start with the result).
        id: String,
        /// The tool's name (`Bash`, `Edit`, `command_execution`, …).
        name: String,
        /// Its input, as short text.
        input: String,
        /// Started, ok or error.
        status: ToolStatus,
        /// The start of its result, once it returned.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
    },
    /// A turn ended.
    TurnEnded {
        /// The turn.
        turn: u32,
        /// `ok`, `null`, `error`, `interrupted`, or the kebab-case reason the turn ended with.
        outcome: String,
        /// The kebab-case reason of a failure.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The agent's final reply text, cut at [`crate::MAX_TEXT_BYTES`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply: Option<String>,
        /// Token counts, when the runtime reported them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<TurnTokens>,
        /// Wall time of the dispatch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wall_ms: Option<u64>,
    },
    /// A gate started (or is about to be replayed).
    GateStarted {
        /// 1-based position among the gates.
        gate: u32,
        /// How many gates this phase runs.
        of: u32,
        /// Its command.
        command: String,
        /// The goal turn it belongs to (absent in verify and hook runs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<u32>,
    },
    /// Output of a running gate, throttled and bounded.
    GateOutput {
        /// 1-based position among the gates.
        gate: u32,
        /// The text (lossy UTF-8), at most [`crate::MAX_GATE_OUTPUT_BYTES`].
        text: String,
        /// Bytes left out since the previous output frame to keep the stream bounded.
        #[serde(default, skip_serializing_if = "is_zero")]
        dropped: u64,
    },
    /// A gate is decided.
    GateFinished {
        /// 1-based position among the gates.
        gate: u32,
        /// Its command.
        command: String,
        /// Its verdict.
        verdict: GateVerdict,
        /// Its exit code (absent when killed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// Wall time (absent for a replayed result).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
        /// The compact digest or the evidence of a failure.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        digest: Option<String>,
        /// Not run: a recorded result was reused because the workspace had not changed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replayed: bool,
        /// The goal turn it belongs to (absent in verify and hook runs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<u32>,
    },
    /// The judge answered.
    JudgeVerdict {
        /// The turn it judged.
        turn: u32,
        /// Did it pass the work?
        passed: bool,
        /// Its reply, cut at [`crate::MAX_TEXT_BYTES`].
        reply: String,
    },
    /// A workflow run started (the first frame of a `wf-N` stream).
    WorkflowRunStarted {
        /// The workflow run.
        run: i64,
        /// The plan's name.
        name: String,
        /// The plan digest.
        plan_digest: String,
    },
    /// A workflow dispatch started: an agent step (or a gate-verdict step) was sent to an agent.
    WorkflowDispatched {
        /// The workflow run.
        run: i64,
        /// The step's id.
        step: String,
        /// The fan-out item key, for a member.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<String>,
        /// The attempt (1-based).
        attempt: u32,
        /// The agent family.
        family: String,
        /// The model id, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// A workflow dispatch settled.
    WorkflowSettled {
        /// The workflow run.
        run: i64,
        /// The step's id.
        step: String,
        /// The fan-out item key, for a member.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<String>,
        /// The attempt (1-based).
        attempt: u32,
        /// `ok`, or the kebab-case outcome it ended with.
        outcome: String,
        /// The kebab-case reason of a failure.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Wall time of the dispatch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wall_ms: Option<u64>,
        /// Token counts, when the agent reported them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<TurnTokens>,
    },
    /// A workflow gate step started.
    WorkflowGateStarted {
        /// The workflow run.
        run: i64,
        /// The gate step's id.
        step: String,
        /// The fan-out item key, for a member's gate.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<String>,
        /// Which try of the gate this is (1-based; more after a redo).
        attempt: u32,
    },
    /// A workflow gate step is judged.
    WorkflowGateJudged {
        /// The workflow run.
        run: i64,
        /// The gate step's id.
        step: String,
        /// The fan-out item key, for a member's gate.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<String>,
        /// Which try of the gate this is (1-based).
        attempt: u32,
        /// Did it pass?
        passed: bool,
        /// Where a failure goes: a step id to redo, or `terminal:<label>`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        route: Option<String>,
    },
    /// A join decided.
    WorkflowJoinDecided {
        /// The workflow run.
        run: i64,
        /// The join step's id.
        step: String,
        /// Its policy (`all-declared`, `all-activated`, `any`, `quorum:<n>`).
        policy: String,
        /// Did the join pass?
        passed: bool,
        /// The members that passed, by item key.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        passed_items: Vec<String>,
        /// The members that failed, by item key.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failed_items: Vec<String>,
    },
    /// A workflow run paused at a boundary.
    WorkflowPaused {
        /// The workflow run.
        run: i64,
        /// The kebab-case reason (`budget-exhausted`, `paused-by-user`, …).
        reason: String,
        /// The step it paused before, when there is one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<String>,
        /// What to do about it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// A workflow run resumed (by `--resume`, possibly in another process).
    WorkflowResumed {
        /// The workflow run.
        run: i64,
    },
    /// A member's branch started landing onto the target.
    WorkflowLandStarted {
        /// The workflow run.
        run: i64,
        /// The land step's id.
        step: String,
        /// The member's item key.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<String>,
        /// The branch being landed.
        branch: String,
    },
    /// A member's landing ended.
    WorkflowLanded {
        /// The workflow run.
        run: i64,
        /// The land step's id.
        step: String,
        /// The member's item key.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<String>,
        /// The branch.
        branch: String,
        /// `landed`, or the kebab-case reason it was stopped (a conflict, a red merged tree).
        outcome: String,
        /// The target's new commit, when it landed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
    },
    /// A workflow run ended, or was found interrupted (the last frame until a resume).
    WorkflowRunFinished {
        /// The workflow run.
        run: i64,
        /// `completed`, `failed`, `terminal` or `interrupted`.
        status: WorkflowStatus,
        /// The kebab-case reason of a failure.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The terminal route's label, or what went wrong.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// The stream ends with an error (`HARNESS_ERROR`, `SEQUENCE_GAP`, …).
    Error {
        /// Upper-case code.
        code: String,
        /// What happened and what to do.
        message: String,
    },
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl FrameBody {
    /// The kebab-case kind, as stored beside the frame.
    pub fn kind(&self) -> &'static str {
        match self {
            FrameBody::GoalState { .. } => "goal-state",
            FrameBody::RunStarted { .. } => "run-started",
            FrameBody::RunFinished { .. } => "run-finished",
            FrameBody::TurnStarted { .. } => "turn-started",
            FrameBody::Activity { .. } => "activity",
            FrameBody::ToolCall { .. } => "tool-call",
            FrameBody::TurnEnded { .. } => "turn-ended",
            FrameBody::GateStarted { .. } => "gate-started",
            FrameBody::GateOutput { .. } => "gate-output",
            FrameBody::GateFinished { .. } => "gate-finished",
            FrameBody::JudgeVerdict { .. } => "judge-verdict",
            FrameBody::WorkflowRunStarted { .. } => "workflow-run-started",
            FrameBody::WorkflowDispatched { .. } => "workflow-dispatched",
            FrameBody::WorkflowSettled { .. } => "workflow-settled",
            FrameBody::WorkflowGateStarted { .. } => "workflow-gate-started",
            FrameBody::WorkflowGateJudged { .. } => "workflow-gate-judged",
            FrameBody::WorkflowJoinDecided { .. } => "workflow-join-decided",
            FrameBody::WorkflowPaused { .. } => "workflow-paused",
            FrameBody::WorkflowResumed { .. } => "workflow-resumed",
            FrameBody::WorkflowLandStarted { .. } => "workflow-land-started",
            FrameBody::WorkflowLanded { .. } => "workflow-landed",
            FrameBody::WorkflowRunFinished { .. } => "workflow-run-finished",
            FrameBody::Error { .. } => "error",
        }
    }
}

/// The JSON Schema of [`Frame`], as committed in `schemas/frame.json`.
pub fn frame_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Frame)).unwrap_or_default()
}
