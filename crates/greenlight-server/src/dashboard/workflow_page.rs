//! `/workflows`: the workflow runs; `/workflows/{id}`: a run's plan as a graph, each step and
//! member with its state, and the run's timeline.
//!
//! The graph is rendered from [`WorkflowSnapshot`] here and again by `app.js` from the same
//! snapshot when a frame arrives; the element ids and classes are the same in both.

use std::fmt::Write as _;

use greenlight_store::WorkflowRun;

use super::html::{badge, elapsed, esc, layout, time};
use super::pages::timeline;
use crate::workflow::{Node, WorkflowSnapshot};

fn node_item(out: &mut String, node: &Node) {
    let (class, label) = match &node.item {
        Some(item) => ("wf-node wf-member", item.clone()),
        None => ("wf-node wf-step", node.step.clone()),
    };
    let kind = if node.kind.is_empty() {
        String::new()
    } else {
        format!(" <span class=\"muted wf-kind\">{}</span>", esc(&node.kind))
    };
    let needs = if node.needs.is_empty() {
        String::new()
    } else {
        format!(
            " <span class=\"muted wf-needs\">after {}</span>",
            esc(&node.needs.join(", "))
        )
    };
    let detail = node
        .detail
        .as_deref()
        .map(|d| format!(" <span class=\"detail wf-detail\">{}</span>", esc(d)))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "<li class=\"{class}\" data-step=\"{step}\" data-item=\"{item}\" data-state=\"{state_attr}\">\
         <span class=\"wf-name\">{label}</span>{kind} {state}{detail}{needs}</li>",
        step = esc(&node.step),
        item = esc(node.item.as_deref().unwrap_or("")),
        state_attr = esc(&node.state),
        label = esc(&label),
        state = badge(&node.state),
    );
}

/// The page of one workflow run.
pub fn workflow_page(snap: &WorkflowSnapshot) -> String {
    let mut main = String::new();
    let units = match snap.units_total {
        Some(total) => format!("{}/{total}", snap.units_spent),
        None => format!("{} (no limit)", snap.units_spent),
    };
    let _ = write!(
        main,
        "<section class=\"card head\" id=\"wf-head\">\n\
         <div class=\"crumbs\"><a href=\"/\">goals</a> / wf-{id}</div>\n\
         <h1><span id=\"wf-name\">{name}</span> wf-{id}</h1>\n\
         <dl class=\"facts\">\
         <div><dt>Status</dt><dd id=\"wf-status\">{status}</dd></div>\
         <div><dt>Reason</dt><dd id=\"wf-reason\">{reason}</dd></div>\
         <div><dt>Dispatch units</dt><dd id=\"wf-units\">{units}</dd></div>\
         <div><dt>Started</dt><dd id=\"wf-started\">{started}</dd></div>\
         <div class=\"wide\"><dt>Worktree</dt><dd id=\"wf-worktree\" class=\"path\">{wt}</dd></div>\
         </dl>\n</section>\n",
        id = snap.id,
        name = esc(&snap.name),
        status = badge(&snap.status),
        reason = esc(snap.reason.as_deref().unwrap_or("")),
        started = time(snap.started_at),
        wt = esc(&snap.worktree),
    );
    main.push_str(
        "<section class=\"card\">\n<h2>Plan</h2>\n<ol id=\"wf-graph\" class=\"wf-graph\">\n",
    );
    for node in &snap.nodes {
        node_item(&mut main, node);
    }
    let _ = write!(
        main,
        "</ol>\n<p id=\"wf-graph-empty\" class=\"empty\"{}>No steps recorded yet.</p>\n</section>\n",
        if snap.nodes.is_empty() { "" } else { " hidden" }
    );
    timeline(
        &mut main,
        &format!("/api/workflows/{}/events?after=0", snap.id),
    );
    layout(
        &format!("{} wf-{}", snap.name, snap.id),
        &[
            ("page", "workflow".to_owned()),
            ("stream", format!("wf-{}", snap.id)),
            ("stream-url", format!("/api/workflows/{}/stream", snap.id)),
            ("snapshot-url", format!("/api/workflows/{}", snap.id)),
            ("head", snap.head.to_string()),
        ],
        &main,
    )
}

/// The workflow runs, newest first (rendered when asked for; reload for news).
pub fn workflows_page(runs: &[WorkflowRun]) -> String {
    let now = greenlight_store::WallClock::now_ms(&greenlight_store::SystemClock);
    let mut main = String::from(
        "<section class=\"card\">\n<div class=\"crumbs\"><a href=\"/\">goals</a> / workflows</div>\n\
         <h1>Workflow runs</h1>\n<table id=\"workflows\" class=\"list\"><thead><tr><th>#</th>\
         <th>Plan</th><th>Status</th><th>Dispatch units</th><th>Started</th><th>Took</th>\
         <th>Worktree</th></tr></thead>\n<tbody>\n",
    );
    for run in runs {
        let units = match run.units_total() {
            Some(total) => format!("{}/{total}", run.spent.units),
            None => run.spent.units.to_string(),
        };
        let _ = writeln!(
            main,
            "<tr data-workflow=\"{id}\"><td class=\"num\"><a href=\"/workflows/{id}\">wf-{id}</a></td>\
             <td><a href=\"/workflows/{id}\">{name}</a></td><td>{status}</td>\
             <td class=\"num\">{units}</td><td>{started}</td><td class=\"num\">{took}</td>\
             <td class=\"path\" title=\"{wt}\">{wt}</td></tr>",
            id = run.id,
            name = esc(&run.name),
            status = badge(run.status.as_str()),
            started = time(run.started_at),
            took = elapsed(run.started_at, run.ended_at, now),
            wt = esc(&run.worktree.to_string_lossy()),
        );
    }
    let _ = write!(
        main,
        "</tbody></table>\n<p id=\"workflows-empty\" class=\"empty\"{}>No workflow runs yet.</p>\n\
         </section>\n",
        if runs.is_empty() { "" } else { " hidden" }
    );
    layout("Workflow runs", &[("page", "workflows".to_owned())], &main)
}
