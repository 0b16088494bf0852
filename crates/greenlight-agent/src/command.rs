//! The command adapter: any agent CLI through an argv template; the answer is its stdout.
//!
//! Placeholders are filled in one left-to-right pass, so text substituted in (a prompt that
//! happens to contain `{model}`) is never substituted again. Without a prompt placeholder the
//! prompt goes on stdin, which is then closed.

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use crate::dispatch::{
    AdapterOptions, DispatchRequest, Family, FamilyAdapter, Parsed, Prepared, Tokens, stderr_note,
};
use crate::runner::{ChildRun, ChildSpec, StdinSource};

/// The command family adapter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Command;

/// Replaced by the prompt text, as (part of) one argv element.
pub const PROMPT: &str = "{prompt}";
/// Replaced by the path of a temporary file holding the prompt (removed afterwards).
pub const PROMPT_FILE: &str = "{prompt_file}";
/// Replaced by the model id.
pub const MODEL: &str = "{model}";

// Local model runners name models `family:tag` or `org/name`, so `:` and `/` are allowed here;
// the first character still cannot be `-`, so an id is never read as an option.
static COMMAND_MODEL_ID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")
        .expect("the command model id pattern is a valid regex")
});

/// Fills the placeholders of one template element in a single pass.
pub fn fill(template: &str, prompt: &str, prompt_file: Option<&str>, model: &str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let tail = &rest[open..];
        let (value, len) = if tail.starts_with(PROMPT_FILE) {
            (prompt_file.unwrap_or(""), PROMPT_FILE.len())
        } else if tail.starts_with(PROMPT) {
            (prompt, PROMPT.len())
        } else if tail.starts_with(MODEL) {
            (model, MODEL.len())
        } else {
            ("{", 1)
        };
        out.push_str(value);
        rest = &tail[len..];
    }
    out.push_str(rest);
    out
}

impl FamilyAdapter for Command {
    fn family(&self) -> Family {
        Family::Command
    }

    fn default_bin(&self) -> Option<&'static str> {
        None
    }

    fn default_ceiling(&self) -> Option<usize> {
        None
    }

    fn model_ok(&self, model: &str) -> bool {
        COMMAND_MODEL_ID.is_match(model)
    }

    fn model_rule(&self) -> &'static str {
        "letters, digits, `.`, `_`, `-`, `:`, `/`; a letter or digit first; at most 128 characters"
    }

    fn prepare(
        &self,
        bin: &Path,
        options: &AdapterOptions,
        req: &DispatchRequest,
    ) -> Result<Prepared, String> {
        let template = &options.command_args;
        let wants_file = template.iter().any(|a| a.contains(PROMPT_FILE));
        let in_argv = wants_file || template.iter().any(|a| a.contains(PROMPT));
        let mut keep = Vec::new();
        let prompt_file = if wants_file {
            let dir = tempfile::Builder::new()
                .prefix("greenlight-prompt-")
                .tempdir()
                .map_err(|err| format!("cannot create a directory for the prompt file: {err}"))?;
            let path = dir.path().join("prompt.txt");
            std::fs::write(&path, &req.prompt).map_err(|err| {
                format!("cannot write the prompt file `{}`: {err}", path.display())
            })?;
            keep.push(dir);
            Some(path.to_string_lossy().into_owned())
        } else {
            None
        };
        let mut spec = ChildSpec::new(bin, &req.cwd, req.timeout);
        spec.args = template
            .iter()
            .map(|t| fill(t, &req.prompt, prompt_file.as_deref(), &req.model).into())
            .collect();
        spec.stdin = if in_argv {
            StdinSource::Null
        } else {
            StdinSource::Text(req.prompt.clone())
        };
        spec.grace = options.grace;
        spec.capture_limit = options.capture_limit;
        spec.base_env = options.base_env.clone();
        Ok(Prepared { spec, _keep: keep })
    }

    fn parse(&self, run: &ChildRun, exit_code: i32) -> Parsed {
        let stdout = run.stdout_text();
        let answer = if exit_code != 0 {
            Err(format!(
                "the command exited {exit_code}{}",
                stderr_note(run)
            ))
        } else if stdout.trim().is_empty() {
            Err(format!(
                "the command exited 0 with nothing on stdout (spawned but mute){}",
                stderr_note(run)
            ))
        } else {
            Ok(stdout.trim_end().to_string())
        };
        Parsed {
            answer,
            tokens: Tokens::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_fill_once() {
        assert_eq!(
            fill("--m={model} {prompt}!", "say {model}", None, "llama3:8b"),
            "--m=llama3:8b say {model}!"
        );
        assert_eq!(
            fill("{prompt_file}", "p", Some("/t/p.txt"), "m"),
            "/t/p.txt"
        );
        assert_eq!(fill("{other} {", "p", None, "m"), "{other} {");
    }
}
