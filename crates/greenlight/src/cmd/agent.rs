//! `greenlight agent probe|dispatch|replay`: one probe or one dispatch, rendered for a person or
//! as JSON; or one golden turn of the openai decoder replayed.
//!
//! Every decision lives in `greenlight-agent`; this module parses arguments, reads the prompt
//! from stdin, runs the same preflight → baseline → dispatch → landed-barrier sequence the goal
//! loop runs, and prints. A standalone openai dispatch records its tool calls nowhere (the
//! no-op ledger): there is no goal to keep them for, and its live activity is not shown.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::duration::parse_duration;

use greenlight_agent::{
    AdapterOptions, Deliverable, DispatchFailure, DispatchRequest, DispatchResult, Dispatcher,
    Family, MonotonicClock, Outcome, WriteBaseline, check_all,
};
use greenlight_goal::drive::{Families, OpenAiArgs};
use greenlight_store::AgentEndpoint;

use crate::agents::EveryFamily;

/// Exit codes of `greenlight agent`.
pub mod exit {
    /// The probe found a model, or the dispatch answered (and its writes landed).
    pub const OK: i32 = 0;
    /// The probe found no model, or the dispatch failed; the reason is printed.
    pub const FAILED: i32 = 1;
    /// The arguments or the prompt were unusable; nothing ran.
    pub const USAGE: i32 = 2;
}

/// How long a dispatch may run when `--timeout` is not given.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Options every agent subcommand shares.
#[derive(Debug, clap::Args)]
pub struct Runtime {
    /// The agent runtime: claude, codex, command or openai.
    #[arg(long, value_parser = parse_family)]
    family: Family,
    /// For --family openai: the server's OpenAI-compatible base URL (e.g. http://127.0.0.1:8080/v1).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// For --family openai: the variable holding the API key, sent as a bearer token when set
    /// [default: OPENAI_API_KEY; local servers need none].
    #[arg(long, value_name = "NAME")]
    api_key_env: Option<String>,
    /// For --family openai: how tools are offered: native (the server's `tools`), tags
    /// (`<tool_call>` in the text, described in the system prompt) or auto [default: auto].
    #[arg(long, value_name = "FORMAT")]
    tool_format: Option<String>,
    /// The executable (default: `claude` or `codex` on PATH; required for command).
    #[arg(long, value_name = "PATH")]
    bin: Option<PathBuf>,
    /// For --family command: one argv element after the executable; `{prompt}`,
    /// `{prompt_file}` and `{model}` are filled in. Repeat for each element. Without a prompt
    /// placeholder the prompt goes on stdin.
    #[arg(long = "arg", value_name = "TEMPLATE", allow_hyphen_values = true)]
    args: Vec<String>,
    /// Time between SIGTERM and SIGKILL when a deadline fires (e.g. 5s, 500ms).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    grace: Duration,
    /// Print the outcome as one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// The `agent` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Find the first model id that answers "Reply with exactly: OK", trying IDs in order.
    Probe {
        #[command(flatten)]
        runtime: Runtime,
        /// Per-candidate deadline (e.g. 2m, 90s).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "120s")]
        timeout: Duration,
        /// Candidate model ids, best first (claude defaults to `sonnet`).
        #[arg(value_name = "ID")]
        ids: Vec<String>,
    },
    /// Run one dispatch with the prompt read from stdin.
    Dispatch {
        #[command(flatten)]
        runtime: Runtime,
        /// The model id (the one a probe recorded).
        #[arg(long, value_name = "ID")]
        model: String,
        /// What the step delivers: return-value (the answer) or file (declared writes).
        #[arg(long, value_parser = parse_deliverable, default_value = "return-value")]
        deliverable: Deliverable,
        /// A file the agent must write, relative to --cwd (file deliverable). Repeatable.
        #[arg(long = "write", value_name = "PATH")]
        writes: Vec<String>,
        /// A file the agent is asked to read, relative to --cwd. Repeatable.
        #[arg(long = "read", value_name = "PATH")]
        reads: Vec<String>,
        /// The deadline (e.g. 10m, 90s, 500ms; a bare number is seconds).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        timeout: Option<Duration>,
        /// The target tree (default: the current directory).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Refuse prompts longer than this many characters (codex defaults to 24000).
        #[arg(long, value_name = "CHARS")]
        prompt_ceiling: Option<usize>,
    },
    /// Replay a golden turn file through the openai decoder: prints the diff of the expected
    /// events against the decoded ones; exit 0 when they match, 1 when they differ.
    Replay {
        /// The golden turn (JSON).
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
}

/// Runs the subcommand and returns the process exit code.
pub fn run(command: Command) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            errln!("greenlight: cannot start the async runtime: {err}");
            return exit::USAGE;
        }
    };
    match command {
        Command::Probe {
            runtime: rt,
            timeout,
            ids,
        } => runtime.block_on(probe(rt, timeout, ids)),
        Command::Dispatch {
            runtime: rt,
            model,
            deliverable,
            writes,
            reads,
            timeout,
            cwd,
            prompt_ceiling,
        } => {
            let cwd = match cwd {
                Some(dir) => dir,
                None => match std::env::current_dir() {
                    Ok(dir) => dir,
                    Err(err) => {
                        errln!(
                            "greenlight: cannot read the current directory: {err}; pass --cwd DIR"
                        );
                        return exit::USAGE;
                    }
                },
            };
            let mut prompt = Vec::new();
            if let Err(err) = std::io::stdin().read_to_end(&mut prompt) {
                errln!("greenlight: cannot read the prompt from stdin: {err}");
                return exit::USAGE;
            }
            let prompt = String::from_utf8_lossy(&prompt).into_owned();
            if prompt.trim().is_empty() {
                errln!(
                    "greenlight: the prompt is read from stdin, and stdin was empty; pipe the prompt in"
                );
                return exit::USAGE;
            }
            let mut request = DispatchRequest::new(
                rt.family,
                model,
                prompt,
                cwd,
                timeout.unwrap_or(DEFAULT_TIMEOUT),
            );
            request.deliverable = deliverable;
            request.reads = reads;
            request.writes = writes;
            runtime.block_on(dispatch(rt, request, prompt_ceiling))
        }
        Command::Replay { file } => replay(&file),
    }
}

/// In a build without the `openai` feature: the refusal, as a usage error.
#[cfg(not(feature = "openai"))]
fn replay(_: &std::path::Path) -> i32 {
    errln!(
        "greenlight: {}",
        crate::left_out::OPENAI.refusal("greenlight agent replay")
    );
    exit::USAGE
}

#[cfg(feature = "openai")]
fn replay(file: &std::path::Path) -> i32 {
    match greenlight_openai::golden::replay(file) {
        Err(err) => {
            errln!("greenlight: {err}");
            exit::USAGE
        }
        Ok(replay) if replay.matches() => {
            errln!(
                "greenlight: {}: the decoder gives the {} expected events",
                file.display(),
                replay.expected.len()
            );
            exit::OK
        }
        Ok(replay) => {
            out!("{}", replay.diff());
            errln!(
                "greenlight: {}: the decoded events differ from the expected ones (- expected, + decoded)",
                file.display()
            );
            exit::FAILED
        }
    }
}

/// The shared options of `rt` and, for the openai family, its server settings, checked.
fn options(
    rt: &Runtime,
    families: &EveryFamily,
) -> Result<(AdapterOptions, Option<AgentEndpoint>), String> {
    let openai = if rt.family == Family::OpenAi {
        Some(families.openai_endpoint(&OpenAiArgs {
            base_url: rt.base_url.clone(),
            api_key_env: rt.api_key_env.clone(),
            tool_format: rt.tool_format.clone(),
        })?)
    } else if rt.base_url.is_some() || rt.api_key_env.is_some() || rt.tool_format.is_some() {
        return Err(format!(
            "--base-url, --api-key-env and --tool-format are for --family openai, not {}",
            rt.family
        ));
    } else {
        None
    };
    let options = AdapterOptions {
        bin: rt.bin.clone(),
        command_args: rt.args.clone(),
        grace: rt.grace,
        clock: Arc::new(MonotonicClock::new()),
        ..AdapterOptions::default()
    };
    Ok((options, openai))
}

/// The dispatcher `rt` asks for, `adjust` applied to its options; a usage error as its message.
fn build(
    rt: &Runtime,
    adjust: impl FnOnce(&mut AdapterOptions),
) -> Result<Box<dyn Dispatcher>, String> {
    let families = EveryFamily::from_process_env();
    let (mut opts, endpoint) = options(rt, &families)?;
    adjust(&mut opts);
    families.dispatcher(rt.family, opts, endpoint.as_ref())
}

async fn probe(rt: Runtime, timeout: Duration, ids: Vec<String>) -> i32 {
    let d = match build(&rt, |opts| opts.probe_timeout = timeout) {
        Ok(d) => d,
        Err(err) => {
            errln!("greenlight: {err}");
            return exit::USAGE;
        }
    };
    let outcome = d.probe(&ids).await;
    if rt.json {
        print_json(&outcome);
    } else if let Some(id) = &outcome.id {
        outln!("{id}");
    }
    match outcome.id {
        Some(_) => {
            if !rt.json {
                errln!("greenlight: {}", outcome.detail);
            }
            exit::OK
        }
        None => {
            errln!("greenlight: probe-failed: {}", outcome.detail);
            exit::FAILED
        }
    }
}

async fn dispatch(rt: Runtime, request: DispatchRequest, ceiling: Option<usize>) -> i32 {
    let d = match build(&rt, |opts| opts.prompt_ceiling = ceiling) {
        Ok(d) => d,
        Err(err) => {
            errln!("greenlight: {err}");
            return exit::USAGE;
        }
    };
    // Preflight, as the goal loop does it; the adapter checks again just before the spawn.
    let result = match check_all(&request.cwd, &request.reads, &request.writes) {
        Err(err) => DispatchResult::failed(
            Outcome::Error,
            request.family,
            &request.model,
            0,
            err.reason(),
            err.to_string(),
        ),
        Ok(()) => match baseline(&request) {
            Err(result) => *result,
            Ok(baseline) => {
                let mut result = d.dispatch(&request).await;
                if let (true, Some(baseline)) = (result.is_ok(), baseline)
                    && let Err(err) = baseline.check_landed()
                {
                    result.outcome = Outcome::Null;
                    result.failure = Some(DispatchFailure {
                        reason: err.reason(),
                        detail: err.to_string(),
                    });
                }
                result
            }
        },
    };
    if rt.json {
        print_json(&result);
    } else if let (true, Some(text)) = (result.is_ok(), &result.text) {
        outln!("{text}");
    }
    match &result.failure {
        None => exit::OK,
        Some(failure) => {
            errln!("greenlight: {}: {}", failure.reason, failure.detail);
            exit::FAILED
        }
    }
}

/// The landed-barrier baseline for a file deliverable; `None` when there is nothing to check.
fn baseline(request: &DispatchRequest) -> Result<Option<WriteBaseline>, Box<DispatchResult>> {
    if request.deliverable != Deliverable::File || request.writes.is_empty() {
        return Ok(None);
    }
    WriteBaseline::take(&request.cwd, &request.writes)
        .map(Some)
        .map_err(|err| {
            Box::new(DispatchResult::failed(
                Outcome::Error,
                request.family,
                &request.model,
                0,
                err.reason(),
                err.to_string(),
            ))
        })
}

fn print_json<T: serde::Serialize>(value: &T) {
    match serde_json::to_string(value) {
        Ok(text) => {
            outln!("{text}");
        }
        Err(err) => errln!("greenlight: cannot render JSON: {err}"),
    }
}

fn parse_family(s: &str) -> Result<Family, String> {
    s.parse()
        .map_err(|err: greenlight_types::UnknownWord| err.to_string())
}

fn parse_deliverable(s: &str) -> Result<Deliverable, String> {
    s.parse()
        .map_err(|err: greenlight_agent::Error| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5 days").is_err());
        assert!(parse_duration("").is_err());
    }
}
