//! greenlight's vocabulary: the closed sets of words every crate speaks — a gate's verdict, the
//! reason a step failed, an agent's family, a goal's state, a recorded run's kind and how a
//! dispatch ended — and the [`remote`] seam between the gate runner and a remote-execution
//! backend.
//!
//! Each word is defined once, here, with its one text form: `as_str` and `FromStr` are what the
//! state database stores and reads, serde writes the same text into frames and JSON, and every
//! other crate uses these types rather than a copy with a mapper. **Pure**: no I/O.

mod word;

mod dispatch;
mod family;
mod goal;
mod reason;
mod run;
mod verdict;
mod workflow;

pub mod remote;

pub use dispatch::DispatchOutcome;
pub use family::Family;
pub use goal::GoalState;
pub use reason::Reason;
pub use run::RunKind;
pub use verdict::{GateVerdict, word as gate_verdict_word};
pub use word::UnknownWord;
pub use workflow::{MemberState, WorkflowStatus};
