//! What is left of greenlight's integration with agents, until it moves into the use-case layer:
//!
//! - [`stop`]: the Stop hook itself: an agent's Stop / SubagentStop payload in, the gates run,
//!   one decision out (allow, or block with the evidence), with a per-session block cap; and
//!   the SessionStart hook that records where the session's work began.
//! - [`record`]: verify and hook runs recorded in the state database (frames and per-gate
//!   rows), and the repository a directory belongs to.
//! - [`cache_place`]: where a run's result cache and its key live.
//! - [`timeouts`]: `verify --suggest-timeouts`: each gate's `timeoutSec` proposed from its
//!   recorded p99, as an edit of the verify.yaml text.
//!
//! The drafter is `greenlight-init`, the installers `greenlight-install`. Nothing here prints
//! or exits: every function returns a value the command line renders.

pub mod cache_place;
mod error;
pub mod record;
pub mod stop;
pub mod timeouts;

pub use error::Error;
// The Stop hook keys its sessions by the worktree top the installers find.
use greenlight_install::install;
