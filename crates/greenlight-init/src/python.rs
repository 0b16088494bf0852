//! Python: tox environments and nox sessions (the project's own task definitions), then the
//! defaults a `pyproject.toml` implies (ruff, mypy, pytest).
//!
//! The one rule: versioned test environments (`py310`, `py311`, …) collapse into one gate on
//! the interpreter at hand (`tox -e py`): a local gate checks this machine, not CI's matrix.

use std::path::Path;

use regex::Regex;

use super::make::task_is_check;
use super::{Candidate, Found};

/// Proposes tox environments and nox sessions whose names read as checks.
pub(crate) fn scan_task_runners(root: &Path, found: &mut Found) {
    scan_tox(root, found);
    scan_nox(root, found);
}

fn scan_tox(root: &Path, found: &mut Found) {
    let (file, envs) = if let Some(text) = read(root, "tox.ini", found) {
        ("tox.ini", tox_ini_envs(&text))
    } else if let Some(text) = read(root, "tox.toml", found) {
        ("tox.toml", tox_toml_envs(&text))
    } else if let Some(legacy) =
        read(root, "pyproject.toml", found).and_then(|t| legacy_tox_ini(&t))
    {
        ("pyproject.toml [tool.tox]", tox_ini_envs(&legacy))
    } else {
        return;
    };
    let mut saw_versioned = false;
    for env in envs {
        if is_versioned_env(&env) {
            if !saw_versioned {
                saw_versioned = true;
                found.candidates.push(Candidate {
                    hint: "tox-py".to_string(),
                    command: "tox -e py".to_string(),
                    timeout_sec: None,
                    source: format!(
                        "{file} env \"{env}\" (versioned envs run on the interpreter at hand)"
                    ),
                    fallback: false,
                    tier: 4,
                });
            }
            continue;
        }
        if task_is_check(&env)
            || matches!(
                env.as_str(),
                "mypy" | "ruff" | "flake8" | "pylint" | "typing" | "type"
            )
        {
            found.candidates.push(Candidate {
                hint: env.clone(),
                command: format!("tox -e {env}"),
                timeout_sec: None,
                source: format!("{file} env \"{env}\""),
                fallback: false,
                tier: 4,
            });
        }
    }
}

fn scan_nox(root: &Path, found: &mut Found) {
    let Some(text) = read(root, "noxfile.py", found) else {
        return;
    };
    for session in nox_sessions(&text) {
        if task_is_check(&session)
            || matches!(
                session.as_str(),
                "mypy" | "ruff" | "flake8" | "pylint" | "typing" | "type"
            )
        {
            found.candidates.push(Candidate {
                hint: session.clone(),
                command: format!("nox -s {session}"),
                timeout_sec: None,
                source: format!("noxfile.py session \"{session}\""),
                fallback: false,
                tier: 4,
            });
        }
    }
}

/// Proposes ruff, mypy and pytest when the project depends on them, or configures them and
/// they are installed; used only when no explicit command already exercises Python. A
/// `[tool.ruff]` table alone is not enough: many projects keep one for editors, and a gate on
/// a tool that is neither a dependency nor installed could never pass.
pub(crate) fn scan_manifest(root: &Path, programs: &super::Programs, found: &mut Found) {
    let Some(text) = read(root, "pyproject.toml", found) else {
        return;
    };
    let value: toml::Table = match toml::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            found.skip(
                "pyproject.toml",
                "",
                format!("not valid TOML: {}", e.message()),
            );
            return;
        }
    };
    let tool = value.get("tool").and_then(|t| t.as_table());
    let has_tool = |name: &str| tool.is_some_and(|t| t.contains_key(name));
    let deps = dependency_names(&value);
    let depends = |name: &str| deps.iter().any(|d| d == name);
    let runner = if root.join("uv.lock").is_file() {
        "uv run "
    } else if root.join("poetry.lock").is_file() {
        "poetry run "
    } else if root.join("pdm.lock").is_file() {
        "pdm run "
    } else {
        ""
    };
    let mut push = |hint: &str, command: String, why: String, timeout: Option<u32>| {
        found.candidates.push(Candidate {
            hint: hint.to_string(),
            command,
            timeout_sec: timeout,
            source: format!("pyproject.toml ({why})"),
            fallback: true,
            tier: 5,
        });
    };
    let configured_and_installed = |name: &str, configured: bool| configured && programs.has(name);
    let ruff_configured = has_tool("ruff") || root.join("ruff.toml").is_file();
    if depends("ruff") || configured_and_installed("ruff", ruff_configured) {
        push(
            "ruff",
            format!("{runner}ruff check ."),
            if depends("ruff") {
                "ruff: a dependency".to_string()
            } else {
                "ruff: configured, and installed here".to_string()
            },
            None,
        );
    }
    if depends("mypy") || configured_and_installed("mypy", has_tool("mypy")) {
        let files_configured = tool
            .and_then(|t| t.get("mypy"))
            .and_then(|m| m.as_table())
            .is_some_and(|m| m.contains_key("files"));
        let cmd = if files_configured {
            format!("{runner}mypy")
        } else {
            format!("{runner}mypy .")
        };
        let why = if depends("mypy") {
            "mypy: a dependency"
        } else {
            "mypy: configured, and installed here"
        };
        push("mypy", cmd, why.to_string(), None);
    }
    if has_tool("pytest") || depends("pytest") || root.join("tests").is_dir() {
        push(
            "pytest",
            format!("{runner}pytest"),
            "pytest".to_string(),
            Some(1800),
        );
    }
}

/// Names of every dependency listed in PEP 621, dependency groups and Poetry tables.
fn dependency_names(value: &toml::Table) -> Vec<String> {
    let mut specs: Vec<String> = Vec::new();
    let mut push_array = |v: Option<&toml::Value>| {
        if let Some(arr) = v.and_then(|v| v.as_array()) {
            specs.extend(arr.iter().filter_map(|s| s.as_str().map(str::to_string)));
        }
    };
    let project = value.get("project").and_then(|p| p.as_table());
    push_array(project.and_then(|p| p.get("dependencies")));
    if let Some(opt) = project
        .and_then(|p| p.get("optional-dependencies"))
        .and_then(|o| o.as_table())
    {
        for v in opt.values() {
            push_array(Some(v));
        }
    }
    if let Some(groups) = value.get("dependency-groups").and_then(|g| g.as_table()) {
        for v in groups.values() {
            push_array(Some(v));
        }
    }
    let mut names: Vec<String> = specs
        .iter()
        .map(|s| {
            s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
                .next()
                .unwrap_or("")
                .to_ascii_lowercase()
        })
        .collect();
    let poetry = value
        .get("tool")
        .and_then(|t| t.get("poetry"))
        .and_then(|p| p.as_table());
    if let Some(poetry) = poetry {
        for key in ["dependencies", "dev-dependencies"] {
            if let Some(t) = poetry.get(key).and_then(|d| d.as_table()) {
                names.extend(t.keys().map(|k| k.to_ascii_lowercase()));
            }
        }
        if let Some(groups) = poetry.get("group").and_then(|g| g.as_table()) {
            for g in groups.values() {
                if let Some(t) = g.get("dependencies").and_then(|d| d.as_table()) {
                    names.extend(t.keys().map(|k| k.to_ascii_lowercase()));
                }
            }
        }
    }
    names
}

/// A Python source file's text; a file that exists but cannot be read is reported in `found`.
fn read(root: &Path, name: &str, found: &mut Found) -> Option<String> {
    match super::read_source(&root.join(name)) {
        Ok(text) => text,
        Err(reason) => {
            found.skip(name, "", reason);
            None
        }
    }
}

/// `py`, `py3`, `py310`, `py3.11`, `pypy3`, and factor combinations starting with one.
fn is_versioned_env(env: &str) -> bool {
    let head = env.split('-').next().unwrap_or(env);
    let rest = head
        .strip_prefix("pypy")
        .or_else(|| head.strip_prefix("py"));
    rest.is_some_and(|r| r.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Environments of a tox.ini: `envlist` (with `{a,b}` expansion), then `[testenv:NAME]` sections.
fn tox_ini_envs(text: &str) -> Vec<String> {
    let mut envs: Vec<String> = Vec::new();
    let mut section = String::new();
    let mut in_envlist = false;
    let mut envlist = String::new();
    for raw in text.lines() {
        let line = raw.trim_end();
        let trimmed = line.trim();
        if trimmed.starts_with('[') && trimmed.ends_with(']') {
            section = trimmed[1..trimmed.len() - 1].trim().to_string();
            in_envlist = false;
            if let Some(name) = section.strip_prefix("testenv:") {
                let name = name.trim().to_string();
                if !envs.contains(&name) {
                    envs.push(name);
                }
            }
            continue;
        }
        if section == "tox" || section == "tox:tox" {
            if let Some((key, value)) = trimmed.split_once('=') {
                let key = key.trim();
                if !line.starts_with(char::is_whitespace) {
                    in_envlist = key == "envlist" || key == "env_list";
                    if in_envlist {
                        envlist.push_str(value);
                        envlist.push(',');
                    }
                    continue;
                }
            }
            if in_envlist && line.starts_with(char::is_whitespace) {
                envlist.push_str(trimmed);
                envlist.push(',');
            }
        }
    }
    let mut listed: Vec<String> = Vec::new();
    for item in split_top_level(&envlist) {
        for env in expand_braces(item.trim()) {
            if !env.is_empty() && !listed.contains(&env) {
                listed.push(env);
            }
        }
    }
    for env in envs {
        if !listed.contains(&env) {
            listed.push(env);
        }
    }
    listed
}

fn tox_toml_envs(text: &str) -> Vec<String> {
    let Ok(value) = toml::from_str::<toml::Table>(text) else {
        return Vec::new();
    };
    let mut envs: Vec<String> = value
        .get("env_list")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if let Some(t) = value.get("env").and_then(|e| e.as_table()) {
        for name in t.keys() {
            if !envs.contains(name) {
                envs.push(name.clone());
            }
        }
    }
    envs
}

fn legacy_tox_ini(pyproject: &str) -> Option<String> {
    let value: toml::Table = toml::from_str(pyproject).ok()?;
    value
        .get("tool")?
        .get("tox")?
        .get("legacy_tox_ini")?
        .as_str()
        .map(str::to_string)
}

/// Splits at commas and newlines that are not inside `{…}`.
fn split_top_level(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in s.chars() {
        match c {
            '{' => {
                depth += 1;
                current.push(c);
            }
            '}' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' | '\n' if depth == 0 => out.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    out.push(current);
    out
}

/// `py{310,311}-django{4,5}` → every combination, in order.
fn expand_braces(s: &str) -> Vec<String> {
    let Some(open) = s.find('{') else {
        return vec![s.to_string()];
    };
    let Some(close) = s[open..].find('}').map(|c| c + open) else {
        return vec![s.to_string()];
    };
    let (head, tail) = (&s[..open], &s[close + 1..]);
    let mut out = Vec::new();
    for option in s[open + 1..close].split(',') {
        for rest in expand_braces(tail) {
            out.push(format!("{head}{}{rest}", option.trim()));
        }
    }
    out
}

/// Session names of a noxfile: each `@nox.session` function, or its `name=` override.
fn nox_sessions(text: &str) -> Vec<String> {
    let (Ok(decorator), Ok(def), Ok(name_arg)) = (
        Regex::new(r"^\s*@nox\.session\b(.*)$"),
        Regex::new(r"^\s*def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\("),
        Regex::new(r#"name\s*=\s*["']([^"']+)["']"#),
    ) else {
        return Vec::new();
    };
    let mut sessions = Vec::new();
    let mut pending: Option<Option<String>> = None;
    for line in text.lines() {
        if let Some(c) = decorator.captures(line) {
            let args = c.get(1).map_or("", |m| m.as_str());
            pending = Some(
                name_arg
                    .captures(args)
                    .and_then(|n| n.get(1))
                    .map(|m| m.as_str().to_string()),
            );
            continue;
        }
        if let (Some(name_override), Some(c)) = (&pending, def.captures(line)) {
            let name = name_override
                .clone()
                .or_else(|| c.get(1).map(|m| m.as_str().to_string()));
            if let Some(name) = name {
                sessions.push(name);
            }
            pending = None;
        }
    }
    sessions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tox_envlist_expands_braces_and_lines() {
        let ini = "[tox]\nenvlist =\n    py{310,311,312}\n    lint, type\n    docs\n\n[testenv]\ncommands = pytest\n\n[testenv:lint]\ncommands = ruff check .\n\n[testenv:release]\ncommands = twine upload dist/*\n";
        assert_eq!(
            tox_ini_envs(ini),
            ["py310", "py311", "py312", "lint", "type", "docs", "release"]
        );
        assert!(is_versioned_env("py311"));
        assert!(is_versioned_env("py3.12-django"));
        assert!(!is_versioned_env("pylint"));
    }

    #[test]
    fn nox_sessions_take_name_overrides() {
        let py = "import nox\n\n@nox.session(python=[\"3.11\", \"3.12\"])\ndef tests(session):\n    session.run(\"pytest\")\n\n@nox.session(name=\"type-check\")\ndef mypy(session):\n    pass\n\n@nox.session\ndef lint(session):\n    pass\n";
        assert_eq!(nox_sessions(py), ["tests", "type-check", "lint"]);
    }
}
