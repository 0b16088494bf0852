//! The openai family: greenlight itself is the agent harness for an OpenAI-compatible
//! `/v1/chat/completions` server, behind the same [`Dispatcher`] seam as the agent CLIs.
//!
//! One dispatch is one agent loop: send the messages, decode the streamed reply
//! ([`TurnDecoder`]), run each tool call through a [`ToolHost`] (recorded write-ahead in a
//! [`ToolLedger`], reported as [`Activity::ToolStarted`]/[`Activity::ToolFinished`]), append the
//! results, and ask again — until the model answers without a call. That answer is the
//! dispatch's reply, so the goal loop's verdict grammar and judge read it like any CLI's.
//!
//! Bounds: the dispatch deadline over everything (requests, backoff waits, tool calls), a number
//! of model requests and of tokens per dispatch, a size per tool result, and [`REPLY_LIMIT`] per
//! model reply (what it streams is read only up to there). Every failure names a
//! member of the one [`Reason`] list: the deadline is `dispatch-timeout`; an unreachable or
//! refusing server, an error in the stream or an empty answer `dispatch-dead`; a spent bound
//! `dispatch-budget-exhausted`. A refused tool call is not a failure: the model is told why and
//! the loop goes on.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use greenlight_agent::activity::{Activity, ActivitySink, NoActivity};
use greenlight_agent::clock::elapsed_ms;
use greenlight_agent::containment::check_all;
use greenlight_agent::dispatch::{note_probe_answer, probe_failed};
use greenlight_agent::ledger::{NoLedger, ToolEnd, ToolIntent, ToolLedger, ToolStatus};
use greenlight_agent::runner::DEFAULT_CAPTURE_LIMIT;
use greenlight_agent::{
    AdapterOptions, BoxFuture, Deliverable, DispatchRequest, DispatchResult, Dispatcher, Family,
    Outcome, PROBE_PROMPT, ProbeOutcome, Reason, TokenSource,
};

use crate::Error;
use crate::client::{AttemptError, Client, RetryPolicy};
use crate::host::WorktreeHost;
use crate::prompt;
use crate::tools::{ToolHost, ToolLimits, ToolReply, ToolRequest, ToolSpec};
use crate::turn::{ToolCall, ToolFormat, TurnDecoder, TurnEvent};

/// The most text one model reply may stream (answer, thoughts, tool calls and what could not be
/// read as one, in bytes): the same 8 MiB a CLI agent's output stream is kept to. Past it the
/// dispatch ends (`dispatch-budget-exhausted`) and the stream is dropped: a server that will
/// not stop costs this much, not what it sends.
pub const REPLY_LIMIT: usize = DEFAULT_CAPTURE_LIMIT;

/// The variable the API key is read from when `--api-key-env` is not given.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

/// The bounds of one dispatch's agent loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopLimits {
    /// Model requests per dispatch (each reply with tool calls costs one).
    pub max_steps: u32,
    /// Prompt plus completion tokens per dispatch, summed over its requests as the server
    /// reported them; `None` for no bound. Unbounded when the server reports no usage.
    pub max_tokens: Option<u64>,
    /// Bytes of one tool result sent to the model; the rest is cut with a note.
    pub max_result_bytes: usize,
}

impl Default for LoopLimits {
    fn default() -> Self {
        Self {
            // A fix that needs more than 50 requests in one turn is better served by the gates'
            // evidence in the next turn than by a longer conversation.
            max_steps: 50,
            // Each request re-sends the conversation: 50 requests over a 32k context is 1.6M.
            max_tokens: Some(2_000_000),
            // 32 KiB is about 8k tokens: room for a long file page or a test run's tail while
            // leaving most of a 32k context for the conversation.
            max_result_bytes: 32 * 1024,
        }
    }
}

/// Where an openai dispatcher sends its requests and how it runs its loop.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// The server's base URL, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// The variable holding the API key (sent as a bearer token when set; local servers need
    /// none). The key itself is never stored.
    pub api_key_env: String,
    /// How tool calls are offered and read.
    pub tool_format: ToolFormat,
    /// The loop's bounds.
    pub limits: LoopLimits,
    /// The tools' bounds.
    pub tools: ToolLimits,
    /// How failed requests are retried.
    pub retry: RetryPolicy,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How long the stream may send nothing before it counts as stalled (and is retried).
    pub idle_timeout: Duration,
}

impl Endpoint {
    /// An endpoint at `base_url` with every default.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key_env: DEFAULT_API_KEY_ENV.to_owned(),
            tool_format: ToolFormat::Auto,
            limits: LoopLimits::default(),
            tools: ToolLimits::default(),
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(10),
            // A CPU-only server can take minutes to read a long prompt before its first token.
            idle_timeout: Duration::from_secs(300),
        }
    }
}

/// The openai dispatcher.
pub struct OpenAi {
    options: AdapterOptions,
    endpoint: Endpoint,
    client: Client,
    tools: Option<Arc<dyn ToolHost>>,
}

impl std::fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAi")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// Whether `id` can be sent as a model id: 1 to 256 characters, no whitespace or control
/// characters (servers name models `org/name`, `family:tag`, `file.gguf`).
pub fn is_acceptable_model_id(id: &str) -> bool {
    let count = id.chars().count();
    (1..=256).contains(&count) && !id.chars().any(|c| c.is_whitespace() || c.is_control())
}

impl OpenAi {
    /// A dispatcher from the shared `options` and the server's `endpoint`; refused when the
    /// endpoint's base URL is unusable.
    pub fn new(options: AdapterOptions, endpoint: Endpoint) -> Result<Self, Error> {
        let client = Client::new(
            &endpoint.base_url,
            endpoint.connect_timeout,
            endpoint.idle_timeout,
        )
        .map_err(Error::Endpoint)?;
        Ok(Self {
            options,
            endpoint,
            client,
            tools: None,
        })
    }

    /// Runs tool calls through `host` instead of the worktree host (tests: an in-process
    /// registry).
    pub fn with_tools(mut self, host: Arc<dyn ToolHost>) -> Self {
        self.tools = Some(host);
        self
    }

    fn api_key(&self) -> Option<String> {
        let name = self.endpoint.api_key_env.as_str();
        greenlight_agent::env::lookup(self.options.base_env.as_deref(), name)
            .map(|v| v.to_string_lossy().into_owned())
            .filter(|v| !v.trim().is_empty())
    }

    fn host_for(&self, req: &DispatchRequest) -> Arc<dyn ToolHost> {
        if req.deliverable == Deliverable::ReturnValue {
            return Arc::new(NoTools);
        }
        match &self.tools {
            Some(host) => Arc::clone(host),
            None => Arc::new(WorktreeHost::new(
                &req.cwd,
                self.endpoint.tools,
                self.options.base_env.clone(),
                vec![self.endpoint.api_key_env.clone().into()],
                self.options.grace,
            )),
        }
    }

    async fn run(
        &self,
        req: &DispatchRequest,
        activity: &dyn ActivitySink,
        ledger: &dyn ToolLedger,
    ) -> DispatchResult {
        let clock = self.options.clock.as_ref();
        let start = clock.now();
        let deadline = Instant::now() + req.timeout;
        let refuse = |reason: Reason, detail: String| {
            DispatchResult::failed(
                Outcome::Error,
                Family::OpenAi,
                &req.model,
                elapsed_ms(clock, start),
                reason,
                detail,
            )
        };
        if !is_acceptable_model_id(&req.model) {
            return refuse(
                Reason::ModelIdInvalid,
                format!(
                    "model id {:?} cannot be sent to the server (1 to 256 characters, no whitespace or control characters); pass the id the server lists at /v1/models",
                    req.model
                ),
            );
        }
        if let Some(ceiling) = self.options.prompt_ceiling {
            let chars = req.prompt.chars().count();
            if chars > ceiling {
                return refuse(
                    Reason::PromptOverCeiling,
                    format!(
                        "the prompt is {chars} characters, over the {ceiling}-character ceiling; refused rather than truncated; shorten the evidence or raise the ceiling"
                    ),
                );
            }
        }
        if let Err(err) = check_all(&req.cwd, &req.reads, &req.writes) {
            return refuse(err.reason(), err.to_string());
        }
        let mut run = Run {
            adapter: self,
            req,
            activity,
            ledger,
            deadline,
            host: self.host_for(req),
            api_key: self.api_key(),
            tokens_in: None,
            tokens_out: None,
            seq: 0,
            call_ids: std::collections::HashSet::new(),
        };
        let ended = run.agent_loop().await;
        let wall_ms = elapsed_ms(clock, start);
        let mut result = match ended {
            Ok(text) => DispatchResult {
                outcome: Outcome::Ok,
                text: Some(text),
                family: Family::OpenAi,
                model_used: Some(req.model.clone()),
                wall_ms,
                tokens_in: None,
                tokens_out: None,
                cache_read_tokens: None,
                cache_creation_tokens: None,
                cost_usd: None,
                token_source: None,
                exit_code: None,
                output_truncated: false,
                failure: None,
            },
            Err((reason, detail)) => DispatchResult::failed(
                Outcome::Null,
                Family::OpenAi,
                &req.model,
                wall_ms,
                reason,
                detail,
            ),
        };
        result.tokens_in = run.tokens_in;
        result.tokens_out = run.tokens_out;
        if run.tokens_in.is_some() || run.tokens_out.is_some() {
            result.token_source = Some(TokenSource::OpenaiUsage);
        }
        result
    }

    async fn probe_all(&self, candidates: &[String]) -> ProbeOutcome {
        let clock = self.options.clock.as_ref();
        let start = clock.now();
        let mut notes = Vec::new();
        for id in candidates {
            let mut req = DispatchRequest::new(
                Family::OpenAi,
                id,
                PROBE_PROMPT,
                greenlight_agent::env::temp_dir(self.options.base_env.as_deref()),
                self.options.probe_timeout,
            );
            req.step_id = "probe".into();
            let result = self.run(&req, &NoActivity, &NoLedger).await;
            if note_probe_answer(id, &result, &mut notes) {
                return ProbeOutcome {
                    id: Some(id.clone()),
                    wall_ms: elapsed_ms(clock, start),
                    detail: format!(
                        "{} answered on {id} ({})",
                        self.client.url(),
                        notes.join("; ")
                    ),
                    failure: None,
                };
            }
        }
        let detail = if candidates.is_empty() {
            "no candidate model ids to probe for openai; pass the ids the server serves (GET /v1/models lists them)".to_owned()
        } else {
            format!(
                "no openai candidate answered the probe at {}: {}",
                self.client.url(),
                notes.join("; ")
            )
        };
        probe_failed(elapsed_ms(clock, start), detail)
    }
}

impl Dispatcher for OpenAi {
    fn family(&self) -> Family {
        Family::OpenAi
    }

    fn probe<'a>(&'a self, candidates: &'a [String]) -> BoxFuture<'a, ProbeOutcome> {
        Box::pin(self.probe_all(candidates))
    }

    fn dispatch_observed<'a>(
        &'a self,
        request: &'a DispatchRequest,
        activity: &'a dyn ActivitySink,
    ) -> BoxFuture<'a, DispatchResult> {
        Box::pin(self.run(request, activity, &NoLedger))
    }

    fn dispatch_recorded<'a>(
        &'a self,
        request: &'a DispatchRequest,
        activity: &'a dyn ActivitySink,
        ledger: &'a dyn ToolLedger,
    ) -> BoxFuture<'a, DispatchResult> {
        Box::pin(self.run(request, activity, ledger))
    }
}

/// The host of a return-value dispatch (a probe, a judge): no tools, and a refusal for a model
/// that writes a call anyway.
struct NoTools;

impl ToolHost for NoTools {
    fn specs(&self) -> Vec<ToolSpec> {
        Vec::new()
    }
    fn call<'a>(&'a self, _: &'a ToolRequest) -> BoxFuture<'a, ToolReply> {
        Box::pin(async {
            ToolReply::Refused("no tools are available in this dispatch; answer in text".to_owned())
        })
    }
}

/// A failure of the dispatch: its reason and a sentence for a person.
type Failure = (Reason, String);

/// What one model reply said, collected from its events.
#[derive(Debug, Default)]
struct Reply {
    /// The bytes of text its events carried so far (see [`REPLY_LIMIT`]).
    bytes: usize,
    answer: String,
    calls: Vec<ToolCall>,
    violations: Vec<(String, String)>,
    bad_chunks: Vec<(String, String)>,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    finish: Option<String>,
    server_error: Option<String>,
}

impl Reply {
    fn take(&mut self, events: Vec<TurnEvent>, activity: &dyn ActivitySink) {
        for event in events {
            match event {
                TurnEvent::Thought(text) => activity.activity(Activity::Thinking(text)),
                TurnEvent::Answer(text) => {
                    self.answer.push_str(&text);
                    activity.activity(Activity::Text(text));
                }
                TurnEvent::ToolCall(call) => self.calls.push(call),
                TurnEvent::Violation { raw, why } => self.violations.push((raw, why)),
                TurnEvent::Usage {
                    prompt_tokens,
                    completion_tokens,
                } => {
                    // Servers that report usage on every chunk report running totals.
                    self.prompt_tokens = prompt_tokens.or(self.prompt_tokens);
                    self.completion_tokens = completion_tokens.or(self.completion_tokens);
                }
                TurnEvent::Finish { reason } => self.finish = Some(reason),
                TurnEvent::ServerError { message } => self.server_error = Some(message),
                TurnEvent::BadChunk { raw, why } => self.bad_chunks.push((raw, why)),
            }
        }
    }
}

/// One dispatch's loop state.
struct Run<'a> {
    adapter: &'a OpenAi,
    req: &'a DispatchRequest,
    activity: &'a dyn ActivitySink,
    ledger: &'a dyn ToolLedger,
    deadline: Instant,
    host: Arc<dyn ToolHost>,
    api_key: Option<String>,
    tokens_in: Option<u64>,
    tokens_out: Option<u64>,
    seq: u32,
    call_ids: std::collections::HashSet<String>,
}

/// The bytes of text `event` carries.
fn text_bytes(event: &TurnEvent) -> usize {
    match event {
        TurnEvent::Thought(text) | TurnEvent::Answer(text) => text.len(),
        TurnEvent::ToolCall(call) => {
            call.id.len() + call.name.len() + call.arguments.to_string().len()
        }
        TurnEvent::Violation { raw, why } | TurnEvent::BadChunk { raw, why } => {
            raw.len() + why.len()
        }
        TurnEvent::ServerError { message } => message.len(),
        TurnEvent::Usage { .. } | TurnEvent::Finish { .. } => 0,
    }
}

fn add(total: &mut Option<u64>, more: Option<u64>) {
    if let Some(more) = more {
        *total = Some(total.unwrap_or(0).saturating_add(more));
    }
}

impl Run<'_> {
    fn format(&self) -> ToolFormat {
        self.adapter.endpoint.tool_format
    }

    fn timeout(&self) -> Failure {
        (
            Reason::DispatchTimeout,
            format!(
                "the {} s deadline fired on step `{}` (attempt {}) while the model or a tool was still working",
                self.req.timeout.as_secs_f64(),
                self.req.step_id,
                self.req.attempt
            ),
        )
    }

    async fn agent_loop(&mut self) -> Result<String, Failure> {
        let specs = self.host.specs();
        let format = self.format();
        let mut messages = vec![
            json!({"role": "system", "content": prompt::system(format, &specs)}),
            json!({"role": "user", "content": self.req.prompt}),
        ];
        let limits = self.adapter.endpoint.limits;
        for step in 1..=limits.max_steps {
            let mut body = json!({
                "model": self.req.model,
                "messages": messages,
                "stream": true,
                "stream_options": {"include_usage": true},
            });
            if format != ToolFormat::Tags && !specs.is_empty() {
                body["tools"] = specs.iter().map(ToolSpec::as_openai_tool).collect();
            }
            let mut reply = self.request(&body).await?;
            // Ids greenlight made up (`call_1`, …) start again with each request: keep every id
            // of the conversation unique, so each result pairs with exactly one call.
            for call in &mut reply.calls {
                if !self.call_ids.insert(call.id.clone()) {
                    call.id = format!("{}_{step}", call.id);
                    self.call_ids.insert(call.id.clone());
                }
            }
            add(&mut self.tokens_in, reply.prompt_tokens);
            add(&mut self.tokens_out, reply.completion_tokens);
            if let Some(message) = &reply.server_error {
                return Err((
                    Reason::DispatchDead,
                    format!("the server reported an error in its stream: {message}"),
                ));
            }
            if let Some(max) = limits.max_tokens {
                let spent = self
                    .tokens_in
                    .unwrap_or(0)
                    .saturating_add(self.tokens_out.unwrap_or(0));
                if spent > max && !(reply.calls.is_empty() && reply.violations.is_empty()) {
                    return Err((
                        Reason::DispatchBudgetExhausted,
                        format!(
                            "the dispatch used {spent} tokens (prompt and completion over {step} requests), over its bound of {max}, before the model finished"
                        ),
                    ));
                }
            }
            if reply.calls.is_empty() && reply.violations.is_empty() {
                return final_answer(reply);
            }
            messages.push(prompt::assistant(format, &reply.answer, &reply.calls));
            let mut tag_results = Vec::new();
            for call in &reply.calls {
                let content = self.call_tool(step, call).await?;
                if format == ToolFormat::Tags {
                    tag_results.push(content);
                } else {
                    messages.push(prompt::tool_result(&call.id, &content));
                }
            }
            let mut notes = Vec::new();
            for (raw, why) in &reply.violations {
                notes.push(self.violation(step, raw, why)?);
            }
            let mut user = Vec::new();
            if !tag_results.is_empty() {
                user.push(prompt::tag_results(&tag_results));
            }
            user.extend(notes);
            if !user.is_empty() {
                messages.push(json!({"role": "user", "content": user.join("\n\n")}));
            }
        }
        Err((
            Reason::DispatchBudgetExhausted,
            format!(
                "the model was still calling tools after {} requests, the bound of one dispatch",
                limits.max_steps
            ),
        ))
    }

    /// One model request, retried on 429, 5xx, refused connections and broken or stalled
    /// streams, within the attempts and the deadline.
    async fn request(&mut self, body: &Value) -> Result<Reply, Failure> {
        let policy = self.adapter.endpoint.retry;
        let client = &self.adapter.client;
        let key_var = self.adapter.endpoint.api_key_env.as_str();
        let mut last = String::new();
        for attempt in 1..=policy.max_attempts.max(1) {
            if attempt > 1 {
                self.activity.activity(Activity::Output(format!(
                    "greenlight: {last}; attempt {attempt} of {}",
                    policy.max_attempts
                )));
            }
            // The idle timeout covers the wait for the response's head as well as each chunk.
            let idle = self.adapter.endpoint.idle_timeout;
            let idle_end = Instant::now() + idle;
            let opened = match tokio::time::timeout_at(
                self.deadline.min(idle_end),
                client.open(body, self.api_key.as_deref(), key_var),
            )
            .await
            {
                Ok(opened) => opened,
                Err(_) if self.deadline <= idle_end => return Err(self.timeout()),
                Err(_) => Err(AttemptError::Retry {
                    detail: format!(
                        "{} sent no response for {} s",
                        client.url(),
                        idle.as_secs_f64()
                    ),
                    retry_after: None,
                }),
            };
            let retry_after = match opened {
                Err(AttemptError::Fatal(detail)) => return Err((Reason::DispatchDead, detail)),
                Err(AttemptError::Retry {
                    detail,
                    retry_after,
                }) => {
                    last = detail;
                    retry_after
                }
                Ok(mut response) => match self.read(&mut response).await? {
                    Ok(reply) => return Ok(reply),
                    Err(detail) => {
                        last = detail;
                        None
                    }
                },
            };
            if attempt == policy.max_attempts {
                break;
            }
            if let Some(asked) = retry_after
                && asked > policy.max_retry_after
            {
                return Err((
                    Reason::DispatchDead,
                    format!(
                        "{last}; the server asked to wait {} s (Retry-After), more than the {} s greenlight waits",
                        asked.as_secs(),
                        policy.max_retry_after.as_secs()
                    ),
                ));
            }
            let wait = policy.delay(attempt, retry_after);
            if Instant::now() + wait >= self.deadline {
                return Err((
                    Reason::DispatchTimeout,
                    format!(
                        "{last}; waiting {} ms before the next attempt would pass the deadline",
                        wait.as_millis()
                    ),
                ));
            }
            tokio::time::sleep(wait).await;
        }
        Err((
            Reason::DispatchDead,
            format!(
                "{} attempts to reach the model failed; the last: {last}",
                policy.max_attempts
            ),
        ))
    }

    /// Reads one streamed reply. `Ok(Err(detail))`: the stream broke or stalled before the
    /// reply was complete, worth another attempt (no tool of it has run).
    async fn read(
        &self,
        response: &mut reqwest::Response,
    ) -> Result<Result<Reply, String>, Failure> {
        let client = &self.adapter.client;
        let mut decoder = TurnDecoder::new(self.format());
        let mut reply = Reply::default();
        loop {
            match client.next_chunk(response, self.deadline).await {
                Ok(Some(bytes)) => {
                    self.take(&mut reply, decoder.feed(&bytes))?;
                    if decoder.is_done() {
                        break;
                    }
                }
                Ok(None) => break,
                Err(None) => {
                    // The deadline is the failure either way; what is left is kept if it fits.
                    let _ = self.take(&mut reply, decoder.finish_at_deadline());
                    return Err(self.timeout());
                }
                Err(Some(detail)) if reply.finish.is_none() => return Ok(Err(detail)),
                // Everything but `[DONE]` arrived: the reply is whole.
                Err(Some(_)) => break,
            }
        }
        self.take(&mut reply, decoder.finish())?;
        if !decoder.is_done() && reply.finish.is_none() && reply.server_error.is_none() {
            return Ok(Err(format!(
                "the stream from {} ended before the reply was complete (no finish reason, no [DONE])",
                client.url()
            )));
        }
        Ok(Ok(reply))
    }

    /// Adds `events` to `reply`, or ends the dispatch when they take it past [`REPLY_LIMIT`]
    /// (they are dropped, not kept).
    fn take(&self, reply: &mut Reply, events: Vec<TurnEvent>) -> Result<(), Failure> {
        let bytes = events.iter().map(text_bytes).sum::<usize>();
        reply.bytes = reply.bytes.saturating_add(bytes);
        if reply.bytes > REPLY_LIMIT {
            return Err((
                Reason::DispatchBudgetExhausted,
                format!(
                    "the model's reply from {} passed {} MiB of text, the bound of one reply (as for a CLI agent's output); it was cut there and not kept; ask for a shorter answer, or check that the server stops generating",
                    self.adapter.client.url(),
                    REPLY_LIMIT >> 20
                ),
            ));
        }
        reply.take(events, self.activity);
        Ok(())
    }

    fn next_seq(&mut self) -> u32 {
        self.seq += 1;
        self.seq
    }

    /// Runs one call: recorded before, run within the deadline, checked against its result
    /// shape, bounded, recorded after, reported as activity. Returns what the model is sent.
    async fn call_tool(&mut self, step: u32, call: &ToolCall) -> Result<String, Failure> {
        let seq = self.next_seq();
        let arguments = call.arguments.to_string();
        self.ledger
            .before(&ToolIntent {
                seq,
                step,
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: arguments.clone(),
            })
            .map_err(|e| ledger_failed(&e))?;
        self.activity.activity(Activity::ToolStarted {
            id: call.id.clone(),
            name: call.name.clone(),
            input: arguments,
        });
        let started = Instant::now();
        let specs = self.host.specs();
        let spec = specs.iter().find(|s| s.name == call.name);
        let (status, text) = match spec {
            None => (
                ToolStatus::Refused,
                format!(
                    "there is no tool named `{}`; the tools are: {}",
                    call.name,
                    specs.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
                ),
            ),
            Some(spec) => {
                let request = ToolRequest {
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    deadline: self.deadline.saturating_duration_since(Instant::now()),
                };
                match tokio::time::timeout_at(self.deadline, self.host.call(&request)).await {
                    Err(_) => {
                        let end = ToolEnd {
                            seq,
                            status: ToolStatus::Error,
                            result: "the dispatch deadline came while the tool ran".to_owned(),
                            wall_ms: millis(started),
                        };
                        // The deadline decides the dispatch; a ledger error adds nothing to it.
                        let _ = self.ledger.after(&end);
                        self.finished(call, true, &end.result);
                        return Err(self.timeout());
                    }
                    Ok(ToolReply::Ok(value)) => match spec.result.check(spec.name, &value) {
                        Ok(()) => (ToolStatus::Ok, value.to_string()),
                        Err(why) => (
                            ToolStatus::Error,
                            format!(
                                "the tool returned a malformed result ({why}); it is not shown"
                            ),
                        ),
                    },
                    Ok(ToolReply::Failed(message)) => (ToolStatus::Error, message),
                    Ok(ToolReply::Refused(message)) => (ToolStatus::Refused, message),
                }
            }
        };
        let content = if status.failed() {
            json!({"error": text}).to_string()
        } else {
            text
        };
        let (content, _) = prompt::bounded_result(
            &call.name,
            content,
            self.adapter.endpoint.limits.max_result_bytes,
        );
        self.ledger
            .after(&ToolEnd {
                seq,
                status,
                result: content.clone(),
                wall_ms: millis(started),
            })
            .map_err(|e| ledger_failed(&e))?;
        self.finished(call, status.failed(), &content);
        Ok(content)
    }

    fn finished(&self, call: &ToolCall, failed: bool, output: &str) {
        self.activity.activity(Activity::ToolFinished {
            id: call.id.clone(),
            name: call.name.clone(),
            failed,
            output: output.to_owned(),
        });
    }

    /// Records an unreadable call and returns what the model is told about it.
    fn violation(&mut self, step: u32, raw: &str, why: &str) -> Result<String, Failure> {
        let seq = self.next_seq();
        let id = format!("violation-{seq}");
        self.ledger
            .before(&ToolIntent {
                seq,
                step,
                call_id: id.clone(),
                tool: String::new(),
                arguments: raw.to_owned(),
            })
            .map_err(|e| ledger_failed(&e))?;
        let text = prompt::violation(self.format(), raw, why);
        self.ledger
            .after(&ToolEnd {
                seq,
                status: ToolStatus::Violation,
                result: text.clone(),
                wall_ms: 0,
            })
            .map_err(|e| ledger_failed(&e))?;
        self.activity.activity(Activity::ToolStarted {
            id: id.clone(),
            name: "(unreadable call)".to_owned(),
            input: raw.to_owned(),
        });
        self.activity.activity(Activity::ToolFinished {
            id,
            name: "(unreadable call)".to_owned(),
            failed: true,
            output: why.to_owned(),
        });
        Ok(text)
    }
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn ledger_failed(error: &str) -> Failure {
    (
        Reason::DispatchDead,
        format!(
            "the tool-call ledger could not be written ({error}); the call was not run, and the dispatch stopped so that no effect goes unrecorded"
        ),
    )
}

/// The dispatch's reply from a reply without calls: its answer, or why there is none.
fn final_answer(reply: Reply) -> Result<String, Failure> {
    let answer = reply.answer.trim();
    if !answer.is_empty() {
        return Ok(answer.to_owned());
    }
    let why = match (reply.finish.as_deref(), reply.bad_chunks.first()) {
        (_, Some((raw, why))) => format!(
            "the server's stream could not be read ({why}): {}",
            raw.chars().take(300).collect::<String>()
        ),
        (Some("length"), _) => {
            "the model stopped at its length limit before answering (finish reason `length`)"
                .to_owned()
        }
        (Some(reason), _) => {
            format!("the model ended its reply (finish reason `{reason}`) with no answer text")
        }
        (None, None) => "the model's reply was empty".to_owned(),
    };
    Err((Reason::DispatchDead, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids_servers_use_are_accepted_and_unsafe_ones_refused() {
        for ok in [
            "qwen2.5-coder:7b",
            "Qwen/Qwen2.5-Coder-7B-Instruct",
            "model.gguf",
            "gpt-4o",
        ] {
            assert!(is_acceptable_model_id(ok), "{ok}");
        }
        for bad in ["", "a b", "x\ny", &"m".repeat(257)] {
            assert!(!is_acceptable_model_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn an_empty_reply_says_why() {
        let reply = Reply {
            finish: Some("length".into()),
            ..Reply::default()
        };
        let (reason, detail) = final_answer(reply).expect_err("empty");
        assert_eq!(reason, Reason::DispatchDead);
        assert!(detail.contains("length limit"), "{detail}");
        let reply = Reply {
            answer: "  done \n".into(),
            ..Reply::default()
        };
        assert_eq!(final_answer(reply).ok().as_deref(), Some("done"));
    }
}
