//! Installing greenlight's Stop and SubagentStop hooks into an agent's hook settings, and
//! taking them out again.
//!
//! Claude Code reads `.claude/settings.json` (project) or `~/.claude/settings.json` (user;
//! `CLAUDE_CONFIG_DIR` moves it); Codex reads `.codex/hooks.json` or `~/.codex/hooks.json`
//! (`CODEX_HOME` moves it). Both take the same shape under the top-level `hooks` key:
//!
//! ```json
//! { "hooks": { "Stop": [ { "hooks": [
//!     { "type": "command", "command": "greenlight hook stop", "timeout": 1800 } ] } ] } }
//! ```
//!
//! The one rule that keeps it simple: greenlight owns exactly the handlers whose command is
//! `greenlight hook stop` (by any path to a `greenlight` binary) and nothing else. Every other
//! key, hook and key order is carried through untouched; the file keeps its indentation and
//! line endings; a file that is not valid JSON, or whose `hooks` is not the expected shape, is
//! refused and left byte-identical. Before any change the old bytes go to
//! `<file>.greenlight.bak`, and the new file replaces the old one atomically.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::Error;
use crate::draft::classify::{program, words};

/// The hook events greenlight installs into, in both agents.
pub const EVENTS: [&str; 2] = ["Stop", "SubagentStop"];

/// The agent's own limit for one hook run, in seconds. Both agents cancel a command hook after
/// 600 s by default and then let the agent stop; gates can take longer than that, so
/// greenlight asks for 30 minutes.
pub const DEFAULT_TIMEOUT_SEC: u32 = 1800;

/// The suffix of the backup written before a settings file is changed.
pub const BACKUP_SUFFIX: &str = ".greenlight.bak";

/// The agents whose hook settings greenlight knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// Anthropic's Claude Code (`.claude/settings.json`).
    Claude,
    /// OpenAI's Codex CLI (`.codex/hooks.json`).
    Codex,
}

impl Agent {
    /// The agent's name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
        }
    }

    fn dir_name(self) -> &'static str {
        match self {
            Agent::Claude => ".claude",
            Agent::Codex => ".codex",
        }
    }

    fn file_name(self) -> &'static str {
        match self {
            Agent::Claude => "settings.json",
            Agent::Codex => "hooks.json",
        }
    }

    fn override_var(self) -> &'static str {
        match self {
            Agent::Claude => "CLAUDE_CONFIG_DIR",
            Agent::Codex => "CODEX_HOME",
        }
    }
}

/// Which settings file: the project's (shared through the repository) or the user's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `<project>/.claude/settings.json` or `<project>/.codex/hooks.json`.
    Project,
    /// `~/.claude/settings.json` or `~/.codex/hooks.json`.
    User,
}

/// Where user-level settings live, read from the environment once by the caller.
#[derive(Debug, Clone, Default)]
pub struct Locations {
    /// `HOME`.
    pub home: Option<PathBuf>,
    /// `CLAUDE_CONFIG_DIR`: replaces `~/.claude` when set.
    pub claude_config_dir: Option<PathBuf>,
    /// `CODEX_HOME`: replaces `~/.codex` when set.
    pub codex_home: Option<PathBuf>,
}

impl Locations {
    /// Reads `HOME`, `CLAUDE_CONFIG_DIR` and `CODEX_HOME` (empty values count as unset).
    pub fn from_env() -> Locations {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Locations {
            home: var("HOME"),
            claude_config_dir: var("CLAUDE_CONFIG_DIR"),
            codex_home: var("CODEX_HOME"),
        }
    }
}

/// The settings file of `agent` at `scope`; `project_dir` is used for [`Scope::Project`].
pub fn settings_path(
    agent: Agent,
    scope: Scope,
    project_dir: &Path,
    locations: &Locations,
) -> Result<PathBuf, Error> {
    match scope {
        Scope::Project => Ok(project_dir.join(agent.dir_name()).join(agent.file_name())),
        Scope::User => {
            let overridden = match agent {
                Agent::Claude => locations.claude_config_dir.clone(),
                Agent::Codex => locations.codex_home.clone(),
            };
            let dir = overridden
                .or_else(|| locations.home.as_ref().map(|h| h.join(agent.dir_name())))
                .ok_or(Error::NoHome {
                    agent: agent.name(),
                    override_var: agent.override_var(),
                })?;
            Ok(dir.join(agent.file_name()))
        }
    }
}

/// The directory whose `.claude`/`.codex` holds project settings: the top of the git worktree
/// containing `dir` (agents read project settings from there), or `dir` itself outside git.
pub fn project_root(dir: &Path) -> PathBuf {
    let output = greenlight_proc::git::command(dir)
        .args(["rev-parse", "--show-toplevel"])
        .stderr(std::process::Stdio::null())
        .output();
    match output {
        Ok(out) if out.status.success() => {
            use std::os::unix::ffi::OsStrExt as _;
            // Bytes, not text: a worktree path need not be UTF-8.
            let mut top: &[u8] = &out.stdout;
            while let [rest @ .., b'\n' | b'\r'] = top {
                top = rest;
            }
            if top.is_empty() {
                dir.to_path_buf()
            } else {
                PathBuf::from(std::ffi::OsStr::from_bytes(top))
            }
        }
        _ => dir.to_path_buf(),
    }
}

/// The command a hook entry runs.
///
/// A project-scope file is usually committed and shared, so it names `greenlight` on `PATH`:
/// an absolute path from one machine would be wrong on the next. A user-scope file belongs to
/// this machine, so it names this very binary by absolute path: the agent may run hooks with a
/// `PATH` that lacks the directory greenlight was installed into.
pub fn hook_command(scope: Scope, current_exe: Option<&Path>) -> String {
    match (scope, current_exe.and_then(Path::to_str)) {
        (Scope::User, Some(exe)) => format!("{} hook stop", shell_quote(exe)),
        _ => "greenlight hook stop".to_string(),
    }
}

fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '+' | '@' | ':' | ',')
        })
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// What one hook handler runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSpec {
    /// The shell command, e.g. `greenlight hook stop`.
    pub command: String,
    /// The agent's timeout for the handler, in seconds.
    pub timeout_sec: u32,
}

/// True when a handler object is one of greenlight's: a `command` handler whose command runs
/// a `greenlight` binary with `hook stop`.
pub fn is_greenlight_handler(handler: &Value) -> bool {
    let Some(command) = handler.get("command").and_then(Value::as_str) else {
        return false;
    };
    let w = words(command);
    let binary = w.first().map(|p| program(p));
    matches!(binary, Some("greenlight" | "greenlight.exe"))
        && w.get(1).map(String::as_str) == Some("hook")
        && w.get(2).map(String::as_str) == Some("stop")
}

/// A change to one settings file, computed but not yet made.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The file as named (project or user settings path).
    pub path: PathBuf,
    /// The file actually written: `path`, or the file a symlink at `path` points to, so a
    /// settings file kept in a dotfiles repository stays a symlink.
    pub target: PathBuf,
    /// The file's current text; `None` when it does not exist.
    pub before: Option<String>,
    /// The file's new text; `None` only when the file does not exist and stays so.
    pub after: Option<String>,
}

/// What [`Plan::apply`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The file already said what was asked; nothing was written.
    Unchanged,
    /// The file was written; `backup` holds the old bytes when there were any.
    Written {
        /// `<file>.greenlight.bak`, when the file existed before.
        backup: Option<PathBuf>,
    },
}

impl Plan {
    /// True when applying the plan would change the file.
    pub fn changes(&self) -> bool {
        self.before != self.after
    }

    /// A unified diff of the change (empty when there is none), for `--dry-run`.
    pub fn diff(&self) -> String {
        if !self.changes() {
            return String::new();
        }
        let name = self.path.display().to_string();
        let old_header = if self.before.is_some() {
            name.clone()
        } else {
            "/dev/null".to_string()
        };
        let new_header = if self.after.is_some() {
            name
        } else {
            "/dev/null".to_string()
        };
        let before = self.before.as_deref().unwrap_or("");
        let after = self.after.as_deref().unwrap_or("");
        similar::TextDiff::from_lines(before, after)
            .unified_diff()
            .context_radius(3)
            .header(&old_header, &new_header)
            .to_string()
    }

    /// Makes the change: backup first, then an atomic replace (or removal). Refuses when the
    /// file changed since the plan was made.
    pub fn apply(&self) -> Result<Applied, Error> {
        if !self.changes() {
            return Ok(Applied::Unchanged);
        }
        let now = read_text(&self.target)?;
        if now != self.before {
            return Err(Error::ChangedUnderfoot {
                path: self.path.clone(),
            });
        }
        let backup = match &self.before {
            Some(old) => {
                let mut name = self.target.clone().into_os_string();
                name.push(BACKUP_SUFFIX);
                let backup = PathBuf::from(name);
                std::fs::write(&backup, old.as_bytes()).map_err(|source| Error::Write {
                    path: backup.clone(),
                    source,
                })?;
                Some(backup)
            }
            None => None,
        };
        match &self.after {
            Some(text) => {
                write_atomically(&self.target, text.as_bytes())?;
                Ok(Applied::Written { backup })
            }
            // No plan removes a file; an absent file that stays absent did not change.
            None => Ok(Applied::Unchanged),
        }
    }
}

/// Plans installing greenlight's handler for [`EVENTS`] into the settings file at `path`.
///
/// Idempotent: an existing greenlight handler is updated in place (never duplicated), and a
/// file that already says exactly this is left alone.
pub fn plan_install(path: &Path, spec: &HookSpec) -> Result<Plan, Error> {
    let (target, before) = load(path)?;
    let style = Style::of(before.as_deref());
    let mut doc = parse(path, before.as_deref())?;
    let root = as_object(path, &mut doc, "the top level")?;
    if !root.contains_key("hooks") {
        root.insert("hooks".to_string(), Value::Object(Map::new()));
    }
    let hooks = root
        .get_mut("hooks")
        .map(|h| as_object(path, h, "hooks"))
        .transpose()?;
    let Some(hooks) = hooks else {
        return Err(internal(path));
    };
    for event in EVENTS {
        if !hooks.contains_key(event) {
            hooks.insert(event.to_string(), Value::Array(Vec::new()));
        }
        let Some(list) = hooks.get_mut(event) else {
            return Err(internal(path));
        };
        let pointer = format!("hooks.{event}");
        let Value::Array(groups) = list else {
            return Err(shape(path, &pointer, "a list of hook groups", list));
        };
        install_event(path, &pointer, groups, spec)?;
    }
    let after = style.render(&doc);
    let after = if before.as_deref().map(Style::semantically_empty) == Some(false)
        && parse(path, before.as_deref())? == doc
    {
        // Same document: keep the bytes exactly as they are (formatting the user chose).
        before.clone()
    } else {
        Some(after)
    };
    Ok(Plan {
        path: path.to_path_buf(),
        target,
        before,
        after,
    })
}

/// Plans removing every greenlight handler from [`EVENTS`] in the settings file at `path`.
///
/// Groups, event lists and the `hooks` object that the removal empties are removed too, so
/// an install followed by an uninstall gives back the original document (byte for byte when
/// the file was formatted the way the agents write it: indented, one key per line).
pub fn plan_uninstall(path: &Path) -> Result<Plan, Error> {
    let (target, before) = load(path)?;
    let Some(text) = before.clone() else {
        return Ok(Plan {
            path: path.to_path_buf(),
            target,
            before: None,
            after: None,
        });
    };
    let style = Style::of(Some(&text));
    let mut doc = parse(path, Some(&text))?;
    let root = as_object(path, &mut doc, "the top level")?;
    let mut removed_any = false;
    let mut hooks_emptied = false;
    if let Some(hooks_value) = root.get_mut("hooks") {
        let hooks = as_object(path, hooks_value, "hooks")?;
        for event in EVENTS {
            let pointer = format!("hooks.{event}");
            let Some(list) = hooks.get_mut(event) else {
                continue;
            };
            let Value::Array(groups) = list else {
                return Err(shape(path, &pointer, "a list of hook groups", list));
            };
            let before_len = groups.len();
            let removed = remove_greenlight(groups);
            if removed > 0 {
                removed_any = true;
                if groups.is_empty() && before_len > 0 {
                    hooks.shift_remove(event);
                }
            }
        }
        hooks_emptied = removed_any && hooks.is_empty();
    }
    if hooks_emptied {
        root.shift_remove("hooks");
    }
    if !removed_any {
        return Ok(Plan {
            path: path.to_path_buf(),
            target,
            before: Some(text.clone()),
            after: Some(text),
        });
    }
    // A file left as `{}` stays: deleting a settings file the user may have created (or
    // committed) is not greenlight's call, and both agents read `{}` as "no settings".
    let after = Some(style.render(&doc));
    Ok(Plan {
        path: path.to_path_buf(),
        target,
        before: Some(text),
        after,
    })
}

/// Puts exactly one greenlight handler into one event's groups.
fn install_event(
    path: &Path,
    pointer: &str,
    groups: &mut Vec<Value>,
    spec: &HookSpec,
) -> Result<(), Error> {
    let mut found: Vec<(usize, usize)> = Vec::new();
    for (gi, group) in groups.iter().enumerate() {
        let Some(handlers) = group.get("hooks") else {
            continue;
        };
        let Value::Array(handlers) = handlers else {
            return Err(shape(
                path,
                &format!("{pointer}[{gi}].hooks"),
                "a list of handlers",
                handlers,
            ));
        };
        for (hi, handler) in handlers.iter().enumerate() {
            if is_greenlight_handler(handler) {
                found.push((gi, hi));
            }
        }
    }
    let Some(&(first_group, first_handler)) = found.first() else {
        groups.push(Value::Object(Map::from_iter([(
            "hooks".to_string(),
            Value::Array(vec![desired_handler(spec)]),
        )])));
        return Ok(());
    };
    // Drop later duplicates first (from the back, so indices stay valid).
    for &(gi, hi) in found.iter().skip(1).rev() {
        if let Some(Value::Array(handlers)) = groups.get_mut(gi).and_then(|g| g.get_mut("hooks")) {
            handlers.remove(hi);
            if handlers.is_empty() {
                groups.remove(gi);
            }
        }
    }
    if let Some(Value::Object(handler)) = groups
        .get_mut(first_group)
        .and_then(|g| g.get_mut("hooks"))
        .and_then(|h| h.get_mut(first_handler))
    {
        // Update in place: keys the user added (statusMessage, …) and their order survive.
        handler.insert("type".to_string(), Value::from("command"));
        handler.insert("command".to_string(), Value::from(spec.command.clone()));
        handler.insert("timeout".to_string(), Value::from(spec.timeout_sec));
    }
    Ok(())
}

fn desired_handler(spec: &HookSpec) -> Value {
    Value::Object(Map::from_iter([
        ("type".to_string(), Value::from("command")),
        ("command".to_string(), Value::from(spec.command.clone())),
        ("timeout".to_string(), Value::from(spec.timeout_sec)),
    ]))
}

/// Removes greenlight handlers, and groups that the removal empties; returns how many went.
fn remove_greenlight(groups: &mut Vec<Value>) -> usize {
    let mut removed = 0;
    groups.retain_mut(|group| {
        let Some(Value::Array(handlers)) = group.get_mut("hooks") else {
            return true;
        };
        let before = handlers.len();
        handlers.retain(|h| !is_greenlight_handler(h));
        let gone = before - handlers.len();
        removed += gone;
        !(gone > 0 && handlers.is_empty())
    });
    removed
}

/// Reads the file behind `path` (following a symlink), as text; `None` when absent.
fn load(path: &Path) -> Result<(PathBuf, Option<String>), Error> {
    let target = if path.is_symlink() {
        std::fs::canonicalize(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?
    } else {
        path.to_path_buf()
    };
    let text = read_text(&target)?;
    Ok((target, text))
}

fn read_text(path: &Path) -> Result<Option<String>, Error> {
    match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => Ok(Some(text)),
            Err(e) => {
                let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
                let text = String::from_utf8_lossy(valid);
                let line = text.matches('\n').count() + 1;
                let column = text.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                Err(Error::InvalidJson {
                    path: path.to_path_buf(),
                    line,
                    column,
                    message: "bytes that are not UTF-8".to_string(),
                })
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Parses the file's text; an absent or blank file is an empty object.
fn parse(path: &Path, text: Option<&str>) -> Result<Value, Error> {
    match text {
        Some(t) if !Style::semantically_empty(t) => {
            serde_json::from_str(t).map_err(|e| Error::InvalidJson {
                path: path.to_path_buf(),
                line: e.line(),
                // serde_json says column 0 for the start of a line (an end of file after a
                // newline); messages count columns from 1.
                column: e.column().max(1),
                message: e
                    .to_string()
                    .split(" at line ")
                    .next()
                    .unwrap_or("")
                    .to_string(),
            })
        }
        _ => Ok(Value::Object(Map::new())),
    }
}

fn as_object<'a>(
    path: &Path,
    value: &'a mut Value,
    pointer: &str,
) -> Result<&'a mut Map<String, Value>, Error> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(shape(path, pointer, "an object", other)),
    }
}

fn shape(path: &Path, pointer: &str, expected: &'static str, found: &Value) -> Error {
    Error::UnexpectedShape {
        path: path.to_path_buf(),
        pointer: pointer.to_string(),
        expected,
        found: match found {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "a list",
            Value::Object(_) => "an object",
        },
    }
}

fn internal(path: &Path) -> Error {
    Error::UnexpectedShape {
        path: path.to_path_buf(),
        pointer: "hooks".to_string(),
        expected: "an object",
        found: "nothing after inserting it",
    }
}

/// How the file is formatted, so a rewrite looks like the original.
#[derive(Debug, Clone)]
struct Style {
    indent: String,
    crlf: bool,
    trailing_newline: bool,
}

impl Style {
    fn of(text: Option<&str>) -> Style {
        let Some(text) = text.filter(|t| !Style::semantically_empty(t)) else {
            return Style {
                indent: "  ".to_string(),
                crlf: false,
                trailing_newline: true,
            };
        };
        let indent = text
            .lines()
            .skip(1)
            .find_map(|l| {
                let ws: String = l.chars().take_while(|c| *c == ' ' || *c == '\t').collect();
                (!ws.is_empty()).then_some(ws)
            })
            .unwrap_or_else(|| "  ".to_string());
        Style {
            indent,
            crlf: text.contains("\r\n"),
            trailing_newline: text.ends_with('\n'),
        }
    }

    fn semantically_empty(text: &str) -> bool {
        text.trim().is_empty()
    }

    fn render(&self, doc: &Value) -> String {
        let mut buf = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(self.indent.as_bytes());
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
        // Serialising a Value into memory cannot fail.
        let _ = serde::Serialize::serialize(doc, &mut ser);
        let mut text = String::from_utf8_lossy(&buf).into_owned();
        if self.trailing_newline {
            text.push('\n');
        }
        if self.crlf {
            text = text.replace('\n', "\r\n");
        }
        text
    }
}

/// Writes `bytes` to a temporary file beside `path` and renames it over `path`, keeping the
/// old file's permissions, so a crash never leaves a half-written settings file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|source| Error::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let err = |source| Error::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".greenlight-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(err)?;
    tmp.write_all(bytes).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    let permissions = match std::fs::metadata(path) {
        Ok(meta) => Some(meta.permissions()),
        Err(_) => {
            use std::os::unix::fs::PermissionsExt as _;
            // A new settings file gets the usual 0644, not the temporary file's 0600.
            Some(std::fs::Permissions::from_mode(0o644))
        }
    };
    if let Some(p) = permissions {
        std::fs::set_permissions(tmp.path(), p).map_err(err)?;
    }
    tmp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greenlight_handlers_are_recognised_by_any_path() {
        let yes = [
            "greenlight hook stop",
            "/opt/bin/greenlight hook stop --x",
            "'/a b/greenlight' hook stop",
            "GL=1 greenlight hook stop",
        ];
        for c in yes {
            assert!(
                is_greenlight_handler(&serde_json::json!({"type": "command", "command": c})),
                "{c}"
            );
        }
        let no = [
            "greenlight verify",
            "lefthook run stop",
            "echo greenlight hook stop",
            "greenlight-x hook stop",
        ];
        for c in no {
            assert!(
                !is_greenlight_handler(&serde_json::json!({"type": "command", "command": c})),
                "{c}"
            );
        }
    }

    #[test]
    fn user_scope_names_the_binary_project_scope_names_path_lookup() {
        assert_eq!(
            hook_command(Scope::Project, Some(Path::new("/x/greenlight"))),
            "greenlight hook stop"
        );
        assert_eq!(
            hook_command(Scope::User, Some(Path::new("/x/greenlight"))),
            "/x/greenlight hook stop"
        );
        assert_eq!(
            hook_command(Scope::User, Some(Path::new("/my tools/greenlight"))),
            "'/my tools/greenlight' hook stop"
        );
    }

    #[test]
    fn user_paths_honour_the_override_variables() {
        let loc = Locations {
            home: Some(PathBuf::from("/h")),
            claude_config_dir: None,
            codex_home: Some(PathBuf::from("/c")),
        };
        let p = |a| settings_path(a, Scope::User, Path::new("/p"), &loc).ok();
        assert_eq!(
            p(Agent::Claude),
            Some(PathBuf::from("/h/.claude/settings.json"))
        );
        assert_eq!(p(Agent::Codex), Some(PathBuf::from("/c/hooks.json")));
        assert!(
            settings_path(
                Agent::Claude,
                Scope::User,
                Path::new("/p"),
                &Locations::default()
            )
            .is_err()
        );
    }
}
