//! The claude adapter: `claude -p` streaming JSON events, the prompt on stdin.
//!
//! `--output-format stream-json --verbose` prints one JSON event per line as the agent works
//! (read live by [`crate::live`]) and ends with a `type: "result"` line that is the same envelope
//! `--output-format json` prints alone; only that line decides the dispatch. The capture keeps
//! the tail of stdout, and the result line is the last one printed, so a long stream cannot push
//! it out.
//!
//! Failure is a nonzero exit **or** `is_error: true` — never judged by `subtype` alone (a failed
//! call was measured coming back with `subtype: "success"`, `is_error: true` and exit 1). The
//! envelope is the last JSON result object in stdout, so the events and any banner lines printed
//! first are ignored.

use std::path::Path;

use serde_json::Value;

use crate::dispatch::{
    AdapterOptions, Deliverable, DispatchRequest, Family, FamilyAdapter, Parsed, Prepared,
    TokenSource, Tokens, stderr_note, tail_chars,
};
use crate::runner::{ChildRun, ChildSpec, StdinSource};

/// The claude family adapter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Claude;

/// The flags every claude dispatch carries, before the mode-specific ones.
pub const BASE_FLAGS: &[&str] = &[
    "-p",
    "--output-format",
    "stream-json",
    // stream-json refuses to run without it.
    "--verbose",
    "--strict-mcp-config",
    "--no-session-persistence",
];

/// Added in return-value mode: no customisations and no tools, so the answer comes from the
/// prompt alone. Dropped in file mode, where writing the deliverable needs tools.
pub const RETURN_VALUE_FLAGS: &[&str] = &["--safe-mode", "--tools", ""];

/// The argv (after the executable) for one claude dispatch. The model id must already be safe.
pub fn argv(model: &str, deliverable: Deliverable) -> Vec<String> {
    let mut args: Vec<String> = vec!["-p".into(), "--model".into(), model.into()];
    args.extend(BASE_FLAGS[1..].iter().map(|s| s.to_string()));
    if deliverable == Deliverable::ReturnValue {
        args.extend(RETURN_VALUE_FLAGS.iter().map(|s| s.to_string()));
    }
    args
}

impl FamilyAdapter for Claude {
    fn family(&self) -> Family {
        Family::Claude
    }

    fn default_bin(&self) -> Option<&'static str> {
        Some("claude")
    }

    fn default_ceiling(&self) -> Option<usize> {
        None
    }

    fn default_candidates(&self) -> &'static [&'static str] {
        // The claude CLI's own alias for its current mid-size model.
        &["sonnet"]
    }

    fn prepare(
        &self,
        bin: &Path,
        options: &AdapterOptions,
        req: &DispatchRequest,
    ) -> Result<Prepared, String> {
        let mut keep = Vec::new();
        // Return-value mode runs in an empty directory that is removed afterwards, so no project
        // state (CLAUDE.md, settings, files) leaks into an answer that must come from the prompt.
        let cwd = match req.deliverable {
            Deliverable::File => req.cwd.clone(),
            Deliverable::ReturnValue => {
                let dir = tempfile::Builder::new()
                    .prefix("greenlight-claude-")
                    .tempdir()
                    .map_err(|err| format!("cannot create an empty directory for claude: {err}"))?;
                let path = dir.path().to_path_buf();
                keep.push(dir);
                path
            }
        };
        let mut spec = ChildSpec::new(bin, cwd, req.timeout);
        spec.args = argv(&req.model, req.deliverable)
            .into_iter()
            .map(Into::into)
            .collect();
        spec.stdin = StdinSource::Text(req.prompt.clone());
        spec.grace = options.grace;
        spec.capture_limit = options.capture_limit;
        spec.base_env = options.base_env.clone();
        Ok(Prepared { spec, _keep: keep })
    }

    fn parse(&self, run: &ChildRun, exit_code: i32) -> Parsed {
        let stdout = run.stdout_text();
        let Some(envelope) = last_envelope(&stdout) else {
            let what = if stdout.trim().is_empty() {
                "no output".to_string()
            } else {
                format!("no result envelope in {} bytes of stdout", run.stdout.len())
            };
            return Parsed {
                answer: Err(format!(
                    "claude exited {exit_code} with {what} (spawned but mute){}",
                    stderr_note(run)
                )),
                tokens: Tokens::default(),
            };
        };
        let tokens = usage(&envelope);
        let is_error = envelope
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let subtype = envelope
            .get("subtype")
            .and_then(Value::as_str)
            .unwrap_or("?");
        let result = envelope.get("result").and_then(Value::as_str);
        let answer = if exit_code != 0 || is_error {
            Err(format!(
                "claude exited {exit_code} with is_error={is_error}, subtype={subtype}: {}{}",
                tail_chars(result.unwrap_or(""), 400),
                stderr_note(run)
            ))
        } else {
            match result {
                Some(text) => Ok(text.to_string()),
                None => Err(format!(
                    "claude exited 0 but its envelope has no `result` text (subtype={subtype})"
                )),
            }
        };
        Parsed { answer, tokens }
    }
}

/// The last JSON object in `stdout` that looks like a result envelope (`type: "result"`), looking
/// first at the whole output, then line by line from the end.
fn last_envelope(stdout: &str) -> Option<Value> {
    let is_envelope = |v: &Value| v.get("type").and_then(Value::as_str) == Some("result");
    for line in stdout.lines().rev() {
        let line = line.trim();
        if !line.starts_with('{') {
            continue;
        }
        if let Ok(v) = serde_json::from_str::<Value>(line)
            && is_envelope(&v)
        {
            return Some(v);
        }
    }
    // A pretty-printed envelope spans lines: take the last top-level `{` that starts a line.
    let trimmed = stdout.trim_end();
    for (idx, _) in trimmed.rmatch_indices("\n{") {
        if let Ok(v) = serde_json::from_str::<Value>(&trimmed[idx + 1..])
            && is_envelope(&v)
        {
            return Some(v);
        }
    }
    serde_json::from_str::<Value>(trimmed.trim_start())
        .ok()
        .filter(is_envelope)
}

fn usage(envelope: &Value) -> Tokens {
    let usage = envelope.get("usage");
    let count = |key: &str| usage.and_then(|u| u.get(key)).and_then(Value::as_u64);
    let input = count("input_tokens");
    let output = count("output_tokens");
    let cost = envelope
        .get("total_cost_usd")
        .and_then(Value::as_f64)
        .filter(|c| c.is_finite() && *c >= 0.0);
    Tokens {
        input,
        output,
        cache_read: count("cache_read_input_tokens"),
        cache_creation: count("cache_creation_input_tokens"),
        cost_usd: cost,
        source: (input.is_some() || output.is_some()).then_some(TokenSource::ClaudeEnvelope),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_is_found_after_banner_lines() {
        let out = "Welcome banner\n{\"not\":\"it\"}\n{\"type\":\"result\",\"result\":\"hi\"}\n";
        let env = last_envelope(out).expect("an envelope");
        assert_eq!(env["result"], "hi");
    }

    #[test]
    fn return_value_argv_has_the_isolation_flags_and_file_mode_drops_them() {
        let rv = argv("sonnet", Deliverable::ReturnValue);
        assert_eq!(
            rv,
            [
                "-p",
                "--model",
                "sonnet",
                "--output-format",
                "stream-json",
                "--verbose",
                "--strict-mcp-config",
                "--no-session-persistence",
                "--safe-mode",
                "--tools",
                ""
            ]
        );
        let file = argv("sonnet", Deliverable::File);
        assert!(!file.iter().any(|a| a == "--safe-mode" || a == "--tools"));
    }
}
