//! The dispatcher seam: the request, the result, and the one flow every adapter shares.
//!
//! The request carries everything already decided; an adapter never re-decides. The shared flow
//! owns the refusals (model id, prompt ceiling, containment), the runner call and the
//! timeout/dead split; a family adapter only builds argv and reads its own output.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::clock::{Clock, MonotonicClock, elapsed_ms};
use crate::containment::check_all;
use crate::live::LiveFeed;
use crate::reason::Reason;
use crate::runner::{
    ChildRun, ChildSpec, DEFAULT_CAPTURE_LIMIT, DEFAULT_GRACE, ExitClass, classify,
    run_child_observed,
};

/// A boxed, sendable future: what [`Dispatcher`] methods return, so the trait stays object safe
/// (`Box<dyn Dispatcher>` / `Arc<dyn Dispatcher>`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Which agent runtime: the one [`greenlight_types::Family`]. The openai family's harness is
/// [`crate::openai`].
pub use greenlight_types::Family;

/// What a step delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Deliverable {
    /// The answer text is the deliverable; the agent gets no write access where it can be denied.
    #[default]
    ReturnValue,
    /// Files under the cwd are the deliverable; the agent runs there with its tools.
    File,
}

impl std::str::FromStr for Deliverable {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "return-value" => Ok(Deliverable::ReturnValue),
            "file" => Ok(Deliverable::File),
            other => Err(crate::Error::UnknownDeliverable(other.into())),
        }
    }
}

/// One dispatch, fully decided by the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchRequest {
    /// The step this dispatch serves.
    pub step_id: String,
    /// The fan-out member, if any.
    pub item_key: Option<String>,
    /// 1-based, counting the first attempt.
    pub attempt: u32,
    /// The fully assembled prompt (already defanged where it quotes upstream text).
    pub prompt: String,
    /// The runtime family.
    pub family: Family,
    /// The model id that answered the probe.
    pub model: String,
    /// What the step delivers.
    pub deliverable: Deliverable,
    /// Declared reads, relative to `cwd`.
    pub reads: Vec<String>,
    /// Declared writes, relative to `cwd`.
    pub writes: Vec<String>,
    /// The deadline.
    pub timeout: Duration,
    /// The target tree (file mode; codex and command run here in both modes).
    pub cwd: PathBuf,
}

impl DispatchRequest {
    /// A return-value request with no declared paths, attempt 1.
    pub fn new(
        family: Family,
        model: impl Into<String>,
        prompt: impl Into<String>,
        cwd: impl Into<PathBuf>,
        timeout: Duration,
    ) -> Self {
        Self {
            step_id: "dispatch".into(),
            item_key: None,
            attempt: 1,
            prompt: prompt.into(),
            family,
            model: model.into(),
            deliverable: Deliverable::ReturnValue,
            reads: Vec::new(),
            writes: Vec::new(),
            timeout,
            cwd: cwd.into(),
        }
    }
}

/// How a dispatch settled: the one [`greenlight_types::DispatchOutcome`]. A dispatch settles
/// `ok` (the runtime answered; `text` is set), `null` (the runtime ran but nothing usable came
/// back: timeout, dead) or `error` (refused before any process started: bad model id, prompt
/// over the ceiling, a declared path outside the root); `in-flight` and `interrupted` are the
/// ledger's, never a result's.
pub use greenlight_types::DispatchOutcome as Outcome;

/// Where the token counts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenSource {
    /// claude's result envelope (the last line of `--output-format stream-json`), `usage`.
    ClaudeEnvelope,
    /// codex's `--json` `turn.completed` events, `usage`.
    CodexEvents,
    /// The `usage` object of each chat-completions response of an openai dispatch, summed.
    OpenaiUsage,
}

/// Why a dispatch failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchFailure {
    /// The member of the one closed list.
    pub reason: Reason,
    /// A sentence for a person.
    pub detail: String,
}

/// The typed outcome of one dispatch. Field names are a stable contract (`--json`, the ledger).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchResult {
    /// `ok`, `null` or `error`.
    pub outcome: Outcome,
    /// The answer. Set when `outcome` is `ok`; also kept when an answer came back but a later
    /// check failed it (the landed barrier), so a person can see what the agent said.
    pub text: Option<String>,
    /// The runtime family.
    pub family: Family,
    /// The model id passed to the runtime.
    pub model_used: Option<String>,
    /// Wall time by the injected monotonic clock.
    pub wall_ms: u64,
    /// Input tokens as the runtime reported them; `None` when it did not (never 0 by default,
    /// never estimated). Cache tokens are never folded in.
    pub tokens_in: Option<u64>,
    /// Output tokens as the runtime reported them; `None` when it did not.
    pub tokens_out: Option<u64>,
    /// Cache-read input tokens, when reported (claude `cache_read_input_tokens`, codex
    /// `cached_input_tokens`).
    pub cache_read_tokens: Option<u64>,
    /// Cache-creation input tokens, when reported (claude `cache_creation_input_tokens`).
    pub cache_creation_tokens: Option<u64>,
    /// Cost in US dollars, when reported (claude `total_cost_usd`).
    pub cost_usd: Option<f64>,
    /// Where the token counts came from; `None` when there are none.
    pub token_source: Option<TokenSource>,
    /// The agent process's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Whether the captured output was cut to its tail (or left incomplete by an escaped process).
    pub output_truncated: bool,
    /// Why it failed; `None` exactly when `outcome` is `ok`.
    pub failure: Option<DispatchFailure>,
}

impl DispatchResult {
    /// A failed result with no counts.
    pub fn failed(
        outcome: Outcome,
        family: Family,
        model: &str,
        wall_ms: u64,
        reason: Reason,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            outcome,
            text: None,
            family,
            model_used: Some(model.to_string()),
            wall_ms,
            tokens_in: None,
            tokens_out: None,
            cache_read_tokens: None,
            cache_creation_tokens: None,
            cost_usd: None,
            token_source: None,
            exit_code: None,
            output_truncated: false,
            failure: Some(DispatchFailure {
                reason,
                detail: detail.into(),
            }),
        }
    }

    /// Whether the dispatch answered.
    pub fn is_ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeOutcome {
    /// The first candidate (in the caller's order) that answered; `None` when none did.
    pub id: Option<String>,
    /// Wall time of the whole probe.
    pub wall_ms: u64,
    /// What happened to each candidate, for a person.
    pub detail: String,
    /// `probe-failed` when no candidate answered.
    pub failure: Option<DispatchFailure>,
}

/// The seam the goal loop calls. Object safe: hold it as `Box<dyn Dispatcher>` or
/// `Arc<dyn Dispatcher>`; each method returns a boxed `Send` future.
pub trait Dispatcher: Send + Sync {
    /// The family this dispatcher drives.
    fn family(&self) -> Family;
    /// Tries each candidate model id in order with "Reply with exactly: OK"; the first that exits
    /// 0 with a word-bounded `OK` in its answer is the id to record.
    fn probe<'a>(&'a self, candidates: &'a [String]) -> BoxFuture<'a, ProbeOutcome>;
    /// Runs one dispatch. Never panics; every failure is a [`DispatchResult`] with a reason.
    fn dispatch<'a>(&'a self, request: &'a DispatchRequest) -> BoxFuture<'a, DispatchResult> {
        self.dispatch_observed(request, &crate::activity::NoActivity)
    }
    /// [`Dispatcher::dispatch`], handing what the agent does to `activity` as it happens. The
    /// result is the same as without a sink.
    fn dispatch_observed<'a>(
        &'a self,
        request: &'a DispatchRequest,
        activity: &'a dyn crate::activity::ActivitySink,
    ) -> BoxFuture<'a, DispatchResult>;
    /// [`Dispatcher::dispatch_observed`], recording every tool call greenlight itself runs in
    /// `ledger` (write-ahead: the intent before the effect). Only a family whose tools
    /// greenlight runs (openai) records anything; an agent CLI runs its own tools, so the
    /// default ignores the ledger.
    fn dispatch_recorded<'a>(
        &'a self,
        request: &'a DispatchRequest,
        activity: &'a dyn crate::activity::ActivitySink,
        ledger: &'a dyn crate::ledger::ToolLedger,
    ) -> BoxFuture<'a, DispatchResult> {
        let _ = ledger;
        self.dispatch_observed(request, activity)
    }
}

/// The prompt a probe sends.
pub const PROBE_PROMPT: &str = "Reply with exactly: OK";

/// A probe's per-candidate deadline. Two minutes covers a cold start of either CLI with room to
/// spare; a probe that needs longer is not a healthy runtime.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(120);

/// How an adapter is built: shared knobs for all three families.
#[derive(Debug, Clone)]
pub struct AdapterOptions {
    /// The executable; `None` means the family's name on `PATH` (`claude`, `codex`). Required for
    /// the command family.
    pub bin: Option<PathBuf>,
    /// For the command family: the argv after the executable, with `{prompt}`,
    /// `{prompt_file}` and `{model}` placeholders. Without a prompt placeholder the prompt goes on
    /// stdin.
    pub command_args: Vec<String>,
    /// Refuse prompts longer than this many characters; `None` keeps the family default (codex:
    /// [`crate::codex::DEFAULT_PROMPT_CEILING`], others: no ceiling).
    pub prompt_ceiling: Option<usize>,
    /// The wall-time source.
    pub clock: Arc<dyn Clock>,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Bytes kept per output stream.
    pub capture_limit: usize,
    /// A probe's per-candidate deadline.
    pub probe_timeout: Duration,
    /// The environment before scrubbing, as the binary read it once. `None`: the child inherits
    /// this process's own at spawn, and nothing else is looked up in it (no API key; temporary
    /// files under `/tmp`).
    pub base_env: Option<Vec<(std::ffi::OsString, std::ffi::OsString)>>,
}

impl Default for AdapterOptions {
    fn default() -> Self {
        Self {
            bin: None,
            command_args: Vec::new(),
            prompt_ceiling: None,
            clock: Arc::new(MonotonicClock::new()),
            grace: DEFAULT_GRACE,
            capture_limit: DEFAULT_CAPTURE_LIMIT,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            base_env: None,
        }
    }
}

// `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`: a model id can never start with `-`, so it can never be
// read as an option, and carries nothing a CLI could interpret.
static MODEL_ID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$").expect("the model id pattern is a valid regex")
});

/// Whether `id` is a safe model id for claude and codex (`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`).
pub fn is_safe_model_id(id: &str) -> bool {
    MODEL_ID.is_match(id)
}

/// What a family parser makes of an exited child.
pub(crate) struct Parsed {
    pub answer: Result<String, String>,
    pub tokens: Tokens,
}

/// Counts as reported; every field `None` unless the runtime said it.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tokens {
    pub input: Option<u64>,
    pub output: Option<u64>,
    pub cache_read: Option<u64>,
    pub cache_creation: Option<u64>,
    pub cost_usd: Option<f64>,
    pub source: Option<TokenSource>,
}

/// A built child plus whatever must live until it ends (an isolated temp dir, a prompt file).
pub(crate) struct Prepared {
    pub spec: ChildSpec,
    pub _keep: Vec<tempfile::TempDir>,
}

/// What each family contributes to the shared flow.
pub(crate) trait FamilyAdapter: Send + Sync {
    fn family(&self) -> Family;
    fn default_bin(&self) -> Option<&'static str>;
    fn default_ceiling(&self) -> Option<usize>;
    fn model_ok(&self, model: &str) -> bool {
        is_safe_model_id(model)
    }
    /// The model id rule, in words, for the refusal message.
    fn model_rule(&self) -> &'static str {
        "letters, digits, `.`, `_`, `-`; a letter or digit first; at most 64 characters"
    }
    fn default_candidates(&self) -> &'static [&'static str] {
        &[]
    }
    fn prepare(
        &self,
        bin: &Path,
        options: &AdapterOptions,
        request: &DispatchRequest,
    ) -> Result<Prepared, String>;
    fn parse(&self, run: &ChildRun, exit_code: i32) -> Parsed;
}

pub(crate) struct Adapter<F> {
    pub family: F,
    pub options: AdapterOptions,
}

impl<F: FamilyAdapter> Dispatcher for Adapter<F> {
    fn family(&self) -> Family {
        self.family.family()
    }

    fn probe<'a>(&'a self, candidates: &'a [String]) -> BoxFuture<'a, ProbeOutcome> {
        Box::pin(self.run_probe(candidates))
    }

    fn dispatch_observed<'a>(
        &'a self,
        request: &'a DispatchRequest,
        activity: &'a dyn crate::activity::ActivitySink,
    ) -> BoxFuture<'a, DispatchResult> {
        Box::pin(self.run_dispatch(request, activity))
    }
}

impl<F: FamilyAdapter> Adapter<F> {
    async fn run_dispatch(
        &self,
        req: &DispatchRequest,
        activity: &dyn crate::activity::ActivitySink,
    ) -> DispatchResult {
        let clock = self.options.clock.as_ref();
        let start = clock.now();
        let family = self.family.family();
        let refuse = |reason: Reason, detail: String| {
            DispatchResult::failed(
                Outcome::Error,
                family,
                &req.model,
                elapsed_ms(clock, start),
                reason,
                detail,
            )
        };
        if !self.family.model_ok(&req.model) {
            return refuse(
                Reason::ModelIdInvalid,
                format!(
                    "model id {:?} is not a safe {family} model id ({}); pass the id the probe recorded",
                    req.model,
                    self.family.model_rule()
                ),
            );
        }
        if let Some(ceiling) = self
            .options
            .prompt_ceiling
            .or(self.family.default_ceiling())
        {
            let chars = req.prompt.chars().count();
            if chars > ceiling {
                return refuse(
                    Reason::PromptOverCeiling,
                    format!(
                        "the prompt is {chars} characters, over the {ceiling}-character {family} ceiling; refused rather than truncated (a cut prompt gets a confident answer to a question nobody asked); shorten the evidence or raise the ceiling"
                    ),
                );
            }
        }
        // Checked again here, just before the spawn: a symlink planted after preflight is caught.
        if let Err(err) = check_all(&req.cwd, &req.reads, &req.writes) {
            return refuse(err.reason(), err.to_string());
        }
        let bin = match (&self.options.bin, self.family.default_bin()) {
            (Some(bin), _) => bin.clone(),
            (None, Some(name)) => PathBuf::from(name),
            (None, None) => {
                return refuse(
                    Reason::DispatchDead,
                    format!("no executable configured for the {family} family; pass --bin"),
                );
            }
        };
        let prepared = match self.family.prepare(&bin, &self.options, req) {
            Ok(prepared) => prepared,
            // greenlight's own preparation on this machine (the prompt file, a scratch
            // directory) failed before any agent process existed: the machine's failure.
            Err(detail) => {
                return DispatchResult::failed(
                    Outcome::Null,
                    family,
                    &req.model,
                    elapsed_ms(clock, start),
                    Reason::MachineFailure,
                    crate::machine::advice(&detail),
                );
            }
        };
        // Activity is read from the same chunks the capture keeps; the result below is parsed
        // from the capture alone, so it is the same whoever watches.
        let mut feed = LiveFeed::new(family, activity);
        let run = run_child_observed(&prepared.spec, clock, &mut feed).await;
        feed.finish();
        drop(prepared);
        let wall_ms = elapsed_ms(clock, start);
        let truncated = run.stdout_truncated || run.stderr_truncated || run.pipes_held_open;
        let machine = run
            .spawn_errno
            .filter(|&errno| crate::machine::is_machine_errno(errno))
            .and(run.spawn_error.as_deref());
        let mut result = match classify(&run) {
            _ if machine.is_some() => DispatchResult::failed(
                Outcome::Null,
                family,
                &req.model,
                wall_ms,
                Reason::MachineFailure,
                crate::machine::advice(&format!(
                    "the agent could not be started: {}",
                    machine.unwrap_or_default()
                )),
            ),
            ExitClass::Timeout => DispatchResult::failed(
                Outcome::Null,
                family,
                &req.model,
                wall_ms,
                Reason::DispatchTimeout,
                format!(
                    "the {} deadline fired on step `{}` (attempt {}); the agent's process group was ended",
                    human_duration(req.timeout),
                    req.step_id,
                    req.attempt
                ),
            ),
            ExitClass::Dead(detail) => DispatchResult::failed(
                Outcome::Null,
                family,
                &req.model,
                wall_ms,
                Reason::DispatchDead,
                detail,
            ),
            ExitClass::Exited(code) => {
                let parsed = self.family.parse(&run, code);
                let mut result = match parsed.answer {
                    Ok(text) => DispatchResult {
                        outcome: Outcome::Ok,
                        text: Some(text),
                        family,
                        model_used: Some(req.model.clone()),
                        wall_ms,
                        tokens_in: None,
                        tokens_out: None,
                        cache_read_tokens: None,
                        cache_creation_tokens: None,
                        cost_usd: None,
                        token_source: None,
                        exit_code: Some(code),
                        output_truncated: false,
                        failure: None,
                    },
                    Err(detail) => DispatchResult::failed(
                        Outcome::Null,
                        family,
                        &req.model,
                        wall_ms,
                        Reason::DispatchDead,
                        detail,
                    ),
                };
                // Tokens a failed call spent are still real spend: report them whenever reported.
                let t = parsed.tokens;
                result.tokens_in = t.input;
                result.tokens_out = t.output;
                result.cache_read_tokens = t.cache_read;
                result.cache_creation_tokens = t.cache_creation;
                result.cost_usd = t.cost_usd;
                result.token_source = t.source;
                result
            }
        };
        result.exit_code = run.exit_code;
        result.output_truncated = truncated;
        result
    }

    async fn run_probe(&self, candidates: &[String]) -> ProbeOutcome {
        let clock = self.options.clock.as_ref();
        let start = clock.now();
        let family = self.family.family();
        let list: Vec<String> = if candidates.is_empty() {
            self.family
                .default_candidates()
                .iter()
                .map(|s| s.to_string())
                .collect()
        } else {
            candidates.to_vec()
        };
        let mut notes = Vec::new();
        let cwd = match tempfile::Builder::new()
            .prefix("greenlight-probe-")
            .tempdir()
        {
            Ok(dir) => dir,
            Err(err) => {
                return probe_failed(
                    elapsed_ms(clock, start),
                    format!("cannot create an empty directory to probe in: {err}"),
                );
            }
        };
        for id in &list {
            let mut req = DispatchRequest::new(
                family,
                id,
                PROBE_PROMPT,
                cwd.path(),
                self.options.probe_timeout,
            );
            req.step_id = "probe".into();
            let result = self.run_dispatch(&req, &crate::activity::NoActivity).await;
            if note_probe_answer(id, &result, &mut notes) {
                return ProbeOutcome {
                    id: Some(id.clone()),
                    wall_ms: elapsed_ms(clock, start),
                    detail: format!("{family} answered on {id} ({})", notes.join("; ")),
                    failure: None,
                };
            }
        }
        let detail = if list.is_empty() {
            format!("no candidate model ids to probe for {family}; pass the ids to try, in order")
        } else {
            format!(
                "no {family} candidate answered the probe: {}",
                notes.join("; ")
            )
        };
        probe_failed(elapsed_ms(clock, start), detail)
    }
}

/// Notes what candidate `id` answered a probe with; `true` when it said a word-bounded OK. Shared
/// by every family's probe, so all of them judge an answer alike.
pub fn note_probe_answer(id: &str, result: &DispatchResult, notes: &mut Vec<String>) -> bool {
    match (&result.failure, &result.text) {
        (None, Some(text)) if says_ok(text) => {
            notes.push(format!("{id}: answered OK"));
            return true;
        }
        (None, Some(text)) => notes.push(format!(
            "{id}: answered without a word-bounded OK: {:?}",
            text.chars().take(80).collect::<String>()
        )),
        (Some(failure), _) => notes.push(format!("{id}: {} ({})", failure.reason, failure.detail)),
        (None, None) => notes.push(format!("{id}: no answer")),
    }
    false
}

/// A probe that found no model id, `detail` saying why.
pub fn probe_failed(wall_ms: u64, detail: String) -> ProbeOutcome {
    ProbeOutcome {
        id: None,
        wall_ms,
        detail: detail.clone(),
        failure: Some(DispatchFailure {
            reason: Reason::ProbeFailed,
            detail,
        }),
    }
}

static WORD_OK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bOK\b").expect("the probe pattern is a valid regex"));

/// Whether a probe answer contains a word-bounded `OK`.
pub fn says_ok(text: &str) -> bool {
    WORD_OK.is_match(text)
}

fn human_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The last `max` characters of a stream, for a failure detail.
pub(crate) fn tail_chars(text: &str, max: usize) -> String {
    let trimmed = text.trim();
    let count = trimmed.chars().count();
    if count <= max {
        trimmed.to_string()
    } else {
        let tail: String = trimmed.chars().skip(count - max).collect();
        format!("…{tail}")
    }
}

/// `; stderr: …` when stderr has something to say, else nothing.
pub(crate) fn stderr_note(run: &ChildRun) -> String {
    let err = run.stderr_text();
    if err.trim().is_empty() {
        String::new()
    } else {
        format!("; stderr: {}", tail_chars(&err, 400))
    }
}
