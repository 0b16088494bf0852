//! cargo / rustc / clippy build output: `error[E…]:` and `warning:` headers with their `-->`
//! location (or, with `--message-format=short`, one `file:l:c: error[E…]: msg` line each),
//! a failed build script's block (its panic's place and message), and cargo's `could not
//! compile` / `Finished` lines.
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
    /// Inside a failed build script's `Caused by:` block: its diagnostic, until the script's
    /// panic names its place and message.
    build_script: Option<BuildScript>,
}

/// A build script that failed: cargo's header, then the script's own output indented.
#[derive(Debug)]
struct BuildScript {
    diagnostic: Diagnostic,
    /// The panic's place was read; its message is the next line.
    message_next: bool,
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
            build_script: None,
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

    /// `--message-format=short`: `src/lib.rs:3:13: error[E0425]: message`.
    fn short(&self, line: &str) -> Option<Diagnostic> {
        let (loc, rest) = line.split_once(": ")?;
        let (file, l, c) = location(loc)?;
        if !file.ends_with(".rs") || loc.contains(' ') {
            return None;
        }
        let mut d = self.header(rest)?;
        d.file = Some(file.to_owned());
        d.line = Some(l);
        d.column = c;
        Some(d)
    }

    /// A line of a failed build script's block: the panic's place and message become the
    /// diagnostic's; the rest (`Caused by:`, the script's stdout) is the block's.
    fn build_script_line(&mut self, line: &str) -> Option<Claim> {
        let script = self.build_script.as_mut()?;
        if !line.is_empty()
            && !line.starts_with("  ")
            && line != "Caused by:"
            && !line.starts_with("note: ")
        {
            let done = self.build_script.take()?;
            self.diagnostics.push(done.diagnostic);
            return None;
        }
        let t = line.trim();
        if script.message_next && !t.is_empty() {
            script.diagnostic.message = clip(t, self.limits.max_text);
            script.message_next = false;
        } else if let Some(at) = t
            .strip_prefix("thread '")
            .and_then(|r| r.split_once(" panicked at "))
            .map(|(_, at)| at)
            && let Some((file, l, c)) = location(at)
        {
            script.diagnostic.file = Some(file.to_owned());
            script.diagnostic.line = Some(l);
            script.diagnostic.column = c;
            script.message_next = true;
        }
        Some(Claim::Yes)
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
        self.active || self.pending.is_some() || self.build_script.is_some()
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
        if let Some(claim) = self.build_script_line(line) {
            return claim;
        }
        if let Some(rest) = line.strip_prefix("error: failed to run custom build command for `") {
            // cargo prints no `could not compile` after it: this is the run's last word.
            self.active = true;
            self.failed = true;
            self.errors += 1;
            let name = rest.split('`').next().unwrap_or_default();
            self.build_script = Some(BuildScript {
                diagnostic: Diagnostic {
                    severity: Severity::Error,
                    file: None,
                    line: None,
                    column: None,
                    code: None,
                    message: clip(
                        &format!("build script of {name} failed"),
                        self.limits.max_text,
                    ),
                    owner: None,
                },
                message_next: false,
            });
            self.in_block = None;
            return Claim::Summary;
        }
        if self.active
            && let Some(d) = self.short(line)
        {
            self.diagnostics.push(d);
            self.in_block = None;
            return Claim::Yes;
        }
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
        if let Some(script) = self.build_script.take() {
            self.diagnostics.push(script.diagnostic);
        }
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
