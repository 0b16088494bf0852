//! The openai agent family: greenlight itself is the agent harness for an OpenAI-compatible
//! `/v1/chat/completions` server (llama.cpp, vLLM, Ollama, LM Studio), behind
//! `greenlight-agent`'s [`Dispatcher`](greenlight_agent::Dispatcher) seam. The HTTP stack lives
//! here alone, so the seam and the agent-CLI families build without it.
//!
//! The decoder of a streamed turn is pure: bytes in, [`TurnEvent`]s out, no I/O, no clock, no
//! network. Its layers, bottom up:
//!
//! - [`sse`]: the response body's bytes, split anywhere, into `data:` payloads and `[DONE]`.
//! - [`chunk`]: one `chat.completion.chunk` payload into its deltas, finish reason, usage or
//!   error.
//! - [`native`]: native `tool_calls` deltas assembled by index into complete calls.
//! - [`parse`]: the incremental text parser that finds thoughts and tool calls written into the
//!   content itself (`<think>`, `<tool_call>`, tool fences).
//! - [`turn`]: [`TurnDecoder`], the four above combined for one turn.
//! - [`golden`]: recorded turns replayed through [`TurnDecoder`] and compared with their expected
//!   events.

pub mod chunk;
pub mod golden;
pub mod native;
pub mod parse;
pub mod sse;
pub mod turn;

pub use adapter::{Endpoint, OpenAi};
pub use parse::ToolCallParser;
pub use turn::{ToolCall, ToolFormat, TurnDecoder, TurnEvent, canonical};

// The agent harness around the decoder: the dispatcher and its loop, the HTTP client, the
// tools and their host, the patch format, the messages. The write-ahead tool ledger they record
// in is the seam's (`greenlight_agent::ledger`).
pub mod adapter;
pub mod client;
pub mod host;
pub mod patch;
pub mod prompt;
pub mod tools;

/// Errors building an openai dispatcher.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The openai family was asked for without a server.
    #[error(
        "the openai family needs a server; pass --base-url URL (e.g. http://127.0.0.1:8080/v1)"
    )]
    EndpointMissing,
    /// The server settings are unusable (the message says which and why).
    #[error("{0}")]
    Endpoint(String),
}
