//! pyright: a file's path alone on a line, its findings indented below it (`  /abs/a.py:7:12 -
//! error: message`, the message's further lines indented deeper, the last ending in
//! `(reportRule)`), and `N errors, N warnings, N informations`.
//!
//! One rule: the rule named at the end of a finding's last line is the finding's code.

use super::{Count, Dialect, Finding, Read, number_of};
use crate::model::{Diagnostic, Format, Severity};

#[derive(Debug, Default)]
pub(super) struct Pyright;

/// `(reportReturnType)` at the end of `t` → `reportReturnType`.
fn rule(t: &str) -> Option<&str> {
    let (_, r) = t.rsplit_once(" (")?;
    let r = r.strip_suffix(')')?;
    (r.starts_with("report") && !r.contains(' ')).then_some(r)
}

impl Dialect for Pyright {
    fn format(&self) -> Format {
        Format::Pyright
    }

    fn closes(&self) -> bool {
        true
    }

    fn read(&mut self, t: &str) -> Read {
        if let Some(row) = t.strip_prefix("  ")
            && !row.starts_with(char::is_whitespace)
            && let Some((loc, rest)) = row.split_once(" - ")
            && let Some((file, l, c)) = super::super::util::location(loc)
            && !loc.contains(' ')
        {
            let (severity, msg) = if let Some(m) = rest.strip_prefix("error: ") {
                (Severity::Error, m)
            } else if let Some(m) = rest.strip_prefix("warning: ") {
                (Severity::Warning, m)
            } else if let Some(m) = rest.strip_prefix("information: ") {
                (Severity::Warning, m)
            } else {
                return Read::No;
            };
            let code = rule(msg);
            let msg = match code {
                Some(c) => msg.strip_suffix(&format!(" ({c})")).unwrap_or(msg),
                None => msg,
            };
            return Read::Finding(
                Finding::at(severity, file, Some(l), c)
                    .code(code)
                    .message(msg),
            );
        }
        // A message's further lines: indented deeper, pyright pads them with no-break spaces.
        if t.strip_prefix("  ")
            .is_some_and(|r| r.starts_with(char::is_whitespace))
        {
            return Read::Context;
        }
        if !t.starts_with(' ') && !t.contains(' ') && (t.ends_with(".py") || t.ends_with(".pyi")) {
            return Read::Context;
        }
        // `3 errors, 0 warnings, 0 informations` (pyright writes `1 error`, `1 warning`).
        if t.contains(" warning")
            && t.contains(" information")
            && t.starts_with(|c: char| c.is_ascii_digit())
        {
            let errors = number_of(t, "error");
            let warnings = number_of(t, "warning").unwrap_or(0);
            let infos = number_of(t, "information").unwrap_or(0);
            return Read::Count(Count {
                errors,
                others: Some(warnings + infos),
                total: None,
            });
        }
        if t == "No configuration file found."
            || t.starts_with("Searching for source files")
            || (t.starts_with("Found ") && t.contains(" source file"))
        {
            return Read::Context;
        }
        Read::No
    }

    fn amend(&mut self, t: &str, last: &mut Diagnostic, _max_text: usize) {
        if last.code.is_none()
            && let Some(r) = rule(t)
        {
            last.code = Some(r.to_owned());
        }
    }
}
