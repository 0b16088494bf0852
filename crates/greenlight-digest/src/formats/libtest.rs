//! `cargo test`: libtest's human output, one section per test binary (unit, integration,
//! doc-tests), each ending in its own `test result:` line.
//!
//! One rule: libtest's own lines start in column 0; indented copies (nextest's captured
//! output) are never ours.

use super::util::{append, clip, counts, external, location};
use super::{Bounded, Claim, Limits, Line, Parser, Report, Wake};
use crate::model::{Failure, Summary};

#[derive(Debug)]
pub(crate) struct Libtest {
    limits: Limits,
    active: bool,
    summary: Option<Summary>,
    success: Option<bool>,
    failures: Bounded<Failure>,
    /// Index of the first failure of the current binary.
    section_start: usize,
    /// The `---- name stdout ----` block being read: index of its failure.
    block: Option<usize>,
    /// Where the panic block of `block` is being read.
    panic: PanicBlock,
    in_failures: bool,
}

impl Libtest {
    pub(crate) fn new(limits: Limits) -> Self {
        Libtest {
            limits,
            active: false,
            summary: None,
            success: None,
            failures: Bounded::new(limits.max_items),
            section_start: 0,
            block: None,
            panic: PanicBlock::default(),
            in_failures: false,
        }
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.failures.items[self.section_start..]
            .iter()
            .position(|f| f.name == name)
            .map(|i| i + self.section_start)
    }
}

/// `name - should panic` → `name`.
fn test_name(raw: &str) -> &str {
    raw.strip_suffix(" - should panic").unwrap_or(raw)
}

impl Parser for Libtest {
    fn interested(&self, l: &Line<'_>) -> bool {
        self.active || matches!(l.first, b'r' | b'R' | b'D')
    }

    fn wake(&self) -> Wake {
        Wake::first(b"rRD")
    }

    fn engaged(&self) -> bool {
        self.active
    }

    fn line(&mut self, l: &Line<'_>) -> Claim {
        let line = l.text;
        let b = line.as_bytes();
        if b.is_empty() {
            return Claim::No;
        }
        if self.active
            && b.first_chunk() == Some(b"test ")
            && (b.last_chunk() == Some(b" ... ok") || b.last_chunk() == Some(b" ... ignored"))
            && !b.starts_with(b"test result: ")
        {
            // The bulk of a long run, nothing to keep: decided first, with fixed-size compares.
            return Claim::Yes;
        }
        if self.active
            && let Some(name) = line.strip_suffix(" --- FAILED")
            && !name.starts_with(' ')
        {
            // `cargo test -q`: one `name --- FAILED` line per failing test.
            let name = test_name(name);
            if self.find(name).is_none() {
                self.failures.push(Failure {
                    name: clip(name, self.limits.max_text),
                    file: None,
                    line: None,
                    message: None,
                });
            }
            return Claim::Yes;
        }
        // Cheap first-byte filter: every libtest line we read starts with one of these.
        match b[0] {
            b'r' | b't' | b'f' | b'-' | b'n' | b'e' | b' ' | b'\t' => {}
            _ => {
                if let Some(i) = self.block {
                    self.capture(i, line);
                    return Claim::Yes;
                }
                return Claim::No;
            }
        }
        if let Some(rest) = line.strip_prefix("running ")
            && (rest.ends_with(" tests") || rest.ends_with(" test"))
            && rest
                .split(' ')
                .next()
                .is_some_and(|n| n.parse::<u64>().is_ok())
        {
            self.active = true;
            self.section_start = self.failures.items.len();
            self.block = None;
            self.in_failures = false;
            return Claim::Open;
        }
        let t = line.trim_start();
        if b[0] == b' ' && (t.starts_with("Running ") || t.starts_with("Doc-tests ")) {
            // cargo's header before each test binary.
            self.in_failures = false;
            self.block = None;
            return Claim::Yes;
        }
        if !self.active {
            return Claim::No;
        }
        if line.starts_with("error: test failed, to rerun pass")
            || line.starts_with("error: doctest failed, to rerun pass")
            || (line.starts_with("error: ") && line.ends_with(" targets failed:"))
        {
            self.block = None;
            self.in_failures = true;
            return Claim::Yes;
        }
        if let Some(rest) = line.strip_prefix("test result: ") {
            let mut s = Summary {
                passed: Some(0),
                failed: Some(0),
                skipped: Some(0),
                ..Summary::default()
            };
            counts(rest, |word, n| match word {
                "passed" => s.passed = Some(n),
                "failed" => s.failed = Some(n),
                "ignored" => s.skipped = Some(n),
                _ => {}
            });
            let ok = rest.starts_with("ok");
            self.success = Some(self.success.unwrap_or(true) && ok);
            self.summary.get_or_insert_with(Summary::default).add(&s);
            self.block = None;
            self.in_failures = false;
            return Claim::Summary;
        }
        if let Some(rest) = line.strip_prefix("test ")
            && let Some((name, outcome)) = rest.rsplit_once(" ... ")
        {
            if outcome.starts_with("FAILED") {
                let name = test_name(name);
                if self.find(name).is_none() {
                    self.failures.push(Failure {
                        name: clip(name, self.limits.max_text),
                        file: None,
                        line: None,
                        message: None,
                    });
                }
            }
            return Claim::Yes;
        }
        if line == "failures:" {
            self.in_failures = true;
            self.block = None;
            return Claim::Yes;
        }
        if let Some(rest) = line.strip_prefix("---- ")
            && let Some(name) = rest
                .strip_suffix(" stdout ----")
                .or_else(|| rest.strip_suffix(" stderr ----"))
        {
            self.block = self.find(test_name(name));
            self.panic = PanicBlock::default();
            return Claim::Yes;
        }
        if let Some(i) = self.block {
            self.capture(i, line);
            return Claim::Yes;
        }
        if self.in_failures && (line.starts_with("    ") || line.starts_with('\t')) {
            return Claim::Yes;
        }
        Claim::No
    }

    fn finish(self: Box<Self>) -> Report {
        // The failures counted come from the tool's own summary line.
        let counted = self.summary.is_some();
        let expected = self.summary.as_ref().and_then(|s| s.failed).unwrap_or(0);
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

impl Libtest {
    /// Reads one line of a failure block, keeping the panic location and message.
    fn capture(&mut self, i: usize, line: &str) {
        let max = self.limits.max_text;
        let Some(f) = self.failures.items.get_mut(i) else {
            return;
        };
        let t = line.trim();
        if panic_block_line(f, t, &mut self.panic, max) {
            return;
        }
        if f.message.is_none() && !t.is_empty() && !t.starts_with("note:") {
            f.message = Some(clip(t, max));
        }
    }
}

/// Where a panic block's reading is: the message line is next, or its value lines are.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PanicBlock {
    want_message: bool,
    in_values: bool,
}

/// Reads one trimmed line of a test's captured panic output into `f`: the panic's location
/// when it is in the project (else the innermost project frame of the backtrace), the
/// message, and the `left:` / `right:` value lines under it. Returns whether the line was one
/// of these.
pub(crate) fn panic_block_line(
    f: &mut Failure,
    t: &str,
    state: &mut PanicBlock,
    max: usize,
) -> bool {
    if state.want_message {
        state.want_message = false;
        if !t.is_empty() {
            f.message = Some(clip(t, max));
            state.in_values = true;
        }
        return true;
    }
    if state.in_values {
        let key = t
            .split_once(':')
            .map(|(k, _)| k.trim().to_ascii_lowercase());
        if matches!(
            key.as_deref(),
            Some("left" | "right" | "expected" | "actual" | "found" | "got")
        ) && let Some(m) = &mut f.message
        {
            append(m, t, max);
            return true;
        }
        state.in_values = false;
    }
    if let Some(at) = panicked_at(t) {
        // Before Rust 1.73: `thread 'x' panicked at 'message', src/lib.rs:17:9`.
        if let Some(quoted) = at.strip_prefix('\'')
            && let Some((msg, loc)) = quoted.rsplit_once("', ")
        {
            set_project_location(f, loc);
            f.message = Some(clip(msg, max));
            return true;
        }
        // Since Rust 1.73: `thread 'x' panicked at src/lib.rs:17:9:` then the message.
        set_project_location(f, at);
        state.want_message = true;
        return true;
    }
    if let Some(rest) = t.strip_prefix("note: test did not panic as expected") {
        if let Some(loc) = rest.strip_prefix(" at ") {
            set_project_location(f, loc);
        }
        f.message = Some("test did not panic as expected".to_owned());
        return true;
    }
    if let Some(loc) = t.strip_prefix("at ") {
        // A backtrace frame (`at ./src/lib.rs:17:9`): innermost first, so the first one in
        // the project locates a panic raised inside the standard library.
        if f.file.is_none() {
            set_project_location(f, loc);
        }
        return true;
    }
    false
}

/// Sets `f`'s location from `loc` (`file:line:col`) unless the file is outside the project.
fn set_project_location(f: &mut Failure, loc: &str) {
    if let Some((file, l, _)) = location(loc)
        && !external(file)
    {
        f.file = Some(file.strip_prefix("./").unwrap_or(file).to_owned());
        f.line = Some(l);
    }
}

/// The location after `thread '…' panicked at ` in a panic line.
pub(crate) fn panicked_at(t: &str) -> Option<&str> {
    if !t.starts_with("thread '") {
        return None;
    }
    let at = t.find(" panicked at ")?;
    Some(&t[at + " panicked at ".len()..])
}
