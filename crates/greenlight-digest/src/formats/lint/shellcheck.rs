//! shellcheck, in its `gcc` format (`file:line:col: warning: message [SC2086]`) and its default
//! `tty` format (`In file line N:`, the source line, `^-- SC2086 (info): message` under it,
//! `Did you mean:` with the fixed line, and a closing `For more information:` list).
//!
//! One rule: every finding fails the run, a note too (shellcheck exits 1 on any); errors are
//! errors, the other levels warnings.

use super::{Dialect, Finding, Read};
use crate::model::{Format, Severity};

#[derive(Debug, Default)]
pub(super) struct Shellcheck {
    /// `tty`: the file and line of the block being read.
    at: Option<(String, u32)>,
    /// `tty`: the next line is the quoted source line.
    source_next: bool,
    /// `tty`: inside `Did you mean:` or `For more information:` (until a blank line).
    in_extra: bool,
}

fn severity(level: &str) -> Option<Severity> {
    match level {
        "error" => Some(Severity::Error),
        "warning" | "info" | "note" | "style" => Some(Severity::Warning),
        _ => None,
    }
}

/// `message [SC2086]` → (message, "SC2086").
fn sc_code(msg: &str) -> Option<(&str, &str)> {
    let (m, code) = msg.rsplit_once(" [")?;
    let code = code.strip_suffix(']')?;
    let digits = code.strip_prefix("SC")?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some((m, code))
}

impl Dialect for Shellcheck {
    fn format(&self) -> Format {
        Format::Shellcheck
    }

    fn closes(&self) -> bool {
        false
    }

    fn any_finding_fails(&self) -> bool {
        true
    }

    fn read(&mut self, t: &str) -> Read {
        let source_next = std::mem::take(&mut self.source_next);
        if t.is_empty() {
            self.in_extra = false;
            return Read::Context;
        }
        // gcc: `deploy.sh:5:12: note: Double quote to prevent globbing. [SC2086]`
        if let Some((loc, rest)) = t.split_once(": ")
            && let Some((file, l, c)) = super::super::util::location(loc)
            && !loc.contains(' ')
            && let Some((level, msg)) = rest.split_once(": ")
            && let Some(severity) = severity(level)
            && let Some((msg, code)) = sc_code(msg)
        {
            return Read::Finding(
                Finding::at(severity, file, Some(l), c)
                    .code(Some(code))
                    .message(msg),
            );
        }
        // tty: `In deploy.sh line 5:`
        if let Some(rest) = t.strip_prefix("In ")
            && let Some(rest) = rest.strip_suffix(':')
            && let Some((file, l)) = rest.rsplit_once(" line ")
            && let Ok(l) = l.parse::<u32>()
        {
            self.at = Some((file.to_owned(), l));
            self.source_next = true;
            self.in_extra = false;
            return Read::Own;
        }
        if source_next {
            return Read::Context;
        }
        // tty: `           ^-----^ SC2086 (info): Double quote to prevent globbing.`
        let s = t.trim_start();
        if s.starts_with('^')
            && let Some((marker, rest)) = s.split_once(' ')
            && marker.bytes().all(|b| matches!(b, b'^' | b'-'))
            && let Some((code, rest)) = rest.split_once(" (")
            && let Some((level, msg)) = rest.split_once("): ")
            && let Some(severity) = severity(level)
            && let Some((file, l)) = &self.at
        {
            let column = u32::try_from(t.len() - s.len() + 1).ok();
            return Read::Finding(
                Finding::at(severity, file, Some(*l), column)
                    .code(Some(code))
                    .message(msg),
            );
        }
        if t == "Did you mean:" || t == "For more information:" {
            self.in_extra = true;
            return Read::Context;
        }
        if self.in_extra {
            return Read::Context;
        }
        Read::No
    }
}
