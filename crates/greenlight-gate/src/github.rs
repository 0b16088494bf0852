//! GitHub Actions workflow commands for a run (`greenlight verify --github`): file annotations
//! from the failing gates' digests, and one summary annotation per failing gate.
//!
//! The one rule that keeps it simple: the summary lines are never dropped. GitHub shows at most
//! [`MAX_ERRORS`] error and [`MAX_WARNINGS`] warning annotations per step, so the per-gate
//! summaries are placed first, file annotations fill what room is left, and one notice says
//! how many were left out. Every value is escaped per GitHub's rules, so no output of a gate can
//! forge a workflow command.

use std::fmt::Write as _;
use std::path::Path;

use greenlight_digest::{Digest, Severity};

use crate::render;
use crate::report::{
    Attempt, AttemptStatus, GateReport, GateVerdict, RunReport, WorkEvidenceReport,
};

/// Error annotations GitHub shows for one step ("10 error annotations per step", GitHub's
/// documentation of workflow commands); more are accepted but not shown.
pub const MAX_ERRORS: usize = 10;

/// Warning annotations GitHub shows for one step (same page, same limit).
pub const MAX_WARNINGS: usize = 10;

/// Bytes of evidence in one summary annotation: enough for a compact digest of a handful of
/// failures; the full evidence is in the log (and the JUnit report).
pub const SUMMARY_BUDGET: usize = 4096;

/// Lines of raw tail in a summary annotation when the output was not recognised.
const SUMMARY_TAIL_LINES: usize = 20;

/// Escapes a message (the text after `::`): `%`, CR and LF.
pub fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a property value (`file=`, `title=`): as a message, plus `:` and `,`.
pub fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Error,
    Warning,
}

impl Level {
    fn word(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
        }
    }
}

#[derive(Debug)]
struct Annotation {
    level: Level,
    file: Option<String>,
    line: Option<u32>,
    col: Option<u32>,
    title: String,
    message: String,
}

impl Annotation {
    fn render(&self) -> String {
        let mut props = Vec::new();
        if let Some(file) = &self.file {
            props.push(format!("file={}", escape_property(file)));
        }
        if let Some(line) = self.line {
            props.push(format!("line={line}"));
        }
        if let Some(col) = self.col {
            props.push(format!("col={col}"));
        }
        props.push(format!("title={}", escape_property(&self.title)));
        format!(
            "::{} {}::{}",
            self.level.word(),
            props.join(","),
            escape_data(&self.message)
        )
    }
}

/// The workflow command lines for a run, in order, every one a complete line without its
/// newline. `cwd` is the directory the gates ran in and `prefix` the path from the repository
/// root (GitHub's workspace) to it, so file annotations land on the right file.
pub fn lines(run: &RunReport, cwd: &Path, prefix: Option<&Path>, tail_limit: usize) -> Vec<String> {
    let mut summaries: Vec<(usize, Annotation)> = Vec::new();
    let mut details: Vec<(usize, Annotation)> = Vec::new();
    if let WorkEvidenceReport::Fail { .. } = run.work_evidence {
        summaries.push((
            0,
            Annotation {
                level: Level::Error,
                file: None,
                line: None,
                col: None,
                title: "work-evidence failed".to_owned(),
                message: format!(
                    "{}\n{}",
                    render::work_evidence_line(&run.work_evidence),
                    render::work_evidence_stderr(&run.work_evidence).unwrap_or_default()
                )
                .trim_end()
                .to_owned(),
            },
        ));
    }
    for (i, gate) in run.gates.iter().enumerate() {
        let order = i + 1;
        let flaky_pass = gate.verdict == GateVerdict::Flaky && gate.passed == Some(true);
        if gate.passed != Some(false) && !flaky_pass {
            continue;
        }
        let Some(attempt) = shown_attempt(gate) else {
            continue;
        };
        if flaky_pass {
            summaries.push((
                order,
                Annotation {
                    level: Level::Warning,
                    file: None,
                    line: None,
                    col: None,
                    title: format!("gate {} flaky", gate.id),
                    message: format!(
                        "{}\nfailed, then passed on its retry (flakyIsPass: true)\ncommand: {}",
                        render::gate_line(gate),
                        gate.command
                    ),
                },
            ));
            continue;
        }
        if let Some(digest) = &attempt.digest {
            details.extend(file_annotations(gate, digest, cwd, prefix).map(|a| (order, a)));
        }
        summaries.push((
            order,
            Annotation {
                level: Level::Error,
                file: None,
                line: None,
                col: None,
                title: format!("gate {} failed", gate.id),
                message: summary_message(gate, attempt, tail_limit),
            },
        ));
    }

    // Summaries first, then details in gate order while there is room.
    let mut room_err = MAX_ERRORS;
    let mut room_warn = MAX_WARNINGS;
    let mut kept: Vec<(usize, bool, Annotation)> = Vec::new();
    let (mut left_err, mut left_warn) = (0usize, 0usize);
    for (is_summary, list) in [(true, summaries), (false, details)] {
        for (order, a) in list {
            let room = match a.level {
                Level::Error => &mut room_err,
                Level::Warning => &mut room_warn,
            };
            if *room > 0 {
                *room -= 1;
                kept.push((order, is_summary, a));
            } else if a.level == Level::Error {
                left_err += 1;
            } else {
                left_warn += 1;
            }
        }
    }
    // Print each gate's file annotations just before its summary.
    kept.sort_by_key(|(order, is_summary, _)| (*order, *is_summary));
    let mut out: Vec<String> = kept.iter().map(|(_, _, a)| a.render()).collect();
    if left_err + left_warn > 0 {
        out.push(format!(
            "::notice title=greenlight::{}",
            escape_data(&format!(
                "{left_err} error and {left_warn} warning annotation(s) left out: GitHub shows \
                 {MAX_ERRORS} errors and {MAX_WARNINGS} warnings per step. The log above has \
                 every failure."
            ))
        ));
    }
    out
}

/// The attempt whose output explains the gate: a FLAKY gate's failed first run, else its last.
fn shown_attempt(gate: &GateReport) -> Option<&Attempt> {
    match gate.verdict {
        GateVerdict::Flaky => gate.attempts.first(),
        _ => gate
            .attempts
            .iter()
            .rev()
            .find(|a| a.status != AttemptStatus::MutexSkip),
    }
}

fn file_annotations<'a>(
    gate: &'a GateReport,
    digest: &'a Digest,
    cwd: &'a Path,
    prefix: Option<&'a Path>,
) -> impl Iterator<Item = Annotation> + 'a {
    let failures = digest.failures.iter().filter_map(move |f| {
        Some(Annotation {
            level: Level::Error,
            file: Some(repo_path(f.file.as_deref()?, cwd, prefix)),
            line: f.line,
            col: None,
            title: format!("{}: {}", gate.id, f.name),
            message: f.message.clone().unwrap_or_else(|| f.name.clone()),
        })
    });
    let diagnostics = digest.diagnostics.iter().filter_map(move |d| {
        let title = match &d.code {
            Some(code) => format!("{}: {code}", gate.id),
            None => gate.id.clone(),
        };
        Some(Annotation {
            level: match d.severity {
                Severity::Error => Level::Error,
                Severity::Warning => Level::Warning,
            },
            file: Some(repo_path(d.file.as_deref()?, cwd, prefix)),
            line: d.line,
            col: d.column,
            title,
            message: d.message.clone(),
        })
    });
    failures.chain(diagnostics)
}

/// A digest path as GitHub wants it: relative to the repository root.
fn repo_path(file: &str, cwd: &Path, prefix: Option<&Path>) -> String {
    let path = Path::new(file);
    let relative = if path.is_absolute() {
        match path.strip_prefix(cwd) {
            Ok(rel) => rel,
            Err(_) => return file.to_owned(),
        }
    } else {
        path
    };
    match prefix.filter(|p| !p.as_os_str().is_empty()) {
        Some(prefix) => prefix.join(relative).display().to_string(),
        None => relative.display().to_string(),
    }
}

fn summary_message(gate: &GateReport, attempt: &Attempt, tail_limit: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", render::gate_line(gate));
    let _ = writeln!(out, "command: {}", gate.command);
    if let Some(compact) = render::compact_digest(attempt, tail_limit.min(SUMMARY_BUDGET))
        .filter(|c| c.len() <= SUMMARY_BUDGET)
    {
        out.push_str(&compact);
    } else if attempt.output_bytes == 0 {
        out.push_str("(no output)");
    } else if tail_limit > 0 {
        let lines: Vec<&str> = attempt.tail.lines().collect();
        let start = lines.len().saturating_sub(SUMMARY_TAIL_LINES);
        let mut tail = lines[start..].join("\n");
        if tail.len() > SUMMARY_BUDGET {
            let mut cut = tail.len() - SUMMARY_BUDGET;
            while !tail.is_char_boundary(cut) {
                cut += 1;
            }
            tail = tail[cut..].to_owned();
        }
        let _ = write!(out, "last lines of output:\n{tail}");
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_githubs_rules() {
        assert_eq!(escape_data("50% done\r\nnext"), "50%25 done%0D%0Anext");
        assert_eq!(escape_property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
    }

    #[test]
    fn paths_are_made_relative_to_the_repository() {
        let cwd = Path::new("/w/repo/sub");
        assert_eq!(repo_path("src/a.ts", cwd, None), "src/a.ts");
        assert_eq!(
            repo_path("src/a.ts", cwd, Some(Path::new("sub"))),
            "sub/src/a.ts"
        );
        assert_eq!(repo_path("/w/repo/sub/x.rs", cwd, None), "x.rs");
        assert_eq!(repo_path("/elsewhere/x.rs", cwd, None), "/elsewhere/x.rs");
    }
}
