//! One line parser per output format, all fed the same normalised lines.
//!
//! One rule: a parser only reads lines and keeps bounded state; it never decides the
//! classification. It reports what it saw (its summary, failures, diagnostics, whether its
//! terminal summary is still the last word) and the digester judges.

use crate::model::{Diagnostic, Failure, Format, Summary};

pub(crate) mod cargo_build;
pub(crate) mod deno_test;
pub(crate) mod eslint;
pub(crate) mod go_test;
pub(crate) mod jest;
pub(crate) mod libtest;
pub(crate) mod lint;
pub(crate) mod mocha;
pub(crate) mod nextest;
pub(crate) mod pytest;
pub(crate) mod tap;
pub(crate) mod tsc;
pub(crate) mod unittest;
pub(crate) mod util;

/// What a parser made of one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Not this parser's line.
    No,
    /// This parser's line.
    Yes,
    /// This parser's line, and it starts a new run section: any summary seen so far is no longer
    /// the terminal one (a second test binary, a second package).
    Open,
    /// This parser's terminal summary (for now; an `Open` later retracts it).
    Summary,
}

/// Limits shared by all parsers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_items: usize,
    pub max_text: usize,
}

/// Everything a parser saw, handed to the digester at the end.
#[derive(Debug, Default, Clone)]
pub(crate) struct Report {
    /// The parser saw lines only its format prints.
    pub active: bool,
    /// The format to report (a parser may recognise a close variant, like node's TAP).
    pub format: Option<Format>,
    pub summary: Option<Summary>,
    /// Success according to the summary; `None` when it said nothing about it.
    pub success: Option<bool>,
    /// Failures the summary counts, to be matched by failures with a diagnostic.
    pub expected_failures: u64,
    /// Error diagnostics the summary counts.
    pub expected_errors: u64,
    pub failures: Vec<Failure>,
    pub diagnostics: Vec<Diagnostic>,
    /// Items were counted but not kept (budget).
    pub dropped: bool,
    /// Lines of this format that the parser could not place.
    pub unparsed: bool,
    /// `expected_failures` is the tool's own count of failures (not derived from the failures
    /// read), so the failures listed must not exceed it.
    pub counted: bool,
    /// The run's own record disagrees with what was read: a TAP plan its points do not meet,
    /// a `go test -v` test that started and printed no result.
    pub count_mismatch: bool,
    /// A runner's marker was read in the middle of a line where nothing in the output could
    /// confirm it was the runner's and not a test's own output.
    pub unconfirmed_markers: bool,
    /// A warning alone fails the run (shellcheck exits 1 on a note), so a failed run whose
    /// findings are all warnings is explained.
    pub warnings_fail: bool,
    /// The format explains every line of its output: a line no parser claimed makes the digest
    /// `unparsed-lines` (line-based linters and compilers, see [`lint`]).
    pub every_line: bool,
}

/// One normalised line with the features every parser's first check needs, computed once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line<'a> {
    /// The line as a terminal shows it.
    pub text: &'a str,
    /// First byte after leading whitespace (0 for a blank line).
    pub first: u8,
    /// Leading whitespace in bytes.
    pub indent: usize,
    /// The raw line before this one (eslint's file header precedes its first row); normalise
    /// it with `crate::normalize::view` when needed.
    pub prev: &'a [u8],
    /// Which of [`MARKERS`] `text` contains, one bit each.
    pub markers: Markers,
}

/// A set of [`MARKERS`], one bit per entry.
pub(crate) type Markers = u8;

/// The substrings parsers need that the first byte cannot rule out, found by the line
/// splitter once per chunk: every tsc diagnostic carries ` TS<code>: ` after its location, and
/// a runner's own line can follow a test's output that did not end its line (`loading… ---
/// FAIL: TestC (0.00s)`, `loading… FAIL ./x.test.js`), so its marker is mid-line.
pub(crate) const MARKERS: [&[u8]; 4] = [b" TS", b"--- ", b"FAIL ", b"PASS "];
/// ` TS`: a tsc diagnostic.
pub(crate) const MARK_TSC: Markers = 1;
/// `--- `: a `go test` result line (`--- FAIL: name (0.00s)`).
pub(crate) const MARK_GO: Markers = 1 << 1;
/// `FAIL ` or `PASS `: a jest file header.
pub(crate) const MARK_JEST: Markers = (1 << 2) | (1 << 3);

impl<'a> Line<'a> {
    pub(crate) fn new(text: &'a str, prev: &'a [u8], markers: Markers) -> Self {
        let (first, indent) = match text.as_bytes().first() {
            // Most lines start with a printable ASCII byte: no whitespace to trim.
            Some(&b) if b > b' ' && b < 0x80 => (b, 0),
            _ => {
                let trimmed = text.trim_start();
                (
                    trimmed.as_bytes().first().copied().unwrap_or(0),
                    text.len() - trimmed.len(),
                )
            }
        };
        Line {
            text,
            first,
            indent,
            prev,
            markers,
        }
    }
}

/// The lines that can interest a parser that is not [`Parser::engaged`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wake {
    /// Values of [`Line::first`].
    pub first: &'static [u8],
    /// Lines holding any of these [`MARKERS`].
    pub markers: Markers,
}

impl Wake {
    pub(crate) const fn first(first: &'static [u8]) -> Self {
        Wake { first, markers: 0 }
    }

    /// Also the lines holding any of `markers`.
    pub(crate) const fn or_markers(self, markers: Markers) -> Self {
        Wake {
            first: self.first,
            markers,
        }
    }
}

/// A line parser for one format.
///
/// The digester asks a parser about a line only when the parser is [`engaged`](Parser::engaged)
/// or the line matches its [`wake`](Parser::wake) set, so most lines of a long run reach one
/// parser. `interested` must imply `engaged() || wake()` matches (debug builds assert it).
pub(crate) trait Parser {
    /// Whether `line` can matter to this parser in its current state. Most lines of a long run
    /// are of one format; a cheap `false` from every other parser keeps the digester fast. It
    /// must be `true` for every line that could change the parser's state or be claimed.
    fn interested(&self, line: &Line<'_>) -> bool;
    /// The lines that can interest this parser while it is not engaged. Constant per parser.
    fn wake(&self) -> Wake;
    /// Whether the parser's state makes any line possibly interesting. Only [`Parser::line`]
    /// changes it.
    fn engaged(&self) -> bool;
    /// Reads one normalised line.
    fn line(&mut self, line: &Line<'_>) -> Claim;
    /// Ends the input and reports.
    fn finish(self: Box<Self>) -> Report;
    /// A wrapper's run ended (`npm error path …`, `make: Leaving directory …`): the failures
    /// read since the last call were that run's, whose relative paths are relative to `base`
    /// (`None`: the run named no directory). Only parsers whose tools run under workspace
    /// wrappers keep their failures' places per run.
    fn run_ended(&mut self, base: Option<&str>) {
        let _ = base;
    }
}

/// All parsers, in a fixed order (the order only matters for ties in the report).
pub(crate) fn all(limits: Limits) -> Vec<(Format, Box<dyn Parser>)> {
    vec![
        (Format::CargoTest, Box::new(libtest::Libtest::new(limits))),
        (Format::Nextest, Box::new(nextest::Nextest::new(limits))),
        (
            Format::CargoBuild,
            Box::new(cargo_build::CargoBuild::new(limits)),
        ),
        (Format::Pytest, Box::new(pytest::Pytest::new(limits))),
        (Format::Unittest, Box::new(unittest::Unittest::new(limits))),
        (Format::GoTest, Box::new(go_test::GoTest::new(limits))),
        (Format::Tap, Box::new(tap::Tap::new(limits))),
        (Format::Mocha, Box::new(mocha::Mocha::new(limits))),
        (
            Format::NodeTest,
            Box::new(jest::Jest::new(limits, Format::NodeTest)),
        ),
        (
            Format::BunTest,
            Box::new(jest::Jest::new(limits, Format::BunTest)),
        ),
        (
            Format::Vitest,
            Box::new(jest::Jest::new(limits, Format::Vitest)),
        ),
        (
            Format::Jest,
            Box::new(jest::Jest::new(limits, Format::Jest)),
        ),
        (Format::DenoTest, Box::new(deno_test::DenoTest::new(limits))),
        (Format::Tsc, Box::new(tsc::Tsc::new(limits))),
        (Format::Eslint, Box::new(eslint::Eslint::new(limits))),
        (LINT_SLOT, Box::new(lint::Lint::new(limits))),
    ]
}

/// The slot of the one parser that reads every line-based linter and compiler ([`lint`]); it
/// reports the format it read itself.
pub(crate) const LINT_SLOT: Format = Format::Gcc;

/// The parser slot that reads `format` when a caller forces it (`--format`). node's TAP
/// reporter is read by the TAP parser, which reports `node-test` itself; the line-based tools
/// are all read by the [`lint`] parser (eslint's `compact` and `unix` too).
pub(crate) fn parser_slots(format: Format) -> [Format; 2] {
    match format {
        Format::Eslint => [Format::Eslint, LINT_SLOT],
        Format::Gcc
        | Format::Clang
        | Format::Mypy
        | Format::Ruff
        | Format::Pyright
        | Format::Shellcheck
        | Format::GoBuild
        | Format::Biome
        | Format::Deno
        | Format::Prettier => [LINT_SLOT, LINT_SLOT],
        Format::NodeTest => [Format::NodeTest, Format::Tap],
        Format::CargoTest => [Format::CargoTest, Format::CargoBuild],
        Format::Nextest => [Format::Nextest, Format::CargoBuild],
        f => [f, f],
    }
}

/// A bounded list: keeps the first `cap` items, counts the rest.
#[derive(Debug)]
pub(crate) struct Bounded<T> {
    pub items: Vec<T>,
    pub dropped: u64,
    cap: usize,
}

impl Bounded<Failure> {
    /// Puts `base/` before the relative files of the failures from `*from` on, then moves
    /// `*from` past them: they were one wrapped run's, printed relative to its directory.
    pub(crate) fn reroot(&mut self, from: &mut usize, base: Option<&str>) {
        let start = std::mem::replace(from, self.items.len()).min(self.items.len());
        let Some(base) = base else { return };
        for f in &mut self.items[start..] {
            if let Some(file) = &mut f.file
                && !file.starts_with('/')
            {
                *file = format!(
                    "{}/{}",
                    base.trim_end_matches('/'),
                    file.trim_start_matches("./")
                );
            }
        }
    }
}

impl<T> Bounded<T> {
    pub(crate) fn new(cap: usize) -> Self {
        Bounded {
            items: Vec::new(),
            dropped: 0,
            cap,
        }
    }

    /// Adds `item`; returns its index when kept.
    pub(crate) fn push(&mut self, item: T) -> Option<usize> {
        if self.items.len() < self.cap {
            self.items.push(item);
            Some(self.items.len() - 1)
        } else {
            self.dropped += 1;
            None
        }
    }
}
