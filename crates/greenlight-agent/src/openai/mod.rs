//! Decoding a streamed `/v1/chat/completions` turn from an OpenAI-compatible server into events.
//!
//! Everything here is pure: bytes in, [`TurnEvent`]s out, no I/O, no clock, no network. The
//! layers, bottom up:
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

pub use parse::ToolCallParser;
pub use turn::{ToolCall, ToolFormat, TurnDecoder, TurnEvent, canonical};

// The agent harness around the decoder: the dispatcher and its loop, the HTTP client, the
// tools and their host, the patch format, the messages, the write-ahead tool ledger.
pub mod adapter;
pub mod client;
pub mod host;
pub mod ledger;
pub mod patch;
pub mod prompt;
pub mod tools;
