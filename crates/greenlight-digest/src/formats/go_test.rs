//! `go test` (plain, `-v`, `-json`) and the build failures it reports: `--- FAIL:` lines with
//! their log lines, panics, one `ok` / `FAIL` line per package, `# pkg` compiler errors.
//!
//! One rule: `-json` is decoded back into the text lines `go test -v` prints, so one text
//! parser serves all three forms.
//!
//! A test that prints without a trailing newline pushes the testing package's next line into
//! the middle of a line (`loading… --- FAIL: TestC (0.00s)`). Such a glued result or `=== RUN`
//! is read where the line ends with one, exactly shaped, and is not a test's log line. With
//! `-v` it counts only when it names the test that is running (or, for `=== RUN`, one of its
//! subtests), and every test that started must end with a result; without `-v` nothing can
//! confirm it, so it is read and the report says so.

use std::collections::HashMap;

use serde::Deserialize;

use super::util::{clip, external, location};
use super::{Bounded, Claim, Limits, Line, MARK_GO, Parser, Report, Wake};
use crate::model::{Diagnostic, Failure, Severity, Summary};

#[derive(Debug, Deserialize)]
struct Event {
    #[serde(rename = "Action")]
    action: String,
    #[serde(rename = "Output")]
    output: Option<String>,
}

#[derive(Debug)]
pub(crate) struct GoTest {
    limits: Limits,
    active: bool,
    verbose: bool,
    passed: u64,
    skipped: u64,
    packages_failed: u64,
    packages_seen: u64,
    build_failed: u64,
    /// Failing packages that printed no failure and no diagnostic.
    unexplained: u64,
    explained_in_package: bool,
    failures: Bounded<Failure>,
    diagnostics: Bounded<Diagnostic>,
    /// `-v`: the test whose output is streaming now.
    current: Option<String>,
    /// `-v`: first located log line of each running test, until it passes.
    logs: HashMap<String, (String, u32, String)>,
    /// Plain mode: the failure whose indented log lines follow, and their indent.
    block: Option<(usize, usize)>,
    /// A `--- FAIL` just printed; a `panic:` line next is its message.
    last_fail: Option<usize>,
    in_panic: bool,
    in_build: bool,
    /// `-json`: an `Output` that did not end in a newline yet.
    json_partial: String,
    /// `panic: test timed out after …`: the message for the test that was running.
    timeout: Option<String>,
    /// Inside the timeout's `running tests:` list.
    timeout_list: bool,
    /// `-v`: tests of the current package that printed `=== RUN`, and results printed.
    runs_in_package: u64,
    results_in_package: u64,
    /// The current package panicked or timed out: its started tests need no result.
    ended_early: bool,
    /// `-v`: a package where a started test printed no result (one was lost).
    missing_result: bool,
    /// A marker was read mid-line where nothing could confirm it (no `-v`).
    unconfirmed: bool,
    /// A goroutine frame of a test function (`pkg.TestSlow(…)`): its name; the next line is
    /// its place.
    timeout_frame: Option<String>,
}

impl GoTest {
    pub(crate) fn new(limits: Limits) -> Self {
        GoTest {
            limits,
            active: false,
            verbose: false,
            passed: 0,
            skipped: 0,
            packages_failed: 0,
            packages_seen: 0,
            build_failed: 0,
            unexplained: 0,
            explained_in_package: false,
            failures: Bounded::new(limits.max_items),
            diagnostics: Bounded::new(limits.max_items),
            current: None,
            logs: HashMap::new(),
            block: None,
            last_fail: None,
            in_panic: false,
            in_build: false,
            json_partial: String::new(),
            timeout: None,
            timeout_list: false,
            runs_in_package: 0,
            results_in_package: 0,
            ended_early: false,
            missing_result: false,
            unconfirmed: false,
            timeout_frame: None,
        }
    }

    /// Reads the testing package's line glued at `at` to a test's unterminated output, when
    /// it is one to count (see the module's rule); `None` leaves the whole line as output.
    fn read_glued(&mut self, line: &str, glued: Glued<'_>) -> Option<Claim> {
        let (at, name, run) = match glued {
            Glued::Result { at, name } => (at, name, false),
            Glued::Run { at, name } => (at, name, true),
        };
        if self.verbose {
            let current = self.current.as_deref().unwrap_or("");
            let confirmed = if run {
                // Printed by a running test that starts a subtest.
                !current.is_empty()
                    && name
                        .strip_prefix(current)
                        .is_some_and(|sub| sub.len() > 1 && sub.starts_with('/'))
            } else {
                // The result of the running test, or of one of its parents.
                current == name
                    || current
                        .strip_prefix(name)
                        .is_some_and(|sub| sub.starts_with('/'))
            };
            if !confirmed {
                return None;
            }
        } else {
            self.unconfirmed = true;
        }
        Some(self.text(&line[at..]))
    }

    /// Reads a line of a `go test` timeout panic: the running test is the failure, named by
    /// the `running tests:` list (go 1.20 and later) or by its goroutine's frame, and located
    /// by that frame.
    fn timeout_line(&mut self, t: &str, indent: usize) {
        let Some(msg) = self.timeout.clone() else {
            return;
        };
        if t == "running tests:" {
            self.timeout_list = true;
            return;
        }
        if self.timeout_list {
            if indent > 0 && !t.is_empty() {
                let name = t.split(" (").next().unwrap_or(t);
                self.timed_out(name, &msg, None);
                return;
            }
            self.timeout_list = false;
        }
        if let Some(name) = self.timeout_frame.take() {
            let loc = location(t)
                .filter(|(file, _, _)| !external(file))
                .map(|(file, l, _)| (file.to_owned(), l));
            self.timed_out(&name, &msg, loc);
            return;
        }
        if indent == 0
            && let Some((func, _)) = t.split_once('(')
            && let Some((_, name)) = func.rsplit_once('.')
            && name.starts_with("Test")
            && !func.starts_with("testing.")
        {
            self.timeout_frame = Some(name.to_owned());
        }
    }

    /// Records `name` as the test a timeout ended (once), or locates it.
    fn timed_out(&mut self, name: &str, msg: &str, loc: Option<(String, u32)>) {
        let max = self.limits.max_text;
        let i = match self.failures.items.iter().position(|f| f.name == name) {
            Some(i) => Some(i),
            None => self.failures.push(Failure {
                name: clip(name, max),
                file: None,
                line: None,
                message: Some(clip(msg, max)),
            }),
        };
        self.explained_in_package = true;
        if let (Some(i), Some((file, l))) = (i, loc)
            && let Some(f) = self.failures.items.get_mut(i)
            && f.file.is_none()
        {
            f.file = Some(file);
            f.line = Some(l);
        }
    }

    fn text(&mut self, line: &str) -> Claim {
        if let Some(g) = glued(line)
            && let Some(claim) = self.read_glued(line, g)
        {
            return claim;
        }
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("=== ") {
            let (verb, name) = rest.split_once(' ').unwrap_or((rest, ""));
            if matches!(verb, "RUN" | "CONT" | "NAME" | "PAUSE") {
                self.active = true;
                self.verbose = true;
                self.in_panic = false;
                self.block = None;
                if verb == "RUN" {
                    self.runs_in_package += 1;
                }
                if verb != "PAUSE" {
                    self.current = Some(name.trim().to_owned());
                }
                return Claim::Yes;
            }
        }
        if let Some(rest) = t.strip_prefix("--- ") {
            let (verb, rest) = rest.split_once(": ").unwrap_or(("", ""));
            let name = rest.rsplit_once(" (").map_or(rest, |(n, _)| n);
            match verb {
                "FAIL" => {
                    self.active = true;
                    self.explained_in_package = true;
                    self.results_in_package += 1;
                    let (file, l, msg) = match self.logs.remove(name) {
                        Some((f, l, m)) => (Some(f), Some(l), Some(m)),
                        None => (None, None, None),
                    };
                    let idx = self.failures.push(Failure {
                        name: clip(name, self.limits.max_text),
                        file,
                        line: l,
                        message: msg,
                    });
                    self.block = idx.map(|i| (i, indent + 4));
                    self.last_fail = idx;
                    return Claim::Yes;
                }
                "PASS" | "SKIP" => {
                    self.active = true;
                    self.results_in_package += 1;
                    if verb == "PASS" {
                        self.passed += 1;
                    } else {
                        self.skipped += 1;
                    }
                    self.logs.remove(name);
                    self.block = None;
                    self.last_fail = None;
                    return Claim::Yes;
                }
                _ => {}
            }
        }
        if let Some(pkg_line) = package_line(line) {
            self.active = true;
            self.packages_seen += 1;
            if pkg_line.failed {
                self.packages_failed += 1;
                if pkg_line.build {
                    self.build_failed += 1;
                }
                if !self.explained_in_package {
                    self.unexplained += 1;
                }
            }
            // Every test that started ends with one result unless the package ended early (a
            // panic or a timeout says which test it was; a crash leaves it unexplained).
            if self.verbose && self.runs_in_package != self.results_in_package && !self.ended_early
            {
                self.missing_result = true;
            }
            self.runs_in_package = 0;
            self.results_in_package = 0;
            self.ended_early = false;
            self.explained_in_package = false;
            self.block = None;
            self.in_panic = false;
            self.in_build = false;
            self.current = None;
            self.timeout = None;
            self.timeout_list = false;
            self.timeout_frame = None;
            return Claim::Summary;
        }
        if t == "FAIL" || t == "PASS" {
            if self.active {
                self.block = None;
                self.in_panic = false;
                return Claim::Yes;
            }
            return Claim::No;
        }
        if indent == 0 && t.starts_with("# ") {
            self.in_build = true;
            self.block = None;
            return Claim::Yes;
        }
        if self.in_build && indent == 0 {
            if let Some((file, l, c)) = location(t)
                && file.ends_with(".go")
                && let Some((_, msg)) = t.split_once(": ")
            {
                // Not `go test`'s until its `FAIL pkg [build failed]` line: `go build` and
                // `go vet` print the same findings (read by the line-based parser).
                self.explained_in_package = true;
                self.diagnostics.push(Diagnostic {
                    severity: Severity::Error,
                    file: Some(file.to_owned()),
                    line: Some(l),
                    column: c,
                    code: None,
                    message: clip(msg, self.limits.max_text),
                    owner: None,
                });
                return Claim::Yes;
            }
            if t.starts_with("note: ") || t.starts_with("too many errors") {
                return Claim::Yes;
            }
        }
        if indent == 0 && t.starts_with("panic: test timed out after ") {
            self.active = true;
            self.ended_early = true;
            self.timeout = Some(clip(t, self.limits.max_text));
            self.in_panic = true;
            self.block = None;
            return Claim::Yes;
        }
        if indent == 0 && t.starts_with("panic: ") && (self.active || self.last_fail.is_some()) {
            self.ended_early = true;
            if let Some(i) = self.last_fail
                && let Some(f) = self.failures.items.get_mut(i)
                && f.message.is_none()
            {
                f.message = Some(clip(t, self.limits.max_text));
            }
            self.in_panic = true;
            self.block = None;
            return Claim::Yes;
        }
        if self.in_panic {
            if self.timeout.is_some() {
                self.timeout_line(t, indent);
                return Claim::Yes;
            }
            // Frames run innermost first: the first in the project is where it panicked.
            if let Some(i) = self.last_fail
                && let Some(f) = self.failures.items.get_mut(i)
                && f.file.is_none()
                && let Some((file, l, _)) = location(t)
                && file.ends_with(".go")
                && !external(file)
            {
                f.file = Some(file.to_owned());
                f.line = Some(l);
            }
            return Claim::Yes;
        }
        if let Some((i, want)) = self.block {
            if indent >= want {
                if let Some(f) = self.failures.items.get_mut(i)
                    && f.message.is_none()
                    && let Some((file, l, _)) = location(t)
                    && let Some((_, msg)) = t.split_once(": ")
                {
                    f.file = Some(file.to_owned());
                    f.line = Some(l);
                    f.message = Some(clip(msg, self.limits.max_text));
                }
                return Claim::Yes;
            }
            self.block = None;
        }
        // `-v` streams a test's log lines as it runs; one can be glued to the test's own
        // unterminated output too (`connecting...     x_test.go:13: msg`).
        let log = if indent >= 4 {
            Some(t)
        } else if indent == 0 && self.verbose {
            glued_log(t)
        } else {
            None
        };
        if self.verbose
            && let Some(t) = log
            && let Some(name) = &self.current
        {
            if !self.logs.contains_key(name)
                && self.logs.len() < self.limits.max_items
                && let Some((file, l, _)) = location(t)
                && file.ends_with(".go")
                && let Some((_, msg)) = t.split_once(": ")
            {
                self.logs.insert(
                    name.clone(),
                    (file.to_owned(), l, clip(msg, self.limits.max_text)),
                );
            }
            return Claim::Yes;
        }
        Claim::No
    }
}

struct PackageLine {
    failed: bool,
    build: bool,
}

/// `ok  \tpkg\t0.1s`, `FAIL\tpkg\t0.1s`, `FAIL\tpkg [build failed]`, `?   \tpkg\t[no test files]`.
fn package_line(line: &str) -> Option<PackageLine> {
    let (head, rest) = line.split_once('\t')?;
    let head = head.trim_end();
    let pkg = rest.split(['\t', ' ']).next()?;
    if pkg.is_empty() {
        return None;
    }
    match head {
        "ok" | "?" => Some(PackageLine {
            failed: false,
            build: false,
        }),
        "FAIL" => Some(PackageLine {
            failed: true,
            build: rest.contains("[build failed]") || rest.contains("[setup failed]"),
        }),
        _ => None,
    }
}

/// The testing package's own line at the end of a line, after a test's unterminated output.
#[derive(Debug, Clone, Copy)]
enum Glued<'a> {
    /// `… --- FAIL: name (0.00s)` (or `PASS`, `SKIP`): the result starts at `at`.
    Result { at: usize, name: &'a str },
    /// `… === RUN   name`: the line starts at `at`.
    Run { at: usize, name: &'a str },
}

/// The testing package's result or `=== RUN` line glued to the end of `line` after other
/// output, exactly shaped (`--- VERB: name (N.NNs)`, `=== RUN   name`, names without spaces);
/// `None` for a line that starts with one, has none, or is a test's log line
/// (`    file.go:12: … --- FAIL: TestX (0.00s)` is what the test logged). Linear in the line:
/// the shape is read from its end.
fn glued(line: &str) -> Option<Glued<'_>> {
    let end = line.trim_end();
    let (at, name, run) = if let Some(head) = end.strip_suffix("s)") {
        let (head, secs) = head.rsplit_once(" (")?;
        if secs.is_empty() || !secs.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return None;
        }
        let (before, name) = head.rsplit_once(' ')?;
        let verb = ["--- FAIL:", "--- PASS:", "--- SKIP:"]
            .into_iter()
            .find(|v| before.ends_with(v))?;
        (before.len() - verb.len(), name, false)
    } else {
        let (before, name) = end.rsplit_once(' ')?;
        let before = before.trim_end();
        let at = before.strip_suffix("=== RUN")?.len();
        (at, name, true)
    };
    let prefix = &line[..at];
    if name.is_empty() || prefix.trim().is_empty() {
        return None;
    }
    // A log line: `file.go:N: ` right after the indent.
    let logged = prefix
        .trim_start()
        .split_once(": ")
        .and_then(|(loc, _)| location(loc))
        .is_some_and(|(file, _, _)| file.ends_with(".go"));
    if logged {
        return None;
    }
    Some(if run {
        Glued::Run { at, name }
    } else {
        Glued::Result { at, name }
    })
}

/// A `-v` log line (`    x_test.go:13: msg`) glued to a test's unterminated output: the
/// log from its location on. Only the first `.go:` is a candidate, so the search is linear.
fn glued_log(t: &str) -> Option<&str> {
    let go = t.find(".go:")?;
    let start = t[..go].rfind(' ')? + 1;
    if !t[..start].ends_with("    ") || t[..start].trim().is_empty() {
        return None;
    }
    let log = &t[start..];
    let (loc, _) = log.split_once(": ")?;
    location(loc).filter(|(file, _, _)| file.ends_with(".go"))?;
    Some(log)
}

impl Parser for GoTest {
    fn interested(&self, l: &Line<'_>) -> bool {
        self.engaged() || self.wake().first.contains(&l.first) || l.markers & MARK_GO != 0
    }

    fn wake(&self) -> Wake {
        // A glued result can be the run's first line.
        Wake::first(b"=-oF?#{Pp").or_markers(MARK_GO)
    }

    fn engaged(&self) -> bool {
        self.active
            || self.in_build
            || self.in_panic
            || self.block.is_some()
            || !self.json_partial.is_empty()
            || self.last_fail.is_some()
            || self.timeout.is_some()
    }

    fn line(&mut self, l: &Line<'_>) -> Claim {
        let line = l.text;
        if line.starts_with("{\"Time\":") || line.starts_with("{\"Action\":") {
            let Ok(event) = serde_json::from_str::<Event>(line) else {
                return Claim::No;
            };
            self.active = true;
            let Some(out) = event.output else {
                // `run` / `pass` / `fail` events repeat what the output lines already said.
                let _ = event.action;
                return Claim::Yes;
            };
            self.json_partial.push_str(&out);
            if !self.json_partial.ends_with('\n') {
                if self.json_partial.len() > self.limits.max_text * 8 {
                    self.json_partial.clear();
                }
                return Claim::Yes;
            }
            let text = std::mem::take(&mut self.json_partial);
            let mut claim = Claim::Yes;
            for l in text.lines() {
                match self.text(l) {
                    Claim::Summary => claim = Claim::Summary,
                    Claim::Open if claim != Claim::Summary => claim = Claim::Open,
                    _ => {}
                }
            }
            // A package line inside the JSON stream is the summary; anything else is ours.
            return if claim == Claim::Summary {
                Claim::Summary
            } else {
                Claim::Yes
            };
        }
        self.text(line)
    }

    fn finish(mut self: Box<Self>) -> Report {
        // A parent test fails because a subtest failed; the subtest carries the message.
        let names: Vec<String> = self.failures.items.iter().map(|f| f.name.clone()).collect();
        self.failures.items.retain(|f| {
            f.message.is_some()
                || !names.iter().any(|n| {
                    n.len() > f.name.len()
                        && n.starts_with(&f.name)
                        && n[f.name.len()..].starts_with('/')
                })
        });
        let failed = self.failures.items.len() as u64 + self.failures.dropped;
        let summary = (self.packages_seen > 0).then(|| Summary {
            passed: self.verbose.then_some(self.passed),
            failed: Some(failed),
            skipped: self.verbose.then_some(self.skipped),
            errors: Some(self.build_failed),
            warnings: None,
        });
        Report {
            active: self.active,
            format: None,
            success: summary.as_ref().map(|_| self.packages_failed == 0),
            summary,
            expected_failures: failed + self.unexplained,
            expected_errors: self.build_failed,
            dropped: self.failures.dropped > 0 || self.diagnostics.dropped > 0,
            failures: self.failures.items,
            diagnostics: self.diagnostics.items,
            unparsed: false,
            counted: false,
            count_mismatch: self.missing_result,
            unconfirmed_markers: self.unconfirmed,
            ..Report::default()
        }
    }
}
