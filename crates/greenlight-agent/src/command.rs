//! The command adapter: any agent CLI through an argv template; the answer is its stdout.
//!
//! Placeholders are filled in one left-to-right pass, so text substituted in (a prompt that
//! happens to contain `{model}`) is never substituted again. Without a prompt placeholder the
//! prompt goes on stdin, which is then closed.
//!
//! A `{prompt_file}` lives in a directory of its own, `greenlight-prompt-<pid>-<random>` in the
//! temp dir, mode 0700 with the file 0600 (a prompt can quote secrets from gate output). It is
//! removed when the dispatch ends; when greenlight is killed first, the next dispatch of any
//! greenlight sweeps every such directory whose owner pid is dead, the way orphaned gate
//! processes are swept.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::{LazyLock, Once};

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

/// The name every prompt directory starts with; the owner's pid follows.
pub const PROMPT_DIR_PREFIX: &str = "greenlight-prompt-";

/// Removes the prompt directories in `tmp` whose owner pid is gone (a greenlight killed with
/// SIGKILL mid-dispatch cannot remove its own). Returns the directories removed.
pub fn sweep_orphaned_prompt_dirs(tmp: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = fs::read_dir(tmp) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PROMPT_DIR_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let owner_alive = pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists();
        let path = entry.path();
        if !owner_alive && fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// Writes `prompt` to `prompt.txt` in a fresh 0700 directory under `tmp` named after this
/// process, the file created 0600 (never through an existing file or link).
fn write_prompt_file(prompt: &str, tmp: &Path) -> Result<(tempfile::TempDir, String), String> {
    static SWEEP: Once = Once::new();
    SWEEP.call_once(|| {
        sweep_orphaned_prompt_dirs(tmp);
    });
    let dir = tempfile::Builder::new()
        .prefix(&format!("{PROMPT_DIR_PREFIX}{}-", std::process::id()))
        .permissions(fs::Permissions::from_mode(0o700))
        .tempdir_in(tmp)
        .map_err(|err| {
            format!(
                "cannot create a directory for the prompt file in {}: {err}",
                tmp.display()
            )
        })?;
    let path = dir.path().join("prompt.txt");
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut file| file.write_all(prompt.as_bytes()))
        .map_err(|err| format!("cannot write the prompt file `{}`: {err}", path.display()))?;
    let text = path.to_string_lossy().into_owned();
    Ok((dir, text))
}

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
            let (dir, path) = write_prompt_file(
                &req.prompt,
                &crate::env::temp_dir(options.base_env.as_deref()),
            )?;
            keep.push(dir);
            Some(path)
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

    #[test]
    fn a_prompt_file_is_private_and_gone_with_its_guard() {
        let (dir, path) = write_prompt_file("secret", &std::env::temp_dir()).expect("write");
        let mode = |p: &Path| fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(Path::new(&path)), 0o600);
        assert_eq!(mode(dir.path()), 0o700);
        let name = dir
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        assert!(
            name.starts_with(&format!("{PROMPT_DIR_PREFIX}{}-", std::process::id())),
            "{name}"
        );
        let kept = dir.path().to_path_buf();
        drop(dir);
        assert!(!kept.exists());
    }

    #[test]
    fn the_sweep_removes_prompt_dirs_of_dead_owners_only() {
        let tmp = tempfile::tempdir().expect("tmp");
        // A pid above the kernel's pid_max (2^22) never names a live process.
        let dead = tmp.path().join(format!("{PROMPT_DIR_PREFIX}4194305-abc"));
        let mine = tmp
            .path()
            .join(format!("{PROMPT_DIR_PREFIX}{}-abc", std::process::id()));
        let other = tmp.path().join("greenlight-prompt-notapid");
        for d in [&dead, &mine, &other] {
            fs::create_dir(d).expect("mkdir");
        }
        assert_eq!(sweep_orphaned_prompt_dirs(tmp.path()), vec![dead.clone()]);
        assert!(!dead.exists() && mine.exists() && other.exists());
    }
}
