//! Registering greenlight's MCP server (`greenlight mcp`, over stdio) with Claude Code and
//! Codex, and taking it out again.
//!
//! Where each agent reads its MCP servers (what the agents' own `mcp add` writes):
//!
//! | agent | scope | file | entry |
//! |---|---|---|---|
//! | Claude Code | project | `<root>/.mcp.json` | `mcpServers.greenlight` |
//! | Claude Code | user | `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json`; a legacy `.config.json` in the config directory wins when it exists) | `mcpServers.greenlight` |
//! | Codex | project | `<root>/.codex/config.toml` (Codex reads it only in a trusted project) | `[mcp_servers.greenlight]` |
//! | Codex | user | `~/.codex/config.toml` (`$CODEX_HOME/config.toml`) | `[mcp_servers.greenlight]` |
//!
//! The one rule: greenlight owns the entry named `greenlight` and, inside it, only the keys it
//! writes (`type`, `command` and `args` for Claude Code; `command`, `args` and
//! `tool_timeout_sec` for Codex). Keys a user added to the entry, every other server and every
//! other byte of the file stay. JSON is edited as text (`jsontext`), TOML through `tomltext`;
//! the backup, the atomic replace and the refusals are `settings_file`'s.

use std::path::{Path, PathBuf};

use camino::Utf8Path;
use serde_json::{Map, Value};
use toml_edit::{Item, TableLike};

use crate::Error;
pub use crate::install::{Agent, Scope};
use crate::jsontext::{self, Edits, Layout, Node};
use crate::settings_file::{self, Loaded, Locations, Plan, Rules, Syntax};
use crate::tomltext::{self, TomlText};

/// The name of greenlight's entry in every agent's list of MCP servers.
pub const SERVER_NAME: &str = "greenlight";

/// The arguments that start the server: `greenlight mcp`.
pub const SERVER_ARGS: [&str; 1] = ["mcp"];

/// The key Claude Code keeps its servers under.
const CLAUDE_SERVERS: &str = "mcpServers";

/// The table Codex keeps its servers in.
const CODEX_SERVERS: &str = "mcp_servers";

/// The largest user-level file read: `~/.claude.json` is Claude Code's own store as well as its
/// settings, and users report it at 65 MB to 101 MB (Claude Code issues #6394 and #2593).
pub const USER_FILE_LIMIT: u64 = 256 << 20;

/// Codex's limit for one tool call when gates are not known (no verify.yaml, or one that does
/// not parse): the 30 minutes the Stop hook gets (`install::DEFAULT_TIMEOUT_SEC`). Codex's own
/// default is 60 s, shorter than most test suites.
pub const DEFAULT_TOOL_TIMEOUT_SEC: u64 = crate::install::DEFAULT_TIMEOUT_SEC as u64;

/// Added once to the gates' own limits: greenlight's work around them in one tool call (git
/// probes, the work-evidence check, digesting output, the reply).
pub const TOOL_TIMEOUT_MARGIN_SEC: u64 = 60;

/// Added per attempt: what a gate that reaches its `timeoutSec` takes beyond it — the kill
/// grace before SIGKILL, the settle time for leftovers and the output drain, rounded up.
pub fn attempt_overhead_sec() -> u64 {
    let extra =
        greenlight_proc::KILL_GRACE + greenlight_proc::LEAK_SETTLE + greenlight_proc::DRAIN_LIMIT;
    extra.as_secs() + u64::from(extra.subsec_nanos() > 0)
}

/// One agent's MCP settings file at one scope.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    /// Whose file it is.
    pub agent: Agent,
    /// The project's or the user's.
    pub scope: Scope,
    /// Where it is.
    pub path: PathBuf,
    rules: Rules,
}

/// The MCP settings file of `agent` at `scope`; `project_root` is used for [`Scope::Project`].
pub fn config_file(
    agent: Agent,
    scope: Scope,
    project_root: &Path,
    locations: &Locations,
) -> Result<ConfigFile, Error> {
    let no_home = || Error::NoHome {
        agent: agent.name(),
        override_var: agent.override_var(),
    };
    let (path, rules) = match (agent, scope) {
        (Agent::Claude, Scope::Project) => (
            project_root.join(".mcp.json"),
            rules(Syntax::Json, scope, false),
        ),
        (Agent::Claude, Scope::User) => {
            // Claude Code's own order: a legacy `.config.json` in the config directory, else
            // `.claude.json` in CLAUDE_CONFIG_DIR, else in HOME.
            let config_dir = locations
                .claude_config_dir
                .clone()
                .or_else(|| locations.home.as_ref().map(|h| h.join(".claude")))
                .ok_or_else(no_home)?;
            let legacy = config_dir.join(".config.json");
            let path = if std::fs::symlink_metadata(&legacy).is_ok() {
                legacy
            } else {
                locations
                    .claude_config_dir
                    .as_ref()
                    .or(locations.home.as_ref())
                    .ok_or_else(no_home)?
                    .join(".claude.json")
            };
            (path, rules(Syntax::Json, scope, false))
        }
        (Agent::Codex, Scope::Project) => (
            project_root.join(".codex").join("config.toml"),
            rules(Syntax::Toml, scope, true),
        ),
        (Agent::Codex, Scope::User) => match &locations.codex_home {
            Some(dir) => (dir.join("config.toml"), rules(Syntax::Toml, scope, false)),
            None => (
                locations
                    .home
                    .as_ref()
                    .ok_or_else(no_home)?
                    .join(".codex")
                    .join("config.toml"),
                rules(Syntax::Toml, scope, true),
            ),
        },
    };
    Ok(ConfigFile {
        agent,
        scope,
        path,
        rules,
    })
}

/// A project file is small and may come from a clone (1 MiB, 0644); a user file may be large
/// and holds private state (0600, as both agents create theirs). Only a `.codex` directory
/// greenlight would have made goes with a file it removes.
fn rules(syntax: Syntax, scope: Scope, own_dir: bool) -> Rules {
    let (limit, new_mode) = match scope {
        Scope::Project => (greenlight_gate::file::MAX_CONFIG_BYTES, 0o644),
        Scope::User => (USER_FILE_LIMIT, 0o600),
    };
    Rules {
        syntax,
        limit,
        new_mode,
        own_dir,
    }
}

/// The program an entry starts.
///
/// A project file is usually committed and shared, so it names `greenlight` on `PATH`; a user
/// file belongs to this machine, so it names this very binary by absolute path (the agent may
/// start servers with a `PATH` that lacks greenlight's directory). The program is an argv
/// word, not a shell command: no quoting.
pub fn server_command(scope: Scope, current_exe: Option<&Path>) -> String {
    match (scope, current_exe.and_then(Path::to_str)) {
        (Scope::User, Some(exe)) => exe.to_string(),
        _ => "greenlight".to_string(),
    }
}

/// What greenlight's entry says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// The program, e.g. `greenlight` or `/usr/local/bin/greenlight`.
    pub command: String,
    /// Its arguments: [`SERVER_ARGS`].
    pub args: Vec<String>,
    /// Codex's limit for one tool call, in seconds (Claude Code's default is over a day).
    pub tool_timeout_sec: u64,
}

impl ServerSpec {
    /// `command mcp` with Codex's limit `tool_timeout_sec`.
    pub fn new(command: String, tool_timeout_sec: u64) -> ServerSpec {
        ServerSpec {
            command,
            args: SERVER_ARGS.iter().map(ToString::to_string).collect(),
            tool_timeout_sec,
        }
    }

    /// Claude Code's entry, with `type` first as `claude mcp add` writes it.
    fn claude_members(&self) -> [(&'static str, Value); 3] {
        [
            ("type", Value::from("stdio")),
            ("command", Value::from(self.command.as_str())),
            ("args", Value::from(self.args.clone())),
        ]
    }

    /// Codex's entry, in the order `codex mcp add` writes its keys.
    fn codex_members(&self) -> [(&'static str, toml_edit::Value); 3] {
        let args: toml_edit::Array = self.args.iter().map(String::as_str).collect();
        [
            ("command", self.command.as_str().into()),
            ("args", args.into()),
            (
                "tool_timeout_sec",
                i64::try_from(self.tool_timeout_sec)
                    .unwrap_or(i64::MAX)
                    .into(),
            ),
        ]
    }
}

/// What a plan does to greenlight's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The entry is new.
    Added,
    /// The entry was there and some of greenlight's keys change.
    Updated,
    /// The entry goes.
    Removed,
    /// Nothing changes.
    Unchanged,
}

impl Change {
    /// The word for it in the command's output.
    pub fn word(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Updated => "updated",
            Change::Removed => "removed",
            Change::Unchanged => "unchanged",
        }
    }
}

/// A planned change to one agent's MCP settings.
#[derive(Debug, Clone)]
pub struct McpPlan {
    /// The file.
    pub file: ConfigFile,
    /// What happens to greenlight's entry.
    pub change: Change,
    /// The text before and after; [`Plan::apply`] makes it so.
    pub plan: Plan,
}

/// Plans adding (or updating) greenlight's entry in `file`. Idempotent: a file that already
/// says exactly this is left as it is.
pub fn plan_install(file: &ConfigFile, spec: &ServerSpec) -> Result<McpPlan, Error> {
    let loaded = settings_file::load(&file.path, file.rules.clone())?;
    let (change, plan) = match file.agent {
        Agent::Claude => install_json(loaded, spec)?,
        Agent::Codex => install_toml(loaded, spec)?,
    };
    Ok(McpPlan {
        file: file.clone(),
        change,
        plan,
    })
}

/// Plans removing greenlight's entry from `file`, and the server list greenlight made for it
/// when nothing else is left in it, so an install followed by an uninstall gives back the
/// file's bytes; a file greenlight created is removed.
pub fn plan_uninstall(file: &ConfigFile) -> Result<McpPlan, Error> {
    let loaded = settings_file::load(&file.path, file.rules.clone())?;
    let (change, plan) = match file.agent {
        Agent::Claude => uninstall_json(loaded)?,
        Agent::Codex => uninstall_toml(loaded)?,
    };
    Ok(McpPlan {
        file: file.clone(),
        change,
        plan,
    })
}

/// `mcpServers` and greenlight's entry in it, each when present; refused when either is not
/// an object.
fn claude_entry<'d>(
    path: &Path,
    text: &str,
    doc: &'d Node,
) -> Result<(Option<&'d Node>, Option<&'d Node>), Error> {
    let Some(list) = doc.get(CLAUDE_SERVERS) else {
        return Ok((None, None));
    };
    if list.members().is_none() {
        return Err(jsontext::shape(
            path,
            text,
            CLAUDE_SERVERS,
            "an object",
            list,
        ));
    }
    let ours = list.get(SERVER_NAME);
    if let Some(ours) = ours.filter(|n| n.members().is_none()) {
        let pointer = format!("{CLAUDE_SERVERS}.{SERVER_NAME}");
        return Err(jsontext::shape(path, text, &pointer, "an object", ours));
    }
    Ok((Some(list), ours))
}

fn install_json(file: Loaded, spec: &ServerSpec) -> Result<(Change, Plan), Error> {
    let entry = || {
        Value::Object(Map::from_iter(
            spec.claude_members().map(|(k, v)| (k.to_string(), v)),
        ))
    };
    let servers = || Value::Object(Map::from_iter([(SERVER_NAME.to_string(), entry())]));
    let Some(text) = file.text() else {
        let doc = Value::Object(Map::from_iter([(CLAUDE_SERVERS.to_string(), servers())]));
        return Ok((Change::Added, file.plan(Some(jsontext::render_file(&doc)))));
    };
    let doc = jsontext::parse_settings(&file.path, text)?;
    let layout = Layout::of(text);
    let mut edits = Edits::default();
    let change = match claude_entry(&file.path, text, &doc)? {
        (None, _) => {
            edits.add_members(text, &doc, &[(CLAUDE_SERVERS, servers())], &layout);
            Change::Added
        }
        (Some(list), None) => {
            edits.add_members(text, list, &[(SERVER_NAME, entry())], &layout);
            Change::Added
        }
        (Some(_), Some(ours)) => {
            if edits.set_members(text, ours, spec.claude_members(), &layout) {
                Change::Updated
            } else {
                Change::Unchanged
            }
        }
    };
    let after = edits.apply(text);
    Ok((change, file.plan(Some(after))))
}

fn uninstall_json(file: Loaded) -> Result<(Change, Plan), Error> {
    let Some(text) = file.text() else {
        return Ok((Change::Unchanged, file.unchanged()));
    };
    let doc = jsontext::parse_settings(&file.path, text)?;
    let (Some(list), Some(_)) = claude_entry(&file.path, text, &doc)? else {
        return Ok((Change::Unchanged, file.unchanged()));
    };
    let root = doc.members().unwrap_or_default();
    let servers = list.members().unwrap_or_default();
    let mut edits = Edits::default();
    if servers.len() == 1 && !had_claude_servers(&file) {
        // greenlight made the object for its entry: it goes with it.
        if root.len() == 1 && !file.has_backup() {
            // Nothing else, in a file greenlight created: the file goes.
            return Ok((Change::Removed, file.plan(None)));
        }
        let list_at = root.iter().position(|m| m.key == CLAUDE_SERVERS);
        edits.remove_members(&doc, &[list_at.unwrap_or(0)]);
    } else {
        let at = servers.iter().position(|m| m.key == SERVER_NAME);
        edits.remove_members(list, &[at.unwrap_or(0)]);
    }
    let after = edits.apply(text);
    Ok((Change::Removed, file.plan(Some(after))))
}

/// True when the file had an `mcpServers` object before greenlight first changed it (its
/// backup says so): an object that is the user's stays, empty, when greenlight's entry goes.
fn had_claude_servers(file: &Loaded) -> bool {
    file.backup_text()
        .and_then(|text| jsontext::parse(&text).ok())
        .is_some_and(|doc| doc.get(CLAUDE_SERVERS).is_some())
}

fn install_toml(file: Loaded, spec: &ServerSpec) -> Result<(Change, Plan), Error> {
    let parsed = TomlText::parse(&file.path, file.before.as_deref().unwrap_or(""))?;
    check_toml_shape(&file.path, &parsed)?;
    let mut doc = parsed.editable();
    let root = doc.as_table_mut();
    if !root.contains_key(CODEX_SERVERS) {
        // No `[mcp_servers]` header of its own: only `[mcp_servers.greenlight]` is written.
        let mut table = toml_edit::Table::new();
        table.set_implicit(true);
        root.insert(CODEX_SERVERS, Item::Table(table));
    }
    let Some(servers) = root
        .get_mut(CODEX_SERVERS)
        .and_then(Item::as_table_like_mut)
    else {
        // Not reached: check_toml_shape refused anything but a table.
        return Ok((Change::Unchanged, file.unchanged()));
    };
    let change = match servers
        .get_mut(SERVER_NAME)
        .and_then(Item::as_table_like_mut)
    {
        None => {
            let mut table = toml_edit::Table::new();
            for (key, value) in spec.codex_members() {
                table.insert(key, Item::Value(value));
            }
            servers.insert(SERVER_NAME, Item::Table(table));
            Change::Added
        }
        Some(ours) => {
            let mut changed = false;
            for (key, value) in spec.codex_members() {
                changed |= set_toml_value(ours, key, value);
            }
            if changed {
                Change::Updated
            } else {
                Change::Unchanged
            }
        }
    };
    let after = parsed.render(doc);
    Ok((change, file.plan(Some(after))))
}

/// Sets `key` to `value` unless it already holds it; a replaced value keeps its spacing and
/// trailing comment. Returns true when the entry changes.
fn set_toml_value(entry: &mut dyn TableLike, key: &str, mut value: toml_edit::Value) -> bool {
    let old = entry.get(key).and_then(Item::as_value);
    if old.is_some_and(|old| same_toml_value(old, &value)) {
        return false;
    }
    if let Some(old) = old {
        *value.decor_mut() = old.decor().clone();
    }
    entry.insert(key, Item::Value(value));
    true
}

/// Equal as values, whatever the spelling (`600` and `600.0`, `"mcp"` and `'mcp'`).
fn same_toml_value(a: &toml_edit::Value, b: &toml_edit::Value) -> bool {
    use toml_edit::Value as V;
    match (a, b) {
        (V::String(x), V::String(y)) => x.value() == y.value(),
        (V::Integer(x), V::Integer(y)) => x.value() == y.value(),
        (V::Float(x), V::Integer(y)) | (V::Integer(y), V::Float(x)) => {
            *x.value() == *y.value() as f64
        }
        (V::Array(x), V::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(a, b)| same_toml_value(a, b))
        }
        _ => false,
    }
}

fn uninstall_toml(file: Loaded) -> Result<(Change, Plan), Error> {
    let Some(text) = file.before.as_deref() else {
        return Ok((Change::Unchanged, file.unchanged()));
    };
    let parsed = TomlText::parse(&file.path, text)?;
    check_toml_shape(&file.path, &parsed)?;
    let mut doc = parsed.editable();
    let root = doc.as_table_mut();
    let Some(servers) = root
        .get_mut(CODEX_SERVERS)
        .and_then(Item::as_table_like_mut)
    else {
        return Ok((Change::Unchanged, file.unchanged()));
    };
    if servers.remove(SERVER_NAME).is_none() {
        return Ok((Change::Unchanged, file.unchanged()));
    }
    // A table with no header of its own (`[mcp_servers.greenlight]` alone, or dotted keys)
    // has no bytes to keep once empty; an explicit `[mcp_servers]` or inline table stays.
    let headerless = root
        .get(CODEX_SERVERS)
        .and_then(Item::as_table)
        .is_some_and(|t| t.is_empty() && (t.is_implicit() || t.is_dotted()));
    if headerless {
        root.remove(CODEX_SERVERS);
    }
    let after = parsed.render(doc);
    if after.trim().is_empty() && !file.has_backup() {
        // Nothing left, in a file greenlight created: the file goes.
        return Ok((Change::Removed, file.plan(None)));
    }
    Ok((Change::Removed, file.plan(Some(after))))
}

/// Refuses an `mcp_servers` that is not a table, or a `greenlight` server in it that is not.
fn check_toml_shape(path: &Path, parsed: &TomlText) -> Result<(), Error> {
    let root = parsed.spanned.as_table();
    let Some(servers) = root.get(CODEX_SERVERS) else {
        return Ok(());
    };
    let shape = |pointer: String, key: Option<&toml_edit::Key>, item: &Item| {
        let (line, column) =
            parsed.position(key.and_then(toml_edit::Key::span).or_else(|| item.span()));
        Error::UnexpectedShape {
            path: path.to_path_buf(),
            line,
            column,
            pointer,
            expected: "a table",
            found: tomltext::kind_name(item),
        }
    };
    let Some(servers_table) = servers.as_table_like() else {
        return Err(shape(
            CODEX_SERVERS.to_string(),
            root.key(CODEX_SERVERS),
            servers,
        ));
    };
    match servers_table.get(SERVER_NAME) {
        Some(ours) if !ours.is_table_like() => Err(shape(
            format!("{CODEX_SERVERS}.{SERVER_NAME}"),
            servers_table.key(SERVER_NAME),
            ours,
        )),
        _ => Ok(()),
    }
}

/// How long Codex lets one tool call run, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolTimeout {
    /// The value written as `tool_timeout_sec`.
    pub seconds: u64,
    /// Where it came from.
    pub basis: TimeoutBasis,
}

/// Where a [`ToolTimeout`] came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeoutBasis {
    /// The gates of this verify.yaml need `needed` seconds at most.
    Gates {
        /// The verify.yaml.
        path: PathBuf,
        /// How many gates it declares.
        gates: usize,
        /// What they need at most, margins included.
        needed: u64,
    },
    /// No verify.yaml was found from the directory.
    NoConfig {
        /// The directory searched from.
        dir: PathBuf,
    },
    /// The verify.yaml could not be read or does not parse.
    Unreadable {
        /// The verify.yaml.
        path: PathBuf,
        /// Its first problem, naming the file (and line).
        reason: String,
    },
}

/// The longest one run of `config`'s gates can take: each gate's `timeoutSec` (twice with
/// `retryOnFail`: one retry after a failure) plus [`attempt_overhead_sec`] per attempt, plus
/// [`TOOL_TIMEOUT_MARGIN_SEC`] once. Gates run one at a time, so the limits add up. Time spent
/// waiting for another run's mutex is not bounded by any gate, and not counted.
pub fn gates_need(config: &greenlight_gate::config::Config) -> u64 {
    let per_attempt = attempt_overhead_sec();
    config
        .gates
        .iter()
        .map(|g| {
            let attempts = if g.retry_on_fail { 2 } else { 1 };
            attempts * (u64::from(g.timeout_sec) + per_attempt)
        })
        .sum::<u64>()
        + TOOL_TIMEOUT_MARGIN_SEC
}

/// Codex's `tool_timeout_sec` for an entry installed from `dir`: what the gates of the
/// verify.yaml found from `dir` need (see [`gates_need`]), else
/// [`DEFAULT_TOOL_TIMEOUT_SEC`]. A user-level entry serves every project, so it gets at least
/// the default even when this project's gates need less.
pub fn tool_timeout(dir: &Path, scope: Scope) -> ToolTimeout {
    let basis = match greenlight_gate::config::locate(dir).map(|found| found.path) {
        None => TimeoutBasis::NoConfig {
            dir: dir.to_path_buf(),
        },
        Some(path) => match Utf8Path::from_path(&path) {
            None => TimeoutBasis::Unreadable {
                reason: format!("{}: the path is not UTF-8", path.display()),
                path,
            },
            Some(utf8) => match greenlight_gate::config::load_any(utf8) {
                Ok(config) => TimeoutBasis::Gates {
                    gates: config.gates.len(),
                    needed: gates_need(&config),
                    path,
                },
                Err(errors) => TimeoutBasis::Unreadable {
                    reason: errors
                        .iter()
                        .next()
                        .map_or_else(String::new, ToString::to_string),
                    path,
                },
            },
        },
    };
    let seconds = match (&basis, scope) {
        (TimeoutBasis::Gates { needed, .. }, Scope::Project) => *needed,
        (TimeoutBasis::Gates { needed, .. }, Scope::User) => {
            (*needed).max(DEFAULT_TOOL_TIMEOUT_SEC)
        }
        _ => DEFAULT_TOOL_TIMEOUT_SEC,
    };
    ToolTimeout { seconds, basis }
}

impl ToolTimeout {
    /// One line saying where the value came from, for the command's notes.
    pub fn explain(&self) -> String {
        let s = self.seconds;
        match &self.basis {
            TimeoutBasis::Gates {
                path,
                gates,
                needed,
            } if *needed == s => format!(
                "Codex's tool_timeout_sec is {s} s: what the {} of {} can take, retries and a \
                 margin included",
                count_gates(*gates),
                path.display()
            ),
            TimeoutBasis::Gates {
                path,
                gates,
                needed,
            } => format!(
                "Codex's tool_timeout_sec is {s} s: the {} of {} need {needed} s, and a \
                 user-level entry serves every project, so it gets at least the default",
                count_gates(*gates),
                path.display()
            ),
            TimeoutBasis::NoConfig { dir } => format!(
                "no .greenlight/verify.yaml or .commandmate/verify.yaml in {} or above it in the \
                 worktree, so Codex's \
                 tool_timeout_sec is the default {s} s; run the install again once the gates \
                 are declared (greenlight init --write) to fit it to them",
                dir.display()
            ),
            TimeoutBasis::Unreadable { reason, .. } => format!(
                "Codex's tool_timeout_sec is the default {s} s: the gates cannot be read \
                 ({reason}); run the install again once the file parses"
            ),
        }
    }
}

fn count_gates(n: usize) -> String {
    if n == 1 {
        "1 gate".to_string()
    } else {
        format!("{n} gates")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_scope_names_the_binary_and_project_scope_names_path_lookup() {
        let exe = Path::new("/opt/my tools/greenlight");
        assert_eq!(server_command(Scope::Project, Some(exe)), "greenlight");
        assert_eq!(
            server_command(Scope::User, Some(exe)),
            "/opt/my tools/greenlight"
        );
        assert_eq!(server_command(Scope::User, None), "greenlight");
    }

    #[test]
    fn user_files_follow_home_and_the_override_variables() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let loc = Locations {
            home: Some(home.path().to_path_buf()),
            claude_config_dir: None,
            codex_home: None,
        };
        let path = |agent, loc: &Locations| {
            config_file(agent, Scope::User, Path::new("/p"), loc)
                .map(|f| f.path)
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(path(Agent::Claude, &loc), home.path().join(".claude.json"));
        assert_eq!(
            path(Agent::Codex, &loc),
            home.path().join(".codex/config.toml")
        );
        let moved = Locations {
            claude_config_dir: Some(PathBuf::from("/c")),
            codex_home: Some(PathBuf::from("/x")),
            ..loc.clone()
        };
        assert_eq!(
            path(Agent::Claude, &moved),
            PathBuf::from("/c/.claude.json")
        );
        assert_eq!(path(Agent::Codex, &moved), PathBuf::from("/x/config.toml"));
        // A legacy `.config.json` in the config directory is the one Claude Code writes.
        let legacy = home.path().join(".claude/.config.json");
        std::fs::create_dir_all(home.path().join(".claude")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&legacy, "{}").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(path(Agent::Claude, &loc), legacy);
        assert!(matches!(
            config_file(
                Agent::Codex,
                Scope::User,
                Path::new("/p"),
                &Locations::default()
            ),
            Err(Error::NoHome { .. })
        ));
        assert_eq!(
            config_file(
                Agent::Claude,
                Scope::Project,
                Path::new("/p"),
                &Locations::default()
            )
            .map(|f| f.path)
            .ok(),
            Some(PathBuf::from("/p/.mcp.json"))
        );
    }

    #[test]
    fn the_per_attempt_overhead_covers_kill_grace_settle_and_drain() {
        // 5 s + 0.1 s + 2 s, rounded up.
        assert_eq!(attempt_overhead_sec(), 8);
    }

    #[test]
    fn equal_values_in_other_spellings_are_the_same() {
        let v = |s: &str| {
            s.parse::<toml_edit::Value>()
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert!(same_toml_value(&v("600"), &v("600.0")));
        assert!(same_toml_value(&v("'mcp'"), &v("\"mcp\"")));
        assert!(same_toml_value(&v("[ 'mcp' ]"), &v("[\"mcp\"]")));
        assert!(!same_toml_value(&v("[\"mcp\", \"x\"]"), &v("[\"mcp\"]")));
        assert!(!same_toml_value(&v("\"600\""), &v("600")));
    }
}
