//! pytest (default, `-q`, `-v`, `-rA`): `=====` section rules, `____ name ____` failure
//! blocks with `E   ` message lines, the short test summary, and the final counts line.
//!
//! One rule: everything between a section rule and the next belongs to that section, so user
//! output inside a failure block is never mistaken for pytest's own lines.

use super::util::{clip, counts, external, location};
use super::{Bounded, Claim, Limits, Line, Parser, Report, Wake};
use crate::model::{Failure, Summary};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    None,
    /// FAILURES or ERRORS: failure blocks.
    Failures,
    /// short test summary info.
    Short,
    /// Any other section (warnings summary, PASSES, captured output): claimed, not read.
    Other,
}

#[derive(Debug)]
pub(crate) struct Pytest {
    limits: Limits,
    active: bool,
    section: Section,
    summary: Option<Summary>,
    failures: Bounded<Failure>,
    block: Option<usize>,
    /// An `E   ` line was seen in the current block (the first one is the message).
    block_has_e: bool,
    /// The directory pytest names as `rootdir:`; absolute paths under it are the project's.
    rootdir: Option<String>,
    /// `--tb=line`: `path.py:N: message` lines, matched to the short summary's entries by file.
    tb_lines: Vec<(String, u32, bool)>,
    /// The current block's location came from a quoted `File "…", line N`.
    located_by_e: bool,
    /// Indent of the current block's message line among its `E` lines.
    e_indent: Option<usize>,
}

impl Pytest {
    pub(crate) fn new(limits: Limits) -> Self {
        Pytest {
            limits,
            active: false,
            section: Section::None,
            summary: None,
            failures: Bounded::new(limits.max_items),
            block: None,
            block_has_e: false,
            rootdir: None,
            tb_lines: Vec::new(),
            located_by_e: false,
            e_indent: None,
        }
    }

    /// `file` relative to the rootdir when it lies under it; `None` when it is outside the
    /// project (the standard library, site-packages, another absolute path).
    fn project_file(&self, file: &str) -> Option<String> {
        if external(file) || file.starts_with("..") {
            return None;
        }
        if file.starts_with('/') {
            // `-q` prints no rootdir: an absolute path outside the known library places is
            // then the best evidence there is.
            let Some(root) = self.rootdir.as_deref() else {
                return Some(file.to_owned());
            };
            let rel = file.strip_prefix(root)?.strip_prefix('/')?;
            return Some(rel.to_owned());
        }
        Some(file.to_owned())
    }

    /// The index of the failure named `id` (a node id) or whose block name ends it.
    fn find(&self, id: &str) -> Option<usize> {
        self.failures.items.iter().position(|f| {
            f.name == id
                || (id.ends_with(f.name.as_str()) && id[..id.len() - f.name.len()].ends_with("::"))
        })
    }
}

/// `==== title ====` → `title`.
fn rule_title(t: &str) -> Option<&str> {
    if t.len() < 7 || !t.starts_with("===") || !t.ends_with("===") {
        return None;
    }
    Some(t.trim_matches('=').trim())
}

/// The final counts line, with or without the `====` decoration: `3 failed, 2 passed in 0.1s`.
fn counts_line(t: &str) -> Option<Summary> {
    if !t.trim_end_matches('=').trim_end().ends_with('s') {
        return None;
    }
    let body = t.trim_matches('=').trim();
    let (list, time) = body.rsplit_once(" in ")?;
    if !time.ends_with('s') || !time.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if list == "no tests ran" {
        return Some(Summary {
            passed: Some(0),
            failed: Some(0),
            skipped: Some(0),
            errors: Some(0),
            warnings: None,
        });
    }
    let mut s = Summary {
        passed: Some(0),
        failed: Some(0),
        skipped: Some(0),
        errors: Some(0),
        warnings: None,
    };
    let mut known = false;
    let mut unknown = false;
    counts(list, |word, n| {
        known = true;
        match word {
            "passed" | "xpassed" => s.passed = s.passed.map(|p| p + n),
            "failed" => s.failed = Some(n),
            "skipped" | "xfailed" | "deselected" => s.skipped = s.skipped.map(|p| p + n),
            "error" | "errors" => s.errors = Some(n),
            "warning" | "warnings" => s.warnings = Some(n),
            "rerun" | "reruns" | "subtests" => {}
            _ => unknown = true,
        }
    });
    (known && !unknown).then_some(s)
}

impl Parser for Pytest {
    fn interested(&self, l: &Line<'_>) -> bool {
        self.active || matches!(l.first, b'=' | b'0'..=b'9' | b'n')
    }

    fn wake(&self) -> Wake {
        Wake::first(b"=0123456789n")
    }

    fn engaged(&self) -> bool {
        self.active
    }

    fn line(&mut self, l: &Line<'_>) -> Claim {
        let line = l.text;
        let t = line.trim_end();
        if self.active && self.section == Section::None && t.ends_with("%]") {
            // `-v` / progress lines: the bulk of a long run.
            return Claim::Yes;
        }
        if let Some(title) = rule_title(t) {
            if title == "test session starts" {
                self.active = true;
                self.section = Section::None;
                self.summary = None;
                return Claim::Open;
            }
            if let Some(s) = counts_line(t) {
                self.active = true;
                self.summary = Some(s);
                self.section = Section::None;
                self.block = None;
                return Claim::Summary;
            }
            let own = matches!(title, "FAILURES" | "ERRORS" | "short test summary info");
            if !self.active && !own {
                return Claim::No;
            }
            self.active = true;
            self.block = None;
            self.section = match title {
                "FAILURES" | "ERRORS" => Section::Failures,
                "short test summary info" => Section::Short,
                _ => Section::Other,
            };
            return Claim::Yes;
        }
        if let Some(s) = counts_line(t)
            && (self.active || s.failed.is_some())
            && !t.starts_with(' ')
            && (self.active || t.contains(" passed") || t.contains(" failed"))
        {
            // `-q` prints the counts line without decoration.
            self.active = true;
            self.summary = Some(s);
            self.section = Section::None;
            self.block = None;
            return Claim::Summary;
        }
        if !self.active {
            return Claim::No;
        }
        match self.section {
            Section::Failures => {
                if t.starts_with("___") && t.ends_with("___") {
                    let name = t.trim_matches('_').trim();
                    let name = name
                        .strip_prefix("ERROR at setup of ")
                        .or_else(|| name.strip_prefix("ERROR at teardown of "))
                        .or_else(|| name.strip_prefix("ERROR collecting "))
                        .unwrap_or(name);
                    self.block = self.failures.push(Failure {
                        name: clip(name, self.limits.max_text),
                        file: None,
                        line: None,
                        message: None,
                    });
                    self.block_has_e = false;
                    self.located_by_e = false;
                    self.e_indent = None;
                    return Claim::Yes;
                }
                let Some(i) = self.block else {
                    // `--tb=line`: one `path.py:N: message` line per failure, no blocks.
                    if !t.starts_with(' ')
                        && let Some((file, l, _)) = location(t)
                        && file.ends_with(".py")
                        && t.contains(": ")
                        && self.tb_lines.len() < self.limits.max_items
                        && let Some(file) = self.project_file(file)
                    {
                        self.tb_lines.push((file, l, false));
                    }
                    return Claim::Yes;
                };
                let max = self.limits.max_text;
                if let Some(e) = t.strip_prefix('E').filter(|e| e.starts_with(' ')) {
                    // pytest pads `E` lines to the source's indent; within one error the least
                    // indented line is the exception itself, deeper ones continue a value or
                    // quote a traceback (`File "…", line N` and its source).
                    let indent = e.len() - e.trim_start().len();
                    let body = e.trim();
                    if let Some(q) = body.strip_prefix("File \"")
                        && let Some((file, rest)) = q.split_once("\", line ")
                    {
                        // A SyntaxError while importing: this is where the error is, when the
                        // file is the project's.
                        let n = rest
                            .split(|c: char| !c.is_ascii_digit())
                            .next()
                            .unwrap_or("");
                        if let (Some(file), Ok(n)) = (self.project_file(file), n.parse::<u32>())
                            && let Some(f) = self.failures.items.get_mut(i)
                        {
                            f.file = Some(file);
                            f.line = Some(n);
                            self.located_by_e = true;
                        }
                    } else if !body.is_empty()
                        && self.e_indent.is_none_or(|m| indent < m)
                        && let Some(f) = self.failures.items.get_mut(i)
                    {
                        self.e_indent = Some(indent);
                        self.block_has_e = true;
                        f.message = Some(clip(body, max));
                    }
                } else if !t.starts_with(' ')
                    && let Some((file, l, _)) = location(t)
                    && file.ends_with(".py")
                    && (t.contains(": ") || t.ends_with(':'))
                    && !self.located_by_e
                    && let Some(file) = self.project_file(file)
                    && let Some(f) = self.failures.items.get_mut(i)
                {
                    // The last `path.py:N: …` line of a block in the project is where it
                    // failed (frames run outermost first).
                    f.file = Some(file);
                    f.line = Some(l);
                }
                Claim::Yes
            }
            Section::Short => {
                for (prefix, _) in [("FAILED ", ()), ("ERROR ", ())] {
                    if let Some(rest) = t.strip_prefix(prefix) {
                        let (id, msg) = match rest.split_once(" - ") {
                            Some((id, msg)) => (id, Some(msg)),
                            None => (rest, None),
                        };
                        let max = self.limits.max_text;
                        let module = id.split("::").next().unwrap_or(id);
                        let tb = self
                            .tb_lines
                            .iter_mut()
                            .find(|(file, _, used)| !*used && file.ends_with(module))
                            .map(|e| {
                                e.2 = true;
                                (e.0.clone(), e.1)
                            });
                        match self.find(id) {
                            Some(i) => {
                                if let Some(f) = self.failures.items.get_mut(i) {
                                    f.name = clip(id, max);
                                    if f.message.is_none() {
                                        f.message = msg.map(|m| clip(m, max));
                                    }
                                }
                            }
                            None => {
                                let (file, line) =
                                    tb.map_or((None, None), |(f, l)| (Some(f), Some(l)));
                                self.failures.push(Failure {
                                    name: clip(id, max),
                                    file,
                                    line,
                                    message: msg.map(|m| clip(m, max)),
                                });
                            }
                        }
                    }
                }
                Claim::Yes
            }
            Section::Other => Claim::Yes,
            Section::None => {
                if let Some(root) = t.strip_prefix("rootdir: ") {
                    let root = root.split(',').next().unwrap_or(root).trim();
                    self.rootdir = Some(clip(root, 4096));
                }
                let claimed = t.is_empty()
                    || t.starts_with("platform ")
                    || t.starts_with("rootdir: ")
                    || t.starts_with("configfile: ")
                    || t.starts_with("plugins: ")
                    || t.starts_with("cachedir: ")
                    || t.starts_with("collect")
                    || t.ends_with("%]")
                    || (t.starts_with("!!!") && t.ends_with("!!!"))
                    || (t.starts_with("---") && t.ends_with("---"));
                if claimed { Claim::Yes } else { Claim::No }
            }
        }
    }

    fn finish(self: Box<Self>) -> Report {
        // The failures counted come from the tool's own summary line.
        let counted = self.summary.is_some();
        let expected = self.summary.as_ref().map(Summary::failing).unwrap_or(0);
        let success = self.summary.as_ref().map(|s| s.failing() == 0);
        Report {
            active: self.active,
            format: None,
            summary: self.summary,
            success,
            expected_failures: expected,
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
