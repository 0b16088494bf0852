//! What kind of run a recorded `run-N` stream is.

crate::word::word!(
    /// What kind of run a `run-N` stream records.
    RunKind ("run kind") {
        /// `greenlight verify`.
        Verify = "verify",
        /// `greenlight hook stop` (Claude Code's or Codex's Stop hook).
        Hook = "hook",
    }
);
