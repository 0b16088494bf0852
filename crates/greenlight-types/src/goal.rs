//! Where a goal is in its life.

crate::word::word!(
    /// Where a goal is in its life.
    GoalState ("goal state") {
        /// Being worked on (or ready to be, after a crash).
        Active = "active",
        /// Stopped with a reason; `greenlight goal resume` continues it.
        Paused = "paused",
        /// Gates green (and the judge agreed, if there is one).
        Done = "done",
        /// Ended by the user; the row stays for audit.
        Cleared = "cleared",
    }
);
