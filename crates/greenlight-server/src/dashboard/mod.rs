//! The dashboard: server-rendered HTML pages and one small vanilla-JS file, embedded in the
//! binary (no build step). The pages render what the snapshot says; the script opens one
//! EventSource per tab and adds frames as rows keyed by seq.

use crate::model::{GoalSnapshot, GoalSummary, RunSummary};

/// The script every page loads from `/assets/app.js`.
pub const APP_JS: &str = "";
/// The stylesheet every page loads from `/assets/style.css`.
pub const STYLE_CSS: &str = "";

/// `/`: the goals (and recent runs) with live status.
pub fn goals_page(goals: &[GoalSummary], runs: &[RunSummary]) -> String {
    let _ = (goals, runs);
    String::new()
}

/// `/goals/{id}`: one goal's timeline.
pub fn goal_page(snapshot: &GoalSnapshot) -> String {
    let _ = snapshot;
    String::new()
}

/// `/runs/{id}`: one verify or hook run's gates.
pub fn run_page(run: &RunSummary) -> String {
    let _ = run;
    String::new()
}
