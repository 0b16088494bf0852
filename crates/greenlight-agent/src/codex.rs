//! The codex adapter: `codex exec --json`, the prompt on stdin (`-`), stdin then closed.
//!
//! codex prints JSONL events. The answer is the last `agent_message`; usage comes from
//! `turn.completed`; `turn.failed` is dead. A top-level `error` event is **not** terminal (offline
//! it was measured retrying "Reconnecting… n/5" and never exiting), so only the runner's deadline
//! ends such a run.

use std::path::Path;

use serde_json::Value;

use crate::dispatch::{
    AdapterOptions, Deliverable, DispatchRequest, Family, FamilyAdapter, Parsed, Prepared,
    TokenSource, Tokens, stderr_note, tail_chars,
};
use crate::runner::{ChildRun, ChildSpec, StdinSource};

/// The codex family adapter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Codex;

/// The longest prompt sent to `codex exec`, in characters. Longer prompts are refused with
/// `prompt-over-ceiling`, never truncated.
pub const DEFAULT_PROMPT_CEILING: usize = 24_000;

/// Put in front of a return-value prompt: codex is an agent with a workspace, and without this it
/// starts reading files to answer a question whose whole answer is in the prompt. The read-only
/// sandbox makes the instruction enforceable.
pub const SCOPING_LINE: &str =
    "Answer from the text of this prompt alone: do not run commands, open files or use tools.";

/// The argv (after the executable) for one codex dispatch; the prompt follows on stdin.
pub fn argv(model: &str, deliverable: Deliverable) -> Vec<String> {
    let mut args: Vec<String> = ["exec", "-m", model, "--json", "--skip-git-repo-check"]
        .map(String::from)
        .to_vec();
    if deliverable == Deliverable::ReturnValue {
        args.extend(["--sandbox".to_string(), "read-only".to_string()]);
    }
    // `-`: read the prompt from stdin. The prompt never travels in argv, so it cannot be read as
    // an option and does not show in `ps`.
    args.push("-".into());
    args
}

/// The text codex reads on stdin: the scoping line first in return-value mode.
pub fn stdin_text(prompt: &str, deliverable: Deliverable) -> String {
    match deliverable {
        Deliverable::ReturnValue => format!("{SCOPING_LINE}\n\n{prompt}"),
        Deliverable::File => prompt.to_string(),
    }
}

impl FamilyAdapter for Codex {
    fn family(&self) -> Family {
        Family::Codex
    }

    fn default_bin(&self) -> Option<&'static str> {
        Some("codex")
    }

    fn default_ceiling(&self) -> Option<usize> {
        Some(DEFAULT_PROMPT_CEILING)
    }

    fn prepare(
        &self,
        bin: &Path,
        options: &AdapterOptions,
        req: &DispatchRequest,
    ) -> Result<Prepared, String> {
        let mut spec = ChildSpec::new(bin, &req.cwd, req.timeout);
        spec.args = argv(&req.model, req.deliverable)
            .into_iter()
            .map(Into::into)
            .collect();
        spec.stdin = StdinSource::Text(stdin_text(&req.prompt, req.deliverable));
        spec.grace = options.grace;
        spec.capture_limit = options.capture_limit;
        spec.base_env = options.base_env.clone();
        Ok(Prepared {
            spec,
            _keep: Vec::new(),
        })
    }

    fn parse(&self, run: &ChildRun, exit_code: i32) -> Parsed {
        let events = Events::read(&run.stdout_text());
        let tokens = events.tokens();
        let answer = if let Some(message) = &events.turn_failed {
            Err(format!(
                "codex reported turn.failed (exit {exit_code}): {}",
                tail_chars(message, 400)
            ))
        } else if exit_code != 0 {
            Err(format!(
                "codex exited {exit_code}{}{}",
                events
                    .last_error
                    .as_deref()
                    .map(|e| format!("; last error event: {}", tail_chars(e, 300)))
                    .unwrap_or_default(),
                stderr_note(run)
            ))
        } else {
            match events.last_message {
                Some(text) => Ok(text),
                None => Err(format!(
                    "codex exited 0 with no agent_message in {} events (spawned but mute){}",
                    events.count,
                    stderr_note(run)
                )),
            }
        };
        Parsed { answer, tokens }
    }
}

/// What the JSONL event stream said.
#[derive(Debug, Default)]
struct Events {
    count: usize,
    last_message: Option<String>,
    turn_failed: Option<String>,
    last_error: Option<String>,
    input: Option<u64>,
    cached: Option<u64>,
    output: Option<u64>,
}

impl Events {
    fn read(stdout: &str) -> Self {
        let mut ev = Events::default();
        for line in stdout.lines() {
            let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
                continue;
            };
            ev.count += 1;
            match v.get("type").and_then(Value::as_str) {
                Some("item.completed") => {
                    let item = v.get("item");
                    let kind = item
                        .and_then(|i| i.get("type").or_else(|| i.get("item_type")))
                        .and_then(Value::as_str);
                    if kind == Some("agent_message")
                        && let Some(text) = item.and_then(|i| i.get("text")).and_then(Value::as_str)
                        && !text.trim().is_empty()
                    {
                        ev.last_message = Some(text.to_string());
                    }
                }
                Some("turn.completed") => {
                    let usage = v.get("usage");
                    let count = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_u64);
                    // One exec is one turn; should a build ever report several, their usage adds.
                    ev.input = add(ev.input, count("input_tokens"));
                    ev.cached = add(ev.cached, count("cached_input_tokens"));
                    ev.output = add(ev.output, count("output_tokens"));
                }
                Some("turn.failed") => {
                    let message = v
                        .get("error")
                        .and_then(|e| e.get("message").or(Some(e)))
                        .map(|m| {
                            m.as_str()
                                .map(String::from)
                                .unwrap_or_else(|| m.to_string())
                        })
                        .unwrap_or_else(|| "no message".into());
                    ev.turn_failed = Some(message);
                }
                Some("error") => {
                    ev.last_error = v
                        .get("message")
                        .and_then(Value::as_str)
                        .map(String::from)
                        .or_else(|| Some(v.to_string()));
                }
                _ => {}
            }
        }
        ev
    }

    fn tokens(&self) -> Tokens {
        Tokens {
            input: self.input,
            output: self.output,
            cache_read: self.cached,
            cache_creation: None,
            cost_usd: None,
            source: (self.input.is_some() || self.output.is_some())
                .then_some(TokenSource::CodexEvents),
        }
    }
}

fn add(acc: Option<u64>, more: Option<u64>) -> Option<u64> {
    match (acc, more) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_agent_message_wins_and_error_events_do_not_end_anything() {
        let out = concat!(
            "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n",
            "{\"type\":\"error\",\"message\":\"Reconnecting... 1/5\"}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"1\",\"type\":\"agent_message\",\"text\":\"first\"}}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"2\",\"type\":\"reasoning\",\"text\":\"hmm\"}}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"3\",\"type\":\"agent_message\",\"text\":\"second\"}}\n",
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":10,\"cached_input_tokens\":4,\"output_tokens\":3}}\n",
        );
        let ev = Events::read(out);
        assert_eq!(ev.last_message.as_deref(), Some("second"));
        assert!(ev.turn_failed.is_none());
        let t = ev.tokens();
        assert_eq!(
            (t.input, t.output, t.cache_read),
            (Some(10), Some(3), Some(4))
        );
    }

    #[test]
    fn argv_modes() {
        assert_eq!(
            argv("gpt-5", Deliverable::ReturnValue),
            [
                "exec",
                "-m",
                "gpt-5",
                "--json",
                "--skip-git-repo-check",
                "--sandbox",
                "read-only",
                "-"
            ]
        );
        assert_eq!(
            argv("gpt-5", Deliverable::File),
            [
                "exec",
                "-m",
                "gpt-5",
                "--json",
                "--skip-git-repo-check",
                "-"
            ]
        );
        assert!(stdin_text("q", Deliverable::ReturnValue).starts_with(SCOPING_LINE));
        assert_eq!(stdin_text("q", Deliverable::File), "q");
    }
}
