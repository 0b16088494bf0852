//! The three pages, rendered from what the store says now: the goals list, a goal, a run.
//!
//! Each page is useful without JavaScript (the header, the gates and their last verdicts are in
//! the HTML); the script then fills the timeline from the stream and keeps the page live. The
//! elements the script looks up by id are the same in the HTML here and in `app.js`.

use greenlight_store::{SystemClock, WallClock};
use std::fmt::Write as _;

use super::html::{badge, elapsed, esc, layout, time};
use crate::model::{GateSummary, GoalSnapshot, GoalSummary, Overview, RunSummary, TurnSummary};

/// Now, ms since the epoch (the start of the elapsed times the page renders), from the clock
/// the store stamps frames with.
fn now_ms() -> i64 {
    SystemClock.now_ms()
}

/// What a run or turn that has not ended is called on every page, in the API's readers and in
/// `greenlight history` (a run whose process is gone is closed as `interrupted` first).
pub const RUNNING: &str = "running";

/// Verdicts and results the page marks as failures.
pub(crate) fn failing(word: &str) -> bool {
    matches!(
        word,
        "fail" | "timeout" | "failed" | "error" | "block" | "interrupted"
    )
}

/// A goal's elapsed time runs while it is active, and stops at its last change otherwise.
fn goal_elapsed(goal: &GoalSummary, now: i64) -> String {
    let to = (goal.state != "active").then_some(goal.updated_at);
    elapsed(goal.created_at, to, now)
}

fn verdict_cell(verdict: Option<&str>) -> String {
    verdict.map_or_else(|| r#"<span class="muted">—</span>"#.to_owned(), badge)
}

/// The goal's gates as they stand: `1/2 green`, green when all are, red when one is not and
/// a gate has run, muted before any has (`app.js`'s `gatesNode` draws the same).
fn gates_cell(goal: &GoalSummary) -> String {
    let text = format!("{}/{} green", goal.gates_green, goal.gates_total);
    let class = if goal.gates_total > 0 && goal.gates_green == goal.gates_total {
        "b-pass"
    } else if goal.last_verdict.is_some() {
        "b-fail"
    } else {
        return format!(r#"<span class="muted">{text}</span>"#);
    };
    format!(r#"<span class="badge {class}">{text}</span>"#)
}

fn goal_row(out: &mut String, goal: &GoalSummary, now: i64) {
    let pause = goal
        .pause_reason
        .as_deref()
        .map(|r| format!(r#"<div class="sub">{}</div>"#, esc(r)))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "<tr data-goal=\"{id}\">\
         <td class=\"num\"><a href=\"/goals/{id}\">#{id}</a></td>\
         <td class=\"text\"><a href=\"/goals/{id}\" title=\"{text}\">{text}</a></td>\
         <td>{state}{pause}</td>\
         <td class=\"num\">{used}/{max}</td>\
         <td>{gates}</td>\
         <td>{agent}</td>\
         <td class=\"num\">{elapsed}</td>\
         <td class=\"path\" title=\"{wt}\">{wt}</td></tr>",
        id = goal.id,
        text = esc(&goal.text),
        state = badge(&goal.state),
        used = goal.turns_used,
        max = goal.max_turns,
        gates = gates_cell(goal),
        agent = esc(&goal.agent),
        elapsed = goal_elapsed(goal, now),
        wt = esc(&goal.worktree),
    );
}

fn run_row(out: &mut String, run: &RunSummary, now: i64) {
    let result = run.result.as_deref().unwrap_or(RUNNING);
    let exit = run.exit_code.map(|c| c.to_string()).unwrap_or_default();
    let _ = writeln!(
        out,
        "<tr data-run=\"{id}\">\
         <td class=\"num\"><a href=\"/runs/{id}\">run-{id}</a></td>\
         <td>{kind}</td><td>{result}</td><td class=\"num\">{exit}</td>\
         <td class=\"num\">{gates}</td><td>{started}</td>\
         <td class=\"num\">{elapsed}</td>\
         <td class=\"path\" title=\"{wt}\">{wt}</td></tr>",
        id = run.id,
        kind = esc(&run.kind),
        result = badge(result),
        gates = run.gates,
        started = time(run.started_at),
        elapsed = elapsed(run.started_at, run.ended_at, now),
        wt = esc(&run.worktree),
    );
}

/// How the goals page was asked for: its own query (what its live stream repeats), the link
/// to the next, older page, and whether archived goals are listed.
#[derive(Debug, Clone, Default)]
pub struct GoalsPageLinks {
    /// `before=…&limit=…&archived=true`, as much as the request gave; empty for `/`.
    pub query: String,
    /// The next page's URL, when this page is full.
    pub older: Option<String>,
    /// Archived goals are listed.
    pub archived: bool,
}

/// `/`: a page of the goals (and the recent runs) with live status.
pub fn goals_page(overview: &Overview, links: &GoalsPageLinks) -> String {
    let (older, archived) = (links.older.as_deref(), links.archived);
    let (goals, runs) = (&overview.goals, &overview.runs);
    let now = now_ms();
    let mut main = String::new();
    main.push_str(
        "<section class=\"card\">\n<h1>Goals</h1>\n\
         <table id=\"goals\" class=\"list\"><thead><tr><th>#</th><th>Goal</th><th>State</th>\
         <th>Turn</th><th>Gates</th><th>Agent</th><th>Elapsed</th><th>Worktree</th>\
         </tr></thead>\n<tbody>\n",
    );
    for goal in goals {
        goal_row(&mut main, goal, now);
    }
    let _ = write!(
        main,
        "</tbody></table>\n<p id=\"goals-empty\" class=\"empty\"{}>No goals yet: start one with \
         <code>greenlight goal run</code>.</p>\n",
        if goals.is_empty() { "" } else { " hidden" }
    );
    // Finished goals unchanged for a week are archived: out of this list, never deleted.
    main.push_str("<p class=\"pager\">");
    if let Some(older) = older {
        let _ = write!(
            main,
            "<a id=\"older\" href=\"{}\">Older goals</a> · ",
            esc(older)
        );
    }
    main.push_str(if archived {
        "<a href=\"/\">Hide archived goals</a>"
    } else {
        "<a href=\"/?archived=true\">Show archived goals</a> \
         <span class=\"muted\">(done or cleared, unchanged for 7 days)</span>"
    });
    main.push_str(" · <a id=\"workflows-link\" href=\"/workflows\">Workflow runs</a>");
    main.push_str("</p>\n</section>\n");
    main.push_str(
        "<section class=\"card\">\n<h2>Recent verify and hook runs</h2>\n\
         <table id=\"runs\" class=\"list\"><thead><tr><th>#</th><th>Kind</th><th>Result</th>\
         <th>Exit</th><th>Gates</th><th>Started</th><th>Took</th><th>Worktree</th>\
         </tr></thead>\n<tbody>\n",
    );
    for run in runs {
        run_row(&mut main, run, now);
    }
    let _ = write!(
        main,
        "</tbody></table>\n<p id=\"runs-empty\" class=\"empty\"{}>No runs recorded yet: \
         <code>greenlight verify</code> records one.</p>\n</section>\n",
        if runs.is_empty() { "" } else { " hidden" }
    );
    layout(
        "Goals",
        &[
            ("page", "goals".to_owned()),
            (
                "live-url",
                if links.query.is_empty() {
                    "/api/live".to_owned()
                } else {
                    format!("/api/live?{}", links.query)
                },
            ),
        ],
        &main,
    )
}

/// The goal header; `app.js` rewrites the same ids from a fresh snapshot.
fn goal_header(out: &mut String, goal: &GoalSummary, now: i64) {
    let pause = match (&goal.pause_reason, &goal.pause_detail) {
        (Some(reason), detail) => format!(
            "<p id=\"goal-pause\" class=\"pause\"><strong>{}</strong> {}</p>",
            esc(reason),
            esc(detail.as_deref().unwrap_or(""))
        ),
        (None, _) => "<p id=\"goal-pause\" class=\"pause\" hidden></p>".to_owned(),
    };
    let _ = write!(
        out,
        "<section class=\"card head\" id=\"goal-head\">\n\
         <div class=\"crumbs\"><a href=\"/\">goals</a> / #{id}</div>\n\
         <h1 id=\"goal-text\">{text}</h1>\n\
         <dl class=\"facts\">\
         <div><dt>State</dt><dd id=\"goal-state\">{state}</dd></div>\
         <div><dt>Turn</dt><dd id=\"goal-turns\">{used}/{max}</dd></div>\
         <div><dt>Gates</dt><dd id=\"goal-gates\">{gates}</dd></div>\
         <div><dt>Agent</dt><dd id=\"goal-agent\">{agent}</dd></div>\
         <div><dt>Elapsed</dt><dd id=\"goal-elapsed\">{elapsed}</dd></div>\
         <div><dt>Frames</dt><dd id=\"goal-head-seq\">{head}</dd></div>\
         <div class=\"wide\"><dt>Worktree</dt><dd id=\"goal-worktree\" class=\"path\">{wt}</dd></div>\
         </dl>\n{pause}\n</section>\n",
        id = goal.id,
        text = esc(&goal.text),
        state = badge(&goal.state),
        used = goal.turns_used,
        max = goal.max_turns,
        gates = gates_cell(goal),
        agent = esc(&goal.agent),
        elapsed = goal_elapsed(goal, now),
        head = goal.head,
        wt = esc(&goal.worktree),
    );
}

fn gate_row(out: &mut String, gate: &GateSummary) {
    let verdict = gate.last_verdict.as_deref();
    let failed = verdict.is_some_and(failing);
    let evidence = gate
        .last_evidence
        .as_deref()
        .map(|e| {
            format!(
                "<details class=\"evidence\"{}><summary>evidence</summary><pre>{}</pre></details>",
                if failed { " open" } else { "" },
                esc(e)
            )
        })
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "<tr data-gate=\"{n}\"{class}><td class=\"num\">{n}</td>\
         <td><code>{cmd}</code>{evidence}</td><td>{verdict}</td>\
         <td class=\"num\">{exit}</td><td class=\"num\">{attempts}</td></tr>",
        n = gate.number,
        class = if failed { " class=\"failing\"" } else { "" },
        cmd = esc(&gate.command),
        verdict = verdict_cell(verdict),
        exit = gate
            .last_exit_code
            .map(|c| c.to_string())
            .unwrap_or_default(),
        attempts = gate.attempts,
    );
}

fn turn_row(out: &mut String, turn: &TurnSummary, now: i64) {
    let outcome = turn.outcome.as_deref().unwrap_or(RUNNING);
    let _ = writeln!(
        out,
        "<tr><td class=\"num\">{n}</td><td>{started}</td><td class=\"num\">{took}</td>\
         <td>{outcome}</td></tr>",
        n = turn.number,
        started = time(turn.started_at),
        took = elapsed(turn.started_at, turn.ended_at, now),
        outcome = badge(outcome),
    );
}

/// The timeline the script fills from the stream, with its follow and errors-only toggles.
pub(super) fn timeline(out: &mut String, frames_url: &str) {
    let _ = write!(
        out,
        "<section class=\"card\">\n<div class=\"toolbar\"><h2>Timeline</h2>\
         <label><input type=\"checkbox\" id=\"follow\" checked> follow</label>\
         <label><input type=\"checkbox\" id=\"errors-only\"> errors only</label>\
         <span id=\"frame-count\" class=\"muted\"></span></div>\n\
         <div id=\"timeline\" class=\"timeline\"></div>\n\
         <noscript><p class=\"empty\">The live timeline needs JavaScript; the frames are at \
         <a href=\"{url}\">{url}</a>.</p></noscript>\n</section>\n",
        url = esc(frames_url)
    );
}

/// `/goals/{id}`: one goal's timeline.
pub fn goal_page(snapshot: &GoalSnapshot) -> String {
    let now = now_ms();
    let goal = &snapshot.goal;
    let mut main = String::new();
    goal_header(&mut main, goal, now);
    main.push_str(
        "<section class=\"card\">\n<h2>Gates</h2>\n<table id=\"gates\" class=\"list\"><thead><tr>\
         <th>#</th><th>Command</th><th>Last verdict</th><th>Exit</th><th>Failures</th>\
         </tr></thead>\n<tbody>\n",
    );
    for gate in &snapshot.gates {
        gate_row(&mut main, gate);
    }
    let _ = write!(
        main,
        "</tbody></table>\n<p id=\"gates-empty\" class=\"empty\"{}>No gates.</p>\n</section>\n",
        if snapshot.gates.is_empty() {
            ""
        } else {
            " hidden"
        }
    );
    let _ = write!(
        main,
        "<section class=\"card\">\n<details id=\"turns-box\"><summary><h2>Turns \
         (<span id=\"turns-count\">{}</span>)</h2></summary>\n<table id=\"turns\" class=\"list\">\
         <thead><tr><th>#</th><th>Started</th><th>Took</th><th>Outcome</th></tr></thead>\n\
         <tbody>\n",
        snapshot.turns.len()
    );
    for turn in &snapshot.turns {
        turn_row(&mut main, turn, now);
    }
    main.push_str("</tbody></table>\n</details>\n</section>\n");
    timeline(&mut main, &format!("/api/goals/{}/events?after=0", goal.id));
    layout(
        &format!("#{} {}", goal.id, goal.text),
        &[
            ("page", "goal".to_owned()),
            ("stream", goal.id.to_string()),
            ("stream-url", format!("/api/goals/{}/stream", goal.id)),
            ("snapshot-url", format!("/api/goals/{}", goal.id)),
            ("head", goal.head.to_string()),
        ],
        &main,
    )
}

/// `/runs/{id}`: one verify or hook run's gates.
pub fn run_page(run: &RunSummary) -> String {
    let now = now_ms();
    let result = run.result.as_deref().unwrap_or(RUNNING);
    let mut main = String::new();
    let _ = write!(
        main,
        "<section class=\"card head\" id=\"run-head\">\n\
         <div class=\"crumbs\"><a href=\"/\">runs</a> / run-{id}</div>\n\
         <h1><span id=\"run-kind\">{kind}</span> run-{id}</h1>\n\
         <dl class=\"facts\">\
         <div><dt>Result</dt><dd id=\"run-result\">{result}</dd></div>\
         <div><dt>Exit</dt><dd id=\"run-exit\">{exit}</dd></div>\
         <div><dt>Gates</dt><dd id=\"run-gates\">{gates}</dd></div>\
         <div><dt>Started</dt><dd id=\"run-started\">{started}</dd></div>\
         <div><dt>Took</dt><dd id=\"run-elapsed\">{elapsed}</dd></div>\
         <div class=\"wide\"><dt>Worktree</dt><dd id=\"run-worktree\" class=\"path\">{wt}</dd></div>\
         </dl>\n</section>\n",
        id = run.id,
        kind = esc(&run.kind),
        result = badge(result),
        exit = run.exit_code.map(|c| c.to_string()).unwrap_or_default(),
        gates = run.gates,
        started = time(run.started_at),
        elapsed = elapsed(run.started_at, run.ended_at, now),
        wt = esc(&run.worktree),
    );
    timeline(&mut main, &format!("/api/runs/{}", run.id));
    layout(
        &format!("{} run-{}", run.kind, run.id),
        &[
            ("page", "run".to_owned()),
            ("stream", format!("run-{}", run.id)),
            ("stream-url", format!("/api/runs/{}/stream", run.id)),
            ("snapshot-url", format!("/api/runs/{}", run.id)),
        ],
        &main,
    )
}

#[cfg(test)]
#[path = "pages_tests.rs"]
mod tests;
