//! verify.yaml, gate execution that leaves nothing behind, verdicts and their renderers.
//!
//! The flow: [`config::load`] → [`runner::run`] (work-evidence, then each gate through
//! [`exec::run`], with [`lock`] for mutex gates) → [`report::RunReport`] → [`render`] (the line
//! contract, JSON), [`junit`] (JUnit XML) or [`github`] (GitHub Actions annotations).

pub mod capture;
pub mod config;
pub mod error;
pub mod evidence;
pub mod exec;
pub mod file;
pub mod github;
pub mod junit;
pub mod lock;
pub mod render;
pub mod report;
pub mod runner;
pub mod workspace_key;

pub use error::Error;
/// The `/proc` readers and the bounded tail live in the process runner.
pub use greenlight_proc::{procs, tail};
