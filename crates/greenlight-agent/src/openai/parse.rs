//! The incremental text parser: thoughts and tool calls written into a model's content.
//!
//! (First cut: everything is answer text; the full parser follows.)

use super::turn::TurnEvent;

/// The most text one tool call may hold before it is reported as a violation: 1 MiB.
pub const TOOL_BUFFER_LIMIT: usize = 1 << 20;

/// Incremental parser of model text into thoughts, answer text and tool calls.
#[derive(Debug, Default)]
pub struct ToolCallParser {
    calls: bool,
    ids: u64,
}

impl ToolCallParser {
    /// A parser for `<think>`, `<tool_call>` tags and tool fences.
    pub fn new() -> Self {
        Self {
            calls: true,
            ids: 0,
        }
    }

    /// A parser for `<think>` only: tool calls written into the text stay answer text.
    pub fn thoughts_only() -> Self {
        Self {
            calls: false,
            ids: 0,
        }
    }

    /// The next generated call id: `call_1`, `call_2`, …
    pub fn next_call_id(&mut self) -> String {
        self.ids += 1;
        format!("call_{}", self.ids)
    }

    /// Reads `text` and returns the events it completes.
    pub fn feed(&mut self, text: &str) -> Vec<TurnEvent> {
        let _ = self.calls;
        if text.is_empty() {
            Vec::new()
        } else {
            vec![TurnEvent::Answer(text.to_string())]
        }
    }

    /// The text ended.
    pub fn finish(&mut self) -> Vec<TurnEvent> {
        Vec::new()
    }

    /// The deadline came.
    pub fn finish_at_deadline(&mut self) -> Vec<TurnEvent> {
        Vec::new()
    }
}
