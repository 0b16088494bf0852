//! The digest's data model: the values that make up the stable `greenlight digest --json`
//! contract.
//!
//! Field and variant names here are the contract; renaming one breaks downstream readers, so
//! every change is additive.

use serde::Serialize;

/// How far the digest can be trusted to stand in for the raw output.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Classification {
    /// One known format, its terminal summary seen and agreeing with the exit code, every
    /// counted failure with its diagnostic and no more listed than counted, nothing
    /// significant after the summary, no runner's line read mid-line unconfirmed, nothing cut.
    Recognised,
    /// A known format was seen, but at least one of the conditions for `recognised` failed;
    /// `reasons` says which.
    Partial,
    /// No known format was seen.
    Unrecognised,
}

/// The output formats the digest recognises.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// `cargo test` (libtest's human output, one or more test binaries).
    CargoTest,
    /// `cargo nextest run`.
    Nextest,
    /// cargo / rustc / clippy build errors and warnings.
    CargoBuild,
    /// pytest.
    Pytest,
    /// `python -m unittest`.
    Unittest,
    /// `go test` (plain, `-v` or `-json`), including build failures.
    GoTest,
    /// `node --test` (spec or TAP reporter).
    NodeTest,
    /// TAP version 13 (tape, node-tap, mocha's TAP reporter, ...).
    Tap,
    /// mocha's default `spec` reporter.
    Mocha,
    /// `bun test`.
    BunTest,
    /// `deno test` (its default reporter), including a run that fails to type-check.
    DenoTest,
    /// vitest.
    Vitest,
    /// jest.
    Jest,
    /// The TypeScript compiler (plain and `--pretty`).
    Tsc,
    /// eslint: its default `stylish` formatter, and `compact` and `unix`.
    Eslint,
    /// gcc, alone or run by make.
    Gcc,
    /// clang, alone or run by make.
    Clang,
    /// mypy (plain and `--pretty`).
    Mypy,
    /// ruff: `check` (concise and full) and `format --check`.
    Ruff,
    /// pyright.
    Pyright,
    /// shellcheck (`tty` and `gcc` formats).
    Shellcheck,
    /// `go build` and `go vet` run on their own (the same lines).
    GoBuild,
    /// biome (`lint`, `check`, `format`).
    Biome,
    /// `deno lint` and `deno fmt --check`.
    Deno,
    /// `prettier --check`.
    Prettier,
    /// Problems found by GitHub problem matchers ([`crate::DigestOptions::matchers`]) in output
    /// no built-in format recognised.
    ProblemMatcher,
    /// More than one format in one output (for example a build step, then tests).
    Mixed,
}

impl Format {
    /// Every format name `--format` accepts, in documentation order.
    pub const ALL: [Format; 27] = [
        Format::CargoTest,
        Format::Nextest,
        Format::CargoBuild,
        Format::Pytest,
        Format::Unittest,
        Format::GoTest,
        Format::NodeTest,
        Format::Tap,
        Format::Mocha,
        Format::BunTest,
        Format::DenoTest,
        Format::Vitest,
        Format::Jest,
        Format::Tsc,
        Format::Eslint,
        Format::Gcc,
        Format::Clang,
        Format::Mypy,
        Format::Ruff,
        Format::Pyright,
        Format::Shellcheck,
        Format::GoBuild,
        Format::Biome,
        Format::Deno,
        Format::Prettier,
        Format::ProblemMatcher,
        Format::Mixed,
    ];

    /// The name used in JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::CargoTest => "cargo-test",
            Format::Nextest => "nextest",
            Format::CargoBuild => "cargo-build",
            Format::Pytest => "pytest",
            Format::Unittest => "unittest",
            Format::GoTest => "go-test",
            Format::NodeTest => "node-test",
            Format::Tap => "tap",
            Format::Mocha => "mocha",
            Format::BunTest => "bun-test",
            Format::DenoTest => "deno-test",
            Format::Vitest => "vitest",
            Format::Jest => "jest",
            Format::Tsc => "tsc",
            Format::Eslint => "eslint",
            Format::Gcc => "gcc",
            Format::Clang => "clang",
            Format::Mypy => "mypy",
            Format::Ruff => "ruff",
            Format::Pyright => "pyright",
            Format::Shellcheck => "shellcheck",
            Format::GoBuild => "go-build",
            Format::Biome => "biome",
            Format::Deno => "deno",
            Format::Prettier => "prettier",
            Format::ProblemMatcher => "problem-matcher",
            Format::Mixed => "mixed",
        }
    }

    /// Parses a name printed by [`Format::name`].
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Counts from the run's own terminal summary. A count the tool did not print is `None`
/// (serialised as `null`), never a guessed zero.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Summary {
    /// Tests that passed.
    pub passed: Option<u64>,
    /// Tests that failed.
    pub failed: Option<u64>,
    /// Tests skipped, ignored, todo, or expected to fail (xfail).
    pub skipped: Option<u64>,
    /// Errors outside test bodies that the tool counts separately (pytest errors, build errors).
    pub errors: Option<u64>,
    /// Warnings the tool counts (compilers, linters).
    pub warnings: Option<u64>,
}

impl Summary {
    /// Adds `other`'s counts into `self`; a count stays `None` only when both are `None`.
    pub(crate) fn add(&mut self, other: &Summary) {
        fn sum(a: &mut Option<u64>, b: Option<u64>) {
            if let Some(b) = b {
                *a = Some(a.unwrap_or(0).saturating_add(b));
            }
        }
        sum(&mut self.passed, other.passed);
        sum(&mut self.failed, other.failed);
        sum(&mut self.skipped, other.skipped);
        sum(&mut self.errors, other.errors);
        sum(&mut self.warnings, other.warnings);
    }

    /// Failures and errors the summary counts.
    pub fn failing(&self) -> u64 {
        self.failed
            .unwrap_or(0)
            .saturating_add(self.errors.unwrap_or(0))
    }
}

/// One failed test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Failure {
    /// The test's name as the tool prints it.
    pub name: String,
    /// Source file of the failure, where the output gives one.
    pub file: Option<String>,
    /// Line in `file`, where the output gives one.
    pub line: Option<u32>,
    /// The first line of the failure message.
    pub message: Option<String>,
}

/// Severity of a compiler or linter finding.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Fails the build or the lint.
    Error,
    /// Reported, does not fail on its own.
    Warning,
}

/// One compiler or linter finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// Source file, where the output gives one.
    pub file: Option<String>,
    /// Line in `file`.
    pub line: Option<u32>,
    /// Column in `line`.
    pub column: Option<u32>,
    /// The tool's code for the finding (`E0308`, `TS2322`, `no-unused-vars`, `clippy::...`).
    pub code: Option<String>,
    /// The message, first line only.
    pub message: String,
    /// The owner of the problem matcher that found it; absent (not `null`) for a built-in
    /// format's findings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// Why a digest is not `recognised`. Names are part of the JSON contract.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum DigestReason {
    /// The input was empty (or only blank lines).
    EmptyOutput,
    /// No known format was seen.
    NoKnownFormat,
    /// More than one format was seen.
    MixedFormats,
    /// The process was killed or timed out (no exit code).
    NoExitCode,
    /// The run's terminal summary was not seen (the run was cut short or the format varies).
    NoSummary,
    /// The summary says success and the exit code says failure, or the other way round.
    SummaryContradictsExitCode,
    /// The summary counts more failures than the digest has diagnostics for.
    FailureWithoutDiagnostic,
    /// Significant unrecognised output follows the terminal summary.
    OutputAfterSummary,
    /// Lines the format's parser should understand but did not (for example tsc's pretty
    /// source excerpts out of place).
    UnparsedLines,
    /// The scan budget was reached; the rest of the input was not read.
    ScanBudgetExceeded,
    /// More failures or diagnostics than the digest keeps; the rest are counted, not kept.
    DiagnosticBudgetExceeded,
    /// A line longer than the line budget was cut.
    LineTooLong,
    /// The run's own record disagrees with what the digest read: more failures listed than
    /// its summary counts, TAP points that do not meet the plan, a `go test -v` test that
    /// started and printed no result.
    CountMismatch,
    /// A runner's marker was read in the middle of a line, after a test's own output, where
    /// nothing in the output confirms it (`go test` without `-v`).
    MarkerMidLine,
    /// The gate's command is compound (`a && b`, `a; b`) and a line no format or wrapper
    /// explains was printed: it may be a whole inner run the digest cannot read.
    UnclaimedOutput,
    /// A wrapper printed the lines of several of its runs interleaved (`pnpm -r` running
    /// packages in parallel), so no run can be read on its own.
    InterleavedRuns,
}

impl DigestReason {
    /// The name used in JSON.
    pub fn name(self) -> &'static str {
        match self {
            DigestReason::EmptyOutput => "empty-output",
            DigestReason::NoKnownFormat => "no-known-format",
            DigestReason::MixedFormats => "mixed-formats",
            DigestReason::NoExitCode => "no-exit-code",
            DigestReason::NoSummary => "no-summary",
            DigestReason::SummaryContradictsExitCode => "summary-contradicts-exit-code",
            DigestReason::FailureWithoutDiagnostic => "failure-without-diagnostic",
            DigestReason::OutputAfterSummary => "output-after-summary",
            DigestReason::UnparsedLines => "unparsed-lines",
            DigestReason::ScanBudgetExceeded => "scan-budget-exceeded",
            DigestReason::DiagnosticBudgetExceeded => "diagnostic-budget-exceeded",
            DigestReason::LineTooLong => "line-too-long",
            DigestReason::CountMismatch => "count-mismatch",
            DigestReason::MarkerMidLine => "marker-mid-line",
            DigestReason::UnclaimedOutput => "unclaimed-output",
            DigestReason::InterleavedRuns => "interleaved-runs",
        }
    }
}

/// What a gate's command line runs, read conservatively from its text (`crate::scope_of`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// One program with plain arguments (`pytest -q`, `npm test`).
    Simple,
    /// Several commands joined by `&&`, `||`, `;`, `|` or a newline: several runs in one output.
    Compound,
    /// Anything the reading cannot vouch for: substitutions, redirections, control flow.
    Unknown,
}

/// The digest of one run's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Digest {
    /// How far the digest can stand in for the raw output.
    pub classification: Classification,
    /// The format recognised; `mixed` for several; `None` when none.
    pub format: Option<Format>,
    /// The formats seen, when `format` is `mixed` (empty otherwise).
    pub formats: Vec<Format>,
    /// The process exit code; `None` when it was killed or timed out, or not given.
    pub exit_code: Option<i32>,
    /// Whether the caller gave an exit status at all. `false` for a saved log digested without
    /// one: `exit_code` is then `None` and the run's own summary alone decides success.
    pub exit_code_given: bool,
    /// Counts from the terminal summary (summed over several test binaries or packages); `None`
    /// when no summary was seen.
    pub summary: Option<Summary>,
    /// Failed tests, in output order.
    pub failures: Vec<Failure>,
    /// Compiler and linter findings, in output order.
    pub diagnostics: Vec<Diagnostic>,
    /// Why the digest is not `recognised` (empty when it is), sorted.
    pub reasons: Vec<DigestReason>,
    /// The compact rendering within the budget given in [`crate::DigestOptions`], or `None`
    /// when the digest is not `recognised` or the rendering does not fit.
    pub compact: Option<String>,
    /// The last lines of the normalised view (ANSI stripped, carriage returns applied), for
    /// passthrough when there is no compact form.
    pub tail: Vec<String>,
    /// What the gate's command line is: one tool, several, or a script nobody can see into;
    /// `None` when no command was given (a saved log).
    #[serde(default)]
    pub scope: Option<Scope>,
    /// Bytes of input read.
    pub bytes: u64,
    /// Lines of input read.
    pub lines: u64,
}
