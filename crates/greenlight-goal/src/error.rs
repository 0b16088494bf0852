//! Why the goal loop itself could not go on (as opposed to a goal pausing, which is an outcome).

/// A failure of the loop's machinery; the goal's state in the store is left consistent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] greenlight_store::Error),
    /// The goal id is unknown.
    #[error("goal {0} does not exist; `greenlight goal status` lists the goals")]
    NoSuchGoal(i64),
    /// Another process runs this goal right now.
    #[error("goal {goal} is already running{}; watch it with `greenlight goal log --follow`", holder.as_deref().unwrap_or(""))]
    AlreadyRunning {
        /// The goal.
        goal: i64,
        /// Who holds it, for people.
        holder: Option<String>,
    },
    /// The agent's dispatcher could not be built from what the store recorded.
    #[error("{0}")]
    Agent(String),
    /// A signal arrived before the run started.
    #[error("interrupted before the goal started")]
    Interrupted(greenlight_proc::Interrupt),
    /// The directory of machine-wide gate locks cannot be used.
    #[error("cannot take a gate lock under {}: {source}; check that directory is writable (CM_VERIFY_LOCK_ROOT chooses it)", root.display())]
    LockRoot {
        /// The lock root.
        root: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A gate could not even be started (`/bin/sh` itself failed).
    #[error("cannot start gate `{command}`: {source}")]
    GateSpawn {
        /// The gate's command.
        command: String,
        /// The I/O error.
        source: std::io::Error,
    },
}
