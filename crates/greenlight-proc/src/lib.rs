//! One way to run a child process: its own process group, bounded output, a deadline, and
//! nothing left behind.
//!
//! Every child greenlight starts — a gate, an agent, `digest -- CMD`, init's foreground run —
//! goes through [`run`] with a [`Spec`] of composable options: stdin ([`Input`]), environment
//! ([`Env`]: a scrub list, added variables, and always a run token), deadline and grace, one
//! interleaved pipe or two ([`Output`]), bounded tails ([`tail::TailBuffer`]) and a streaming
//! [`Observer`], and leftover detection (the group, child-subreaper adoption, the token) with a
//! drain limit. [`signals::run_main`] is the entry point a subcommand starts from; [`git`] is
//! the one way to run git; [`foreground`] runs one child in the terminal's foreground (init's
//! first run of a drafted config); [`shell`] reads what a one-line command runs without
//! running it. The crate depends on no other greenlight crate.

pub mod foreground;
pub mod git;
mod kill;
mod process_env;
pub mod procs;
mod run;
pub mod shell;
pub mod signals;
mod spec;
pub mod tail;

pub use kill::{
    end_adopted, end_adopted_and_marked, end_processes_of, pass_on, sweep_marked, sweep_orphaned,
    with_its_group as kill_with_its_group,
};
pub use process_env::ProcessEnv;
pub use procs::{LeftoverProcess, TOKEN_VAR};
pub use run::run;
pub use signals::{
    Interrupt, InterruptWatch, become_subreaper, run_main, run_main_bounded, stop_with_parent,
};
pub use spec::{
    DRAIN_LIMIT, Ending, Env, Error, Exit, Input, KILL_GRACE, KILL_GRACE_VAR, LEAK_SETTLE,
    Observer, OnSignal, Output, Program, RunOutcome, Spec, Stream, kill_grace_from, next_token,
};
