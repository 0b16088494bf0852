//! What the model reads besides the task: the system message, the tags-format tool description,
//! and the messages that carry tool results and unreadable calls back.
//!
//! One rule: every message greenlight adds says what happened and what the model can do next,
//! in plain words, because a small local model has no other documentation.

use serde_json::{Value, json};

use crate::tools::ToolSpec;
use crate::turn::{ToolCall, ToolFormat};

const ROLE: &str = "You are a coding agent working in a repository. Use the tools to look at \
and change files and to run commands; every path is relative to the repository root, and \
paths outside it are refused. Make the change the task asks for, check it where you can, then \
reply with a short summary of what you did and no tool call: that reply ends your turn.";

/// The system message for a dispatch with `tools` in `format` (no tools: the role alone, minus
/// the tool sentences).
pub fn system(format: ToolFormat, tools: &[ToolSpec]) -> String {
    if tools.is_empty() {
        return "Answer the user's message directly. No tools are available.".to_owned();
    }
    if format != ToolFormat::Tags {
        return ROLE.to_owned();
    }
    let mut text = String::from(ROLE);
    text.push_str(
        "\n\n# Tools\n\nCall a tool by writing a tag holding one JSON object with the tool's \
`name` and its `arguments`:\n\n<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \
\"README.md\"}}</tool_call>\n\nOne call per tag; several tags in one reply run in order. Each \
result comes back in the next user message as <tool_response>…</tool_response>, in the order \
of the calls. The tools, with the JSON Schema of their arguments:\n",
    );
    for tool in tools {
        text.push_str(&format!(
            "\n## {}\n{}\narguments: {}\n",
            tool.name, tool.description, tool.parameters
        ));
    }
    text
}

/// The assistant message that repeats a reply with calls, in the form the server expects back.
pub fn assistant(format: ToolFormat, answer: &str, calls: &[ToolCall]) -> Value {
    if format == ToolFormat::Tags || calls.is_empty() {
        let mut content = answer.to_owned();
        for call in calls {
            let body = json!({"name": call.name, "arguments": call.arguments});
            content.push_str(&format!("\n<tool_call>{body}</tool_call>"));
        }
        return json!({"role": "assistant", "content": content});
    }
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments.to_string()},
            })
        })
        .collect();
    let content = if answer.is_empty() {
        Value::Null
    } else {
        Value::from(answer)
    };
    json!({"role": "assistant", "content": content, "tool_calls": tool_calls})
}

/// A native tool result message.
pub fn tool_result(call_id: &str, content: &str) -> Value {
    json!({"role": "tool", "tool_call_id": call_id, "content": content})
}

/// The user message carrying tags-format results, one `<tool_response>` per call in order.
pub fn tag_results(results: &[String]) -> String {
    results
        .iter()
        .map(|r| format!("<tool_response>\n{r}\n</tool_response>"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the model is told about a call it wrote that could not be read.
pub fn violation(format: ToolFormat, raw: &str, why: &str) -> String {
    let shown: String = raw.chars().take(400).collect();
    let more = if raw.chars().count() > 400 { "…" } else { "" };
    let how = if format == ToolFormat::Tags {
        "write each call as <tool_call>{\"name\": TOOL, \"arguments\": {…}}</tool_call> with valid JSON"
    } else {
        "call the tool again with JSON arguments that match its schema"
    };
    format!(
        "error: a tool call in your last reply could not be read ({why}), so nothing ran. It was: {shown}{more}\nTo run it, {how}."
    )
}

/// Cuts a result to `max` bytes (on a character boundary) with a note saying how much was cut
/// and how to see the rest; unchanged when it fits.
pub fn bounded_result(tool: &str, text: String, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    let hint = match tool {
        crate::tools::READ_FILE => {
            "call read_file with a later start_line and a smaller max_lines to read the rest"
        }
        crate::tools::LIST_DIR => "list a subdirectory instead",
        crate::tools::SEARCH => "narrow the pattern or the path",
        crate::tools::RUN => {
            "narrow the command's output (for example `| head -n 50`, `| tail -n 50` or `| grep PATTERN`)"
        }
        _ => "ask for less",
    };
    let cut = text.len() - end;
    let mut out = text[..end].to_owned();
    out.push_str(&format!(
        "\n[greenlight: this result was cut: the first {end} of {} bytes are shown, {cut} bytes are not; to see more, {hint}]",
        text.len()
    ));
    (out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_result_says_how_much_and_how_to_see_more() {
        let (text, cut) = bounded_result("run", "é".repeat(10), 5);
        assert!(cut);
        assert!(text.starts_with("éé\n"), "{text}");
        assert!(
            text.contains("the first 4 of 20 bytes are shown, 16 bytes are not"),
            "{text}"
        );
        assert!(text.contains("| tail -n 50"), "{text}");
        assert_eq!(
            bounded_result("run", "short".into(), 5),
            ("short".into(), false)
        );
    }

    #[test]
    fn tags_format_describes_every_tool_and_the_convention() {
        let specs = crate::tools::specs(&Default::default());
        let text = system(ToolFormat::Tags, &specs);
        for spec in &specs {
            assert!(text.contains(&format!("## {}", spec.name)), "{}", spec.name);
        }
        assert!(text.contains("<tool_call>{\"name\""));
        assert!(!system(ToolFormat::Native, &specs).contains("<tool_call>"));
    }

    #[test]
    fn replies_with_calls_go_back_in_the_form_the_server_expects() {
        let call = ToolCall {
            id: "call_9".into(),
            name: "read_file".into(),
            arguments: json!({"path": "a"}),
        };
        let native = assistant(ToolFormat::Native, "", std::slice::from_ref(&call));
        assert_eq!(native["tool_calls"][0]["id"], "call_9");
        assert_eq!(
            native["tool_calls"][0]["function"]["arguments"],
            "{\"path\":\"a\"}"
        );
        assert!(native["content"].is_null());
        let tags = assistant(ToolFormat::Tags, "looking", &[call]);
        let content = tags["content"].as_str().expect("text");
        assert!(content.starts_with("looking\n<tool_call>{"), "{content}");
        assert!(content.ends_with("}</tool_call>"), "{content}");
        assert!(content.contains("\"name\":\"read_file\""), "{content}");
    }
}
