//! The compact form: exit outcome, format, counts, then every failure and diagnostic.
//!
//! One rule: all or nothing. A rendering that does not fit the budget is not produced; nothing
//! is ever sliced to fit.

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
    for f in &d.failures {
        let _ = write!(out, "FAIL {}", f.name);
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
        out.push('\n');
        if out.len() > budget {
            return None;
        }
    }
    for x in &d.diagnostics {
        out.push_str(match x.severity {
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
        let _ = writeln!(out, ": {}", x.message);
        if out.len() > budget {
            return None;
        }
    }
    (out.len() <= budget).then_some(out)
}
