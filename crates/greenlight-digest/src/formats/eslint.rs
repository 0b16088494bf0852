//! eslint's default `stylish` formatter: a file path, its indented `line:col severity message
//! rule` rows, and `✖ N problems (E errors, W warnings)`.
//!
//! One rule: a row belongs to the last unindented line before it, which stylish prints as the
//! file path.

use super::util::clip;
use super::{Bounded, Claim, Limits, Line, Parser, Report, Wake};
use crate::model::{Diagnostic, Severity, Summary};

#[derive(Debug)]
pub(crate) struct Eslint {
    limits: Limits,
    active: bool,
    file: Option<String>,
    summary: Option<Summary>,
    diagnostics: Bounded<Diagnostic>,
}

impl Eslint {
    pub(crate) fn new(limits: Limits) -> Self {
        Eslint {
            limits,
            active: false,
            file: None,
            summary: None,
            diagnostics: Bounded::new(limits.max_items),
        }
    }
}

impl Parser for Eslint {
    fn interested(&self, l: &Line<'_>) -> bool {
        self.active || (l.first == 0xE2) || (l.indent > 0 && l.first.is_ascii_digit())
    }

    fn wake(&self) -> Wake {
        Wake::first(b"\xE20123456789")
    }

    fn engaged(&self) -> bool {
        self.active
    }

    fn line(&mut self, l: &Line<'_>) -> Claim {
        let line = l.text;
        if !self.active && l.indent > 0 {
            // stylish prints the file path on the line right before its first row.
            let prev = crate::normalize::view(l.prev);
            if !prev.starts_with(' ') && !prev.trim().is_empty() {
                self.file = Some(prev.trim().to_owned());
            }
        }
        let t = line.trim();
        if t.is_empty() {
            return if self.active { Claim::Yes } else { Claim::No };
        }
        if let Some(rest) = t.strip_prefix("✖ ")
            && rest.contains(" problem")
        {
            let mut s = Summary {
                errors: Some(0),
                warnings: Some(0),
                ..Summary::default()
            };
            super::util::counts(rest, |w, n| match w {
                "error" | "errors" => s.errors = Some(n),
                "warning" | "warnings" => s.warnings = Some(n),
                _ => {}
            });
            self.active = true;
            self.summary = Some(s);
            return Claim::Summary;
        }
        if !line.starts_with(' ') {
            self.file = Some(t.to_owned());
            return if self.active { Claim::Yes } else { Claim::No };
        }
        let mut words = t.split_whitespace();
        if let (Some(pos), Some(sev)) = (words.next(), words.next())
            && let Some((l, c)) = pos.split_once(':')
            && let (Ok(l), Ok(c)) = (l.parse::<u32>(), c.parse::<u32>())
            && let Some(file) = &self.file
        {
            let severity = match sev {
                "error" => Severity::Error,
                "warning" => Severity::Warning,
                _ => return Claim::No,
            };
            let rest = t[t.find(sev).map_or(0, |i| i + sev.len())..].trim();
            let (message, rule) = match rest.rsplit_once("  ") {
                Some((m, r)) if !r.trim().contains(' ') => (m.trim(), Some(r.trim().to_owned())),
                _ => (rest, None),
            };
            self.active = true;
            let d = Diagnostic {
                severity,
                file: Some(file.clone()),
                line: Some(l),
                column: Some(c),
                code: rule,
                message: clip(message, self.limits.max_text),
                owner: None,
            };
            self.diagnostics.push(d);
            return Claim::Yes;
        }
        if self.active && t.contains("potentially fixable with the `--fix` option") {
            return Claim::Yes;
        }
        Claim::No
    }

    fn finish(self: Box<Self>) -> Report {
        let expected = self.summary.as_ref().and_then(|s| s.errors).unwrap_or(0);
        Report {
            active: self.active,
            format: None,
            success: self.summary.as_ref().map(|s| s.errors == Some(0)),
            summary: self.summary,
            expected_failures: 0,
            expected_errors: expected,
            dropped: self.diagnostics.dropped > 0,
            failures: Vec::new(),
            diagnostics: self.diagnostics.items,
            unparsed: false,
            counted: false,
            count_mismatch: false,
            unconfirmed_markers: false,
            ..Report::default()
        }
    }
}
