//! The TypeScript compiler, plain (`file(l,c): error TS…: msg`) and `--pretty`
//! (`file:l:c - error TS…: msg` with a source excerpt), ending in `Found N errors`.
//!
//! One rule: once tsc's output starts, every line must be a diagnostic, part of an excerpt, or
//! the summary; anything else marks the digest `unparsed-lines`.

use super::util::{clip, first_number};
use super::{Bounded, Claim, Limits, Line, MARK_TSC, Parser, Report, Wake};
use crate::model::{Diagnostic, Severity, Summary};

#[derive(Debug)]
pub(crate) struct Tsc {
    limits: Limits,
    active: bool,
    found: Option<u64>,
    pretty: bool,
    unparsed: bool,
    diagnostics: Bounded<Diagnostic>,
}

impl Tsc {
    pub(crate) fn new(limits: Limits) -> Self {
        Tsc {
            limits,
            active: false,
            found: None,
            pretty: false,
            unparsed: false,
            diagnostics: Bounded::new(limits.max_items),
        }
    }

    fn diagnostic(&self, t: &str) -> Option<(Diagnostic, bool)> {
        // plain: `src/a.ts(2,9): error TS2322: message`
        if let Some((head, rest)) = t.split_once("): ")
            && let Some((file, pos)) = head.rsplit_once('(')
            && let Some((l, c)) = pos.split_once(',')
            && let (Ok(l), Ok(c)) = (l.parse::<u32>(), c.parse::<u32>())
        {
            let (severity, code, msg) = severity_code(rest)?;
            return Some((self.make(severity, file, l, c, code, msg), false));
        }
        // pretty: `src/a.ts:2:9 - error TS2322: message`
        let (head, rest) = t.split_once(" - ")?;
        let mut parts = head.rsplitn(3, ':');
        let c = parts.next()?.parse::<u32>().ok()?;
        let l = parts.next()?.parse::<u32>().ok()?;
        let file = parts.next()?;
        let (severity, code, msg) = severity_code(rest)?;
        Some((self.make(severity, file, l, c, code, msg), true))
    }

    fn make(
        &self,
        severity: Severity,
        file: &str,
        l: u32,
        c: u32,
        code: &str,
        msg: &str,
    ) -> Diagnostic {
        Diagnostic {
            severity,
            file: Some(file.to_owned()),
            line: Some(l),
            column: Some(c),
            code: Some(code.to_owned()),
            message: clip(msg, self.limits.max_text),
            owner: None,
        }
    }
}

/// `error TS2322: message` → (Error, "TS2322", "message").
fn severity_code(s: &str) -> Option<(Severity, &str, &str)> {
    let (sev, rest) = s.split_once(' ')?;
    let severity = match sev {
        "error" => Severity::Error,
        "warning" => Severity::Warning,
        _ => return None,
    };
    let (code, msg) = rest.split_once(": ")?;
    if !code.starts_with("TS") || !code[2..].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((severity, code, msg))
}

impl Parser for Tsc {
    fn interested(&self, l: &Line<'_>) -> bool {
        // Every tsc diagnostic carries ` TS<code>: ` (the line's marker).
        self.active || l.first == b'F' || l.markers & MARK_TSC != 0
    }

    fn wake(&self) -> Wake {
        Wake::first(b"F").or_markers(MARK_TSC)
    }

    fn engaged(&self) -> bool {
        self.active
    }

    fn line(&mut self, l: &Line<'_>) -> Claim {
        let line = l.text;
        let t = line.trim_end();
        if let Some((d, pretty)) = self.diagnostic(t.trim_start()) {
            self.active = true;
            self.pretty |= pretty;
            self.diagnostics.push(d);
            // Plain output has no closing count: each complete diagnostic line is, so far, the
            // last word (anything unparsed after it still makes the digest partial).
            return if self.pretty || self.found.is_some() {
                Claim::Yes
            } else {
                Claim::Summary
            };
        }
        // Only after a diagnostic of tsc's own: mypy, ruff and biome close with `Found N
        // errors` too, and tsc prints nothing when it finds nothing.
        if self.active
            && let Some(rest) = t.strip_prefix("Found ")
            && (rest.contains(" error") || rest.contains(" errors"))
        {
            self.active = true;
            self.found = Some(first_number(rest).unwrap_or(0));
            return Claim::Summary;
        }
        if !self.active {
            return Claim::No;
        }
        let s = t.trim_start();
        let excerpt = s.is_empty()
            || s.starts_with(|c: char| c.is_ascii_digit())
            || s.chars().all(|c| c == '~' || c == ' ')
            || s == "Errors  Files"
            || line.starts_with("  ");
        if excerpt {
            return Claim::Yes;
        }
        self.unparsed = true;
        Claim::No
    }

    fn finish(self: Box<Self>) -> Report {
        let errors = self
            .diagnostics
            .items
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count() as u64
            + self.diagnostics.dropped;
        // Plain output has no closing count; a run whose every line parsed stands on its own.
        let total = self
            .found
            .or((!self.pretty && self.active).then_some(errors));
        let summary = total.map(|n| Summary {
            errors: Some(n),
            warnings: Some(0),
            ..Summary::default()
        });
        Report {
            active: self.active,
            format: None,
            success: total.map(|n| n == 0),
            summary,
            expected_failures: 0,
            expected_errors: total.unwrap_or(0),
            dropped: self.diagnostics.dropped > 0,
            failures: Vec::new(),
            diagnostics: self.diagnostics.items,
            unparsed: self.unparsed,
            counted: false,
            count_mismatch: false,
            unconfirmed_markers: false,
            ..Report::default()
        }
    }
}
