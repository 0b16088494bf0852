//! Installing greenlight's Stop, SubagentStop and SessionStart hooks into an agent's hook
//! settings, and taking them out again.
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
//! `greenlight hook stop` or `greenlight hook session-start` (by any path to a `greenlight`
//! binary) and nothing else, and edits the file's text only where those handlers go
//! (`jsontext`): every other byte, number, escape, key order and layout stays. A file that is
//! not valid JSON, repeats a key, has a `hooks` of the wrong shape, or is read-only is refused
//! and left byte-identical. Before the first change the old bytes go to
//! `<file>.greenlight.bak` (created exclusively, never through a symlink, never replaced), and
//! the new file replaces the old one atomically.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::Error;
use crate::draft::classify::{program, words};
use crate::jsontext::{self, Edits, Layout, Node, ParseError};

/// The hook events greenlight installs into, in both agents: the two that judge a stop, and
/// the one that records where the session's work began (see `stop::record_session_base`).
pub const EVENTS: [&str; 3] = ["Stop", "SubagentStop", SESSION_EVENT];

/// The event whose handler records the session's base commit.
pub const SESSION_EVENT: &str = "SessionStart";

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

/// Refuses a project settings path that leads outside the project: a cloned repository can
/// ship `.claude/settings.json` (or `.claude` itself) as a symlink to a file of the user's, and
/// greenlight would edit that file. A user-scope file may be a symlink anywhere (dotfiles).
pub fn check_inside_project(path: &Path, project: &Path) -> Result<(), Error> {
    let Ok(root) = std::fs::canonicalize(project) else {
        return Ok(());
    };
    let real = if std::fs::symlink_metadata(path).is_ok() {
        std::fs::canonicalize(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?
    } else {
        match path
            .parent()
            .and_then(|dir| std::fs::canonicalize(dir).ok())
        {
            Some(dir) => dir.join(path.file_name().unwrap_or_default()),
            None => return Ok(()),
        }
    };
    if real.starts_with(&root) {
        Ok(())
    } else {
        Err(Error::OutsideProject {
            path: path.to_path_buf(),
            target: real,
        })
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

/// What greenlight's handlers run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSpec {
    /// The Stop / SubagentStop command, e.g. `greenlight hook stop`. The SessionStart command
    /// is the same with `hook session-start` in place of `hook stop` (so a `--state PATH` given
    /// here reaches both).
    pub command: String,
    /// The agent's timeout for the Stop handlers, in seconds.
    pub timeout_sec: u32,
}

/// How long the agent gives the SessionStart handler: it only asks git for one commit.
pub const SESSION_START_TIMEOUT_SEC: u32 = 30;

impl HookSpec {
    /// The command greenlight's handler runs for `event`.
    pub fn command_for(&self, event: &str) -> String {
        if event != SESSION_EVENT {
            return self.command.clone();
        }
        match self.command.find(" hook stop") {
            Some(at) => format!(
                "{} hook session-start{}",
                &self.command[..at],
                &self.command[at + " hook stop".len()..]
            ),
            None => "greenlight hook session-start".to_string(),
        }
    }

    fn timeout_for(&self, event: &str) -> u32 {
        if event == SESSION_EVENT {
            SESSION_START_TIMEOUT_SEC
        } else {
            self.timeout_sec
        }
    }

    fn handler(&self, event: &str) -> Value {
        Value::Object(Map::from_iter([
            ("type".to_string(), Value::from("command")),
            ("command".to_string(), Value::from(self.command_for(event))),
            ("timeout".to_string(), Value::from(self.timeout_for(event))),
        ]))
    }

    fn group(&self, event: &str) -> Value {
        Value::Object(Map::from_iter([(
            "hooks".to_string(),
            Value::Array(vec![self.handler(event)]),
        )]))
    }
}

/// True when a handler's command runs a `greenlight` binary with `hook stop` or
/// `hook session-start`: one of greenlight's own handlers.
pub fn is_greenlight_command(command: &str) -> bool {
    let w = words(command);
    let binary = w.first().map(|p| program(p));
    matches!(binary, Some("greenlight" | "greenlight.exe"))
        && w.get(1).map(String::as_str) == Some("hook")
        && matches!(w.get(2).map(String::as_str), Some("stop" | "session-start"))
}

/// True when a handler object is one of greenlight's (see [`is_greenlight_command`]).
pub fn is_greenlight_handler(handler: &Value) -> bool {
    handler
        .get("command")
        .and_then(Value::as_str)
        .is_some_and(is_greenlight_command)
}

fn is_greenlight_node(handler: &Node) -> bool {
    handler
        .get("command")
        .and_then(Node::as_str)
        .is_some_and(is_greenlight_command)
}

/// The positions of greenlight's own handlers in a handler list.
fn greenlight_positions(handlers: &[Node]) -> Vec<usize> {
    handlers
        .iter()
        .enumerate()
        .filter(|(_, h)| is_greenlight_node(h))
        .map(|(i, _)| i)
        .collect()
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
    /// The file's new text; `None` when the file does not exist afterwards (an uninstall that
    /// leaves nothing in a file greenlight created).
    pub after: Option<String>,
}

/// What [`Plan::apply`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The file already said what was asked; nothing was written.
    Unchanged,
    /// The file was written.
    Written {
        /// Where the file's bytes before greenlight first changed it are kept, when there were
        /// any.
        backup: Option<Backup>,
    },
    /// The file held nothing but greenlight's hooks, and no earlier file was backed up, so
    /// greenlight created it: it was removed.
    Removed,
}

/// The backup beside a settings file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backup {
    /// Written now, with the bytes the file had before this change.
    Made(PathBuf),
    /// An earlier backup was there already and is kept as it is: it holds the file as it was
    /// before greenlight first changed it, which is the copy worth keeping.
    Kept(PathBuf),
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

    fn backup_path(&self) -> PathBuf {
        let mut name = self.target.clone().into_os_string();
        name.push(BACKUP_SUFFIX);
        PathBuf::from(name)
    }

    /// Makes the change: backup first, then an atomic replace (or removal). Refuses when the
    /// file changed since the plan was made, when it is read-only, or when the backup path
    /// holds something other than a regular file.
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
        let mode = match std::fs::metadata(&self.target) {
            Ok(meta) => {
                use std::os::unix::fs::PermissionsExt as _;
                let mode = meta.permissions().mode() & 0o7777;
                if mode & 0o200 == 0 {
                    return Err(Error::ReadOnly {
                        path: self.path.clone(),
                    });
                }
                Some(mode)
            }
            Err(_) => None,
        };
        // A file that goes is one greenlight created holding only its own hooks: nothing of
        // the user's to back up.
        let backup = match (&self.before, mode, &self.after) {
            (Some(old), Some(mode), Some(_)) => Some(make_backup(&self.backup_path(), old, mode)?),
            _ => None,
        };
        match &self.after {
            Some(text) => {
                write_atomically(&self.target, text.as_bytes())?;
                Ok(Applied::Written { backup })
            }
            None => {
                std::fs::remove_file(&self.target).map_err(|source| Error::Write {
                    path: self.target.clone(),
                    source,
                })?;
                // The `.claude`/`.codex` directory install made goes too, if nothing else is
                // in it (remove_dir refuses a directory that is not empty).
                if let Some(dir) = self.target.parent() {
                    let _ = std::fs::remove_dir(dir);
                }
                Ok(Applied::Removed)
            }
        }
    }
}

/// Writes the backup with `O_CREAT | O_EXCL | O_NOFOLLOW` and the original's mode, so nothing
/// already at the path (a symlink a cloned repository ships, an earlier backup) is written
/// through or replaced. An earlier regular backup is kept; anything else there is refused.
fn make_backup(path: &Path, bytes: &str, mode: u32) -> Result<Backup, Error> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode & 0o777)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path);
    match created {
        Ok(mut file) => {
            let written = file
                .write_all(bytes.as_bytes())
                .and_then(|()| file.sync_all());
            if let Err(source) = written {
                let _ = std::fs::remove_file(path);
                return Err(Error::Write {
                    path: path.to_path_buf(),
                    source,
                });
            }
            Ok(Backup::Made(path.to_path_buf()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.file_type().is_file() => Ok(Backup::Kept(path.to_path_buf())),
                _ => Err(Error::BackupNotRegular {
                    path: path.to_path_buf(),
                }),
            }
        }
        Err(source) => Err(Error::Write {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Plans installing greenlight's handlers for [`EVENTS`] into the settings file at `path`.
///
/// Idempotent: an existing greenlight handler is updated in place (never duplicated), and a
/// file that already says exactly this is left alone. The text is edited where it changes
/// and nowhere else.
pub fn plan_install(path: &Path, spec: &HookSpec) -> Result<Plan, Error> {
    let (target, before) = load(path)?;
    let text = match before.as_deref().filter(|t| !t.trim().is_empty()) {
        Some(text) => text,
        None => {
            let hooks: Map<String, Value> = EVENTS
                .iter()
                .map(|e| (e.to_string(), Value::Array(vec![spec.group(e)])))
                .collect();
            let doc = Value::Object(Map::from_iter([(
                "hooks".to_string(),
                Value::Object(hooks),
            )]));
            let layout = Layout {
                unit: "  ".to_string(),
                newline: "\n",
            };
            let mut after = jsontext::render_value(&doc, &layout, "", true);
            after.push('\n');
            return Ok(Plan {
                path: path.to_path_buf(),
                target,
                before,
                after: Some(after),
            });
        }
    };
    let doc = parse(path, text)?;
    let layout = Layout::of(text);
    let mut edits = Edits::default();
    if doc.members().is_none() {
        return Err(shape(path, "the top level", "an object", &doc));
    }
    match doc.get("hooks") {
        None => {
            let hooks: Map<String, Value> = EVENTS
                .iter()
                .map(|e| (e.to_string(), Value::Array(vec![spec.group(e)])))
                .collect();
            edits.add_members(text, &doc, &[("hooks", Value::Object(hooks))], &layout);
        }
        Some(hooks) => {
            if hooks.members().is_none() {
                return Err(shape(path, "hooks", "an object", hooks));
            }
            let mut missing: Vec<(&str, Value)> = Vec::new();
            for event in EVENTS {
                match hooks.get(event) {
                    None => missing.push((event, Value::Array(vec![spec.group(event)]))),
                    Some(list) => {
                        install_event(path, text, event, list, spec, &layout, &mut edits)?;
                    }
                }
            }
            if !missing.is_empty() {
                edits.add_members(text, hooks, &missing, &layout);
            }
        }
    }
    let after = if edits.is_empty() {
        text.to_string()
    } else {
        edits.apply(text)
    };
    Ok(Plan {
        path: path.to_path_buf(),
        target,
        before: before.clone(),
        after: Some(after),
    })
}

/// Puts exactly one greenlight handler into one event's list of groups: the first one found is
/// updated in place (keys the user added, such as `statusMessage`, and their order survive),
/// later ones are removed, and with none a new group is appended.
fn install_event(
    path: &Path,
    text: &str,
    event: &str,
    list: &Node,
    spec: &HookSpec,
    layout: &Layout,
    edits: &mut Edits,
) -> Result<(), Error> {
    let pointer = format!("hooks.{event}");
    let Some(groups) = list.items() else {
        return Err(shape(path, &pointer, "a list of hook groups", list));
    };
    // (group index, handler indices that are greenlight's)
    let mut found: Vec<(usize, Vec<usize>)> = Vec::new();
    for (gi, group) in groups.iter().enumerate() {
        let Some(handlers) = group.get("hooks") else {
            continue;
        };
        let Some(items) = handlers.items() else {
            return Err(shape(
                path,
                &format!("{pointer}[{gi}].hooks"),
                "a list of handlers",
                handlers,
            ));
        };
        let ours = greenlight_positions(items);
        if !ours.is_empty() {
            found.push((gi, ours));
        }
    }
    let Some((first_group, first_handlers)) = found.first() else {
        edits.add_items(text, list, &[spec.group(event)], layout);
        return Ok(());
    };
    let mut drop_groups: Vec<usize> = Vec::new();
    for (n, (gi, ours)) in found.iter().enumerate() {
        let Some(handlers) = groups[*gi].get("hooks") else {
            continue;
        };
        let count = handlers.items().map_or(0, <[Node]>::len);
        // In the first group, the first greenlight handler stays.
        let duplicates: Vec<usize> = if n == 0 {
            ours.iter().skip(1).copied().collect()
        } else {
            ours.clone()
        };
        if duplicates.is_empty() {
            continue;
        }
        if n > 0 && duplicates.len() == count {
            drop_groups.push(*gi);
        } else {
            edits.remove_items(handlers, &duplicates);
        }
    }
    if !drop_groups.is_empty() {
        edits.remove_items(list, &drop_groups);
    }
    let keep = groups[*first_group]
        .get("hooks")
        .and_then(Node::items)
        .and_then(|h| h.get(first_handlers[0]));
    let Some(handler) = keep else {
        return Ok(());
    };
    if handler.members().is_none() {
        return Ok(());
    }
    let wanted = [
        ("type", Value::from("command")),
        ("command", Value::from(spec.command_for(event))),
        ("timeout", Value::from(spec.timeout_for(event))),
    ];
    let mut absent: Vec<(&str, Value)> = Vec::new();
    for (key, value) in wanted {
        match handler.get(key) {
            Some(node) => {
                let same = serde_json::from_str::<Value>(&text[node.span.clone()])
                    .is_ok_and(|v| v == value);
                if !same {
                    edits.replace(node.span.clone(), value.to_string());
                }
            }
            None => absent.push((key, value)),
        }
    }
    if !absent.is_empty() {
        edits.add_members(text, handler, &absent, layout);
    }
    Ok(())
}

/// Plans removing every greenlight handler from [`EVENTS`] in the settings file at `path`.
///
/// Groups, event lists and the `hooks` object that the removal empties are removed too, so
/// an install followed by an uninstall gives back the original bytes. A file left holding an
/// empty object, with no backup beside it (no file existed before greenlight wrote it), is
/// removed.
pub fn plan_uninstall(path: &Path) -> Result<Plan, Error> {
    let (target, before) = load(path)?;
    let unchanged = |before: Option<String>| Plan {
        path: path.to_path_buf(),
        target: target.clone(),
        after: before.clone(),
        before,
    };
    let Some(text) = before.as_deref().filter(|t| !t.trim().is_empty()) else {
        return Ok(unchanged(before));
    };
    let doc = parse(path, text)?;
    let Some(root_members) = doc.members() else {
        return Err(shape(path, "the top level", "an object", &doc));
    };
    let Some(hooks) = doc.get("hooks") else {
        return Ok(unchanged(before));
    };
    let Some(hook_members) = hooks.members() else {
        return Err(shape(path, "hooks", "an object", hooks));
    };
    let mut edits = Edits::default();
    let mut removed_any = false;
    let mut emptied_events: Vec<usize> = Vec::new();
    let mut inner = Edits::default();
    for (ei, member) in hook_members.iter().enumerate() {
        if !EVENTS.contains(&member.key.as_str()) {
            continue;
        }
        let pointer = format!("hooks.{}", member.key);
        let list = &member.value;
        let Some(groups) = list.items() else {
            return Err(shape(path, &pointer, "a list of hook groups", list));
        };
        let mut drop_groups: Vec<usize> = Vec::new();
        let mut group_edits: Vec<(&Node, Vec<usize>)> = Vec::new();
        for (gi, group) in groups.iter().enumerate() {
            let Some(handlers) = group.get("hooks") else {
                continue;
            };
            let Some(items) = handlers.items() else {
                continue;
            };
            let ours = greenlight_positions(items);
            if ours.is_empty() {
                continue;
            }
            removed_any = true;
            if ours.len() == items.len() {
                drop_groups.push(gi);
            } else {
                group_edits.push((handlers, ours));
            }
        }
        if !groups.is_empty() && drop_groups.len() == groups.len() {
            emptied_events.push(ei);
            continue;
        }
        for (handlers, ours) in group_edits {
            inner.remove_items(handlers, &ours);
        }
        inner.remove_items(list, &drop_groups);
    }
    if !removed_any {
        return Ok(unchanged(before));
    }
    let hooks_emptied = emptied_events.len() == hook_members.len() && inner.is_empty();
    if hooks_emptied {
        let at = root_members
            .iter()
            .position(|m| m.key == "hooks")
            .unwrap_or(0);
        if root_members.len() == 1 && !backup_exists(&target) {
            // Nothing but greenlight's hooks, in a file greenlight created: remove it.
            return Ok(Plan {
                path: path.to_path_buf(),
                target,
                before,
                after: None,
            });
        }
        edits.remove_members(&doc, &[at]);
    } else {
        edits = inner;
        edits.remove_members(hooks, &emptied_events);
    }
    let after = edits.apply(text);
    Ok(Plan {
        path: path.to_path_buf(),
        target,
        before,
        after: Some(after),
    })
}

fn backup_exists(target: &Path) -> bool {
    let mut name = target.as_os_str().to_owned();
    name.push(BACKUP_SUFFIX);
    std::fs::symlink_metadata(PathBuf::from(name)).is_ok()
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

/// The settings file's text, read bounded and without blocking (a FIFO or a device at the
/// path is refused, not waited on); `None` when absent.
fn read_text(path: &Path) -> Result<Option<String>, Error> {
    let bytes = match greenlight_gate::file::read_config_file(path) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(e) => {
            return Err(Error::Unusable {
                path: path.to_path_buf(),
                reason: e.reason(),
            });
        }
    };
    match String::from_utf8(bytes) {
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
    }
}

/// Parses the file's text into a spanned document.
fn parse(path: &Path, text: &str) -> Result<Node, Error> {
    jsontext::parse(text).map_err(|e| match e {
        ParseError::Invalid {
            line,
            column,
            message,
        } => Error::InvalidJson {
            path: path.to_path_buf(),
            line,
            column,
            message,
        },
        ParseError::DuplicateKey { key, line, column } => Error::DuplicateKey {
            path: path.to_path_buf(),
            line,
            column,
            key,
        },
    })
}

fn shape(path: &Path, pointer: &str, expected: &'static str, found: &Node) -> Error {
    Error::UnexpectedShape {
        path: path.to_path_buf(),
        pointer: pointer.to_string(),
        expected,
        found: found.kind_name(),
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
        Ok(meta) => meta.permissions(),
        Err(_) => {
            use std::os::unix::fs::PermissionsExt as _;
            // A new settings file gets the usual 0644, not the temporary file's 0600.
            std::fs::Permissions::from_mode(0o644)
        }
    };
    std::fs::set_permissions(tmp.path(), permissions).map_err(err)?;
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
