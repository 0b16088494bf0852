//! `cargo nextest run`: one status line per test (`PASS [time] (i/n) binary test`), captured
//! output indented under each failure, and a `Summary [time] N tests run: …` line.
//!
//! One rule: status lines after the summary repeat failures already seen; they never add new
//! ones.

use super::libtest::{PanicBlock, panic_block_line};
use super::util::{clip, counts};
use super::{Bounded, Claim, Limits, Line, Parser, Report, Wake};
use crate::model::{Failure, Summary};

const FAILING: [&str; 7] = [
    "FAIL", "SIGSEGV", "SIGABRT", "SIGBUS", "SIGKILL", "TIMEOUT", "ABORT",
];

#[derive(Debug)]
pub(crate) struct Nextest {
    limits: Limits,
    active: bool,
    summary: Option<Summary>,
    after_summary: bool,
    failures: Bounded<Failure>,
    /// The failure whose captured output is being read.
    block: Option<usize>,
    panic: PanicBlock,
}

impl Nextest {
    pub(crate) fn new(limits: Limits) -> Self {
        Nextest {
            limits,
            active: false,
            summary: None,
            after_summary: false,
            failures: Bounded::new(limits.max_items),
            block: None,
            panic: PanicBlock::default(),
        }
    }

    fn capture(&mut self, i: usize, t: &str) {
        let max = self.limits.max_text;
        let Some(f) = self.failures.items.get_mut(i) else {
            return;
        };
        if panic_block_line(f, t, &mut self.panic, max) {
            return;
        }
        if f.message.is_none()
            && let Some(err) = t.strip_prefix("Error: ")
        {
            // A test returning `Err`: libtest prints the error and no panic.
            f.message = Some(clip(&format!("Error: {err}"), max));
        }
    }
}

/// Splits `FAIL [   0.203s] (2/7) digest-fail tests::adds` into status and test.
fn status_line(t: &str) -> Option<(&str, &str)> {
    let (status, rest) = t.split_once(' ')?;
    let rest = rest.trim_start();
    if !rest.starts_with('[') {
        return None;
    }
    let (_, after) = rest.split_once("] ")?;
    let after = after.trim_start();
    let test = if after.starts_with('(') {
        after.split_once(") ")?.1
    } else {
        after
    };
    Some((status, test))
}

impl Parser for Nextest {
    fn interested(&self, l: &Line<'_>) -> bool {
        self.active || l.first == b'S'
    }

    fn wake(&self) -> Wake {
        Wake::first(b"S")
    }

    fn engaged(&self) -> bool {
        self.active
    }

    fn line(&mut self, l: &Line<'_>) -> Claim {
        let line = l.text;
        let t = line.trim();
        if t.is_empty() {
            return if self.active { Claim::Yes } else { Claim::No };
        }
        if t.starts_with("Starting ") && t.contains(" tests across ") {
            self.active = true;
            self.after_summary = false;
            self.summary = None;
            return Claim::Open;
        }
        if !self.active {
            return Claim::No;
        }
        if t.starts_with("Nextest run ID ") || t.chars().all(|c| c == '─') {
            self.block = None;
            return Claim::Yes;
        }
        if let Some(rest) = t.strip_prefix("Summary [")
            && let Some((_, counts_part)) = rest.split_once(" run: ")
        {
            let mut s = Summary {
                passed: Some(0),
                failed: Some(0),
                skipped: Some(0),
                ..Summary::default()
            };
            let mut failed = 0;
            counts(counts_part, |word, n| match word {
                "passed" => s.passed = Some(n),
                "failed" | "timed" | "exec" => failed += n,
                "skipped" => s.skipped = Some(n),
                _ => {}
            });
            s.failed = Some(failed);
            self.summary = Some(s);
            self.after_summary = true;
            self.block = None;
            return Claim::Summary;
        }
        if let Some((status, test)) = status_line(t) {
            self.block = None;
            let failing = FAILING.contains(&status) || status == "LEAK-FAIL";
            if failing && !self.after_summary {
                let idx = self.failures.push(Failure {
                    name: clip(test, self.limits.max_text),
                    file: None,
                    line: None,
                    message: None,
                });
                self.block = idx;
                self.panic = PanicBlock::default();
            }
            return Claim::Yes;
        }
        if self.after_summary
            && (t.starts_with("error: test run failed")
                || t.starts_with("warning: ") && t.contains("tests were not run"))
        {
            return Claim::Yes;
        }
        if let Some(i) = self.block {
            if line.starts_with("  ") {
                self.capture(i, t);
                return Claim::Yes;
            }
            self.block = None;
        }
        Claim::No
    }

    fn finish(self: Box<Self>) -> Report {
        // The failures counted come from the tool's own summary line.
        let counted = self.summary.is_some();
        let expected = self.summary.as_ref().and_then(|s| s.failed).unwrap_or(0);
        let success = self.summary.as_ref().map(|s| s.failed == Some(0));
        Report {
            active: self.active,
            format: None,
            summary: self.summary,
            success,
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
