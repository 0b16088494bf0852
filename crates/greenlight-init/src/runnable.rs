//! Whether a drafted gate can run where `init` runs: its programs are installed, the scripts
//! and directories it names exist, and the files it reads are not build artifacts that only
//! an earlier CI step produces.
//!
//! The one rule: a gate that cannot pass here for a reason outside the code (a missing `uv`, a
//! `dist/*.whl` nobody built) is not a check of the code; it is listed as not drafted, with
//! the reason, so the user can install the tool and run `init` again.

use std::path::{Path, PathBuf};

use super::Programs;
use greenlight_proc::shell::{program, segments, words};

/// Shell builtins and keywords: always there.
const BUILTINS: &[&str] = &[
    "cd", "export", "exit", "set", "true", "false", "echo", "printf", ":", "source", ".", "unset",
    "test", "[", "[[", "command", "eval", "exec", "return", "shift", "wait", "umask", "read",
    "type",
];

/// Directories CI builds artifacts into before a later step inspects them.
const ARTIFACT_DIRS: &[&str] = &["dist/", "wheelhouse/", "build/", "artifacts/"];

/// How many directory entries a glob may visit before it counts as matching (a huge tree is
/// not worth walking to draft a config; assuming a match only keeps a gate).
const GLOB_BUDGET: usize = 20_000;

/// Why `command` cannot run here, or `None` when nothing stops it. A program missing here that
/// the repository's own setup provides (`provided`) does not stop it: the gate is drafted with
/// that setup named ([`super::setup`]).
pub(crate) fn cannot_run(
    command: &str,
    root: &Path,
    programs: &Programs,
    provided: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let mut cwd: PathBuf = root.to_path_buf();
    for segment in segments(command) {
        // `! [ -s diff.txt ]` runs `[`: the `!` only inverts its exit code.
        let w: Vec<String> = words(&segment)
            .into_iter()
            .skip_while(|x| x == "!")
            .collect();
        let Some(first) = w.first() else {
            continue;
        };
        if first.contains(['$', '`']) {
            continue;
        }
        if first == "cd" {
            if let Some(dir) = w.get(1).filter(|d| !d.contains(['$', '`', '~'])) {
                cwd = cwd.join(dir);
                if !cwd.is_dir() {
                    return Some(format!("`cd {dir}`: {dir} does not exist here"));
                }
            }
            continue;
        }
        if BUILTINS.contains(&first.as_str()) {
            continue;
        }
        // What the step reads decides first: inspecting build output is not a check, whatever
        // is installed.
        for arg in w.iter().skip(1).filter(|a| !a.starts_with('-')) {
            if let Some(reason) = reads_artifact(arg, &cwd) {
                return Some(reason);
            }
        }
        if first.contains('/') {
            if !cwd.join(first).exists() {
                return Some(format!("`{first}` does not exist here"));
            }
        } else if !programs.has(first) && !provided(program(first)) {
            return Some(format!(
                "`{first}` is not on PATH here, so the gate could not run; install {} (or leave \
                 the gate out) and run `greenlight init` again",
                program(first)
            ));
        }
    }
    None
}

/// Why an argument names something that only a CI build produces, if it does.
fn reads_artifact(arg: &str, cwd: &Path) -> Option<String> {
    if arg.contains(['$', '`', '=']) || arg.contains("://") {
        return None;
    }
    let glob = arg.contains(['*', '?', '[']);
    let artifact = ARTIFACT_DIRS
        .iter()
        .any(|d| arg.starts_with(d) || arg.starts_with(&format!("./{d}")));
    if glob && !matches_anything(cwd, arg) {
        return Some(format!(
            "its pattern `{arg}` matches nothing here, so sh would pass it on literally; it \
             inspects files an earlier CI step builds, which is not a check of the code"
        ));
    }
    if artifact && !glob && !cwd.join(arg).exists() {
        return Some(format!(
            "it reads `{arg}`, a build artifact an earlier CI step produces (absent here); \
             inspecting build output is not a check of the code"
        ));
    }
    None
}

/// True when the glob `pattern` (relative to `dir`) matches at least one path.
fn matches_anything(dir: &Path, pattern: &str) -> bool {
    let parts: Vec<&str> = pattern
        .trim_start_matches("./")
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    let mut budget = GLOB_BUDGET;
    let base = if pattern.starts_with('/') {
        PathBuf::from("/")
    } else {
        dir.to_path_buf()
    };
    walk(&base, &parts, &mut budget)
}

fn walk(dir: &Path, parts: &[&str], budget: &mut usize) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return true;
    };
    if *first == "**" {
        if walk(dir, rest, budget) {
            return true;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        for entry in entries.flatten() {
            if *budget == 0 {
                return true;
            }
            *budget -= 1;
            if entry.file_type().is_ok_and(|t| t.is_dir()) && walk(&entry.path(), parts, budget) {
                return true;
            }
        }
        return false;
    }
    if !first.contains(['*', '?', '[']) {
        let next = dir.join(first);
        return if rest.is_empty() {
            next.exists()
        } else {
            next.is_dir() && walk(&next, rest, budget)
        };
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for entry in entries.flatten() {
        if *budget == 0 {
            return true;
        }
        *budget -= 1;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if name.starts_with('.') && !first.starts_with('.') {
            continue;
        }
        if wildcard(first.as_bytes(), name.as_bytes())
            && (rest.is_empty() || walk(&entry.path(), rest, budget))
        {
            return true;
        }
    }
    false
}

/// `sh` filename matching for one path component: `*`, `?` and `[…]` (with `!`/`^` and
/// ranges).
fn wildcard(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|i| wildcard(rest, &name[i..])),
        Some((b'?', rest)) => !name.is_empty() && wildcard(rest, &name[1..]),
        Some((b'[', rest)) => {
            let Some(close) = rest.iter().skip(1).position(|&c| c == b']').map(|p| p + 1) else {
                return name.first() == Some(&b'[') && wildcard(rest, &name[1..]);
            };
            let Some((&c, name_rest)) = name.split_first() else {
                return false;
            };
            let (negate, set) = match rest[..close].split_first() {
                Some((b'!' | b'^', set)) => (true, set),
                _ => (false, &rest[..close]),
            };
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == b'-' {
                    hit |= (set[i]..=set[i + 2]).contains(&c);
                    i += 3;
                } else {
                    hit |= set[i] == c;
                    i += 1;
                }
            }
            hit != negate && wildcard(&rest[close + 1..], name_rest)
        }
        Some((&p, rest)) => name.first() == Some(&p) && wildcard(rest, &name[1..]),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn wildcards_match_like_sh() {
        assert!(wildcard(b"*.whl", b"pkg-1.0-py3-none-any.whl"));
        assert!(!wildcard(b"*.whl", b"pkg.tar.gz"));
        assert!(wildcard(b"test_?.py", b"test_a.py"));
        assert!(wildcard(b"[a-c]x", b"bx"));
        assert!(!wildcard(b"[!a-c]x", b"bx"));
    }

    #[test]
    fn missing_programs_scripts_and_artifacts_are_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tests")).unwrap();
        std::fs::write(dir.path().join("tests/test_a.py"), "").unwrap();
        let none = Programs::Path(Some(dir.path().join("no-bin").into_os_string()));
        let cannot_run = |c: &str, root: &Path, p: &Programs| cannot_run(c, root, p, &|_| false);
        let reason = cannot_run("uv run pytest", dir.path(), &none).unwrap();
        assert!(reason.starts_with("`uv` is not on PATH here"), "{reason}");
        let all = Programs::All;
        assert_eq!(cannot_run("pytest tests/*.py", dir.path(), &all), None);
        let reason = cannot_run("twine check dist/*.whl", dir.path(), &all).unwrap();
        assert!(
            reason.contains("`dist/*.whl` matches nothing here"),
            "{reason}"
        );
        let reason = cannot_run("check-wheel-contents dist/pkg.whl", dir.path(), &all).unwrap();
        assert!(reason.contains("a build artifact"), "{reason}");
        let reason = cannot_run("./scripts/lint.sh", dir.path(), &all).unwrap();
        assert_eq!(reason, "`./scripts/lint.sh` does not exist here");
        assert_eq!(cannot_run("cd tests && echo ok", dir.path(), &none), None);
    }

    /// `cat diff.txt && ! [ -s diff.txt ]` was left out as "its pattern `[` matches nothing
    /// here": the `[` after `!` is the test command, not a glob.
    #[test]
    fn a_negated_test_bracket_is_a_command_not_a_glob() {
        let dir = tempfile::tempdir().unwrap();
        let all = Programs::All;
        let none = |_: &str| false;
        for command in [
            "cat diff.txt && ! [ -s diff.txt ]",
            "! test -s diff.txt",
            "[[ -z x ]]",
        ] {
            assert_eq!(
                cannot_run(command, dir.path(), &all, &none),
                None,
                "{command}"
            );
        }
        let path = Programs::Path(Some(dir.path().join("no-bin").into_os_string()));
        let reason = cannot_run("! grep -q x y", dir.path(), &path, &none).unwrap();
        assert!(reason.starts_with("`grep` is not on PATH here"), "{reason}");
        assert_eq!(
            cannot_run("! grep -q x y", dir.path(), &path, &|p| p == "grep"),
            None
        );
    }
}
