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
//! and left byte-identical. Backup, atomic replace and the other file rules are
//! `settings_file`'s.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::Error;
use crate::jsontext::{self, Edits, Layout, Node};
use crate::settings_file::{self, Rules, Syntax};
pub use crate::settings_file::{
    Applied, BACKUP_SUFFIX, Backup, Locations, Plan, check_inside_project, project_root,
};

/// The hook events greenlight installs into, in both agents: the two that judge a stop, and
/// the one that records where the session's work began (see `stop::record_session_base`).
pub const EVENTS: [&str; 3] = ["Stop", "SubagentStop", SESSION_EVENT];

/// The event whose handler records the session's base commit.
pub const SESSION_EVENT: &str = "SessionStart";

/// The agent's own limit for one hook run, in seconds. Both agents cancel a command hook after
/// 600 s by default and then let the agent stop; gates can take longer than that, so
/// greenlight asks for 30 minutes.
pub const DEFAULT_TIMEOUT_SEC: u32 = 1800;

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

    /// The environment variable that moves the agent's user-level directory.
    pub(crate) fn override_var(self) -> &'static str {
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
/// `hook session-start` (work-evidence asks the same question, so the answer lives there).
pub use greenlight_gate::own_files::is_greenlight_command;

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

/// Plans installing greenlight's handlers for [`EVENTS`] into the settings file at `path`.
///
/// Idempotent: an existing greenlight handler is updated in place (never duplicated), and a
/// file that already says exactly this is left alone. The text is edited where it changes
/// and nowhere else.
pub fn plan_install(path: &Path, spec: &HookSpec) -> Result<Plan, Error> {
    let file = settings_file::load(path, rules())?;
    let Some(text) = file.text() else {
        let hooks: Map<String, Value> = EVENTS
            .iter()
            .map(|e| (e.to_string(), Value::Array(vec![spec.group(e)])))
            .collect();
        let doc = Value::Object(Map::from_iter([(
            "hooks".to_string(),
            Value::Object(hooks),
        )]));
        return Ok(file.plan(Some(jsontext::render_file(&doc))));
    };
    let doc = jsontext::parse_settings(path, text)?;
    let layout = Layout::of(text);
    let mut edits = Edits::default();
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
                return Err(jsontext::shape(path, text, "hooks", "an object", hooks));
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
    let after = edits.apply(text);
    Ok(file.plan(Some(after)))
}

/// Hook settings files: JSON of at most [`greenlight_gate::file::MAX_CONFIG_BYTES`], created
/// 0644 in the agent's own directory.
fn rules() -> Rules {
    Rules {
        syntax: Syntax::Json,
        limit: greenlight_gate::file::MAX_CONFIG_BYTES,
        new_mode: 0o644,
        own_dir: true,
    }
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
    let groups = hook_groups(path, text, event, list)?;
    let pointer = format!("hooks.{event}");
    // (group index, handler indices that are greenlight's)
    let mut found: Vec<(usize, Vec<usize>)> = Vec::new();
    for (gi, group) in groups.iter().enumerate() {
        let Some(handlers) = group.get("hooks") else {
            continue;
        };
        let Some(items) = handlers.items() else {
            return Err(jsontext::shape(
                path,
                text,
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
    edits.set_members(text, handler, wanted, layout);
    Ok(())
}

/// The groups of one event's list, refused when the list is not one.
fn hook_groups<'a>(
    path: &Path,
    text: &str,
    event: &str,
    list: &'a Node,
) -> Result<&'a [Node], Error> {
    list.items().ok_or_else(|| {
        let pointer = format!("hooks.{event}");
        jsontext::shape(path, text, &pointer, "a list of hook groups", list)
    })
}

/// Whether the settings file at `path` holds any of greenlight's hooks (what an uninstall
/// would remove). A missing file holds none.
pub fn holds_greenlight_hooks(path: &Path) -> Result<bool, Error> {
    plan_uninstall(path).map(|plan| plan.changes())
}

/// The other scope: where a second install of the same hooks would make every stop run the
/// gates twice.
pub fn other_scope(scope: Scope) -> Scope {
    match scope {
        Scope::Project => Scope::User,
        Scope::User => Scope::Project,
    }
}

/// Plans removing every greenlight handler from [`EVENTS`] in the settings file at `path`.
///
/// Groups, event lists and the `hooks` object that the removal empties are removed too, so
/// an install followed by an uninstall gives back the original bytes. A file left holding an
/// empty object, with no backup beside it (no file existed before greenlight wrote it), is
/// removed.
pub fn plan_uninstall(path: &Path) -> Result<Plan, Error> {
    let file = settings_file::load(path, rules())?;
    let Some(text) = file.text() else {
        return Ok(file.unchanged());
    };
    let doc = jsontext::parse_settings(path, text)?;
    let root_members = doc.members().unwrap_or_default();
    let Some(hooks) = doc.get("hooks") else {
        return Ok(file.unchanged());
    };
    let Some(hook_members) = hooks.members() else {
        return Err(jsontext::shape(path, text, "hooks", "an object", hooks));
    };
    let mut edits = Edits::default();
    let mut removed_any = false;
    let mut emptied_events: Vec<usize> = Vec::new();
    let mut inner = Edits::default();
    for (ei, member) in hook_members.iter().enumerate() {
        if !EVENTS.contains(&member.key.as_str()) {
            continue;
        }
        let list = &member.value;
        let groups = hook_groups(path, text, &member.key, list)?;
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
        return Ok(file.unchanged());
    }
    let hooks_emptied = emptied_events.len() == hook_members.len() && inner.is_empty();
    if hooks_emptied {
        let at = root_members
            .iter()
            .position(|m| m.key == "hooks")
            .unwrap_or(0);
        if root_members.len() == 1 && !file.has_backup() {
            // Nothing but greenlight's hooks, in a file greenlight created: remove it.
            return Ok(file.plan(None));
        }
        edits.remove_members(&doc, &[at]);
    } else {
        edits = inner;
        edits.remove_members(hooks, &emptied_events);
    }
    let after = edits.apply(text);
    Ok(file.plan(Some(after)))
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
