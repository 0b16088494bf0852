//! One `chat.completion.chunk` payload into what it carries: text deltas, native tool-call
//! deltas, a finish reason, usage, or an error.
//!
//! Servers differ in small ways and all of them are read here, so nothing above this module
//! knows a server's name: the reasoning text is `reasoning_content` (llama.cpp, DeepSeek, older
//! vLLM) or `reasoning` (newer vLLM, Ollama); usage comes in a last chunk with no choices, or
//! beside the finish reason; an `error` is an object with a `message` or a bare string. Only
//! choice 0 is read: a turn asks for one choice. A non-streamed response (`message` instead of
//! `delta`) reads the same way, as one chunk.

use serde::Deserialize;
use serde_json::Value;

/// What one chunk carries. Every field is optional because every server leaves some out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chunk {
    /// Answer text (which may itself contain `<think>` or tool-call text).
    pub content: Option<String>,
    /// Reasoning text the server separated from the answer.
    pub reasoning: Option<String>,
    /// Native tool-call deltas, in the order given.
    pub tool_calls: Vec<ToolCallDelta>,
    /// Why generation stopped (`stop`, `length`, `tool_calls`, …).
    pub finish_reason: Option<String>,
    /// Token counts, when the chunk has a `usage` object.
    pub usage: Option<Usage>,
    /// The message of an `error` in the stream.
    pub error: Option<String>,
}

/// One piece of a native tool call: its `index`, and whichever of id, name and argument text
/// this chunk adds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCallDelta {
    /// Which call this piece belongs to (absent in some servers' one-piece calls).
    pub index: Option<u64>,
    /// The call's id, usually only in its first piece.
    pub id: Option<String>,
    /// The function name, or a piece of it.
    pub name: Option<String>,
    /// A piece of the arguments' JSON text.
    pub arguments: Option<String>,
}

/// Token counts as the server reported them (absent stays absent, never 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Tokens of the prompt.
    pub prompt_tokens: Option<u64>,
    /// Tokens generated.
    pub completion_tokens: Option<u64>,
}

/// Reads one payload. `Err` says why it is not a chunk (the caller keeps the raw text).
pub fn parse_chunk(payload: &str) -> Result<Chunk, String> {
    let wire: WireChunk = serde_json::from_str(payload).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => format!("not a chat.completion.chunk: {e}"),
        _ => format!("not JSON: {e}"),
    })?;
    let mut chunk = Chunk {
        usage: wire.usage.map(|u| Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
        }),
        error: wire.error.and_then(error_message),
        ..Chunk::default()
    };
    let first = wire.choices.into_iter().find(|c| c.index.unwrap_or(0) == 0);
    if let Some(choice) = first {
        chunk.finish_reason = choice.finish_reason;
        if let Some(delta) = choice.delta {
            chunk.content = delta.content.filter(|s| !s.is_empty());
            chunk.reasoning = delta
                .reasoning_content
                .or(delta.reasoning)
                .filter(|s| !s.is_empty());
            chunk.tool_calls = delta
                .tool_calls
                .into_iter()
                .map(ToolCallDelta::from)
                .collect();
        }
    }
    Ok(chunk)
}

/// The message of an `error` value; `None` for `null`.
fn error_message(error: Value) -> Option<String> {
    match error {
        Value::Null => None,
        Value::String(s) => Some(s),
        Value::Object(ref map) => match map.get("message") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => Some(error.to_string()),
        },
        other => Some(other.to_string()),
    }
}

#[derive(Deserialize)]
struct WireChunk {
    #[serde(default, deserialize_with = "null_as_empty")]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChoice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, alias = "message")]
    delta: Option<WireDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    /// A string piece by the spec; a few servers send the arguments as an object instead.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl From<WireToolCall> for ToolCallDelta {
    fn from(w: WireToolCall) -> Self {
        let (name, arguments) = match w.function {
            Some(f) => (
                f.name,
                f.arguments.and_then(|a| match a {
                    Value::Null => None,
                    Value::String(s) => Some(s),
                    other => Some(other.to_string()),
                }),
            ),
            None => (None, None),
        };
        ToolCallDelta {
            index: w.index,
            id: w.id.filter(|s| !s.is_empty()),
            name,
            arguments,
        }
    }
}

fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_content_delta_and_a_finish_chunk_with_usage() {
        let c = parse_chunk(r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#).unwrap();
        assert_eq!(c.content.as_deref(), Some("Hi"));
        assert_eq!(c.finish_reason, None);
        let c = parse_chunk(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#).unwrap();
        assert_eq!(c.finish_reason.as_deref(), Some("stop"));
        assert_eq!(
            c.usage,
            Some(Usage {
                prompt_tokens: Some(12),
                completion_tokens: Some(3)
            })
        );
    }

    #[test]
    fn reasoning_under_either_name_and_empty_strings_are_nothing() {
        let c = parse_chunk(r#"{"choices":[{"delta":{"reasoning_content":"hmm","content":""}}]}"#)
            .unwrap();
        assert_eq!((c.reasoning.as_deref(), c.content), (Some("hmm"), None));
        let c = parse_chunk(r#"{"choices":[{"delta":{"reasoning":"so"}}]}"#).unwrap();
        assert_eq!(c.reasoning.as_deref(), Some("so"));
    }

    #[test]
    fn tool_call_pieces_keep_index_id_name_and_argument_text() {
        let c = parse_chunk(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_x","type":"function","function":{"name":"read","arguments":"{\"pa"}}]},"finish_reason":null}]}"#).unwrap();
        assert_eq!(
            c.tool_calls,
            vec![ToolCallDelta {
                index: Some(1),
                id: Some("call_x".into()),
                name: Some("read".into()),
                arguments: Some("{\"pa".into())
            }]
        );
        let c = parse_chunk(r#"{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}}]}"#).unwrap();
        assert_eq!(c.tool_calls[0].arguments.as_deref(), Some(r#"{"a":1}"#));
    }

    #[test]
    fn errors_as_objects_or_strings_and_payloads_that_are_not_chunks() {
        let c =
            parse_chunk(r#"{"error":{"code":500,"message":"context full","type":"server_error"}}"#)
                .unwrap();
        assert_eq!(c.error.as_deref(), Some("context full"));
        let c = parse_chunk(r#"{"error":"boom"}"#).unwrap();
        assert_eq!(c.error.as_deref(), Some("boom"));
        assert!(
            parse_chunk("{\"choices\":[{\"delta\":{\"content\":")
                .unwrap_err()
                .starts_with("not JSON")
        );
        assert!(
            parse_chunk("[1]")
                .unwrap_err()
                .starts_with("not a chat.completion.chunk")
        );
    }

    #[test]
    fn only_choice_zero_is_read() {
        let c = parse_chunk(r#"{"choices":[{"index":1,"delta":{"content":"no"}},{"index":0,"delta":{"content":"yes"}}]}"#).unwrap();
        assert_eq!(c.content.as_deref(), Some("yes"));
    }
}
