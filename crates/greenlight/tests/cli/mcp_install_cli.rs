//! `greenlight mcp install|uninstall` through the real binary, in temporary directories, on
//! settings files laid out the way people and the agents leave them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use greenlight_testkit::files::{read_file, temp_dir, write_file};
use greenlight_testkit::{Cli, greenlight_bin, real_agent_cli};

/// The binary with a private HOME (so user scope never touches the real one) and no agent
/// config overrides from the caller's environment.
fn cli(home: &Path, cwd: &Path, args: &[&str]) -> Cli {
    let mut all = vec!["mcp"];
    all.extend_from_slice(args);
    Cli::new(all)
        .current_dir(cwd)
        .env("HOME", home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
}

/// `mcp VERB AGENT --scope user` for the user whose HOME is `home`, run from there: no
/// verify.yaml, so Codex's limit is the default.
fn user_scope(home: &Path, verb: &str, agent: &str) -> Cli {
    cli(home, home, &[verb, agent, "--scope", "user"])
}

fn backup(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".greenlight.bak");
    PathBuf::from(name)
}

/// This binary's absolute path, as a user-scope entry names it.
fn exe() -> String {
    std::fs::canonicalize(greenlight_bin())
        .unwrap_or_else(|e| panic!("{e}"))
        .display()
        .to_string()
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0)
}

fn git_init(dir: &Path) {
    let git = Command::new("git").arg("init").arg("-q").arg(dir).status();
    assert!(git.is_ok_and(|s| s.success()), "git init must work here");
}

/// A `~/.claude.json` as Claude Code keeps it: its own state beside the settings, per-project
/// `mcpServers` that are not the user-level ones, another user-level server, and no final
/// newline (Claude Code writes none). Odd bits on purpose: a tab-indented line, inline objects,
/// a `\u` escape, a number past f64's precision, a decimal with a trailing zero.
const CLAUDE_JSON: &str = "{
  \"numStartups\": 42,
  \"installMethod\": \"native\",
  \"autoUpdates\": false,
  \"tipsHistory\": {\"new-user-warmup\": 7, \"memory-command\": 3},
  \"firstStartTime\": \"2026-01-05T09:12:44.123Z\",
  \"userID\": \"9c1e2b4d0f6a8e3b7c5d1f2a4b6c8e0d\",
  \"cachedGrowthBookFeatures\": {\"ratio\": 1.50, \"big\": 123456789012345678901234567890},
  \"projects\": {
    \"/home/dev/app\": {
      \"allowedTools\": [],
      \"history\": [{\"display\": \"fix the caf\\u00e9 test\", \"pastedContents\": {}}],
      \"mcpServers\": {},
      \"hasTrustDialogAccepted\": true
    }
  },
  \"mcpServers\": {
    \"docs\": {
      \"type\": \"stdio\",
      \"command\": \"npx\",
      \"args\": [\"-y\", \"@example/docs-mcp\"],
      \"env\": {\"DOCS_TOKEN\": \"x\"}
    }
  },
\t\"oauthAccount\": {\"emailAddress\": \"dev@example.com\"},
  \"lastReleaseNotesSeen\": \"2.1.197\"
}";

/// The end of the `docs` server in [`CLAUDE_JSON`], where greenlight's entry goes after.
const AFTER_DOCS: &str = "\"env\": {\"DOCS_TOKEN\": \"x\"}\n    }";

/// A Codex `config.toml` edited by hand: comments, other servers as tables (one indented),
/// inline tables, literal strings, odd spacing, a float, projects and a trailing comment.
const CONFIG_TOML: &str = r#"# Codex settings, edited by hand.
model = "gpt-5-codex"
model_reasoning_effort="high"   # fast enough

approval_policy = 'on-request'

[mcp_servers.docs]
command = "npx"
args = [ "-y",  "@example/docs-mcp" ]   # pinned below
env = { DOCS_TOKEN = "x", "quoted key" = '1' }

  [mcp_servers.search]
  command="search-mcp"
  startup_timeout_sec = 20
  tool_timeout_sec = 120.5

[projects."/home/dev/app"]
trust_level = "trusted"

[tui]
notifications = [ "agent-turn-complete" ]
# the end
"#;

/// Where greenlight's table goes in [`CONFIG_TOML`]: after the last `mcp_servers` table.
const AFTER_SEARCH: &str = "  tool_timeout_sec = 120.5\n";

fn codex_table(command: &str, timeout: u64) -> String {
    format!(
        "\n[mcp_servers.greenlight]\ncommand = \"{command}\"\nargs = [\"mcp\"]\ntool_timeout_sec = {timeout}\n"
    )
}

#[test]
fn claude_project_install_writes_what_claude_mcp_add_writes_and_is_idempotent() {
    let home = temp_dir();
    let repo = temp_dir();
    let out = cli(home.path(), repo.path(), &["install", "--claude"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let path = repo.path().join(".mcp.json");
    // `claude mcp add --scope project greenlight -- greenlight mcp` writes these keys in this
    // order (and an empty `env`, which greenlight leaves out).
    assert_eq!(
        read_file(&path),
        "{\n  \"mcpServers\": {\n    \"greenlight\": {\n      \"type\": \"stdio\",\n      \"command\": \"greenlight\",\n      \"args\": [\n        \"mcp\"\n      ]\n    }\n  }\n}\n"
    );
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("{}: added the greenlight MCP server", path.display())
    );
    assert!(
        out.stdout.contains("approve `greenlight`"),
        "Claude Code asks before it starts a project's servers: {}",
        out.stdout
    );
    assert!(!repo.path().join(".codex").exists(), "--claude only");
    assert!(!backup(&path).exists(), "no file before, no backup");
    assert_eq!(mode(&path), 0o644);

    let first = read_file(&path);
    let again = cli(home.path(), repo.path(), &["install", "--claude"]).run();
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(
        again.stdout,
        format!(
            "{}: unchanged (the greenlight MCP server is already there)\n",
            path.display()
        )
    );
    assert_eq!(read_file(&path), first);
}

#[test]
fn both_agents_by_default_and_uninstall_leaves_nothing_behind() {
    let home = temp_dir();
    let repo = temp_dir();
    git_init(repo.path());
    let sub = repo.path().join("crates/deep");
    std::fs::create_dir_all(&sub).unwrap_or_else(|e| panic!("{e}"));
    let out = cli(home.path(), &sub, &["install"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mcp_json = repo.path().join(".mcp.json");
    let config = repo.path().join(".codex/config.toml");
    assert_eq!(
        json(&read_file(&mcp_json))["mcpServers"]["greenlight"],
        serde_json::json!({"type": "stdio", "command": "greenlight", "args": ["mcp"]})
    );
    assert_eq!(read_file(&config), codex_table("greenlight", 1800)[1..]);
    assert!(
        out.stdout.contains("only in a project you trust"),
        "{}",
        out.stdout
    );
    assert!(!sub.join(".mcp.json").exists(), "the top of the worktree");

    let out = cli(home.path(), &sub, &["uninstall"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    for path in [&mcp_json, &config] {
        assert!(
            out.stdout.contains(&format!(
                "{}: removed the greenlight MCP server; the file held nothing else and greenlight had created it, so the file is gone",
                path.display()
            )),
            "{}",
            out.stdout
        );
        assert!(!path.exists() && !backup(path).exists());
    }
    let mut left: Vec<String> = std::fs::read_dir(repo.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [".git", "crates"], "the .codex directory went too");

    let out = cli(home.path(), &sub, &["uninstall"]).run();
    assert_eq!(out.code, 0);
    assert!(
        out.stdout
            .contains("unchanged (no greenlight MCP server in it)"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_real_claude_json_keeps_every_other_byte_and_uninstall_restores_it() {
    let home = temp_dir();
    let path = home.path().join(".claude.json");
    write_file(&path, CLAUDE_JSON);
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .unwrap_or_else(|e| panic!("{e}"));
    let out = user_scope(home.path(), "install", "--claude").run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let command = serde_json::to_string(&exe()).unwrap_or_default();
    let entry = format!(
        ",\n    \"greenlight\": {{\n      \"type\": \"stdio\",\n      \"command\": {command},\n      \"args\": [\n        \"mcp\"\n      ]\n    }}"
    );
    let expected = CLAUDE_JSON.replacen(AFTER_DOCS, &format!("{AFTER_DOCS}{entry}"), 1);
    assert_eq!(read_file(&path), expected);
    assert_eq!(
        out.stdout.lines().take(2).collect::<Vec<_>>(),
        [
            format!("{}: added the greenlight MCP server", path.display()),
            format!("the previous file is kept as {}", backup(&path).display()),
        ]
    );
    assert_eq!(read_file(&backup(&path)), CLAUDE_JSON);
    assert_eq!(mode(&path), 0o600, "Claude Code's file stays private");
    assert_eq!(mode(&backup(&path)), 0o600, "and so does its copy");

    let again = user_scope(home.path(), "install", "--claude").run();
    assert_eq!(again.code, 0);
    assert_eq!(read_file(&path), expected, "idempotent");

    let out = user_scope(home.path(), "uninstall", "--claude").run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with(&format!(
            "{}: removed the greenlight MCP server\n",
            path.display()
        )),
        "{}",
        out.stdout
    );
    assert_eq!(read_file(&path), CLAUDE_JSON);
    assert_eq!(read_file(&backup(&path)), CLAUDE_JSON, "the one backup");
}

/// Whether `mcpServers` goes with greenlight's entry depends on who made it: the object
/// greenlight added goes, the (empty) one Claude Code leaves after `claude mcp remove` stays.
#[test]
fn uninstall_removes_the_servers_object_only_when_greenlight_added_it() {
    let home = temp_dir();
    let path = home.path().join(".claude.json");
    for original in [
        "{\n  \"numStartups\": 1,\n  \"userID\": \"u\"\n}",
        "{\n  \"numStartups\": 1,\n  \"mcpServers\": {}\n}",
        "{\"mcpServers\":{},\"numStartups\":1}",
    ] {
        write_file(&path, original);
        let _ = std::fs::remove_file(backup(&path));
        let out = user_scope(home.path(), "install", "--claude").run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        let installed = read_file(&path);
        assert_eq!(
            json(&installed)["mcpServers"]["greenlight"]["args"],
            serde_json::json!(["mcp"]),
            "{installed}"
        );
        let out = user_scope(home.path(), "uninstall", "--claude").run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(read_file(&path), original, "after {installed}");
    }
}

/// Installs greenlight into a user-level Codex config holding `original` (in a fresh
/// CODEX_HOME), checks that the backup holds `original`, that a second install changes nothing
/// and that an uninstall gives back `original`; returns the installed text.
fn codex_round_trip(original: &str) -> String {
    let home = temp_dir();
    let codex_home = temp_dir();
    let path = codex_home.path().join("config.toml");
    write_file(&path, original);
    let run = |verb: &str| {
        user_scope(home.path(), verb, "--codex")
            .env("CODEX_HOME", codex_home.path())
            .run()
    };
    let out = run("install");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let installed = read_file(&path);
    assert_eq!(read_file(&backup(&path)), original);
    let out = run("install");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(read_file(&path), installed, "idempotent");
    let out = run("uninstall");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(read_file(&path), original, "via {installed:?}");
    installed
}

#[test]
fn a_codex_config_keeps_its_comments_tables_and_layout() {
    for newline in ["\n", "\r\n"] {
        let original = CONFIG_TOML.replace('\n', newline);
        let installed = codex_round_trip(&original);
        let at = AFTER_SEARCH.replace('\n', newline);
        let table = codex_table(&exe(), 1800).replace('\n', newline);
        assert_eq!(
            installed,
            original.replacen(&at, &format!("{at}{table}"), 1)
        );
    }
}

#[test]
fn a_codex_config_without_servers_gets_back_its_exact_bytes() {
    for original in [
        "model = \"o3\"\n",
        "model = \"o3\"\n\n[tui]\nnotifications = true\n\n\n",
        "model = \"o3\"",
        "# nothing but a comment\n",
        "",
        "[mcp_servers]\n",
        "mcp_servers = { docs = { command = \"npx\" } }\n",
    ] {
        let installed = codex_round_trip(original);
        assert!(
            installed.contains("args = [\"mcp\"]"),
            "{original:?} -> {installed:?}"
        );
    }
}

#[test]
fn an_existing_entry_is_updated_in_place_keeping_the_users_keys() {
    let home = temp_dir();
    let repo = temp_dir();
    let config = repo.path().join(".codex/config.toml");
    write_file(
        &config,
        "[mcp_servers.greenlight]\ncommand = \"/old/greenlight\"   # from the last machine\nargs = [\"serve\"]\nstartup_timeout_sec = 20\ntool_timeout_sec = 60\n\n[mcp_servers.after]\ncommand = \"y\"\n",
    );
    let mcp_json = repo.path().join(".mcp.json");
    write_file(
        &mcp_json,
        "{\"mcpServers\": {\"greenlight\": {\"command\": \"/old/greenlight\", \"env\": {\"GREENLIGHT_STATE\": \"/s.db\"}, \"args\": [\"serve\"]}}}\n",
    );
    let out = cli(home.path(), repo.path(), &["install", "--timeout", "2400"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        read_file(&config),
        "[mcp_servers.greenlight]\ncommand = \"greenlight\"   # from the last machine\nargs = [\"mcp\"]\nstartup_timeout_sec = 20\ntool_timeout_sec = 2400\n\n[mcp_servers.after]\ncommand = \"y\"\n"
    );
    assert_eq!(
        read_file(&mcp_json),
        "{\"mcpServers\": {\"greenlight\": {\"command\": \"greenlight\", \"env\": {\"GREENLIGHT_STATE\": \"/s.db\"}, \"args\": [\"mcp\"],\"type\": \"stdio\"}}}\n"
    );
    for path in [&mcp_json, &config] {
        assert!(
            out.stdout.contains(&format!(
                "{}: updated the greenlight MCP server",
                path.display()
            )),
            "{}",
            out.stdout
        );
    }
    assert!(
        !out.stderr.contains("note:"),
        "--timeout is taken as given: {}",
        out.stderr
    );
}

#[test]
fn invalid_json_or_toml_is_refused_with_line_and_column_and_nothing_is_written() {
    let home = temp_dir();
    let repo = temp_dir();
    let mcp_json = repo.path().join(".mcp.json");
    let config = repo.path().join(".codex/config.toml");
    let good_json = "{\"mcpServers\": {}}\n";
    let bad_toml = "model = \"o3\"\n[mcp_servers.docs\ncommand = \"npx\"\n";
    write_file(&mcp_json, good_json);
    write_file(&config, bad_toml);
    for verb in ["install", "uninstall"] {
        let out = cli(home.path(), repo.path(), &[verb]).run();
        assert_eq!(out.code, 2, "{verb}: {}", out.stdout);
        assert_eq!(
            out.stderr,
            format!(
                "greenlight mcp {verb}: {}:2:18: not valid TOML (unclosed table, expected `]`); fix the file by hand (greenlight left it untouched) and run the command again\ngreenlight mcp {verb}: nothing was written\n",
                config.display()
            )
        );
        assert_eq!(out.stdout, "");
        assert_eq!(read_file(&config), bad_toml);
        assert_eq!(read_file(&mcp_json), good_json, "the good file waits too");
        assert!(!backup(&config).exists() && !backup(&mcp_json).exists());
    }

    let bad_json = "{\n  \"mcpServers\": {\n    \"docs\": {\"command\": \"npx\",}\n  }\n}\n";
    write_file(&mcp_json, bad_json);
    let out = cli(home.path(), repo.path(), &["install", "--claude"]).run();
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.starts_with(&format!(
            "greenlight mcp install: {}:3:31: not valid JSON",
            mcp_json.display()
        )),
        "{}",
        out.stderr
    );
    assert_eq!(read_file(&mcp_json), bad_json);

    // A file mixing \r\n and \n cannot be written back byte for byte: refused too.
    let mixed = "model = \"o3\"\r\n[tui]\nx = 1\n";
    write_file(&config, mixed);
    let out = cli(home.path(), repo.path(), &["install", "--codex"]).run();
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("mixes \\r\\n and \\n line ends"),
        "{}",
        out.stderr
    );
    assert_eq!(read_file(&config), mixed);
}

#[test]
fn server_lists_of_the_wrong_type_are_refused_naming_where() {
    let home = temp_dir();
    let repo = temp_dir();
    let mcp_json = repo.path().join(".mcp.json");
    let config = repo.path().join(".codex/config.toml");
    let cases: [(&Path, &str, &str, &str); 5] = [
        (
            &mcp_json,
            "{\n  \"mcpServers\": [\"greenlight\"]\n}\n",
            "--claude",
            ":2:17: `mcpServers` must be an object, found a list",
        ),
        (
            &mcp_json,
            "{\"mcpServers\": {\"greenlight\": \"greenlight mcp\"}}",
            "--claude",
            ":1:31: `mcpServers.greenlight` must be an object, found a string",
        ),
        (
            &config,
            "model = \"o3\"\nmcp_servers = \"none\"\n",
            "--codex",
            ":2:1: `mcp_servers` must be a table, found a string",
        ),
        (
            &config,
            "[[mcp_servers]]\nname = \"docs\"\n",
            "--codex",
            ":1:3: `mcp_servers` must be a table, found an array of tables",
        ),
        (
            &config,
            "[mcp_servers]\ndocs = { command = \"npx\" }\ngreenlight = [\"mcp\"]\n",
            "--codex",
            ":3:1: `mcp_servers.greenlight` must be a table, found an array",
        ),
    ];
    for (path, text, agent, message) in cases {
        write_file(path, text);
        for verb in ["install", "uninstall"] {
            let out = cli(home.path(), repo.path(), &[verb, agent]).run();
            assert_eq!(out.code, 2, "{text}");
            assert!(
                out.stderr.starts_with(&format!(
                    "greenlight mcp {verb}: {}{message}",
                    path.display()
                )),
                "{text}: {}",
                out.stderr
            );
            assert_eq!(read_file(path), text);
            assert!(!backup(path).exists());
        }
    }
}

#[test]
fn dry_run_prints_a_diff_and_writes_nothing() {
    let home = temp_dir();
    let repo = temp_dir();
    let config = repo.path().join(".codex/config.toml");
    write_file(&config, CONFIG_TOML);
    let out = cli(
        home.path(),
        repo.path(),
        &["install", "--dry-run", "--timeout", "900"],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mcp_json = repo.path().join(".mcp.json");
    let expected = format!(
        "--- /dev/null
+++ {mcp}
@@ -0,0 +1,11 @@
+{{
+  \"mcpServers\": {{
+    \"greenlight\": {{
+      \"type\": \"stdio\",
+      \"command\": \"greenlight\",
+      \"args\": [
+        \"mcp\"
+      ]
+    }}
+  }}
+}}
--- {toml}
+++ {toml}
@@ -14,6 +14,11 @@
   startup_timeout_sec = 20
   tool_timeout_sec = 120.5
 
+[mcp_servers.greenlight]
+command = \"greenlight\"
+args = [\"mcp\"]
+tool_timeout_sec = 900
+
 [projects.\"/home/dev/app\"]
 trust_level = \"trusted\"
 
",
        mcp = mcp_json.display(),
        toml = config.display()
    );
    assert_eq!(out.stdout, expected);
    assert!(!mcp_json.exists());
    assert_eq!(read_file(&config), CONFIG_TOML);
    assert!(!backup(&config).exists());

    let out = cli(home.path(), repo.path(), &["uninstall", "--dry-run"]).run();
    assert_eq!(out.code, 0);
    assert_eq!(
        out.stdout,
        format!(
            "{}: nothing to change\n{}: nothing to change\n",
            mcp_json.display(),
            config.display()
        )
    );
}

#[test]
fn the_backup_is_made_once_and_never_replaced() {
    let home = temp_dir();
    let repo = temp_dir();
    let config = repo.path().join(".codex/config.toml");
    write_file(&config, CONFIG_TOML);
    let install = |timeout: &str| {
        cli(
            home.path(),
            repo.path(),
            &["install", "--codex", "--timeout", timeout],
        )
        .run()
    };
    let out = install("100");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "the previous file is kept as {}",
            backup(&config).display()
        )),
        "{}",
        out.stdout
    );
    let out = install("200");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "{}: updated the greenlight MCP server\n{} (the file as it was before greenlight first changed it) is kept as it was",
            config.display(),
            backup(&config).display()
        )),
        "{}",
        out.stdout
    );
    assert!(read_file(&config).contains("tool_timeout_sec = 200\n"));
    assert_eq!(read_file(&backup(&config)), CONFIG_TOML);
}

#[test]
fn symlinks_out_of_the_project_and_at_the_backup_path_are_refused() {
    let home = temp_dir();
    let repo = temp_dir();
    // `.mcp.json` pointing at a file of the user's, and `.codex` at a directory of theirs.
    let victim = home.path().join("victim.json");
    write_file(&victim, "{}\n");
    std::os::unix::fs::symlink(&victim, repo.path().join(".mcp.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    let elsewhere = home.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&elsewhere, repo.path().join(".codex"))
        .unwrap_or_else(|e| panic!("{e}"));
    for agent in ["--claude", "--codex"] {
        let out = cli(home.path(), repo.path(), &["install", agent]).run();
        assert_eq!(out.code, 2, "{agent}: {}", out.stdout);
        assert!(
            out.stderr.contains("outside the project") && out.stderr.contains("--scope user"),
            "{}",
            out.stderr
        );
    }
    assert_eq!(read_file(&victim), "{}\n");
    assert!(!elsewhere.join("config.toml").exists());

    // A backup path that is a symlink is never written through.
    let repo = temp_dir();
    let mcp_json = repo.path().join(".mcp.json");
    write_file(&mcp_json, "{\"mcpServers\": {}}\n");
    let precious = repo.path().join("precious.txt");
    write_file(&precious, "precious\n");
    std::os::unix::fs::symlink(&precious, backup(&mcp_json)).unwrap_or_else(|e| panic!("{e}"));
    let out = cli(home.path(), repo.path(), &["install", "--claude"]).run();
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(
        out.stderr
            .contains(".mcp.json.greenlight.bak exists and is not a regular file"),
        "{}",
        out.stderr
    );
    assert_eq!(read_file(&precious), "precious\n");
    assert_eq!(read_file(&mcp_json), "{\"mcpServers\": {}}\n");
}

/// A user's own settings may be a symlink into a dotfiles repository: it stays one.
#[test]
fn a_user_file_that_is_a_symlink_stays_a_symlink() {
    let home = temp_dir();
    let dotfiles = temp_dir();
    let real = dotfiles.path().join("claude.json");
    write_file(&real, "{\"numStartups\": 3}");
    let link = home.path().join(".claude.json");
    std::os::unix::fs::symlink(&real, &link).unwrap_or_else(|e| panic!("{e}"));
    let out = user_scope(home.path(), "install", "--claude").run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(link.is_symlink());
    assert_eq!(
        json(&read_file(&real))["mcpServers"]["greenlight"]["command"],
        exe()
    );
    assert_eq!(read_file(&backup(&real)), "{\"numStartups\": 3}");
}

#[test]
fn a_read_only_file_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let home = temp_dir();
    let repo = temp_dir();
    let config = repo.path().join(".codex/config.toml");
    write_file(&config, "model = \"o3\"\n");
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o444))
        .unwrap_or_else(|e| panic!("{e}"));
    let out = cli(home.path(), repo.path(), &["install", "--codex"]).run();
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("config.toml is read-only") && out.stderr.contains("chmod u+w"),
        "{}",
        out.stderr
    );
    assert_eq!(read_file(&config), "model = \"o3\"\n");
    assert!(!backup(&config).exists());
}

/// Codex gives a tool call 60 s unless told otherwise; a run of the gates can take much longer.
#[test]
fn tool_timeout_sec_fits_the_declared_gates() {
    let home = temp_dir();
    let repo = temp_dir();
    git_init(repo.path());
    write_file(
        &repo.path().join(".commandmate/verify.yaml"),
        "version: 1\ngates:\n  - id: unit\n    command: cargo test\n    timeoutSec: 900\n    retryOnFail: 1\n  - id: lint\n    command: cargo clippy\n  - id: fmt\n    command: cargo fmt --check\n    timeoutSec: 30\n    retryOnFail: 1\n",
    );
    let sub = repo.path().join("src");
    std::fs::create_dir_all(&sub).unwrap_or_else(|e| panic!("{e}"));
    let out = cli(home.path(), &sub, &["install", "--codex"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    // unit: 2 attempts × (900 s + 8 s), lint: 600 s (the default) + 8 s, fmt: 2 × (30 + 8),
    // plus 60 s: 1816 + 608 + 76 + 60. The 8 s per attempt are the kill grace (5 s), the
    // settle time (0.1 s) and the output drain (2 s) of a gate that hits its limit, rounded up.
    let config = repo.path().join(".codex/config.toml");
    assert_eq!(read_file(&config), codex_table("greenlight", 2560)[1..]);
    assert!(
        out.stderr.starts_with(&format!(
            "note: Codex's tool_timeout_sec is 2560 s: what the 3 gates of {} can take, retries and a margin included\n",
            repo.path().join(".commandmate/verify.yaml").display()
        )),
        "{}",
        out.stderr
    );

    // A user-level entry serves every project: never less than the default.
    let codex_home = temp_dir();
    write_file(
        &repo.path().join(".commandmate/verify.yaml"),
        "version: 1\ngates:\n  - id: fmt\n    command: cargo fmt --check\n    timeoutSec: 30\n",
    );
    let out = cli(
        home.path(),
        repo.path(),
        &["install", "--codex", "--scope", "user"],
    )
    .env("CODEX_HOME", codex_home.path())
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        read_file(&codex_home.path().join("config.toml")).contains("tool_timeout_sec = 1800\n")
    );
    assert!(
        out.stderr
            .contains("need 98 s, and a user-level entry serves every project"),
        "{}",
        out.stderr
    );
    // The project entry follows the gates down.
    let out = cli(home.path(), repo.path(), &["install", "--codex"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(read_file(&config).contains("tool_timeout_sec = 98\n"));
}

#[test]
fn without_gates_the_timeout_is_the_default_and_a_note_says_why() {
    let home = temp_dir();
    let repo = temp_dir();
    git_init(repo.path());
    let out = cli(home.path(), repo.path(), &["install", "--codex"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let config = repo.path().join(".codex/config.toml");
    assert!(read_file(&config).contains("tool_timeout_sec = 1800\n"));
    assert!(
        out.stderr.starts_with(&format!(
            "note: no .greenlight/verify.yaml or .commandmate/verify.yaml in {} or above it in the worktree, so Codex's tool_timeout_sec is the default 1800 s",
            std::fs::canonicalize(repo.path()).unwrap_or_default().display()
        )),
        "{}",
        out.stderr
    );

    // A verify.yaml that does not parse: the default, a note naming the line, and exit 0.
    write_file(
        &repo.path().join(".commandmate/verify.yaml"),
        "version: 1\ngates:\n  - id: unit\n    command: cargo test\n    timeoutSec: soon\n",
    );
    let out = cli(
        home.path(),
        repo.path(),
        &["install", "--codex", "--timeout", "5"],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        !out.stderr.contains("note:"),
        "--timeout given: {}",
        out.stderr
    );
    let out = cli(home.path(), repo.path(), &["install", "--codex"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("Codex's tool_timeout_sec is the default 1800 s: the gates cannot be read (")
            && out
                .stderr
                .contains(".commandmate/verify.yaml:5: timeoutSec must be an integer"),
        "{}",
        out.stderr
    );
    assert!(read_file(&config).contains("tool_timeout_sec = 1800\n"));

    // Claude Code alone has no such limit to set: no note.
    let out = cli(home.path(), repo.path(), &["install", "--claude"]).run();
    assert_eq!(out.code, 0);
    assert!(!out.stderr.contains("note:"), "{}", out.stderr);
}

#[test]
fn user_scope_follows_home_claude_config_dir_and_codex_home() {
    let home = temp_dir();
    let work = temp_dir();
    let out = cli(home.path(), work.path(), &["install", "--scope", "user"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let claude = home.path().join(".claude.json");
    let codex = home.path().join(".codex/config.toml");
    assert_eq!(
        json(&read_file(&claude)),
        serde_json::json!({"mcpServers": {"greenlight": {"type": "stdio", "command": exe(), "args": ["mcp"]}}})
    );
    assert_eq!(read_file(&codex), codex_table(&exe(), 1800)[1..]);
    assert_eq!((mode(&claude), mode(&codex)), (0o600, 0o600));
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    let left: Vec<_> = std::fs::read_dir(work.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .collect();
    assert!(left.is_empty(), "the project is untouched");

    let claude_dir = temp_dir();
    let codex_home = temp_dir();
    let out = cli(home.path(), work.path(), &["install", "--scope", "user"])
        .env("CLAUDE_CONFIG_DIR", claude_dir.path())
        .env("CODEX_HOME", codex_home.path())
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(claude_dir.path().join(".claude.json").is_file());
    assert!(codex_home.path().join("config.toml").is_file());

    // Uninstall takes out what it put in, and leaves the directories the user named.
    let out = cli(home.path(), work.path(), &["uninstall", "--scope", "user"])
        .env("CLAUDE_CONFIG_DIR", claude_dir.path())
        .env("CODEX_HOME", codex_home.path())
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!claude_dir.path().join(".claude.json").exists());
    assert!(!codex_home.path().join("config.toml").exists());
    assert!(claude_dir.path().is_dir() && codex_home.path().is_dir());
}

#[test]
fn a_custom_command_is_the_program_and_a_missing_greenlight_on_path_is_named() {
    let home = temp_dir();
    let repo = temp_dir();
    let out = cli(
        home.path(),
        repo.path(),
        &["install", "--claude", "--command", "/opt/gl/greenlight"],
    )
    .env("PATH", "/nonexistent")
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        json(&read_file(&repo.path().join(".mcp.json")))["mcpServers"]["greenlight"],
        serde_json::json!({"type": "stdio", "command": "/opt/gl/greenlight", "args": ["mcp"]})
    );
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);

    let repo = temp_dir();
    let out = cli(home.path(), repo.path(), &["install", "--claude"])
        .env("PATH", "/nonexistent")
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "warning: `greenlight` is not on PATH, so the agent cannot run `greenlight mcp` as written"
        ) && out.stderr.contains("--scope user"),
        "{}",
        out.stderr
    );
}

/// Runs a real agent CLI in `cwd` with a private HOME and config directories.
fn agent(name: &str, home: &Path, cwd: &Path, args: &[&str]) -> greenlight_testkit::Run {
    let mut cmd = Command::new(real_agent_cli(name));
    cmd.args(args)
        .current_dir(cwd)
        .env("HOME", home)
        .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
        .env("CODEX_HOME", home.join(".codex"))
        .env("NO_COLOR", "1");
    Cli::from_command(cmd).within(Duration::from_secs(90)).run()
}

/// The agents themselves read back what greenlight wrote: Claude Code's `mcp get` and Codex's
/// `mcp get --json` show greenlight's server with its command and arguments, at both scopes.
/// Claude Code does not start a project's server before it is approved; at user scope it tries
/// to start it, which may or may not answer, so only the configuration lines are checked.
#[test]
#[ignore = "needs the claude and codex CLIs: run scripts/test"]
fn the_real_agent_clis_read_back_the_entries() {
    let home = temp_dir();
    let repo = temp_dir();
    git_init(repo.path());
    let root = std::fs::canonicalize(repo.path()).unwrap_or_else(|e| panic!("{e}"));
    let gl = |args: &[&str]| {
        let out = Cli::new([&["mcp"][..], args].concat())
            .current_dir(&root)
            .env("HOME", home.path())
            .env("CLAUDE_CONFIG_DIR", home.path().join(".claude"))
            .env("CODEX_HOME", home.path().join(".codex"))
            .run();
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    };
    let claude_get = || {
        let out = agent("claude", home.path(), &root, &["mcp", "get", "greenlight"]);
        format!("{}{}", out.stdout, out.stderr)
    };
    let codex_get = || {
        let out = agent(
            "codex",
            home.path(),
            &root,
            &["mcp", "get", "greenlight", "--json"],
        );
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        json(&out.stdout)
    };

    // Project scope. Codex reads a project's .codex/config.toml only once the project is
    // trusted, which its own user-level config records.
    gl(&["install", "--timeout", "2400"]);
    let shown = claude_get();
    assert!(
        shown.contains("Scope: Project config")
            && shown.contains("Type: stdio")
            && shown.contains("Command: greenlight\n")
            && shown.contains("Args: mcp\n"),
        "{shown}"
    );
    let trust = format!(
        "[projects.{}]\ntrust_level = \"trusted\"\n",
        serde_json::to_string(&root.display().to_string()).unwrap_or_default()
    );
    write_file(&home.path().join(".codex/config.toml"), &trust);
    let project = codex_get();
    assert_eq!(project["transport"]["command"], "greenlight");
    assert_eq!(project["transport"]["args"], serde_json::json!(["mcp"]));
    assert_eq!(project["tool_timeout_sec"], 2400.0);

    // User scope, alone.
    gl(&["uninstall"]);
    gl(&["install", "--scope", "user", "--timeout", "3600"]);
    let shown = claude_get();
    assert!(
        shown.contains("Scope: User config")
            && shown.contains(&format!("Command: {}\n", exe()))
            && shown.contains("Args: mcp\n"),
        "{shown}"
    );
    let user = codex_get();
    assert_eq!(user["transport"]["command"], exe());
    assert_eq!(user["transport"]["args"], serde_json::json!(["mcp"]));
    assert_eq!(user["tool_timeout_sec"], 3600.0);
    assert!(
        read_file(&home.path().join(".codex/config.toml")).starts_with(&trust),
        "the user's own tables stay first"
    );
}
