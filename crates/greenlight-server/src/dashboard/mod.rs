//! The dashboard: server-rendered HTML pages and one small vanilla-JS file, embedded in the
//! binary (no build step). The pages render what the snapshot says; the script opens one
//! EventSource per tab and adds frames as rows keyed by seq.
//!
//! `html` escapes and lays out, `pages` renders the three pages, `workflow_page` a workflow
//! run's plan graph, `app.js` keeps them live and
//! `style.css` styles them.

mod html;
mod pages;
mod workflow_page;

pub use html::{duration, utc};
pub use pages::{GoalsPageLinks, RUNNING, goal_page, goals_page, run_page};
pub use workflow_page::{workflow_page, workflows_page};

/// The script every page loads from `/assets/app.js`.
pub const APP_JS: &str = include_str!("app.js");
/// The stylesheet every page loads from `/assets/style.css`.
pub const STYLE_CSS: &str = include_str!("style.css");
