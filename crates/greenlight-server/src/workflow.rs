//! A workflow run as the dashboard shows it: the plan as a graph (its steps in plan order, each
//! fan-out's and land's members under it) with each node's state, folded from the run's
//! `wf-<id>` frames, and the run's header from `greenlight_run::workflow_control`.
//!
//! The one rule: **a node's state is decided here, from the frames, once**. The page renders
//! this snapshot and the script re-fetches it when a workflow frame arrives, so the HTML and
//! the live page can never disagree about a member.

use std::collections::BTreeMap;

use greenlight_run::workflow_control;
use greenlight_store::greenlight_types::MemberState;
use greenlight_store::{Reads, Store, WorkflowRunId};
use greenlight_stream::{Frame, FrameBody};
use serde::Serialize;
use serde_json::Value;

use crate::error::ApiError;

/// At most this many frames are folded into a snapshot; a run's stream is a few frames per
/// dispatch, so this covers thousands of members.
const MAX_FRAMES: usize = 100_000;

/// One node of the plan's graph: a step, or one member (item) of a fan-out or land step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    /// The step's id.
    pub step: String,
    /// The member's item key; `None` for the step itself.
    pub item: Option<String>,
    /// The step's kind (`agent`, `gate`, `fanout`, `join`, `pause`, `land`; empty for a member).
    pub kind: String,
    /// The steps this one needs (and the fan-out a join or land is `for`).
    pub needs: Vec<String>,
    /// `pending`, `running`, `gating`, `passed`, `failed`, `paused`, `landing`, `landed`, or the
    /// outcome a landing stopped with.
    pub state: String,
    /// The reason of a failure, or what a member's worktree is (`kept: …`).
    pub detail: Option<String>,
}

/// What `GET /api/workflows/{id}` answers and `/workflows/{id}` renders.
#[derive(Debug, Clone, Serialize)]
pub struct WorkflowSnapshot {
    /// The run's id (its stream is `wf-<id>`).
    pub id: i64,
    /// The plan's name.
    pub name: String,
    /// `running`, `paused`, `completed`, `failed`, `terminal` or `interrupted`.
    pub status: String,
    /// Why it paused or ended.
    pub reason: Option<String>,
    /// Dispatch units spent.
    pub units_spent: u64,
    /// Dispatch units granted (`None`: no limit).
    pub units_total: Option<u64>,
    /// The worktree it was started in (lossy UTF-8).
    pub worktree: String,
    /// Started, ms since the epoch.
    pub started_at: i64,
    /// Ended, ms since the epoch.
    pub ended_at: Option<i64>,
    /// Its stream's last seq.
    pub head: u64,
    /// The plan's graph, steps in plan order, each followed by its members.
    pub nodes: Vec<Node>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The graph's nodes from the plan's canonical JSON: each step, and under a fan-out its items,
/// under a land the items of the fan-out it lands. A plan this greenlight cannot read (it is
/// opaque to the store) gives no nodes; the frames still add the ones they name.
fn plan_nodes(plan_json: &str) -> Vec<Node> {
    let plan: Value = serde_json::from_str(plan_json).unwrap_or(Value::Null);
    let steps = plan
        .get("steps")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let items_of: BTreeMap<String, Vec<String>> = steps
        .iter()
        .filter(|s| s.get("kind").and_then(Value::as_str) == Some("fanout"))
        .filter_map(|s| Some((s.get("id")?.as_str()?.to_owned(), strings(s.get("items")))))
        .collect();
    let mut nodes = Vec::new();
    for step in &steps {
        let Some(id) = step.get("id").and_then(Value::as_str) else {
            continue;
        };
        let kind = step
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut needs = strings(step.get("needs"));
        let target = step.get("for").and_then(Value::as_str);
        if let Some(fanout) = target.filter(|f| !needs.iter().any(|n| n == f)) {
            needs.push(fanout.to_owned());
        }
        let members = match kind.as_str() {
            "fanout" => items_of.get(id).cloned().unwrap_or_default(),
            "land" => target
                .and_then(|f| items_of.get(f))
                .cloned()
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        nodes.push(node(id, None, &kind, needs));
        for item in members {
            nodes.push(node(id, Some(&item), "", Vec::new()));
        }
    }
    nodes
}

fn node(step: &str, item: Option<&str>, kind: &str, needs: Vec<String>) -> Node {
    Node {
        step: step.to_owned(),
        item: item.map(str::to_owned),
        kind: kind.to_owned(),
        needs,
        state: "pending".into(),
        detail: None,
    }
}

/// Sets the state of node (`step`, `item`), adding it after its step (or at the end) when the
/// plan did not name it.
fn set(nodes: &mut Vec<Node>, step: &str, item: Option<&str>, state: &str, detail: Option<&str>) {
    let at = nodes
        .iter()
        .position(|n| n.step == step && n.item.as_deref() == item);
    let at = match at {
        Some(at) => at,
        None => {
            let after = nodes
                .iter()
                .rposition(|n| n.step == step)
                .map_or(nodes.len(), |i| i + 1);
            nodes.insert(after, node(step, item, "", Vec::new()));
            after
        }
    };
    if let Some(n) = nodes.get_mut(at) {
        n.state = state.to_owned();
        n.detail = detail.map(str::to_owned);
    }
}

/// Folds one frame into the graph.
fn fold(nodes: &mut Vec<Node>, frame: &Frame) {
    match &frame.body {
        FrameBody::WorkflowDispatched { step, item, .. } => {
            set(nodes, step, item.as_deref(), "running", None);
        }
        FrameBody::WorkflowSettled {
            step,
            item,
            outcome,
            reason,
            ..
        } => {
            let state = if outcome == "ok" { "passed" } else { "failed" };
            let detail = reason
                .as_deref()
                .or((outcome != "ok").then_some(outcome.as_str()));
            set(nodes, step, item.as_deref(), state, detail);
        }
        FrameBody::WorkflowGateStarted { step, item, .. } => {
            set(nodes, step, item.as_deref(), "gating", None);
        }
        FrameBody::WorkflowGateJudged {
            step,
            item,
            passed,
            route,
            ..
        } => {
            let state = if *passed { "passed" } else { "failed" };
            set(nodes, step, item.as_deref(), state, route.as_deref());
        }
        FrameBody::WorkflowJoinDecided { step, passed, .. } => {
            set(
                nodes,
                step,
                None,
                if *passed { "passed" } else { "failed" },
                None,
            );
        }
        FrameBody::WorkflowPaused {
            step: Some(step),
            reason,
            ..
        } => set(nodes, step, None, "paused", Some(reason)),
        FrameBody::WorkflowLandStarted { step, item, .. } => {
            set(nodes, step, item.as_deref(), "landing", None);
        }
        FrameBody::WorkflowLanded {
            step,
            item,
            outcome,
            ..
        } => set(nodes, step, item.as_deref(), outcome, None),
        _ => {}
    }
}

/// A fan-out's (or a land's) own state, from its members' when no frame named the step itself:
/// `running` while any member has started and not all have ended, `passed` when every member
/// passed (or landed), `failed` when every member ended and one did not. Once the run has
/// ended (`stopped`: completed, failed or terminal), a member never started is left out (a land
/// does not try a member its join dropped); a paused or interrupted run's is still to come.
fn roll_up_members(nodes: &mut [Node], stopped: bool) {
    let done = |s: &str| matches!(s, "passed" | "landed") || (stopped && s == "pending");
    let started = |s: &str| s != "pending";
    let ended =
        |s: &str| !matches!(s, "running" | "gating" | "landing") && (stopped || s != "pending");
    for i in 0..nodes.len() {
        if nodes[i].item.is_some() || nodes[i].state != "pending" {
            continue;
        }
        let step = nodes[i].step.clone();
        let members: Vec<&str> = nodes
            .iter()
            .filter(|n| n.step == step && n.item.is_some())
            .map(|n| n.state.as_str())
            .collect();
        let state = if members.is_empty() || !members.iter().any(|s| started(s)) {
            continue;
        } else if members.iter().all(|s| done(s)) {
            "passed"
        } else if members.iter().all(|s| ended(s)) {
            "failed"
        } else {
            "running"
        };
        nodes[i].state = state.to_owned();
    }
}

/// A node's state is `running` only while its run is: a run that stopped left nothing running.
fn settle_running(nodes: &mut [Node], status: &str) {
    if status == "running" {
        return;
    }
    for n in nodes
        .iter_mut()
        .filter(|n| matches!(n.state.as_str(), "running" | "gating" | "landing"))
    {
        n.state = status.to_owned();
    }
}

/// The snapshot of workflow run `id`, from one read of the store.
pub fn snapshot(store: &mut Store, id: i64) -> Result<WorkflowSnapshot, ApiError> {
    let report = workflow_control::status(store, WorkflowRunId(id)).map_err(|e| match e {
        workflow_control::Error::NoSuchRun(_) => ApiError::not_found(e.to_string()),
        workflow_control::Error::Store(e) => ApiError::from(e),
    })?;
    let run = &report.run;
    let frames = store.frames_after(run.id.stream(), 0, MAX_FRAMES)?;
    let (_, head) = store.frame_bounds(run.id.stream())?;
    let mut nodes = plan_nodes(&run.plan_json);
    for frame in &frames {
        fold(&mut nodes, frame);
    }
    roll_up_members(&mut nodes, run.status.is_ended());
    let status = run.status.as_str().to_owned();
    settle_running(&mut nodes, &status);
    for member in &report.members {
        if member.state == MemberState::Kept {
            let why = format!("kept: {}", member.why_kept.as_deref().unwrap_or(""));
            if let Some(n) = nodes
                .iter_mut()
                .find(|n| n.step == member.step && n.item == member.item)
            {
                n.detail = Some(why);
            }
        }
    }
    Ok(WorkflowSnapshot {
        id: run.id.0,
        name: run.name.clone(),
        status,
        reason: run.detail.as_ref().map(|d| d.reason.clone()),
        units_spent: run.spent.units,
        units_total: run.units_total(),
        worktree: run.worktree.to_string_lossy().into_owned(),
        started_at: run.started_at,
        ended_at: run.ended_at,
        head,
        nodes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = r#"{"steps":[
        {"id":"plan","kind":"agent"},
        {"id":"fix","kind":"fanout","needs":["plan"],"items":["a","b"]},
        {"id":"fixed","kind":"join","for":"fix","policy":"all-activated"},
        {"id":"ship","kind":"land","needs":["fixed"],"for":"fix"}]}"#;

    fn frame(seq: u64, body: FrameBody) -> Frame {
        Frame {
            stream: greenlight_stream::StreamId::Workflow(1),
            seq,
            at: 0,
            body,
        }
    }

    #[test]
    fn a_fanout_is_passed_when_every_member_passed_and_failed_when_all_ended_and_one_failed() {
        let mut nodes = plan_nodes(PLAN);
        for (item, state) in [("a", "passed"), ("b", "passed")] {
            set(&mut nodes, "fix", Some(item), state, None);
        }
        set(&mut nodes, "ship", Some("a"), "landed", None);
        set(&mut nodes, "ship", Some("b"), "land-conflict", None);
        roll_up_members(&mut nodes, false);
        let fix = nodes
            .iter()
            .find(|n| n.step == "fix" && n.item.is_none())
            .map(|n| n.state.as_str());
        let ship = nodes
            .iter()
            .find(|n| n.step == "ship" && n.item.is_none())
            .map(|n| n.state.as_str());
        assert_eq!((fix, ship), (Some("passed"), Some("failed")));

        // A run that ended landed what its join kept; the member it dropped was never tried.
        let mut nodes = plan_nodes(PLAN);
        set(&mut nodes, "ship", Some("a"), "landed", None);
        roll_up_members(&mut nodes, true);
        let ship = nodes
            .iter()
            .find(|n| n.step == "ship" && n.item.is_none())
            .map(|n| n.state.as_str());
        assert_eq!(ship, Some("passed"));
    }

    #[test]
    fn the_graph_has_each_step_and_each_fanout_and_land_member_in_plan_order() {
        let nodes = plan_nodes(PLAN);
        let names: Vec<_> = nodes
            .iter()
            .map(|n| {
                format!(
                    "{}{}",
                    n.step,
                    n.item
                        .as_deref()
                        .map(|i| format!("/{i}"))
                        .unwrap_or_default()
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                "plan", "fix", "fix/a", "fix/b", "fixed", "ship", "ship/a", "ship/b"
            ]
        );
        assert_eq!(
            nodes[4].needs,
            ["fix"],
            "a join needs the fan-out it is for"
        );
        assert!(plan_nodes("not json").is_empty());
    }

    #[test]
    fn frames_fold_into_each_members_state_and_a_stopped_run_leaves_nothing_running() {
        let mut nodes = plan_nodes(PLAN);
        let dispatched = |item: &str| FrameBody::WorkflowDispatched {
            run: 1,
            step: "fix".into(),
            item: Some(item.into()),
            attempt: 1,
            family: "command".into(),
            model: None,
        };
        for (seq, body) in [
            dispatched("a"),
            dispatched("b"),
            FrameBody::WorkflowSettled {
                run: 1,
                step: "fix".into(),
                item: Some("b".into()),
                attempt: 1,
                outcome: "failed".into(),
                reason: Some("deliverable-not-landed".into()),
                wall_ms: None,
                tokens: None,
            },
            FrameBody::WorkflowLanded {
                run: 1,
                step: "ship".into(),
                item: Some("c".into()),
                branch: "wf/c".into(),
                outcome: "land-conflict".into(),
                commit: None,
            },
        ]
        .into_iter()
        .enumerate()
        {
            fold(&mut nodes, &frame(seq as u64 + 1, body));
        }
        let state = |nodes: &[Node], step: &str, item: Option<&str>| {
            let n = nodes
                .iter()
                .find(|n| n.step == step && n.item.as_deref() == item)
                .unwrap_or_else(|| panic!("{step} {item:?}"));
            (n.state.clone(), n.detail.clone())
        };
        assert_eq!(state(&nodes, "fix", Some("a")), ("running".into(), None));
        assert_eq!(
            state(&nodes, "fix", Some("b")),
            ("failed".into(), Some("deliverable-not-landed".into()))
        );
        assert_eq!(
            state(&nodes, "ship", Some("c")).0,
            "land-conflict",
            "a member the plan did not list is added"
        );
        roll_up_members(&mut nodes, false);
        assert_eq!(
            state(&nodes, "fix", None).0,
            "running",
            "a member started, one not ended"
        );
        assert_eq!(
            state(&nodes, "ship", None).0,
            "running",
            "one member landing stopped, two not started"
        );
        settle_running(&mut nodes, "interrupted");
        assert_eq!(state(&nodes, "fix", Some("a")).0, "interrupted");
        assert_eq!(state(&nodes, "fixed", None).0, "pending");
    }
}
