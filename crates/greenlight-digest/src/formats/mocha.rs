//! mocha's default `spec` reporter: the test tree, then `N passing (time)` / `N pending` /
//! `N failing`, then one numbered block per failure (`1) suite` / `title:` / message / stack).
//!
//! One rule: the counts lines start the run's summary and the numbered blocks after them are
//! part of it; a failure's name is its titles joined as mocha's full title, its message the
//! first line under the titles (with the values line right under a message ending in `:`),
//! its location the innermost stack frame in the project.

use super::util::{append, clip, external, location};
use super::{Bounded, Claim, Limits, Line, Parser, Report, Wake};
use crate::model::{Failure, Summary};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    /// Not in a failure block.
    None,
    /// Reading title lines (the last one ends in `:`).
    Titles,
    /// The message is next.
    Message,
    /// After the message: values, then the stack.
    Body,
}

#[derive(Debug)]
pub(crate) struct Mocha {
    limits: Limits,
    active: bool,
    summary: Option<Summary>,
    failed: u64,
    failures: Bounded<Failure>,
    block: Block,
    current: Option<usize>,
    /// A values line may follow the message (it ended in `:`).
    want_values: bool,
}

impl Mocha {
    pub(crate) fn new(limits: Limits) -> Self {
        Mocha {
            limits,
            active: false,
            summary: None,
            failed: 0,
            failures: Bounded::new(limits.max_items),
            block: Block::None,
            current: None,
            want_values: false,
        }
    }
}

/// `5 failing`, `1 passing (20ms)`, `1 pending` → (count, word).
fn count_line(t: &str) -> Option<(u64, &str)> {
    let (n, rest) = t.split_once(' ')?;
    let n = n.parse::<u64>().ok()?;
    let word = rest.split(' ').next()?;
    let ok = match word {
        "passing" => rest == "passing" || (rest[7..].trim().starts_with('(') && t.ends_with(')')),
        "pending" | "failing" => rest == word,
        _ => false,
    };
    ok.then_some((n, word))
}

impl Parser for Mocha {
    fn interested(&self, l: &Line<'_>) -> bool {
        self.active || l.first.is_ascii_digit()
    }

    fn wake(&self) -> Wake {
        Wake::first(b"0123456789")
    }

    fn engaged(&self) -> bool {
        self.active
    }

    fn line(&mut self, l: &Line<'_>) -> Claim {
        let t = l.text.trim();
        if let Some((n, word)) = count_line(t) {
            if word == "passing" {
                self.active = true;
                self.summary = Some(Summary {
                    passed: Some(n),
                    failed: Some(0),
                    skipped: Some(0),
                    ..Summary::default()
                });
                self.failed = 0;
                self.block = Block::None;
                return Claim::Summary;
            }
            if let Some(s) = &mut self.summary {
                if word == "failing" {
                    s.failed = Some(n);
                    self.failed = n;
                } else {
                    s.skipped = Some(n);
                }
                return Claim::Summary;
            }
            return Claim::No;
        }
        if !self.active {
            return Claim::No;
        }
        if let Some((n, title)) = t.split_once(") ")
            && n.parse::<u64>().is_ok()
            && l.indent <= 4
            && self.failed > 0
        {
            self.current = self.failures.push(Failure {
                name: String::new(),
                file: None,
                line: None,
                message: None,
            });
            self.block = Block::Titles;
            self.want_values = false;
            self.title(title);
            return Claim::Yes;
        }
        let max = self.limits.max_text;
        let Some(f) = self.current.and_then(|i| self.failures.items.get_mut(i)) else {
            return if t.is_empty() || l.indent > 0 {
                Claim::Yes
            } else {
                Claim::No
            };
        };
        match self.block {
            Block::Titles if !t.is_empty() => {
                self.title(t);
            }
            Block::Message if !t.is_empty() => {
                f.message = Some(clip(t, max));
                self.want_values = t.ends_with(':');
                self.block = Block::Body;
            }
            Block::Body if !t.is_empty() => {
                if let Some(rest) = t.strip_prefix("at ") {
                    let inner = match rest.rsplit_once(" (") {
                        Some((_, r)) => r.trim_end_matches(')'),
                        None => rest,
                    };
                    let inner = inner.strip_prefix("file://").unwrap_or(inner);
                    if f.file.is_none()
                        && let Some((file, n, _)) = location(inner)
                        && !external(file)
                    {
                        f.file = Some(file.to_owned());
                        f.line = Some(n);
                    }
                    self.want_values = false;
                } else if self.want_values {
                    self.want_values = false;
                    if let Some(m) = &mut f.message {
                        append(m, t, max);
                    }
                }
            }
            _ => {}
        }
        if t.is_empty() || l.indent > 0 {
            Claim::Yes
        } else {
            // Assertion diffs print unindented lines inside a block.
            Claim::Yes
        }
    }

    fn finish(self: Box<Self>) -> Report {
        // The failures counted come from the tool's own summary line.
        let counted = self.summary.is_some();
        let success = self.summary.as_ref().map(|s| s.failed == Some(0));
        Report {
            active: self.active,
            format: None,
            summary: self.summary,
            success,
            expected_failures: self.failed,
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

impl Mocha {
    /// Adds one title line to the current failure's name; the last one ends in `:`.
    fn title(&mut self, t: &str) {
        let max = self.limits.max_text;
        let Some(f) = self.current.and_then(|i| self.failures.items.get_mut(i)) else {
            return;
        };
        let (part, last) = match t.strip_suffix(':') {
            Some(p) => (p, true),
            None => (t, false),
        };
        if f.name.is_empty() {
            f.name = clip(part, max);
        } else {
            f.name = clip(&format!("{} {part}", f.name), max);
        }
        if last {
            self.block = Block::Message;
        }
    }
}
