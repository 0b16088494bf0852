//! The tree read into a [`Plan`]: every key held to the closed set, every value to its domain,
//! with the positions the invariants report at.
//!
//! A value that fails its domain is a problem and leaves a default behind, so the reading goes on
//! and reports the next problem too; a plan with any problem is never handed out.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{
    Agent, Arg, Budget, Deliverable, FORMAT_VERSION, FailureClass, Fanout, Gate, Join, JoinPolicy,
    Kind, Land, Pause, Plan, Retry, Step, Strategy, Truncate, Verdict,
};
use super::yaml::{At, Fields, Reader, Value, Yaml};

/// Most steps a plan may have.
pub const MAX_STEPS: u64 = 500;
/// Most items one fan-out may declare.
pub const MAX_ITEMS: u64 = 1_000;
/// Longest id, name or item key.
pub const MAX_ID_LEN: usize = 64;

const PLAN_KEYS: &[&str] = &[
    "workflow",
    "name",
    "description",
    "base",
    "agent",
    "model",
    "args",
    "budget",
    "steps",
];
const ARG_KEYS: &[&str] = &["default", "description"];
const BUDGET_KEYS: &[&str] = &["dispatches", "tokens", "costUsd", "wallClockSec"];
const AGENT_KEYS: &[&str] = &[
    "prompt",
    "agent",
    "model",
    "deliverable",
    "reads",
    "writes",
    "idempotent",
    "retry",
    "timeoutSec",
];
const RETRY_KEYS: &[&str] = &["maxAttempts", "on"];
const GATE_KEYS: &[&str] = &["gates", "verify", "verdict", "failRoute", "maxRedos"];
const VERDICT_KEYS: &[&str] = &["prompt", "agent", "model", "timeoutSec"];
const FANOUT_KEYS: &[&str] = &["items", "maxFanout", "truncate", "template"];
const TRUNCATE_KEYS: &[&str] = &["to", "reason"];
const JOIN_KEYS: &[&str] = &["for", "policy"];
const PAUSE_KEYS: &[&str] = &["state", "resumeArg"];
const LAND_KEYS: &[&str] = &["for", "target", "strategy", "gates"];
/// Keys every step has, whatever its kind.
const STEP_KEYS: &[&str] = &["id", "kind", "needs"];

const KINDS: &[(&str, &[&str])] = &[
    ("agent", AGENT_KEYS),
    ("gate", GATE_KEYS),
    ("fanout", FANOUT_KEYS),
    ("join", JOIN_KEYS),
    ("pause", PAUSE_KEYS),
    ("land", LAND_KEYS),
];

/// Where the parts of one step stand, for the invariants' messages.
#[derive(Debug, Clone, Default)]
pub struct StepAt {
    /// The step itself (its `id`, or the mapping when the id is missing).
    pub step: At,
    /// Each of `needs`, in order.
    pub needs: Vec<At>,
    /// `failRoute`, `for`, `resumeArg`, `retry`, `truncate`, `policy` or `prompt`, when written.
    pub field: BTreeMap<&'static str, At>,
}

impl StepAt {
    /// Where `key` is written, or the step.
    pub fn of(&self, key: &str) -> At {
        self.field.get(key).copied().unwrap_or(self.step)
    }
}

/// What the reading found: the plan, where its steps stand, and every id written (also those of
/// steps too broken to keep, so a reference to one is not reported twice).
pub struct Read {
    pub plan: Plan,
    pub at: Vec<StepAt>,
    pub ids: BTreeSet<String>,
}

/// Reads the whole tree; the problems are left in `reader`.
pub fn plan(reader: &mut Reader, root: &Yaml) -> Read {
    let top = reader.fields("the plan", root, PLAN_KEYS);
    match reader.required(&top, "the plan", "workflow") {
        Some(node) if matches!(node.value, Value::Int(n) if n == i128::from(FORMAT_VERSION)) => {}
        Some(node) => reader.problem(
            node.at,
            format!("`workflow` must be {FORMAT_VERSION}, the only plan format there is"),
        ),
        None => {}
    }
    let name = reader
        .required(&top, "the plan", "name")
        .and_then(|n| id_like(reader, "`name`", n))
        .unwrap_or_default();
    let text = |reader: &mut Reader, key: &str| {
        top.get(key)
            .and_then(|n| reader.string(&format!("`{key}`"), n))
    };
    let description = text(reader, "description");
    let base = text(reader, "base");
    let agent = top.get("agent").and_then(|n| agent_spec(reader, n));
    let model = text(reader, "model");
    let args = top.get("args").map(|n| args(reader, n)).unwrap_or_default();
    let budget = top
        .get("budget")
        .map(|n| budget(reader, n))
        .unwrap_or_default();
    let mut read = Read {
        plan: Plan {
            workflow: FORMAT_VERSION,
            name,
            description,
            base,
            agent,
            model,
            args,
            budget,
            steps: Vec::new(),
            extensions: top.extensions.clone(),
        },
        at: Vec::new(),
        ids: BTreeSet::new(),
    };
    if let Some(node) = reader.required(&top, "the plan", "steps") {
        steps(reader, node, &mut read);
    }
    read
}

fn steps(reader: &mut Reader, node: &Yaml, read: &mut Read) {
    let Value::List(items) = &node.value else {
        reader.problem(
            node.at,
            "`steps` must be a list of steps (`- id: …` items)".to_owned(),
        );
        return;
    };
    if items.is_empty() {
        reader.problem(node.at, "`steps` is empty; add at least one step");
    }
    if items.len() as u64 > MAX_STEPS {
        reader.problem(
            node.at,
            format!(
                "`steps` has {} steps; a plan may have at most {MAX_STEPS}",
                items.len()
            ),
        );
    }
    for item in items {
        if let Some((step, at)) = step(reader, item, &mut read.ids) {
            read.plan.steps.push(step);
            read.at.push(at);
        }
    }
}

fn step(reader: &mut Reader, node: &Yaml, ids: &mut BTreeSet<String>) -> Option<(Step, StepAt)> {
    // The kind decides which keys are allowed, so it is read first, from the raw mapping.
    let kind_node = match &node.value {
        Value::Map(entries) => entries
            .iter()
            .find(|(k, _)| matches!(&k.value, Value::Str(s) if s == "kind"))
            .map(|(_, v)| v),
        _ => None,
    };
    let kind = kind_node.and_then(|n| {
        let names: Vec<_> = KINDS.iter().map(|(k, _)| (*k, *k)).collect();
        reader.word("`kind`", n, &names)
    });
    let allowed: Vec<&str> = match kind {
        Some(kind) => {
            let own = KINDS
                .iter()
                .find(|(k, _)| *k == kind)
                .map_or(&[][..], |(_, keys)| *keys);
            STEP_KEYS.iter().chain(own).copied().collect()
        }
        // Without a readable kind only the shared keys can be checked.
        None => STEP_KEYS
            .iter()
            .chain(KINDS.iter().flat_map(|(_, keys)| keys.iter()))
            .copied()
            .collect(),
    };
    let fields = reader.fields("a step", node, &allowed);
    let id_node = reader.required(&fields, "a step", "id");
    let id = id_node.and_then(|n| id_like(reader, "a step's `id`", n));
    let mut at = StepAt {
        step: id_node.map_or(node.at, |n| n.at),
        ..StepAt::default()
    };
    if let (Some(id), Some(n)) = (&id, id_node)
        && !ids.insert(id.clone())
    {
        reader.problem(
            n.at,
            format!("step id `{id}` is used twice; give each step its own id"),
        );
    }
    if kind_node.is_none() {
        reader.problem(
            at.step,
            format!(
                "step `{}` has no `kind`; add one of agent, gate, fanout, join, pause, land",
                id.as_deref().unwrap_or("?")
            ),
        );
    }
    let needs = match fields.get("needs") {
        Some(n) => reader
            .strings("`needs`", n)
            .into_iter()
            .map(|(need, need_at)| {
                at.needs.push(need_at);
                need
            })
            .collect(),
        None => Vec::new(),
    };
    for key in [
        "failRoute",
        "for",
        "resumeArg",
        "retry",
        "truncate",
        "policy",
        "prompt",
        "template",
    ] {
        if let Some(n) = fields.get(key) {
            at.field.insert(key, n.at);
        }
    }
    let kind = match kind? {
        "agent" => Kind::Agent(agent(reader, &fields)),
        "gate" => Kind::Gate(gate(reader, &fields)),
        "fanout" => Kind::Fanout(fanout(reader, &fields, &mut at)),
        "join" => Kind::Join(join(reader, &fields)),
        "pause" => Kind::Pause(pause(reader, &fields)),
        _ => Kind::Land(land(reader, &fields)),
    };
    Some((
        Step {
            id: id?,
            needs,
            kind,
            extensions: fields.extensions,
        },
        at,
    ))
}

fn agent(reader: &mut Reader, fields: &Fields<'_>) -> Agent {
    let prompt = reader
        .required(fields, "an agent step", "prompt")
        .and_then(|n| reader.string("`prompt`", n))
        .unwrap_or_default();
    let deliverable = fields
        .get("deliverable")
        .and_then(|n| {
            reader.word(
                "`deliverable`",
                n,
                &[
                    ("return-value", Deliverable::ReturnValue),
                    ("file", Deliverable::File),
                ],
            )
        })
        .unwrap_or_default();
    let paths = |reader: &mut Reader, key: &str| -> Vec<String> {
        let Some(node) = fields.get(key) else {
            return Vec::new();
        };
        reader
            .strings(&format!("`{key}`"), node)
            .into_iter()
            .filter(
                |(path, at)| match greenlight_agent::containment::check_shape(path) {
                    Ok(_) => true,
                    Err(err) => {
                        reader.problem(*at, format!("`{key}`: {err}"));
                        false
                    }
                },
            )
            .map(|(path, _)| path)
            .collect()
    };
    let reads = paths(reader, "reads");
    let writes = paths(reader, "writes");
    Agent {
        prompt,
        agent: fields.get("agent").and_then(|n| agent_spec(reader, n)),
        model: fields
            .get("model")
            .and_then(|n| reader.string("`model`", n)),
        deliverable,
        reads,
        writes,
        idempotent: fields
            .get("idempotent")
            .and_then(|n| reader.boolean("`idempotent`", n))
            .unwrap_or(false),
        retry: fields.get("retry").map(|n| retry(reader, n)),
        timeout_sec: timeout(reader, fields),
        extensions: BTreeMap::new(),
    }
}

fn timeout(reader: &mut Reader, fields: &Fields<'_>) -> Option<u64> {
    fields
        .get("timeoutSec")
        .and_then(|n| reader.integer("`timeoutSec`", n, 1, 86_400))
}

fn retry(reader: &mut Reader, node: &Yaml) -> Retry {
    let fields = reader.fields("`retry`", node, RETRY_KEYS);
    let max_attempts = reader
        .required(&fields, "`retry`", "maxAttempts")
        .and_then(|n| reader.integer("`retry.maxAttempts`", n, 1, 10))
        .unwrap_or(1);
    let classes = [
        ("timeout", FailureClass::Timeout),
        ("transport", FailureClass::Transport),
        ("malformed-output", FailureClass::MalformedOutput),
        ("policy-refusal", FailureClass::PolicyRefusal),
    ];
    let mut on = Vec::new();
    if let Some(list) = fields.get("on") {
        match &list.value {
            Value::List(items) => {
                for item in items {
                    if let Some(class) = reader.word("an item of `retry.on`", item, &classes)
                        && !on.contains(&class)
                    {
                        on.push(class);
                    }
                }
            }
            _ => reader.problem(
                list.at,
                "`retry.on` must be a list of failure classes (timeout, transport, \
                 malformed-output, policy-refusal)",
            ),
        }
    }
    on.sort();
    Retry { max_attempts, on }
}

fn gate(reader: &mut Reader, fields: &Fields<'_>) -> Gate {
    let gates = match fields.get("gates") {
        Some(n) => ids(reader, "`gates`", n),
        None => Vec::new(),
    };
    let verify = fields.get("verify").and_then(|n| {
        let path = reader.string("`verify`", n)?;
        match greenlight_agent::containment::check_shape(&path) {
            Ok(_) => Some(path),
            Err(err) => {
                reader.problem(n.at, format!("`verify`: {err}"));
                None
            }
        }
    });
    let verdict = fields.get("verdict").map(|n| {
        let v = reader.fields("`verdict`", n, VERDICT_KEYS);
        Verdict {
            prompt: reader
                .required(&v, "`verdict`", "prompt")
                .and_then(|p| reader.string("`verdict.prompt`", p))
                .unwrap_or_default(),
            agent: v.get("agent").and_then(|a| agent_spec(reader, a)),
            model: v
                .get("model")
                .and_then(|m| reader.string("`verdict.model`", m)),
            timeout_sec: timeout(reader, &v),
        }
    });
    let written = [
        fields.get("gates").is_some(),
        verify.is_some() || fields.get("verify").is_some(),
        verdict.is_some(),
    ];
    if written.iter().filter(|w| **w).count() != 1 {
        reader.problem(
            fields.at,
            "a gate step takes exactly one of `gates` (verify.yaml gate ids), `verify` (a \
             verify.yaml path) or `verdict` (an agent that answers GATE: PASS or GATE: FAIL)",
        );
    }
    let fail_route = fields.get("failRoute").and_then(|n| {
        let route = reader.string("`failRoute`", n)?;
        let label = route.strip_prefix("terminal:").unwrap_or(&route);
        if is_id(label) {
            Some(route)
        } else {
            reader.problem(
                n.at,
                format!(
                    "`failRoute` must be a step id or `terminal:<label>` (lowercase letters, \
                     digits, `-`, `_`), found `{route}`"
                ),
            );
            None
        }
    });
    Gate {
        gates,
        verify,
        verdict,
        fail_route,
        max_redos: fields
            .get("maxRedos")
            .and_then(|n| reader.integer("`maxRedos`", n, 0, 10))
            .unwrap_or(0),
    }
}

fn fanout(reader: &mut Reader, fields: &Fields<'_>, at: &mut StepAt) -> Fanout {
    let items = match reader.required(fields, "a fanout step", "items") {
        Some(node) => {
            let items = reader.strings("`items`", node);
            if items.is_empty() && matches!(node.value, Value::List(_)) {
                reader.problem(
                    node.at,
                    "`items` is empty; a fan-out needs at least one item",
                );
            }
            if items.len() as u64 > MAX_ITEMS {
                reader.problem(
                    node.at,
                    format!("`items` has {} keys; at most {MAX_ITEMS}", items.len()),
                );
            }
            let mut seen = BTreeSet::new();
            items
                .into_iter()
                .filter(|(item, item_at)| {
                    let shape = item.len() <= MAX_ID_LEN
                        && item
                            .bytes()
                            .next()
                            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                        && item.bytes().all(|b| {
                            b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b)
                        });
                    if !shape {
                        reader.problem(
                            *item_at,
                            format!(
                                "item key `{item}` must be lowercase letters, digits, `-`, `_` \
                                 or `.`, at most {MAX_ID_LEN} characters: it names a branch and \
                                 a worktree"
                            ),
                        );
                    } else if !seen.insert(item.clone()) {
                        reader.problem(*item_at, format!("item key `{item}` is written twice"));
                        return false;
                    }
                    shape
                })
                .map(|(item, _)| item)
                .collect()
        }
        None => Vec::new(),
    };
    let max_fanout = match fields.get("maxFanout") {
        Some(n) => reader.integer("`maxFanout`", n, 1, 64).unwrap_or(1),
        None => {
            reader.problem(
                fields.at,
                "a fan-out has no `maxFanout`; say how many members may run at once (1 to 64)",
            );
            1
        }
    };
    let truncate = fields.get("truncate").map(|n| {
        let t = reader.fields("`truncate`", n, TRUNCATE_KEYS);
        let to = reader
            .required(&t, "`truncate`", "to")
            .and_then(|to| reader.integer("`truncate.to`", to, 1, MAX_ITEMS))
            .unwrap_or(1);
        let reason = match t.get("reason") {
            Some(r) => reader.string("`truncate.reason`", r).unwrap_or_default(),
            None => {
                reader.problem(
                    t.at,
                    "`truncate` has no `reason`; a cut drops work, so say why",
                );
                String::new()
            }
        };
        Truncate { to, reason }
    });
    let template = match reader.required(fields, "a fanout step", "template") {
        Some(node) => {
            // The template's own keys are where its problems are reported.
            if let Value::Map(entries) = &node.value {
                for (k, _) in entries {
                    match &k.value {
                        Value::Str(s) if s == "prompt" => at.field.insert("prompt", k.at),
                        Value::Str(s) if s == "retry" => at.field.insert("retry", k.at),
                        _ => None,
                    };
                }
            }
            let t = reader.fields("a fan-out's `template`", node, AGENT_KEYS);
            Agent {
                extensions: t.extensions.clone(),
                ..agent(reader, &t)
            }
        }
        None => agent(reader, &Fields::empty(fields.at)),
    };
    Fanout {
        items,
        max_fanout,
        truncate,
        template,
    }
}

fn join(reader: &mut Reader, fields: &Fields<'_>) -> Join {
    let fanout = reader
        .required(fields, "a join step", "for")
        .and_then(|n| reader.string("`for`", n))
        .unwrap_or_default();
    let policy = reader
        .required(fields, "a join step", "policy")
        .and_then(|n| {
            let text = reader.string("`policy`", n)?;
            let policy = match text.as_str() {
                "all-declared" => Some(JoinPolicy::AllDeclared),
                "all-activated" => Some(JoinPolicy::AllActivated),
                "any" => Some(JoinPolicy::Any),
                other => other
                    .strip_prefix("quorum:")
                    .and_then(|n| n.parse::<u64>().ok())
                    .filter(|n| *n >= 1 && !text.contains('+'))
                    .map(JoinPolicy::Quorum),
            };
            if policy.is_none() {
                reader.problem(
                    n.at,
                    format!(
                        "`policy` must be all-declared, all-activated, any or quorum:<n> (n at \
                         least 1), found `{text}`"
                    ),
                );
            }
            policy
        })
        .unwrap_or(JoinPolicy::AllDeclared);
    Join { fanout, policy }
}

fn pause(reader: &mut Reader, fields: &Fields<'_>) -> Pause {
    Pause {
        state: reader
            .required(fields, "a pause step", "state")
            .and_then(|n| id_like(reader, "`state`", n))
            .unwrap_or_default(),
        resume_arg: reader
            .required(fields, "a pause step", "resumeArg")
            .and_then(|n| reader.string("`resumeArg`", n))
            .unwrap_or_default(),
    }
}

fn land(reader: &mut Reader, fields: &Fields<'_>) -> Land {
    Land {
        fanout: reader
            .required(fields, "a land step", "for")
            .and_then(|n| reader.string("`for`", n))
            .unwrap_or_default(),
        target: reader
            .required(fields, "a land step", "target")
            .and_then(|n| reader.string("`target`", n))
            .unwrap_or_default(),
        strategy: fields
            .get("strategy")
            .and_then(|n| {
                reader.word(
                    "`strategy`",
                    n,
                    &[("merge", Strategy::Merge), ("rebase", Strategy::Rebase)],
                )
            })
            .unwrap_or_default(),
        gates: fields
            .get("gates")
            .map(|n| ids(reader, "`gates`", n))
            .unwrap_or_default(),
    }
}

fn args(reader: &mut Reader, node: &Yaml) -> BTreeMap<String, Arg> {
    let Value::Map(entries) = &node.value else {
        reader.problem(
            node.at,
            "`args` must be a mapping of argument names to `{ default: …, description: … }`",
        );
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for (key, value) in entries {
        let Some(name) = id_like(reader, "an argument's name", key) else {
            continue;
        };
        let arg = if matches!(value.value, Value::Null) {
            Arg {
                default: None,
                description: None,
            }
        } else {
            let f = reader.fields(&format!("argument `{name}`"), value, ARG_KEYS);
            Arg {
                default: f.get("default").and_then(|d| scalar_text(reader, d)),
                description: f
                    .get("description")
                    .and_then(|d| reader.string("`description`", d)),
            }
        };
        out.insert(name, arg);
    }
    out
}

/// An argument's default: a string, or a number or boolean read as its text.
fn scalar_text(reader: &mut Reader, node: &Yaml) -> Option<String> {
    match &node.value {
        Value::Str(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => {
            reader.problem(node.at, "an argument's `default` must be a string");
            None
        }
    }
}

fn budget(reader: &mut Reader, node: &Yaml) -> Budget {
    let f = reader.fields("`budget`", node, BUDGET_KEYS);
    Budget {
        dispatches: f
            .get("dispatches")
            .and_then(|n| reader.integer("`budget.dispatches`", n, 1, 100_000)),
        tokens: f
            .get("tokens")
            .and_then(|n| reader.integer("`budget.tokens`", n, 1, u64::MAX >> 1)),
        cost_usd: f
            .get("costUsd")
            .and_then(|n| reader.number("`budget.costUsd`", n, 1_000_000.0)),
        wall_clock_sec: f
            .get("wallClockSec")
            .and_then(|n| reader.integer("`budget.wallClockSec`", n, 1, 604_800)),
    }
}

/// A list of verify.yaml gate ids (their shape only: the verify.yaml is read at preflight).
fn ids(reader: &mut Reader, what: &str, node: &Yaml) -> Vec<String> {
    let list = reader.strings(what, node);
    if list.is_empty() && matches!(node.value, Value::List(_)) {
        reader.problem(
            node.at,
            format!("{what} is empty; name at least one gate id"),
        );
    }
    list.into_iter().map(|(id, _)| id).collect()
}

/// An agent as `greenlight goal run --agent` takes it; the template itself is split at preflight.
fn agent_spec(reader: &mut Reader, node: &Yaml) -> Option<String> {
    let spec = reader.string("`agent`", node)?;
    let known = matches!(spec.as_str(), "claude" | "codex" | "openai")
        || spec
            .strip_prefix("command:")
            .is_some_and(|t| !t.trim().is_empty());
    if known {
        Some(spec)
    } else {
        reader.problem(
            node.at,
            format!(
                "`agent` must be claude, codex, openai or command:<argv template>, found `{spec}`"
            ),
        );
        None
    }
}

/// Whether `text` is an id: lowercase letters, digits, `-` and `_`, starting with a letter or a
/// digit, at most 64 characters.
pub fn is_id(text: &str) -> bool {
    text.len() <= MAX_ID_LEN
        && text
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

fn id_like(reader: &mut Reader, what: &str, node: &Yaml) -> Option<String> {
    let text = reader.string(what, node)?;
    if is_id(&text) {
        Some(text)
    } else {
        reader.problem(
            node.at,
            format!(
                "{what} must be lowercase letters, digits, `-` or `_`, starting with a letter or \
                 digit, at most {MAX_ID_LEN} characters; found `{text}`"
            ),
        );
        None
    }
}
