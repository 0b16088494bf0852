//! Where a workflow run stands, and where one of its member worktrees stands.

crate::word::word!(
    /// Where a workflow run stands, as the state database stores it and its stream reports it.
    WorkflowStatus ("workflow status") {
        /// Its process is driving it.
        Running = "running",
        /// Stopped at a boundary (a budget or wall clock that ran out, a `pause` step, a pause
        /// someone asked for); `--resume` carries on.
        Paused = "paused",
        /// Every step done.
        Completed = "completed",
        /// Stopped by a failure no route handled.
        Failed = "failed",
        /// Ended at a `terminal:<label>` route the plan chose.
        Terminal = "terminal",
        /// Its process died while running it; `--resume` carries on.
        Interrupted = "interrupted",
    }
);

impl WorkflowStatus {
    /// Whether the run is over for good (a resume is refused).
    pub const fn is_ended(self) -> bool {
        matches!(
            self,
            WorkflowStatus::Completed | WorkflowStatus::Failed | WorkflowStatus::Terminal
        )
    }
}

crate::word::word!(
    /// Where a fan-out member's (or a file step's) linked worktree stands.
    MemberState ("member worktree state") {
        /// Created and in use.
        Created = "created",
        /// Removed when the run no longer needed it.
        Removed = "removed",
        /// Kept on purpose (a failure or a conflict, for a person to look at); listed in status.
        Kept = "kept",
    }
);
