//! deno's `lint` (`error[no-var]: message`, then ` --> /abs/a.js:1:1`, an excerpt, a hint and
//! its docs link, closing with `Found N problems` and `Checked N files`) and `fmt --check`
//! (`from /abs/a.js:` and its diff per file, then `error: Found N not formatted files in M
//! files`, or `Checked N files` when all are formatted).
//!
//! One rule: a lint header is a finding only once its ` --> ` location follows; every finding
//! fails the run.

use super::{Count, Dialect, Finding, Read, number_of};
use crate::model::{Format, Severity};

#[derive(Debug, Default)]
pub(super) struct Deno {
    /// A lint header: (rule, message), waiting for its location.
    header: Option<(String, String)>,
    /// Inside a finding's excerpt or diff.
    in_block: bool,
}

impl Dialect for Deno {
    fn format(&self) -> Format {
        Format::Deno
    }

    fn closes(&self) -> bool {
        true
    }

    fn pending(&self) -> bool {
        self.header.is_some()
    }

    fn read(&mut self, t: &str) -> Read {
        if t.is_empty() {
            return Read::Context;
        }
        if let Some(loc) = t.strip_prefix(" --> ")
            && let Some((rule, msg)) = self.header.take()
            && let Some((file, l, c)) = super::super::util::location(loc)
        {
            self.in_block = true;
            return Read::Finding(
                Finding::at(Severity::Error, file, Some(l), c)
                    .code(Some(&rule))
                    .message(&msg),
            );
        }
        if let Some(rest) = t.strip_prefix("error[")
            && let Some((rule, msg)) = rest.split_once("]: ")
            && !rule.is_empty()
            && rule.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
        {
            self.header = Some((rule.to_owned(), msg.to_owned()));
            self.in_block = false;
            return Read::Context;
        }
        if let Some(file) = t.strip_prefix("from ").and_then(|f| f.strip_suffix(':')) {
            self.in_block = true;
            return Read::Finding(
                Finding::at(Severity::Error, file, None, None).message("not formatted"),
            );
        }
        if let Some(rest) = t.strip_prefix("error: Found ")
            && rest.contains(" not formatted file")
        {
            self.in_block = false;
            return Read::Count(Count {
                total: super::super::util::first_number(rest),
                ..Count::default()
            });
        }
        if let Some(rest) = t.strip_prefix("Found ")
            && (rest.ends_with(" problem") || rest.ends_with(" problems"))
        {
            self.in_block = false;
            return Read::Count(Count {
                total: number_of(rest, "problem"),
                ..Count::default()
            });
        }
        if t.starts_with("Checked ") && (t.ends_with(" file") || t.ends_with(" files")) {
            return Read::Closing;
        }
        // After `fmt --check` fails, deno prints an empty backtrace of its own error.
        if t == "Stack backtrace:" || t.trim_start().ends_with(": <unknown>") {
            return Read::Context;
        }
        if self.in_block {
            let s = t.trim_start();
            let gutter = s
                .split_once('|')
                .is_some_and(|(n, _)| n.trim().bytes().all(|b| b.is_ascii_digit()));
            if gutter || s.starts_with("= hint: ") || s.starts_with("docs: ") {
                return Read::Context;
            }
        }
        Read::No
    }
}
