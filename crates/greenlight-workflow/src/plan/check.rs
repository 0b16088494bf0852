//! The plan's invariants, checked before anything runs: every one is a problem naming the step
//! and the line it is about.
//!
//! References (needs, fail routes, a join's or a land's fan-out), cycles, bounded fan-out and
//! explicit cuts, named joins, retries only where running twice is safe, a pause wired to a
//! declared argument, deliverables that match their declared writes, placeholders that name
//! something, and a budget that can hold every boundary's worst case.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{Agent, Deliverable, JoinPolicy, Kind, Plan, Step};
use super::read::{Read, StepAt};
use super::yaml::Reader;

/// Checks every invariant; the problems are left in `reader`.
pub fn invariants(reader: &mut Reader, read: &Read) {
    let plan = &read.plan;
    // A repeated id is a problem of its own; references resolve to its first step.
    let mut by_id: BTreeMap<&str, (&Step, &StepAt)> = BTreeMap::new();
    for (s, at) in plan.steps.iter().zip(&read.at) {
        by_id.entry(s.id.as_str()).or_insert((s, at));
    }
    let joined: BTreeSet<&str> = plan
        .steps
        .iter()
        .filter_map(|s| match &s.kind {
            Kind::Join(j) => Some(j.fanout.as_str()),
            _ => None,
        })
        .collect();
    for (step, at) in plan.steps.iter().zip(&read.at) {
        let id = &step.id;
        for (need, need_at) in step.needs.iter().zip(&at.needs) {
            if need == id {
                reader.problem(
                    *need_at,
                    format!("step `{id}` needs itself; remove `{need}`"),
                );
            } else if !read.ids.contains(need) {
                reader.problem(
                    *need_at,
                    format!("step `{id}` needs `{need}`, which is no step of this plan"),
                );
            } else if let Some((
                Step {
                    kind: Kind::Fanout(_),
                    ..
                },
                _,
            )) = by_id.get(need.as_str())
                && !matches!(step.kind, Kind::Join(_) | Kind::Land(_))
            {
                reader.problem(
                    *need_at,
                    format!(
                        "step `{id}` needs fan-out `{need}` directly; need its join instead, \
                         which decides whether the fan-out passed"
                    ),
                );
            }
        }
        match &step.kind {
            Kind::Agent(agent) => agent_step(reader, plan, id, at, agent, false),
            Kind::Fanout(fanout) => {
                agent_step(reader, plan, id, at, &fanout.template, true);
                let declared = fanout.items.len() as u64;
                if let Some(cut) = &fanout.truncate
                    && cut.to >= declared
                {
                    reader.problem(
                        at.of("truncate"),
                        format!(
                            "fan-out `{id}` truncates to {} of its {declared} items, which cuts \
                             nothing; remove `truncate`",
                            cut.to
                        ),
                    );
                }
                if !joined.contains(id.as_str()) {
                    reader.problem(
                        at.step,
                        format!(
                            "fan-out `{id}` has no join; add a step `kind: join` with `for: {id}` \
                             and a policy"
                        ),
                    );
                }
            }
            Kind::Join(join) => {
                if let Some(fanout) = fanout_named(reader, &by_id, read, id, at, &join.fanout) {
                    let active = active_items(fanout);
                    if let JoinPolicy::Quorum(n) = join.policy
                        && n > active
                    {
                        reader.problem(
                            at.of("policy"),
                            format!(
                                "join `{id}` asks a quorum of {n}, but fan-out `{}` runs only \
                                 {active} members",
                                join.fanout
                            ),
                        );
                    }
                }
            }
            Kind::Land(land) => {
                fanout_named(reader, &by_id, read, id, at, &land.fanout);
            }
            Kind::Gate(gate) => {
                let route = gate.fail_route.as_deref();
                match route.filter(|r| !r.starts_with("terminal:")) {
                    Some(target) if target == id => reader.problem(
                        at.of("failRoute"),
                        format!(
                            "gate `{id}` routes its failure to itself; name the step that repairs"
                        ),
                    ),
                    Some(target) => match by_id.get(target) {
                        Some((
                            Step {
                                kind: Kind::Agent(_),
                                ..
                            },
                            _,
                        )) if waits_for(&by_id, id, target) => {}
                        Some((
                            Step {
                                kind: Kind::Agent(_),
                                ..
                            },
                            _,
                        )) => reader.problem(
                            at.of("failRoute"),
                            format!(
                                "gate `{id}` routes its failure to `{target}`, which it does not \
                                 wait for; a fail route redoes work the gate judges, so add \
                                 `{target}` to the gate's needs (directly or through a step)"
                            ),
                        ),
                        Some(_) => reader.problem(
                            at.of("failRoute"),
                            format!(
                                "gate `{id}` routes its failure to `{target}`, which is no agent \
                                 step; a fail route re-runs an agent"
                            ),
                        ),
                        None if read.ids.contains(target) => {}
                        None => reader.problem(
                            at.of("failRoute"),
                            format!(
                                "gate `{id}` routes its failure to `{target}`, which is no step \
                                 of this plan (write `terminal:<label>` to end the run there)"
                            ),
                        ),
                    },
                    None if gate.max_redos > 0 => reader.problem(
                        at.step,
                        format!(
                            "gate `{id}` has maxRedos {} but no `failRoute` to a step to redo; \
                             add one or remove maxRedos",
                            gate.max_redos
                        ),
                    ),
                    None => {}
                }
                if let Some(verdict) = &gate.verdict
                    && verdict.agent.is_none()
                    && plan.agent.is_none()
                {
                    reader.problem(
                        at.step,
                        format!("gate `{id}`'s verdict names no agent and the plan has none; add `agent:`"),
                    );
                }
            }
            Kind::Pause(pause) => {
                if !plan.args.contains_key(&pause.resume_arg) {
                    reader.problem(
                        at.of("resumeArg"),
                        format!(
                            "pause `{id}` resumes with argument `{}`, which `args` does not \
                             declare; add `{}:` under `args`",
                            pause.resume_arg, pause.resume_arg
                        ),
                    );
                }
            }
        }
    }
    cycles(reader, read);
    budget(reader, read);
}

/// Whether step `from` waits for `target`, through any chain of dependencies.
fn waits_for(by_id: &BTreeMap<&str, (&Step, &StepAt)>, from: &str, target: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from];
    while let Some(id) = todo.pop() {
        let Some((step, _)) = by_id.get(id) else {
            continue;
        };
        for dep in deps(step) {
            if dep == target {
                return true;
            }
            if seen.insert(dep) {
                todo.push(dep);
            }
        }
    }
    false
}

/// The fan-out a join or a land names, or a problem when it names none.
fn fanout_named<'p>(
    reader: &mut Reader,
    by_id: &BTreeMap<&str, (&'p Step, &StepAt)>,
    read: &Read,
    id: &str,
    at: &StepAt,
    target: &str,
) -> Option<&'p super::model::Fanout> {
    match by_id.get(target) {
        Some((
            Step {
                kind: Kind::Fanout(f),
                ..
            },
            _,
        )) => Some(f),
        Some(_) => {
            reader.problem(
                at.of("for"),
                format!("step `{id}` is `for` `{target}`, which is no fan-out"),
            );
            None
        }
        None if read.ids.contains(target) || target.is_empty() => None,
        None => {
            reader.problem(
                at.of("for"),
                format!("step `{id}` is `for` `{target}`, which is no step of this plan"),
            );
            None
        }
    }
}

/// How many of a fan-out's items run (all, or the first `truncate.to`).
pub fn active_items(fanout: &super::model::Fanout) -> u64 {
    let declared = fanout.items.len() as u64;
    fanout
        .truncate
        .as_ref()
        .map_or(declared, |t| t.to.min(declared))
}

fn agent_step(
    reader: &mut Reader,
    plan: &Plan,
    id: &str,
    at: &StepAt,
    agent: &Agent,
    member: bool,
) {
    let attempts = agent.retry.as_ref().map_or(1, |r| r.max_attempts);
    if attempts > 1 && !agent.idempotent {
        reader.problem(
            at.of("retry"),
            format!(
                "step `{id}` is retried ({attempts} attempts) but not marked `idempotent: true`; \
                 a retry runs it twice, so mark it or set maxAttempts to 1"
            ),
        );
    }
    if attempts > 1 && agent.retry.as_ref().is_some_and(|r| r.on.is_empty()) {
        reader.problem(
            at.of("retry"),
            format!(
                "step `{id}` is retried but `retry.on` names no failure class (timeout, \
                 transport, malformed-output, policy-refusal); no failure would be retried"
            ),
        );
    }
    match agent.deliverable {
        Deliverable::File if agent.writes.is_empty() => reader.problem(
            at.step,
            format!(
                "step `{id}` delivers a file but declares no `writes`; name the files it must write"
            ),
        ),
        Deliverable::ReturnValue if !agent.writes.is_empty() => reader.problem(
            at.step,
            format!(
                "step `{id}` declares `writes` but delivers its reply; add `deliverable: file` so \
                 the writes are checked"
            ),
        ),
        _ => {}
    }
    if agent.agent.is_none() && plan.agent.is_none() {
        reader.problem(
            at.step,
            format!("step `{id}` names no agent and the plan has none; add `agent:` to the step or the plan"),
        );
    }
    let prompt_at = at.of("prompt");
    let texts = std::iter::once(&agent.prompt)
        .chain(&agent.reads)
        .chain(&agent.writes);
    let mut names_item = false;
    for text in texts {
        for name in placeholders(text) {
            if name == "item" {
                names_item = true;
                if !member {
                    reader.problem(
                        prompt_at,
                        format!(
                            "step `{id}` uses `{{{{item}}}}`, which only a fan-out's template has"
                        ),
                    );
                }
            } else if let Some(arg) = name.strip_prefix("args.") {
                if !plan.args.contains_key(arg) {
                    reader.problem(
                        prompt_at,
                        format!(
                            "step `{id}` uses `{{{{{name}}}}}`, but `args` declares no `{arg}`"
                        ),
                    );
                }
            } else {
                reader.problem(
                    prompt_at,
                    format!(
                        "step `{id}` uses `{{{{{name}}}}}`; a placeholder is `{{{{item}}}}` or \
                         `{{{{args.NAME}}}}`"
                    ),
                );
            }
        }
    }
    if member && !names_item {
        reader.problem(
            prompt_at,
            format!(
                "fan-out `{id}`'s template never uses `{{{{item}}}}`, so every member would be \
                 asked the same; name the item in its prompt"
            ),
        );
    }
}

/// The names inside `{{…}}` in `text`, trimmed.
fn placeholders(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        out.push(after[..end].trim());
        rest = &after[end + 2..];
    }
    out
}

/// Every cycle of `needs` (a join's or a land's fan-out counts as a need), each named once, at
/// the line of the step where it was entered.
fn cycles(reader: &mut Reader, read: &Read) {
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, s) in read.plan.steps.iter().enumerate() {
        index.entry(s.id.as_str()).or_insert(i);
    }
    let edges: Vec<Vec<usize>> = read
        .plan
        .steps
        .iter()
        .map(|s| {
            deps(s)
                .into_iter()
                // A step that needs itself is reported as such, not as a cycle.
                .filter(|d| *d != s.id)
                .filter_map(|d| index.get(d).copied())
                .collect()
        })
        .collect();
    // 0: not seen, 1: on the current path, 2: done.
    let mut state = vec![0u8; edges.len()];
    let mut path = Vec::new();
    for start in 0..edges.len() {
        visit(
            start,
            &edges,
            &mut state,
            &mut path,
            &mut |cycle: &[usize]| {
                let names: Vec<&str> = cycle
                    .iter()
                    .chain(cycle.first())
                    .map(|&i| read.plan.steps[i].id.as_str())
                    .collect();
                reader.problem(
                    read.at[cycle[0]].step,
                    format!(
                        "the steps {} wait for each other in a cycle; remove one of these needs",
                        names.join(" → ")
                    ),
                );
            },
        );
    }
}

fn visit(
    node: usize,
    edges: &[Vec<usize>],
    state: &mut [u8],
    path: &mut Vec<usize>,
    found: &mut dyn FnMut(&[usize]),
) {
    if state[node] != 0 {
        return;
    }
    state[node] = 1;
    path.push(node);
    for &next in &edges[node] {
        match state[next] {
            0 => visit(next, edges, state, path, found),
            1 => {
                let from = path.iter().position(|&p| p == next).unwrap_or(0);
                found(&path[from..]);
            }
            _ => {}
        }
    }
    path.pop();
    state[node] = 2;
}

/// What a step waits for: its `needs`, and for a join or a land the fan-out it decides or lands.
pub fn deps(step: &Step) -> Vec<&str> {
    let mut out: Vec<&str> = step.needs.iter().map(String::as_str).collect();
    match &step.kind {
        Kind::Join(j) => out.push(&j.fanout),
        Kind::Land(l) => out.push(&l.fanout),
        _ => {}
    }
    out
}

/// The dispatch units a step's boundary reserves before it starts: its worst case.
///
/// An agent step: every attempt. A fan-out: every member that runs, each with every attempt (a
/// region is never interrupted halfway, so it reserves all of it). A gate: one dispatch when an
/// agent gives the verdict, and each redo's route and verdict again. The rest dispatch nothing.
pub fn worst_case(plan: &Plan, step: &Step) -> u64 {
    let attempts = |a: &Agent| a.retry.as_ref().map_or(1, |r| r.max_attempts);
    match &step.kind {
        Kind::Agent(a) => attempts(a),
        Kind::Fanout(f) => active_items(f) * attempts(&f.template),
        Kind::Gate(g) => {
            let verdict = u64::from(g.verdict.is_some());
            let route = g
                .fail_route
                .as_deref()
                .and_then(|r| plan.steps.iter().find(|s| s.id == r))
                .map_or(0, |s| worst_case(plan, s));
            verdict + g.max_redos * (route + verdict)
        }
        Kind::Join(_) | Kind::Pause(_) | Kind::Land(_) => 0,
    }
}

/// A budget smaller than one boundary's worst case could never start that boundary: the run
/// would pause before it on every resume.
fn budget(reader: &mut Reader, read: &Read) {
    let Some(total) = read.plan.budget.dispatches else {
        return;
    };
    for (step, at) in read.plan.steps.iter().zip(&read.at) {
        let need = worst_case(&read.plan, step);
        if need > total {
            reader.problem(
                at.step,
                format!(
                    "step `{}` may take {need} dispatch units at worst, more than the whole \
                     `budget.dispatches` of {total}; raise the budget or lower its attempts, \
                     items or redos",
                    step.id
                ),
            );
        }
    }
}
