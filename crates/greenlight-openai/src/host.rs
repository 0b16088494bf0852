//! The real tool host: the six tools over one worktree, every path held inside it.
//!
//! Every path a model names goes through [`greenlight_agent::containment::check_contained`] first — the
//! same rule as a declared read or write: relative, no `..`, no control character, and the
//! nearest existing ancestor's realpath inside the root's (so a symlinked directory pointing out
//! is caught). A refused path is a [`ToolReply::Refused`] for the model, never an effect. Files
//! are opened non-blocking and checked on the open handle to be regular files of bounded size,
//! so a FIFO or a link to `/dev/zero` cannot hang or exhaust the dispatch. `run` goes through
//! `greenlight-proc` like a gate: its own process group, the deadline, leftovers killed, a
//! bounded tail; it is the same trust as an agent CLI's shell (a command can read what the
//! user can), and the path rules are for the file tools.

use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::patch;
use crate::tools::{
    self, APPLY_PATCH, LIST_DIR, READ_FILE, RUN, SEARCH, ToolHost, ToolLimits, ToolReply,
    ToolRequest, ToolSpec, WRITE_FILE, arguments,
};
use greenlight_agent::containment::check_contained;
use greenlight_agent::dispatch::BoxFuture;

/// The tools over one worktree.
#[derive(Debug, Clone)]
pub struct WorktreeHost {
    root: PathBuf,
    limits: ToolLimits,
    base_env: Option<Vec<(OsString, OsString)>>,
    hidden_env: Vec<OsString>,
    grace: std::time::Duration,
}

impl WorktreeHost {
    /// A host over `root` with `limits`; `run` commands get `base_env` (else this process's
    /// environment) minus the agent scrub list and `hidden_env` (the API key's variable).
    pub fn new(
        root: impl Into<PathBuf>,
        limits: ToolLimits,
        base_env: Option<Vec<(OsString, OsString)>>,
        hidden_env: Vec<OsString>,
        grace: std::time::Duration,
    ) -> Self {
        Self {
            root: root.into(),
            limits,
            base_env,
            hidden_env,
            grace,
        }
    }

    fn contained(&self, path: &str) -> Result<PathBuf, ToolReply> {
        check_contained(&self.root, path).map_err(|e| {
            ToolReply::Refused(format!(
                "refused: {e}. Only paths inside the worktree can be used."
            ))
        })
    }

    /// Reads a regular file of at most `max_file_bytes`, without blocking on a FIFO.
    fn read_text(&self, full: &Path, shown: &str) -> Result<String, ToolReply> {
        let mut file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(full)
            .map_err(|e| ToolReply::Failed(format!("cannot open `{shown}`: {e}")))?;
        let meta = file
            .metadata()
            .map_err(|e| ToolReply::Failed(format!("cannot stat `{shown}`: {e}")))?;
        if meta.is_dir() {
            return Err(ToolReply::Failed(format!(
                "`{shown}` is a directory; use list_dir"
            )));
        }
        if !meta.is_file() {
            return Err(ToolReply::Failed(format!(
                "`{shown}` is not a regular file"
            )));
        }
        if meta.len() > self.limits.max_file_bytes {
            return Err(ToolReply::Failed(format!(
                "`{shown}` is {} bytes, over the {}-byte limit; use search to find the part you need",
                meta.len(),
                self.limits.max_file_bytes
            )));
        }
        let mut bytes = Vec::new();
        file.by_ref()
            .take(self.limits.max_file_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| ToolReply::Failed(format!("cannot read `{shown}`: {e}")))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn read_file(&self, args: &Value) -> Result<Value, ToolReply> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            path: String,
            start_line: Option<usize>,
            max_lines: Option<usize>,
        }
        let a: Args = arguments(READ_FILE, args)?;
        let full = self.contained(&a.path)?;
        let text = self.read_text(&full, &a.path)?;
        let lines: Vec<&str> = text.lines().collect();
        let start = a.start_line.unwrap_or(1).max(1);
        let take = a
            .max_lines
            .unwrap_or(self.limits.read_lines)
            .clamp(1, self.limits.read_lines);
        let mut content = String::new();
        for (i, line) in lines.iter().enumerate().skip(start - 1).take(take) {
            content.push_str(&format!("{:>6}\t{line}\n", i + 1));
        }
        let next = start - 1 + take;
        Ok(json!({
            "path": a.path,
            "content": content,
            "start_line": start,
            "total_lines": lines.len(),
            "next_start_line": (next < lines.len()).then_some(next + 1),
        }))
    }

    fn list_dir(&self, args: &Value) -> Result<Value, ToolReply> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            path: Option<String>,
        }
        let a: Args = arguments(LIST_DIR, args)?;
        let path = a.path.unwrap_or_else(|| ".".to_owned());
        let full = self.contained(&path)?;
        let read = fs::read_dir(&full)
            .map_err(|e| ToolReply::Failed(format!("cannot list `{path}`: {e}")))?;
        let mut entries: Vec<(String, &'static str, Option<u64>)> = read
            .flatten()
            .map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let meta = entry.path().symlink_metadata().ok();
                let kind = match &meta {
                    Some(m) if m.file_type().is_symlink() => "symlink",
                    Some(m) if m.is_dir() => "dir",
                    Some(m) if m.is_file() => "file",
                    _ => "other",
                };
                let size = meta.filter(|m| m.is_file()).map(|m| m.len());
                (name, kind, size)
            })
            .collect();
        entries.sort();
        let omitted = entries.len().saturating_sub(self.limits.list_entries);
        entries.truncate(self.limits.list_entries);
        let entries: Vec<Value> = entries
            .into_iter()
            .map(|(name, kind, size)| match size {
                Some(bytes) => json!({"name": name, "kind": kind, "bytes": bytes}),
                None => json!({"name": name, "kind": kind}),
            })
            .collect();
        Ok(json!({
            "path": path,
            "entries": entries,
            "omitted": (omitted > 0).then_some(omitted),
        }))
    }

    fn search(&self, args: &Value) -> Result<Value, ToolReply> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            pattern: String,
            path: Option<String>,
            literal: Option<bool>,
        }
        let a: Args = arguments(SEARCH, args)?;
        let path = a.path.unwrap_or_else(|| ".".to_owned());
        let full = self.contained(&path)?;
        let source = if a.literal.unwrap_or(false) {
            regex::escape(&a.pattern)
        } else {
            a.pattern.clone()
        };
        let re = regex::RegexBuilder::new(&source)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| {
                ToolReply::Refused(format!(
                    "search: `{}` is not a valid regular expression: {e}; pass literal: true to search for plain text",
                    a.pattern
                ))
            })?;
        let mut state = Search {
            re,
            matches: Vec::new(),
            files: 0,
            scanned: 0,
            stopped: None,
            limits: self.limits,
        };
        let shown = if path == "." {
            String::new()
        } else {
            path.trim_end_matches('/').to_owned()
        };
        state.walk(&full, &shown, 0);
        Ok(json!({
            "matches": state.matches,
            "files_searched": state.files,
            "stopped": state.stopped,
        }))
    }

    fn write_file(&self, args: &Value) -> Result<Value, ToolReply> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            path: String,
            content: String,
        }
        let a: Args = arguments(WRITE_FILE, args)?;
        let full = self.contained(&a.path)?;
        if a.content.len() as u64 > self.limits.max_file_bytes {
            return Err(ToolReply::Refused(format!(
                "write_file: the content is {} bytes, over the {}-byte limit",
                a.content.len(),
                self.limits.max_file_bytes
            )));
        }
        let created = match fs::symlink_metadata(&full) {
            Ok(m) if m.is_dir() => {
                return Err(ToolReply::Failed(format!("`{}` is a directory", a.path)));
            }
            Ok(_) => false,
            Err(_) => true,
        };
        if let Some(parent) = full.parent() {
            fs::create_dir_all(parent).map_err(|e| {
                ToolReply::Failed(format!(
                    "cannot create the directories of `{}`: {e}",
                    a.path
                ))
            })?;
        }
        fs::write(&full, &a.content)
            .map_err(|e| ToolReply::Failed(format!("cannot write `{}`: {e}", a.path)))?;
        Ok(json!({"path": a.path, "bytes": a.content.len(), "created": created}))
    }

    fn apply_patch(&self, args: &Value) -> Result<Value, ToolReply> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            patch: String,
        }
        let a: Args = arguments(APPLY_PATCH, args)?;
        let files =
            patch::parse(&a.patch).map_err(|e| ToolReply::Failed(format!("apply_patch: {e}")))?;
        // Everything is computed first; nothing is written unless every hunk of every file applies.
        let mut plan: Vec<(PathBuf, Option<PathBuf>, Option<String>, Value)> = Vec::new();
        for file in &files {
            let old = file
                .old_path
                .as_deref()
                .map(|p| self.contained(p))
                .transpose()?;
            let new = file
                .new_path
                .as_deref()
                .map(|p| self.contained(p))
                .transpose()?;
            let original = match (&old, file.old_path.as_deref()) {
                (Some(full), Some(shown)) => self.read_text(full, shown)?,
                _ => {
                    if let (Some(full), Some(shown)) = (&new, file.new_path.as_deref())
                        && fs::symlink_metadata(full).is_ok()
                    {
                        return Err(ToolReply::Failed(format!(
                            "apply_patch: the patch creates `{shown}` (from /dev/null), but it exists; patch it against its current text"
                        )));
                    }
                    String::new()
                }
            };
            let text = patch::apply(file.shown_path(), &original, &file.hunks)
                .map_err(|e| ToolReply::Failed(format!("apply_patch: {e}")))?;
            let (action, target) = match (&old, &new) {
                (None, Some(n)) => ("created", n.clone()),
                (Some(o), None) => ("deleted", o.clone()),
                (Some(o), Some(n)) if o != n => ("renamed", n.clone()),
                (Some(o), Some(_)) => ("modified", o.clone()),
                (None, None) => {
                    return Err(ToolReply::Failed(
                        "apply_patch: a file change with /dev/null on both sides".to_owned(),
                    ));
                }
            };
            let remove = match action {
                "deleted" => Some(target.clone()),
                "renamed" => old.clone(),
                _ => None,
            };
            let contents = (action != "deleted").then_some(text);
            plan.push((
                target,
                remove,
                contents,
                json!({"path": file.shown_path(), "action": action, "hunks": file.hunks.len()}),
            ));
        }
        let mut done = Vec::new();
        for (target, remove, contents, summary) in plan {
            if let Some(text) = contents {
                if let Some(parent) = target.parent() {
                    fs::create_dir_all(parent).map_err(|e| {
                        ToolReply::Failed(format!("apply_patch: cannot create directories: {e}"))
                    })?;
                }
                fs::write(&target, text).map_err(|e| {
                    ToolReply::Failed(format!(
                        "apply_patch: cannot write `{}`: {e} (applied before it: {})",
                        summary["path"].as_str().unwrap_or("?"),
                        Value::Array(done.clone())
                    ))
                })?;
            }
            if let Some(gone) = remove {
                fs::remove_file(&gone).map_err(|e| {
                    ToolReply::Failed(format!(
                        "apply_patch: cannot remove `{}`: {e}",
                        summary["path"].as_str().unwrap_or("?")
                    ))
                })?;
            }
            done.push(summary);
        }
        Ok(json!({"files": done}))
    }

    async fn run(&self, args: &Value, deadline: std::time::Duration) -> Result<Value, ToolReply> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            command: String,
            timeout_sec: Option<u64>,
        }
        let a: Args = arguments(RUN, args)?;
        if a.command.trim().is_empty() {
            return Err(ToolReply::Refused("run: the command is empty".to_owned()));
        }
        if a.command.contains('\0') {
            return Err(ToolReply::Refused(
                "run: the command contains a NUL byte".to_owned(),
            ));
        }
        let asked = a
            .timeout_sec
            .map(std::time::Duration::from_secs)
            .unwrap_or(self.limits.run_timeout);
        let timeout = asked.min(self.limits.run_timeout).min(deadline);
        let mut spec = greenlight_proc::Spec::new(
            greenlight_proc::Program::Shell(a.command.clone()),
            &self.root,
        );
        spec.input = greenlight_proc::Input::Null;
        spec.output = greenlight_proc::Output::Interleaved;
        spec.deadline = Some(timeout);
        spec.grace = self.grace.min(timeout);
        spec.tail_bytes = self.limits.run_output_bytes;
        spec.env.base = self.base_env.clone();
        let mut remove = greenlight_agent::env::scrubbed_names();
        remove.extend(self.hidden_env.iter().cloned());
        spec.env.remove = remove;
        let outcome = greenlight_proc::run(&spec, &mut (), None)
            .await
            .map_err(|e| ToolReply::Failed(format!("run: {e}")))?;
        let timed_out = outcome.ended_by == Some(greenlight_proc::Ending::TimedOut);
        let cut = outcome
            .tail
            .total_bytes()
            .saturating_sub(outcome.tail.bytes().len() as u64);
        let mut output = outcome.tail.text();
        if timed_out {
            output.push_str(&format!(
                "\n[greenlight: the command was still running after {} s and was ended with everything it started]",
                timeout.as_secs_f64()
            ));
        }
        Ok(json!({
            "exit_code": outcome.exit.map_or(-1, |e| e.as_shell_code()),
            "timed_out": timed_out,
            "output": output,
            "output_cut_bytes": (cut > 0).then_some(cut),
            "leftovers_killed": (!outcome.leftovers.is_empty()).then_some(outcome.leftovers.len()),
        }))
    }
}

struct Search {
    re: regex::Regex,
    matches: Vec<String>,
    files: u64,
    scanned: u64,
    stopped: Option<String>,
    limits: ToolLimits,
}

impl Search {
    /// Walks `dir` without following symlinks (a link cannot lead the search out of the root).
    fn walk(&mut self, full: &Path, shown: &str, depth: usize) {
        if self.stopped.is_some() || depth > 64 {
            return;
        }
        let Ok(meta) = fs::symlink_metadata(full) else {
            return;
        };
        if meta.is_file() {
            self.file(full, shown, meta.len());
            return;
        }
        if !meta.is_dir() {
            return;
        }
        let Ok(read) = fs::read_dir(full) else {
            return;
        };
        let mut names: Vec<OsString> = read.flatten().map(|e| e.file_name()).collect();
        names.sort();
        for name in names {
            if name == ".git" {
                continue;
            }
            let child = if shown.is_empty() {
                name.to_string_lossy().into_owned()
            } else {
                format!("{shown}/{}", name.to_string_lossy())
            };
            self.walk(&full.join(&name), &child, depth + 1);
            if self.stopped.is_some() {
                return;
            }
        }
    }

    fn file(&mut self, full: &Path, shown: &str, len: u64) {
        if len > self.limits.max_file_bytes {
            return;
        }
        if self.scanned + len > self.limits.search_scan_bytes {
            self.stopped = Some(format!(
                "stopped after reading {} bytes of files; search a narrower path",
                self.scanned
            ));
            return;
        }
        let Ok(mut file) = fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(full)
        else {
            return;
        };
        let mut bytes = Vec::new();
        if file
            .by_ref()
            .take(self.limits.max_file_bytes)
            .read_to_end(&mut bytes)
            .is_err()
        {
            return;
        }
        self.scanned += bytes.len() as u64;
        // A NUL in the first 8 KiB: a binary file, as git and grep judge it.
        if bytes.iter().take(8192).any(|&b| b == 0) {
            return;
        }
        self.files += 1;
        let text = String::from_utf8_lossy(&bytes);
        for (n, line) in text.lines().enumerate() {
            if self.re.is_match(line) {
                if self.matches.len() >= self.limits.search_matches {
                    self.stopped = Some(format!(
                        "stopped at {} matches; narrow the pattern or the path",
                        self.limits.search_matches
                    ));
                    return;
                }
                let line: String = if line.chars().count() > 300 {
                    line.chars().take(300).chain(['…']).collect()
                } else {
                    line.to_owned()
                };
                self.matches.push(format!("{shown}:{}: {line}", n + 1));
            }
        }
    }
}

impl ToolHost for WorktreeHost {
    fn specs(&self) -> Vec<ToolSpec> {
        tools::specs(&self.limits)
    }

    fn call<'a>(&'a self, request: &'a ToolRequest) -> BoxFuture<'a, ToolReply> {
        Box::pin(async move {
            let result = match request.name.as_str() {
                READ_FILE => self.read_file(&request.arguments),
                LIST_DIR => self.list_dir(&request.arguments),
                SEARCH => self.search(&request.arguments),
                WRITE_FILE => self.write_file(&request.arguments),
                APPLY_PATCH => self.apply_patch(&request.arguments),
                RUN => self.run(&request.arguments, request.deadline).await,
                other => Err(ToolReply::Refused(format!(
                    "there is no tool named `{other}`; the tools are {READ_FILE}, {LIST_DIR}, {SEARCH}, {WRITE_FILE}, {APPLY_PATCH} and {RUN}"
                ))),
            };
            match result {
                Ok(value) => ToolReply::Ok(value),
                Err(reply) => reply,
            }
        })
    }
}
