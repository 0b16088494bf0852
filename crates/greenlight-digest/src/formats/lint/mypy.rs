//! mypy: `file.py:line: error: message  [code]` (a column with `--show-column-numbers`),
//! `--pretty`'s wrapped messages and excerpts, and `Found N errors in M files (checked K source
//! files)` or `Success: no issues found in K source files`.
//!
//! One rule: notes belong to the error before them; only errors and warnings are findings.

use super::{Count, Dialect, Finding, Read, located, number_of, unwrap_into};
use crate::model::{Diagnostic, Format, Severity};

const SOURCES: &[&str] = &[".py", ".pyi"];

#[derive(Debug, Default)]
pub(super) struct Mypy {
    /// `--pretty` wrapped the last finding's message: its `[code]` is still to come.
    wrapped: bool,
    /// A finding's code never came (mypy names one for every error): part of it was lost.
    lost: bool,
}

/// `message  [code]` → (message, code).
fn split_code(msg: &str) -> (&str, Option<&str>) {
    match msg.rsplit_once("  [") {
        Some((m, code)) if code.ends_with(']') && !code.contains(' ') => {
            (m, Some(&code[..code.len() - 1]))
        }
        _ => (msg, None),
    }
}

impl Dialect for Mypy {
    fn format(&self) -> Format {
        Format::Mypy
    }

    fn closes(&self) -> bool {
        true
    }

    fn pending(&self) -> bool {
        self.wrapped || self.lost
    }

    fn read(&mut self, t: &str) -> Read {
        if let Some((file, l, c, rest)) = located(t, SOURCES) {
            let (severity, msg) = if let Some(m) = rest.strip_prefix("error: ") {
                (Severity::Error, m)
            } else if let Some(m) = rest.strip_prefix("warning: ") {
                (Severity::Warning, m)
            } else if rest.starts_with("note: ") {
                return Read::Context;
            } else {
                return Read::No;
            };
            let (msg, code) = split_code(msg);
            self.lost |= self.wrapped;
            self.wrapped = code.is_none();
            return Read::Finding(
                Finding::at(severity, file, Some(l), c)
                    .code(code)
                    .message(msg),
            );
        }
        if let Some(rest) = t.strip_prefix("Found ")
            && rest.contains(" in ")
            && rest.contains("(checked ")
        {
            self.lost |= self.wrapped;
            self.wrapped = false;
            return Read::Count(Count {
                errors: number_of(rest, "error"),
                others: Some(0),
                total: None,
            });
        }
        if t.starts_with("Success: no issues found in ") {
            return Read::Count(Count {
                errors: Some(0),
                others: Some(0),
                total: Some(0),
            });
        }
        // `--pretty`: the excerpt is indented; a wrapped message's rest is not.
        if t.starts_with("    ") || self.wrapped {
            return Read::Context;
        }
        Read::No
    }

    fn amend(&mut self, t: &str, last: &mut Diagnostic, max_text: usize) {
        if !self.wrapped || t.starts_with("    ") {
            return;
        }
        let (rest, code) = match t.strip_prefix('[').and_then(|c| c.strip_suffix(']')) {
            Some(code) if !code.contains(' ') => ("", Some(code)),
            _ => split_code(t),
        };
        unwrap_into(&mut last.message, rest, max_text);
        if let Some(code) = code {
            last.code = Some(code.to_owned());
            self.wrapped = false;
        }
    }
}
