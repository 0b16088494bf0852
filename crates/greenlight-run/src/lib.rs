//! The use cases every front end drives: the command line, the MCP server, the dashboard's server
//! and the Stop hook parse their input, call this crate, and render what it returns.
//!
//! - [`session`]: [`VerifySession`], one verify run (config, runner options, result cache,
//!   recording, progress observer) built and run the same way for every front end.
//! - [`evidence`]: what an agent reads about a failed gate, within a budget.
//! - [`stop`]: the Stop hook itself: an agent's Stop / SubagentStop payload in, the gates run,
//!   one decision out (allow, or block with the evidence), with a per-session block cap; and
//!   the SessionStart hook that records where the session's work began.
//! - [`record`]: verify and hook runs recorded in the state database (frames and per-gate
//!   rows), and the repository a directory belongs to.
//! - [`goal_control`]: which goal a request means, its status document, and pausing and
//!   resuming it, with one rule for every front end (only an active goal pauses, only a paused
//!   one resumes).
//! - [`workflow_control`]: the status, log and list documents of workflow runs, and asking a
//!   running one to pause at its next boundary.
//! - [`cache_place`]: where a run's result cache and its key live.
//! - [`environment`]: [`RunEnv`], what the process environment (read once, by the front end)
//!   tells a run.
//! - [`timeouts`]: `verify --suggest-timeouts`: each gate's `timeoutSec` proposed from its
//!   recorded p99, as an edit of the verify.yaml text.
//!
//! Nothing here prints or exits: every function returns a value a front end renders.

pub mod cache_place;
pub mod environment;
mod error;
pub mod evidence;
pub mod goal_control;
pub mod record;
pub mod session;
pub mod stop;
pub mod timeouts;
pub mod workflow_control;

pub use environment::RunEnv;
pub use error::Error;
pub use session::{Observer, Ran, RecordAs, Recorded, Recording, SessionOptions, VerifySession};
