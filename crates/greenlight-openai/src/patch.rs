//! The `apply_patch` tool's format: a standard unified diff (what `diff -u` and `git diff` print),
//! read leniently where models are sloppy and applied exactly or not at all.
//!
//! Accepted: any preamble (`diff --git`, `index`, mode lines) before a `--- old` / `+++ new`
//! pair; paths with or without `a/` `b/` prefixes; `/dev/null` to create or delete a file; one
//! or more `@@ -l[,n] +l[,n] @@` hunks whose body lines start with ` `, `-`, `+` or `\` (an empty
//! line counts as an empty context line). The line counts in a hunk header are not trusted —
//! models miscount them — so a hunk's body runs until the next `@@`, the next `--- `/`+++ ` pair
//! or the end. A hunk applies where its context and removed lines appear in the file, nearest
//! to the line its header names, at or after the previous hunk; failing an exact match, trailing
//! whitespace is ignored. Anything else is refused with the hunk, the line and what the file
//! holds there. This module is pure text: the tool host reads and writes the files.

use std::fmt::Write as _;

/// One line of a hunk's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    /// ` text`: must be in the file, stays.
    Context(String),
    /// `-text`: must be in the file, goes.
    Remove(String),
    /// `+text`: comes in.
    Add(String),
}

/// One `@@` hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// The header as written (for messages).
    pub header: String,
    /// The 1-based old line it claims to start at (0 for "before the first line").
    pub old_start: usize,
    /// Its body.
    pub lines: Vec<HunkLine>,
    /// A `\ No newline at end of file` marker follows the hunk's last added or context line.
    pub no_newline_at_end: bool,
}

/// The change to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    /// The file before (`None`: created).
    pub old_path: Option<String>,
    /// The file after (`None`: deleted).
    pub new_path: Option<String>,
    /// The hunks, in order.
    pub hunks: Vec<Hunk>,
}

impl FilePatch {
    /// The path this patch is about, for messages.
    pub fn shown_path(&self) -> &str {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or("?")
    }
}

/// Why a patch was refused. Each message names the place and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// Nothing that looks like a unified diff.
    #[error(
        "the patch has no `--- old` / `+++ new` file header; send a unified diff (as `diff -u` or `git diff` prints it)"
    )]
    NoFiles,
    /// A `---` line not followed by `+++`.
    #[error("patch line {line}: `--- {old}` must be followed by a `+++ new` line")]
    MissingNewHeader {
        /// 1-based line of the patch.
        line: usize,
        /// The old path as written.
        old: String,
    },
    /// A file header with no hunk.
    #[error("patch line {line}: the change to `{path}` has no `@@` hunk")]
    NoHunks {
        /// 1-based line of the patch.
        line: usize,
        /// The file.
        path: String,
    },
    /// A `@@` line that does not parse.
    #[error(
        "patch line {line}: `{header}` is not a hunk header; write `@@ -OLD_LINE,COUNT +NEW_LINE,COUNT @@`"
    )]
    BadHunkHeader {
        /// 1-based line of the patch.
        line: usize,
        /// The line.
        header: String,
    },
    /// A body line with no ` `, `-`, `+` or `\` in front.
    #[error(
        "patch line {line}: `{text}` is not a hunk line; every line of a hunk starts with ` ` (context), `-` (removed) or `+` (added)"
    )]
    BadHunkLine {
        /// 1-based line of the patch.
        line: usize,
        /// The line, cut to 120 characters.
        text: String,
    },
    /// Both sides `/dev/null`.
    #[error("patch line {line}: both sides are /dev/null; name the file")]
    NoPath {
        /// 1-based line of the patch.
        line: usize,
    },
    /// A hunk whose lines are not in the file.
    #[error(
        "hunk {hunk} of `{path}` ({header}) does not apply: {why}; nothing was changed (read the file again and send a patch against its current text)"
    )]
    DoesNotApply {
        /// The file.
        path: String,
        /// 1-based hunk number within the file.
        hunk: usize,
        /// The hunk header.
        header: String,
        /// Where it went wrong.
        why: String,
    },
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let mut s: String = text.chars().take(max).collect();
        s.push('…');
        s
    }
}

fn header_path(raw: &str, prefix: &str) -> Option<String> {
    // `--- a/x.rs\t2024-01-01 …`: the path ends at a tab (diff's timestamp).
    let path = raw.split('\t').next().unwrap_or(raw).trim();
    if path == "/dev/null" {
        return None;
    }
    let path = path.strip_prefix(prefix).unwrap_or(path);
    Some(path.to_owned())
}

fn parse_start(spec: &str) -> Option<usize> {
    spec.split(',').next()?.parse().ok()
}

fn parse_hunk_header(line: &str) -> Option<usize> {
    let rest = line.strip_prefix("@@")?;
    let end = rest.find("@@")?;
    let mut parts = rest[..end].split_whitespace();
    let old = parts.next()?.strip_prefix('-')?;
    let new = parts.next()?.strip_prefix('+')?;
    parse_start(new)?;
    parse_start(old)
}

/// Reads a unified diff into its file changes.
pub fn parse(patch: &str) -> Result<Vec<FilePatch>, PatchError> {
    let lines: Vec<&str> = patch.lines().collect();
    let mut files: Vec<FilePatch> = Vec::new();
    let mut i = 0;
    let is_file_header = |i: usize| {
        lines[i].starts_with("--- ") && lines.get(i + 1).is_some_and(|n| n.starts_with("+++ "))
    };
    while i < lines.len() {
        if !lines[i].starts_with("--- ") {
            i += 1;
            continue;
        }
        let header_line = i + 1;
        let old_raw = &lines[i][4..];
        let Some(new_line) = lines.get(i + 1).filter(|n| n.starts_with("+++ ")) else {
            return Err(PatchError::MissingNewHeader {
                line: header_line,
                old: cut(old_raw, 120),
            });
        };
        let old_path = header_path(old_raw, "a/");
        let new_path = header_path(&new_line[4..], "b/");
        if old_path.is_none() && new_path.is_none() {
            return Err(PatchError::NoPath { line: header_line });
        }
        i += 2;
        let mut hunks = Vec::new();
        while i < lines.len() && lines[i].starts_with("@@") {
            let header = lines[i];
            let old_start = parse_hunk_header(header).ok_or_else(|| PatchError::BadHunkHeader {
                line: i + 1,
                header: cut(header, 120),
            })?;
            i += 1;
            let mut body = Vec::new();
            let mut no_newline_at_end = false;
            let mut trailing_empty = 0usize;
            while i < lines.len() && !lines[i].starts_with("@@") && !is_file_header(i) {
                let line = lines[i];
                if line.starts_with("diff --git ") {
                    break;
                }
                if line.is_empty() {
                    trailing_empty += 1;
                } else {
                    trailing_empty = 0;
                }
                match line.chars().next() {
                    None => body.push(HunkLine::Context(String::new())),
                    Some(' ') => body.push(HunkLine::Context(line[1..].to_owned())),
                    Some('-') => body.push(HunkLine::Remove(line[1..].to_owned())),
                    Some('+') => body.push(HunkLine::Add(line[1..].to_owned())),
                    Some('\\') => {
                        if matches!(body.last(), Some(HunkLine::Add(_) | HunkLine::Context(_))) {
                            no_newline_at_end = true;
                        }
                    }
                    Some(_) => {
                        return Err(PatchError::BadHunkLine {
                            line: i + 1,
                            text: cut(line, 120),
                        });
                    }
                }
                i += 1;
            }
            // Empty lines at the end of a hunk are the patch text's own end (or a blank line a
            // model left before the next file); dropping them only drops context, which is safe.
            while trailing_empty > 0 {
                body.pop();
                trailing_empty -= 1;
            }
            hunks.push(Hunk {
                header: header.to_owned(),
                old_start,
                lines: body,
                no_newline_at_end,
            });
        }
        let file = FilePatch {
            old_path,
            new_path,
            hunks,
        };
        if file.hunks.is_empty() {
            return Err(PatchError::NoHunks {
                line: header_line,
                path: file.shown_path().to_owned(),
            });
        }
        files.push(file);
    }
    if files.is_empty() {
        return Err(PatchError::NoFiles);
    }
    Ok(files)
}

/// The text `hunks` make of `original` (the file's current text; empty for a new file).
pub fn apply(path: &str, original: &str, hunks: &[Hunk]) -> Result<String, PatchError> {
    let ends_with_newline = original.is_empty() || original.ends_with('\n');
    let mut lines: Vec<String> = original.lines().map(str::to_owned).collect();
    let mut cursor = 0usize;
    // How far the file's lines have moved from the old numbering by earlier hunks.
    let mut shift: isize = 0;
    let mut no_newline = !ends_with_newline;
    for (n, hunk) in hunks.iter().enumerate() {
        let old: Vec<&str> = hunk
            .lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(t) | HunkLine::Remove(t) => Some(t.as_str()),
                HunkLine::Add(_) => None,
            })
            .collect();
        let new: Vec<String> = hunk
            .lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(t) | HunkLine::Add(t) => Some(t.clone()),
                HunkLine::Remove(_) => None,
            })
            .collect();
        let wanted = (hunk.old_start.saturating_sub(1) as isize + shift).max(0) as usize;
        let fail = |why: String| PatchError::DoesNotApply {
            path: path.to_owned(),
            hunk: n + 1,
            header: hunk.header.clone(),
            why,
        };
        let at = if old.is_empty() {
            // A pure insertion goes where the header says (`-0,0` is before the first line).
            let at = if hunk.old_start == 0 { 0 } else { wanted + 1 };
            if at > lines.len() || at < cursor {
                return Err(fail(format!(
                    "it inserts after line {}, but the file has {} lines",
                    hunk.old_start,
                    lines.len()
                )));
            }
            at
        } else {
            find(&lines, &old, cursor, wanted)
                .ok_or_else(|| fail(mismatch(&lines, &old, wanted)))?
        };
        let end = at + old.len();
        let added = new.len();
        lines.splice(at..end, new);
        shift += added as isize - old.len() as isize;
        cursor = at + added;
        // Models rarely write the marker: the file keeps its final newline (or its lack of one)
        // unless the hunk that ends the file says otherwise.
        if cursor >= lines.len() && hunk.no_newline_at_end {
            no_newline = true;
        }
    }
    let mut text = lines.join("\n");
    if !lines.is_empty() && !no_newline {
        text.push('\n');
    }
    Ok(text)
}

/// Where `old` appears in `lines` at or after `from`, nearest to `wanted`: exactly, else with
/// trailing whitespace ignored.
fn find(lines: &[String], old: &[&str], from: usize, wanted: usize) -> Option<usize> {
    let exact = |a: &str, b: &str| a == b;
    let loose = |a: &str, b: &str| a.trim_end() == b.trim_end();
    for same in [&exact as &dyn Fn(&str, &str) -> bool, &loose] {
        let best = (from..=lines.len().saturating_sub(old.len()))
            .filter(|&at| {
                at + old.len() <= lines.len()
                    && old.iter().zip(&lines[at..]).all(|(o, l)| same(l, o))
            })
            .min_by_key(|&at| at.abs_diff(wanted));
        if best.is_some() {
            return best;
        }
    }
    None
}

/// Why `old` does not match at `wanted`: the first line that differs there, for the model.
fn mismatch(lines: &[String], old: &[&str], wanted: usize) -> String {
    let mut why = String::new();
    let at = wanted.min(lines.len());
    for (k, expected) in old.iter().enumerate() {
        match lines.get(at + k) {
            Some(found) if found.trim_end() == expected.trim_end() => {}
            Some(found) => {
                let _ = write!(
                    why,
                    "line {} of the file is `{}`, the hunk expects `{}` there (and its lines appear nowhere else in order)",
                    at + k + 1,
                    cut(found, 120),
                    cut(expected, 120)
                );
                return why;
            }
            None => {
                let _ = write!(
                    why,
                    "the file ends at line {}, the hunk expects `{}` as line {} (and its lines appear nowhere else in order)",
                    lines.len(),
                    cut(expected, 120),
                    at + k + 1
                );
                return why;
            }
        }
    }
    "its lines match at the named line but not after the previous hunk; send the hunks in file order".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALC: &str =
        "#!/bin/sh\n\nadd() {\n    echo $(( $1 - $2 ))\n}\n\nmul() {\n    echo $(( $1 * $2 ))\n}\n";

    #[test]
    fn a_git_diff_applies_and_keeps_the_rest_of_the_file() {
        let patch = "diff --git a/calc.sh b/calc.sh\nindex 1..2 100644\n--- a/calc.sh\n+++ b/calc.sh\n@@ -3,3 +3,3 @@\n add() {\n-    echo $(( $1 - $2 ))\n+    echo $(( $1 + $2 ))\n }\n";
        let files = parse(patch).expect("parses");
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].old_path.as_deref(), Some("calc.sh"));
        let out = apply("calc.sh", CALC, &files[0].hunks).expect("applies");
        assert_eq!(out, CALC.replace("$1 - $2", "$1 + $2"));
    }

    #[test]
    fn wrong_line_numbers_and_counts_still_apply_where_the_context_is() {
        let patch = "--- calc.sh\n+++ calc.sh\n@@ -40,9 +40,1 @@\n mul() {\n-    echo $(( $1 * $2 ))\n+    echo $(( $2 * $1 ))\n";
        let files = parse(patch).expect("parses");
        let out = apply("calc.sh", CALC, &files[0].hunks).expect("applies");
        assert!(out.contains("$2 * $1"), "{out}");
        assert!(out.contains("$1 - $2"), "{out}");
    }

    #[test]
    fn a_hunk_that_does_not_match_names_the_line_and_changes_nothing() {
        let patch = "--- a/calc.sh\n+++ b/calc.sh\n@@ -3,3 +3,3 @@\n add() {\n-    echo $(( $1 * $2 ))\n+    echo $(( $1 + $2 ))\n }\n";
        let files = parse(patch).expect("parses");
        let err = apply("calc.sh", CALC, &files[0].hunks).expect_err("refused");
        let text = err.to_string();
        assert!(text.contains("hunk 1 of `calc.sh`"), "{text}");
        assert!(
            text.contains("line 4 of the file is `    echo $(( $1 - $2 ))`"),
            "{text}"
        );
    }

    #[test]
    fn new_files_deleted_files_and_several_files_in_one_patch() {
        let patch = "--- /dev/null\n+++ b/notes.md\n@@ -0,0 +1,2 @@\n+hello\n+world\n--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n";
        let files = parse(patch).expect("parses");
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].old_path, None);
        assert_eq!(
            apply("notes.md", "", &files[0].hunks).expect("new"),
            "hello\nworld\n"
        );
        assert_eq!(files[1].new_path, None);
        assert_eq!(
            apply("old.txt", "bye\n", &files[1].hunks).expect("gone"),
            ""
        );
    }

    #[test]
    fn garbage_is_refused_with_the_line_at_fault() {
        assert_eq!(parse("just some text\n"), Err(PatchError::NoFiles));
        let err = parse("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n*b\n").expect_err("bad line");
        assert!(
            matches!(err, PatchError::BadHunkLine { line: 5, .. }),
            "{err}"
        );
        let err = parse("--- a/x\n+++ b/x\n@@ nonsense\n").expect_err("bad header");
        assert!(
            matches!(err, PatchError::BadHunkHeader { line: 3, .. }),
            "{err}"
        );
        let err = parse("--- a/x\nnot plus\n").expect_err("no +++");
        assert!(
            matches!(err, PatchError::MissingNewHeader { line: 1, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_missing_final_newline_is_kept_and_a_marker_is_honoured() {
        let hunks = parse("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n").expect("p")[0]
            .hunks
            .clone();
        assert_eq!(apply("x", "a", &hunks).expect("applies"), "b");
        let hunks = parse("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n\\ No newline at end of file\n")
            .expect("p")[0]
            .hunks
            .clone();
        assert_eq!(apply("x", "a\n", &hunks).expect("applies"), "b");
    }

    #[test]
    fn trailing_whitespace_differences_are_forgiven_only_when_nothing_matches_exactly() {
        let hunks = parse("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n").expect("p")[0]
            .hunks
            .clone();
        assert_eq!(apply("x", "a  \nb\n", &hunks).expect("applies"), "a\nc\n");
    }
}
