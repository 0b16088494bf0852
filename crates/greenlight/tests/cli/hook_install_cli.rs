//! `greenlight hook install|uninstall` through the real binary, in temporary directories.

use std::path::{Path, PathBuf};
use std::process::Command;

use greenlight_testkit::files::{read_file, temp_dir, write_file};
use greenlight_testkit::{Cli, greenlight_bin};

/// The binary with a private HOME (so user scope never touches the real one) and no agent
/// config overrides from the caller's environment.
fn cli(home: &Path, cwd: &Path, args: &[&str]) -> Cli {
    Cli::new(args)
        .current_dir(cwd)
        .env("HOME", home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
}

fn backup(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".greenlight.bak");
    PathBuf::from(name)
}

const OTHER_HOOKS: &str = r#"{
  "permissions": {
    "allow": [
      "Bash(npm test:*)"
    ]
  },
  "hooks": {
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "lefthook run ai-stop"
          }
        ]
      }
    ]
  }
}
"#;

#[test]
fn claude_project_install_writes_both_events_and_is_idempotent() {
    let home = temp_dir();
    let repo = temp_dir();
    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "claude"],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let path = repo.path().join(".claude/settings.json");
    let doc: serde_json::Value =
        serde_json::from_str(&read_file(&path)).unwrap_or_else(|e| panic!("{e}"));
    for event in ["Stop", "SubagentStop"] {
        assert_eq!(
            doc["hooks"][event],
            serde_json::json!([{"hooks": [{"type": "command", "command": "greenlight hook stop", "timeout": 1800}]}]),
            "{event}"
        );
    }
    let stdout = out.stdout;
    assert!(
        stdout.starts_with("installed greenlight's Stop, SubagentStop and SessionStart hooks in "),
        "{stdout}"
    );
    assert!(stdout.contains("/hooks"), "{stdout}");

    let first = read_file(&path);
    let again = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "claude"],
    )
    .run();
    assert_eq!(again.code, 0);
    assert!(again.stdout.contains("already in"), "{}", again.stdout);
    assert_eq!(read_file(&path), first, "no duplicate, no rewrite");
}

#[test]
fn settings_with_other_hooks_keep_them_and_uninstall_restores_the_bytes() {
    let home = temp_dir();
    let repo = temp_dir();
    let path = repo.path().join(".claude/settings.json");
    write_file(&path, OTHER_HOOKS);
    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "claude"],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(read_file(&backup(&path)), OTHER_HOOKS);
    let doc: serde_json::Value =
        serde_json::from_str(&read_file(&path)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        doc["hooks"]["Stop"][0]["hooks"][0]["command"],
        "lefthook run ai-stop"
    );
    assert_eq!(
        doc["hooks"]["Stop"][1]["hooks"][0]["command"],
        "greenlight hook stop"
    );
    assert_eq!(doc["permissions"]["allow"][0], "Bash(npm test:*)");

    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "uninstall", "--agent", "claude"],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("removed greenlight's hooks from "));
    assert_eq!(read_file(&path), OTHER_HOOKS);
}

#[test]
fn an_existing_greenlight_entry_is_not_duplicated() {
    let home = temp_dir();
    let repo = temp_dir();
    let path = repo.path().join(".codex/hooks.json");
    write_file(
        &path,
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "/usr/local/bin/greenlight hook stop", "timeout": 60}]}]}}"#,
    );
    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "codex"],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc: serde_json::Value =
        serde_json::from_str(&read_file(&path)).unwrap_or_else(|e| panic!("{e}"));
    let stop = doc["hooks"]["Stop"].as_array().cloned().unwrap_or_default();
    assert_eq!(stop.len(), 1);
    assert_eq!(stop[0]["hooks"].as_array().map(Vec::len), Some(1));
    assert_eq!(stop[0]["hooks"][0]["command"], "greenlight hook stop");
    assert_eq!(stop[0]["hooks"][0]["timeout"], 1800);
    assert!(
        out.stdout.contains("trust"),
        "Codex needs the hook trusted: {}",
        out.stdout
    );
}

#[test]
fn invalid_json_is_refused_and_left_byte_identical() {
    let home = temp_dir();
    let repo = temp_dir();
    let path = repo.path().join(".claude/settings.json");
    let broken = "{\n  \"hooks\": {\n    \"Stop\": []\n  },\n}\n";
    write_file(&path, broken);
    for verb in ["install", "uninstall"] {
        let out = cli(
            home.path(),
            repo.path(),
            &["hook", verb, "--agent", "claude"],
        )
        .run();
        assert_eq!(out.code, 2, "{verb}");
        let stderr = out.stderr;
        assert!(
            stderr.starts_with(&format!("greenlight hook {verb}: "))
                && stderr.contains(".claude/settings.json:5:1: not valid JSON"),
            "{stderr}"
        );
        assert!(stderr.contains("left it untouched"), "{stderr}");
        assert_eq!(read_file(&path), broken);
        assert!(!backup(&path).exists());
    }
}

#[test]
fn dry_run_prints_a_diff_and_writes_nothing() {
    let home = temp_dir();
    let repo = temp_dir();
    let path = repo.path().join(".claude/settings.json");
    write_file(&path, OTHER_HOOKS);
    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "claude", "--dry-run"],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let diff = out.stdout;
    assert!(diff.starts_with("--- "), "{diff}");
    assert!(diff.contains("+    \"SubagentStop\": [\n"), "{diff}");
    assert!(
        diff.lines()
            .filter(|l| l.starts_with('-') && !l.starts_with("---"))
            .all(|l| l.trim() == "-}" || l.trim_end().ends_with(']')),
        "only closing lines change: {diff}"
    );
    assert_eq!(read_file(&path), OTHER_HOOKS);
    assert!(!backup(&path).exists());
}

#[test]
fn user_scope_uses_home_and_names_this_binary_by_absolute_path() {
    let home = temp_dir();
    let repo = temp_dir();
    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "codex", "--scope", "user"],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let path = home.path().join(".codex/hooks.json");
    let doc: serde_json::Value =
        serde_json::from_str(&read_file(&path)).unwrap_or_else(|e| panic!("{e}"));
    let command = doc["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let exe = std::fs::canonicalize(greenlight_bin()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(command, format!("{} hook stop", exe.display()));
    assert!(!repo.path().join(".codex").exists(), "project untouched");

    // CODEX_HOME moves the user-level file.
    let codex_home = temp_dir();
    let out = Cli::new(["hook", "install", "--agent", "codex", "--scope", "user"])
        .env("HOME", home.path())
        .env("CODEX_HOME", codex_home.path())
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(codex_home.path().join("hooks.json").is_file());
}

#[test]
fn project_scope_finds_the_top_of_the_git_worktree() {
    let home = temp_dir();
    let repo = temp_dir();
    let git = Command::new("git")
        .arg("init")
        .arg("-q")
        .arg(repo.path())
        .status();
    assert!(git.is_ok_and(|s| s.success()), "git init must work here");
    let sub = repo.path().join("crates/deep");
    std::fs::create_dir_all(&sub).unwrap_or_else(|e| panic!("{e}"));
    let out = cli(home.path(), &sub, &["hook", "install", "--agent", "claude"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(repo.path().join(".claude/settings.json").is_file());
    assert!(!sub.join(".claude").exists());
}

#[test]
fn a_custom_command_and_timeout_are_written_as_given() {
    let home = temp_dir();
    let repo = temp_dir();
    let out = cli(
        home.path(),
        repo.path(),
        &[
            "hook",
            "install",
            "--agent",
            "claude",
            "--timeout",
            "900",
            "--command",
            "greenlight hook stop --max-blocks 3",
        ],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc: serde_json::Value =
        serde_json::from_str(&read_file(&repo.path().join(".claude/settings.json")))
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        doc["hooks"]["SubagentStop"][0]["hooks"][0],
        serde_json::json!({"type": "command", "command": "greenlight hook stop --max-blocks 3", "timeout": 900})
    );
}

/// A cloned repository can ship `settings.json.greenlight.bak` as a symlink to any file the
/// user can write; the backup used to be written through it.
#[test]
fn a_symlinked_backup_path_is_refused_and_nothing_is_written_through_it() {
    let home = temp_dir();
    let repo = temp_dir();
    let path = repo.path().join(".claude/settings.json");
    write_file(&path, OTHER_HOOKS);
    let victim = repo.path().join("victim.txt");
    write_file(&victim, "precious\n");
    std::os::unix::fs::symlink(&victim, backup(&path)).unwrap_or_else(|e| panic!("{e}"));
    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "claude"],
    )
    .run();
    assert_eq!(out.code, 2, "{}", out.stdout);
    let stderr = out.stderr;
    assert!(
        stderr.contains("settings.json.greenlight.bak exists and is not a regular file"),
        "{stderr}"
    );
    assert_eq!(read_file(&victim), "precious\n");
    assert_eq!(
        read_file(&path),
        OTHER_HOOKS,
        "the settings file is untouched too"
    );
}

/// The backup of a 0600 settings file was created 0644, readable by everyone.
#[test]
fn the_backup_keeps_the_original_files_mode() {
    use std::os::unix::fs::PermissionsExt as _;
    let home = temp_dir();
    let repo = temp_dir();
    let path = repo.path().join(".claude/settings.json");
    write_file(&path, OTHER_HOOKS);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .unwrap_or_else(|e| panic!("{e}"));
    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "claude"],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0)
    };
    assert_eq!(mode(&backup(&path)), 0o600);
    assert_eq!(mode(&path), 0o600);
}

/// Large numbers lost their digits (`1.2345678901234568e+29`) and compact files came back
/// pretty-printed, so install + uninstall was not byte-identical.
#[test]
fn install_then_uninstall_is_byte_identical_for_compact_files_with_large_numbers() {
    let home = temp_dir();
    let repo = temp_dir();
    let path = repo.path().join(".claude/settings.json");
    let original = "{\"budget\":123456789012345678901234567890,\"ratio\":1.50,\"name\":\"caf\\u00e9\",\"hooks\":{\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"lefthook run ai-stop\"}]}]}}";
    write_file(&path, original);
    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "claude"],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let installed = read_file(&path);
    assert!(
        installed.starts_with("{\"budget\":123456789012345678901234567890,\"ratio\":1.50,\"name\":\"caf\\u00e9\",\"hooks\":{\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"lefthook run ai-stop\"}]},{\"hooks\":[{\"type\":\"command\",\"command\":\"greenlight hook stop\",\"timeout\":1800}]}]"),
        "{installed}"
    );
    assert!(!installed.contains('\n'), "still compact: {installed}");
    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "uninstall", "--agent", "claude"],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(read_file(&path), original);
    assert_eq!(
        read_file(&backup(&path)),
        original,
        "uninstall kept the install's backup of the original bytes"
    );
}

/// A 0444 settings file was replaced anyway.
#[test]
fn a_read_only_settings_file_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let home = temp_dir();
    let repo = temp_dir();
    let path = repo.path().join(".claude/settings.json");
    write_file(&path, "{}\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444))
        .unwrap_or_else(|e| panic!("{e}"));
    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "claude"],
    )
    .run();
    assert_eq!(out.code, 2);
    let stderr = out.stderr;
    assert!(
        stderr.contains("settings.json is read-only") && stderr.contains("chmod u+w"),
        "{stderr}"
    );
    assert_eq!(read_file(&path), "{}\n");
    assert!(!backup(&path).exists());
}

/// With a duplicate `hooks` key, the first copy (holding the user's own Stop hook) was
/// silently dropped.
#[test]
fn a_duplicate_hooks_key_is_refused_with_its_line() {
    let home = temp_dir();
    let repo = temp_dir();
    let path = repo.path().join(".codex/hooks.json");
    let text_before = "{\n  \"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"./mine.sh\"}]}]},\n  \"hooks\": {}\n}\n";
    write_file(&path, text_before);
    for verb in ["install", "uninstall"] {
        let out = cli(
            home.path(),
            repo.path(),
            &["hook", verb, "--agent", "codex"],
        )
        .run();
        assert_eq!(out.code, 2, "{verb}");
        let stderr = out.stderr;
        assert!(
            stderr.contains("hooks.json:3:3: the key `hooks` appears twice"),
            "{stderr}"
        );
        assert_eq!(read_file(&path), text_before);
    }
}

/// Project scope writes `greenlight hook stop`, which only works where `greenlight` is on the
/// agent's PATH: say so when it is not on ours.
#[test]
fn project_install_warns_when_greenlight_is_not_on_path() {
    let home = temp_dir();
    let repo = temp_dir();
    let empty_bin = temp_dir();
    let path_var = empty_bin.path().to_string_lossy().into_owned();
    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "claude"],
    )
    .env("PATH", &path_var)
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let stderr = out.stderr;
    assert!(
        stderr.contains("warning: `greenlight` is not on PATH") && stderr.contains("--scope user"),
        "{stderr}"
    );
    // On PATH (a symlink to this binary): no warning.
    std::os::unix::fs::symlink(greenlight_bin(), empty_bin.path().join("greenlight"))
        .unwrap_or_else(|e| panic!("{e}"));
    let repo2 = temp_dir();
    let out = cli(
        home.path(),
        repo2.path(),
        &["hook", "install", "--agent", "claude"],
    )
    .env("PATH", &path_var)
    .run();
    assert_eq!(out.code, 0);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
}

/// An install into a repository without a settings file, then an uninstall, left `{}` and a
/// `.bak` behind.
#[test]
fn uninstall_after_install_into_a_repo_without_settings_leaves_no_file() {
    let home = temp_dir();
    let repo = temp_dir();
    for agent in ["claude", "codex"] {
        let out = cli(
            home.path(),
            repo.path(),
            &["hook", "install", "--agent", agent],
        )
        .run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        let out = cli(
            home.path(),
            repo.path(),
            &["hook", "uninstall", "--agent", agent],
        )
        .run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(out.stdout.contains("the file is gone"), "{}", out.stdout);
    }
    for file in [".claude/settings.json", ".codex/hooks.json"] {
        let path = repo.path().join(file);
        assert!(!path.exists(), "{file}");
        assert!(!backup(&path).exists(), "{file}");
    }
    let left: Vec<_> = std::fs::read_dir(repo.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "nothing left behind: {left:?}");
}

/// Both agents get a SessionStart handler that records where the session's work begins.
#[test]
fn install_adds_a_session_start_handler_beside_the_stop_handlers() {
    let home = temp_dir();
    let repo = temp_dir();
    let out = cli(
        home.path(),
        repo.path(),
        &[
            "hook",
            "install",
            "--agent",
            "codex",
            "--command",
            "greenlight hook stop --state /s/state.db",
        ],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc: serde_json::Value =
        serde_json::from_str(&read_file(&repo.path().join(".codex/hooks.json")))
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        doc["hooks"]["SessionStart"],
        serde_json::json!([{"hooks": [{"type": "command", "command": "greenlight hook session-start --state /s/state.db", "timeout": 30}]}])
    );
}

/// A cloned repository can ship `.claude/settings.json` (or `.claude`) as a symlink to a file
/// of the user's; a project install must not edit it.
#[test]
fn a_project_settings_symlink_leading_outside_the_project_is_refused() {
    let home = temp_dir();
    let repo = temp_dir();
    let outside = home.path().join("victim.json");
    write_file(&outside, "{}\n");
    std::fs::create_dir_all(repo.path().join(".claude")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&outside, repo.path().join(".claude/settings.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    // And a whole `.codex` directory pointing out.
    let outside_dir = home.path().join("elsewhere");
    std::fs::create_dir_all(&outside_dir).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&outside_dir, repo.path().join(".codex"))
        .unwrap_or_else(|e| panic!("{e}"));
    for agent in ["claude", "codex"] {
        let out = cli(
            home.path(),
            repo.path(),
            &["hook", "install", "--agent", agent],
        )
        .run();
        assert_eq!(out.code, 2, "{agent}: {}", out.stdout);
        assert!(out.stderr.contains("outside the project"), "{}", out.stderr);
    }
    assert_eq!(read_file(&outside), "{}\n");
    assert!(!outside_dir.join("hooks.json").exists());
}

/// Installing in both scopes silently made every stop run each gate twice: the second scope is
/// refused without `--force`, naming the file that already holds the hooks; `--force` installs
/// with a warning.
#[test]
fn a_second_scope_is_refused_without_force_because_every_gate_would_run_twice() {
    let home = temp_dir();
    let repo = temp_dir();
    let project = repo.path().join(".claude/settings.json");
    let user = home.path().join(".claude/settings.json");
    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "claude", "--scope", "user"],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);

    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "claude"],
    )
    .run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        format!(
            "greenlight hook install: {} already holds greenlight's hooks, so installing them in ./.claude/settings.json too would run every gate twice per stop. Remove them there with `greenlight hook uninstall --agent claude --scope user`, or pass --force to keep both; nothing was written\n",
            user.display(),
        )
    );
    assert!(
        !project.exists(),
        "the refused install wrote {}",
        project.display()
    );

    // The other way round names the project's file and `--scope project`.
    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "codex"],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "codex", "--scope", "user"],
    )
    .run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.starts_with(
            "greenlight hook install: ./.codex/hooks.json already holds greenlight's hooks"
        ) && out.stderr.contains("--scope project`"),
        "{}",
        out.stderr
    );

    let out = cli(
        home.path(),
        repo.path(),
        &["hook", "install", "--agent", "claude", "--force"],
    )
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.starts_with("warning: ") && out.stderr.contains("twice per stop"),
        "{}",
        out.stderr
    );
    assert!(read_file(&project).contains("greenlight hook stop"));
}
