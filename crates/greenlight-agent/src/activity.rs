//! What an agent is doing while it works, as it happens: answer text, reasoning, output lines
//! and tool calls, read incrementally from the agent's output and handed to an [`ActivitySink`].
//!
//! The final envelope and verdict of a dispatch do not depend on any of this: activity is a
//! live view, and a sink that drops everything changes no result.

/// One piece of live activity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    /// Text of the agent's answer (a delta or a whole message).
    Text(String),
    /// The agent's visible reasoning.
    Thinking(String),
    /// A line the adapter does not interpret (a command agent's stdout).
    Output(String),
    /// A tool call started.
    ToolStarted {
        /// The runtime's id for the call.
        id: String,
        /// The tool's name.
        name: String,
        /// Its input, as short text.
        input: String,
    },
    /// A tool call returned.
    ToolFinished {
        /// The runtime's id for the call.
        id: String,
        /// The tool's name, when the runtime repeats it (else empty).
        name: String,
        /// It returned an error.
        failed: bool,
        /// The start of its result.
        output: String,
    },
}

/// Where live activity goes. Called from the dispatch's task as output arrives; must not block
/// for long (buffer, coalesce or drop, but never wait on the network).
pub trait ActivitySink: Send + Sync {
    /// One piece of activity, in the order the agent produced it.
    fn activity(&self, activity: Activity);
}

/// A sink that drops everything (a dispatch nobody watches).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoActivity;

impl ActivitySink for NoActivity {
    fn activity(&self, _: Activity) {}
}
