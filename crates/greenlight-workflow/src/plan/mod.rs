//! A workflow plan: read from YAML, checked whole, and named by its digest.
//!
//! [`check`] is the one way in: it reads the text into a tree that keeps positions, holds every
//! key to the closed set and every value to its domain, then checks the invariants across steps,
//! and returns either a [`Plan`] or every problem found, each at its line and column. No file is
//! read here: what needs the file system (verify.yaml gate ids, symlinks on declared paths) is
//! the preflight's.

mod check;
pub mod model;
mod read;
mod yaml;

use std::collections::{BTreeMap, BTreeSet};

pub use check::{active_items, deps, worst_case};
pub use model::*;
pub use read::is_id;
pub use yaml::{At, Problem};

/// Reads and checks a plan. `Err` holds every problem, in file order.
pub fn check(text: &str) -> Result<Plan, Vec<Problem>> {
    let root = yaml::parse(text).map_err(|p| vec![p])?;
    let mut reader = yaml::Reader::default();
    let read = read::plan(&mut reader, &root);
    check::invariants(&mut reader, &read);
    if reader.problems.is_empty() {
        Ok(read.plan)
    } else {
        let mut problems = reader.problems;
        problems.sort();
        problems.dedup();
        Err(problems)
    }
}

/// The plan's canonical bytes: its JSON form, fields in declaration order and maps sorted, so two
/// files that say the same plan (comments, key order, quoting aside) have the same bytes.
pub fn canonical_bytes(plan: &Plan) -> Vec<u8> {
    serde_json::to_vec(plan).unwrap_or_default()
}

/// The plan's digest: BLAKE3 of its canonical bytes, in hex. A resume refuses a plan whose
/// digest changed.
pub fn digest(plan: &Plan) -> String {
    blake3::hash(&canonical_bytes(plan)).to_hex().to_string()
}

/// The arguments a pause resumes with: given on resume, so left out of the argument hash.
pub fn resume_args(plan: &Plan) -> BTreeSet<&str> {
    plan.steps
        .iter()
        .filter_map(|s| match &s.kind {
            Kind::Pause(p) => Some(p.resume_arg.as_str()),
            _ => None,
        })
        .collect()
}

/// The argument hash: BLAKE3 over the run's arguments (given values over defaults) without the
/// resume arguments, so resuming with the answer a pause waits for is not a changed input while
/// any other changed argument is.
pub fn args_hash(plan: &Plan, given: &BTreeMap<String, String>) -> String {
    let resume = resume_args(plan);
    let mut values: BTreeMap<&str, &str> = plan
        .args
        .iter()
        .filter_map(|(name, arg)| Some((name.as_str(), arg.default.as_deref()?)))
        .collect();
    values.extend(given.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    values.retain(|name, _| !resume.contains(name));
    blake3::hash(&serde_json::to_vec(&values).unwrap_or_default())
        .to_hex()
        .to_string()
}

/// `text` with `{{item}}` (the member's key) and `{{args.NAME}}` (an argument's value) filled
/// in one left-to-right pass, so a value that itself reads `{{…}}` is never filled again. A
/// placeholder that names nothing here stays as written (the checks refuse such a plan).
pub fn fill(text: &str, item: Option<&str>, args: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        out.push_str(&rest[..start]);
        let name = after[..end].trim();
        let value = match name.strip_prefix("args.") {
            Some(arg) => args.get(arg).map(String::as_str),
            None if name == "item" => item,
            None => None,
        };
        match value {
            Some(v) => out.push_str(v),
            None => out.push_str(&rest[start..start + 2 + end + 2]),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// What a checked plan amounts to, for a summary line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Steps written.
    pub steps: usize,
    /// Fan-out steps.
    pub fanouts: usize,
    /// Members the fan-outs run, all together.
    pub members: u64,
    /// Dispatch units the whole plan may take at worst.
    pub worst_case_dispatches: u64,
}

/// Counts what `plan` runs.
pub fn summary(plan: &Plan) -> Summary {
    let fanouts: Vec<_> = plan
        .steps
        .iter()
        .filter_map(|s| match &s.kind {
            Kind::Fanout(f) => Some(f),
            _ => None,
        })
        .collect();
    Summary {
        steps: plan.steps.len(),
        fanouts: fanouts.len(),
        members: fanouts.iter().map(|f| active_items(f)).sum(),
        worst_case_dispatches: plan.steps.iter().map(|s| worst_case(plan, s)).sum(),
    }
}

/// The JSON Schema of a plan, generated from the types (committed as `schemas/workflow-plan.json`).
pub fn schema() -> serde_json::Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(Plan)).unwrap_or_default();
    tidy(&mut schema);
    schema
}

/// Takes `null` out of every optional value's schema — a plan says "none" by leaving a key out,
/// and the reader refuses `key: null`, so the schema must too — and sorts every object's keys,
/// so the committed file does not depend on whether serde_json keeps insertion order in this
/// build (feature unification turns `preserve_order` on in the workspace).
fn tidy(value: &mut serde_json::Value) {
    use serde_json::Value as J;
    match value {
        J::Object(map) => {
            if let Some(J::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if let [only] = types.as_slice() {
                    let only = only.clone();
                    map.insert("type".into(), only);
                }
            }
            if let Some(J::Array(options)) = map.get("anyOf") {
                let kept: Vec<J> = options
                    .iter()
                    .filter(|o| o.get("type").is_none_or(|t| t != "null"))
                    .cloned()
                    .collect();
                if let [only] = kept.as_slice() {
                    let only = only.clone();
                    map.remove("anyOf");
                    if let J::Object(inner) = only {
                        map.extend(inner);
                    }
                }
            }
            let mut entries: Vec<_> = std::mem::take(map).into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (_, v) in &mut entries {
                tidy(v);
            }
            *map = entries.into_iter().collect();
        }
        J::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}
