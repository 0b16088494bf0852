//! TAP (versions 13 and 14: tape, node-tap, mocha's TAP reporter, `node --test` with the TAP
//! reporter): `ok` / `not ok` points at any nesting depth, YAML diagnostics, the plan, and the
//! `# tests` / `# pass` / `# fail` count comments several producers add.
//!
//! One rule: a trailing plan or count comment is the terminal summary; a failing point whose
//! own subtests failed is a container, and only the subtests are failures.

use super::util::{LoadErrors, clip, external, location};
use super::{Bounded, Claim, Limits, Line, Parser, Report, Wake};
use crate::model::{Failure, Format, Summary};

#[derive(Debug)]
struct Point {
    failure: Failure,
    indent: usize,
    container: bool,
    /// An `error:` value of `|-` style: the next line is the message.
    want_error_line: bool,
    /// Inside a `---` YAML block (otherwise indented lines are a plain message).
    in_yaml: bool,
    /// A block scalar (`expected: |-`) being read: its key and the key line's indent.
    scalar: Option<(&'static str, usize)>,
}

#[derive(Debug)]
pub(crate) struct Tap {
    limits: Limits,
    active: bool,
    node: bool,
    points: u64,
    top_ok: u64,
    top_not_ok: u64,
    top_skip: u64,
    plan: Option<u64>,
    counts: Summary,
    has_counts: bool,
    bailed: bool,
    failures: Bounded<Point>,
    /// The failing point whose YAML block or indented message follows.
    block: Option<usize>,
    /// tape: `operator`, `expected`, `actual` of the block, joined when there is no `error`.
    compare: Vec<String>,
    /// tape: the last `# name` comment, the group of the assertions after it.
    group: Option<String>,
    /// `# Subtest: name` headers still open, with their indent.
    subtests: Vec<(usize, String)>,
    /// node: a test file's load error, echoed as comments before the file's point.
    load_errors: LoadErrors,
}

impl Tap {
    pub(crate) fn new(limits: Limits) -> Self {
        Tap {
            limits,
            active: false,
            node: false,
            points: 0,
            top_ok: 0,
            top_not_ok: 0,
            top_skip: 0,
            plan: None,
            counts: Summary::default(),
            has_counts: false,
            bailed: false,
            failures: Bounded::new(limits.max_items),
            block: None,
            compare: Vec::new(),
            group: None,
            subtests: Vec::new(),
            load_errors: LoadErrors::default(),
        }
    }

    fn close_block(&mut self) {
        if let Some(i) = self.block.take()
            && let Some(p) = self.failures.items.get_mut(i)
            && p.failure.message.is_none()
            && !self.compare.is_empty()
        {
            p.failure.message = Some(clip(&self.compare.join(", "), self.limits.max_text));
        }
        self.compare.clear();
    }

    fn yaml(&mut self, i: usize, t: &str, indent: usize) {
        let max = self.limits.max_text;
        let Some(p) = self.failures.items.get_mut(i) else {
            return;
        };
        if let Some((key, at)) = p.scalar {
            if indent > at || t.is_empty() {
                // A block scalar's lines: `expected`/`actual` keep their first line, a diff
                // its first removed and added lines.
                let keep = match key {
                    "diff" => {
                        (t.starts_with('-') && !t.starts_with("---"))
                            || (t.starts_with('+') && !t.starts_with("+++"))
                    }
                    _ => !t.is_empty() && !self.compare.iter().any(|c| c.starts_with(key)),
                };
                if keep && self.compare.len() < 4 {
                    self.compare.push(format!("{key}: {t}"));
                }
                return;
            }
            p.scalar = None;
        }
        let f = &mut p.failure;
        if p.want_error_line {
            p.want_error_line = false;
            if f.message.is_none() && !t.is_empty() {
                f.message = Some(clip(t, max));
            }
            return;
        }
        if let Some(v) = t
            .strip_prefix("error: ")
            .or_else(|| t.strip_prefix("message: "))
        {
            let v = v.trim();
            if v.starts_with('|') || v.starts_with('>') {
                p.want_error_line = true;
            } else if f.message.is_none() {
                f.message = Some(clip(v.trim_matches(['\'', '"']), max));
            }
        } else if let Some(v) = t.strip_prefix("failureType: ") {
            if v.contains("subtestsFailed") {
                p.container = true;
            }
        } else if let Some(v) = t.strip_prefix("location: ") {
            if let Some((file, l, _)) = location(v.trim_matches(['\'', '"'])) {
                f.file = Some(file.trim_start_matches("file://").to_owned());
                f.line = Some(l);
            }
        } else if let Some(v) = t.strip_prefix("at: ") {
            // tape: `at: Test.<anonymous> (/path/test.js:9:5)`
            if f.file.is_none()
                && let Some(inner) = v.rsplit_once('(').map(|(_, r)| r.trim_end_matches(')'))
                && let Some((file, l, _)) = location(inner)
                && !external(file)
            {
                f.file = Some(file.to_owned());
                f.line = Some(l);
            }
        } else if let Some(v) = t.strip_prefix("fileName: ") {
            if f.file.is_none() {
                f.file = Some(v.trim().to_owned());
            }
        } else if let Some(v) = t.strip_prefix("lineNumber: ") {
            if f.line.is_none() {
                f.line = v.trim().parse().ok();
            }
        } else if t.starts_with("operator: ")
            || t.starts_with("compare: ")
            || t.starts_with("expected: ")
            || t.starts_with("actual: ")
            || t.starts_with("diff: ")
        {
            let (k, v) = t.split_once(':').unwrap_or((t, ""));
            let v = v.trim();
            if v.starts_with('|') || v.starts_with('>') {
                // A block scalar: the value is on the lines below, indented deeper.
                p.scalar = match k {
                    "expected" => Some(("expected", indent)),
                    "actual" => Some(("actual", indent)),
                    "diff" => Some(("diff", indent)),
                    _ => None,
                };
            } else if self.compare.len() < 4 && k != "diff" {
                self.compare.push(format!("{k}: {v}"));
            }
        } else if t.starts_with("at ") && f.file.is_none() {
            // mocha: an indented stack after the message.
            if let Some(inner) = t.rsplit_once('(').map(|(_, r)| r.trim_end_matches(')'))
                && let Some((file, l, _)) = location(inner)
                && !external(file)
            {
                f.file = Some(file.to_owned());
                f.line = Some(l);
            }
        } else if !p.in_yaml && f.message.is_none() && !t.is_empty() {
            // mocha prints the message as plain indented lines, no YAML block.
            f.message = Some(clip(t, max));
        }
    }
}

/// `ok 1 - name # SKIP reason` → (ok, name, directive).
fn point(t: &str) -> Option<(bool, &str, Option<&str>)> {
    let (ok, rest) = if let Some(r) = t.strip_prefix("not ok") {
        (false, r)
    } else if let Some(r) = t.strip_prefix("ok") {
        (true, r)
    } else {
        return None;
    };
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    let rest = rest.trim_start();
    let rest = match rest.split_once(' ') {
        Some((n, r)) if n.parse::<u64>().is_ok() => r,
        None if rest.parse::<u64>().is_ok() => "",
        _ if rest.is_empty() => "",
        _ => return None,
    };
    let rest = rest.strip_prefix("- ").unwrap_or(rest);
    let (name, directive) = match rest.split_once(" # ") {
        Some((n, d)) => (n, Some(d)),
        None => (rest, None),
    };
    Some((ok, name.trim(), directive))
}

impl Parser for Tap {
    fn interested(&self, l: &Line<'_>) -> bool {
        self.active || (l.indent == 0 && matches!(l.first, b'T' | b'o' | b'n'))
    }

    fn wake(&self) -> Wake {
        Wake::first(b"Ton")
    }

    fn engaged(&self) -> bool {
        self.active
    }

    fn line(&mut self, l: &Line<'_>) -> Claim {
        let line = l.text;
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if t.starts_with("TAP version ") {
            self.active = true;
            return Claim::Open;
        }
        if let Some((ok, name, directive)) = point(t) {
            let numbered = t
                .trim_start_matches("not ")
                .trim_start_matches("ok ")
                .starts_with(|c: char| c.is_ascii_digit());
            if !(self.active || indent == 0 && numbered) {
                return Claim::No;
            }
            self.active = true;
            // A point closes the subtest of its own indent and any deeper.
            self.subtests.retain(|(at, _)| *at < indent);
            self.close_block();
            self.points += 1;
            let dir = directive.map(str::to_ascii_lowercase);
            let skip = dir
                .as_deref()
                .is_some_and(|d| d.starts_with("skip") || d.starts_with("todo"));
            if indent == 0 {
                match (ok, skip) {
                    (_, true) => self.top_skip += 1,
                    (true, false) => self.top_ok += 1,
                    (false, false) => self.top_not_ok += 1,
                }
            }
            if !ok && !skip {
                // A failure right after deeper failures is the container of those subtests.
                let container = self
                    .failures
                    .items
                    .last()
                    .is_some_and(|p| p.indent > indent);
                // The full name: open subtests around this point, tape's group, the point.
                let mut parts: Vec<&str> = self
                    .subtests
                    .iter()
                    .filter(|(at, _)| *at < indent)
                    .map(|(_, n)| n.as_str())
                    .collect();
                if let Some(g) = &self.group
                    && g != name
                {
                    parts.push(g);
                }
                parts.push(name);
                let full = parts.join(" › ");
                self.block = self.failures.push(Point {
                    failure: Failure {
                        name: clip(&full, self.limits.max_text),
                        file: None,
                        line: None,
                        message: None,
                    },
                    indent,
                    container,
                    want_error_line: false,
                    in_yaml: false,
                    scalar: None,
                });
            }
            return if self.plan.is_some() && indent == 0 {
                Claim::Summary
            } else {
                Claim::Yes
            };
        }
        if !self.active {
            return Claim::No;
        }
        if let Some(rest) = t.strip_prefix("1..") {
            let n = rest
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(n) = n {
                self.close_block();
                if indent == 0 {
                    self.plan = Some(n);
                    return if self.points > 0 {
                        Claim::Summary
                    } else {
                        Claim::Yes
                    };
                }
                return Claim::Yes;
            }
        }
        if t.starts_with("Bail out!") {
            self.bailed = true;
            return Claim::Yes;
        }
        if let Some(c) = t.strip_prefix("# ") {
            if indent == 0 {
                self.close_block();
            }
            self.load_errors.line(c.trim(), self.limits.max_text);
            if let Some(name) = c.strip_prefix("Subtest: ") {
                self.subtests.retain(|(at, _)| *at < indent);
                if self.subtests.len() < 64 {
                    self.subtests
                        .push((indent, clip(name, self.limits.max_text)));
                }
                self.group = None;
                return Claim::Yes;
            }
            let mut words = c.split_whitespace();
            if let (Some(k), Some(v), None) = (words.next(), words.next(), words.next())
                && let Ok(v) = v.parse::<u64>()
                && indent == 0
            {
                let known = match k {
                    "tests" => true,
                    "pass" => {
                        self.counts.passed = Some(v);
                        true
                    }
                    "fail" => {
                        self.counts.failed = Some(v);
                        true
                    }
                    "skip" | "skipped" | "todo" => {
                        self.counts.skipped = Some(self.counts.skipped.unwrap_or(0) + v);
                        true
                    }
                    "suites" | "cancelled" | "duration_ms" => {
                        self.node = true;
                        if k == "cancelled" && v > 0 {
                            self.counts.failed = Some(self.counts.failed.unwrap_or(0) + v);
                        }
                        true
                    }
                    _ => false,
                };
                if known {
                    self.has_counts = true;
                    return Claim::Summary;
                }
            }
            if c.starts_with("duration_ms") {
                self.node = true;
                return Claim::Summary;
            }
            if indent == 0 && self.plan.is_none() {
                // tape: `# name` heads the assertions of the test named so.
                self.group = Some(clip(c, self.limits.max_text));
            }
            return Claim::Yes;
        }
        if let Some(i) = self.block {
            if t == "---" || t == "..." {
                if t == "..." {
                    self.close_block();
                } else if let Some(p) = self.failures.items.get_mut(i) {
                    p.in_yaml = true;
                }
                return Claim::Yes;
            }
            if indent > 0 || t.is_empty() {
                self.yaml(i, t, indent);
                return Claim::Yes;
            }
        }
        if t.is_empty() || t == "---" || t == "..." || indent > 0 {
            return Claim::Yes;
        }
        Claim::No
    }

    fn finish(mut self: Box<Self>) -> Report {
        self.close_block();
        let summary = if self.has_counts {
            let mut s = self.counts.clone();
            s.passed.get_or_insert(0);
            s.failed.get_or_insert(0);
            s.skipped.get_or_insert(0);
            Some(s)
        } else {
            self.plan.map(|_| Summary {
                passed: Some(self.top_ok),
                failed: Some(self.top_not_ok),
                skipped: Some(self.top_skip),
                ..Summary::default()
            })
        };
        let plan_met = self
            .plan
            .is_none_or(|p| p == self.top_ok + self.top_not_ok + self.top_skip);
        let mut failures: Vec<Failure> = self
            .failures
            .items
            .into_iter()
            .filter(|p| !p.container)
            .map(|p| p.failure)
            .collect();
        self.load_errors.apply(&mut failures);
        let expected = summary.as_ref().and_then(|s| s.failed).unwrap_or(0);
        let success = summary
            .as_ref()
            .map(|s| s.failed == Some(0) && !self.bailed && plan_met && self.top_not_ok == 0);
        Report {
            active: self.active,
            format: Some(if self.node {
                Format::NodeTest
            } else {
                Format::Tap
            }),
            summary,
            success,
            expected_failures: expected,
            expected_errors: 0,
            dropped: self.failures.dropped > 0,
            failures,
            diagnostics: Vec::new(),
            unparsed: false,
            // `# fail N` is the producer's own count; without it the failed count is the
            // points read, and the plan is what they must meet.
            counted: self.has_counts,
            count_mismatch: self.plan.is_some() && !plan_met && !self.bailed,
            unconfirmed_markers: false,
            ..Report::default()
        }
    }
}
