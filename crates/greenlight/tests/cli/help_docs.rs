//! Every subcommand's `-h` and its reference page's flag table say the same: the same flags,
//! each with the same one-line description. A flag's help must also not say the opposite of
//! the flag (`--no-record` once read "Record this run…").

#![allow(clippy::unwrap_used)] // a test that cannot read its inputs should stop loudly

use std::collections::BTreeSet;
use std::path::Path;

use greenlight_testkit::Cli;

/// Each subcommand and the reference page (under docs/reference/) that documents it.
const PAGES: &[(&[&str], &str)] = &[
    (&["verify"], "verify.md"),
    (&["digest"], "digest.md"),
    (&["agent", "probe"], "agent.md"),
    (&["agent", "dispatch"], "agent.md"),
    (&["goal", "run"], "goal.md"),
    (&["goal", "resume"], "goal.md"),
    (&["goal", "status"], "goal.md"),
    (&["goal", "log"], "goal.md"),
    (&["goal", "submit"], "goal.md"),
    (&["goal", "worker"], "goal.md"),
    (&["store", "check"], "store.md"),
    (&["store", "migrate"], "store.md"),
    (&["init"], "hooks-init-ci.md"),
    (&["hook", "install"], "hooks-init-ci.md"),
    (&["hook", "uninstall"], "hooks-init-ci.md"),
    (&["hook", "stop"], "hooks-init-ci.md"),
    (&["hook", "session-start"], "hooks-init-ci.md"),
    (&["history"], "history.md"),
    (&["serve"], "serve.md"),
    (&["cache", "stats"], "verify-yaml.md"),
    (&["cache", "prune"], "verify-yaml.md"),
    (&["cache", "clear"], "verify-yaml.md"),
    (&["mcp"], "mcp.md"),
    (&["worker"], "verify-yaml.md"),
    (&["workflow", "run"], "workflow-run.md"),
    (&["workflow", "submit"], "workflow-run.md"),
    (&["workflow", "status"], "workflow-views.md"),
    (&["workflow", "log"], "workflow-views.md"),
    (&["workflow", "list"], "workflow-views.md"),
    (&["workflow", "pause"], "workflow-views.md"),
];

/// The options `-h` lists, as (flag with its value name, one-line description), in order;
/// `--help` itself left out.
fn help_rows(help: &str) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    let mut in_options = false;
    for line in help.lines() {
        if line == "Options:" {
            in_options = true;
            continue;
        }
        if !line.starts_with(' ') {
            in_options = false;
        }
        if !in_options {
            continue;
        }
        let line = line.trim_start();
        let (flag, description) = line
            .split_once("  ")
            .map_or((line, ""), |(f, d)| (f, d.trim_start()));
        if flag != "-h, --help" {
            rows.push((flag.to_owned(), description.to_owned()));
        }
    }
    rows
}

/// The rows of the table under `### \`greenlight <command>\` flags` on a reference page, with
/// the Markdown escapes undone; `None` when the page has no such table.
fn table_rows(page: &str, command: &[&str]) -> Option<Vec<(String, String)>> {
    let heading = format!("### `greenlight {}` flags", command.join(" "));
    let at = page.lines().position(|l| l == heading)?;
    let rows = page
        .lines()
        .skip(at + 1)
        .skip_while(|l| l.is_empty())
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and its rule
        .map(|row| {
            let row = row.trim_start_matches("| ").trim_end_matches(" |");
            let (flag, description) = row.split_once(" | ").unwrap_or((row, ""));
            let unescape = |t: &str| {
                t.replace("\\|", "|")
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
            };
            (unescape(flag.trim_matches('`')), unescape(description))
        })
        .collect();
    Some(rows)
}

fn help(command: &[&str]) -> String {
    let mut args: Vec<&str> = command.to_vec();
    args.push("-h");
    let out = Cli::new(args).run();
    assert_eq!(out.code, 0, "{}", out.render());
    out.stdout
}

fn page(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/reference")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The reference page's flag table of every subcommand is what its `-h` prints: the same flags
/// in the same order, each with the same one-line description.
#[test]
fn every_subcommands_flag_table_matches_its_help() {
    let mut problems = Vec::new();
    for (command, name) in PAGES {
        let name = format!("docs/reference/{name}");
        let shown = help_rows(&help(command));
        assert!(
            !shown.is_empty(),
            "{command:?}: no options read from its -h"
        );
        let Some(documented) = table_rows(&page(&name[15..]), command) else {
            problems.push(format!(
                "{name} has no `### `greenlight {}` flags` table",
                command.join(" ")
            ));
            continue;
        };
        let flags = |rows: &[(String, String)]| -> BTreeSet<String> {
            rows.iter().map(|(f, _)| f.clone()).collect()
        };
        let (in_help, in_doc) = (flags(&shown), flags(&documented));
        for flag in in_help.difference(&in_doc) {
            problems.push(format!(
                "{name}: `greenlight {} {flag}` is in -h but not in the table",
                command.join(" ")
            ));
        }
        for flag in in_doc.difference(&in_help) {
            problems.push(format!(
                "{name}: the table lists `greenlight {} {flag}`, which -h does not",
                command.join(" ")
            ));
        }
        for (flag, description) in &documented {
            if let Some((_, said)) = shown.iter().find(|(f, _)| f == flag)
                && said != description
            {
                problems.push(format!(
                    "{name}: `greenlight {} {flag}`: the table says \"{description}\", -h says \"{said}\"",
                    command.join(" ")
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A `--no-…` flag's help says what turning it on does: it does not start with the opposite.
#[test]
fn no_flag_describes_itself_as_its_opposite() {
    let mut problems = Vec::new();
    for (command, _) in PAGES {
        let help = help(command);
        let lines: Vec<&str> = help.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            let Some(rest) = trimmed.strip_prefix("--no-") else {
                continue;
            };
            // The description follows on the same line (short help) or the next (long help).
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            let same = rest[name.len()..].trim_start();
            let description = if same.is_empty() {
                lines.get(i + 1).map_or("", |l| l.trim_start())
            } else {
                same
            };
            let positive = name.split('-').next().unwrap_or(&name);
            let first = description.split_whitespace().next().unwrap_or("");
            if first.to_lowercase().starts_with(positive) {
                problems.push(format!(
                    "greenlight {} --no-{name}: \"{description}\" describes the opposite",
                    command.join(" ")
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
