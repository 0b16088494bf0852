//! GitHub Actions problem matchers: the JSON files `::add-matcher::` takes, parsed into a
//! [`MatcherSet`], and the line-by-line reading that turns a tool's output into problems.
//!
//! One rule: a matcher behaves here as it does on GitHub's runner. A file GitHub would refuse
//! is refused, with the place in the file and what to change; a line is offered to each matcher
//! in order and belongs to the first one that makes a problem of it; a problem without a message
//! or with a severity other than error, warning or notice is no problem at all.
//!
//! The format, as GitHub's runner reads it:
//!
//! - `{"problemMatcher": [{"owner", "severity"?, "pattern": [{"regexp", "file"?, "fromPath"?,
//!   "line"?, "column"?, "severity"?, "code"?, "message"?, "loop"?}, …]}, …]}`; other keys are
//!   ignored.
//! - `owner` is required and unique within a file (case-insensitive); a matcher's `severity` is
//!   its default (`error`, `warning` or `notice`, any case; no default reads as `error`).
//! - Each property names a capture group of its pattern's `regexp` (0 is the whole match), and
//!   is set by one pattern only; some pattern must set `message`.
//! - One pattern reads one line. Several patterns read consecutive lines, pattern *i* on line
//!   *i*, and only the last produces a problem, carrying what the earlier ones captured. The last
//!   of several patterns may `loop`: it then keeps reading line after line, one problem each,
//!   until a line does not match. A looping pattern must set `message`.
//!
//! Regexes are compiled with `fancy-regex` (the `regex` crate's engine, plus lookaround and
//! backreferences): GitHub's own `csc` matcher uses a lookbehind. A construct it still lacks
//! (variable-length lookbehind, .NET balancing groups, …) fails the parse with the pattern's
//! place. `\d`, `\w` and `\s` match Unicode here and ASCII only on GitHub.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use fancy_regex::Regex;
use serde::Deserialize;

use crate::formats::util::clip;
use crate::formats::{Bounded, Limits, Report};
use crate::model::{Diagnostic, Format, Severity, Summary};

/// Problem matchers parsed from one or more files, ready to read output.
///
/// Cheap to clone (the compiled matchers are shared). Two sets are equal when they hold the same
/// definitions in the same order.
#[derive(Clone, Default)]
pub struct MatcherSet {
    matchers: Arc<[Matcher]>,
}

#[derive(Clone)]
struct Matcher {
    owner: String,
    /// Lowercase; empty when the file gives none.
    default_severity: String,
    patterns: Vec<Pattern>,
}

#[derive(Clone)]
struct Pattern {
    regexp: String,
    regex: Regex,
    groups: Groups,
    looping: bool,
}

/// The capture group each property comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Groups {
    file: Option<usize>,
    from_path: Option<usize>,
    line: Option<usize>,
    column: Option<usize>,
    severity: Option<usize>,
    code: Option<usize>,
    message: Option<usize>,
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        self.owner == other.owner
            && self.default_severity == other.default_severity
            && self.patterns.len() == other.patterns.len()
            && self.patterns.iter().zip(&other.patterns).all(|(a, b)| {
                a.regexp == b.regexp && a.groups == b.groups && a.looping == b.looping
            })
    }
}

impl PartialEq for MatcherSet {
    fn eq(&self, other: &Self) -> bool {
        self.matchers == other.matchers
    }
}

impl Eq for MatcherSet {}

impl fmt::Debug for MatcherSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MatcherSet")
            .field("owners", &self.owners().collect::<Vec<_>>())
            .finish()
    }
}

impl MatcherSet {
    /// Parses one matcher file. `source` names it in error messages (a path as the user wrote
    /// it); `json` is its text.
    pub fn parse(source: &str, json: &str) -> Result<MatcherSet, MatcherError> {
        let file: FileJson = serde_json::from_str(json).map_err(|e| MatcherError {
            source: source.to_owned(),
            place: format!("{}:{}", e.line(), e.column()),
            problem: MatcherProblem::NotAMatcherFile {
                detail: strip_position(&e.to_string()),
            },
        })?;
        let entries = file.problem_matcher.unwrap_or_default();
        if entries.is_empty() {
            return Err(MatcherError {
                source: source.to_owned(),
                place: "problemMatcher".to_owned(),
                problem: MatcherProblem::NoMatchers,
            });
        }
        let mut matchers = Vec::with_capacity(entries.len());
        let mut owners: Vec<String> = Vec::new();
        for (i, entry) in entries.into_iter().enumerate() {
            let err = |place: String, problem| MatcherError {
                source: source.to_owned(),
                place,
                problem,
            };
            let m = compile(i, entry).map_err(|(place, problem)| err(place, problem))?;
            let key = m.owner.to_lowercase();
            if let Some(first) = owners.iter().position(|o| *o == key) {
                return Err(err(
                    format!("problemMatcher[{i}].owner"),
                    MatcherProblem::DuplicateOwner {
                        owner: m.owner,
                        first,
                    },
                ));
            }
            owners.push(key);
            matchers.push(m);
        }
        Ok(MatcherSet {
            matchers: matchers.into(),
        })
    }

    /// Adds the matchers of `other` after these. A matcher whose owner is already here
    /// (case-insensitive) replaces the earlier one, as a second `::add-matcher::` of the same
    /// owner does on GitHub.
    pub fn extend(&mut self, other: MatcherSet) {
        let replaced: HashSet<String> = other.owners().map(str::to_lowercase).collect();
        let merged: Vec<Matcher> = self
            .matchers
            .iter()
            .filter(|m| !replaced.contains(&m.owner.to_lowercase()))
            .chain(other.matchers.iter())
            .cloned()
            .collect();
        self.matchers = merged.into();
    }

    /// Whether the set holds no matcher.
    pub fn is_empty(&self) -> bool {
        self.matchers.is_empty()
    }

    /// The matchers' owners, in the order they read a line.
    pub fn owners(&self) -> impl Iterator<Item = &str> {
        self.matchers.iter().map(|m| m.owner.as_str())
    }
}

/// A matcher file that cannot be used: which file, where in it, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatcherError {
    /// The file, as the caller named it.
    pub source: String,
    /// Where: `line:column` of the JSON text, or a path like `problemMatcher[1].pattern[0].regexp`.
    pub place: String,
    /// What is wrong.
    pub problem: MatcherProblem,
}

impl fmt::Display for MatcherError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A JSON position joins the file name as `file:line:col`; a path inside the file reads
        // better after a space.
        if self.place.starts_with(|c: char| c.is_ascii_digit()) {
            write!(f, "{}:{}: {}", self.source, self.place, self.problem)
        } else {
            write!(f, "{}: {}: {}", self.source, self.place, self.problem)
        }
    }
}

impl std::error::Error for MatcherError {}

/// What is wrong with a matcher file; each message ends with what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatcherProblem {
    /// Not JSON, or JSON of another shape.
    #[error(
        "not a problem matcher file: {detail}; the file must be JSON of the form {{\"problemMatcher\": [{{\"owner\": …, \"pattern\": [{{\"regexp\": …, \"message\": 1}}]}}]}}"
    )]
    NotAMatcherFile {
        /// serde_json's description, without its position.
        detail: String,
    },
    /// `problemMatcher` is missing or empty.
    #[error("no matchers: add at least one matcher to the `problemMatcher` list")]
    NoMatchers,
    /// A matcher without an `owner`.
    #[error("the matcher has no `owner`: give it a non-empty name, like \"eslint\"")]
    MissingOwner,
    /// Two matchers of one file share an owner.
    #[error(
        "owner `{owner}` is already used by problemMatcher[{first}] (owners are compared without case): give each matcher its own owner"
    )]
    DuplicateOwner {
        /// The owner named twice.
        owner: String,
        /// Index of the matcher that has it first.
        first: usize,
    },
    /// A default `severity` other than error, warning or notice.
    #[error(
        "matcher `{owner}` has default severity `{found}`: use \"error\", \"warning\" or \"notice\", or leave it out (problems default to error)"
    )]
    BadDefaultSeverity {
        /// The matcher.
        owner: String,
        /// The value found.
        found: String,
    },
    /// A matcher without patterns.
    #[error("matcher `{owner}` has no patterns: give it a `pattern` list with at least one regexp")]
    NoPatterns {
        /// The matcher.
        owner: String,
    },
    /// A pattern without `regexp`.
    #[error(
        "matcher `{owner}`: the pattern has no `regexp`: add the regular expression it matches"
    )]
    MissingRegexp {
        /// The matcher.
        owner: String,
    },
    /// A `regexp` the engine cannot compile.
    #[error(
        "matcher `{owner}`: the regexp does not compile here: {detail}; matchers are written for .NET's regex engine, and this one lacks some of its constructs (variable-length lookbehind, balancing groups, …): rewrite that part of the pattern"
    )]
    BadRegexp {
        /// The matcher.
        owner: String,
        /// The engine's message.
        detail: String,
    },
    /// A property naming a group the regexp does not have.
    #[error(
        "matcher `{owner}`: `{property}` is group {group}, but the regexp has only groups 0 to {last}: count the regexp's capturing parentheses and use one of those numbers"
    )]
    GroupOutOfRange {
        /// The matcher.
        owner: String,
        /// `file`, `line`, `message`, …
        property: &'static str,
        /// The group given.
        group: i64,
        /// The highest group the regexp has.
        last: usize,
    },
    /// A property set by two patterns.
    #[error(
        "matcher `{owner}`: `{property}` is already set by pattern[{first}]: set each property in one pattern only"
    )]
    PropertySetTwice {
        /// The matcher.
        owner: String,
        /// The property.
        property: &'static str,
        /// The pattern that sets it first.
        first: usize,
    },
    /// `loop` on a pattern that cannot loop.
    #[error(
        "matcher `{owner}`: {why}; set `loop` only on the last pattern of a matcher with two or more"
    )]
    LoopNotLast {
        /// The matcher.
        owner: String,
        /// Why this pattern cannot loop.
        why: &'static str,
    },
    /// A looping pattern without `message`.
    #[error(
        "matcher `{owner}`: the looping pattern does not set `message`: give it the group of the message, since each line it matches is one problem"
    )]
    LoopWithoutMessage {
        /// The matcher.
        owner: String,
    },
    /// No pattern sets `message`.
    #[error(
        "matcher `{owner}`: no pattern sets `message`: name the group holding the message in one pattern"
    )]
    NoMessage {
        /// The matcher.
        owner: String,
    },
}

/// serde_json appends ` at line L column C`; the error's place already says it.
fn strip_position(s: &str) -> String {
    match s.rfind(" at line ") {
        Some(at) => s[..at].to_owned(),
        None => s.to_owned(),
    }
}

/// fancy-regex opens every compile error with `Error compiling regex: `, which the message
/// around it already says.
fn strip_engine_prefix(s: &str) -> String {
    s.strip_prefix("Error compiling regex: ")
        .unwrap_or(s)
        .to_owned()
}

#[derive(Deserialize)]
struct FileJson {
    #[serde(rename = "problemMatcher")]
    problem_matcher: Option<Vec<MatcherJson>>,
}

#[derive(Deserialize)]
struct MatcherJson {
    owner: Option<String>,
    severity: Option<String>,
    pattern: Option<Vec<PatternJson>>,
}

#[derive(Deserialize)]
struct PatternJson {
    regexp: Option<String>,
    file: Option<i64>,
    #[serde(rename = "fromPath")]
    from_path: Option<i64>,
    line: Option<i64>,
    column: Option<i64>,
    severity: Option<i64>,
    code: Option<i64>,
    message: Option<i64>,
    #[serde(rename = "loop")]
    looping: Option<bool>,
}

/// Checks and compiles matcher `i`; an error comes with its place in the file.
fn compile(i: usize, m: MatcherJson) -> Result<Matcher, (String, MatcherProblem)> {
    let at = format!("problemMatcher[{i}]");
    let owner = m.owner.unwrap_or_default();
    if owner.is_empty() {
        return Err((format!("{at}.owner"), MatcherProblem::MissingOwner));
    }
    let default_severity = m.severity.unwrap_or_default().to_lowercase();
    if !matches!(
        default_severity.as_str(),
        "" | "error" | "warning" | "notice"
    ) {
        return Err((
            format!("{at}.severity"),
            MatcherProblem::BadDefaultSeverity {
                owner,
                found: default_severity,
            },
        ));
    }
    let specs = m.pattern.unwrap_or_default();
    if specs.is_empty() {
        return Err((
            format!("{at}.pattern"),
            MatcherProblem::NoPatterns { owner },
        ));
    }
    let count = specs.len();
    // For each property, the pattern that sets it.
    let mut set_by: [Option<usize>; 7] = [None; 7];
    let mut patterns = Vec::with_capacity(count);
    for (j, p) in specs.into_iter().enumerate() {
        let pat = format!("{at}.pattern[{j}]");
        let looping = p.looping.unwrap_or(false);
        if looping && (count == 1 || j + 1 != count) {
            let why = if count == 1 {
                "a single-pattern matcher cannot loop (it already reads every line)"
            } else {
                "only the last pattern may loop"
            };
            return Err((
                format!("{pat}.loop"),
                MatcherProblem::LoopNotLast { owner, why },
            ));
        }
        if looping && p.message.is_none() {
            return Err((pat, MatcherProblem::LoopWithoutMessage { owner }));
        }
        let Some(regexp) = p.regexp else {
            return Err((
                format!("{pat}.regexp"),
                MatcherProblem::MissingRegexp { owner },
            ));
        };
        let regex = match Regex::new(&regexp) {
            Ok(r) => r,
            Err(e) => {
                return Err((
                    format!("{pat}.regexp"),
                    MatcherProblem::BadRegexp {
                        owner,
                        detail: strip_engine_prefix(&e.to_string()),
                    },
                ));
            }
        };
        // Group 0 (the whole match) counts, as on GitHub.
        let groups_len = regex.captures_len();
        let fields = [
            ("file", p.file),
            ("fromPath", p.from_path),
            ("line", p.line),
            ("column", p.column),
            ("severity", p.severity),
            ("code", p.code),
            ("message", p.message),
        ];
        let mut resolved = [None; 7];
        for (k, (property, value)) in fields.into_iter().enumerate() {
            let Some(group) = value else { continue };
            if let Some(first) = set_by[k] {
                return Err((
                    format!("{pat}.{property}"),
                    MatcherProblem::PropertySetTwice {
                        owner,
                        property,
                        first,
                    },
                ));
            }
            let index = usize::try_from(group).ok().filter(|&g| g < groups_len);
            let Some(index) = index else {
                return Err((
                    format!("{pat}.{property}"),
                    MatcherProblem::GroupOutOfRange {
                        owner,
                        property,
                        group,
                        last: groups_len.saturating_sub(1),
                    },
                ));
            };
            set_by[k] = Some(j);
            resolved[k] = Some(index);
        }
        let [file, from_path, line, column, severity, code, message] = resolved;
        patterns.push(Pattern {
            regexp,
            regex,
            groups: Groups {
                file,
                from_path,
                line,
                column,
                severity,
                code,
                message,
            },
            looping,
        });
    }
    if set_by[6].is_none() {
        return Err((format!("{at}.pattern"), MatcherProblem::NoMessage { owner }));
    }
    Ok(Matcher {
        owner,
        default_severity,
        patterns,
    })
}

/// What the patterns of one matcher captured so far. `Some("")` is a group that did not take
/// part in the match: set, but empty (and it is not overridden by a later pattern).
#[derive(Debug, Clone, Default)]
struct Captured {
    file: Option<String>,
    from_path: Option<String>,
    line: Option<String>,
    column: Option<String>,
    severity: Option<String>,
    code: Option<String>,
    message: Option<String>,
}

impl Captured {
    /// `earlier`'s values, completed by what `pattern` captured from `text`.
    fn merge(
        earlier: Option<&Captured>,
        pattern: &Pattern,
        caps: &fancy_regex::Captures<'_>,
        max_text: usize,
    ) -> Captured {
        let get = |g: Option<usize>| {
            g.map(|g| {
                caps.get(g)
                    .map_or(String::new(), |m| clip(m.as_str(), max_text))
            })
        };
        let e = earlier.cloned().unwrap_or_default();
        let g = pattern.groups;
        Captured {
            file: e.file.or_else(|| get(g.file)),
            from_path: e.from_path.or_else(|| get(g.from_path)),
            line: e.line.or_else(|| get(g.line)),
            column: e.column.or_else(|| get(g.column)),
            severity: e.severity.or_else(|| get(g.severity)),
            code: e.code.or_else(|| get(g.code)),
            message: e.message.or_else(|| get(g.message)),
        }
    }
}

/// One run's reading state: the matchers' partial matches and the problems found.
pub(crate) struct MatcherRun {
    set: MatcherSet,
    /// Per matcher, per pattern but the last: the match that pattern made on the line before.
    running: Vec<Vec<Option<Captured>>>,
    problems: Bounded<Diagnostic>,
    errors: u64,
    warnings: u64,
    max_text: usize,
}

impl MatcherRun {
    pub(crate) fn new(set: MatcherSet, limits: Limits) -> Self {
        let running = set
            .matchers
            .iter()
            .map(|m| vec![None; m.patterns.len() - 1])
            .collect();
        MatcherRun {
            set,
            running,
            problems: Bounded::new(limits.max_items),
            errors: 0,
            warnings: 0,
            max_text: limits.max_text,
        }
    }

    /// Reads one normalised line.
    pub(crate) fn line(&mut self, text: &str) {
        for k in 0..self.set.matchers.len() {
            let matcher = &self.set.matchers[k];
            let Some(found) = step(matcher, &mut self.running[k], text, self.max_text) else {
                continue;
            };
            // A match ends every other matcher's partial match, problem or not.
            for (other, state) in self.running.iter_mut().enumerate() {
                if other != k {
                    state.fill(None);
                }
            }
            if let Some(d) = problem(matcher, found) {
                if d.severity == Severity::Error {
                    self.errors += 1;
                } else {
                    self.warnings += 1;
                }
                self.problems.push(d);
                return;
            }
        }
    }

    /// The problems found, as one format's report: errors explain a failed run; the counts are
    /// the summary. Inactive when no problem was found.
    pub(crate) fn finish(self) -> Report {
        let found = self.errors + self.warnings;
        Report {
            active: found > 0,
            format: Some(Format::ProblemMatcher),
            summary: Some(Summary {
                errors: Some(self.errors),
                warnings: Some(self.warnings),
                ..Summary::default()
            }),
            // Matchers can say a run failed (an error), never that it passed.
            success: (self.errors > 0).then_some(false),
            expected_failures: 0,
            expected_errors: self.errors,
            failures: Vec::new(),
            diagnostics: self.problems.items,
            dropped: self.problems.dropped > 0,
            ..Report::default()
        }
    }
}

/// Offers `text` to `matcher`; returns what it captured when its last pattern matched.
fn step(
    matcher: &Matcher,
    running: &mut [Option<Captured>],
    text: &str,
    max_text: usize,
) -> Option<Captured> {
    let last = matcher.patterns.len() - 1;
    let captures = |p: &Pattern| p.regex.captures(text).ok().flatten();
    if last == 0 {
        let p = &matcher.patterns[0];
        return captures(p).map(|c| Captured::merge(None, p, &c, max_text));
    }
    // From the last pattern back, so each pattern sees what the one before it matched on the
    // previous line, not on this one.
    for i in (0..=last).rev() {
        if i > 0 && running[i - 1].is_none() {
            continue;
        }
        let pattern = &matcher.patterns[i];
        let Some(caps) = captures(pattern) else {
            if i == last {
                running[i - 1] = None;
            } else {
                running[i] = None;
            }
            continue;
        };
        let earlier = if i > 0 { running[i - 1].as_ref() } else { None };
        let merged = Captured::merge(earlier, pattern, &caps, max_text);
        if i == last {
            let keep = if pattern.looping {
                running[i - 1].take()
            } else {
                None
            };
            running.fill(None);
            running[i - 1] = keep;
            return Some(merged);
        }
        running[i] = Some(merged);
    }
    None
}

/// What GitHub makes of a match: no problem without a message or with an unknown severity.
fn problem(matcher: &Matcher, c: Captured) -> Option<Diagnostic> {
    let message = c.message.filter(|m| !m.trim().is_empty())?;
    let severity = match c.severity.as_deref().filter(|s| !s.is_empty()) {
        Some(s) => s.to_lowercase(),
        None => matcher.default_severity.clone(),
    };
    let severity = match severity.as_str() {
        "" | "error" => Severity::Error,
        // The digest has two severities; a notice, like a warning, does not fail anything.
        "warning" | "notice" => Severity::Warning,
        _ => return None,
    };
    let number = |s: Option<String>| {
        s.filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u32>().ok())
    };
    let file = c.file.filter(|f| !f.trim().is_empty()).map(|file| {
        match c.from_path.as_deref().and_then(parent_dir) {
            Some(dir) if !absolute(&file) => format!("{dir}/{file}"),
            _ => file,
        }
    });
    Some(Diagnostic {
        severity,
        file,
        line: number(c.line),
        column: number(c.column),
        code: c
            .code
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty()),
        message,
        owner: Some(matcher.owner.clone()),
    })
}

/// The directory part of a path (`/` or `\` separated), when it has one.
fn parent_dir(path: &str) -> Option<&str> {
    let path = path.trim();
    let cut = path.rfind(['/', '\\'])?;
    let dir = &path[..cut];
    (!dir.is_empty()).then_some(dir)
}

/// A path that names its root: `/x`, `\\server\x`, `C:\x`, `C:/x`.
fn absolute(path: &str) -> bool {
    let b = path.as_bytes();
    path.starts_with('/')
        || path.starts_with("\\\\")
        || (b.len() > 2
            && b[0].is_ascii_alphabetic()
            && b[1] == b':'
            && matches!(b[2], b'/' | b'\\'))
}
