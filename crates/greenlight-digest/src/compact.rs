//! The compact form: exit outcome, format, counts, then every failure and diagnostic.
//!
//! One rule: all or nothing. A rendering that does not fit the budget is not produced; nothing
//! is ever sliced to fit. When it cannot stand in for the output, [`named`] names what was
//! parsed and says the list is not complete.

use std::fmt::Write as _;

use crate::model::{Classification, Digest, Format, Severity};

pub(crate) fn render(d: &Digest, budget: usize) -> Option<String> {
    if d.classification != Classification::Recognised {
        return None;
    }
    let mut out = String::new();
    match d.exit_code {
        Some(0) => out.push_str("exit 0"),
        Some(code) => {
            let _ = write!(out, "exit {code}");
        }
        None if d.exit_code_given => out.push_str("killed"),
        None => out.push_str("exit ?"),
    }
    if let Some(format) = d.format {
        let _ = write!(out, " · {format}");
    }
    if d.format == Some(Format::ProblemMatcher) {
        // Which matchers found the problems, in the order they first did.
        let mut owners: Vec<&str> = Vec::new();
        for owner in d.diagnostics.iter().filter_map(|x| x.owner.as_deref()) {
            if !owners.contains(&owner) {
                owners.push(owner);
            }
        }
        let _ = write!(out, " ({})", owners.join(", "));
    }
    if let Some(s) = &d.summary {
        let mut parts = Vec::new();
        // "passed", "failed" and "skipped" read the same for one; the nouns take a plural.
        for (n, one, many) in [
            (s.passed, "passed", "passed"),
            (s.failed, "failed", "failed"),
            (s.skipped, "skipped", "skipped"),
            (s.errors, "error", "errors"),
            (s.warnings, "warning", "warnings"),
        ] {
            if let Some(n) = n {
                parts.push(format!("{n} {}", if n == 1 { one } else { many }));
            }
        }
        if !parts.is_empty() {
            let _ = write!(out, " · {}", parts.join(", "));
        }
    }
    out.push('\n');
    // One line per failure, then per diagnostic: the same lines [`named`] lists in full.
    let lines = d.failures.iter().map(failure_line);
    for line in lines.chain(d.diagnostics.iter().map(diagnostic_line)) {
        out.push_str(&line);
        out.push('\n');
        if out.len() > budget {
            return None;
        }
    }
    (out.len() <= budget).then_some(out)
}

/// The line that ends a list of parsed failures when the output was not read completely.
const NOT_COMPLETE_PARTIAL: &str =
    "(this list is not complete: greenlight could not read all of the output; its tail follows)";
/// The line that ends it when the output was read completely but its digest is too long.
const NOT_COMPLETE_TOO_LONG: &str = "(this list is not complete: every failure is named, but the details do not fit; the output's tail follows)";

/// Every parsed failure and diagnostic named within `budget` bytes, for when the compact form
/// cannot stand in for the output: the first ones in full (name, file:line, message), then
/// "and N more: name, name, …", then a line saying the list is not complete and why. `None` when nothing was parsed.
///
/// Why names before details: an agent that reads only the tail misses every failure printed
/// before it, so each name is worth more than the next message.
pub(crate) fn named(d: &Digest, budget: usize) -> Option<String> {
    // (the line in full, the short name the "and N more" line uses)
    let entries: Vec<(String, String)> = d
        .failures
        .iter()
        .map(|f| (failure_line(f), f.name.clone()))
        .chain(d.diagnostics.iter().map(|x| {
            let short = match (&x.file, x.line) {
                (Some(file), Some(line)) => format!("{file}:{line}"),
                (Some(file), None) => file.clone(),
                _ => x.message.clone(),
            };
            (diagnostic_line(x), short)
        }))
        .collect();
    if entries.is_empty() {
        return None;
    }
    let not_complete = if d.classification == Classification::Recognised {
        NOT_COMPLETE_TOO_LONG
    } else {
        NOT_COMPLETE_PARTIAL
    };
    let fixed = not_complete.len() + 1;
    // Bytes the short names of entries `i..` take in the "and N more" line.
    let names_from = |i: usize| -> usize {
        entries[i..]
            .iter()
            .map(|(_, name)| name.len() + 2)
            .sum::<usize>()
            + 24
    };
    let mut out = String::new();
    let mut full = 0;
    while full < entries.len() {
        let line = &entries[full].0;
        let rest = if full + 1 < entries.len() {
            names_from(full + 1)
        } else {
            0
        };
        if out.len() + line.len() + 1 + rest + fixed > budget {
            break;
        }
        out.push_str(line);
        out.push('\n');
        full += 1;
    }
    if full < entries.len() {
        let more = entries.len() - full;
        let mut line = format!("and {more} more: ");
        for (i, (_, name)) in entries[full..].iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let left = entries.len() - full - i;
            // Keep room to say how many names did not fit.
            let tail_room = format!(", … ({left} not named)").len();
            if out.len() + line.len() + sep.len() + name.len() + tail_room + 1 + fixed > budget {
                let _ = write!(line, "{sep}… ({left} not named)");
                break;
            }
            line.push_str(sep);
            line.push_str(name);
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(not_complete);
    out.push('\n');
    Some(out)
}

fn failure_line(f: &crate::model::Failure) -> String {
    let mut out = format!("FAIL {}", f.name);
    match (&f.file, f.line) {
        (Some(file), Some(line)) => {
            let _ = write!(out, " ({file}:{line})");
        }
        (Some(file), None) => {
            let _ = write!(out, " ({file})");
        }
        _ => {}
    }
    if let Some(m) = &f.message {
        let _ = write!(out, ": {m}");
    }
    out
}

fn diagnostic_line(x: &crate::model::Diagnostic) -> String {
    let mut out = String::from(match x.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    });
    if let Some(code) = &x.code {
        let _ = write!(out, "[{code}]");
    }
    match (&x.file, x.line, x.column) {
        (Some(file), Some(line), Some(col)) => {
            let _ = write!(out, " {file}:{line}:{col}");
        }
        (Some(file), Some(line), None) => {
            let _ = write!(out, " {file}:{line}");
        }
        (Some(file), None, _) => {
            let _ = write!(out, " {file}");
        }
        _ => {}
    }
    let _ = write!(out, ": {}", x.message);
    out
}

#[cfg(test)]
mod tests {
    use crate::model::Failure;
    use crate::{DigestOptions, digest};

    fn with_failures(n: usize) -> crate::Digest {
        let mut d = digest(b"", Some(1), &DigestOptions::default());
        d.failures = (0..n)
            .map(|i| Failure {
                name: format!("suite > case {i}"),
                file: Some("a.test.ts".into()),
                line: Some(u32::try_from(i).unwrap() + 1),
                message: Some("expected 1 to be 2".into()),
            })
            .collect();
        d
    }

    #[test]
    fn names_the_first_in_full_then_the_rest_by_name() {
        let named = with_failures(31).named_failures(1200).unwrap();
        assert!(named.len() <= 1200, "{}", named.len());
        assert!(named.starts_with("FAIL suite > case 0 (a.test.ts:1): expected 1 to be 2\n"));
        let more = named.lines().find(|l| l.starts_with("and ")).unwrap();
        for i in 0..31 {
            assert!(
                named.contains(&format!("suite > case {i}\n"))
                    || named.contains(&format!("suite > case {i},"))
                    || named.contains(&format!("suite > case {i} (")),
                "case {i}: {named}"
            );
        }
        assert!(more.starts_with("and "), "{more}");
        assert!(named.trim_end().ends_with("its tail follows)"), "{named}");
    }

    #[test]
    fn a_budget_too_small_for_every_name_says_how_many_are_not_named() {
        let named = with_failures(200).named_failures(600).unwrap();
        assert!(named.len() <= 600, "{}", named.len());
        assert!(named.contains(" not named)"), "{named}");
    }

    #[test]
    fn nothing_parsed_names_nothing() {
        assert_eq!(with_failures(0).named_failures(1000), None);
    }
}
