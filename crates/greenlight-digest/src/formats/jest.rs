//! The JavaScript runners with their own terminal reporters: jest, vitest, bun test and
//! `node --test`'s spec reporter. Each prints a status line per test, detailed failure blocks,
//! and a counts block at the end.
//!
//! One rule: a failure's name comes from the runner's failure header, its message from the
//! first non-blank line the runner prints for it (with the `Expected` / `Received` lines under
//! it), its location from the innermost stack frame in the project (outside `node_modules` and
//! the runtime); a file that failed to load is located by the error's own `file:line`.

use super::util::{LoadErrors, append, clip, counts, error_line, external, location};
use super::{Bounded, Claim, Limits, Line, MARK_JEST, Parser, Report, Wake};
use crate::model::{Failure, Format, Summary};

/// Which runner's lines a [`Jest`] parser reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runner {
    Jest,
    Vitest,
    Bun,
    NodeSpec,
}

#[derive(Debug)]
pub(crate) struct Jest {
    runner: Runner,
    limits: Limits,
    active: bool,
    summary: Option<Summary>,
    failed_count: u64,
    errors: u64,
    failures: Bounded<Failure>,
    /// The failure whose block is being read.
    block: Option<usize>,
    /// The block's message line is still to come.
    want_message: bool,
    /// vitest/jest: inside the failure detail section.
    in_details: bool,
    /// bun: the `error:` line and location printed before the `(fail)` line.
    pending: Option<(String, Option<(String, u32)>)>,
    /// node spec: inside `✖ failing tests:`; names of suites (`▶ name`).
    node_section: bool,
    node_location: Option<(String, u32)>,
    suites: Vec<String>,
    /// bun: inside `# Unhandled error between tests`.
    bun_unhandled: bool,
    /// bun: the test file whose results follow.
    bun_file: Option<String>,
    /// node: errors that kept a test file from loading, printed before its result.
    load_errors: LoadErrors,
    /// node: the current run's first failure (`npm test --workspaces` runs `node --test` once
    /// per package; each run's closing list replaces only its own progress lines).
    node_run_start: usize,
    /// node: the line before was a closing list's `test at file:line`.
    after_test_at: bool,
    /// vitest 4: the first of several `FAIL` headers printed above one shared error block
    /// (tests that failed with the same error at the same place).
    group: Option<usize>,
    /// vitest and bun: the counts of the runs that ended before the current one (one run per
    /// package under `npm test --workspaces`), and the failures they counted.
    earlier: Option<Summary>,
    earlier_expected: u64,
    /// The first failure of the wrapper's current run (see [`Parser::run_ended`]).
    run_start: usize,
}

impl Jest {
    pub(crate) fn new(limits: Limits, format: Format) -> Self {
        let runner = match format {
            Format::Vitest => Runner::Vitest,
            Format::BunTest => Runner::Bun,
            Format::NodeTest => Runner::NodeSpec,
            _ => Runner::Jest,
        };
        Jest {
            runner,
            limits,
            active: false,
            summary: None,
            failed_count: 0,
            errors: 0,
            failures: Bounded::new(limits.max_items),
            block: None,
            want_message: false,
            in_details: false,
            pending: None,
            node_section: false,
            node_location: None,
            suites: Vec::new(),
            bun_unhandled: false,
            bun_file: None,
            load_errors: LoadErrors::default(),
            node_run_start: 0,
            after_test_at: false,
            group: None,
            earlier: None,
            earlier_expected: 0,
            run_start: 0,
        }
    }

    fn push(&mut self, name: &str) {
        self.block = self.failures.push(Failure {
            name: clip(name, self.limits.max_text),
            file: None,
            line: None,
            message: None,
        });
        self.want_message = true;
    }

    /// Reads a line of the current failure block: message first, then a location.
    fn block_line(&mut self, t: &str) {
        let Some(i) = self.block else { return };
        let max = self.limits.max_text;
        let Some(f) = self.failures.items.get_mut(i) else {
            return;
        };
        if t.is_empty() {
            return;
        }
        if self.want_message {
            self.want_message = false;
            f.message = Some(clip(t, max));
            if f.file.is_none()
                && let Some((file, l)) = message_location(t)
            {
                f.file = Some(file);
                f.line = Some(l);
            }
            return;
        }
        if let Some((file, l, _)) = t.strip_prefix("File: ").and_then(location)
            && !external(file)
        {
            // A file that failed to transform: vite names the place itself.
            if f.file.is_none() {
                f.file = Some(file.to_owned());
                f.line = Some(l);
            }
            return;
        }
        if let Some((file, l, text)) = esbuild_error(t) {
            // A file that did not transform: the wrapper's message names no place, this does.
            if f.file.is_none() {
                f.file = Some(file);
                f.line = Some(l);
            }
            if f.message.as_deref().is_some_and(|m| m.ends_with(':')) {
                f.message = Some(clip(text, max));
            }
            return;
        }
        if f.file.is_none()
            && let Some((file, l)) = frame(t)
        {
            f.file = Some(file);
            f.line = Some(l);
            return;
        }
        if f.file.is_none()
            && (t.starts_with("Expected") || t.starts_with("Received"))
            && let Some(m) = &mut f.message
        {
            append(m, t, max);
        }
    }

    fn jest(&mut self, l: &Line<'_>, line: &str, t: &str) -> Claim {
        if l.markers & MARK_JEST != 0
            && let Some(header) = glued_file_header(t)
        {
            // A test wrote without a newline and jest's header for its file followed.
            self.active = true;
            self.in_details = header.starts_with("FAIL");
            self.block = None;
            return Claim::Yes;
        }
        if let Some(rest) = t.strip_prefix("FAIL ").or_else(|| t.strip_prefix("PASS ")) {
            let mut words = rest.split_whitespace();
            let path = words.next().unwrap_or("");
            // jest: `FAIL path/x.test.js` or `FAIL path/x.test.js (5.1 s)`; vitest's
            // `FAIL  x.test.ts > name` is not a file line.
            let timing = words.next().is_none_or(|w| w.starts_with('('));
            if path.contains('.') && timing && !line.contains('\t') {
                self.active = true;
                self.in_details = t.starts_with("FAIL");
                self.block = None;
                return Claim::Yes;
            }
        }
        if !self.active {
            return Claim::No;
        }
        if let Some(rest) = t.strip_prefix("Tests:") {
            let mut s = Summary {
                passed: Some(0),
                failed: Some(0),
                skipped: Some(0),
                errors: Some(self.errors),
                warnings: None,
            };
            counts(rest, |w, n| match w {
                "passed" => s.passed = Some(n),
                "failed" => s.failed = Some(n),
                "skipped" | "todo" | "pending" => s.skipped = Some(s.skipped.unwrap_or(0) + n),
                _ => {}
            });
            self.failed_count = s.failed.unwrap_or(0);
            self.summary = Some(s);
            self.block = None;
            return Claim::Summary;
        }
        if t.starts_with("Test Suites:") {
            self.block = None;
            if self.summary.is_none() {
                // Only suites failed to run: jest prints no `Tests:` counts worth reading yet.
                let mut s = Summary {
                    passed: Some(0),
                    failed: Some(0),
                    skipped: Some(0),
                    errors: Some(self.errors),
                    warnings: None,
                };
                s.errors = Some(self.errors);
                self.summary = Some(s);
            }
            return Claim::Summary;
        }
        if t.starts_with("{\"numFailedTestSuites\":") && t.ends_with('}') {
            // `jest --json` without `--outputFile`: the report itself, after the summary.
            return Claim::Yes;
        }
        if t.starts_with("Snapshots:")
            || t.starts_with("Time:")
            || t.starts_with("Ran all test suites")
            || t.starts_with("Test results written to")
        {
            return Claim::Yes;
        }
        if let Some(name) = t.strip_prefix("● ") {
            if name == "Test suite failed to run" {
                self.errors += 1;
            }
            self.push(name);
            return Claim::Yes;
        }
        if self.block.is_some() {
            self.block_line(t);
            return Claim::Yes;
        }
        if t.starts_with("✓ ")
            || t.starts_with("✕ ")
            || t.starts_with("○ ")
            || t.starts_with("✎ ")
            || t.is_empty()
            || line.starts_with("  ")
        {
            return Claim::Yes;
        }
        Claim::No
    }

    /// Gives every failure of the current vitest group (several `FAIL` headers above one error
    /// block) what the block said about the last of them.
    fn close_group(&mut self) {
        let (Some(first), Some(last)) = (self.group.take(), self.block) else {
            return;
        };
        let Some(shared) = self.failures.items.get(last).cloned() else {
            return;
        };
        for f in self.failures.items.iter_mut().take(last).skip(first) {
            f.file.clone_from(&shared.file);
            f.line = shared.line;
            f.message.clone_from(&shared.message);
        }
    }

    /// A new run of the same runner begins: the one before keeps its counts.
    fn next_run(&mut self) {
        self.close_group();
        if let Some(s) = self.summary.take() {
            self.earlier.get_or_insert_with(Summary::default).add(&s);
            self.earlier_expected += self.failed_count + self.errors;
            self.failed_count = 0;
            self.errors = 0;
        }
        self.active = true;
        self.in_details = false;
        self.block = None;
    }

    fn vitest(&mut self, line: &str, t: &str) -> Claim {
        if t.starts_with("RUN  v") || t.starts_with("RUN v") {
            self.next_run();
            return Claim::Open;
        }
        if !self.active {
            return Claim::No;
        }
        if t.starts_with("::error ") || t.starts_with("::warning ") || t.starts_with("::notice ") {
            // The GitHub Actions reporter's annotations, one per failure already read.
            return Claim::Yes;
        }
        if t.starts_with('⎯') {
            self.close_group();
            self.in_details = true;
            self.block = None;
            if t.contains("Unhandled Error") {
                self.push("unhandled error");
            }
            return Claim::Yes;
        }
        if let Some(rest) = t
            .strip_prefix("Tests  ")
            .or_else(|| t.strip_prefix("Tests "))
        {
            let mut s = Summary {
                passed: Some(0),
                failed: Some(0),
                skipped: Some(0),
                errors: Some(self.errors),
                warnings: None,
            };
            counts(rest, |w, n| match w {
                "passed" => s.passed = Some(n),
                "failed" => s.failed = Some(n),
                "skipped" | "todo" => s.skipped = Some(s.skipped.unwrap_or(0) + n),
                _ => {}
            });
            self.failed_count = s.failed.unwrap_or(0);
            self.summary = Some(s);
            self.close_group();
            self.in_details = false;
            self.block = None;
            return Claim::Summary;
        }
        if let Some(rest) = t.strip_prefix("Errors  ") {
            self.errors = super::util::first_number(rest).unwrap_or(0);
            if let Some(s) = &mut self.summary {
                s.errors = Some(self.errors);
            }
            return Claim::Yes;
        }
        if t.starts_with("Test Files ")
            || t.starts_with("Start at ")
            || t.starts_with("Duration ")
            || t.contains(" report written to ")
        {
            return Claim::Yes;
        }
        if self.in_details {
            if let Some(name) = t.strip_prefix("FAIL  ").or_else(|| t.strip_prefix("FAIL ")) {
                if name.contains(" [ ") {
                    self.errors += 1;
                }
                // A header right under another (whose block has not begun) joins its group.
                let grouped = self.block.is_some() && self.want_message;
                if !grouped {
                    self.close_group();
                }
                self.push(name);
                if !grouped {
                    self.group = self.block;
                }
                return Claim::Yes;
            }
            if let Some(loc) = t.strip_prefix("❯ ") {
                // `❯ fn path:12:3` or `❯ path:12:3`: the location is the last word.
                let loc = loc.rsplit(' ').next().unwrap_or(loc);
                if let Some(i) = self.block
                    && let Some(f) = self.failures.items.get_mut(i)
                    && f.file.is_none()
                    && let Some((file, l, _)) = location(loc)
                    && !external(file)
                {
                    f.file = Some(file.to_owned());
                    f.line = Some(l);
                }
                return Claim::Yes;
            }
            self.block_line(t);
            return Claim::Yes;
        }
        if t.is_empty()
            || line.starts_with("  ")
            || ["✓", "×", "↓", "❯", "→", "·"]
                .iter()
                .any(|m| t.starts_with(m))
        {
            return Claim::Yes;
        }
        Claim::No
    }

    fn bun(&mut self, line: &str, t: &str) -> Claim {
        if t.starts_with("bun test v") {
            self.next_run();
            return Claim::Open;
        }
        if !self.active {
            return Claim::No;
        }
        // `(fail) name [1ms]` plain, `✗ name [1ms]` with colour.
        let status = [
            ("(fail) ", false),
            ("✗ ", false),
            ("(pass) ", true),
            ("(skip) ", true),
            ("(todo) ", true),
            ("✓ ", true),
            ("» ", true),
            ("✎ ", true),
        ]
        .into_iter()
        .find_map(|(p, ok)| t.strip_prefix(p).map(|r| (r, ok)));
        if let Some((rest, ok)) = status {
            if ok {
                self.pending = None;
                return Claim::Yes;
            }
            let name = rest.rsplit_once(" [").map_or(rest, |(n, _)| n);
            self.push(name);
            self.want_message = false;
            if let (Some(i), Some((msg, loc))) = (self.block, self.pending.take())
                && let Some(f) = self.failures.items.get_mut(i)
            {
                f.message = Some(msg);
                if let Some((file, l)) = loc {
                    f.file = Some(file);
                    f.line = Some(l);
                }
            }
            self.block = None;
            return Claim::Yes;
        }
        if t == "# Unhandled error between tests" {
            self.bun_unhandled = true;
            self.pending = None;
            return Claim::Yes;
        }
        if self.bun_unhandled && t.starts_with("---") && self.pending.is_some() {
            // The closing rule of an error outside any test (a file that does not load): the
            // file is the failure, located where the error says.
            self.bun_unhandled = false;
            let name = self
                .bun_file
                .clone()
                .unwrap_or_else(|| "unhandled error".into());
            self.push(&name);
            if let (Some(i), Some((msg, loc))) = (self.block, self.pending.take())
                && let Some(f) = self.failures.items.get_mut(i)
            {
                f.message = Some(msg);
                if let Some((file, l)) = loc {
                    f.file = Some(file);
                    f.line = Some(l);
                }
            }
            self.block = None;
            return Claim::Yes;
        }
        if !line.starts_with(' ')
            && let Some(msg) = error_line(t)
        {
            if self.pending.is_none() {
                self.pending = Some((clip(msg, self.limits.max_text), None));
            }
            return Claim::Yes;
        }
        if let Some(p) = &mut self.pending
            && p.1.is_none()
        {
            if let Some(loc) = frame(t) {
                p.1 = Some(loc);
                return Claim::Yes;
            }
            // The values: `Expected: 5` / `Received: 4`, or a diff's `- 3,` / `+ 2,` lines (not
            // its `- Expected  - 1` tally).
            let diff = (t.starts_with("- ") || t.starts_with("+ "))
                && !t.starts_with("- Expected")
                && !t.starts_with("+ Received");
            if t.starts_with("Expected:") || t.starts_with("Received:") || diff {
                append(&mut p.0, t, self.limits.max_text);
                return Claim::Yes;
            }
        }
        if t.starts_with("Ran ") && (t.contains(" tests across ") || t.contains(" test across ")) {
            return Claim::Summary;
        }
        let mut words = t.split_whitespace();
        if let (Some(n), Some(w)) = (words.next(), words.next())
            && let Ok(n) = n.parse::<u64>()
        {
            let s = self.summary.get_or_insert(Summary {
                passed: Some(0),
                failed: Some(0),
                skipped: Some(0),
                ..Summary::default()
            });
            match w {
                "pass" => s.passed = Some(n),
                "fail" => {
                    s.failed = Some(n);
                    self.failed_count = n;
                }
                "skip" | "todo" => s.skipped = Some(s.skipped.unwrap_or(0) + n),
                "error" | "errors" => s.errors = Some(n),
                _ => {}
            }
            return Claim::Yes;
        }
        if !line.starts_with(' ')
            && let Some(file) = t.strip_suffix(':')
            && !file.contains(' ')
            && file.contains('.')
        {
            // The header before a test file's results.
            self.bun_file = Some(clip(file, self.limits.max_text));
            return Claim::Yes;
        }
        let code_frame = t
            .split_once(" |")
            .is_some_and(|(n, _)| n.trim().parse::<u32>().is_ok());
        if t.is_empty()
            || line.starts_with(' ')
            || code_frame
            || t.ends_with(':')
            || t.starts_with("Expected")
            || t.starts_with("Received")
            || t.starts_with("- ")
            || t.starts_with("+ ")
            || t.starts_with("---")
            || t == "^"
        {
            return Claim::Yes;
        }
        Claim::No
    }

    fn node_spec(&mut self, line: &str, t: &str) -> Claim {
        let indent = line.len() - line.trim_start().len();
        let after_test_at = std::mem::take(&mut self.after_test_at);
        self.load_errors.line(t, self.limits.max_text);
        if let Some(rest) = t.strip_prefix("ℹ ")
            && let (k, v) = rest.split_once(' ').unwrap_or((rest, ""))
            // node's own counts (`ℹ tests 3`); biome marks its advice lines with `ℹ` too.
            && (self.active || v.trim().parse::<u64>().is_ok())
        {
            self.active = true;
            let s = self.summary.get_or_insert(Summary {
                passed: Some(0),
                failed: Some(0),
                skipped: Some(0),
                ..Summary::default()
            });
            let n = v.trim().parse::<u64>().ok();
            match (k, n) {
                ("pass", Some(n)) => s.passed = Some(s.passed.unwrap_or(0) + n),
                ("fail", Some(n)) => {
                    s.failed = Some(s.failed.unwrap_or(0) + n);
                    self.failed_count += n;
                }
                ("cancelled", Some(n)) => {
                    s.failed = Some(s.failed.unwrap_or(0) + n);
                    self.failed_count += n;
                }
                ("skipped" | "todo", Some(n)) => s.skipped = Some(s.skipped.unwrap_or(0) + n),
                _ => {}
            }
            self.block = None;
            return if k == "duration_ms" {
                Claim::Summary
            } else {
                Claim::Yes
            };
        }
        if t == "✖ failing tests:" {
            self.active = true;
            self.node_section = true;
            self.failures.items.truncate(self.node_run_start);
            self.block = None;
            return Claim::Yes;
        }
        let status = ["✔ ", "✖ ", "﹣ ", "▶ ", "- "]
            .iter()
            .find_map(|p| t.strip_prefix(p).map(|r| (*p, r)));
        if let Some((mark, rest)) = status {
            if self.node_section && !after_test_at && rest.contains("ms)") {
                // A test's result after a closing list, not under its `test at`: the next run.
                self.node_section = false;
                self.node_run_start = self.failures.items.len();
            }
            let name = match rest.rsplit_once(" (") {
                Some((n, time)) if time.contains("ms)") => n,
                _ => rest.split(" # ").next().unwrap_or(rest),
            };
            if mark == "▶ " {
                self.suites.push(clip(name, self.limits.max_text));
                self.block = None;
                return Claim::Yes;
            }
            if mark == "✖ " && (rest.contains("ms)") || self.node_section) {
                self.active = true;
                self.push(name);
                if let (Some(i), Some((file, l))) = (self.block, self.node_location.take())
                    && let Some(f) = self.failures.items.get_mut(i)
                {
                    f.file = Some(file);
                    f.line = Some(l);
                }
                return Claim::Yes;
            }
            if rest.contains("ms)") {
                self.active = true;
                self.block = None;
                return Claim::Yes;
            }
        }
        if !self.active {
            return Claim::No;
        }
        if self.node_section
            && let Some(loc) = t.strip_prefix("test at ")
            && let Some((file, l, _)) = location(loc)
        {
            self.node_location = Some((file.to_owned(), l));
            self.block = None;
            self.after_test_at = true;
            return Claim::Yes;
        }
        if self.block.is_some() && (indent > 0 || t.is_empty()) {
            self.block_line(t);
            return Claim::Yes;
        }
        if t.is_empty() || indent > 0 {
            return Claim::Yes;
        }
        Claim::No
    }
}

/// jest's file header glued to the end of a test's unterminated output (`loading… FAIL
/// ./x.test.js`, `… PASS src/y.test.ts (5.1 s)`): the header, from `FAIL` or `PASS`. Only a
/// script file's path (no spaces, a JavaScript or TypeScript extension) and an optional time
/// may follow, so a test's own sentence ending in `PASS` is not one. A header cannot add or
/// remove a failure; it only starts jest's reading. Linear: the last `FAIL ` / `PASS ` is
/// the only candidate.
fn glued_file_header(t: &str) -> Option<&str> {
    let at = t.rfind("FAIL ").max(t.rfind("PASS "))?;
    if at == 0 {
        return None;
    }
    let header = &t[at..];
    let rest = &header[5..];
    let (path, time) = match rest.split_once(' ') {
        Some((p, time)) => (p, Some(time)),
        None => (rest, None),
    };
    let script = [".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts"]
        .iter()
        .any(|ext| path.len() > ext.len() && path.ends_with(ext));
    let timed = time.is_none_or(|t| {
        t.strip_prefix('(')
            .and_then(|t| t.strip_suffix(" s)").or_else(|| t.strip_suffix(" ms)")))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
    });
    (script && timed).then_some(header)
}

/// A parse error's own place inside its message: `SyntaxError: /p/x.test.js: Unexpected
/// token (4:22)` (babel) → (`/p/x.test.js`, 4).
fn message_location(t: &str) -> Option<(String, u32)> {
    let (_, rest) = t.split_once(": ")?;
    let (file, rest) = rest.split_once(": ")?;
    if external(file) || !file.contains('.') || file.contains(' ') {
        return None;
    }
    let pos = rest.strip_suffix(')')?.rsplit_once('(')?.1;
    let (l, c) = pos.split_once(':')?;
    c.parse::<u32>().ok()?;
    Some((file.to_owned(), l.parse().ok()?))
}

/// esbuild's error line: `/p/x.test.ts:5:23: ERROR: Expected ")" but found ";"`.
fn esbuild_error(t: &str) -> Option<(String, u32, &str)> {
    let (loc, text) = t.split_once(": ERROR: ")?;
    let (file, l, _) = location(loc)?;
    if external(file) {
        return None;
    }
    Some((file.to_owned(), l, text))
}

/// A stack frame's location: `at fn (path:12:3)`, `at path:12:3`, `❯ path:12:3`, skipping
/// frames inside `node_modules` and the runtime.
fn frame(t: &str) -> Option<(String, u32)> {
    let rest = t.strip_prefix("at ")?;
    let inner = match rest.rsplit_once(" (") {
        Some((_, r)) => r.trim_end_matches(')'),
        None => rest,
    };
    let inner = inner.strip_prefix("file://").unwrap_or(inner);
    if external(inner) {
        return None;
    }
    let (file, l, _) = location(inner)?;
    Some((file.to_owned(), l))
}

impl Parser for Jest {
    fn interested(&self, l: &Line<'_>) -> bool {
        let w = self.wake();
        self.engaged() || w.first.contains(&l.first) || l.markers & w.markers != 0
    }

    fn wake(&self) -> Wake {
        match self.runner {
            // A file header can be glued to a test's output: `FAIL ` / `PASS ` mid-line.
            Runner::Jest => Wake::first(b"FP").or_markers(MARK_JEST),
            Runner::Vitest => Wake::first(b"R"),
            Runner::Bun => Wake::first(b"b"),
            // `f` and `/`: the place of a load error (`file:///p/x.test.mjs:5`).
            Runner::NodeSpec => Wake::first(b"\xE2\xEF-f/"),
        }
    }

    fn engaged(&self) -> bool {
        self.active || self.load_errors.waiting()
    }

    fn line(&mut self, l: &Line<'_>) -> Claim {
        let line = l.text;
        let t = line.trim();
        match self.runner {
            Runner::Jest => self.jest(l, line, t),
            Runner::Vitest => self.vitest(line, t),
            Runner::Bun => self.bun(line, t),
            Runner::NodeSpec => self.node_spec(line, t),
        }
    }

    fn run_ended(&mut self, base: Option<&str>) {
        self.close_group();
        self.failures.reroot(&mut self.run_start, base);
    }

    fn finish(mut self: Box<Self>) -> Report {
        self.close_group();
        if let Some(mut all) = self.earlier.take() {
            if let Some(s) = &self.summary {
                all.add(s);
            }
            self.summary = Some(all);
        }
        // The failures counted come from the tool's own summary line.
        let counted = self.summary.is_some();
        if self.runner == Runner::NodeSpec {
            self.load_errors.apply(&mut self.failures.items);
        }
        if self.runner == Runner::NodeSpec && !self.node_section {
            // Without the closing list, a failed suite line is the container of its tests.
            let suites = std::mem::take(&mut self.suites);
            self.failures
                .items
                .retain(|f| f.message.is_some() || !suites.contains(&f.name));
        }
        let success = self.summary.as_ref().map(|s| s.failing() == 0);
        let format = match self.runner {
            Runner::Jest => Format::Jest,
            Runner::Vitest => Format::Vitest,
            Runner::Bun => Format::BunTest,
            Runner::NodeSpec => Format::NodeTest,
        };
        Report {
            active: self.active,
            format: Some(format),
            success,
            expected_failures: self.earlier_expected + self.failed_count + self.errors,
            expected_errors: 0,
            summary: self.summary,
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
