//! greenlight's own files in a repository, which work-evidence never counts as work: installing
//! greenlight, or drafting its config, is not what an agent was asked to do.
//!
//! Exactly these, at the worktree's top (as `git status --porcelain` names paths):
//! - everything under `.greenlight/` (greenlight's config home);
//! - every `*.greenlight.bak` (the backups `init --force` and the installers write before they
//!   change a file);
//! - an agent hook settings file (`.claude/settings.json`, `.codex/hooks.json`) whose uncommitted
//!   change is greenlight's hook handlers alone: with every handler that runs `greenlight hook
//!   stop|session-start` taken out of both, it reads the same as at HEAD (no file at HEAD: an
//!   empty object). A user's own edit beside greenlight's handlers is work.
//!
//! The first two are excluded from the commit count too. A committed settings file counts,
//! whatever changed in it: a commit cannot be read that cheaply, and committing hooks is rare.

use std::path::Path;

use serde_json::Value;

/// greenlight's config home, as a path prefix from the worktree's top.
pub const OWN_DIR: &str = ".greenlight/";
/// The suffix of the backups greenlight writes before it changes a file.
pub const BACKUP_SUFFIX: &str = ".greenlight.bak";
/// The hook settings files `greenlight hook install` writes in a project.
pub const HOOK_SETTINGS: &[&str] = &[".claude/settings.json", ".codex/hooks.json"];

/// Pathspecs that leave greenlight's own directory and backups out of a commit count.
pub fn exclude_pathspecs() -> [String; 2] {
    [
        format!(":(exclude,top){OWN_DIR}"),
        format!(":(exclude,top,glob)**/*{BACKUP_SUFFIX}"),
    ]
}

/// Whether `path` (from the worktree's top) is greenlight's by its name alone.
pub fn is_own_path(path: &[u8]) -> bool {
    path.starts_with(OWN_DIR.as_bytes()) || path.ends_with(BACKUP_SUFFIX.as_bytes())
}

/// Whether `path` names a hook settings file whose change may be greenlight's alone.
pub fn is_hook_settings(path: &[u8]) -> bool {
    HOOK_SETTINGS.iter().any(|p| p.as_bytes() == path)
}

/// True when a handler's command runs a `greenlight` binary with `hook stop` or
/// `hook session-start`: one of greenlight's own handlers.
pub fn is_greenlight_command(command: &str) -> bool {
    use greenlight_proc::shell::{program, words};
    let w = words(command);
    let binary = w.first().map(|p| program(p));
    matches!(binary, Some("greenlight" | "greenlight.exe"))
        && w.get(1).map(String::as_str) == Some("hook")
        && matches!(w.get(2).map(String::as_str), Some("stop" | "session-start"))
}

/// Whether the hook settings file at `path` (from `top`) differs from HEAD only by greenlight's
/// handlers. Anything unreadable or not JSON is work: a guess here would hide a real change.
pub fn only_greenlight_hooks(top: &Path, path: &str) -> bool {
    let Ok(now) = crate::file::read_bounded(&top.join(path), crate::file::MAX_CONFIG_BYTES) else {
        return false;
    };
    let Ok(now) = serde_json::from_slice::<Value>(&now) else {
        return false;
    };
    let at_head = format!("HEAD:{path}");
    let git =
        |args: &[&str]| greenlight_proc::git::output(greenlight_proc::git::command(top).args(args));
    // Its size first: the committed blob is the repository's, and only a bounded one is read.
    let size = git(&["cat-file", "-s", &at_head]).ok().map(|out| {
        String::from_utf8_lossy(&out)
            .trim()
            .parse::<u64>()
            .unwrap_or(u64::MAX)
    });
    let before = match size {
        // Not at HEAD: greenlight's handlers alone leave an empty object.
        None => Value::Object(serde_json::Map::new()),
        Some(size) if size > crate::file::MAX_CONFIG_BYTES => return false,
        Some(_) => match git(&["show", &at_head])
            .ok()
            .and_then(|text| serde_json::from_slice::<Value>(&text).ok())
        {
            Some(before) => before,
            None => return false,
        },
    };
    without_greenlight_hooks(now) == without_greenlight_hooks(before)
}

/// The settings with greenlight's handlers taken out, and every group, event and `hooks` object
/// left empty by that taken out too (as uninstalling leaves them).
fn without_greenlight_hooks(mut settings: Value) -> Value {
    let Some(object) = settings.as_object_mut() else {
        return settings;
    };
    let Some(Value::Object(events)) = object.get_mut("hooks") else {
        return settings;
    };
    for groups in events.values_mut() {
        let Value::Array(groups) = groups else {
            continue;
        };
        for group in groups.iter_mut() {
            if let Some(Value::Array(handlers)) = group.get_mut("hooks") {
                handlers.retain(|h| {
                    !h.get("command")
                        .and_then(Value::as_str)
                        .is_some_and(is_greenlight_command)
                });
            }
        }
        groups.retain(|g| {
            g.get("hooks")
                .and_then(Value::as_array)
                .is_none_or(|h| !h.is_empty())
        });
    }
    events.retain(|_, groups| groups.as_array().is_none_or(|g| !g.is_empty()));
    if events.is_empty() {
        object.remove("hooks");
    }
    settings
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn greenlight_s_handlers_alone_leave_nothing_and_a_user_s_handler_stays() {
        let ours = serde_json::json!({"hooks": {"Stop": [{"hooks": [
            {"type": "command", "command": "greenlight hook stop"}]}]}});
        assert_eq!(without_greenlight_hooks(ours), serde_json::json!({}));
        let mixed = serde_json::json!({"hooks": {"Stop": [{"hooks": [
            {"type": "command", "command": "/usr/local/bin/greenlight hook stop --agent codex"},
            {"type": "command", "command": "make lint"}]}]}, "model": "x"});
        assert_eq!(
            without_greenlight_hooks(mixed),
            serde_json::json!({"hooks": {"Stop": [{"hooks": [
                {"type": "command", "command": "make lint"}]}]}, "model": "x"})
        );
    }

    #[test]
    fn own_paths_are_the_config_home_and_the_backups() {
        assert!(is_own_path(b".greenlight/verify.yaml"));
        assert!(is_own_path(b".claude/settings.json.greenlight.bak"));
        assert!(!is_own_path(b"src/.greenlight"));
        assert!(!is_own_path(b".commandmate/verify.yaml"));
        assert!(is_hook_settings(b".claude/settings.json"));
        assert!(!is_hook_settings(b"sub/.claude/settings.json"));
    }
}
