//! The tools a model gets, as the model sees them (name, description, argument schema) and as
//! greenlight checks them (arguments read strictly, results held to a shape), behind one seam:
//! [`ToolHost`].
//!
//! The rule that keeps it simple: the adapter never touches a file. It asks a host to run a
//! call and gets back a [`ToolReply`]; the real host ([`crate::host::WorktreeHost`])
//! keeps every path inside the worktree, and [`FakeTools`] is an in-process registry for tests.
//! Whatever a host returns is checked against the tool's [`ResultShape`] before the model sees
//! it, so a host cannot send the model something the tool never promised.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{Value, json};

use greenlight_agent::dispatch::BoxFuture;

/// `read_file`: a file's lines (a page of them when it is long).
pub const READ_FILE: &str = "read_file";
/// `list_dir`: a directory's entries.
pub const LIST_DIR: &str = "list_dir";
/// `search`: a regular expression or literal over the files under a path.
pub const SEARCH: &str = "search";
/// `write_file`: a whole file's new content.
pub const WRITE_FILE: &str = "write_file";
/// `apply_patch`: a unified diff ([`crate::patch`]).
pub const APPLY_PATCH: &str = "apply_patch";
/// `run`: a shell command in the worktree.
pub const RUN: &str = "run";

/// What a model is told about one tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: &'static str,
    /// What it does and its limits, in a sentence or two.
    pub description: String,
    /// The JSON Schema of its arguments (an object).
    pub parameters: Value,
    /// What its result must look like.
    pub result: ResultShape,
}

impl ToolSpec {
    /// The `tools` entry of a chat-completions request.
    pub fn as_openai_tool(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            }
        })
    }
}

/// The JSON type of one result field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string.
    Str,
    /// A non-negative integer.
    Count,
    /// An integer (an exit code may be negative).
    Int,
    /// `true` or `false`.
    Bool,
    /// An array.
    List,
}

impl Kind {
    fn holds(self, value: &Value) -> bool {
        match self {
            Kind::Str => value.is_string(),
            Kind::Count => value.is_u64(),
            Kind::Int => value.is_i64() || value.is_u64(),
            Kind::Bool => value.is_boolean(),
            Kind::List => value.is_array(),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Kind::Str => "a string",
            Kind::Count => "a non-negative integer",
            Kind::Int => "an integer",
            Kind::Bool => "a boolean",
            Kind::List => "an array",
        }
    }
}

/// The fields a tool's result object must have (`required`) and may have (`optional`), with
/// their types; no other field is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultShape {
    /// Always present.
    pub required: &'static [(&'static str, Kind)],
    /// Present or absent (`null` counts as absent).
    pub optional: &'static [(&'static str, Kind)],
}

impl ResultShape {
    /// Checks `value` against the shape; the error names the field at fault.
    pub fn check(&self, tool: &str, value: &Value) -> Result<(), String> {
        let Some(object) = value.as_object() else {
            return Err(format!("the {tool} result is not a JSON object"));
        };
        for (name, kind) in self.required {
            match object.get(*name) {
                Some(v) if kind.holds(v) => {}
                Some(_) => {
                    return Err(format!(
                        "the {tool} result's `{name}` is not {}",
                        kind.name()
                    ));
                }
                None => return Err(format!("the {tool} result has no `{name}`")),
            }
        }
        for (name, v) in object {
            if self.required.iter().any(|(n, _)| n == name) || v.is_null() {
                continue;
            }
            match self.optional.iter().find(|(n, _)| n == name) {
                Some((_, kind)) if kind.holds(v) => {}
                Some((_, kind)) => {
                    return Err(format!(
                        "the {tool} result's `{name}` is not {}",
                        kind.name()
                    ));
                }
                None => {
                    return Err(format!(
                        "the {tool} result has an unexpected field `{name}`"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The bounds the real host holds each tool to. Every number is sent to the model in the
/// tool's description, so the model knows them before it hits them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLimits {
    /// The largest file `read_file`, `search` and `apply_patch` read, and `write_file` writes.
    pub max_file_bytes: u64,
    /// Lines `read_file` returns per call when the model does not ask for fewer.
    pub read_lines: usize,
    /// Entries `list_dir` returns.
    pub list_entries: usize,
    /// Matches `search` returns.
    pub search_matches: usize,
    /// Bytes of files `search` reads in one call before it stops.
    pub search_scan_bytes: u64,
    /// The longest a `run` command may take (it may ask for less).
    pub run_timeout: std::time::Duration,
    /// Bytes of a command's output `run` keeps (its tail).
    pub run_output_bytes: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            // The gate crate's bound on files a repository controls; source files are far smaller.
            max_file_bytes: 1024 * 1024,
            read_lines: 400,
            list_entries: 500,
            search_matches: 200,
            search_scan_bytes: 64 * 1024 * 1024,
            run_timeout: std::time::Duration::from_secs(120),
            run_output_bytes: 64 * 1024,
        }
    }
}

/// The six tools, as the model is told about them.
pub fn specs(limits: &ToolLimits) -> Vec<ToolSpec> {
    let path = |what: &str| json!({"type": "string", "description": format!("{what}, relative to the worktree root (no absolute paths, no `..`)")});
    vec![
        ToolSpec {
            name: READ_FILE,
            description: format!(
                "Read a text file. Returns up to {} lines from `start_line` (1-based) with line numbers; `next_start_line` is set when there is more. Files over {} bytes are refused.",
                limits.read_lines, limits.max_file_bytes
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": path("The file"),
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line to return (default 1)"},
                    "max_lines": {"type": "integer", "minimum": 1, "description": "How many lines at most"},
                },
                "required": ["path"],
                "additionalProperties": false,
            }),
            result: ResultShape {
                required: &[
                    ("path", Kind::Str),
                    ("content", Kind::Str),
                    ("start_line", Kind::Count),
                    ("total_lines", Kind::Count),
                ],
                optional: &[("next_start_line", Kind::Count)],
            },
        },
        ToolSpec {
            name: LIST_DIR,
            description: format!(
                "List a directory's entries (name, kind, size), sorted by name; at most {}.",
                limits.list_entries
            ),
            parameters: json!({
                "type": "object",
                "properties": {"path": path("The directory (default: the root, `.`)")},
                "additionalProperties": false,
            }),
            result: ResultShape {
                required: &[("path", Kind::Str), ("entries", Kind::List)],
                optional: &[("omitted", Kind::Count)],
            },
        },
        ToolSpec {
            name: SEARCH,
            description: format!(
                "Search the text files under a path for a regular expression (Rust regex syntax) or, with `literal`, a plain string. Returns `path:line: text` matches, at most {}; `.git` and files over {} bytes are skipped.",
                limits.search_matches, limits.max_file_bytes
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "What to find"},
                    "path": path("Where to look (default: the root, `.`)"),
                    "literal": {"type": "boolean", "description": "Match the pattern as plain text (default false)"},
                },
                "required": ["pattern"],
                "additionalProperties": false,
            }),
            result: ResultShape {
                required: &[("matches", Kind::List), ("files_searched", Kind::Count)],
                optional: &[("stopped", Kind::Str)],
            },
        },
        ToolSpec {
            name: WRITE_FILE,
            description: format!(
                "Write a whole file (created with its directories, or replaced). At most {} bytes. Prefer apply_patch for a small change to an existing file.",
                limits.max_file_bytes
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": path("The file"),
                    "content": {"type": "string", "description": "The complete new content"},
                },
                "required": ["path", "content"],
                "additionalProperties": false,
            }),
            result: ResultShape {
                required: &[("path", Kind::Str), ("bytes", Kind::Count), ("created", Kind::Bool)],
                optional: &[],
            },
        },
        ToolSpec {
            name: APPLY_PATCH,
            description: "Apply a unified diff (as `diff -u` or `git diff` prints it: `--- a/FILE`, `+++ b/FILE`, then `@@ -L,N +L,N @@` hunks of ` ` context, `-` removed and `+` added lines; `/dev/null` creates or deletes a file). Every hunk must match the file's current lines; if one does not, nothing is changed and the error says where.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"patch": {"type": "string", "description": "The unified diff"}},
                "required": ["patch"],
                "additionalProperties": false,
            }),
            result: ResultShape {
                required: &[("files", Kind::List)],
                optional: &[],
            },
        },
        ToolSpec {
            name: RUN,
            description: format!(
                "Run a shell command (`/bin/sh -c`) in the worktree root with no stdin. It is ended after `timeout_sec` (at most {} s) with everything it started; the last {} bytes of its output (stdout and stderr interleaved) are returned with its exit code.",
                limits.run_timeout.as_secs(),
                limits.run_output_bytes
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line"},
                    "timeout_sec": {"type": "integer", "minimum": 1, "description": "Its time limit in seconds"},
                },
                "required": ["command"],
                "additionalProperties": false,
            }),
            result: ResultShape {
                required: &[("exit_code", Kind::Int), ("timed_out", Kind::Bool), ("output", Kind::Str)],
                optional: &[("output_cut_bytes", Kind::Count), ("leftovers_killed", Kind::Count)],
            },
        },
    ]
}

/// One call for a host to run: the arguments already parsed as JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRequest {
    /// The tool's name.
    pub name: String,
    /// Its arguments.
    pub arguments: Value,
    /// How long the call may take (what is left of the dispatch's deadline, at most).
    pub deadline: std::time::Duration,
}

/// What a host made of a call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolReply {
    /// The result object (checked against the tool's shape before the model sees it).
    Ok(Value),
    /// The call ran, or tried to, and failed; the message is for the model.
    Failed(String),
    /// The call was refused before any effect (a path outside the worktree, bad arguments);
    /// the message is for the model.
    Refused(String),
}

/// Where tool calls run. Implementations must never panic on what a model sends.
pub trait ToolHost: Send + Sync {
    /// The tools this host offers, as the model is told about them.
    fn specs(&self) -> Vec<ToolSpec>;
    /// Runs one call within `request.deadline`.
    fn call<'a>(&'a self, request: &'a ToolRequest) -> BoxFuture<'a, ToolReply>;
}

/// Reads a call's arguments into `T`, strictly: the error names the field at fault.
pub fn arguments<T: serde::de::DeserializeOwned>(
    tool: &str,
    value: &Value,
) -> Result<T, ToolReply> {
    serde_json::from_value(value.clone()).map_err(|e| {
        ToolReply::Refused(format!("{tool}: bad arguments: {e}; see the tool's schema"))
    })
}

type Handler = Box<dyn Fn(&Value) -> ToolReply + Send + Sync>;

/// An in-process tool registry for tests: each tool a closure over its arguments, every call
/// remembered. Offers exactly the tools registered, with the real tools' specs where the name
/// matches one.
#[derive(Default)]
pub struct FakeTools {
    handlers: BTreeMap<String, Handler>,
    calls: Mutex<Vec<(String, Value)>>,
    delay: Option<std::time::Duration>,
}

impl std::fmt::Debug for FakeTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeTools")
            .field("tools", &self.handlers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl FakeTools {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `name` with `handler`.
    pub fn with(
        mut self,
        name: &str,
        handler: impl Fn(&Value) -> ToolReply + Send + Sync + 'static,
    ) -> Self {
        self.handlers.insert(name.to_owned(), Box::new(handler));
        self
    }

    /// Every call takes this long (to test deadlines).
    pub fn delayed(mut self, delay: std::time::Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// The calls made so far: name and arguments.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl ToolHost for FakeTools {
    fn specs(&self) -> Vec<ToolSpec> {
        let real = specs(&ToolLimits::default());
        self.handlers
            .keys()
            .map(|name| {
                real.iter()
                    .find(|s| s.name == name.as_str())
                    .cloned()
                    .unwrap_or_else(|| ToolSpec {
                        name: "fake",
                        description: format!("the fake tool {name}"),
                        parameters: json!({"type": "object"}),
                        result: ResultShape {
                            required: &[],
                            optional: &[],
                        },
                    })
            })
            .collect()
    }

    fn call<'a>(&'a self, request: &'a ToolRequest) -> BoxFuture<'a, ToolReply> {
        Box::pin(async move {
            if let Ok(mut calls) = self.calls.lock() {
                calls.push((request.name.clone(), request.arguments.clone()));
            }
            if let Some(delay) = self.delay {
                tokio::time::sleep(delay).await;
            }
            match self.handlers.get(&request.name) {
                Some(handler) => handler(&request.arguments),
                None => ToolReply::Refused(format!("no tool named `{}`", request.name)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spec_is_an_object_schema_with_its_required_fields_declared() {
        for spec in specs(&ToolLimits::default()) {
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
            let props = spec.parameters["properties"]
                .as_object()
                .expect("properties");
            for required in spec.parameters["required"].as_array().into_iter().flatten() {
                let name = required.as_str().expect("a name");
                assert!(props.contains_key(name), "{}: {name}", spec.name);
            }
            assert_eq!(spec.as_openai_tool()["function"]["name"], spec.name);
        }
    }

    #[test]
    fn a_result_is_held_to_its_shape() {
        let spec = specs(&ToolLimits::default())
            .into_iter()
            .find(|s| s.name == WRITE_FILE)
            .expect("write_file");
        let ok = json!({"path": "a", "bytes": 3, "created": true});
        assert_eq!(spec.result.check(WRITE_FILE, &ok), Ok(()));
        let missing = json!({"path": "a", "bytes": 3});
        assert!(
            spec.result
                .check(WRITE_FILE, &missing)
                .expect_err("missing")
                .contains("`created`")
        );
        let wrong = json!({"path": "a", "bytes": -1, "created": true});
        assert!(
            spec.result
                .check(WRITE_FILE, &wrong)
                .expect_err("wrong")
                .contains("`bytes`")
        );
        let extra = json!({"path": "a", "bytes": 3, "created": true, "secret": "x"});
        assert!(
            spec.result
                .check(WRITE_FILE, &extra)
                .expect_err("extra")
                .contains("`secret`")
        );
        assert!(spec.result.check(WRITE_FILE, &json!("text")).is_err());
    }
}
