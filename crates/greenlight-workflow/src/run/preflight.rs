//! What is checked before anything of a run starts: the arguments, the verify.yaml gate ids,
//! the declared paths against the real tree, and each agent the plan uses, probed once.
//!
//! The rule: a problem found here runs nothing and spends nothing; each message names the
//! step, the file or the value, and what to do.

use std::collections::BTreeMap;
use std::path::Path;

use camino::Utf8PathBuf;
use greenlight_agent::check_all;
use greenlight_gate::config::{Loaded, Snapshot};

use crate::plan::{self, Kind, Plan};
use crate::run::dispatch::Agents;

/// The arguments of a run: declared defaults, then the given values. An undeclared name, or a
/// required argument not given, is refused (a pause's resume argument is given on resume).
pub fn arguments(
    plan: &Plan,
    given: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    for name in given.keys() {
        if !plan.args.contains_key(name) {
            let known: Vec<&str> = plan.args.keys().map(String::as_str).collect();
            return Err(format!(
                "--arg {name}: the plan declares no argument `{name}` (it declares: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        }
    }
    let resume = plan::resume_args(plan);
    let mut values = BTreeMap::new();
    for (name, arg) in &plan.args {
        match (given.get(name), &arg.default) {
            (Some(v), _) => {
                values.insert(name.clone(), v.clone());
            }
            (None, Some(d)) => {
                values.insert(name.clone(), d.clone());
            }
            (None, None) if resume.contains(name.as_str()) => {}
            (None, None) => {
                return Err(format!(
                    "the plan's argument `{name}` has no default; give it with --arg {name}=VALUE"
                ));
            }
        }
    }
    Ok(values)
}

/// The verify.yaml files the plan's gate steps judge by, read now from the worktree the run
/// starts in (`top`), with every `gates:` id checked against the file.
pub fn gates(
    plan: &Plan,
    top: &Path,
) -> Result<(Option<Snapshot>, BTreeMap<String, Snapshot>), String> {
    let mut config: Option<(Snapshot, Loaded)> = None;
    let mut files = BTreeMap::new();
    for step in &plan.steps {
        let Kind::Gate(gate) = &step.kind else {
            continue;
        };
        if !gate.gates.is_empty() {
            if config.is_none() {
                let found = greenlight_gate::config::locate(top).ok_or_else(|| {
                    format!(
                        "gate step `{}` names verify.yaml gates, but {} has no verify.yaml (.greenlight/verify.yaml or .commandmate/verify.yaml); write one, or name a file with `verify:`",
                        step.id,
                        top.display()
                    )
                })?;
                config = Some(take(&found.path)?);
            }
            if let Some((snapshot, loaded)) = &config {
                for id in &gate.gates {
                    if !loaded.gates.iter().any(|g| &g.id == id) {
                        let known: Vec<&str> = loaded.gates.iter().map(|g| g.id.as_str()).collect();
                        return Err(format!(
                            "gate step `{}` names gate `{id}`, which {} does not declare (it declares: {})",
                            step.id,
                            snapshot.path,
                            known.join(", ")
                        ));
                    }
                }
            }
        }
        if let Some(file) = &gate.verify {
            check_all(top, std::slice::from_ref(file), &[])
                .map_err(|e| format!("gate step `{}`: {e}", step.id))?;
            let (snapshot, _) =
                take(&top.join(file)).map_err(|e| format!("gate step `{}`: {e}", step.id))?;
            files.insert(file.clone(), snapshot);
        }
    }
    Ok((config.map(|(s, _)| s), files))
}

fn take(path: &Path) -> Result<(Snapshot, Loaded), String> {
    let path = Utf8PathBuf::from_path_buf(path.to_path_buf())
        .map_err(|p| format!("{}: not a UTF-8 path", p.display()))?;
    Snapshot::take(&path).map_err(|e| e.to_string())
}

/// Every declared read and write of every agent step and fan-out member, held to containment
/// (symlinks resolved) under `top`, the tree every worktree is made from.
pub fn containment(plan: &Plan, top: &Path) -> Result<(), String> {
    let no_args = BTreeMap::new();
    for step in &plan.steps {
        let (agent, items): (&plan::Agent, Vec<Option<&str>>) = match &step.kind {
            Kind::Agent(a) => (a, vec![None]),
            Kind::Fanout(f) => (
                &f.template,
                f.items.iter().map(|i| Some(i.as_str())).collect(),
            ),
            _ => continue,
        };
        for item in items {
            let fill = |p: &String| plan::fill(p, item, &no_args);
            let reads: Vec<String> = agent.reads.iter().map(fill).collect();
            let writes: Vec<String> = agent.writes.iter().map(fill).collect();
            check_all(top, &reads, &writes).map_err(|e| match item {
                Some(item) => format!("step `{}` member `{item}`: {e}", step.id),
                None => format!("step `{}`: {e}", step.id),
            })?;
        }
    }
    Ok(())
}

/// An agent as the plan names it and the model it asks for.
pub type AgentKey = (String, Option<String>);

/// Every agent (and model) the plan dispatches, once each, in plan order.
pub fn agents_used(plan: &Plan) -> Vec<AgentKey> {
    let mut out: Vec<AgentKey> = Vec::new();
    let mut add = |agent: &Option<String>, model: &Option<String>| {
        if let Some(agent) = agent.as_ref().or(plan.agent.as_ref()) {
            let key = (agent.clone(), model.clone().or_else(|| plan.model.clone()));
            if !out.contains(&key) {
                out.push(key);
            }
        }
    };
    for step in &plan.steps {
        match &step.kind {
            Kind::Agent(a) => add(&a.agent, &a.model),
            Kind::Fanout(f) => add(&f.template.agent, &f.template.model),
            Kind::Gate(g) => {
                if let Some(v) = &g.verdict {
                    add(&v.agent, &v.model);
                }
            }
            _ => {}
        }
    }
    out
}

/// Probes `key`'s agent in `top` once: the id that answered, or why none did.
pub async fn probe(agents: &dyn Agents, key: &AgentKey) -> Result<String, String> {
    let (dispatcher, model) = agents.dispatcher(&key.0, key.1.as_deref(), &[])?;
    let probed = dispatcher.probe(std::slice::from_ref(&model)).await;
    probed.id.ok_or_else(|| {
        format!(
            "agent `{}` (model `{model}`) did not answer its probe: {}",
            key.0, probed.detail
        )
    })
}
