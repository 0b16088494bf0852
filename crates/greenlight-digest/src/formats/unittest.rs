//! `python -m unittest`: `FAIL:` / `ERROR:` blocks between rules of `=` and `-`, then
//! `Ran N tests in …` and `OK` or `FAILED (failures=…, errors=…)`.
//!
//! One rule: a block's message is the first unindented line after its traceback, which is
//! where Python prints the exception.

use super::util::clip;
use super::{Bounded, Claim, Limits, Line, Parser, Report, Wake};
use crate::model::{Failure, Summary};

#[derive(Debug)]
pub(crate) struct Unittest {
    limits: Limits,
    active: bool,
    ran: Option<u64>,
    summary: Option<Summary>,
    success: Option<bool>,
    failures: Bounded<Failure>,
    block: Option<usize>,
    in_traceback: bool,
}

impl Unittest {
    pub(crate) fn new(limits: Limits) -> Self {
        Unittest {
            limits,
            active: false,
            ran: None,
            summary: None,
            success: None,
            failures: Bounded::new(limits.max_items),
            block: None,
            in_traceback: false,
        }
    }
}

fn is_rule(t: &str, c: char) -> bool {
    t.len() >= 20 && t.chars().all(|x| x == c)
}

impl Parser for Unittest {
    fn interested(&self, l: &Line<'_>) -> bool {
        self.engaged() || self.wake().first.contains(&l.first)
    }

    fn wake(&self) -> Wake {
        Wake::first(b"FER=")
    }

    fn engaged(&self) -> bool {
        self.active || !self.failures.items.is_empty()
    }

    fn line(&mut self, l: &Line<'_>) -> Claim {
        let line = l.text;
        let t = line.trim_end();
        if is_rule(t, '=') {
            self.block = None;
            return if self.active || !self.failures.items.is_empty() {
                Claim::Yes
            } else {
                Claim::No
            };
        }
        if let Some(rest) = t
            .strip_prefix("FAIL: ")
            .or_else(|| t.strip_prefix("ERROR: "))
            && rest.ends_with(')')
        {
            self.block = self.failures.push(Failure {
                name: clip(rest, self.limits.max_text),
                file: None,
                line: None,
                message: None,
            });
            self.in_traceback = false;
            return Claim::Yes;
        }
        if let Some(rest) = t.strip_prefix("Ran ")
            && let Some((n, after)) = rest.split_once(' ')
            && (after.starts_with("tests in ") || after.starts_with("test in "))
            && let Ok(n) = n.parse::<u64>()
        {
            self.active = true;
            self.ran = Some(n);
            self.block = None;
            return Claim::Yes;
        }
        if let Some(ran) = self.ran
            && self.summary.is_none()
            && (t == "OK" || t.starts_with("OK (") || t.starts_with("FAILED ("))
        {
            let mut s = Summary {
                failed: Some(0),
                skipped: Some(0),
                errors: Some(0),
                ..Summary::default()
            };
            let mut bad_pass = 0;
            if let Some((_, list)) = t.split_once('(') {
                for part in list.trim_end_matches(')').split(", ") {
                    let Some((k, v)) = part.split_once('=') else {
                        continue;
                    };
                    let Ok(v) = v.parse::<u64>() else { continue };
                    match k {
                        "failures" => s.failed = Some(v),
                        "errors" => s.errors = Some(v),
                        "skipped" | "expected failures" => s.skipped = s.skipped.map(|x| x + v),
                        "unexpected successes" => bad_pass += v,
                        _ => {}
                    }
                }
            }
            let not_passed = s.failed.unwrap_or(0) + s.errors.unwrap_or(0) + s.skipped.unwrap_or(0);
            s.passed = Some(ran.saturating_sub(not_passed).saturating_sub(bad_pass) + bad_pass);
            self.success = Some(t.starts_with("OK"));
            self.summary = Some(s);
            return Claim::Summary;
        }
        if self.ran.is_some() && t.is_empty() {
            return Claim::Yes;
        }
        if let Some(i) = self.block {
            let max = self.limits.max_text;
            if let Some(f) = self.failures.items.get_mut(i) {
                if t.starts_with("Traceback (most recent call last)") {
                    self.in_traceback = true;
                } else if let Some(rest) = t.strip_prefix("  File \"") {
                    // Frames run outermost first: the last one in the project is where it
                    // failed; the standard library's and installed packages' are skipped.
                    if let Some((file, after)) = rest.split_once("\", line ")
                        && !super::util::external(file)
                    {
                        f.file = Some(file.to_owned());
                        f.line = after.split(',').next().and_then(|n| n.parse().ok());
                    }
                } else if self.in_traceback
                    && !t.is_empty()
                    && !t.starts_with(' ')
                    && !is_rule(t, '-')
                {
                    self.in_traceback = false;
                    if f.message.is_none() {
                        f.message = Some(clip(t, max));
                    }
                }
            }
            return Claim::Yes;
        }
        if is_rule(t, '-') && (self.ran.is_none() || self.summary.is_none()) {
            return Claim::Yes;
        }
        if t.ends_with(" ... ok") || t.contains(") ... ") {
            return Claim::Yes;
        }
        if !t.is_empty()
            && t.chars()
                .all(|c| matches!(c, '.' | 'F' | 'E' | 's' | 'x' | 'u'))
            && self.summary.is_none()
        {
            return Claim::Yes;
        }
        Claim::No
    }

    fn finish(self: Box<Self>) -> Report {
        // The failures counted come from the tool's own summary line.
        let counted = self.summary.is_some();
        let expected = self.summary.as_ref().map(Summary::failing).unwrap_or(0);
        Report {
            active: self.active,
            format: None,
            summary: self.summary,
            success: self.success,
            expected_failures: expected,
            expected_errors: 0,
            dropped: self.failures.dropped > 0,
            failures: self.failures.items,
            diagnostics: Vec::new(),
            unparsed: false,
            counted,
            count_mismatch: false,
            unconfirmed_markers: false,
            ..Report::default()
        }
    }
}
