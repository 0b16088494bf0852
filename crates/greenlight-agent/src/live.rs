//! Incremental decoding of an agent's stdout into [`Activity`]: bytes in as the pipe delivers
//! them, activity out as soon as each line is complete.
//!
//! Pure and synchronous: [`ActivityDecoder::feed`] takes any chunk (one that ends mid-line or
//! mid-character included) and returns the activity of the lines it completed; the same bytes
//! give the same activity however they are split. Nothing here decides a dispatch's result —
//! the family parsers read the captured output as before — so an unknown, partial or garbled
//! line is skipped, never an error.
//!
//! - claude `--output-format stream-json --verbose`: `assistant` messages' `text`, `thinking`
//!   and `tool_use` blocks, `user` messages' `tool_result` blocks.
//! - codex `exec --json`: `item.started` / `item.completed` events (`agent_message`,
//!   `reasoning`, `command_execution`, `file_change`, `mcp_tool_call`, `web_search`,
//!   `todo_list`, `error`) and top-level `error` / `turn.failed` events.
//! - command: every stdout line, as it is.

use std::collections::{HashMap, HashSet};

use greenlight_proc::{Observer, Stream};
use serde_json::Value;

use crate::activity::{Activity, ActivitySink};
use crate::dispatch::Family;

/// The longest line decoded. A longer line's activity is dropped (a command agent's keeps its
/// first bytes); memory stays bounded whatever the agent prints.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// How much of a tool call's input or output is handed over. The dashboard shows a tool call
/// collapsed; its full output stays with the agent.
pub const MAX_TOOL_TEXT_BYTES: usize = 400;

/// One line, split off a byte stream.
#[derive(Debug, PartialEq, Eq)]
pub struct Line<'a> {
    /// The line without its `\n` (and without a `\r` before it); only its first
    /// [`MAX_LINE_BYTES`] when it was longer.
    pub bytes: &'a [u8],
    /// False when the line was longer than the bound and `bytes` is only its start.
    pub complete: bool,
}

/// Splits a byte stream into lines, a chunk at a time, holding at most `max` bytes of an
/// unfinished line.
#[derive(Debug)]
pub struct LineBuffer {
    buf: Vec<u8>,
    overlong: bool,
    max: usize,
}

impl LineBuffer {
    /// A buffer holding at most `max` bytes of one line.
    pub fn new(max: usize) -> Self {
        Self {
            buf: Vec::new(),
            overlong: false,
            max,
        }
    }

    /// Appends `bytes`, calling `each` with every line they complete, in order.
    pub fn feed(&mut self, mut bytes: &[u8], mut each: impl FnMut(Line<'_>)) {
        while !bytes.is_empty() {
            match bytes.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    self.push(&bytes[..end]);
                    self.emit(&mut each);
                    bytes = &bytes[end + 1..];
                }
                None => {
                    self.push(bytes);
                    break;
                }
            }
        }
    }

    /// End of stream: a last line without a newline is still a line.
    pub fn finish(&mut self, mut each: impl FnMut(Line<'_>)) {
        if !self.buf.is_empty() || self.overlong {
            self.emit(&mut each);
        }
    }

    fn push(&mut self, part: &[u8]) {
        let room = self.max.saturating_sub(self.buf.len());
        if part.len() > room {
            self.overlong = true;
        }
        self.buf.extend_from_slice(&part[..part.len().min(room)]);
    }

    fn emit(&mut self, each: &mut impl FnMut(Line<'_>)) {
        let mut bytes = self.buf.as_slice();
        if !self.overlong && bytes.last() == Some(&b'\r') {
            bytes = &bytes[..bytes.len() - 1];
        }
        each(Line {
            bytes,
            complete: !self.overlong,
        });
        self.buf.clear();
        self.overlong = false;
    }
}

/// Turns one family's stdout into activity, incrementally.
#[derive(Debug)]
pub struct ActivityDecoder {
    lines: LineBuffer,
    format: Format,
}

#[derive(Debug)]
enum Format {
    Claude(ClaudeState),
    Codex(CodexState),
    Command,
}

impl ActivityDecoder {
    /// A decoder for `family`'s output format.
    pub fn new(family: Family) -> Self {
        Self::with_max_line(family, MAX_LINE_BYTES)
    }

    /// A decoder with a different line bound (tests).
    pub fn with_max_line(family: Family, max: usize) -> Self {
        let format = match family {
            Family::Claude => Format::Claude(ClaudeState::default()),
            Family::Codex => Format::Codex(CodexState::default()),
            // The openai family hands its activity over itself; a line view is all that fits.
            Family::Command | Family::OpenAi => Format::Command,
        };
        Self {
            lines: LineBuffer::new(max),
            format,
        }
    }

    /// The activity of the lines `bytes` completes, in order.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Activity> {
        let mut out = Vec::new();
        let format = &mut self.format;
        self.lines.feed(bytes, |line| format.line(line, &mut out));
        out
    }

    /// End of stream: the activity of a last line that had no newline.
    pub fn finish(&mut self) -> Vec<Activity> {
        let mut out = Vec::new();
        let format = &mut self.format;
        self.lines.finish(|line| format.line(line, &mut out));
        out
    }
}

impl Format {
    fn line(&mut self, line: Line<'_>, out: &mut Vec<Activity>) {
        match self {
            Format::Command => {
                let mut text = String::from_utf8_lossy(line.bytes).into_owned();
                if !line.complete {
                    text.push('…');
                }
                out.push(Activity::Output(text));
            }
            // A cut JSON line cannot be parsed; its activity is lost, nothing else.
            _ if !line.complete => {}
            Format::Claude(state) => {
                if let Some(event) = json_object(line.bytes) {
                    state.event(&event, out);
                }
            }
            Format::Codex(state) => {
                if let Some(event) = json_object(line.bytes) {
                    state.event(&event, out);
                }
            }
        }
    }
}

fn json_object(bytes: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(bytes);
    let trimmed = text.trim();
    if !trimmed.starts_with('{') {
        return None;
    }
    serde_json::from_str::<Value>(trimmed)
        .ok()
        .filter(Value::is_object)
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// At most `max` bytes of `text`, cut on a character boundary, `…` marking a cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// A JSON value as short text: a string as itself, anything else compact JSON.
fn clip_value(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => clip(s, MAX_TOOL_TEXT_BYTES),
        other => clip(&other.to_string(), MAX_TOOL_TEXT_BYTES),
    }
}

/// What the claude decoder remembers: each tool call's name, so its result can repeat it.
#[derive(Debug, Default)]
struct ClaudeState {
    tools: HashMap<String, String>,
}

/// Tool calls whose result never came are forgotten past this many, so a long session cannot
/// grow the map without bound.
const MAX_OPEN_TOOLS: usize = 1024;

impl ClaudeState {
    fn event(&mut self, event: &Value, out: &mut Vec<Activity>) {
        let content = event
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array);
        match (str_field(event, "type"), content) {
            (Some("assistant"), Some(blocks)) => {
                for block in blocks {
                    self.assistant_block(block, out);
                }
            }
            (Some("user"), Some(blocks)) => {
                for block in blocks {
                    self.tool_result(block, out);
                }
            }
            _ => {}
        }
    }

    fn assistant_block(&mut self, block: &Value, out: &mut Vec<Activity>) {
        match str_field(block, "type") {
            Some("text") => {
                if let Some(text) = str_field(block, "text").filter(|t| !t.is_empty()) {
                    out.push(Activity::Text(text.to_string()));
                }
            }
            Some("thinking") => {
                if let Some(text) = str_field(block, "thinking").filter(|t| !t.is_empty()) {
                    out.push(Activity::Thinking(text.to_string()));
                }
            }
            Some("tool_use") => {
                let id = str_field(block, "id").unwrap_or("").to_string();
                let name = str_field(block, "name").unwrap_or("").to_string();
                if self.tools.len() >= MAX_OPEN_TOOLS {
                    self.tools.clear();
                }
                self.tools.insert(id.clone(), name.clone());
                out.push(Activity::ToolStarted {
                    id,
                    name,
                    input: block.get("input").map(clip_value).unwrap_or_default(),
                });
            }
            _ => {}
        }
    }

    fn tool_result(&mut self, block: &Value, out: &mut Vec<Activity>) {
        if str_field(block, "type") != Some("tool_result") {
            return;
        }
        let id = str_field(block, "tool_use_id").unwrap_or("").to_string();
        let name = self.tools.remove(&id).unwrap_or_default();
        let output = match block.get("content") {
            // The content is either a string or a list of blocks; the text blocks are the output.
            Some(Value::Array(parts)) => {
                let texts: Vec<&str> = parts.iter().filter_map(|p| str_field(p, "text")).collect();
                clip(&texts.join("\n"), MAX_TOOL_TEXT_BYTES)
            }
            Some(other) => clip_value(other),
            None => String::new(),
        };
        out.push(Activity::ToolFinished {
            id,
            name,
            failed: block
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            output,
        });
    }
}

/// What the codex decoder remembers: which tool-like items it announced as started, so an item
/// seen only on completion still gets a start, and none gets two.
#[derive(Debug, Default)]
struct CodexState {
    started: HashSet<String>,
}

impl CodexState {
    fn event(&mut self, event: &Value, out: &mut Vec<Activity>) {
        match str_field(event, "type") {
            Some(kind @ ("item.started" | "item.updated" | "item.completed")) => {
                if let Some(item) = event.get("item") {
                    self.item(kind, item, out);
                }
            }
            Some("error") => {
                if let Some(message) = str_field(event, "message") {
                    out.push(Activity::Output(format!("error: {message}")));
                }
            }
            Some("turn.failed") => {
                let message = event
                    .get("error")
                    .and_then(|e| str_field(e, "message"))
                    .unwrap_or("no message");
                out.push(Activity::Output(format!("turn failed: {message}")));
            }
            _ => {}
        }
    }

    fn item(&mut self, event: &str, item: &Value, out: &mut Vec<Activity>) {
        let id = str_field(item, "id").unwrap_or("").to_string();
        let kind = str_field(item, "type")
            .or_else(|| str_field(item, "item_type"))
            .unwrap_or("");
        let done = event == "item.completed";
        match kind {
            "agent_message" if done => {
                if let Some(text) = str_field(item, "text").filter(|t| !t.is_empty()) {
                    out.push(Activity::Text(text.to_string()));
                }
            }
            "reasoning" if done => {
                if let Some(text) = str_field(item, "text").filter(|t| !t.is_empty()) {
                    out.push(Activity::Thinking(text.to_string()));
                }
            }
            "error" if done => {
                if let Some(message) = str_field(item, "message") {
                    out.push(Activity::Output(format!("error: {message}")));
                }
            }
            // The plan as it changes; its completion at the end of the turn repeats the last one.
            "todo_list" if !done => out.push(Activity::Output(plan(item))),
            "command_execution" | "file_change" | "mcp_tool_call" | "web_search" => {
                self.tool(event, kind, id, item, out);
            }
            _ => {}
        }
    }

    fn tool(&mut self, event: &str, kind: &str, id: String, item: &Value, out: &mut Vec<Activity>) {
        let name = match kind {
            "command_execution" => "command".to_string(),
            "mcp_tool_call" => format!(
                "{}.{}",
                str_field(item, "server").unwrap_or("mcp"),
                str_field(item, "tool").unwrap_or("?")
            ),
            other => other.to_string(),
        };
        if event != "item.completed" {
            // `item.updated` repeats a started call with more output; the finish carries it all.
            if event == "item.started" && !self.started.contains(&id) {
                if self.started.len() >= MAX_OPEN_TOOLS {
                    self.started.clear();
                }
                self.started.insert(id.clone());
                out.push(Activity::ToolStarted {
                    id,
                    name,
                    input: codex_input(kind, item),
                });
            }
            return;
        }
        if !self.started.remove(&id) {
            out.push(Activity::ToolStarted {
                id: id.clone(),
                name: name.clone(),
                input: codex_input(kind, item),
            });
        }
        let status = str_field(item, "status").unwrap_or("completed");
        let exit_code = item.get("exit_code").and_then(Value::as_i64);
        let failed = matches!(status, "failed" | "declined")
            || exit_code.is_some_and(|c| c != 0)
            || item.get("error").is_some_and(|e| !e.is_null());
        let output = match kind {
            "command_execution" => item
                .get("aggregated_output")
                .map(clip_value)
                .unwrap_or_default(),
            "mcp_tool_call" => match item.get("error").filter(|e| !e.is_null()) {
                Some(err) => err
                    .get("message")
                    .map(clip_value)
                    .unwrap_or_else(|| clip_value(err)),
                None => item.get("result").map(clip_value).unwrap_or_default(),
            },
            _ => status.to_string(),
        };
        out.push(Activity::ToolFinished {
            id,
            name,
            failed,
            output,
        });
    }
}

/// A codex `todo_list` item as one line: `plan: [x] step; [ ] step`.
fn plan(item: &Value) -> String {
    let steps: Vec<String> = item
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|step| {
            let done = step.get("completed").and_then(Value::as_bool) == Some(true);
            let mark = if done { "[x]" } else { "[ ]" };
            format!("{mark} {}", str_field(step, "text").unwrap_or(""))
        })
        .collect();
    clip(&format!("plan: {}", steps.join("; ")), MAX_TOOL_TEXT_BYTES)
}

/// A codex tool item's input as short text.
fn codex_input(kind: &str, item: &Value) -> String {
    match kind {
        "command_execution" => item.get("command").map(clip_value).unwrap_or_default(),
        "mcp_tool_call" => item.get("arguments").map(clip_value).unwrap_or_default(),
        "web_search" => item.get("query").map(clip_value).unwrap_or_default(),
        "file_change" => {
            let changes: Vec<String> = item
                .get("changes")
                .and_then(Value::as_array)
                .map(|cs| {
                    cs.iter()
                        .map(|c| {
                            format!(
                                "{} {}",
                                str_field(c, "kind").unwrap_or("?"),
                                str_field(c, "path").unwrap_or("?")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            clip(&changes.join(", "), MAX_TOOL_TEXT_BYTES)
        }
        _ => String::new(),
    }
}

/// The bridge from the process runner to a sink: stdout chunks are decoded and each piece of
/// activity handed to the sink at once, on the task that reads the pipe. stderr is not activity
/// (both CLIs print diagnostics there; the failure detail quotes it).
pub struct LiveFeed<'a> {
    decoder: ActivityDecoder,
    sink: &'a dyn ActivitySink,
}

impl<'a> LiveFeed<'a> {
    /// A feed decoding `family`'s output into `sink`.
    pub fn new(family: Family, sink: &'a dyn ActivitySink) -> Self {
        Self {
            decoder: ActivityDecoder::new(family),
            sink,
        }
    }

    /// End of stream: hands over the activity of a last unterminated line.
    pub fn finish(mut self) {
        for activity in self.decoder.finish() {
            self.sink.activity(activity);
        }
    }
}

impl Observer for LiveFeed<'_> {
    fn chunk(&mut self, stream: Stream, bytes: &[u8]) {
        if stream == Stream::Out {
            for activity in self.decoder.feed(bytes) {
                self.sink.activity(activity);
            }
        }
    }
}
