//! What the loop reports while it runs, for a live view; the store holds the durable record.

use greenlight_agent::DispatchResult;

/// Something that happened, for a live view. The store has the durable record.
#[derive(Debug)]
pub enum Progress<'a> {
    /// A turn is starting with this prompt.
    TurnStarted {
        /// Its number.
        turn: u32,
        /// What the agent is sent.
        prompt: &'a str,
    },
    /// A turn that dispatches nothing: the worktree changed since the last failure (fixed by
    /// hand while the goal was paused), so the gates run before the agent gets stale evidence.
    GatesFirst {
        /// Its number.
        turn: u32,
    },
    /// The agent's turn ended.
    Dispatched {
        /// Its number.
        turn: u32,
        /// What came back.
        result: &'a DispatchResult,
    },
    /// Processes the agent's turn left running (escaped from its group, adopted by the runner,
    /// or carrying the goal's marker) were ended before anything else ran.
    AgentLeftoversEnded {
        /// The turn.
        turn: u32,
        /// What was ended.
        processes: &'a [greenlight_proc::LeftoverProcess],
    },
    /// A gate is about to run (or be replayed).
    GateStarted {
        /// 1-based.
        number: usize,
        /// Gate count.
        of: usize,
        /// Its command.
        command: &'a str,
    },
    /// A gate is decided.
    GateFinished {
        /// 1-based.
        number: usize,
        /// Its command.
        command: &'a str,
        /// Passed?
        passed: bool,
        /// Its exit code.
        exit_code: Option<i32>,
        /// Not run: the workspace had not changed since it failed.
        replayed: bool,
        /// The evidence of a failure: what the next turn is sent.
        evidence: Option<&'a str>,
        /// This failure spent the gate's last attempt: no turn follows, the goal pauses.
        last_attempt: bool,
    },
    /// The judge answered.
    Judged {
        /// Its verdict.
        passed: bool,
        /// Its reply.
        reply: &'a str,
    },
}
