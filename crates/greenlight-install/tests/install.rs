//! Installing and uninstalling the Stop hooks on real files in temporary directories.

use std::path::{Path, PathBuf};

use greenlight_install::Error;
use greenlight_install::install::{self, Applied, HookSpec};
use support::{read, tmp, write};

mod support;

fn spec() -> HookSpec {
    HookSpec {
        command: "greenlight hook stop".to_string(),
        timeout_sec: 1800,
    }
}

fn install(path: &Path) -> Applied {
    install::plan_install(path, &spec())
        .and_then(|p| p.apply())
        .unwrap_or_else(|e| panic!("install: {e}"))
}

fn uninstall(path: &Path) -> Applied {
    install::plan_uninstall(path)
        .and_then(|p| p.apply())
        .unwrap_or_else(|e| panic!("uninstall: {e}"))
}

fn backup_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".greenlight.bak");
    PathBuf::from(name)
}

const FRESH: &str = r#"{
  "hooks": {
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "greenlight hook stop",
            "timeout": 1800
          }
        ]
      }
    ],
    "SubagentStop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "greenlight hook stop",
            "timeout": 1800
          }
        ]
      }
    ],
    "SessionStart": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "greenlight hook session-start",
            "timeout": 30
          }
        ]
      }
    ]
  }
}
"#;

/// A settings file as Claude Code writes it (JSON.stringify, 2 spaces), with other settings
/// and another tool's Stop hook.
const BUSY: &str = r#"{
  "model": "opus",
  "permissions": {
    "allow": [
      "Bash(cargo test:*)"
    ],
    "deny": []
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "./scripts/guard.sh"
          }
        ]
      }
    ],
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "lefthook run ai-stop",
            "timeout": 120
          }
        ]
      }
    ]
  },
  "env": {
    "NO_COLOR": "1"
  }
}
"#;

/// An uninstall after an install into a repository that had no settings file used to leave
/// `{}` and a `.bak` behind; a file greenlight created and that holds nothing else goes.
#[test]
fn uninstall_removes_a_settings_file_greenlight_created_and_leaves_no_backup() {
    for file in [".claude/settings.json", ".codex/hooks.json"] {
        let dir = tmp();
        let path = dir.path().join(file);
        assert_eq!(install(&path), Applied::Written { backup: None });
        assert_eq!(read(&path), FRESH, "{file}");
        assert!(
            !backup_of(&path).exists(),
            "nothing to back up for a new file"
        );
        assert_eq!(uninstall(&path), Applied::Removed);
        assert!(!path.exists(), "{file}");
        assert!(!backup_of(&path).exists(), "{file}");
    }
}

/// A file the user had (even `{}`) is theirs: uninstall gives back its bytes, and the
/// install's backup (the file before greenlight first changed it) is never overwritten.
#[test]
fn uninstall_keeps_a_users_empty_file_and_never_overwrites_the_install_backup() {
    let dir = tmp();
    let path = dir.path().join(".claude/settings.json");
    write(&path, "{}\n");
    assert_eq!(
        install(&path),
        Applied::Written {
            backup: Some(install::Backup::Made(backup_of(&path)))
        }
    );
    assert_eq!(
        uninstall(&path),
        Applied::Written {
            backup: Some(install::Backup::Kept(backup_of(&path)))
        }
    );
    assert_eq!(read(&path), "{}\n");
    assert_eq!(
        read(&backup_of(&path)),
        "{}\n",
        "the install's backup is intact"
    );
}

#[test]
fn a_blank_file_counts_as_empty_settings() {
    let dir = tmp();
    let path = dir.path().join("settings.json");
    write(&path, "\n");
    install(&path);
    assert_eq!(read(&path), FRESH);
    assert_eq!(read(&backup_of(&path)), "\n");
}

#[test]
fn other_settings_and_hooks_are_kept_in_order_and_uninstall_restores_the_bytes() {
    let dir = tmp();
    let path = dir.path().join(".claude/settings.json");
    write(&path, BUSY);
    install(&path);
    let after = read(&path);
    assert_eq!(read(&backup_of(&path)), BUSY);
    let doc: serde_json::Value = serde_json::from_str(&after).unwrap_or_else(|e| panic!("{e}"));
    let keys: Vec<&str> = doc
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        ["model", "permissions", "hooks", "env"],
        "top-level order kept"
    );
    let hook_keys: Vec<&str> = doc["hooks"]
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        hook_keys,
        ["PreToolUse", "Stop", "SubagentStop", "SessionStart"]
    );
    let stop = doc["hooks"]["Stop"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        stop.len(),
        2,
        "the other tool's Stop group stays first, ours is appended"
    );
    assert_eq!(stop[0]["hooks"][0]["command"], "lefthook run ai-stop");
    assert_eq!(stop[1]["hooks"][0]["command"], "greenlight hook stop");
    assert_eq!(doc["hooks"]["PreToolUse"][0]["matcher"], "Bash");

    uninstall(&path);
    assert_eq!(read(&path), BUSY, "uninstall gives back the original bytes");
}

#[test]
fn installing_twice_changes_nothing_the_second_time() {
    let dir = tmp();
    let path = dir.path().join(".codex/hooks.json");
    write(&path, BUSY);
    install(&path);
    let once = read(&path);
    std::fs::remove_file(backup_of(&path)).unwrap_or_else(|e| panic!("{e}"));
    let plan = install::plan_install(&path, &spec()).unwrap_or_else(|e| panic!("{e}"));
    assert!(!plan.changes());
    assert_eq!(plan.diff(), "");
    assert_eq!(plan.apply().ok(), Some(Applied::Unchanged));
    assert_eq!(read(&path), once);
    assert!(!backup_of(&path).exists(), "no change, no backup");
}

#[test]
fn an_existing_greenlight_entry_is_updated_in_place_and_duplicates_collapse() {
    let dir = tmp();
    let path = dir.path().join("settings.json");
    let old = r#"{
  "hooks": {
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "/old/bin/greenlight hook stop",
            "timeout": 60,
            "statusMessage": "gates"
          },
          {
            "type": "command",
            "command": "notify-send done"
          }
        ]
      },
      {
        "hooks": [
          {
            "type": "command",
            "command": "greenlight hook stop"
          }
        ]
      }
    ]
  }
}
"#;
    write(&path, old);
    install(&path);
    let doc: serde_json::Value =
        serde_json::from_str(&read(&path)).unwrap_or_else(|e| panic!("{e}"));
    let stop = doc["hooks"]["Stop"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        stop.len(),
        1,
        "the duplicate's emptied group is gone: {stop:?}"
    );
    let handlers = stop[0]["hooks"].as_array().cloned().unwrap_or_default();
    assert_eq!(handlers.len(), 2);
    assert_eq!(
        handlers[0],
        serde_json::json!({"type": "command", "command": "greenlight hook stop", "timeout": 1800, "statusMessage": "gates"})
    );
    let keys: Vec<&str> = handlers[0]
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        ["type", "command", "timeout", "statusMessage"],
        "the user's key keeps its place"
    );
    assert_eq!(handlers[1]["command"], "notify-send done");
    assert_eq!(
        doc["hooks"]["SubagentStop"].as_array().map(Vec::len),
        Some(1)
    );
}

#[test]
fn invalid_json_is_refused_with_line_and_column_and_left_byte_identical() {
    let dir = tmp();
    let path = dir.path().join(".claude/settings.json");
    let broken = "{\n  \"model\": \"opus\",\n  \"hooks\": {\n    \"Stop\": [,]\n  }\n}\n";
    write(&path, broken);
    for result in [
        install::plan_install(&path, &spec()).map(|_| ()),
        install::plan_uninstall(&path).map(|_| ()),
    ] {
        match result {
            Err(Error::InvalidJson {
                path: p,
                line,
                column,
                ..
            }) => {
                assert_eq!(p, path);
                assert_eq!((line, column), (4, 14));
            }
            other => panic!("expected InvalidJson, got {other:?}"),
        }
    }
    let message = install::plan_install(&path, &spec())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        message.starts_with(&format!("{}:4:14: not valid JSON", path.display())),
        "{message}"
    );
    assert_eq!(read(&path), broken);
    assert!(!backup_of(&path).exists());
}

#[test]
fn a_hooks_key_of_the_wrong_shape_is_refused_and_names_where() {
    let dir = tmp();
    let path = dir.path().join("hooks.json");
    for (text, pointer) in [
        ("{\"hooks\": []}\n", "hooks"),
        ("{\"hooks\": {\"Stop\": {\"hooks\": []}}}\n", "hooks.Stop"),
        (
            "{\"hooks\": {\"Stop\": [{\"hooks\": \"x\"}]}}\n",
            "hooks.Stop[0].hooks",
        ),
        ("[1, 2]\n", "the top level"),
    ] {
        write(&path, text);
        match install::plan_install(&path, &spec()) {
            Err(Error::UnexpectedShape { pointer: p, .. }) => assert_eq!(p, pointer, "{text}"),
            other => panic!("{text}: expected UnexpectedShape, got {other:?}"),
        }
        assert_eq!(read(&path), text);
    }
}

#[test]
fn indentation_line_endings_and_a_missing_final_newline_are_kept() {
    let dir = tmp();
    let path = dir.path().join("settings.json");
    let original = "{\r\n    \"model\": \"opus\"\r\n}";
    write(&path, original);
    install(&path);
    let after = read(&path);
    assert!(
        after.starts_with(
            "{\r\n    \"model\": \"opus\",\r\n    \"hooks\": {\r\n        \"Stop\": ["
        ),
        "{after:?}"
    );
    assert!(after.ends_with("]\r\n    }\r\n}"), "{after:?}");
    uninstall(&path);
    assert_eq!(read(&path), original);
}

#[test]
fn a_symlinked_settings_file_stays_a_symlink() {
    let dir = tmp();
    let real = dir.path().join("dotfiles/claude-settings.json");
    write(&real, "{\n  \"model\": \"opus\"\n}\n");
    let link = dir.path().join(".claude/settings.json");
    std::fs::create_dir_all(dir.path().join(".claude")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&real, &link).unwrap_or_else(|e| panic!("{e}"));
    install(&link);
    assert!(link.is_symlink(), "the link must survive");
    assert!(read(&real).contains("greenlight hook stop"));
    assert!(
        backup_of(&real).exists(),
        "the backup sits beside the real file"
    );
}

#[test]
fn permissions_of_the_file_are_kept() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tmp();
    let path = dir.path().join("settings.json");
    write(&path, "{}\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .unwrap_or_else(|e| panic!("{e}"));
    install(&path);
    let mode = std::fs::metadata(&path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0);
    assert_eq!(mode, 0o600);
}

#[test]
fn dry_run_diff_shows_the_change_and_writes_nothing() {
    let dir = tmp();
    let path = dir.path().join("settings.json");
    write(&path, "{\n  \"model\": \"opus\"\n}\n");
    let plan = install::plan_install(&path, &spec()).unwrap_or_else(|e| panic!("{e}"));
    let diff = plan.diff();
    assert!(
        diff.starts_with(&format!(
            "--- {}\n+++ {}\n@@ -1,3 +1,",
            path.display(),
            path.display()
        )),
        "{diff}"
    );
    assert!(
        diff.contains("-  \"model\": \"opus\"\n+  \"model\": \"opus\",\n"),
        "{diff}"
    );
    assert!(
        diff.contains("+            \"command\": \"greenlight hook stop\",\n"),
        "{diff}"
    );
    assert_eq!(read(&path), "{\n  \"model\": \"opus\"\n}\n");
    let new = dir.path().join("new/settings.json");
    let plan = install::plan_install(&new, &spec()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        plan.diff().starts_with("--- /dev/null\n"),
        "{}",
        plan.diff()
    );
    assert!(!new.exists());
}

#[test]
fn a_file_changed_after_planning_is_not_overwritten() {
    let dir = tmp();
    let path = dir.path().join("settings.json");
    write(&path, "{}\n");
    let plan = install::plan_install(&path, &spec()).unwrap_or_else(|e| panic!("{e}"));
    write(&path, "{\"model\": \"haiku\"}\n");
    assert!(matches!(plan.apply(), Err(Error::ChangedUnderfoot { .. })));
    assert_eq!(read(&path), "{\"model\": \"haiku\"}\n");
}

#[test]
fn uninstall_without_greenlight_entries_or_without_a_file_touches_nothing() {
    let dir = tmp();
    let path = dir.path().join("settings.json");
    assert_eq!(uninstall(&path), Applied::Unchanged);
    assert!(!path.exists());
    write(&path, BUSY);
    assert_eq!(uninstall(&path), Applied::Unchanged);
    assert_eq!(read(&path), BUSY);
    assert!(!backup_of(&path).exists());
}

/// Install then uninstall gives back the bytes, whatever the layout: compact, tabs, CRLF,
/// four spaces, spaces around colons, empty objects and lists, other hooks in every place.
/// (Known exceptions: whitespace inside an empty object, `{ }`, comes back as `{}`; an empty
/// `hooks` object or an empty Stop list that greenlight filled is removed with its handlers,
/// since nothing tells it from one greenlight added.)
#[test]
fn install_then_uninstall_is_byte_identical_across_layouts() {
    let texts = [
        "{}",
        "{}\n",
        "{\"a\":1}",
        "{\"hooks\":{\"PreToolUse\":[]}}",
        "{\r\n\t\"model\": \"x\",\r\n\t\"hooks\": {\r\n\t\t\"Stop\": [\r\n\t\t\t{\"hooks\": [{\"type\": \"command\", \"command\": \"./mine.sh\"}]}\r\n\t\t]\r\n\t}\r\n}\r\n",
        "{\n    \"hooks\" : {\n        \"PreToolUse\" : [ ],\n        \"SessionStart\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"echo hi\"}]}]\n    },\n    \"n\": 1.50e300\n}",
        "  {\"hooks\": {\"Stop\": [{\"matcher\": \"\", \"hooks\": []}]}, \"x\": [1, 2, {\"y\": null}]}  \n",
    ];
    for (i, original) in texts.iter().enumerate() {
        let dir = tmp();
        let path = dir.path().join("settings.json");
        write(&path, original);
        install(&path);
        let installed = read(&path);
        let doc: serde_json::Value = serde_json::from_str(&installed)
            .unwrap_or_else(|e| panic!("#{i}: not JSON after install ({e}): {installed}"));
        for event in install::EVENTS {
            let ours: usize = doc["hooks"][event]
                .as_array()
                .map(|groups| {
                    groups
                        .iter()
                        .flat_map(|g| g["hooks"].as_array().cloned().unwrap_or_default())
                        .filter(install::is_greenlight_handler)
                        .count()
                })
                .unwrap_or(0);
            assert_eq!(ours, 1, "#{i} {event}: {installed}");
        }
        let plan = install::plan_install(&path, &spec()).unwrap_or_else(|e| panic!("{e}"));
        assert!(!plan.changes(), "#{i}: a second install changes nothing");
        uninstall(&path);
        assert_eq!(read(&path), *original, "#{i}: after install: {installed}");
    }
}

mod round_trip {
    //! Install then uninstall, on settings files generated at random: the bytes come back.

    use super::*;
    use proptest::prelude::*;
    use serde_json::{Map, Value};
    use support::{layout, value};

    /// Someone else's handler group (never greenlight's).
    fn group() -> impl Strategy<Value = Value> {
        ("[a-z./-]{1,12}", prop::option::of(1u32..999)).prop_map(|(cmd, timeout)| {
            let mut h = Map::new();
            h.insert("type".into(), "command".into());
            h.insert("command".into(), format!("./{cmd}").into());
            if let Some(t) = timeout {
                h.insert("timeout".into(), t.into());
            }
            serde_json::json!({"hooks": [Value::Object(h)]})
        })
    }

    fn settings() -> impl Strategy<Value = Value> {
        let events = prop::collection::btree_map(
            prop::sample::select(vec!["Stop", "PreToolUse", "SessionStart", "Notification"]),
            prop::collection::vec(group(), 1..3),
            0..3,
        );
        (
            prop::collection::btree_map("[a-z]{1,6}", value(), 0..4),
            prop::option::of(events),
        )
            .prop_map(|(mut other, hooks)| {
                other.remove("hooks");
                let mut root: Map<String, Value> = other.into_iter().collect();
                // An empty `hooks` object goes with greenlight's handlers (documented), so a
                // generated one always has an event.
                if let Some(events) = hooks.filter(|e| !e.is_empty()) {
                    let events: Map<String, Value> = events
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), Value::from(v)))
                        .collect();
                    root.insert("hooks".into(), Value::Object(events));
                }
                Value::Object(root)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn install_then_uninstall_gives_back_the_bytes(doc in settings(), style in 0u8..4) {
            let original = layout(&doc, style);
            let dir = tmp();
            let path = dir.path().join("settings.json");
            write(&path, &original);
            install(&path);
            let installed = read(&path);
            let parsed: Value = serde_json::from_str(&installed)
                .unwrap_or_else(|e| panic!("not JSON after install ({e}): {installed}"));
            // Everything that was there is still there, with the same values.
            if let (Value::Object(before), Value::Object(after)) = (&doc, &parsed) {
                for (k, v) in before {
                    if k != "hooks" {
                        prop_assert_eq!(after.get(k), Some(v));
                    }
                }
            }
            uninstall(&path);
            prop_assert_eq!(read(&path), original);
        }
    }
}
