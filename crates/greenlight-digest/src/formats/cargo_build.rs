//! cargo / rustc / clippy build output: `error[E…]:` and `warning:` headers with their `-->`
//! location, and cargo's `could not compile` / `Finished` lines.
//!
//! One rule: a header becomes a diagnostic only when rustc's ` --> ` location line follows it
//! (or it carries an `[E…]` code); a bare `error: …` line from some other tool is not ours.

use super::util::{clip, location};
use super::{Bounded, Claim, Limits, Line, Parser, Report, Wake};
use crate::model::{Diagnostic, Severity, Summary};

#[derive(Debug)]
pub(crate) struct CargoBuild {
    limits: Limits,
    active: bool,
    errors: u64,
    per_crate: Vec<(String, u64)>,
    finished: bool,
    failed: bool,
    diagnostics: Bounded<Diagnostic>,
    /// A header waiting for its location line.
    pending: Option<Diagnostic>,
    /// Inside the source excerpt of the last diagnostic (index, when kept).
    in_block: Option<Option<usize>>,
}

impl CargoBuild {
    pub(crate) fn new(limits: Limits) -> Self {
        CargoBuild {
            limits,
            active: false,
            errors: 0,
            per_crate: Vec::new(),
            finished: false,
            failed: false,
            diagnostics: Bounded::new(limits.max_items),
            pending: None,
            in_block: None,
        }
    }

    fn header(&self, line: &str) -> Option<Diagnostic> {
        let (severity, rest) = if let Some(r) = line.strip_prefix("error") {
            (Severity::Error, r)
        } else if let Some(r) = line.strip_prefix("warning") {
            (Severity::Warning, r)
        } else {
            return None;
        };
        let (code, msg) = if let Some(r) = rest.strip_prefix('[') {
            let (code, msg) = r.split_once("]: ")?;
            // rustc's codes are `E` and digits; deno lint prints `error[no-var]:` with the
            // same ` --> ` location below.
            if !code
                .strip_prefix('E')
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            {
                return None;
            }
            (Some(code.to_owned()), msg)
        } else {
            (None, rest.strip_prefix(": ")?)
        };
        Some(Diagnostic {
            severity,
            file: None,
            line: None,
            column: None,
            code,
            message: clip(msg, self.limits.max_text),
            owner: None,
        })
    }

    /// Keeps a pending header as a diagnostic when it has a code (no location to wait for).
    fn settle_pending(&mut self) {
        if let Some(d) = self.pending.take()
            && d.code.is_some()
        {
            let idx = self.diagnostics.push(d);
            self.in_block = Some(idx);
        }
    }
}

impl Parser for CargoBuild {
    fn interested(&self, l: &Line<'_>) -> bool {
        self.engaged() || self.wake().first.contains(&l.first)
    }

    fn wake(&self) -> Wake {
        Wake::first(b"ew-CFDBULAS")
    }

    fn engaged(&self) -> bool {
        self.active || self.pending.is_some()
    }

    fn line(&mut self, l: &Line<'_>) -> Claim {
        let line = l.text;
        let t = line.trim_start();
        if let Some(loc) = t.strip_prefix("--> ")
            && let Some(d) = self.pending.take()
        {
            let mut d = d;
            if let Some((file, l, c)) = location(loc) {
                d.file = Some(file.to_owned());
                d.line = Some(l);
                d.column = c;
            }
            self.active = true;
            let idx = self.diagnostics.push(d);
            self.in_block = Some(idx);
            return Claim::Yes;
        }
        self.settle_pending();
        let b = line.as_bytes();
        if b.first().is_some_and(|c| *c == b'e' || *c == b'w') {
            if let Some(rest) = line.strip_prefix("error: could not compile `") {
                self.active = true;
                self.failed = true;
                if let Some((_, due)) = rest.split_once(" due to ") {
                    // cargo prints a diagnostic once even when two targets of one package
                    // (`lib` and `lib test`) both fail on it: count each package's largest.
                    let krate = rest.split('`').next().unwrap_or_default();
                    let n = super::util::first_number(due).unwrap_or(0);
                    let full = self.per_crate.len() >= self.limits.max_items;
                    match self.per_crate.iter_mut().find(|(k, _)| k == krate) {
                        Some((_, m)) => *m = (*m).max(n),
                        None if !full => self.per_crate.push((krate.to_owned(), n)),
                        None => {}
                    }
                    self.errors = self.per_crate.iter().map(|(_, m)| m).sum();
                }
                self.in_block = None;
                return Claim::Summary;
            }
            if (line.starts_with("warning: `") && line.contains(" generated "))
                || line.starts_with("warning: build failed, waiting for other jobs")
                || (self.failed
                    && line.starts_with("error: command `")
                    && line.contains("` exited with code "))
            {
                self.in_block = None;
                return Claim::Yes;
            }
            if let Some(d) = self.header(line) {
                self.pending = Some(d);
                self.in_block = None;
                // Claimed only once the location confirms it; until then it may be another
                // tool's `error:` line, and the next call settles it.
                return Claim::No;
            }
        }
        if let Some(first) = t.split(' ').next()
            && matches!(
                first,
                "Compiling"
                    | "Checking"
                    | "Finished"
                    | "Documenting"
                    | "Blocking"
                    | "Downloaded"
                    | "Downloading"
                    | "Updating"
                    | "Locking"
                    | "Adding"
                    | "Fresh"
            )
            && line.starts_with(' ')
        {
            self.in_block = None;
            if first == "Finished" {
                self.active = true;
                self.finished = true;
                return Claim::Summary;
            }
            if first == "Compiling" || first == "Checking" {
                self.active = true;
            }
            return Claim::Yes;
        }
        if let Some(idx) = self.in_block {
            if line.is_empty() {
                self.in_block = None;
                return Claim::Yes;
            }
            if t.starts_with('|')
                || t.starts_with('=')
                || t.starts_with("::: ")
                || t.starts_with("...")
                || t.split_once(" |")
                    .is_some_and(|(n, _)| n.trim().parse::<u32>().is_ok())
            {
                if let Some(note) = t.strip_prefix("= note: `#[")
                    && let Some(i) = idx
                    && let Some(d) = self.diagnostics.items.get_mut(i)
                    && d.code.is_none()
                    && let Some((_, lint)) = note.split_once('(')
                    && let Some((lint, _)) = lint.split_once(')')
                {
                    d.code = Some(lint.to_owned());
                }
                // clippy names the lint in its note only the first time; its help link names
                // it every time (`…/index.html#implicit_saturating_sub`).
                if let Some(help) = t.strip_prefix("= help: for further information visit ")
                    && help.contains("rust-clippy")
                    && let Some((_, lint)) = help.rsplit_once('#')
                    && let Some(i) = idx
                    && let Some(d) = self.diagnostics.items.get_mut(i)
                    && d.code.is_none()
                    && !lint.is_empty()
                {
                    d.code = Some(format!("clippy::{}", lint.trim()));
                }
                return Claim::Yes;
            }
        }
        if line.starts_with("Some errors have detailed explanations")
            || line.starts_with("For more information about this error")
            || line.starts_with("For more information about an error")
        {
            return Claim::Yes;
        }
        Claim::No
    }

    fn finish(mut self: Box<Self>) -> Report {
        self.settle_pending();
        let kept_warnings = self
            .diagnostics
            .items
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .count() as u64;
        let summary = (self.finished || self.failed).then(|| Summary {
            errors: Some(self.errors),
            warnings: Some(kept_warnings),
            ..Summary::default()
        });
        Report {
            active: self.active,
            format: None,
            success: summary.as_ref().map(|_| !self.failed),
            summary,
            expected_failures: 0,
            expected_errors: self.errors,
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
