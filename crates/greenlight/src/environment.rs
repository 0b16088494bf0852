//! The process environment, read once: `main` takes the snapshot before any subcommand runs,
//! and every setting a library needs (lock root, state database, kill grace, recording, the
//! variables gates and agents start from) is derived from it and passed down in the options
//! each library takes. No library reads the process environment itself.
//!
//! Nothing in this process changes its environment, so a value used late (after a config
//! load, in a thread the server started) is the value the process started with.

use std::sync::OnceLock;

use greenlight_proc::ProcessEnv;
use greenlight_run::RunEnv;

static ENVIRONMENT: OnceLock<RunEnv> = OnceLock::new();

/// What this process's environment says; read on the first call (`main` makes it first).
pub fn get() -> &'static RunEnv {
    ENVIRONMENT.get_or_init(|| RunEnv::from_vars(ProcessEnv::from_vars(std::env::vars_os())))
}
