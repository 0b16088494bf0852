//! ruff: `check`'s concise rows (`file:line:col: F401 [*] message`) and full blocks (`F401 [*]
//! message`, then ` --> file:line:col` and an excerpt), `format --check`'s `unformatted:` blocks
//! and `Would reformat:` rows, and their closing lines (`Found 4 errors.`, `All checks
//! passed!`, `2 files would be reformatted`, `1 file already formatted`).
//!
//! One rule: every finding fails the run (ruff has no warnings), and a full block's header is a
//! finding only once its ` --> ` location follows.

use super::{Count, Dialect, Finding, Read, located, number_of};
use crate::model::{Format, Severity};

const SOURCES: &[&str] = &[".py", ".pyi", ".ipynb", ".toml"];

#[derive(Debug, Default)]
pub(super) struct Ruff {
    /// A full block's header: (code, message), waiting for its location.
    header: Option<(String, String)>,
    /// Inside a full block (its excerpt and help follow).
    in_block: bool,
}

/// `F401 [*] message` → ("F401", "message"): a rule code is capitals then digits.
fn coded(t: &str) -> Option<(&str, &str)> {
    let (code, rest) = t.split_once(' ')?;
    let letters = code.bytes().take_while(u8::is_ascii_uppercase).count();
    let digits = code.len() - letters;
    if letters == 0 || digits == 0 || !code[letters..].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((code, rest.strip_prefix("[*] ").unwrap_or(rest)))
}

impl Dialect for Ruff {
    fn format(&self) -> Format {
        Format::Ruff
    }

    fn closes(&self) -> bool {
        true
    }

    fn pending(&self) -> bool {
        self.header.is_some()
    }

    fn read(&mut self, t: &str) -> Read {
        if let Some(loc) = t.strip_prefix(" --> ")
            && let Some((code, msg)) = self.header.take()
            && let Some((file, l, c)) = super::super::util::location(loc)
        {
            self.in_block = true;
            return Read::Finding(
                Finding::at(Severity::Error, file, Some(l), c)
                    .code(Some(&code))
                    .message(&msg),
            );
        }
        if let Some((file, l, c, rest)) = located(t, SOURCES)
            && let Some((code, msg)) = coded(rest)
        {
            self.in_block = false;
            return Read::Finding(
                Finding::at(Severity::Error, file, Some(l), c)
                    .code(Some(code))
                    .message(msg),
            );
        }
        if !t.starts_with(' ') {
            if let Some((code, msg)) = coded(t) {
                self.header = Some((code.to_owned(), msg.to_owned()));
                self.in_block = false;
                return Read::Context;
            }
            if let Some(msg) = t.strip_prefix("unformatted: ") {
                self.header = Some(("unformatted".to_owned(), msg.to_owned()));
                self.in_block = false;
                return Read::Context;
            }
        }
        if let Some(file) = t.strip_prefix("Would reformat: ") {
            return Read::Finding(
                Finding::at(Severity::Error, file, None, None).message("would be reformatted"),
            );
        }
        if let Some(rest) = t.strip_prefix("Found ")
            && (rest.ends_with(" error.") || rest.ends_with(" errors."))
            && !rest.contains(" in ")
        {
            return Read::Count(Count {
                total: number_of(rest, "error"),
                ..Count::default()
            });
        }
        if t == "All checks passed!" {
            return Read::Closing;
        }
        // `format --check`: `2 files would be reformatted, 1 file already formatted`.
        if t.contains(" would be reformatted") || t.ends_with(" already formatted") {
            let (first, _) = t.split_once(',').unwrap_or((t, ""));
            let total = if first.contains(" would be reformatted") {
                super::super::util::first_number(first)
            } else {
                Some(0)
            };
            return Read::Count(Count {
                total,
                ..Count::default()
            });
        }
        if (t.starts_with("[*] ") && t.contains(" fixable with "))
            || (t.starts_with("No fixes available") && t.contains("hidden fix"))
        {
            return Read::Context;
        }
        // A full block: its excerpt (`2 | import os`, `  |        ^^`, `  - import os`,
        // `2 +`) and help.
        if self.in_block {
            let s = t.trim_start();
            let gutter = t
                .split_once(" |")
                .or_else(|| t.split_once(" +"))
                .or_else(|| t.split_once(" -"));
            if s.starts_with('|')
                || s.starts_with("help: ")
                || s.starts_with("= ")
                || s.starts_with("::: ")
                || gutter.is_some_and(|(n, _)| n.trim().bytes().all(|b| b.is_ascii_digit()))
            {
                return Read::Context;
            }
        }
        Read::No
    }
}
