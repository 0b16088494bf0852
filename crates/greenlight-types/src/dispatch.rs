//! How a dispatch of an agent (or the judge) ended, or where its ledger row stands.
//!
//! A finished dispatch is `ok`, `null` or `error`; the ledger adds `in-flight` (written before
//! the agent starts) and `interrupted` (its process died first, found by crash recovery).

crate::word::word!(
    /// Where a dispatch ledger row stands.
    DispatchOutcome ("dispatch outcome") {
        /// Written before the agent starts; never left this way by a finished dispatch.
        InFlight = "in-flight",
        /// The agent answered.
        Ok = "ok",
        /// The agent ran but gave nothing usable.
        Null = "null",
        /// The dispatch failed; `reason` says how.
        Error = "error",
        /// The process that started it died before it ended (found by crash recovery).
        Interrupted = "interrupted",
    }
);
