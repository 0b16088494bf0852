//! The one closed list of failure reasons for the whole product.
//!
//! There is no second taxonomy: every failure greenlight records (a dispatch, a gate, a judge, a
//! goal that pauses) names exactly one `Reason`. Adding a member is a deliberate change to a
//! public contract; which part of greenlight may produce each member is kept beside its
//! producers, in `greenlight-agent`.

crate::word::word!(
    /// Why a dispatch, a step or a goal did not succeed. Serialised in kebab-case; the names are a
    /// stable contract (ledger rows, `--json` output, frames).
    Reason ("reason") {
        /// The dispatch deadline fired while the agent was still running; its process group was
        /// ended. "It was still working."
        DispatchTimeout = "dispatch-timeout",
        /// Nothing usable came back: the binary could not be spawned, vanished without an exit code,
        /// exited nonzero, reported an error (`is_error`, `turn.failed`), or exited cleanly with
        /// nothing parseable ("spawned but mute").
        DispatchDead = "dispatch-dead",
        /// The assembled prompt is longer than the runtime's ceiling; it was refused before any
        /// process started, never truncated.
        PromptOverCeiling = "prompt-over-ceiling",
        /// No candidate model id answered the liveness probe, or the agent's executable cannot be
        /// started at all (not installed).
        ProbeFailed = "probe-failed",
        /// An openai dispatch spent its bound of model requests or tokens while the model was still
        /// calling tools, or one model reply streamed more text than a CLI agent's output is kept to
        /// (the work it did so far stays in the worktree; the next turn goes on).
        DispatchBudgetExhausted = "dispatch-budget-exhausted",
        /// A model id does not match the family's safe grammar (claude and codex:
        /// `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`; command also allows `:` and `/`) and so could be
        /// read as an option; refused before any process started.
        ModelIdInvalid = "model-id-invalid",
        /// A declared read or write is absolute, contains `..` or a control character, or resolves
        /// (through a symlinked ancestor) outside the root.
        PathEscapesRoot = "path-escapes-root",
        /// A file-mode dispatch came back ok but a declared write does not exist or did not change.
        DeliverableNotLanded = "deliverable-not-landed",
        /// A reply that must end in a gate verdict does not: the last non-empty line is not exactly
        /// `GATE: PASS` or `GATE: FAIL`, or more than one verdict line is present.
        GateVerdictUnparseable = "gate-verdict-unparseable",
        /// A gate command judged the work and exited nonzero.
        GateFailed = "gate-failed",
        /// The goal failed its gates on every allowed retry and paused.
        RetriesExhausted = "retries-exhausted",
        /// The goal spent its turn budget and paused.
        TurnBudgetExhausted = "turn-budget-exhausted",
        /// The goal's worktree is gone; the goal pauses without charging an attempt.
        WorktreeMissing = "worktree-missing",
        /// The judge could not be run (its dispatch failed) too many times in a row.
        JudgeFailed = "judge-failed",
        /// The judge answered, but not in its grammar, too many times in a row.
        JudgeUnparseable = "judge-unparseable",
        /// A dispatch was in flight when greenlight stopped; on resume its result is unknown.
        DispatchInterrupted = "dispatch-interrupted",
        /// A person paused the goal (`greenlight goal pause`, Ctrl-C or SIGTERM during `goal run`).
        PausedByUser = "paused-by-user",
        /// The goal has no gate left, so nothing could say it is done; it pauses until one is added.
        NoGates = "no-gates",
        /// The machine, not the agent, failed the dispatch before the agent could start: the
        /// prompt file could not be written (no space, no usable temp dir), or the agent could not
        /// be spawned for want of file descriptors, memory or processes. Retrying would fail the
        /// same way, so the goal pauses at once and charges no turn.
        MachineFailure = "machine-failure",
        /// A workflow join's policy was not met by its fan-out's members (`all-declared`,
        /// `all-activated`: one failed or did not run; `any`: all failed; `quorum:n`: fewer than n
        /// passed).
        JoinFailed = "join-failed",
        /// A workflow's next boundary (an agent step, a fan-out, a gate) cannot reserve its
        /// worst case in dispatch units from what is left of the budget: the run paused before
        /// it, never halfway through.
        BudgetExhausted = "budget-exhausted",
        /// A workflow resume named a run the state database has not recorded.
        ForeignRunRefused = "foreign-run-refused",
        /// A workflow resume named a run that has finished.
        ResumeAlreadyCompleted = "resume-already-completed",
        /// A workflow resume's plan digest or argument hash differs from the run's: a changed
        /// input is a new run, never a continuation (no override).
        StaleInputRefused = "stale-input-refused",
        /// A workflow resume found that a model the run dispatched no longer answers its probe.
        ResumeModelUnavailable = "resume-model-unavailable",
        /// A workflow resume asked for more budget or wall clock than a run may be extended by
        /// (too many extensions, or one larger than the run's first limit).
        BudgetExtensionExhausted = "budget-extension-exhausted",
        /// A workflow member's branch does not merge (or rebase) cleanly onto the land step's
        /// target; the files in conflict are named, the member is kept for a person, the target
        /// is untouched and the other members land.
        LandConflict = "land-conflict",
        /// A workflow member merged onto the target cleanly, but the merged tree failed a landing
        /// gate (each branch may be green alone); the failed gates and their evidence are named,
        /// the member is kept, the target is untouched.
        LandRed = "land-red",
        /// A workflow member's merged tree was green, but the target could not be advanced
        /// safely: it is checked out in a worktree with uncommitted changes to tracked files, or
        /// it moved again while the member was landed on its new tip. Nothing moved.
        LandTargetBusy = "land-target-busy",
    }
);
