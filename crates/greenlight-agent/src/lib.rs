//! Agent runtimes (claude, codex, any command) behind one [`Dispatcher`] seam.
//!
//! The two agent CLIs disagree about almost everything — stdin, output envelope, where token
//! counts appear, what a clean exit means. The goal loop knows none of it: it builds a
//! [`DispatchRequest`] with everything already decided, calls [`Dispatcher::dispatch`], and gets
//! back a [`DispatchResult`] whose failure, if any, names one member of the closed [`Reason`]
//! list.
//!
//! # Theory of operation
//!
//! - [`runner`] spawns one child: argv only, its own process group, stdin the prompt (then
//!   closed) or `/dev/null`, a scrubbed environment ([`env::SCRUBBED`]), a deadline that sends
//!   SIGTERM then SIGKILL to the whole group, bounded capture.
//! - The shared dispatch flow refuses what must not run (unsafe model id, prompt over the
//!   ceiling, a declared path outside the root) with outcome `error`, runs the child, and splits
//!   timeout from dead on the runner's own fields; the family parser decides the rest.
//! - [`live`] decodes the child's stdout as it arrives into [`Activity`] for the caller's
//!   [`ActivitySink`] ([`Dispatcher::dispatch_observed`]); the result never depends on it.
//! - [`ledger`] is the write-ahead record of the tool calls greenlight itself runs for a model:
//!   the openai family (the `greenlight-openai` crate, behind this same seam) writes it, the goal
//!   loop keeps it.
//! - [`families`] builds this crate's own families; the code choosing among every family,
//!   openai included, lives with the binary.
//! - [`verdict`] holds the `GATE: PASS|FAIL` grammar and [`defang`]; [`containment`] holds
//!   declared-path checks and the landed barrier.
//!
//! ```no_run
//! use std::time::Duration;
//! use greenlight_agent::{AdapterOptions, DispatchRequest, Family, cli_dispatcher};
//!
//! # async fn demo() -> Result<(), greenlight_agent::Error> {
//! let claude = cli_dispatcher(Family::Claude, AdapterOptions::default())?;
//! let probed = claude.probe(&["sonnet".to_string()]).await;
//! if let Some(model) = probed.id {
//!     let req = DispatchRequest::new(Family::Claude, model, "Say hi", ".", Duration::from_secs(300));
//!     let result = claude.dispatch(&req).await;
//!     assert_eq!(result.failure.is_none(), result.is_ok());
//! }
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

pub mod activity;
pub mod claude;
pub mod clock;
pub mod codex;
pub mod command;
pub mod containment;
pub mod dispatch;
pub mod env;
pub mod families;
pub mod ledger;
pub mod live;
pub mod machine;
pub mod reason;
pub mod runner;
pub mod verdict;

pub use activity::{Activity, ActivitySink, NoActivity};
pub use clock::{Clock, MonotonicClock, SteppingClock};
pub use containment::{ContainmentError, WriteBaseline, check_all, check_contained};
pub use dispatch::{
    AdapterOptions, BoxFuture, Deliverable, DispatchFailure, DispatchRequest, DispatchResult,
    Dispatcher, Family, Outcome, PROBE_PROMPT, ProbeOutcome, TokenSource, is_safe_model_id,
    says_ok,
};
pub use families::cli_dispatcher;
pub use reason::{Produced, Producer, Reason, produced_by};
pub use verdict::{DEFANG_MARKER, ReplyVerdict, defang, parse_verdict};

/// Errors building a dispatcher or reading a name.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A deliverable name that is not `return-value` or `file`.
    #[error("unknown deliverable `{0}`; use return-value or file")]
    UnknownDeliverable(String),
    /// The command family has no default executable.
    #[error("the command family needs an executable; pass its path (--bin PATH)")]
    CommandBinMissing,
    /// [`cli_dispatcher`] was asked for a family this crate does not hold (openai: build it with
    /// `greenlight-openai`).
    #[error(
        "the {0} family is not an agent CLI; build its dispatcher with the crate that holds it"
    )]
    NotACliFamily(Family),
}
