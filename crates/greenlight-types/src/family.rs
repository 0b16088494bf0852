//! Which agent runtime a goal or a dispatch drives.

crate::word::word!(
    /// Which agent runtime.
    Family ("agent family") {
        /// Claude Code (`claude -p`).
        Claude = "claude",
        /// Codex (`codex exec`).
        Codex = "codex",
        /// Any other command, through an argv template.
        Command = "command",
        /// An OpenAI-compatible `/v1/chat/completions` server (llama.cpp, vLLM, Ollama, LM
        /// Studio): greenlight is the agent harness itself.
        OpenAi = "openai",
    }
);

/// Claude: what `greenlight goal start --agent` is when not given.
impl Default for Family {
    fn default() -> Self {
        Family::Claude
    }
}
