//! Native `tool_calls` deltas assembled by index into complete calls.
//!
//! A server streams a call as pieces that share an `index`: the id and name first, then the
//! arguments' JSON text a few characters at a time; parallel calls use successive indexes. The
//! pieces are kept until the turn's finish reason (or the end of the body), then each call is
//! judged once: a name and arguments that parse as a JSON object make a [`ToolCall`]; anything
//! else is a [`TurnEvent::Violation`] that keeps the raw argument text. A piece without an index
//! (servers that send each call whole) starts a new call when it brings a new id, and continues
//! the last call otherwise.

use super::chunk::ToolCallDelta;
use super::parse::TOOL_BUFFER_LIMIT;
use super::turn::{ToolCall, TurnEvent};

/// One call being assembled.
#[derive(Debug, Default)]
struct Partial {
    index: u64,
    id: Option<String>,
    name: String,
    arguments: String,
    /// The argument text or the name passed [`TOOL_BUFFER_LIMIT`]; the rest was not kept.
    overflowed: bool,
}

/// The native calls of one turn, by index.
#[derive(Debug, Default)]
pub struct NativeCalls {
    calls: Vec<Partial>,
}

impl NativeCalls {
    /// No calls yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether any piece has arrived since the last [`finish`](Self::finish).
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Adds one piece.
    pub fn push(&mut self, delta: ToolCallDelta) {
        let slot = match delta.index {
            Some(index) => self.calls.iter().position(|c| c.index == index),
            None => match (&delta.id, self.calls.last()) {
                (_, None) => None,
                (Some(id), Some(last)) if last.id.as_deref() != Some(id.as_str()) => None,
                (_, Some(_)) => Some(self.calls.len() - 1),
            },
        };
        let slot = match slot {
            Some(i) => i,
            None => {
                let index = delta
                    .index
                    .unwrap_or_else(|| self.calls.iter().map(|c| c.index + 1).max().unwrap_or(0));
                self.calls.push(Partial {
                    index,
                    ..Partial::default()
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[slot];
        if call.id.is_none() {
            call.id = delta.id;
        }
        if let Some(name) = delta.name {
            if call.name.len() + name.len() > TOOL_BUFFER_LIMIT {
                call.overflowed = true;
            } else {
                call.name.push_str(&name);
            }
        }
        if let Some(piece) = delta.arguments {
            if call.arguments.len() + piece.len() > TOOL_BUFFER_LIMIT {
                call.overflowed = true;
            } else if !call.overflowed {
                call.arguments.push_str(&piece);
            }
        }
    }

    /// Judges every call, in index order, and starts over. `next_id` names a call the server
    /// gave no id.
    pub fn finish(&mut self, next_id: &mut dyn FnMut() -> String) -> Vec<TurnEvent> {
        let mut calls = std::mem::take(&mut self.calls);
        calls.sort_by_key(|c| c.index);
        calls.into_iter().map(|c| judge(c, next_id)).collect()
    }

    /// The deadline came first: every call still open is reported with its raw text.
    pub fn finish_at_deadline(&mut self) -> Vec<TurnEvent> {
        let mut calls = std::mem::take(&mut self.calls);
        calls.sort_by_key(|c| c.index);
        calls
            .into_iter()
            .map(|c| TurnEvent::Violation {
                why: format!(
                    "the deadline came before native tool call {} (`{}`) was finished",
                    c.index, c.name
                ),
                raw: c.arguments,
            })
            .collect()
    }
}

fn judge(call: Partial, next_id: &mut dyn FnMut() -> String) -> TurnEvent {
    let what = format!("native tool call {} (`{}`)", call.index, call.name);
    if call.overflowed {
        return TurnEvent::Violation {
            why: format!("{what}: name or arguments longer than {TOOL_BUFFER_LIMIT} bytes"),
            raw: call.arguments,
        };
    }
    if call.name.trim().is_empty() {
        return TurnEvent::Violation {
            why: format!("native tool call {} has no function name", call.index),
            raw: call.arguments,
        };
    }
    let text = call.arguments.trim();
    let arguments = if text.is_empty() {
        serde_json::Value::Object(serde_json::Map::new())
    } else {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(v @ serde_json::Value::Object(_)) => v,
            Ok(_) => {
                return TurnEvent::Violation {
                    why: format!("{what}: arguments are JSON but not an object"),
                    raw: call.arguments,
                };
            }
            Err(e) => {
                return TurnEvent::Violation {
                    why: format!("{what}: arguments are not valid JSON ({e})"),
                    raw: call.arguments,
                };
            }
        }
    };
    TurnEvent::ToolCall(ToolCall {
        id: call.id.unwrap_or_else(next_id),
        name: call.name,
        arguments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn piece(
        index: Option<u64>,
        id: Option<&str>,
        name: Option<&str>,
        args: &str,
    ) -> ToolCallDelta {
        ToolCallDelta {
            index,
            id: id.map(String::from),
            name: name.map(String::from),
            arguments: Some(args.to_string()),
        }
    }

    fn ids() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("call_{n}")
        }
    }

    #[test]
    fn two_parallel_calls_split_over_many_pieces() {
        let mut calls = NativeCalls::new();
        calls.push(piece(Some(0), Some("a"), Some("read"), ""));
        calls.push(piece(Some(0), None, None, "{\"pa"));
        calls.push(piece(Some(1), Some("b"), Some("list"), "{}"));
        calls.push(piece(Some(0), None, None, "th\": \"x\"}"));
        let events = calls.finish(&mut ids());
        assert_eq!(
            events,
            vec![
                TurnEvent::ToolCall(ToolCall {
                    id: "a".into(),
                    name: "read".into(),
                    arguments: json!({"path": "x"})
                }),
                TurnEvent::ToolCall(ToolCall {
                    id: "b".into(),
                    name: "list".into(),
                    arguments: json!({})
                }),
            ]
        );
        assert!(calls.is_empty());
    }

    #[test]
    fn whole_calls_without_index_and_without_id() {
        let mut calls = NativeCalls::new();
        calls.push(piece(None, Some("x"), Some("f"), "{\"a\":1}"));
        calls.push(piece(None, Some("y"), Some("g"), ""));
        calls.push(piece(None, None, None, "{\"b\":2}"));
        calls.push(piece(Some(7), None, Some("h"), "{}"));
        let events = calls.finish(&mut ids());
        let names: Vec<_> = events
            .iter()
            .map(|e| match e {
                TurnEvent::ToolCall(c) => format!("{}:{}:{}", c.id, c.name, c.arguments),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(names, ["x:f:{\"a\":1}", "y:g:{\"b\":2}", "call_1:h:{}"]);
    }

    #[test]
    fn bad_arguments_and_a_missing_name_are_violations_with_the_raw_text() {
        let mut calls = NativeCalls::new();
        calls.push(piece(Some(0), None, Some("f"), "{\"a\": 1"));
        calls.push(piece(Some(1), None, None, "{}"));
        calls.push(piece(Some(2), None, Some("g"), "[1]"));
        let events = calls.finish(&mut ids());
        assert!(
            matches!(&events[0], TurnEvent::Violation { raw, why } if raw == "{\"a\": 1" && why.contains("not valid JSON"))
        );
        assert!(
            matches!(&events[1], TurnEvent::Violation { why, .. } if why.contains("no function name"))
        );
        assert!(
            matches!(&events[2], TurnEvent::Violation { why, .. } if why.contains("not an object"))
        );
    }

    #[test]
    fn arguments_past_the_limit_are_a_violation_and_are_not_kept() {
        let mut calls = NativeCalls::new();
        calls.push(piece(Some(0), None, Some("f"), "{\"a\":\""));
        let block = "x".repeat(64 * 1024);
        for _ in 0..20 {
            calls.push(piece(Some(0), None, None, &block));
        }
        let events = calls.finish(&mut ids());
        assert!(
            matches!(&events[0], TurnEvent::Violation { raw, why } if raw.len() <= TOOL_BUFFER_LIMIT && why.contains("longer than"))
        );
    }
}
