//! The plan's types: what a checked plan says, serialised in the plan's own spelling. They are
//! the source of the committed JSON Schema and of the plan's digest.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

/// The only plan format version there is.
pub const FORMAT_VERSION: u64 = 1;

/// A workflow plan: named steps, each gated, run from one base.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields, extend("patternProperties" = {"^x-": true}))]
pub struct Plan {
    /// The format version: `1`.
    #[schemars(range(min = 1, max = 1))]
    pub workflow: u64,
    /// The plan's name (`[a-z0-9][a-z0-9_-]*`, at most 64 characters).
    pub name: String,
    /// What the plan is for, for people.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The git ref every worktree starts from (default: `HEAD` when the run starts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The agent a step uses when it names none: `claude`, `codex`, `openai` or
    /// `command:<argv template>`, as `greenlight goal run --agent` takes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The model a step uses when it names none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The arguments a run takes (`--arg name=value`), by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub args: BTreeMap<String, Arg>,
    /// What a run may spend.
    #[serde(default)]
    pub budget: Budget,
    /// The steps, in the order they are written (the order `needs` does not decide).
    pub steps: Vec<Step>,
    /// `x-` keys: kept and digested, never read.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extensions: BTreeMap<String, serde_json::Value>,
}

/// One declared argument.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Arg {
    /// The value when `--arg` does not give one; without it the argument is required (a pause's
    /// resume argument is given on resume instead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// What the argument means, for people.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// What a run may spend. A unit is one agent dispatch; gates run by greenlight cost none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Budget {
    /// Dispatch units (default: the plan's worst case, so a plan without a budget never pauses
    /// for one).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000))]
    pub dispatches: Option<u64>,
    /// A cap on the tokens the agents report, in and out together.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub tokens: Option<u64>,
    /// A cap on the cost the agents report, in US dollars.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// A cap on the run's wall clock, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 604_800))]
    pub wall_clock_sec: Option<u64>,
}

/// One step: an id, what it waits for, and what it does.
///
/// Closed by `unevaluatedProperties`, not `additionalProperties`: the kind's own keys come from
/// the `oneOf` branch, which `additionalProperties` would not see.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("patternProperties" = {"^x-": true}, "unevaluatedProperties" = false))]
pub struct Step {
    /// The step's id (`[a-z0-9][a-z0-9_-]*`, at most 64 characters), unique in the plan.
    pub id: String,
    /// The steps that must finish before this one starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
    /// What the step does; `kind` names which.
    #[serde(flatten)]
    pub kind: Kind,
    /// `x-` keys: kept and digested, never read.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extensions: BTreeMap<String, serde_json::Value>,
}

/// The step kinds.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Kind {
    /// One agent dispatch (retried as declared).
    Agent(Agent),
    /// A verdict on the work so far: verify.yaml gates, or an agent's `GATE: PASS|FAIL`.
    Gate(Gate),
    /// One agent step per item key, at most `maxFanout` at a time, each in its own worktree.
    Fanout(Fanout),
    /// The decision over a fan-out's members.
    Join(Join),
    /// Stop here until a person resumes the run with the resume argument.
    Pause(Pause),
    /// Land a fan-out's members onto a branch, one at a time, each gated on the merged tree.
    Land(Land),
}

/// An agent step (and a fan-out's template).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    /// What the agent is asked. `{{item}}` is the fan-out member's key; `{{args.NAME}}` an
    /// argument's value.
    pub prompt: String,
    /// The agent (default: the plan's `agent`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The model (default: the plan's `model`, then the agent's own default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What the step delivers.
    #[serde(default)]
    pub deliverable: Deliverable,
    /// Files the agent is asked to read, relative to its worktree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<String>,
    /// Files the agent must write (with `deliverable: file`), relative to its worktree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<String>,
    /// Whether running the step twice is the same as running it once (required for retries).
    #[serde(default)]
    pub idempotent: bool,
    /// How often a failed dispatch is tried again, and for which failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    /// The dispatch's deadline in seconds (default: the agent's).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86_400))]
    pub timeout_sec: Option<u64>,
    /// A fan-out template's `x-` keys (a step's own are the step's).
    #[serde(flatten)]
    #[schemars(skip)]
    pub extensions: BTreeMap<String, serde_json::Value>,
}

/// What an agent step delivers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Deliverable {
    /// The reply's text.
    #[default]
    ReturnValue,
    /// The declared `writes`, which must exist and have changed after the dispatch.
    File,
}

/// A step's retries: immediate, bounded, and only for the named failures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Retry {
    /// Attempts in all, the first included.
    #[schemars(range(min = 1, max = 10))]
    pub max_attempts: u64,
    /// The failures that are tried again; any other is not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on: Vec<FailureClass>,
}

/// The classes of dispatch failure a retry may name.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum FailureClass {
    /// The deadline fired.
    Timeout,
    /// Nothing usable came back from the agent's process or server.
    Transport,
    /// A reply came back that could not be read.
    MalformedOutput,
    /// The agent refused the request.
    PolicyRefusal,
}

/// A gate step: exactly one of `gates`, `verify` or `verdict`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Gate {
    /// verify.yaml gate ids, run under greenlight's runner (checked against the verify.yaml at
    /// preflight).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<String>,
    /// A whole verify.yaml, relative to the worktree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<String>,
    /// An agent whose reply ends in `GATE: PASS` or `GATE: FAIL`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Where a failed verdict goes: a step id to run again before the gate is asked again, or
    /// `terminal:<label>` to end the run there.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(terminal:)?[a-z0-9][a-z0-9_-]{0,63}$"))]
    pub fail_route: Option<String>,
    /// How many times the fail route and the gate run again before the gate fails.
    #[serde(default)]
    #[schemars(range(max = 10))]
    pub max_redos: u64,
}

/// A gate-verdict agent.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Verdict {
    /// What the agent judges; greenlight adds the verdict line's grammar.
    pub prompt: String,
    /// The agent (default: the plan's `agent`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The model (default: the plan's `model`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The dispatch's deadline in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86_400))]
    pub timeout_sec: Option<u64>,
}

/// A fan-out: the template run once per item key.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Fanout {
    /// The item keys (`[a-z0-9][a-z0-9_.-]*`, at most 64 characters), unique.
    pub items: Vec<String>,
    /// How many members may run at once: a window, never a cut.
    #[schemars(range(min = 1, max = 64))]
    pub max_fanout: u64,
    /// Run only the first `to` items, for the reason given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncate: Option<Truncate>,
    /// The agent step each member runs, `{{item}}` standing for its key.
    #[schemars(extend("patternProperties" = {"^x-": true}, "unevaluatedProperties" = false))]
    pub template: Agent,
}

/// An explicit cut of a fan-out's items.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Truncate {
    /// How many items run.
    #[schemars(range(min = 1))]
    pub to: u64,
    /// Why the rest do not, for the record.
    pub reason: String,
}

/// A join: the decision over one fan-out's members.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Join {
    /// The fan-out whose members are decided.
    #[serde(rename = "for")]
    pub fanout: String,
    /// How the members decide the join.
    #[schemars(
        with = "String",
        regex(pattern = r"^(all-declared|all-activated|any|quorum:[1-9][0-9]*)$")
    )]
    pub policy: JoinPolicy,
}

/// How a join is decided from its members' outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinPolicy {
    /// Every declared item ran and passed.
    AllDeclared,
    /// Every member that ran passed (truncated items do not count).
    AllActivated,
    /// At least one member passed.
    Any,
    /// At least n members passed.
    Quorum(u64),
}

impl JoinPolicy {
    /// The policy's text form, as the plan writes it.
    pub fn text(self) -> String {
        match self {
            JoinPolicy::AllDeclared => "all-declared".into(),
            JoinPolicy::AllActivated => "all-activated".into(),
            JoinPolicy::Any => "any".into(),
            JoinPolicy::Quorum(n) => format!("quorum:{n}"),
        }
    }
}

impl Serialize for JoinPolicy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text())
    }
}

/// A pause: the run stops here until resumed with its argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pause {
    /// The state a paused run reports (`[a-z0-9][a-z0-9_-]*`).
    pub state: String,
    /// The argument a resume must give (`--arg NAME=VALUE`); declared in `args`.
    pub resume_arg: String,
}

/// A land step: a fan-out's passed members merged onto `target` one at a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Land {
    /// The fan-out whose members land.
    #[serde(rename = "for")]
    pub fanout: String,
    /// The branch that advances.
    pub target: String,
    /// How a member's branch is brought onto the target.
    #[serde(default)]
    pub strategy: Strategy,
    /// verify.yaml gate ids run on each merged tree before the target advances.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<String>,
}

/// How a member's branch meets the target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// A merge commit.
    #[default]
    Merge,
    /// The member's commits replayed on the target.
    Rebase,
}
