//! Small text helpers shared by the parsers.
//!
//! One rule: helpers never allocate unless they return an owned value the caller keeps.

/// Cuts `s` to at most `max` bytes on a character boundary, marking the cut with `…`.
pub(crate) fn clip(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Parses `file:line:col` or `file:line` at the start of `s` (up to the first space); returns
/// the file, line, column. Windows drive letters are kept in the file.
pub(crate) fn location(s: &str) -> Option<(&str, u32, Option<u32>)> {
    let s = s.split_whitespace().next()?;
    let s = s.trim_end_matches(':');
    let mut parts = s.rsplitn(3, ':');
    let last = parts.next()?;
    let mid = parts.next()?;
    match (mid.parse::<u32>(), last.parse::<u32>(), parts.next()) {
        (Ok(line), Ok(col), Some(file)) if !file.is_empty() => Some((file, line, Some(col))),
        (Err(_), Ok(line), None) if !mid.is_empty() => Some((mid, line, None)),
        (Err(_), Ok(line), Some(file)) => {
            // `C:\x.rs:3` style: file contains a colon.
            let file_len = s.len() - last.len() - 1;
            let _ = file;
            Some((&s[..file_len], line, None))
        }
        _ => None,
    }
}

/// Whether `file` (as a stack frame or traceback prints it) lies in a runtime, a standard
/// library or an installed package rather than in the project under test. A failure's location
/// is the innermost frame for which this is false.
pub(crate) fn external(file: &str) -> bool {
    let f = file.strip_prefix("file://").unwrap_or(file);
    const PREFIXES: &[&str] = &[
        "node:",
        // deno's own runtime code, and modules it loaded from a registry or the web.
        "ext:",
        "http://",
        "https://",
        "internal/",
        "native",
        "<",
        "/rustc/",
        "library/core/",
        "library/std/",
        "library/alloc/",
        "/usr/lib/",
        "/usr/lib64/",
        "/usr/local/lib/",
        "/usr/local/go/",
        "/usr/share/",
        "/opt/homebrew/",
    ];
    const PARTS: &[&str] = &[
        "node_modules/",
        "site-packages/",
        "dist-packages/",
        "/lib/python2",
        "/lib/python3",
        "/lib/pypy",
        "/.rustup/toolchains/",
        "/.cargo/registry/",
        "/.cargo/git/",
        "/pkg/mod/",
        "/go/src/runtime/",
        "/go/src/testing/",
        "_testmain.go",
        "/.bun/",
        "bun:",
    ];
    PREFIXES.iter().any(|p| f.starts_with(p)) || PARTS.iter().any(|p| f.contains(p))
}

/// Appends `extra` to a message as `; extra`, within `max` bytes (an item that does not fit
/// is left out whole, never cut).
pub(crate) fn append(message: &mut String, extra: &str, max: usize) {
    let extra = extra.trim();
    if extra.is_empty() || message.len() + 2 + extra.len() > max {
        return;
    }
    if !message.is_empty() {
        message.push_str("; ");
    }
    message.push_str(extra);
}

/// An error line as JavaScript runtimes print it: `error: msg`, `TypeError: msg`,
/// `AssertionError [ERR_ASSERTION]: msg`, `YAMLException: msg`. Returns the whole line's text
/// to keep as the message (without a bare `error: ` prefix).
pub(crate) fn error_line(t: &str) -> Option<&str> {
    if let Some(msg) = t.strip_prefix("error: ") {
        return Some(msg);
    }
    let (head, _) = t.split_once(": ")?;
    let name = head.split(" [").next().unwrap_or(head);
    let ident = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '.');
    (ident && (name.ends_with("Error") || name.ends_with("Exception"))).then_some(t)
}

/// Errors that stopped a test file from loading, as a runtime prints them before its test
/// runner reports the file: a line that is only `file:///p/x.test.mjs:5` (the place), then, a
/// few lines on, the error (`SyntaxError: missing ) after argument list`).
#[derive(Debug, Default)]
pub(crate) struct LoadErrors {
    /// The place just seen, with how many more lines may pass before its error.
    pending: Option<(String, u32, u8)>,
    /// (file, line, error) of each load error, in output order.
    found: Vec<(String, u32, String)>,
}

impl LoadErrors {
    /// Whether a place is waiting for its error line (the next lines matter).
    pub(crate) fn waiting(&self) -> bool {
        self.pending.is_some()
    }

    /// Reads one trimmed line.
    pub(crate) fn line(&mut self, t: &str, max: usize) {
        let bare = t.strip_prefix("file://").unwrap_or(t);
        if !t.contains(' ')
            && bare.starts_with('/')
            && let Some((file, l, _)) = location(bare)
            && !external(file)
        {
            self.pending = Some((clip(file, max), l, 8));
            return;
        }
        let Some((file, l, ttl)) = self.pending.take() else {
            return;
        };
        if let Some(msg) = error_line(t) {
            if self.found.len() < 64 {
                self.found.push((file, l, clip(msg, max)));
            }
        } else if ttl > 0 {
            self.pending = Some((file, l, ttl - 1));
        }
    }

    /// Gives each failure that stands for a whole test file which failed to load (named by the
    /// file's path, with no message but the runner's "test failed") the error's own place and
    /// text.
    pub(crate) fn apply(&self, failures: &mut [crate::model::Failure]) {
        for f in failures {
            let generic = f
                .message
                .as_deref()
                .is_none_or(|m| m.trim_matches(['\'', '"']) == "test failed");
            if !generic {
                continue;
            }
            if let Some((file, l, msg)) = self
                .found
                .iter()
                .find(|(file, _, _)| *file == f.name || file.ends_with(&format!("/{}", f.name)))
            {
                f.file = Some(file.clone());
                f.line = Some(*l);
                f.message = Some(msg.clone());
            } else if f.name.contains('/') && f.message.is_some() {
                // A whole file failed and its error was not found: "test failed" at the file's
                // first line explains nothing, so the failure stays without a diagnostic.
                f.file = None;
                f.line = None;
                f.message = None;
            }
        }
    }
}

/// The first unsigned integer in `s`.
pub(crate) fn first_number(s: &str) -> Option<u64> {
    let start = s.find(|c: char| c.is_ascii_digit())?;
    let digits: &str = &s[start..];
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// Reads `N word` pairs from a list like `1 passed, 2 failed, 3 skipped in 0.1s`, calling
/// `f(word, n)` for each.
pub(crate) fn counts(s: &str, mut f: impl FnMut(&str, u64)) {
    let mut words = s
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '(' || c == ')')
        .filter(|w| !w.is_empty())
        .peekable();
    while let Some(w) = words.next() {
        if let Ok(n) = w.parse::<u64>()
            && let Some(next) = words.peek()
        {
            f(next.trim_end_matches('.'), n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations() {
        assert_eq!(
            location("src/lib.rs:17:9:"),
            Some(("src/lib.rs", 17, Some(9)))
        );
        assert_eq!(
            location("test_x.py:12: AssertionError"),
            Some(("test_x.py", 12, None))
        );
        assert_eq!(location("nothing here"), None);
        assert_eq!(location("a:b:c"), None);
    }

    #[test]
    fn runtime_and_library_frames_are_external() {
        for f in [
            "node:internal/timers",
            "/tmp/p/node_modules/tape/lib/test.js",
            "../node_modules/esbuild/lib/main.js",
            "/root/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py",
            "/usr/lib/python3/dist-packages/x.py",
            "<frozen importlib._bootstrap>",
            "/rustc/5980761/library/core/src/num/mod.rs",
            "/usr/lib/go-1.19/src/testing/testing.go",
        ] {
            assert!(external(f), "{f}");
        }
        for f in [
            "src/lib.rs",
            "test_x.py",
            "/tmp/p/js/bun/math.test.ts",
            "./src/lib.rs",
        ] {
            assert!(!external(f), "{f}");
        }
    }

    #[test]
    fn count_pairs() {
        let mut seen = Vec::new();
        counts("1 failed, 2 passed, 1 skipped in 0.12s", |w, n| {
            seen.push((w.to_owned(), n))
        });
        assert_eq!(
            seen,
            vec![
                ("failed".into(), 1),
                ("passed".into(), 2),
                ("skipped".into(), 1)
            ]
        );
    }

    #[test]
    fn clip_respects_char_boundaries() {
        assert_eq!(clip("héllo", 2), "h…");
        assert_eq!(clip("  short ", 10), "short");
    }
}
