//! gcc and clang: `file:line:col: error: message [-Wflag]` with a source excerpt, the
//! `In function` and `In file included from` lines before it, and the make lines around them.
//!
//! One rule: gcc and clang print the same finding lines; clang is told apart by its closing
//! `N warnings and M errors generated.` (one per file) or by a make recipe that runs it.

use super::{Count, Dialect, Finding, Read, located, number_of};
use crate::model::{Format, Severity};

/// Sources the C family compilers read.
const SOURCES: &[&str] = &[
    ".c", ".h", ".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".m", ".mm", ".i",
];

/// Compiler names a make recipe echo starts with.
const COMPILERS: &[&str] = &["cc ", "gcc ", "g++ ", "c++ ", "clang ", "clang++ "];

#[derive(Debug, Default)]
pub(super) struct Cc {
    clang: bool,
    /// The next line is the source line a finding quotes (clang prints it bare).
    source_next: bool,
    /// The last line was clang's caret line: an indented fix-it (`  = 0`) may follow.
    caret_last: bool,
}

/// `parse.c:7:12: error: ‘missing’ undeclared [-Wflag]` → its finding (notes are context).
fn finding(t: &str) -> Option<Finding> {
    let (file, l, c, rest) = located(t, SOURCES)?;
    let (severity, msg) = if let Some(m) = rest.strip_prefix("error: ") {
        (Severity::Error, m)
    } else if let Some(m) = rest.strip_prefix("fatal error: ") {
        (Severity::Error, m)
    } else if let Some(m) = rest.strip_prefix("warning: ") {
        (Severity::Warning, m)
    } else {
        return None;
    };
    // `[-Wunused-variable]`, `[-Werror=unused-variable]`: the flag is the finding's code.
    let (msg, flag) = match msg.rsplit_once(" [-W") {
        Some((m, flag)) if flag.ends_with(']') => (m, Some(&flag[..flag.len() - 1])),
        _ => (msg, None),
    };
    let code = flag.map(|f| format!("-W{f}"));
    Some(
        Finding::at(severity, file, Some(l), c)
            .code(code.as_deref())
            .message(msg),
    )
}

impl Dialect for Cc {
    fn format(&self) -> Format {
        if self.clang {
            Format::Clang
        } else {
            Format::Gcc
        }
    }

    fn closes(&self) -> bool {
        false
    }

    fn read(&mut self, t: &str) -> Read {
        let source_next = std::mem::take(&mut self.source_next);
        let caret_last = std::mem::take(&mut self.caret_last);
        if let Some(f) = finding(t) {
            self.source_next = true;
            return Read::Finding(f);
        }
        if let Some((_, _, _, rest)) = located(t, SOURCES)
            && (rest.starts_with("note: ") || rest.starts_with("In "))
        {
            self.source_next = true;
            return Read::Context;
        }
        // `parse.c: In function ‘parse’:`, `In file included from a.c:1:`, `   from b.h:2,`.
        if let Some((file, rest)) = t.split_once(": ")
            && SOURCES.iter().any(|e| file.ends_with(e))
            && !file.contains(' ')
            && (rest.starts_with("In function") || rest.starts_with("At top level"))
        {
            return Read::Context;
        }
        let s = t.trim_start();
        if s.starts_with("In file included from ") || (t.starts_with(' ') && s.starts_with("from "))
        {
            return Read::Context;
        }
        // gcc's excerpt: `    6 |     char *end = …` and `      |           ^~~~~~`.
        if let Some((gutter, _)) = t.split_once(" |")
            && gutter.trim().bytes().all(|b| b.is_ascii_digit())
        {
            return Read::Context;
        }
        // clang's excerpt: the source line, then the caret line.
        if source_next {
            return Read::Context;
        }
        if !s.is_empty() && s.bytes().all(|b| matches!(b, b'^' | b'~' | b' ')) {
            self.caret_last = true;
            return Read::Context;
        }
        if caret_last && t.starts_with(' ') {
            return Read::Context;
        }
        if let Some(rest) = t.strip_suffix(" generated.")
            && (rest.contains(" warning") || rest.contains(" error"))
        {
            self.clang = true;
            return Read::Count(Count {
                errors: Some(number_of(rest, "error").unwrap_or(0)),
                others: Some(number_of(rest, "warning").unwrap_or(0)),
                total: None,
            });
        }
        if let Some(compiler) = COMPILERS.iter().find(|c| t.starts_with(**c)) {
            self.clang |= compiler.starts_with("clang");
            return Read::Own;
        }
        if t.starts_with("cc1: ") || t.starts_with("cc1plus: ") {
            return Read::Context;
        }
        // make's own lines around the build (`make: *** [Makefile:8: a.o] Error 1`, directory
        // changes): the same lines a wrapper reads as its own.
        if crate::wrappers::make(t) {
            return Read::Context;
        }
        Read::No
    }
}
