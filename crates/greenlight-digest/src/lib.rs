//! Recognising test and build output and turning it into exact diagnostics.
//!
//! Pure: bytes and an exit code in, a [`Digest`] out. No I/O, no clock. The one rule that keeps
//! it honest: the process exit code is authoritative, and the digest claims `recognised` only
//! when it can stand in for the whole output; otherwise it says `partial` or `unrecognised`
//! with machine-readable [`DigestReason`]s and keeps the raw tail.
//!
//! # Theory of operation
//!
//! Bytes arrive in chunks ([`StreamingDigester::push`]). A line splitter turns them into lines
//! (the same lines whatever the chunk boundaries), each line is normalised to what a terminal
//! would show (CRLF, bare-CR overwrite, ANSI escapes stripped, invalid UTF-8 replaced), and every
//! format's line parser reads it. Parsers keep bounded state: the first `max_items` failures and
//! diagnostics, messages clipped to `max_text` bytes. At the end ([`StreamingDigester::finish`])
//! the digester looks at which formats were seen and applies the same conservative rules to
//! every format.
//!
//! GitHub problem matchers ([`matchers`], given in [`DigestOptions::matchers`]) read the same
//! lines. They speak only when no built-in format can stand in for the output: their problems
//! become the digest's diagnostics (format `problem-matcher`), alone when they include
//! everything a built-in format found, beside it (`mixed`) otherwise.
//!
//! ```
//! use greenlight_digest::{digest, Classification, DigestOptions, Format};
//!
//! let out = b"\nrunning 1 test\ntest adds ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\n";
//! let d = digest(out, Some(0), &DigestOptions::default());
//! assert_eq!(d.classification, Classification::Recognised);
//! assert_eq!(d.format, Some(Format::CargoTest));
//! assert_eq!(d.summary.and_then(|s| s.passed), Some(1));
//! ```

mod compact;
mod formats;
pub mod matchers;
mod model;
mod normalize;
mod scope;
mod wrappers;

use std::collections::{HashSet, VecDeque};

pub use model::{
    Classification, Diagnostic, Digest, DigestReason, Failure, Format, Scope, Severity, Summary,
};
pub use normalize::terminal_text;
pub use scope::scope_of;

use formats::{Claim, Limits, Line, MARKERS, Parser, Report};
use matchers::{MatcherRun, MatcherSet};
use normalize::{Finders, LineSink, LineSplitter, RawLine, finders, markers_in, view};
use wrappers::{RunDir, Wrappers};

/// Limits and choices for one digest. The defaults suit a gate's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestOptions {
    /// Byte budget of the compact form; a rendering that does not fit is not produced at all.
    pub budget: usize,
    /// Read the output as this format only (`None`: detect). `Some(Format::Mixed)` detects too.
    pub format: Option<Format>,
    /// Bytes read at most; past this the digest is `partial` (`scan-budget-exceeded`).
    pub max_scan_bytes: u64,
    /// Bytes of one line kept at most; a longer line is cut (`line-too-long`).
    pub max_line_bytes: usize,
    /// Failures, and separately diagnostics, kept per format at most; more are counted and the
    /// digest is `partial` (`diagnostic-budget-exceeded`).
    pub max_items: usize,
    /// Bytes of one name or message kept at most (cut on a character boundary with `…`).
    pub max_text: usize,
    /// Lines of normalised tail kept for passthrough.
    pub tail_lines: usize,
    /// GitHub problem matchers that also read every line. Their problems become the digest
    /// when no built-in format recognised the output (format `problem-matcher`). Empty: none.
    pub matchers: MatcherSet,
    /// The command line that wrote the output (a gate's `command`, as `sh -c` runs it), when
    /// known: its [`Scope`] is part of the digest, and a compound command's output is complete
    /// only when every line of it is explained.
    pub command: Option<String>,
    /// The directory the command ran in (a gate's: the repository's top), when known. A
    /// failure's or finding's file under it is given relative to it, so the paths a workspace
    /// wrapper's runs are placed under read as the repository's own
    /// (`packages/cookie/cookie.test.mjs`, never the same `src/index.ts` twice); a file outside it
    /// is kept as printed. A string, not a path: the digest reads no file system.
    pub root: Option<String>,
}

impl Default for DigestOptions {
    fn default() -> Self {
        DigestOptions {
            // Above the 3,000 characters an agent harness keeps of a tool's output, so a compact
            // digest always fits where the raw tail would have gone.
            budget: 4096,
            format: None,
            max_scan_bytes: 1 << 30,
            max_line_bytes: 64 * 1024,
            max_items: 1000,
            max_text: 512,
            tail_lines: 40,
            matchers: MatcherSet::default(),
            command: None,
            root: None,
        }
    }
}

/// Digests a complete output in one call; the same as one [`StreamingDigester::push`] and
/// [`StreamingDigester::finish`].
pub fn digest(bytes: &[u8], exit_code: Option<i32>, options: &DigestOptions) -> Digest {
    let mut d = StreamingDigester::new(options.clone());
    d.push(bytes);
    d.finish(exit_code)
}

/// A digester fed output as it is produced. Memory stays bounded whatever the input size.
pub struct StreamingDigester {
    splitter: LineSplitter,
    state: State,
}

struct Slot {
    format: Format,
    parser: Box<dyn Parser>,
}

/// One bit per slot (there are fewer than 32 parsers).
type Slots = u32;

struct State {
    options: DigestOptions,
    slots: Vec<Slot>,
    /// Slots each first byte can wake, from every parser's [`Parser::wake`].
    wake: [Slots; 256],
    /// Per marker, the slots woken by a line holding it.
    wake_markers: [Slots; MARKERS.len()],
    /// Slots whose parser is [`Parser::engaged`]: asked about every line.
    engaged: Slots,
    /// Slots whose terminal summary was seen (and not retracted).
    summary_seen: Slots,
    /// Slots with significant unclaimed output after their summary.
    after_summary: Slots,
    /// Reads the lines npm, make, tox and the like print around the tool they run.
    wrappers: Wrappers,
    /// The directory the wrapper's current run prints its paths relative to, when its start
    /// named one.
    run_dir: Option<String>,
    /// Find the markers in lines the chunk scan could not vouch for.
    markers: Finders,
    /// The problem matchers' reading, when there are matchers.
    matchers: Option<MatcherRun>,
    /// Ring of the last raw lines (buffers reused, so a long run allocates nothing per line).
    tail: VecDeque<Vec<u8>>,
    bytes: u64,
    lines: u64,
    scan_cut: bool,
    line_cut: bool,
    any_content: bool,
    /// Significant lines that no format claimed and no wrapper explains: a compound command's
    /// unread run, and a miss for the formats that explain every line.
    unclaimed: u64,
}

/// Bytes of one tail line kept.
const TAIL_LINE_BYTES: usize = 1024;

impl StreamingDigester {
    /// A digester with `options`.
    pub fn new(options: DigestOptions) -> Self {
        let limits = Limits {
            max_items: options.max_items.max(1),
            max_text: options.max_text.max(16),
        };
        let slots: Vec<Slot> = formats::all(limits)
            .into_iter()
            .filter(|(format, _)| match options.format {
                None | Some(Format::Mixed) => true,
                Some(f) => formats::parser_slots(f).contains(format),
            })
            .map(|(format, parser)| Slot { format, parser })
            .collect();
        let mut wake = [0; 256];
        let mut wake_markers = [0; MARKERS.len()];
        let mut engaged = 0;
        for (i, slot) in slots.iter().enumerate() {
            let bit: Slots = 1 << i;
            let w = slot.parser.wake();
            for &b in w.first {
                wake[usize::from(b)] |= bit;
            }
            for (m, slots) in wake_markers.iter_mut().enumerate() {
                if w.markers & (1 << m) != 0 {
                    *slots |= bit;
                }
            }
            if slot.parser.engaged() {
                engaged |= bit;
            }
        }
        let matchers = (!options.matchers.is_empty())
            .then(|| MatcherRun::new(options.matchers.clone(), limits));
        StreamingDigester {
            splitter: LineSplitter::new(options.max_line_bytes, &MARKERS),
            state: State {
                matchers,
                options,
                slots,
                wake,
                wake_markers,
                engaged,
                summary_seen: 0,
                after_summary: 0,
                wrappers: Wrappers::default(),
                run_dir: None,
                markers: finders(&MARKERS),
                tail: VecDeque::new(),
                bytes: 0,
                lines: 0,
                scan_cut: false,
                line_cut: false,
                any_content: false,
                unclaimed: 0,
            },
        }
    }

    /// Feeds the next chunk of output.
    pub fn push(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        let room = self
            .state
            .options
            .max_scan_bytes
            .saturating_sub(self.state.bytes);
        let take = usize::try_from(room).unwrap_or(usize::MAX).min(chunk.len());
        if take < chunk.len() {
            self.state.scan_cut = true;
        }
        self.state.bytes += take as u64;
        self.splitter.push(&chunk[..take], &mut self.state);
    }

    /// Ends the output. `exit_code` is the process's exit code, `None` when it was killed or
    /// timed out.
    pub fn finish(mut self, exit_code: Option<i32>) -> Digest {
        self.splitter.finish(&mut self.state);
        self.state.judge(exit_code, true)
    }

    /// Ends output whose exit code nobody gave (a saved log): the run's own summary decides
    /// success, and the digest says the exit code was not given.
    pub fn finish_without_exit_code(mut self) -> Digest {
        self.splitter.finish(&mut self.state);
        self.state.judge(None, false)
    }
}

impl LineSink for State {
    fn line(&mut self, raw: RawLine<'_>) {
        self.lines += 1;
        self.line_cut |= raw.cut;
        let (text, markers) = match raw.plain {
            Some(text) => (std::borrow::Cow::Borrowed(text), raw.markers),
            None => {
                let text = view(raw.bytes);
                let markers = markers_in(&self.markers, text.as_bytes());
                (text, markers)
            }
        };
        let prev: &[u8] = match raw.prev {
            Some(p) => &p[..p.len().min(TAIL_LINE_BYTES)],
            None => self.tail.back().map_or(&[], Vec::as_slice),
        };
        let text = self.wrappers.through_prefix(&text);
        if let Some(m) = &mut self.matchers {
            m.line(text);
        }
        let line = Line::new(text, prev, markers);
        let blank = line.first == 0;
        self.any_content |= !blank;
        let mut ask = self.engaged | self.wake[usize::from(line.first)];
        if line.markers != 0 {
            for (m, slots) in self.wake_markers.iter().enumerate() {
                if line.markers & (1 << m) != 0 {
                    ask |= slots;
                }
            }
        }
        #[cfg(debug_assertions)]
        for (i, slot) in self.slots.iter().enumerate() {
            debug_assert!(
                ask & (1 << i) != 0 || !slot.parser.interested(&line),
                "{:?} is interested in {:?} but neither engaged nor woken",
                slot.format,
                line.text
            );
        }
        let (mut claimed, mut open, mut summary): (Slots, Slots, Slots) = (0, 0, 0);
        while ask != 0 {
            let i = ask.trailing_zeros() as usize;
            let bit: Slots = 1 << i;
            ask &= ask - 1;
            let Some(slot) = self.slots.get_mut(i) else {
                break;
            };
            if !slot.parser.interested(&line) {
                continue;
            }
            match slot.parser.line(&line) {
                Claim::No => {}
                Claim::Yes => claimed |= bit,
                Claim::Open => open |= bit,
                Claim::Summary => summary |= bit,
            }
            if slot.parser.engaged() {
                self.engaged |= bit;
            } else {
                self.engaged &= !bit;
            }
        }
        // A summary makes the slot's summary the last word so far; an opening retracts it;
        // a line nobody claimed after a summary is output after it.
        if !blank && claimed | open | summary == 0 && !self.wrappers.noise(text, self.lines) {
            self.after_summary |= self.summary_seen;
            self.unclaimed += 1;
        } else if claimed | open | summary != 0 {
            self.wrappers.claimed(text);
        }
        match self.wrappers.take_run_dir() {
            None => {}
            Some(RunDir::Starts(dir)) => {
                self.end_run(None);
                self.run_dir = dir;
            }
            Some(RunDir::Ended(dir)) => self.end_run(dir),
        }
        self.summary_seen = (self.summary_seen | summary) & !open;
        self.after_summary &= !(summary | open);
    }

    fn lines_done(&mut self, region: &[u8], count: usize) {
        // The tail keeps at least one line: it is also the previous line parsers may ask for.
        let keep = self.options.tail_lines.max(1);
        let cap = TAIL_LINE_BYTES.min(self.options.max_line_bytes.max(1));
        let n = count.min(keep);
        if n == 0 {
            return;
        }
        let last: usize = region
            .rsplit(|&b| b == b'\n')
            .take(n)
            .map(|l| l.len() + 1)
            .sum();
        let from = (region.len() + 1).saturating_sub(last);
        for raw in region[from..].split(|&b| b == b'\n') {
            let mut buf = if self.tail.len() >= keep {
                self.tail.pop_front().unwrap_or_default()
            } else {
                Vec::new()
            };
            buf.clear();
            buf.extend_from_slice(&raw[..raw.len().min(cap)]);
            self.tail.push_back(buf);
        }
    }
}

impl State {
    /// A wrapper's run ended: its failures' relative paths are relative to `dir`, or to the
    /// directory its start named.
    fn end_run(&mut self, dir: Option<String>) {
        let dir = dir.or_else(|| self.run_dir.take());
        self.run_dir = None;
        for slot in &mut self.slots {
            slot.parser.run_ended(dir.as_deref());
        }
    }

    /// `given`: whether the caller knew the exit status at all; `exit_code: None` with `given`
    /// means the process was killed.
    fn judge(mut self, exit_code: Option<i32>, given: bool) -> Digest {
        if self.run_dir.is_some() {
            self.end_run(None);
        }
        let mut global = Vec::new();
        if self.scan_cut {
            global.push(DigestReason::ScanBudgetExceeded);
        }
        if self.line_cut {
            global.push(DigestReason::LineTooLong);
        }
        if given && exit_code.is_none() {
            global.push(DigestReason::NoExitCode);
        }
        let scope = self.options.command.as_deref().map(scope_of);
        // A compound command's unread line may be a whole inner run a built-in format cannot
        // read. The gate's problem matchers are its author's word on how to read its output:
        // a digest of their problems is judged without this rule.
        let unread_run = scope == Some(Scope::Compound) && self.unclaimed > 0;
        if self.wrappers.interleaved {
            global.push(DigestReason::InterleavedRuns);
        }
        let skip = self.tail.len().saturating_sub(self.options.tail_lines);
        let tail: Vec<String> = self
            .tail
            .iter()
            .skip(skip)
            .map(|l| view(l).into_owned())
            .collect();
        let mut seen: Vec<Seen> = self
            .slots
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let bit: Slots = 1 << i;
                (
                    s.format,
                    s.parser.finish(),
                    self.summary_seen & bit != 0,
                    self.after_summary & bit != 0,
                )
            })
            .filter(|(_, r, _, _)| r.active)
            .collect();
        merge_build_into_tests(&mut seen);
        drop_lint_reading_under_runners(&mut seen);

        let mut d = Digest {
            classification: Classification::Unrecognised,
            format: None,
            formats: Vec::new(),
            exit_code,
            exit_code_given: given,
            summary: None,
            failures: Vec::new(),
            diagnostics: Vec::new(),
            reasons: Vec::new(),
            compact: None,
            tail,
            scope,
            bytes: self.bytes,
            lines: self.lines,
        };
        let any_content = self.any_content;
        let unclaimed = self.unclaimed;
        let matched = self
            .matchers
            .map(|m| m.finish())
            .filter(|r| r.active)
            .map(|report| {
                // Matchers print no closing summary: the exit code ends the run, and a saved log
                // has only the problems' own word (an error says it failed).
                let last_word = exit_code.is_some() || report.success == Some(false);
                (Format::ProblemMatcher, report, last_word, false)
            });
        let mut builtin_reasons = global.clone();
        if unread_run {
            builtin_reasons.push(DigestReason::UnclaimedOutput);
        }
        // With matchers, what the built-in formats saw is kept for the matchers' reading.
        let before = matched.as_ref().map(|_| (d.clone(), seen.clone()));
        classify(
            &mut d,
            seen,
            builtin_reasons,
            exit_code,
            any_content,
            unclaimed,
        );
        // A built-in format that can stand in for the output wins.
        if let (Some(matched), Some((builtin, backup))) = (matched, before)
            && d.classification != Classification::Recognised
        {
            d = builtin;
            let seen = with_matchers(backup, matched);
            classify(&mut d, seen, global, exit_code, any_content, unclaimed);
        }
        if let Some(root) = &self.options.root {
            relative_to_root(&mut d, root);
        }
        d.compact = d.compact(self.options.budget);
        d
    }
}

/// Makes every failure's and finding's file under `root` relative to it.
fn relative_to_root(d: &mut Digest, root: &str) {
    let root = root.trim_end_matches('/');
    let files = d
        .failures
        .iter_mut()
        .map(|f| &mut f.file)
        .chain(d.diagnostics.iter_mut().map(|x| &mut x.file));
    for file in files.flatten() {
        if let Some(rest) = file
            .strip_prefix(root)
            .and_then(|r| r.strip_prefix('/'))
            .filter(|r| !r.is_empty())
        {
            *file = rest.to_owned();
        }
    }
}

/// What the digest reads when the matchers found problems and no built-in format can stand in
/// for the output. When the matchers found everything the built-in formats did (or those saw
/// nothing), the matchers alone: nothing is lost by reading the output their way (`go vet`
/// prints what looks like a Go build failure, without the closing line `go test` prints).
/// Otherwise both, the problems a built-in parser already lists left out, which makes the
/// digest `mixed` and never `recognised`.
fn with_matchers(mut seen: Vec<Seen>, matched: Seen) -> Vec<Seen> {
    type Key<'a> = (Option<&'a str>, Option<u32>, Option<u32>, &'a str);
    fn key(x: &Diagnostic) -> Key<'_> {
        (x.file.as_deref(), x.line, x.column, x.message.as_str())
    }
    let (format, mut report, last_word, after) = matched;
    let found: HashSet<Key<'_>> = report.diagnostics.iter().map(key).collect();
    let covered = seen.iter().all(|(_, r, _, _)| {
        r.failures.is_empty() && !r.dropped && r.diagnostics.iter().all(|x| found.contains(&key(x)))
    });
    drop(found);
    if covered {
        return vec![(format, report, last_word, after)];
    }
    let known: HashSet<Key<'_>> = seen
        .iter()
        .flat_map(|(_, r, _, _)| &r.diagnostics)
        .map(key)
        .collect();
    let fresh: Vec<Diagnostic> = report
        .diagnostics
        .iter()
        .filter(|x| !known.contains(&key(x)))
        .cloned()
        .collect();
    drop(known);
    if !fresh.is_empty() {
        report.diagnostics = fresh;
        seen.push((format, report, last_word, after));
    }
    seen
}

/// One format's report, whether its terminal summary is the last word, and whether significant
/// output follows it.
type Seen = (Format, Report, bool, bool);

/// Applies the conservative rules to the formats seen: fills `d`'s format, lists, reasons and
/// classification (not its compact form).
fn classify(
    d: &mut Digest,
    mut seen: Vec<Seen>,
    mut reasons: Vec<DigestReason>,
    exit_code: Option<i32>,
    any_content: bool,
    unclaimed: u64,
) {
    if seen.is_empty() {
        reasons.push(if any_content {
            DigestReason::NoKnownFormat
        } else {
            DigestReason::EmptyOutput
        });
    } else if seen.len() == 1
        && let Some((format, report, summary_seen, after)) = seen.pop()
    {
        d.format = Some(report.format.unwrap_or(format));
        if report.summary.is_none() || !summary_seen {
            reasons.push(DigestReason::NoSummary);
        }
        if after {
            reasons.push(DigestReason::OutputAfterSummary);
        }
        if let (Some(code), Some(success)) = (exit_code, report.success)
            && success != (code == 0)
        {
            reasons.push(DigestReason::SummaryContradictsExitCode);
        }
        let explained = report
            .failures
            .iter()
            .filter(|f| f.message.is_some() || f.file.is_some())
            .count() as u64;
        let errors = report
            .diagnostics
            .iter()
            .filter(|x| x.severity == Severity::Error)
            .count() as u64;
        // A run that failed must say why: a failed test or an error, not only counts (a TAP
        // plan left short with every point `ok` and exit 1 explains nothing).
        let failed_run = exit_code.is_some_and(|c| c != 0) || report.success == Some(false);
        let warned = report.warnings_fail && !report.diagnostics.is_empty();
        let unexplained_failure = failed_run
            && report.failures.is_empty()
            && errors == 0
            && !warned
            && !reasons.contains(&DigestReason::SummaryContradictsExitCode);
        if explained < report.expected_failures
            || errors < report.expected_errors
            || unexplained_failure
        {
            reasons.push(DigestReason::FailureWithoutDiagnostic);
        }
        if report.dropped {
            reasons.push(DigestReason::DiagnosticBudgetExceeded);
        }
        if report.unparsed || (report.every_line && unclaimed > 0) {
            reasons.push(DigestReason::UnparsedLines);
        }
        // The failures listed must agree with the run's own count: fewer is a failure without
        // its diagnostic (above); more means a test's own output was read as a runner's line,
        // and then the listing cannot be trusted either way.
        let listed_more = report.counted
            && !report.dropped
            && report.failures.len() as u64 > report.expected_failures;
        if listed_more || report.count_mismatch {
            reasons.push(DigestReason::CountMismatch);
        }
        if report.unconfirmed_markers {
            reasons.push(DigestReason::MarkerMidLine);
        }
        d.summary = report.summary;
        d.failures = report.failures;
        d.diagnostics = report.diagnostics;
        d.classification = Classification::Partial;
    } else {
        d.format = Some(Format::Mixed);
        reasons.push(DigestReason::MixedFormats);
        for (format, report, _, _) in seen {
            d.formats.push(report.format.unwrap_or(format));
            if report.dropped {
                reasons.push(DigestReason::DiagnosticBudgetExceeded);
            }
            d.failures.extend(report.failures);
            d.diagnostics.extend(report.diagnostics);
        }
        d.formats.sort();
        d.formats.dedup();
        d.classification = Classification::Partial;
    }
    reasons.sort();
    reasons.dedup();
    if reasons.is_empty() && d.format.is_some() {
        d.classification = Classification::Recognised;
    }
    d.reasons = reasons;
}

/// `go test` prints a package's compile errors as `go build` does, and `deno test` its type
/// checker's count as ruff and biome print theirs (`Found 2 errors.`); each runner reads those
/// lines itself, so the line-based parser's reading of them is the same lines a second time. A
/// line-based tool that found something beside `deno test` is kept: its findings are its own.
fn drop_lint_reading_under_runners(seen: &mut Vec<Seen>) {
    let ran = |format: Format, seen: &[Seen]| seen.iter().any(|(f, _, _, _)| *f == format);
    if ran(Format::GoTest, seen) {
        seen.retain(|(_, r, _, _)| r.format != Some(Format::GoBuild));
    }
    if ran(Format::DenoTest, seen) {
        seen.retain(|(slot, r, _, _)| {
            *slot != formats::LINT_SLOT || !r.diagnostics.is_empty() || r.dropped
        });
    }
}

/// cargo prints its build diagnostics before the tests run; they belong to the test run.
fn merge_build_into_tests(seen: &mut Vec<Seen>) {
    let Some(build) = seen
        .iter()
        .position(|(f, _, _, _)| *f == Format::CargoBuild)
    else {
        return;
    };
    let Some(tests) = seen
        .iter()
        .position(|(f, _, _, _)| matches!(f, Format::CargoTest | Format::Nextest))
    else {
        return;
    };
    let (_, b, _, _) = seen.remove(build);
    let tests = if build < tests { tests - 1 } else { tests };
    let t = &mut seen[tests].1;
    let mut diagnostics = b.diagnostics;
    diagnostics.append(&mut t.diagnostics);
    t.diagnostics = diagnostics;
    t.expected_errors += b.expected_errors;
    t.dropped |= b.dropped;
    if b.success == Some(false) {
        t.success = Some(false);
    }
}

impl Digest {
    /// The compact rendering: exit outcome, format, counts, then every failure and every
    /// diagnostic, one line each. `None` when the digest is not `recognised` or the whole
    /// rendering does not fit in `budget` bytes: it is never cut to fit.
    pub fn compact(&self, budget: usize) -> Option<String> {
        compact::render(self, budget)
    }

    /// Every parsed failure and diagnostic named within `budget` bytes (the first ones in
    /// full, then "and N more: name, …"), ending with a line that says the list is not
    /// complete: what stands before the output's tail when the compact form cannot stand in
    /// for the output. `None` when nothing was parsed.
    pub fn named_failures(&self, budget: usize) -> Option<String> {
        compact::named(self, budget)
    }

    /// What `greenlight digest` prints: the compact form when there is one, else a header
    /// line (exit, format, classification and why) and the output's tail.
    pub fn text(&self) -> String {
        let d = self;
        if let Some(c) = &d.compact {
            return c.clone();
        }
        let mut out = String::new();
        let exit = match d.exit_code {
            Some(c) => format!("exit {c}"),
            None if d.exit_code_given => "killed".to_owned(),
            None => "exit ?".to_owned(),
        };
        let format = d
            .format
            .map_or("no known format".to_owned(), |f| f.name().to_owned());
        let class = match d.classification {
            Classification::Recognised => "recognised",
            Classification::Partial => "partial",
            Classification::Unrecognised => "unrecognised",
        };
        let reasons: Vec<&str> = d.reasons.iter().map(|r| r.name()).collect();
        out.push_str(&format!("{exit} · {format} · {class}"));
        if !reasons.is_empty() {
            out.push_str(&format!(" ({})", reasons.join(", ")));
        } else {
            out.push_str(" (the compact form does not fit the budget)");
        }
        out.push('\n');
        if !d.tail.is_empty() {
            out.push_str(&format!("--- last {} lines of {}\n", d.tail.len(), d.lines));
            for line in &d.tail {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// The digest as the JSON object of the `greenlight digest --json` contract.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}
