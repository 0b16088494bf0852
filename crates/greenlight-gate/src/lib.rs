//! verify.yaml, gate execution that leaves nothing behind, verdicts and their renderers.
//!
//! The flow of `greenlight verify`: [`config::load`] → [`run`] (work-evidence, then each gate
//! through [`run_gate`], mutex gates under a [`lock`]) → a [`RunReport`] of [`GateReport`]s,
//! with a [`RunEvent`] as each step is decided → [`render`] (the line contract, stderr blocks,
//! JSON), [`junit`] (JUnit XML) or [`github`] (GitHub Actions annotations). [`exit`] holds the
//! exit codes shared with CommandMate's runner.
//!
//! What else callers build on:
//! - one gate on its own, as the goal loop runs it: [`run_gate`] with an [`ExecSpec`], its
//!   output into a [`Capture`] (head + streaming digest), ended by an [`InterruptWatch`];
//! - the work-evidence steps the Stop hook runs itself: [`resolve_base_ref`],
//!   [`verify_base_ref`], [`work_evidence`];
//! - the workspace content key that tells an unchanged worktree from a changed one:
//!   [`workspace_key`] → [`WorkspaceKey`];
//! - the machine-wide mutex, also the protocol of the goal loop's runner lock: [`lock`].
//!
//! - the remote-execution seam a front end plugs a backend into: [`remote`] (its
//!   [`RemoteSettings`] go in [`RunOptions::remote`]); this crate never speaks the protocol.
//!
//! The modules with a vocabulary of their own stay public ([`config`], [`lock`], [`render`],
//! [`junit`], [`github`], [`remote`]); everything else is used through the names re-exported
//! here.

pub mod cache;
mod capture;
pub mod config;
mod error;
mod evidence;
mod exec;
pub mod file;
pub mod github;
pub mod junit;
pub mod lock;
pub mod own_files;
mod plan;
pub mod remote;
mod remote_plan;
pub mod render;
mod report;
mod runner;
pub mod status;
mod workspace_key;

pub use capture::{Capture, GATE_SCAN_BYTES};
pub use error::Error;
pub use evidence::{WorkEvidence, resolve_base_ref, verify_base_ref, work_evidence};
pub use exec::{
    ExecOutcome, ExecSpec, Interrupt, InterruptWatch, KILL_GRACE, OutputSink, Termination,
    run as run_gate, sweep_orphaned_gates,
};
pub use plan::CachePlan;
pub use remote::RemoteSettings;
pub use remote_plan::ENDPOINT_VAR as REMOTE_ENDPOINT_VAR;
pub use report::{
    Attempt, AttemptStatus, CANNOT_START_EXIT, GateReport, GateVerdict, RemoteMark, RemoteSource,
    RunReport, RunResult, SkipReason, WorkEvidenceReport, exit,
};
pub use runner::{RunEvent, RunOptions, run, selected_gates};
pub use workspace_key::{ListedFile, Listing, WorkspaceKey, listing, workspace_key};

/// The `/proc` readers and the bounded tail live in the process runner.
pub use greenlight_proc::{procs, tail};
