//! `prettier --check`: `Checking formatting...`, one `[warn] file` per file to reformat, and
//! `[warn] Code style issues found in N files. Run Prettier with --write to fix.` or `All
//! matched files use Prettier code style!`; a file it cannot parse is an `[error] file: …` row.
//!
//! One rule: every file listed is a finding that fails the run.

use super::{Count, Dialect, Finding, Read};
use crate::model::{Format, Severity};

#[derive(Debug)]
pub(super) struct Prettier;

impl Dialect for Prettier {
    fn format(&self) -> Format {
        Format::Prettier
    }

    fn closes(&self) -> bool {
        true
    }

    fn read(&mut self, t: &str) -> Read {
        if t == "Checking formatting..." {
            return Read::Own;
        }
        if t == "All matched files use Prettier code style!" {
            return Read::Closing;
        }
        if let Some(rest) = t.strip_prefix("[warn] Code style issues found in ") {
            let total = if rest.starts_with("the above file") {
                Some(1)
            } else {
                super::super::util::first_number(rest)
            };
            return Read::Count(Count {
                total,
                ..Count::default()
            });
        }
        if let Some(file) = t.strip_prefix("[warn] ") {
            return Read::Finding(
                Finding::at(Severity::Error, file, None, None).message("not formatted"),
            );
        }
        if let Some(rest) = t.strip_prefix("[error] ")
            && let Some((file, msg)) = rest.split_once(": ")
        {
            return Read::Finding(Finding::at(Severity::Error, file, None, None).message(msg));
        }
        if t.starts_with("[error] ") {
            return Read::Context;
        }
        Read::No
    }
}
