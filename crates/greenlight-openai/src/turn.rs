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
use super::sse::{MAX_EVENT, SseDecoder, SseItem};

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
            SseItem::Overlong { bytes, head } => {
                out.push(TurnEvent::BadChunk {
                    raw: head,
                    why: format!(
                        "a line or event of {bytes} bytes, over the {MAX_EVENT}-byte limit, was dropped (its first bytes are kept here)"
                    ),
                });
                return;
            }
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
            self.text.feed_into(&content, out);
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn delta(delta: serde_json::Value) -> String {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
        )
    }

    fn finish(reason: &str) -> String {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
        )
    }

    fn decode(format: ToolFormat, body: &str) -> Vec<TurnEvent> {
        let mut d = TurnDecoder::new(format);
        let mut events = d.feed(body.as_bytes());
        events.extend(d.finish());
        canonical(&events)
    }

    fn call(id: &str, name: &str, arguments: serde_json::Value) -> TurnEvent {
        TurnEvent::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
        })
    }

    #[test]
    fn native_format_leaves_written_calls_as_text_and_tags_format_parses_them() {
        let body =
            delta(json!({"content": "<think>t</think><tool_call>{\"name\":\"f\"}</tool_call>"}))
                + &finish("stop");
        assert_eq!(
            decode(ToolFormat::Native, &body),
            vec![
                TurnEvent::Thought("t".into()),
                TurnEvent::Answer("<tool_call>{\"name\":\"f\"}</tool_call>".into()),
                TurnEvent::Finish {
                    reason: "stop".into()
                }
            ]
        );
        assert_eq!(
            decode(ToolFormat::Tags, &body),
            vec![
                TurnEvent::Thought("t".into()),
                call("call_1", "f", json!({})),
                TurnEvent::Finish {
                    reason: "stop".into()
                }
            ]
        );
    }

    #[test]
    fn the_finish_reason_releases_held_text_and_judges_native_calls_first() {
        let body = delta(json!({"content": "a <tool_"}))
            + &delta(
                json!({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{}"}}]}),
            )
            + &finish("tool_calls")
            + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n";
        assert_eq!(
            decode(ToolFormat::Auto, &body),
            vec![
                TurnEvent::Answer("a <tool_".into()),
                call("call_1", "f", json!({})),
                TurnEvent::Finish {
                    reason: "tool_calls".into()
                },
                TurnEvent::Usage {
                    prompt_tokens: Some(3),
                    completion_tokens: Some(4)
                },
            ]
        );
    }

    #[test]
    fn generated_ids_are_shared_by_native_and_written_calls_and_keep_counting_across_turns() {
        let body = delta(json!({"content": "<tool_call>{\"name\":\"a\"}</tool_call>"}))
            + &delta(
                json!({"tool_calls": [{"index": 0, "function": {"name": "b", "arguments": ""}}]}),
            )
            + &finish("tool_calls");
        let mut d = TurnDecoder::new(ToolFormat::Auto);
        let mut first = d.feed(body.as_bytes());
        first.extend(d.finish());
        let mut second = d.feed(body.as_bytes());
        second.extend(d.finish());
        let ids = |events: &[TurnEvent]| -> Vec<String> {
            events
                .iter()
                .filter_map(|e| {
                    if let TurnEvent::ToolCall(c) = e {
                        Some(c.id.clone())
                    } else {
                        None
                    }
                })
                .collect()
        };
        assert_eq!(ids(&first), ["call_1", "call_2"]);
        assert_eq!(ids(&second), ["call_3", "call_4"]);
    }

    #[test]
    fn bad_payloads_and_a_body_that_is_not_sse_are_kept() {
        let events = decode(
            ToolFormat::Auto,
            "data: {\"choices\":[{\"delta\":{\"content\":\"x\"\n\n<html>502</html>\n",
        );
        assert!(
            matches!(&events[0], TurnEvent::BadChunk { raw, why } if raw.starts_with("{\"choices\"") && why.starts_with("not JSON"))
        );
        assert!(matches!(&events[1], TurnEvent::BadChunk { raw, .. } if raw == "<html>502</html>"));
        // A non-streamed JSON answer (the server ignored `stream: true`) still reads.
        let events = decode(
            ToolFormat::Auto,
            "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}",
        );
        assert_eq!(
            events,
            vec![
                TurnEvent::Answer("hi".into()),
                TurnEvent::Finish {
                    reason: "stop".into()
                }
            ]
        );
    }

    #[test]
    fn a_deadline_reports_an_unfinished_event_and_unfinished_native_calls() {
        let mut d = TurnDecoder::new(ToolFormat::Auto);
        let body = delta(
            json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{\"a\""}}]}),
        ) + "data: {\"choi";
        assert_eq!(d.feed(body.as_bytes()), vec![]);
        let events = d.finish_at_deadline();
        assert!(matches!(&events[0], TurnEvent::BadChunk { raw, .. } if raw == "data: {\"choi"));
        assert!(matches!(&events[1], TurnEvent::Violation { raw, .. } if raw == "{\"a\""));
        assert_eq!(d.finish(), vec![]);
    }

    #[test]
    fn done_stops_reading() {
        let mut d = TurnDecoder::new(ToolFormat::Auto);
        let body =
            delta(json!({"content": "a"})) + "data: [DONE]\n\n" + &delta(json!({"content": "b"}));
        assert_eq!(d.feed(body.as_bytes()), vec![TurnEvent::Answer("a".into())]);
        assert!(d.is_done());
        assert_eq!(d.finish(), vec![]);
    }

    #[test]
    fn tool_format_names() {
        for f in [ToolFormat::Native, ToolFormat::Tags, ToolFormat::Auto] {
            assert_eq!(f.as_str().parse::<ToolFormat>(), Ok(f));
        }
        assert!(
            "xml"
                .parse::<ToolFormat>()
                .unwrap_err()
                .contains("native, tags or auto")
        );
    }
}
