//! One streamed turn, decoded: [`TurnDecoder`] reads the body's bytes and returns [`TurnEvent`]s.
//!
//! The body goes through the SSE reader, each payload through the chunk reader, reasoning text
//! straight out as [`TurnEvent::Thought`], content through the text parser ([`ToolCallParser`]),
//! native tool-call pieces into the assembler. A finish reason ends the text and judges the native
//! calls before [`TurnEvent::Finish`] is returned, so every call of a turn precedes its finish.
//!
//! Text events may come in pieces that depend on how the bytes were chunked; [`canonical`] merges
//! adjacent text of the same kind, and the property the tests hold is: for every chunking of the
//! same body, the canonical events are identical.

use serde::{Deserialize, Serialize};

use super::chunk::parse_chunk;
use super::native::NativeCalls;
use super::parse::ToolCallParser;
use super::sse::{SseDecoder, SseItem};

/// Where tool calls come from (`--tool-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolFormat {
    /// The server's native `tool_calls` deltas only; content is answer and thought text, and a
    /// call written into it stays text.
    Native,
    /// Calls written into the content (`<tool_call>` tags, tool fences). Native deltas, if a
    /// server sends them anyway, are still assembled: a call is never dropped.
    Tags,
    /// Both: native deltas when the server sends them, and calls written into the content.
    /// Decodes exactly like [`Tags`](Self::Tags); the two differ in what the caller asks the
    /// server for.
    #[default]
    Auto,
}

impl ToolFormat {
    /// The kebab-case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            ToolFormat::Native => "native",
            ToolFormat::Tags => "tags",
            ToolFormat::Auto => "auto",
        }
    }
}

impl std::fmt::Display for ToolFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ToolFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "native" => Ok(ToolFormat::Native),
            "tags" => Ok(ToolFormat::Tags),
            "auto" => Ok(ToolFormat::Auto),
            other => Err(format!(
                "unknown tool format `{other}`; use native, tags or auto"
            )),
        }
    }
}

/// A complete, parsed tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The server's id, or `call_<n>` (counted per decoder from 1) when it gave none.
    pub id: String,
    /// The function name.
    pub name: String,
    /// The arguments: always a JSON object.
    pub arguments: serde_json::Value,
}

/// What a turn said, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnEvent {
    /// Reasoning: text inside `<think>…</think>`, or the server's `reasoning_content`.
    Thought(String),
    /// Answer text, outside thoughts and tool calls.
    Answer(String),
    /// A complete, parsed call.
    ToolCall(ToolCall),
    /// A malformed, oversized or unterminated call: its raw text, and why it is not a call.
    Violation {
        /// The text as the model wrote it.
        raw: String,
        /// Why it is not a call.
        why: String,
    },
    /// Token counts the server reported.
    Usage {
        /// Tokens of the prompt.
        prompt_tokens: Option<u64>,
        /// Tokens generated.
        completion_tokens: Option<u64>,
    },
    /// The server's finish reason (`stop`, `length`, `tool_calls`, …).
    Finish {
        /// As the server wrote it.
        reason: String,
    },
    /// An `error` object in the stream.
    ServerError {
        /// Its message.
        message: String,
    },
    /// A payload that is not a chat completion chunk (not JSON, wrong shape) or a line that is
    /// not server-sent events: the raw text, and why.
    BadChunk {
        /// The payload or line as received.
        raw: String,
        /// What is wrong with it.
        why: String,
    },
}

/// The canonical form of an event sequence: adjacent [`TurnEvent::Answer`]s merged, adjacent
/// [`TurnEvent::Thought`]s merged, empty text dropped. Equal bodies give equal canonical forms
/// whatever their chunking.
pub fn canonical(events: &[TurnEvent]) -> Vec<TurnEvent> {
    let mut out: Vec<TurnEvent> = Vec::with_capacity(events.len());
    for event in events {
        match (out.last_mut(), event) {
            (_, TurnEvent::Answer(s) | TurnEvent::Thought(s)) if s.is_empty() => {}
            (Some(TurnEvent::Answer(a)), TurnEvent::Answer(b)) => a.push_str(b),
            (Some(TurnEvent::Thought(a)), TurnEvent::Thought(b)) => a.push_str(b),
            _ => out.push(event.clone()),
        }
    }
    out
}

/// Decodes one streamed turn (and, after [`finish`](Self::finish), the next: call ids keep
/// counting).
#[derive(Debug)]
pub struct TurnDecoder {
    format: ToolFormat,
    sse: SseDecoder,
    text: ToolCallParser,
    native: NativeCalls,
}

impl TurnDecoder {
    /// A decoder for a turn whose tool calls come as `format` says.
    pub fn new(format: ToolFormat) -> Self {
        let text = match format {
            ToolFormat::Native => ToolCallParser::thoughts_only(),
            ToolFormat::Tags | ToolFormat::Auto => ToolCallParser::new(),
        };
        Self {
            format,
            sse: SseDecoder::new(),
            text,
            native: NativeCalls::new(),
        }
    }

    /// The format it was built with.
    pub fn format(&self) -> ToolFormat {
        self.format
    }

    /// Whether the server sent `[DONE]` (the caller may stop reading; later bytes are ignored).
    pub fn is_done(&self) -> bool {
        self.sse.is_done()
    }

    /// Reads raw body bytes, in any chunking, and returns the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<TurnEvent> {
        let mut out = Vec::new();
        for item in self.sse.feed(bytes) {
            self.item(item, &mut out);
        }
        out
    }

    /// The body ended (`[DONE]` or end of file): a last event without its blank line is read,
    /// held text is released, unterminated calls become [`TurnEvent::Violation`]s. The decoder is
    /// then ready for another turn.
    pub fn finish(&mut self) -> Vec<TurnEvent> {
        let mut out = Vec::new();
        for item in self.sse.finish() {
            self.item(item, &mut out);
        }
        out.extend(self.text.finish());
        let text = &mut self.text;
        out.extend(self.native.finish(&mut || text.next_call_id()));
        out
    }

    /// The deadline came: nothing more is read. An unfinished event, held fragments, open tool
    /// buffers and native calls never finished are reported with their raw text; nothing stays
    /// held. Returns at once.
    pub fn finish_at_deadline(&mut self) -> Vec<TurnEvent> {
        let mut out = Vec::new();
        let partial = self.sse.take_partial();
        if !partial.is_empty() {
            out.push(TurnEvent::BadChunk {
                raw: partial,
                why: "the deadline came before this event was complete".into(),
            });
        }
        out.extend(self.text.finish_at_deadline());
        out.extend(self.native.finish_at_deadline());
        out
    }

    fn item(&mut self, item: SseItem, out: &mut Vec<TurnEvent>) {
        let payload = match item {
            SseItem::Done => return,
            SseItem::Data(p) => p,
            SseItem::Stray(line) => {
                // A body that is not SSE (an error response read as a stream, a server that
                // ignored `stream: true`): a JSON line is still a chunk; anything else is kept.
                if line.trim_start().starts_with('{') && parse_chunk(&line).is_ok() {
                    line
                } else {
                    out.push(TurnEvent::BadChunk {
                        raw: line,
                        why: "not a server-sent event line".into(),
                    });
                    return;
                }
            }
        };
        let chunk = match parse_chunk(&payload) {
            Ok(c) => c,
            Err(why) => {
                out.push(TurnEvent::BadChunk { raw: payload, why });
                return;
            }
        };
        if let Some(reasoning) = chunk.reasoning {
            out.push(TurnEvent::Thought(reasoning));
        }
        if let Some(content) = chunk.content {
            out.extend(self.text.feed(&content));
        }
        for delta in chunk.tool_calls {
            self.native.push(delta);
        }
        if let Some(message) = chunk.error {
            out.push(TurnEvent::ServerError { message });
        }
        if let Some(reason) = chunk.finish_reason {
            out.extend(self.text.finish());
            let text = &mut self.text;
            out.extend(self.native.finish(&mut || text.next_call_id()));
            out.push(TurnEvent::Finish { reason });
        }
        if let Some(u) = chunk.usage {
            out.push(TurnEvent::Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
            });
        }
    }
}
