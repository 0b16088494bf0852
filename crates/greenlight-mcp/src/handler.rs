//! The MCP server: the tool list with input and output schemas, argument checking with
//! messages that name what is wrong, and each call routed to its tool. A red gate is a
//! successful call (`result: "failed"`); `isError` is kept for a verify that could not run;
//! bad arguments are protocol errors (invalid params) and the server goes on serving.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use greenlight_proc::{Interrupt, InterruptWatch};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::digest::DigestArgs;
use crate::evidence::{self, DEFAULT_PAGE};
use crate::goals::{self, GoalChange, GoalLog, GoalLogArgs, GoalSelector, GoalStatus};
use crate::progress::Progress;
use crate::verify::{self, VerifyArgs, VerifyContext, VerifyOutput};
use crate::workflows::{self, WorkflowList, WorkflowListArgs, WorkflowReport, WorkflowStatusArgs};

/// Where the server works.
#[derive(Debug, Clone)]
pub struct Options {
    /// The directory a call without `cwd` works in (the server's working directory).
    pub cwd: PathBuf,
    /// `--state`: the state database [default: `$GREENLIGHT_STATE`, else the XDG path].
    pub state: Option<PathBuf>,
    /// How verify's gates reach a verify.yaml's remote cluster.
    pub remote: Option<greenlight_gate::RemoteSettings>,
    /// What the server's environment says (read once, by the process that starts the server):
    /// the default state database, the gates' grace and lock root, `GREENLIGHT_NO_RECORD`.
    pub env: greenlight_run::RunEnv,
}

/// greenlight's MCP server; cheap to clone (one per HTTP session shares the same state).
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Inner>,
}

struct Inner {
    options: Options,
    /// The server's own ending signals: a running verify ends its gates on them.
    signals: InterruptWatch,
    /// Fired by [`McpServer::shutdown`] (the client went away): running gates end too.
    stop: watch::Sender<Option<Interrupt>>,
    /// One verify at a time: a gate run adopts the orphans of its own process tree, which is
    /// only exact while nothing else of this process spawns.
    verify_lock: Arc<tokio::sync::Mutex<()>>,
    /// How many tool calls are running now.
    calls: watch::Sender<usize>,
    tools: Vec<Tool>,
}

/// Counts one running tool call for as long as it lives.
struct Running<'a>(&'a watch::Sender<usize>);

impl<'a> Running<'a> {
    fn start(calls: &'a watch::Sender<usize>) -> Running<'a> {
        calls.send_modify(|n| *n += 1);
        Running(calls)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl McpServer {
    /// A server over `options`, ending running gates when `signals` fires.
    pub fn new(options: Options, signals: InterruptWatch) -> McpServer {
        McpServer {
            inner: Arc::new(Inner {
                options,
                signals,
                stop: watch::channel(None).0,
                verify_lock: Arc::new(tokio::sync::Mutex::new(())),
                calls: watch::channel(0).0,
                tools: tools(),
            }),
        }
    }

    /// How many tool calls are running, as it changes.
    pub fn calls_running(&self) -> watch::Receiver<usize> {
        self.inner.calls.subscribe()
    }

    /// Ends a running verify's gates (as SIGTERM would) and waits until it has answered, at
    /// most `patience`: nothing the server started outlives it.
    pub async fn shutdown(&self, patience: std::time::Duration) {
        self.inner.stop.send_replace(Some(Interrupt::Term));
        let _ = tokio::time::timeout(patience, self.inner.verify_lock.lock()).await;
    }

    fn state_path(&self) -> Result<PathBuf, ErrorData> {
        let options = &self.inner.options;
        options
            .env
            .state_path(options.state.as_deref())
            .map_err(|e| {
                ErrorData::internal_error(format!("{e}; start the server with --state PATH"), None)
            })
    }

    fn evidence_root(&self) -> Option<PathBuf> {
        let state = self.state_path().ok()?;
        Some(
            greenlight_store::local_anchor(&state)
                .parent()?
                .join("evidence"),
        )
    }
}

/// The tool names, in the order `tools/list` gives them.
pub const TOOL_NAMES: [&str; 9] = [
    "verify",
    "digest",
    "evidence",
    "goal_status",
    "goal_log",
    "goal_pause",
    "goal_resume",
    "workflow_status",
    "workflow_list",
];

fn tool<I: JsonSchema + 'static, O: JsonSchema + 'static>(
    name: &'static str,
    description: &'static str,
    read_only: bool,
) -> Tool {
    let mut tool = Tool::new(name, description, Arc::new(serde_json::Map::new()))
        .with_input_schema::<I>()
        .with_output_schema::<O>()
        .with_annotations(
            ToolAnnotations::new()
                .read_only(read_only)
                .destructive(false)
                .open_world(false),
        );
    let mut input = (*tool.input_schema).clone();
    plain_optionals(&mut input);
    tool.input_schema = Arc::new(input);
    tool
}

/// An optional argument is described by its own type, not a union with `null`: it is optional
/// because it is not `required`. Some clients (Codex among them) cannot read `["string",
/// "null"]` or an `anyOf` with a null branch, and leave such arguments out or send them wrong;
/// the server still accepts an explicit `null`.
fn plain_optionals(schema: &mut serde_json::Map<String, serde_json::Value>) {
    use serde_json::Value;
    if let Some(Value::Array(types)) = schema.get("type") {
        let rest: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if rest.len() == 1 && rest.len() < types.len() {
            schema.insert("type".into(), rest[0].clone());
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            let rest: Vec<Value> = branches
                .iter()
                .filter(|b| b.get("type").is_none_or(|t| t != "null"))
                .cloned()
                .collect();
            if rest.len() == 1 && rest.len() < branches.len() {
                schema.remove(key);
                if let Value::Object(only) = &rest[0] {
                    for (k, v) in only {
                        schema.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                }
            }
        }
    }
    if schema.get("default") == Some(&Value::Null) {
        schema.remove("default");
    }
    for value in schema.values_mut() {
        match value {
            Value::Object(inner) => plain_optionals(inner),
            Value::Array(items) => {
                for item in items {
                    if let Value::Object(inner) = item {
                        plain_optionals(inner);
                    }
                }
            }
            _ => {}
        }
    }
}

fn tools() -> Vec<Tool> {
    vec![
        tool::<VerifyArgs, VerifyOutput>(
            "verify",
            "Run the gates declared in the worktree's .greenlight/verify.yaml (else \
             .commandmate/verify.yaml) and judge each by \
             its exit code. A red gate is a normal answer with result \"failed\" and the exact \
             failures (digest_compact) or the output's tail; read a gate's whole output with \
             `evidence`. Sends progress per gate (and every 10 s while one runs) when given a \
             progress token; cancelling the call ends the gates' processes.",
            false,
        ),
        tool::<DigestArgs, greenlight_digest::Digest>(
            "digest",
            "Turn test or build output (text, or a file) into exact diagnostics: failed tests \
             and compiler findings with file and line, and a compact form when the output was \
             recognised completely.",
            true,
        ),
        tool::<EvidenceArgs, EvidencePage>(
            "evidence",
            "Read a page of one gate's whole output from a `verify` run (by its run_id), so a \
             long log never has to fit in one answer. Follow next_offset until it is null.",
            true,
        ),
        tool::<GoalSelector, GoalStatus>(
            "goal_status",
            "A goal's state, gates (with each one's last result) and agent dispatches, as \
             `greenlight goal status --json` prints them. By id, or a worktree's goal.",
            true,
        ),
        tool::<GoalLogArgs, GoalLog>(
            "goal_log",
            "A page of a goal's event log, as `greenlight goal log --json` prints it.",
            true,
        ),
        tool::<GoalSelector, GoalChange>(
            "goal_pause",
            "Pause an active goal: a loop running it stops at its next step.",
            false,
        ),
        tool::<GoalSelector, GoalChange>(
            "goal_resume",
            "Mark a paused goal active again (a new turn budget, gate attempts kept) and say \
             how to run its loop if no runner is attached.",
            false,
        ),
        tool::<WorkflowStatusArgs, WorkflowReport>(
            "workflow_status",
            "A workflow run's status, budget and spend (dispatch units, tokens, cost; null when \
             unreported), each step and fan-out member reached with its newest attempt, and the \
             member worktrees (a kept one says why), as `greenlight workflow status --json` \
             prints them.",
            true,
        ),
        tool::<WorkflowListArgs, WorkflowList>(
            "workflow_list",
            "The workflow runs in the state database, newest first, as `greenlight workflow \
             list --json` prints them.",
            true,
        ),
    ]
}

/// Arguments of `evidence`.
#[derive(Debug, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceArgs {
    /// The `run_id` a `verify` answer gave.
    pub run_id: String,
    /// The gate id.
    pub gate: String,
    /// Which attempt (1, or 2 after a retry) [default: the last].
    #[serde(default)]
    pub attempt: Option<u8>,
    /// The byte offset to start at [default: 0].
    #[serde(default)]
    pub offset: Option<u64>,
    /// Bytes to return [default: 65536, at most 1048576].
    #[serde(default)]
    pub limit: Option<u64>,
}

/// A page of a gate's output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EvidencePage {
    /// The run.
    pub run_id: String,
    /// The gate.
    pub gate: String,
    /// The attempt read.
    pub attempt: u8,
    /// How many attempts the gate had.
    pub attempts: u8,
    /// Where this page starts (bytes; moved back to a character boundary when needed).
    pub offset: u64,
    /// Where the next page starts; `null` at the end.
    pub next_offset: Option<u64>,
    /// Bytes kept of the output.
    pub total_bytes: u64,
    /// Bytes the gate printed (more than `total_bytes` only past the keeping limit).
    pub printed_bytes: u64,
    /// The text (bytes that are not UTF-8 shown as U+FFFD).
    pub text: String,
}

/// Resolves a `cwd` argument against the server's directory; it must be a directory.
pub fn resolve_dir(cwd: Option<&str>, default: &Path) -> Result<PathBuf, String> {
    let dir = match cwd {
        None => default.to_path_buf(),
        Some("") => {
            return Err(
                "`cwd` is empty; pass the worktree's path, or leave it out for the server's directory".into(),
            );
        }
        Some(cwd) => default.join(cwd),
    };
    match std::fs::metadata(&dir) {
        Ok(meta) if meta.is_dir() => Ok(dir),
        Ok(_) => Err(format!(
            "`cwd` {} is not a directory; pass the worktree's directory",
            dir.display()
        )),
        Err(e) => Err(format!(
            "`cwd` {} cannot be used ({e}); pass an existing worktree directory",
            dir.display()
        )),
    }
}

fn parse<T: DeserializeOwned>(
    tool: &str,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
) -> Result<T, ErrorData> {
    let value = serde_json::Value::Object(arguments.unwrap_or_default());
    // The path names the argument at fault (`gates: 5` says `gates`, not only "expected a
    // sequence"); an unknown or missing field has no path, and its message names it.
    serde_path_to_error::deserialize(value).map_err(|e| {
        let at = e.path().to_string();
        let what = if at == "." {
            format!("`{tool}` arguments")
        } else {
            format!("`{tool}` argument `{at}`")
        };
        ErrorData::invalid_params(
            format!(
                "{what}: {}; see the tool's inputSchema in tools/list",
                e.inner()
            ),
            None,
        )
    })
}

fn structured<T: Serialize>(value: &T, text: String) -> Result<CallToolResponse, ErrorData> {
    let json = serde_json::to_value(value)
        .map_err(|e| ErrorData::internal_error(format!("cannot encode the answer: {e}"), None))?;
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json);
    Ok(result.into())
}

fn invalid(message: String) -> ErrorData {
    ErrorData::invalid_params(message, None)
}

impl McpServer {
    async fn verify(
        &self,
        args: VerifyArgs,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let cwd = resolve_dir(args.cwd.as_deref(), &self.inner.options.cwd).map_err(invalid)?;
        let token = context.meta.get_progress_token();
        let (progress, sender) = Progress::start(context.peer.clone(), token);
        let lock = Arc::clone(&self.inner.verify_lock);
        let turn = match Arc::clone(&lock).try_lock_owned() {
            Ok(guard) => guard,
            Err(_) => {
                progress.send("waiting for another verify call of this server to finish".into());
                tokio::select! {
                    guard = lock.lock_owned() => guard,
                    () = context.ct.cancelled() => {
                        drop(progress);
                        sender.flush().await;
                        return Err(ErrorData::internal_error("cancelled before it started", None));
                    }
                }
            }
        };
        let (interrupt, watcher) = verify::call_interrupt(
            self.inner.signals.clone(),
            self.inner.stop.subscribe(),
            context.ct.clone(),
        );
        let outcome = verify::run_on_thread(
            args,
            turn,
            VerifyContext {
                cwd,
                state: self.inner.options.state.clone(),
                evidence_root: self.evidence_root(),
                progress: progress.clone(),
                interrupt,
                remote: self.inner.options.remote.clone(),
                env: self.inner.options.env.clone(),
            },
        )
        .await;
        watcher.abort();
        drop(progress);
        sender.flush().await;
        match outcome {
            Ok(output) => {
                let text = verify::text(&output);
                structured(&output, text)
            }
            Err(cannot) => {
                let mut result =
                    CallToolResult::error(vec![ContentBlock::text(cannot.0.join("\n"))]);
                result.structured_content = None;
                Ok(result.into())
            }
        }
    }

    fn evidence(&self, args: &EvidenceArgs) -> Result<CallToolResponse, ErrorData> {
        let root = self.evidence_root().ok_or_else(|| {
            invalid("no state directory, so no evidence is kept (set HOME or GREENLIGHT_STATE for the server)".into())
        })?;
        let page = evidence::page(
            &root,
            &args.run_id,
            &args.gate,
            args.attempt,
            args.offset.unwrap_or(0),
            args.limit.unwrap_or(DEFAULT_PAGE),
        )
        .map_err(|e| invalid(e.to_string()))?;
        let answer = EvidencePage {
            run_id: args.run_id.clone(),
            gate: args.gate.clone(),
            attempt: page.attempt,
            attempts: page.attempts,
            offset: page.offset,
            next_offset: page.next_offset,
            total_bytes: page.kept_bytes,
            printed_bytes: page.printed_bytes,
            text: page.text,
        };
        let text = match answer.next_offset {
            Some(next) => format!(
                "{}\n[bytes {}..{next} of {}; next_offset {next}]",
                answer.text, answer.offset, answer.total_bytes
            ),
            None => format!(
                "{}\n[bytes {}..{} of {}; end]",
                answer.text, answer.offset, answer.total_bytes, answer.total_bytes
            ),
        };
        structured(&answer, text)
    }

    async fn blocking<T, F>(&self, work: F) -> Result<T, ErrorData>
    where
        T: Send + 'static,
        F: FnOnce(PathBuf, PathBuf) -> Result<T, String> + Send + 'static,
    {
        let state = self.state_path()?;
        let cwd = self.inner.options.cwd.clone();
        tokio::task::spawn_blocking(move || work(state, cwd))
            .await
            .map_err(|e| ErrorData::internal_error(format!("the tool's task failed: {e}"), None))?
            .map_err(invalid)
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("greenlight", env!("CARGO_PKG_VERSION"))
                    .with_title("greenlight"),
            )
            .with_instructions(
                "greenlight's gates are the authority on whether work is done: call `verify` \
                 before saying a task is finished, fix what it reports, and call it again. \
                 `evidence` pages a gate's whole output; `digest` reads any test or build output.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.inner.tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let _running = Running::start(&self.inner.calls);
        let name = request.name.as_ref();
        let arguments = request.arguments;
        match name {
            "verify" => {
                let args: VerifyArgs = parse(name, arguments)?;
                self.verify(args, context).await
            }
            "digest" => {
                let args: DigestArgs = parse(name, arguments)?;
                let cwd = self.inner.options.cwd.clone();
                let digest = tokio::task::spawn_blocking(move || crate::digest::run(&args, &cwd))
                    .await
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
                    .map_err(|e| invalid(format!("`digest`: {e}")))?;
                let text = digest.text();
                structured(&digest, text)
            }
            "evidence" => {
                let args: EvidenceArgs = parse(name, arguments)?;
                self.evidence(&args)
            }
            "goal_status" => {
                let args: GoalSelector = parse(name, arguments)?;
                let status = self
                    .blocking(move |state, cwd| goals::status(&state, &args, &cwd))
                    .await?;
                let text = format!(
                    "goal {} [{}] in {}: {}\nturns {}/{}; {} gate(s)",
                    status.goal.id,
                    status.goal.state,
                    status.goal.worktree.display(),
                    status.goal.text,
                    status.goal.turns_used,
                    status.goal.max_turns,
                    status.gates.len()
                );
                structured(&status, text)
            }
            "workflow_status" => {
                let args: WorkflowStatusArgs = parse(name, arguments)?;
                let report = self
                    .blocking(move |state, _| workflows::status(&state, &args))
                    .await?;
                let run = &report.run;
                let text = format!(
                    "workflow {} {} [{}] in {}: {} dispatch unit(s) spent; {} step(s) reached",
                    run.id,
                    run.name,
                    run.status,
                    run.worktree.display(),
                    run.spent.units,
                    report.steps.len()
                );
                structured(&report, text)
            }
            "workflow_list" => {
                let args: WorkflowListArgs = parse(name, arguments)?;
                let list = self
                    .blocking(move |state, _| workflows::list(&state, &args))
                    .await?;
                let text = list
                    .runs
                    .iter()
                    .map(|r| format!("{} {} [{}]", r.id, r.name, r.status))
                    .collect::<Vec<_>>()
                    .join("\n");
                structured(&list, text)
            }
            "goal_log" => {
                let args: GoalLogArgs = parse(name, arguments)?;
                let log = self
                    .blocking(move |state, _| goals::log(&state, &args))
                    .await?;
                let text = log
                    .events
                    .iter()
                    .map(|e| serde_json::to_string(e).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("\n");
                structured(&log, text)
            }
            "goal_pause" | "goal_resume" => {
                let args: GoalSelector = parse(name, arguments)?;
                let pause = name == "goal_pause";
                let change: GoalChange = self
                    .blocking(move |state, cwd| {
                        if pause {
                            goals::pause(&state, &args, &cwd)
                        } else {
                            goals::resume(&state, &args, &cwd)
                        }
                    })
                    .await?;
                let text = format!(
                    "goal {} is {}{}; {}",
                    change.goal.id,
                    change.goal.state,
                    if change.changed { "" } else { " (unchanged)" },
                    change.hint
                );
                structured(&change, text)
            }
            other => Err(invalid(format!(
                "unknown tool `{other}`; the tools are: {}",
                TOOL_NAMES.join(", ")
            ))),
        }
    }
}
