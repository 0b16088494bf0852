//! Makefile targets and justfile recipes that look like checks.
//!
//! The one rule: a target is proposed by its name (test, lint, check, …) and judged by what it
//! runs: its recipe lines and its prerequisites, followed to the end ([`super::keys`]), so a
//! `check: requirements` whose `requirements` runs `pip install` is not a gate.

use std::path::Path;

use super::keys::Context;
use super::{Candidate, Found};

/// Name parts that make a task a check.
const CHECK_PARTS: &[&str] = &[
    "test",
    "tests",
    "check",
    "lint",
    "vet",
    "typecheck",
    "types",
    "build",
    "e2e",
    "verify",
    "validate",
    "clippy",
    "spec",
];

/// Name parts that make a task anything but a check (servers, installers, cleaners, writers).
const NOT_CHECK_PARTS: &[&str] = &[
    "install",
    "clean",
    "dist",
    "docker",
    "image",
    "run",
    "serve",
    "server",
    "dev",
    "watch",
    "fix",
    "tag",
    "bump",
    "all",
    "help",
    "start",
    "setup",
    "bootstrap",
    "init",
    "update",
    "upgrade",
    "generate",
    "gen",
    "bench",
    "benchmark",
    "coverage",
    "cov",
    "prepare",
    "version",
];

/// True when a task name (script, target, recipe, tox env, nox session) reads as a check.
pub(crate) fn task_is_check(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let parts: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .collect();
    if parts.iter().any(|p| NOT_CHECK_PARTS.contains(p)) {
        return false;
    }
    let formatter = parts
        .iter()
        .any(|p| matches!(*p, "fmt" | "format" | "prettier" | "style"));
    if formatter {
        // A formatter task rewrites files unless its name says it only checks.
        return parts
            .iter()
            .any(|p| matches!(*p, "check" | "verify" | "lint" | "diff"));
    }
    parts.iter().any(|p| CHECK_PARTS.contains(p))
}

/// One rule of a Makefile: its prerequisites (run first) and its recipe lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MakeTarget {
    pub name: String,
    /// Targets named after the colon, in order (order-only ones after `|` included).
    pub prerequisites: Vec<String>,
    /// Recipe lines, without their `@`/`-`/`+` prefixes.
    pub recipe: Vec<String>,
}

/// Targets of a Makefile in file order with their prerequisites and recipe lines
/// (tab-indented lines).
pub(crate) fn parse_makefile(text: &str) -> Vec<MakeTarget> {
    let mut targets: Vec<MakeTarget> = Vec::new();
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    for raw in text.lines() {
        if let Some((name, value)) = assignment(raw) {
            vars.retain(|(n, _)| *n != name);
            vars.push((name, value));
            current.clear();
            continue;
        }
        if let Some(recipe) = raw.strip_prefix('\t') {
            let line = recipe
                .trim()
                .trim_start_matches(['@', '-', '+'])
                .trim()
                .to_string();
            for &i in &current {
                if !line.is_empty()
                    && !line.starts_with('#')
                    && let Some(t) = targets.get_mut(i)
                {
                    t.recipe.push(line.clone());
                }
            }
            continue;
        }
        let line = raw.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        current.clear();
        let Some(colon) = line.find(':') else {
            continue;
        };
        let (names, rest) = line.split_at(colon);
        // `A := b`, `A ::= b` and `A = b:c` are assignments, not rules.
        if rest.starts_with(":=")
            || rest.starts_with("::=")
            || names.contains('=')
            || names.starts_with('.')
        {
            continue;
        }
        for name in names.split_whitespace() {
            let valid = name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
            if !valid || name.contains('%') {
                continue;
            }
            let index = match targets.iter().position(|t| t.name == name) {
                Some(i) => i,
                None => {
                    targets.push(MakeTarget {
                        name: name.to_string(),
                        ..MakeTarget::default()
                    });
                    targets.len() - 1
                }
            };
            current.push(index);
        }
        // `test: build lint ; cargo test`: prerequisites, then an inline recipe.
        let (prerequisites, inline) = match rest[1..].split_once(';') {
            Some((prerequisites, inline)) => (prerequisites, Some(inline.trim().to_string())),
            None => (&rest[1..], None),
        };
        let prerequisites: Vec<String> = prerequisites
            .split_whitespace()
            .filter(|p| *p != "|" && !p.contains(['$', '%']))
            .map(str::to_string)
            .collect();
        for &i in &current {
            if let Some(t) = targets.get_mut(i) {
                t.prerequisites.extend(prerequisites.iter().cloned());
                t.recipe.extend(inline.clone());
            }
        }
    }
    // `$(GO) test ./...` is `go test ./...` for every purpose here (keys, ecosystems).
    for target in &mut targets {
        for line in target.recipe.iter_mut() {
            for (name, value) in &vars {
                *line = line
                    .replace(&format!("$({name})"), value)
                    .replace(&format!("${{{name}}}"), value);
            }
        }
    }
    targets
}

/// A simple variable assignment at column 0 (`GO ?= go`, `BIN := bin/x`, `CC = cc`).
fn assignment(line: &str) -> Option<(String, String)> {
    if line.starts_with(char::is_whitespace) {
        return None;
    }
    let op = ["?=", ":=", "::=", "+=", "="]
        .iter()
        .filter_map(|op| line.find(op).map(|i| (i, *op)))
        .min()?;
    let (index, op) = op;
    let name = line[..index].trim();
    let name = name.strip_prefix("export ").unwrap_or(name).trim();
    let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid || op == "+=" {
        return None;
    }
    Some((
        name.to_string(),
        line[index + op.len()..].trim().to_string(),
    ))
}

/// Recipes of a justfile in file order: name, whether it needs arguments, body lines.
pub(crate) fn parse_justfile(text: &str) -> Vec<(String, bool, Vec<String>)> {
    let mut recipes: Vec<(String, bool, Vec<String>)> = Vec::new();
    let mut in_recipe = false;
    for raw in text.lines() {
        if raw.starts_with(' ') || raw.starts_with('\t') {
            if in_recipe {
                let line = raw.trim().trim_start_matches(['@', '-']).trim();
                if !line.is_empty()
                    && !line.starts_with('#')
                    && let Some(r) = recipes.last_mut()
                {
                    r.2.push(line.to_string());
                }
            }
            continue;
        }
        in_recipe = false;
        let line = raw.trim_end();
        if line.is_empty() || line.starts_with('#') || line.starts_with('[') {
            continue;
        }
        let first_word = line.split_whitespace().next().unwrap_or("");
        if matches!(first_word, "set" | "alias" | "export" | "import" | "mod") {
            continue;
        }
        let Some(colon) = line.find(':') else {
            continue;
        };
        let (head, rest) = line.split_at(colon);
        if rest.starts_with(":=") {
            continue;
        }
        let head = head.trim_start_matches('@');
        let mut parts = head.split_whitespace();
        let Some(name) = parts.next() else {
            continue;
        };
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            continue;
        }
        // A parameter without a default (`test FILTER:`) or a `+` variadic needs an argument.
        let needs_args =
            parts.any(|p| !p.contains('=') && !p.starts_with('*') && !p.starts_with('$'));
        recipes.push((name.to_string(), needs_args, Vec::new()));
        in_recipe = true;
    }
    recipes
}

/// Proposes check-like Makefile targets and justfile recipes.
pub(crate) fn scan(_root: &Path, ctx: &Context, found: &mut Found) {
    if let Some(file) = &ctx.makefile_name {
        for MakeTarget { name, .. } in &ctx.make_targets {
            if !task_is_check(name) {
                continue;
            }
            let source = format!("{file} target \"{name}\"");
            found.candidates.push(Candidate {
                hint: name.clone(),
                command: format!("make {name}"),
                timeout_sec: None,
                source,
                fallback: false,
                tier: 2,
            });
        }
    }
    if let Some(file) = &ctx.justfile_name {
        for (name, needs_args, _) in &ctx.just_recipes {
            if !task_is_check(name) {
                continue;
            }
            let source = format!("{file} recipe \"{name}\"");
            if *needs_args {
                found.skip(source, format!("just {name}"), "the recipe needs arguments");
                continue;
            }
            found.candidates.push(Candidate {
                hint: name.clone(),
                command: format!("just {name}"),
                timeout_sec: None,
                source,
                fallback: false,
                tier: 3,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_names() {
        for yes in [
            "test",
            "lint",
            "test:unit",
            "fmt-check",
            "format:check",
            "check",
            "typecheck",
            "e2e",
        ] {
            assert!(task_is_check(yes), "{yes}");
        }
        for no in [
            "fmt",
            "format",
            "lint:fix",
            "test:watch",
            "dev",
            "clean",
            "install",
            "coverage",
            "deploy",
        ] {
            assert!(!task_is_check(no), "{no}");
        }
    }

    #[test]
    fn makefile_rules_assignments_and_inline_recipes() {
        let mk = "GO ?= go\nX := a:b\n.PHONY: test lint\ntest: build\n\t@$(GO) test ./...\nlint vet:\n\tgo vet ./...\n%.o: %.c\n\tcc\nci: lint | vet ; make test\n";
        let t = parse_makefile(mk);
        let names: Vec<&str> = t.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["test", "lint", "vet", "ci"]);
        assert_eq!(t[0].recipe, ["go test ./..."]);
        assert_eq!(t[0].prerequisites, ["build"]);
        assert_eq!(t[3].recipe, ["make test"]);
        assert_eq!(t[3].prerequisites, ["lint", "vet"]);
    }

    #[test]
    fn justfile_recipes_and_parameters() {
        let j = "set shell := [\"bash\", \"-c\"]\nversion := \"1\"\n\n# run tests\ntest:\n    cargo test\n\nbench FILTER:\n    cargo bench {{FILTER}}\n\n@lint flags='':\n    cargo clippy {{flags}}\n";
        let r = parse_justfile(j);
        assert_eq!(r.len(), 3);
        assert_eq!(
            r[0],
            ("test".to_string(), false, vec!["cargo test".to_string()])
        );
        assert!(r[1].1);
        assert!(!r[2].1);
    }
}
