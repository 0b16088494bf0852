//! Line-based diagnostics of compilers, linters, type checkers and format checkers: one parser
//! that reads any of their dialects (gcc, mypy, ruff, ...) and reports the one it read.
//!
//! One rule: these tools print nothing but findings, their context and their own closing
//! lines, so a run is complete only when every line of the output is explained by the one
//! dialect that locked (the digester counts the lines no parser claimed, see
//! [`Report::every_line`]), and the tool's own count, where it prints one, agrees with the
//! findings read field by field.
//!
//! Until a dialect locks, every dialect reads the lines that can start one of them; the first
//! to read a line only its tool prints (a finding, a count, a banner) locks, and from then on
//! it alone reads every line. A second tool's lines after that are unparsed: such an output is
//! at best `partial`.

mod biome;
mod cc;
mod deno;
mod eslint_lines;
mod go;
mod mypy;
mod prettier;
mod pyright;
mod ruff;
mod shellcheck;

use super::util::clip;
use super::{Bounded, Claim, Limits, Line, Parser, Report, Wake};
use crate::model::{Diagnostic, Format, Severity, Summary};

/// What a dialect made of one line.
#[derive(Debug)]
pub(super) enum Read {
    /// Not this tool's line.
    No,
    /// A line of the tool's that finds nothing: an excerpt, a note, a file header, a command
    /// echo. It explains itself but does not prove the tool ran.
    Context,
    /// A line only this tool prints that finds nothing (a banner, a per-file header).
    Own,
    /// A finding.
    Finding(Finding),
    /// The tool's own count (added to any count read before: biome prints errors and
    /// warnings on two lines, clang one line per file).
    Count(Count),
    /// The tool's closing line that counts nothing (`Checked 2 files`): a run that printed no
    /// count has no findings.
    Closing,
}

/// A finding as a dialect reads it; the engine clips its text and keeps it.
#[derive(Debug)]
pub(super) struct Finding {
    pub severity: Severity,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub code: Option<String>,
    pub message: String,
}

impl Finding {
    pub(super) fn at(
        severity: Severity,
        file: &str,
        line: Option<u32>,
        column: Option<u32>,
    ) -> Self {
        Finding {
            severity,
            file: Some(file.to_owned()),
            line,
            column,
            code: None,
            message: String::new(),
        }
    }

    pub(super) fn code(mut self, code: Option<&str>) -> Self {
        self.code = code.map(str::to_owned);
        self
    }

    pub(super) fn message(mut self, message: &str) -> Self {
        self.message = message.trim().to_owned();
        self
    }
}

/// A tool's own count of its findings. A field the tool did not print is `None`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Count {
    pub errors: Option<u64>,
    /// Warnings, notes, infos: findings that are not errors.
    pub others: Option<u64>,
    /// Findings of any severity.
    pub total: Option<u64>,
}

impl Count {
    fn add(&mut self, other: Count) {
        fn sum(a: &mut Option<u64>, b: Option<u64>) {
            if let Some(b) = b {
                *a = Some(a.unwrap_or(0).saturating_add(b));
            }
        }
        sum(&mut self.errors, other.errors);
        sum(&mut self.others, other.others);
        sum(&mut self.total, other.total);
    }
}

/// One tool's grammar.
pub(super) trait Dialect: std::fmt::Debug {
    /// The format of what was read (gcc or clang may tell only from their later lines).
    fn format(&self) -> Format;
    /// Whether the tool always ends with a count or closing line; without it a run of such a
    /// tool was cut short. Tools that print no count make each finding the last word so far.
    fn closes(&self) -> bool;
    /// Whether any finding fails the run, a warning included (shellcheck, prettier).
    fn any_finding_fails(&self) -> bool {
        false
    }
    /// Reads one line (trailing whitespace trimmed, indentation kept). Once the dialect locked
    /// it also reads blank lines, which end blocks; what it makes of them is not asked.
    fn read(&mut self, text: &str) -> Read;
    /// Reads a line that continues the last finding, which the dialect may complete (pyright
    /// names the rule on the message's last line, mypy's `--pretty` wraps the message); the
    /// message stays within `max_text` bytes. Default: nothing to complete.
    fn amend(&mut self, _text: &str, _last: &mut Diagnostic, _max_text: usize) {}
    /// Whether a finding's header was read and still waits for the line that completes it
    /// (ruff's and deno's location line).
    fn pending(&self) -> bool {
        false
    }
}

fn dialects() -> Vec<Box<dyn Dialect>> {
    vec![
        Box::new(cc::Cc::default()),
        Box::new(mypy::Mypy::default()),
        Box::new(ruff::Ruff::default()),
        Box::new(pyright::Pyright),
        Box::new(shellcheck::Shellcheck::default()),
        Box::new(eslint_lines::EslintLines),
        Box::new(go::Go::default()),
        Box::new(biome::Biome::default()),
        Box::new(deno::Deno::default()),
        Box::new(prettier::Prettier),
    ]
}

/// First bytes of the lines that can start a dialect without a `file:line` location in them,
/// as a table (asked about every line).
const STARTS: [bool; 256] = {
    let bytes = b"FSACN[emcgl#v/Iufrh0123456789";
    let mut out = [false; 256];
    let mut i = 0;
    while i < bytes.len() {
        out[bytes[i] as usize] = true;
        i += 1;
    }
    out
};

/// Every byte: a location can start a line with any, so the cheap filter is
/// [`Lint::interested`], not the wake set.
const ANY_FIRST: [u8; 256] = {
    let mut out = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        out[i] = i as u8;
        i += 1;
    }
    out
};

/// Whether `t` holds `:` followed by a digit (a `file:line` location).
fn has_location(t: &[u8]) -> bool {
    memchr::memchr_iter(b':', t).any(|i| t.get(i + 1).is_some_and(u8::is_ascii_digit))
}

#[derive(Debug)]
pub(crate) struct Lint {
    limits: Limits,
    dialects: Vec<Box<dyn Dialect>>,
    /// The dialect that locked, an index into `dialects`.
    locked: Option<usize>,
    findings: Bounded<Diagnostic>,
    /// Findings read, kept or not: errors, then the others.
    errors: u64,
    others: u64,
    /// The last kept finding can still be amended by the lines that follow it.
    amendable: bool,
    count: Option<Count>,
    closed: bool,
    /// A line of the locked dialect's output it could not explain.
    stray: bool,
    /// Finds biome's `━━━` rule, looked for in every line before a dialect locks: built once
    /// (`memmem::find` builds its searcher anew on every call, once per line of a long run).
    rule: memchr::memmem::Finder<'static>,
}

impl Lint {
    pub(crate) fn new(limits: Limits) -> Self {
        Lint {
            limits,
            dialects: dialects(),
            locked: None,
            findings: Bounded::new(limits.max_items),
            errors: 0,
            others: 0,
            amendable: false,
            count: None,
            closed: false,
            stray: false,
            rule: memchr::memmem::Finder::new("━━━".as_bytes()),
        }
    }

    fn keep(&mut self, f: Finding) {
        if f.severity == Severity::Error {
            self.errors += 1;
        } else {
            self.others += 1;
        }
        let d = Diagnostic {
            severity: f.severity,
            file: f.file,
            line: f.line,
            column: f.column,
            code: f.code,
            message: clip(&f.message, self.limits.max_text),
            owner: None,
        };
        self.amendable = self.findings.push(d).is_some();
    }

    /// What the locked dialect's (or, before one locks, the first willing dialect's) reading
    /// of `t` means for the digester.
    fn claim(&mut self, i: usize, read: Read) -> Claim {
        let closes = self.dialects[i].closes();
        let locks = !matches!(read, Read::No | Read::Context);
        if locks {
            self.locked = Some(i);
        }
        match read {
            Read::No => Claim::No,
            Read::Context | Read::Own => {
                // A tool without a closing count: its last line so far is the last word.
                if !closes && self.locked.is_some() {
                    Claim::Summary
                } else {
                    Claim::Yes
                }
            }
            Read::Finding(f) => {
                self.keep(f);
                if closes { Claim::Yes } else { Claim::Summary }
            }
            Read::Count(c) => {
                self.count.get_or_insert_default().add(c);
                self.closed = true;
                Claim::Summary
            }
            Read::Closing => {
                self.closed = true;
                Claim::Summary
            }
        }
    }
}

impl Parser for Lint {
    fn interested(&self, l: &Line<'_>) -> bool {
        self.locked.is_some()
            || STARTS[usize::from(l.first)]
            || has_location(l.text.as_bytes())
            || self.rule.find(l.text.as_bytes()).is_some()
    }

    fn wake(&self) -> Wake {
        Wake::first(&ANY_FIRST)
    }

    fn engaged(&self) -> bool {
        self.locked.is_some()
    }

    fn line(&mut self, l: &Line<'_>) -> Claim {
        let t = l.text.trim_end();
        if let Some(i) = self.locked {
            let dialect = &mut self.dialects[i];
            if t.is_empty() {
                // Blank lines end blocks (shellcheck's `Did you mean:`); they need no claim.
                dialect.read(t);
                return Claim::Yes;
            }
            let read = dialect.read(t);
            if matches!(read, Read::Context)
                && self.amendable
                && let Some(last) = self.findings.items.last_mut()
            {
                dialect.amend(t, last, self.limits.max_text);
            }
            if matches!(read, Read::No) {
                self.stray = true;
                return Claim::No;
            }
            if matches!(read, Read::Finding(_) | Read::Count(_) | Read::Closing) {
                self.amendable = false;
            }
            return self.claim(i, read);
        }
        if t.is_empty() {
            return Claim::No;
        }
        let mut context = false;
        for i in 0..self.dialects.len() {
            match self.dialects[i].read(t) {
                Read::No => {}
                Read::Context => context = true,
                read => return self.claim(i, read),
            }
        }
        if context { Claim::Yes } else { Claim::No }
    }

    fn finish(self: Box<Self>) -> Report {
        let Some(i) = self.locked else {
            return Report::default();
        };
        // Locked by a banner alone (a make recipe's compiler command) and followed by lines
        // that are not the tool's: not this tool's run (`make test` compiles, then tests).
        let found_nothing = self.errors + self.others == 0 && self.count.is_none() && !self.closed;
        if found_nothing && self.stray {
            return Report::default();
        }
        let dialect = &self.dialects[i];
        let found = Count {
            errors: Some(self.errors),
            others: Some(self.others),
            total: Some(self.errors + self.others),
        };
        // The tool's own count, field by field where it printed one; a run that closed
        // without a count found nothing.
        let count = self.count.unwrap_or(Count {
            errors: Some(0),
            others: Some(0),
            total: Some(0),
        });
        let agree = |mine: Option<u64>, theirs: Option<u64>| theirs.is_none_or(|t| Some(t) == mine);
        let counted = !dialect.closes() || self.closed;
        let count_mismatch = counted
            && (dialect.closes() || self.count.is_some())
            && !(agree(found.errors, count.errors)
                && agree(found.others, count.others)
                && agree(found.total, count.total));
        let summary = counted.then(|| Summary {
            errors: Some(self.errors),
            warnings: Some(self.others),
            ..Summary::default()
        });
        let fails = self.errors > 0 || (dialect.any_finding_fails() && self.others > 0);
        Report {
            active: true,
            format: Some(dialect.format()),
            success: counted.then_some(!fails),
            summary,
            expected_failures: 0,
            expected_errors: count.errors.unwrap_or(self.errors).max(self.errors),
            failures: Vec::new(),
            diagnostics: self.findings.items,
            dropped: self.findings.dropped > 0,
            unparsed: self.stray || dialect.pending(),
            counted: false,
            count_mismatch,
            unconfirmed_markers: false,
            warnings_fail: dialect.any_finding_fails(),
            every_line: true,
        }
    }
}

/// `file:line:col: rest` or `file:line: rest` at the start of `t`, the file ending in one of
/// `exts`: (file, line, column, rest).
pub(super) fn located<'a>(
    t: &'a str,
    exts: &[&str],
) -> Option<(&'a str, u32, Option<u32>, &'a str)> {
    let (loc, rest) = t.split_once(": ")?;
    let (file, l, c) = super::util::location(loc)?;
    if loc.contains(' ') || !exts.iter().any(|e| file.ends_with(e)) {
        return None;
    }
    Some((file, l, c, rest))
}

/// `N word` for the count words given: `Found 3 errors.` → 3 for `error`/`errors`.
/// Continues `message` with the wrapped rest of its text, within `max` bytes.
pub(super) fn unwrap_into(message: &mut String, rest: &str, max: usize) {
    let rest = rest.trim();
    if !rest.is_empty() && message.len() + 1 + rest.len() <= max {
        message.push(' ');
        message.push_str(rest);
    }
}

pub(super) fn number_of(s: &str, singular: &str) -> Option<u64> {
    let mut out = None;
    super::util::counts(s, |w, n| {
        if w == singular || w.strip_suffix('s') == Some(singular) {
            out = Some(n);
        }
    });
    out
}
