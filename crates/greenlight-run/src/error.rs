//! The one error type of this crate: every variant names the input at fault and the way out.

/// What a use case refuses before it runs anything.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Stop hook's stdin is not the JSON object the agents send.
    #[error(
        "stdin is not a Stop hook payload ({detail}); `greenlight hook stop` expects the JSON \
         object Claude Code or Codex sends a Stop or SubagentStop hook, e.g. \
         {{\"session_id\":\"…\",\"cwd\":\"/path/to/repo\",\"hook_event_name\":\"Stop\"}}"
    )]
    HookPayload {
        /// What was wrong with it.
        detail: String,
    },
}
