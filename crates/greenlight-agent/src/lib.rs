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
//! - [`openai`] decodes a streamed turn of an OpenAI-compatible server (bytes in, events out,
//!   pure), finding thoughts and tool calls whether the server sends them natively or the model
//!   writes them into its text.
//! - [`verdict`] holds the `GATE: PASS|FAIL` grammar and [`defang`]; [`containment`] holds
//!   declared-path checks and the landed barrier.
//!
//! ```no_run
//! use std::time::Duration;
//! use greenlight_agent::{AdapterOptions, DispatchRequest, Family, dispatcher};
//!
//! # async fn demo() -> Result<(), greenlight_agent::Error> {
//! let claude = dispatcher(Family::Claude, AdapterOptions::default())?;
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
pub mod live;
pub mod machine;
pub mod openai;
pub mod reason;
pub mod runner;
pub mod verdict;

pub use activity::{Activity, ActivitySink, NoActivity};
pub use clock::{Clock, MonotonicClock, SteppingClock};
pub use containment::{ContainmentError, WriteBaseline, check_all, check_contained};
pub use dispatch::{
    AdapterOptions, BoxFuture, Deliverable, DispatchFailure, DispatchRequest, DispatchResult,
    Dispatcher, Family, Outcome, PROBE_PROMPT, ProbeOutcome, TokenSource, dispatcher,
    is_safe_model_id, says_ok,
};
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
    /// The openai family was asked for without a server.
    #[error(
        "the openai family needs a server; pass --base-url URL (e.g. http://127.0.0.1:8080/v1)"
    )]
    OpenAiEndpointMissing,
    /// The openai family's server settings are unusable (the message says which and why).
    #[error("{0}")]
    OpenAiEndpoint(String),
}
