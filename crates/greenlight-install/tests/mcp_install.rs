//! Registering the MCP server on settings files generated at random: every other value stays,
//! a second install changes nothing, and an uninstall gives back the bytes.

use std::path::Path;

use greenlight_install::mcp_install::{self, Agent, Change, ConfigFile, Scope, ServerSpec};
use greenlight_install::settings_file::{Applied, Locations};
use proptest::prelude::*;
use serde_json::{Map, Value};
use support::{layout, read, tmp, value, write};

mod support;

fn spec() -> ServerSpec {
    ServerSpec::new("greenlight".to_string(), 1234)
}

fn file(agent: Agent, root: &Path) -> ConfigFile {
    mcp_install::config_file(agent, Scope::Project, root, &Locations::default())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Installs, checks that a second install plans nothing, and returns the installed text.
fn install(file: &ConfigFile) -> String {
    let plan = mcp_install::plan_install(file, &spec()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plan.change, Change::Added);
    let applied = plan.plan.apply().unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(applied, Applied::Written { .. }), "{applied:?}");
    let again = mcp_install::plan_install(file, &spec()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.change, Change::Unchanged);
    assert!(!again.plan.changes(), "a second install changes nothing");
    read(&file.path)
}

fn uninstall(file: &ConfigFile) {
    let plan = mcp_install::plan_uninstall(file).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plan.change, Change::Removed);
    plan.plan.apply().unwrap_or_else(|e| panic!("{e}"));
}

/// Someone else's server.
fn server() -> impl Strategy<Value = Value> {
    ("[a-z-]{1,10}", prop::collection::vec("[a-z-]{1,6}", 0..3))
        .prop_map(|(command, args)| serde_json::json!({"command": command, "args": args}))
}

/// A `.mcp.json` or `~/.claude.json`: other keys, and other servers (or none).
fn claude_settings() -> impl Strategy<Value = Value> {
    (
        prop::collection::btree_map("[a-z]{1,6}", value(), 0..4),
        prop::option::of(prop::collection::btree_map("[a-z]{1,8}", server(), 1..3)),
    )
        .prop_map(|(other, servers)| {
            let mut root: Map<String, Value> = other.into_iter().collect();
            if let Some(servers) = servers {
                root.insert(
                    "mcpServers".into(),
                    Value::Object(servers.into_iter().collect()),
                );
            }
            Value::Object(root)
        })
}

/// One line of a TOML file that is not about MCP servers.
fn toml_line() -> impl Strategy<Value = String> {
    prop_oneof![
        ("[a-z]{1,6}", any::<i32>()).prop_map(|(k, v)| format!("{k} = {v}")),
        ("[a-z]{1,6}", "[a-z é]{0,8}").prop_map(|(k, v)| format!("{k}=\"{v}\"   # note")),
        ("[a-z]{1,6}", "[a-z]{0,8}").prop_map(|(k, v)| format!("  {k} = '{v}'")),
        "[a-z ]{0,12}".prop_map(|c| format!("# {c}")),
        Just(String::new()),
    ]
}

/// Where other servers are, if anywhere: `[mcp_servers.x]` tables, an `[mcp_servers]` header
/// with inline servers, or one inline table at the top.
fn toml_servers() -> impl Strategy<Value = String> {
    let name = "[a-z]{1,8}";
    prop_oneof![
        Just(String::new()),
        prop::collection::btree_set(name, 1..3).prop_map(|names| {
            names
                .iter()
                .map(|n| format!("[mcp_servers.{n}]\ncommand = \"{n}-mcp\"\nargs = [ \"-y\" ]\n"))
                .collect::<Vec<_>>()
                .join("\n")
        }),
        prop::collection::btree_set(name, 0..3).prop_map(|names| {
            let inline: String = names
                .iter()
                .map(|n| format!("{n} = {{ command = \"{n}\" }}\n"))
                .collect();
            format!("[mcp_servers]\n{inline}")
        }),
    ]
}

/// A config.toml: lines at the top, other servers, another table; `\n` or `\r\n`, with or
/// without a final line end.
fn codex_config() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(toml_line(), 0..4),
        toml_servers(),
        prop::collection::vec(toml_line(), 0..3),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(top, servers, tail, crlf, unended)| {
            let mut text = String::new();
            for line in top {
                text.push_str(&line);
                text.push('\n');
            }
            text.push_str(&servers);
            text.push_str("\n[tui]\n");
            for line in tail {
                text.push_str(&line);
                text.push('\n');
            }
            if unended {
                text.pop();
            }
            if crlf {
                text = text.replace('\n', "\r\n");
            }
            text
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn claude_settings_come_back_byte_for_byte(doc in claude_settings(), style in 0u8..5) {
        let original = layout(&doc, style);
        let dir = tmp();
        let file = file(Agent::Claude, dir.path());
        write(&file.path, &original);
        let installed = install(&file);
        let parsed: Value = serde_json::from_str(&installed)
            .unwrap_or_else(|e| panic!("not JSON after install ({e}): {installed}"));
        prop_assert_eq!(
            &parsed["mcpServers"]["greenlight"],
            &serde_json::json!({"type": "stdio", "command": "greenlight", "args": ["mcp"]})
        );
        let mut without = parsed.clone();
        if let Some(servers) = without.get_mut("mcpServers").and_then(Value::as_object_mut) {
            servers.remove("greenlight");
            if servers.is_empty() && doc.get("mcpServers").is_none() {
                without.as_object_mut().map(|o| o.remove("mcpServers"));
            }
        }
        prop_assert_eq!(&without, &doc, "every other value stays");
        uninstall(&file);
        prop_assert_eq!(read(&file.path), original);
    }

    #[test]
    fn codex_config_comes_back_byte_for_byte(original in codex_config()) {
        prop_assume!(original.parse::<toml::Table>().is_ok());
        let dir = tmp();
        let file = file(Agent::Codex, dir.path());
        write(&file.path, &original);
        let installed = install(&file);
        let mut parsed: toml::Table = installed
            .parse()
            .unwrap_or_else(|e| panic!("not TOML after install ({e}): {installed}"));
        let servers = parsed
            .get_mut("mcp_servers")
            .and_then(toml::Value::as_table_mut)
            .unwrap_or_else(|| panic!("{installed}"));
        let ours = servers.remove("greenlight").unwrap_or_else(|| panic!("{installed}"));
        let want: toml::Table = "command = \"greenlight\"\nargs = [\"mcp\"]\ntool_timeout_sec = 1234\n"
            .parse()
            .unwrap_or_default();
        prop_assert_eq!(ours, toml::Value::Table(want));
        let before: toml::Table = original.parse().unwrap_or_default();
        if servers.is_empty() && !before.contains_key("mcp_servers") {
            parsed.remove("mcp_servers");
        }
        prop_assert_eq!(&parsed, &before, "every other value stays");
        uninstall(&file);
        prop_assert_eq!(read(&file.path), original);
    }
}
