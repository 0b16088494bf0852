//! `deno test`'s default reporter: `running N tests from ./x_test.ts`, a line per test and step
//! (`name ... ok (1ms)`, `  step ... FAILED (1ms)`), an ` ERRORS ` section with one block per
//! failure (`name => ./x_test.ts:8:6`, `error: AssertionError: …`, the stack), a ` FAILURES `
//! list of the same names, and the closing count `FAILED | 2 passed | 3 failed (1 step) | 1
//! ignored (1s)`. A run that fails to type-check prints the compiler's findings instead
//! (`TS2345 [ERROR]: …` with its `at file:///…:5:25`) and ends with `error: Type checking
//! failed.`
//!
//! One rule: the closing count decides what must be listed. Every test and step that failed
//! on its own error is named in the FAILURES list (a test that failed only because of its
//! steps is not), so the list must hold exactly the failed tests and steps less the ones that
//! failed "due to" their steps; anything else is a count mismatch.

use super::util::{clip, external, location};
use super::{Bounded, Claim, Limits, Line, Parser, Report, Wake};
use crate::model::{Diagnostic, Failure, Severity, Summary};

/// Where in the run's output the last line was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    /// Tests and steps running.
    Progress,
    /// Inside the ` ERRORS ` section.
    Errors,
    /// Inside the ` FAILURES ` list.
    Failures,
    /// After the closing count or `error: Type checking failed.`: deno's own closing lines.
    Closing,
    /// A Rust backtrace deno prints after its closing error under `RUST_BACKTRACE=1`.
    Backtrace,
}

#[derive(Debug)]
pub(crate) struct DenoTest {
    limits: Limits,
    active: bool,
    section: Section,
    summary: Option<Summary>,
    /// Failures the closing counts require listed, over every run.
    expected: u64,
    /// Tests and steps that failed only because of their steps, in the current run.
    due_to_steps: u64,
    failures: Bounded<Failure>,
    /// Names listed under ` FAILURES ` in the current run.
    listed: u64,
    /// The failure whose ` ERRORS ` block is being read, still without its project frame.
    current: Option<usize>,
    /// The failure's block has had its `error:` line.
    has_message: bool,
    /// The failure's place is still the header's (its definition): the first project frame of
    /// its stack replaces it.
    frame_wanted: bool,
    diagnostics: Bounded<Diagnostic>,
    /// The type checker's finding whose `at` location is still to come.
    finding: Option<usize>,
    /// Inside a type checker's finding (its message, excerpt and place, up to a blank line).
    in_finding: bool,
    /// `Found N errors.` of the type checker (one error prints no count).
    found_errors: Option<u64>,
    type_check_failed: bool,
    /// The previous line was blank (a block header follows one).
    after_blank: bool,
    mismatch: bool,
}

impl DenoTest {
    pub(crate) fn new(limits: Limits) -> Self {
        DenoTest {
            limits,
            active: false,
            section: Section::Progress,
            summary: None,
            expected: 0,
            due_to_steps: 0,
            failures: Bounded::new(limits.max_items),
            listed: 0,
            current: None,
            has_message: false,
            frame_wanted: false,
            diagnostics: Bounded::new(limits.max_items),
            finding: None,
            in_finding: false,
            found_errors: None,
            type_check_failed: false,
            after_blank: false,
            mismatch: false,
        }
    }

    fn read(&mut self, l: &Line<'_>) -> Claim {
        let t = l.text.trim_end();
        let trimmed = t.trim_start();
        if let Some(rest) = t.strip_prefix("running ")
            && running_line(rest)
        {
            let reopened = self.section == Section::Closing;
            self.active = true;
            self.section = Section::Progress;
            self.current = None;
            if reopened {
                self.due_to_steps = 0;
                self.listed = 0;
                return Claim::Open;
            }
            return Claim::Yes;
        }
        if let Some(counts) = summary_line(t) {
            self.close_run(counts);
            return Claim::Summary;
        }
        if let Some(claim) = self.type_check(t, trimmed) {
            return claim;
        }
        if t.starts_with("Check ") && !t[6..].contains(' ') {
            return Claim::Yes;
        }
        if let Some(name) = t.strip_prefix("Uncaught error from ")
            && name.ends_with(" FAILED")
        {
            self.active = true;
            return Claim::Yes;
        }
        if !self.active {
            return Claim::No;
        }
        // The section titles are ` ERRORS ` and ` FAILURES ` (the trailing space is trimmed).
        match (t.starts_with(' '), trimmed) {
            (true, "ERRORS") => {
                self.section = Section::Errors;
                return Claim::Yes;
            }
            (true, "FAILURES") => {
                self.section = Section::Failures;
                self.current = None;
                return Claim::Yes;
            }
            _ => {}
        }
        match self.section {
            Section::Progress => self.progress(trimmed),
            Section::Errors => {
                self.error_block(t, trimmed);
                Claim::Yes
            }
            Section::Failures => self.failures_list(t),
            Section::Closing | Section::Backtrace => self.closing(t, trimmed),
        }
    }

    /// A test's or a step's line while the run goes on: `name ... ok (1ms)`, `name ...` (its
    /// steps follow), `name ... FAILED (due to 1 failed step) (1ms)`, and the frame deno puts
    /// around a test's own output.
    fn progress(&mut self, t: &str) -> Claim {
        if t.is_empty()
            || t == "------- output -------"
            || t == "----- output end -----"
            || t == "------- post-test output -------"
            || t == "----- post-test output end -----"
        {
            return Claim::Yes;
        }
        let Some((_, result)) = t.rsplit_once(" ...") else {
            return Claim::No;
        };
        let result = result.trim_start();
        if result.is_empty() {
            return Claim::Yes;
        }
        let word = result.split(' ').next().unwrap_or_default();
        if !matches!(word, "ok" | "FAILED" | "ignored" | "cancelled") {
            return Claim::No;
        }
        if word == "FAILED" && result.starts_with("FAILED (due to ") {
            self.due_to_steps += 1;
        }
        Claim::Yes
    }

    /// A line of the ` ERRORS ` section: a block's header, its `error:` line, its body and
    /// stack.
    fn error_block(&mut self, t: &str, trimmed: &str) {
        let max = self.limits.max_text;
        if self.after_blank
            && let Some((name, file, line)) = header(t)
        {
            self.current = self.failures.push(Failure {
                name: clip(name, max),
                file: Some(file.to_owned()),
                line,
                message: None,
            });
            self.has_message = false;
            // The header's place is the test's definition; the stack names where it failed.
            self.frame_wanted = true;
            return;
        }
        let Some(f) = self.current.and_then(|i| self.failures.items.get_mut(i)) else {
            return;
        };
        if !self.has_message
            && let Some(msg) = t.strip_prefix("error: ")
        {
            f.message = Some(clip(msg, max));
            self.has_message = true;
            return;
        }
        if self.frame_wanted
            && let Some(frame) = trimmed.strip_prefix("at ")
        {
            let inner = match frame.rsplit_once(" (") {
                Some((_, r)) => r.trim_end_matches(')'),
                None => frame,
            };
            let inner = inner.strip_prefix("file://").unwrap_or(inner);
            if let Some((file, n, _)) = location(inner)
                && !external(file)
            {
                f.file = Some(file.to_owned());
                f.line = Some(n);
                self.frame_wanted = false;
            }
        }
    }

    /// A name of the ` FAILURES ` list; a name no ERRORS block gave is still a failure, at
    /// the place the list names, and its missing block a disagreement of the run's record.
    fn failures_list(&mut self, t: &str) -> Claim {
        if t.is_empty() {
            return Claim::Yes;
        }
        let Some((name, file, line)) = header(t) else {
            return Claim::No;
        };
        self.listed += 1;
        let known = self.failures.items.iter().any(|f| f.name == name);
        if !known {
            self.mismatch = true;
            self.failures.push(Failure {
                name: clip(name, self.limits.max_text),
                file: Some(file.to_owned()),
                line,
                message: None,
            });
        }
        Claim::Yes
    }

    /// deno's lines after its closing count or type check: `error: Test failed`, the type
    /// checker's `info:` and `hint:`, and a Rust backtrace.
    fn closing(&mut self, t: &str, trimmed: &str) -> Claim {
        if t.is_empty() {
            return Claim::Yes;
        }
        if self.section == Section::Backtrace {
            let frame = trimmed
                .split_once(": ")
                .is_some_and(|(n, _)| n.bytes().all(|b| b.is_ascii_digit()))
                || trimmed.starts_with("at ");
            if t.starts_with(' ') && frame {
                return Claim::Yes;
            }
            return Claim::No;
        }
        if t == "Stack backtrace:" {
            self.section = Section::Backtrace;
            return Claim::Yes;
        }
        let known = t == "error: Test failed"
            || (self.type_check_failed
                && (trimmed
                    == "info: The program failed type-checking, but it still might work correctly."
                    || trimmed == "hint: Re-run with --no-check to skip type-checking."));
        if known { Claim::Yes } else { Claim::No }
    }

    /// The type checker's lines, wherever they come: `TS2345 [ERROR]: msg`, its excerpt, its
    /// `at file:///…:l:c`, `Found N errors.`, `error: Type checking failed.`
    fn type_check(&mut self, t: &str, trimmed: &str) -> Option<Claim> {
        if let Some((code, msg)) = t.split_once(" [ERROR]: ")
            && code.len() > 2
            && code.starts_with("TS")
            && code[2..].bytes().all(|b| b.is_ascii_digit())
        {
            self.active = true;
            self.finding = self.diagnostics.push(Diagnostic {
                severity: Severity::Error,
                file: None,
                line: None,
                column: None,
                code: Some(code.to_owned()),
                message: clip(msg, self.limits.max_text),
                owner: None,
            });
            self.in_finding = true;
            return Some(Claim::Yes);
        }
        if self.in_finding {
            if t.is_empty() {
                self.in_finding = false;
                return Some(Claim::Yes);
            }
            if let Some(at) = trimmed.strip_prefix("at ")
                && let Some(x) = self.finding.and_then(|i| self.diagnostics.items.get_mut(i))
                && x.file.is_none()
            {
                let at = at.strip_prefix("file://").unwrap_or(at);
                if let Some((file, l, c)) = location(at) {
                    x.file = Some(file.to_owned());
                    x.line = Some(l);
                    x.column = c;
                }
            }
            return Some(Claim::Yes);
        }
        if !self.active {
            return None;
        }
        if let Some(n) = t
            .strip_prefix("Found ")
            .and_then(|r| r.strip_suffix(" errors."))
            .and_then(|n| n.parse().ok())
        {
            self.found_errors = Some(n);
            return Some(Claim::Yes);
        }
        if t == "error: Type checking failed." {
            self.type_check_failed = true;
            self.section = Section::Closing;
            let errors = self.found_errors.unwrap_or(1);
            let s = self.summary.get_or_insert_with(Summary::default);
            s.errors = Some(s.errors.unwrap_or(0) + errors);
            return Some(Claim::Summary);
        }
        None
    }

    /// The closing count of one run: what it requires listed, added to the runs before.
    fn close_run(&mut self, c: Counts) {
        self.active = true;
        self.section = Section::Closing;
        self.current = None;
        let must_list = (c.failed + c.failed_steps).saturating_sub(self.due_to_steps);
        if self.listed != must_list {
            self.mismatch = true;
        }
        self.expected += must_list;
        let s = self.summary.get_or_insert_with(Summary::default);
        s.add(&Summary {
            passed: Some(c.passed),
            failed: Some(c.failed),
            skipped: Some(c.ignored),
            ..Summary::default()
        });
        self.due_to_steps = 0;
        self.listed = 0;
    }
}

/// `4 tests from ./math_test.ts` (after `running `).
fn running_line(rest: &str) -> bool {
    let mut words = rest.splitn(4, ' ');
    let (Some(n), Some(unit), Some("from"), Some(file)) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return false;
    };
    n.parse::<u64>().is_ok() && matches!(unit, "test" | "tests") && !file.is_empty()
}

/// A block's header: `name => ./x_test.ts:8:6` (the test's definition), or
/// `./x_test.ts (uncaught error)` for a module that failed outside any test.
fn header(t: &str) -> Option<(&str, &str, Option<u32>)> {
    if let Some((name, at)) = t.rsplit_once(" => ")
        && !name.is_empty()
        && let Some((file, line, _)) = location(at)
        && !at.contains(' ')
    {
        return Some((
            name,
            trim_dot(file.strip_prefix("file://").unwrap_or(file)),
            Some(line),
        ));
    }
    let module = t.strip_suffix(" (uncaught error)")?;
    (!module.is_empty() && !module.contains(' ')).then(|| {
        (
            t,
            trim_dot(module.strip_prefix("file://").unwrap_or(module)),
            None,
        )
    })
}

fn trim_dot(file: &str) -> &str {
    file.strip_prefix("./").unwrap_or(file)
}

/// The counts of a closing line.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    passed: u64,
    failed: u64,
    failed_steps: u64,
    ignored: u64,
}

/// `ok | 1 passed | 0 failed (96ms)`, `FAILED | 2 passed (1 step) | 3 failed (1 step) | 1
/// ignored (1s)`; also `N measured` and `N filtered out`. Every part must be one of these.
fn summary_line(t: &str) -> Option<Counts> {
    let (status, rest) = t.split_once(" | ")?;
    if status != "ok" && status != "FAILED" {
        return None;
    }
    // The elapsed time closes the line: `(96ms)`, `(1s)`, `(1m 2s)`.
    let (rest, time) = rest.rsplit_once(" (")?;
    let time = time.strip_suffix(')')?;
    if !time.starts_with(|c: char| c.is_ascii_digit()) || time.contains("step") {
        return None;
    }
    let mut c = Counts::default();
    let mut seen_failed = false;
    for part in rest.split(" | ") {
        let (n, what) = part.split_once(' ')?;
        let n: u64 = n.parse().ok()?;
        let (word, steps) = match what.split_once(" (") {
            Some((w, s)) => {
                let k = s
                    .strip_suffix(" step)")
                    .or_else(|| s.strip_suffix(" steps)"))?;
                (w, k.parse::<u64>().ok()?)
            }
            None => (what, 0),
        };
        match word {
            "passed" => c.passed = n,
            "failed" => {
                c.failed = n;
                c.failed_steps = steps;
                seen_failed = true;
            }
            "ignored" => c.ignored = n,
            "measured" | "filtered out" => {}
            _ => return None,
        }
    }
    let failed = c.failed + c.failed_steps > 0;
    (seen_failed && (status == "FAILED") == failed).then_some(c)
}

impl Parser for DenoTest {
    fn interested(&self, l: &Line<'_>) -> bool {
        self.active || self.in_finding || matches!(l.first, b'r' | b'o' | b'F' | b'T' | b'U' | b'C')
    }

    fn wake(&self) -> Wake {
        Wake::first(b"roFTUC")
    }

    fn engaged(&self) -> bool {
        self.active || self.in_finding
    }

    fn line(&mut self, l: &Line<'_>) -> Claim {
        let claim = self.read(l);
        self.after_blank = l.first == 0;
        claim
    }

    fn finish(self: Box<Self>) -> Report {
        let type_checked = self.type_check_failed;
        let success = match (&self.summary, type_checked) {
            (_, true) => Some(false),
            (Some(s), false) => Some(s.failed == Some(0)),
            (None, false) => None,
        };
        let found = self.diagnostics.items.len() as u64 + self.diagnostics.dropped;
        let mismatch = self.mismatch
            || self
                .found_errors
                .is_some_and(|n| n != found && type_checked);
        Report {
            active: self.active,
            format: None,
            summary: self.summary,
            success,
            expected_failures: self.expected,
            expected_errors: if type_checked { found.max(1) } else { 0 },
            dropped: self.failures.dropped > 0 || self.diagnostics.dropped > 0,
            failures: self.failures.items,
            diagnostics: self.diagnostics.items,
            counted: true,
            count_mismatch: mismatch,
            ..Report::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closing_lines_are_read_exactly() {
        let c = summary_line("FAILED | 2 passed (1 step) | 3 failed (1 step) | 1 ignored (1s)")
            .expect("a closing line");
        assert_eq!(
            (c.passed, c.failed, c.failed_steps, c.ignored),
            (2, 3, 1, 1)
        );
        let c = summary_line("ok | 1 passed | 0 failed | 1 ignored (96ms)").expect("ok");
        assert_eq!((c.passed, c.failed, c.ignored), (1, 0, 1));
        for not in [
            "ok | 1 passed | 1 failed (1ms)",
            "FAILED | 1 passed | 0 failed (1ms)",
            "ok | 1 passed (1ms)",
            "ok | 1 passed | 0 failed | 2 flaky (1ms)",
            "ok | 1 passed | 0 failed",
            "status | 1 passed | 0 failed (1ms)",
        ] {
            assert!(summary_line(not).is_none(), "{not}");
        }
    }

    #[test]
    fn headers_name_the_test_and_its_definition() {
        assert_eq!(
            header("lists ... doubles => ./math_test.ts:20:11"),
            Some(("lists ... doubles", "math_test.ts", Some(20)))
        );
        assert_eq!(
            header("./load_test.ts (uncaught error)"),
            Some(("./load_test.ts (uncaught error)", "load_test.ts", None))
        );
        assert_eq!(header("4 !== 5"), None);
        assert_eq!(header("a => b"), None);
    }
}
