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
    /// Inside a block's `---- Captured stdout call ----` part: the test's own output, where a
    /// `file.py:N:` line is not the failure's place.
    captured: bool,
    /// `--tb=native`: the block's `Traceback (most recent call last):` was seen; its first line
    /// back at column 0 is the exception.
    native: bool,
    /// Counts of the sessions that ended before the current one (`pytest a; pytest b`).
    earlier: Option<Summary>,
    /// Index of the current session's first failure: a short summary names only its own.
    session_start: usize,
    /// The first failure of the wrapper's current run (see [`Parser::run_ended`]).
    run_start: usize,
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
            captured: false,
            native: false,
            earlier: None,
            session_start: 0,
            run_start: 0,
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

    /// The index of the current session's failure named `id` (a node id) or whose block name
    /// ends it (a block names a class's test `TestCart.test_total`, the node id
    /// `test_x.py::TestCart::test_total`).
    fn find(&self, id: &str) -> Option<usize> {
        let session = self.failures.items.get(self.session_start..)?;
        session
            .iter()
            .position(|f| {
                let tail = block_as_id(&f.name);
                f.name == id
                    || (id.ends_with(tail.as_str()) && id[..id.len() - tail.len()].ends_with("::"))
            })
            .map(|i| i + self.session_start)
    }

    /// The session's closing counts. Whatever follows belongs to the next session (`-q` prints
    /// no header to start one), and a second counts line is that session's.
    fn counts(&mut self, s: Summary) {
        self.fold_summary();
        self.active = true;
        self.summary = Some(s);
        self.section = Section::None;
        self.block = None;
        self.session_start = self.failures.items.len();
    }

    /// Adds the last session's counts to the earlier sessions'.
    fn fold_summary(&mut self) {
        if let Some(s) = self.summary.take() {
            self.earlier.get_or_insert_with(Summary::default).add(&s);
        }
    }

    /// Sets the current block's place, when `file` is the project's.
    fn locate(&mut self, i: usize, file: &str, line: u32) {
        if let Some(file) = self.project_file(file)
            && let Some(f) = self.failures.items.get_mut(i)
        {
            f.file = Some(file);
            f.line = Some(line);
        }
    }
}

/// A block's name as the tail of a node id: a class's `.` becomes `::` (outside a
/// parameter's brackets, which keep theirs).
fn block_as_id(name: &str) -> String {
    let params = name.find('[').unwrap_or(name.len());
    format!("{}{}", name[..params].replace('.', "::"), &name[params..])
}

/// `id - message` of a short summary entry; a ` - ` inside the id's parameter brackets
/// (`test_pair[a - b]`) is part of the id.
fn split_entry(rest: &str) -> (&str, Option<&str>) {
    let from = match (rest.find('['), rest.find(']')) {
        (Some(open), Some(close)) if open < close && !rest[..open].contains(" - ") => close,
        _ => 0,
    };
    match rest[from..].find(" - ") {
        Some(at) => (&rest[..from + at], Some(&rest[from + at + 3..])),
        None => (rest, None),
    }
}

/// `File "/x/test_a.py", line 10, in test_total` (a `--tb=native` frame) → file and line.
fn native_frame(t: &str) -> Option<(&str, u32)> {
    let q = t.trim_start().strip_prefix("File \"")?;
    let (file, rest) = q.split_once("\", line ")?;
    let n = rest.split(|c: char| !c.is_ascii_digit()).next()?;
    Some((file, n.parse().ok()?))
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
    let body = t.trim_matches('=').trim();
    // A run over a minute: `1 failed in 61.04s (0:01:01)`.
    let body = match body.rsplit_once(" (") {
        Some((head, hms))
            if hms.ends_with(')')
                && hms.len() > 1
                && hms[..hms.len() - 1]
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b == b':' || b == b' ' || b == b',')
                && hms.contains(':') =>
        {
            head
        }
        _ => body,
    };
    if !body.ends_with('s') {
        return None;
    }
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
                // A second session (`pytest a; pytest b`) is a run of its own: its counts add
                // to the earlier ones, its short summary names its own failures.
                self.fold_summary();
                self.active = true;
                self.section = Section::None;
                self.block = None;
                self.session_start = self.failures.items.len();
                return Claim::Open;
            }
            if let Some(s) = counts_line(t) {
                self.counts(s);
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
            self.counts(s);
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
                    self.captured = false;
                    self.native = false;
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
                if t.starts_with("---") && t.ends_with("---") && t.contains(" Captured ") {
                    self.captured = true;
                    return Claim::Yes;
                }
                if self.captured {
                    return Claim::Yes;
                }
                if t == "Traceback (most recent call last):" {
                    self.native = true;
                    return Claim::Yes;
                }
                if let Some((file, n)) = native_frame(t).filter(|_| self.native) {
                    // Frames run outermost first: the last one in the project is the place.
                    self.locate(i, file, n);
                    return Claim::Yes;
                }
                if self.native && !t.starts_with(' ') && !t.is_empty() && !self.block_has_e {
                    // The exception line ends a native traceback.
                    self.native = false;
                    self.block_has_e = true;
                    if let Some(f) = self.failures.items.get_mut(i) {
                        f.message = Some(clip(t, max));
                    }
                    return Claim::Yes;
                }
                if let Some(at) = t.strip_prefix("file ")
                    && let Some((file, n)) = at.rsplit_once(", line ")
                    && let Ok(n) = n.parse::<u32>()
                {
                    // A fixture error names the test's definition: `file /x/test_a.py, line 18`.
                    self.locate(i, file, n);
                    return Claim::Yes;
                }
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
                    && (t.contains(": ") || t.ends_with(':') || !t.contains(' '))
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
                        let (id, msg) = split_entry(rest);
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

    fn run_ended(&mut self, base: Option<&str>) {
        self.failures.reroot(&mut self.run_start, base);
    }

    fn finish(mut self: Box<Self>) -> Report {
        if let Some(mut all) = self.earlier.take() {
            if let Some(s) = &self.summary {
                all.add(s);
            }
            self.summary = Some(all);
        }
        // The failures counted come from the tool's own summary lines.
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
