//! Changing one key of one gate in a verify.yaml as text, every other byte kept.
//!
//! The rule: work over lines, never re-serialise. Both v1 (the line grammar) and v2 (YAML
//! block style) write `gates:` as a block list of block mappings, so one reader of lines finds
//! a gate: the `- ` item whose `id:` is the gate, the column its keys sit at, and where it
//! ends. A key already written has its value replaced in place (a trailing `# comment` kept);
//! a missing one gets a line of its own after the item's `command:` (else its `id:`), at the
//! item's key column, with the line ending of the line above. A layout this reader cannot be
//! sure of (flow style, tabs in indentation, an item it cannot read) is refused, never guessed.

use camino::{Utf8Path, Utf8PathBuf};

/// Why a config could not be edited. The message reads after nothing: it names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// No top-level `gates:` block.
    #[error("{path}: no top-level `gates:` block to edit")]
    NoGates {
        /// The config file.
        path: Utf8PathBuf,
    },
    /// The gates (or one gate) are written in flow style.
    #[error(
        "{path}:{line}: `{found}` is flow style; greenlight edits only block style (one `- id: …` item per gate, one key a line): rewrite it that way or edit the file by hand"
    )]
    FlowStyle {
        /// The config file.
        path: Utf8PathBuf,
        /// 1-based line.
        line: usize,
        /// The line's text.
        found: String,
    },
    /// A tab in a line's indentation: its column cannot be known.
    #[error(
        "{path}:{line}: a tab in the indentation; indent with spaces so greenlight can tell which gate the line belongs to"
    )]
    Tab {
        /// The config file.
        path: Utf8PathBuf,
        /// 1-based line.
        line: usize,
    },
    /// No item of `gates:` has this id.
    #[error("{path}: no gate with `id: {gate}` under `gates:`")]
    GateNotFound {
        /// The config file.
        path: Utf8PathBuf,
        /// The id looked for.
        gate: String,
    },
}

/// One line of the text with its ending kept apart.
struct Line<'a> {
    body: &'a str,
    ending: &'a str,
}

fn split_lines(text: &str) -> Vec<Line<'_>> {
    let mut lines = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (line, tail) = match rest.find('\n') {
            Some(i) => (&rest[..=i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let ending_len = if line.ends_with("\r\n") {
            2
        } else if line.ends_with('\n') {
            1
        } else {
            0
        };
        lines.push(Line {
            body: &line[..line.len() - ending_len],
            ending: &line[line.len() - ending_len..],
        });
        rest = tail;
    }
    lines
}

/// The column of a line's first non-space character; `None` for a blank or comment-only line
/// (which belongs to no item).
fn indent(body: &str) -> Option<usize> {
    let content = body.trim_start_matches(' ');
    (!content.is_empty() && !content.starts_with('#')).then(|| body.len() - content.len())
}

/// `key: value` → (key, value without a trailing ` # comment`, the value's byte range in the
/// content). `None` when the content is not a plain key and colon.
fn key_value(content: &str) -> Option<(&str, &str, std::ops::Range<usize>)> {
    let colon = content.find(':')?;
    let key = &content[..colon];
    if key.is_empty() || key.contains([' ', '"', '\'', '{', '[']) {
        return None;
    }
    let after = &content[colon + 1..];
    if !after.is_empty() && !after.starts_with(' ') {
        return None;
    }
    let start = colon + 1 + (after.len() - after.trim_start_matches(' ').len());
    let rest = &content[start..];
    // A comment starts at ` #` outside quotes; a quoted value ends at its closing quote.
    let end = match rest.chars().next() {
        Some(q @ ('"' | '\'')) => rest[1..].find(q).map_or(rest.len(), |i| i + 2),
        _ => rest.find(" #").unwrap_or(rest.len()),
    };
    let value = rest[..end].trim_end_matches(' ');
    Some((key, value, start..start + value.len()))
}

fn unquote(value: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(q).and_then(|v| v.strip_suffix(q)) {
            return inner;
        }
    }
    value
}

/// A key of the item found: its line and where its content starts.
struct Key {
    line: usize,
    column: usize,
}

/// Sets `key` of the gate whose id is `gate` to `value` (written as given), and returns the new
/// text. `path` only names the file in errors.
pub fn set_gate_key(
    path: &Utf8Path,
    text: &str,
    gate: &str,
    key: &str,
    value: &str,
) -> Result<String, EditError> {
    let lines = split_lines(text);
    let at = |line: usize| line + 1;
    for (i, line) in lines.iter().enumerate() {
        let content = line.body.trim_start_matches([' ', '\t']);
        let lead = &line.body[..line.body.len() - content.len()];
        if lead.contains('\t') && indent(content).is_some() {
            return Err(EditError::Tab {
                path: path.to_owned(),
                line: at(i),
            });
        }
    }
    // The top-level `gates:` line.
    let mut header = None;
    for (i, line) in lines.iter().enumerate() {
        if indent(line.body) != Some(0) {
            continue;
        }
        if let Some(("gates", value, _)) = key_value(line.body) {
            if !value.is_empty() {
                return Err(EditError::FlowStyle {
                    path: path.to_owned(),
                    line: at(i),
                    found: line.body.to_owned(),
                });
            }
            header = Some(i);
            break;
        }
    }
    let Some(header) = header else {
        return Err(EditError::NoGates {
            path: path.to_owned(),
        });
    };
    // The list: from the header to the first top-level line that is not an item (a YAML list
    // may sit at column 0 under its key). Its dash column is the first item's.
    let mut dash_column = None;
    let mut items: Vec<(usize, usize)> = Vec::new(); // (first line, end line exclusive)
    let mut end = lines.len();
    for (i, line) in lines.iter().enumerate().skip(header + 1) {
        let Some(column) = indent(line.body) else {
            continue;
        };
        let content = &line.body[column..];
        let is_item = content == "-" || content.starts_with("- ");
        if column == 0 && !is_item {
            end = i;
            break;
        }
        if is_item && dash_column.is_none_or(|d| d == column) {
            dash_column = Some(column);
            if let Some(last) = items.last_mut() {
                last.1 = i;
            }
            items.push((i, lines.len()));
        } else if dash_column.is_some_and(|d| column <= d) || dash_column.is_none() {
            // A line at the list's level that is not an item ends the list.
            end = i;
            break;
        }
    }
    if let Some(last) = items.last_mut() {
        last.1 = last.1.min(end);
    }
    for &(first, stop) in &items {
        let keys = item_keys(path, &lines, first, stop)?;
        let Some(id) = keys.iter().find_map(|k| {
            key_value(&lines[k.line].body[k.column..])
                .filter(|(name, _, _)| *name == "id")
                .map(|(_, v, _)| unquote(v).to_owned())
        }) else {
            continue;
        };
        if id != gate {
            continue;
        }
        return Ok(edit_item(&lines, &keys, stop, key, value));
    }
    Err(EditError::GateNotFound {
        path: path.to_owned(),
        gate: gate.to_owned(),
    })
}

/// The keys of the item on lines `first..stop`, each at the item's key column.
fn item_keys(
    path: &Utf8Path,
    lines: &[Line<'_>],
    first: usize,
    stop: usize,
) -> Result<Vec<Key>, EditError> {
    let flow = |line: usize| EditError::FlowStyle {
        path: path.to_owned(),
        line: line + 1,
        found: lines[line].body.to_owned(),
    };
    let dash = indent(lines[first].body).unwrap_or(0);
    let after_dash = &lines[first].body[dash + 1..];
    let on_dash_line = after_dash.trim_start_matches(' ');
    let mut keys = Vec::new();
    let column = if on_dash_line.is_empty() {
        // `-` alone: the keys start on the next line that has content.
        match (first + 1..stop).find_map(|i| indent(lines[i].body)) {
            Some(column) => column,
            None => return Ok(keys),
        }
    } else {
        let column = lines[first].body.len() - on_dash_line.len();
        if on_dash_line.starts_with(['{', '[']) {
            return Err(flow(first));
        }
        keys.push(Key {
            line: first,
            column,
        });
        column
    };
    for (i, line) in lines.iter().enumerate().take(stop).skip(first + 1) {
        if indent(line.body) == Some(column) {
            if line.body[column..].starts_with(['{', '[']) {
                return Err(flow(i));
            }
            keys.push(Key { line: i, column });
        }
    }
    Ok(keys)
}

/// The text with `key` set in the item whose keys are `keys` (the item ends before `stop`).
fn edit_item(lines: &[Line<'_>], keys: &[Key], stop: usize, key: &str, value: &str) -> String {
    let named = |name: &str| {
        keys.iter().position(|k| {
            key_value(&lines[k.line].body[k.column..]).is_some_and(|(n, _, _)| n == name)
        })
    };
    let mut out = String::new();
    if let Some(found) = named(key) {
        let k = &keys[found];
        for (i, line) in lines.iter().enumerate() {
            if i == k.line
                && let Some((_, _, range)) = key_value(&line.body[k.column..])
            {
                let start = k.column + range.start;
                let end = k.column + range.end;
                let mut body = String::new();
                body.push_str(&line.body[..start]);
                if range.is_empty() {
                    // `key:` with nothing after it: make it `key: value`.
                    if !body.ends_with(' ') {
                        body.push(' ');
                    }
                }
                body.push_str(value);
                body.push_str(&line.body[end..]);
                out.push_str(&body);
            } else {
                out.push_str(line.body);
            }
            out.push_str(line.ending);
        }
        return out;
    }
    // After the command's entry (its own line and any deeper lines under it), else the id's.
    let anchor = named("command").or_else(|| named("id")).unwrap_or(0);
    let Some(k) = keys.get(anchor) else {
        return lines.iter().map(|l| [l.body, l.ending].concat()).collect();
    };
    let next_key = keys.get(anchor + 1).map_or(stop, |n| n.line);
    let last = (k.line..next_key)
        .rev()
        .find(|&i| i == k.line || indent(lines[i].body).is_some_and(|c| c > k.column))
        .unwrap_or(k.line);
    let dominant = lines
        .iter()
        .map(|l| l.ending)
        .find(|e| !e.is_empty())
        .unwrap_or("\n");
    let ending = match lines[last].ending {
        "" => dominant,
        e => e,
    };
    for (i, line) in lines.iter().enumerate() {
        out.push_str(line.body);
        if i == last {
            out.push_str(ending);
            out.push_str(&" ".repeat(k.column));
            out.push_str(key);
            out.push_str(": ");
            out.push_str(value);
            // The new line keeps the file's own ending state: an unended last line stays so.
            out.push_str(line.ending);
        } else {
            out.push_str(line.ending);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str, gate: &str, value: &str) -> Result<String, EditError> {
        set_gate_key(Utf8Path::new("v.yaml"), text, gate, "timeoutSec", value)
    }

    #[test]
    fn an_existing_key_has_only_its_value_replaced() {
        let text = "version: 1\ngates:\n  - id: lint\n    command: make lint\n    timeoutSec: 300\n  - id: unit\n    command: make test\n    timeoutSec: 600\n";
        let out = set(text, "unit", "45").expect("edit");
        assert_eq!(out, text.replace("timeoutSec: 600", "timeoutSec: 45"));
    }

    #[test]
    fn a_missing_key_goes_after_the_command_at_the_items_key_column() {
        let text = "version: 1\n# the gates\ngates:\n  - id: lint\n    command: make lint\n    mutex: cargo\n\n  # slow one\n  - id: unit\n    command: make test\n";
        assert_eq!(
            set(text, "lint", "10").expect("edit"),
            "version: 1\n# the gates\ngates:\n  - id: lint\n    command: make lint\n    timeoutSec: 10\n    mutex: cargo\n\n  # slow one\n  - id: unit\n    command: make test\n"
        );
        assert_eq!(
            set(text, "unit", "90").expect("edit"),
            format!("{text}    timeoutSec: 90\n")
        );
    }

    #[test]
    fn crlf_line_ends_are_kept_and_an_unended_last_line_stays_unended() {
        let text = "version: 1\r\ngates:\r\n  - id: unit\r\n    command: make test";
        assert_eq!(
            set(text, "unit", "20").expect("edit"),
            "version: 1\r\ngates:\r\n  - id: unit\r\n    command: make test\r\n    timeoutSec: 20"
        );
        let text =
            "version: 1\r\ngates:\r\n  - id: unit\r\n    timeoutSec: 5\r\n    command: x\r\n";
        assert_eq!(
            set(text, "unit", "20").expect("edit"),
            text.replace("timeoutSec: 5", "timeoutSec: 20")
        );
    }

    #[test]
    fn a_dash_alone_on_its_line_and_an_id_after_the_dash_are_both_items() {
        let text = "version: 2\ngates:\n  -\n    id: lint\n    command: make lint\n  - id: unit\n    command: |\n      make test\n      make more\n    retryOnFail: true\n";
        assert_eq!(
            set(text, "lint", "15").expect("edit"),
            text.replace("make lint\n", "make lint\n    timeoutSec: 15\n")
        );
        // After the command's block content, before the next key.
        assert_eq!(
            set(text, "unit", "60").expect("edit"),
            text.replace("make more\n", "make more\n    timeoutSec: 60\n")
        );
    }

    #[test]
    fn a_list_at_column_zero_and_wide_indentation_are_read_by_their_columns() {
        let text = "version: 2\ngates:\n-   id: a\n    command: x\n-   id: b\n    command: y\noptions:\n  baseRef: main\n";
        assert_eq!(
            set(text, "b", "5").expect("edit"),
            text.replace("command: y\n", "command: y\n    timeoutSec: 5\n")
        );
    }

    #[test]
    fn quoted_ids_and_values_and_trailing_comments() {
        let text = "version: 1\ngates:\n  - id: \"lint\"\n    command: 'make lint'\n    timeoutSec: \"300\" # generous\n  - id: 'unit'\n    command: \"a: b # not a comment\"\n";
        assert_eq!(
            set(text, "lint", "30").expect("edit"),
            text.replace("\"300\" # generous", "30 # generous")
        );
        assert_eq!(
            set(text, "unit", "30").expect("edit"),
            format!("{text}    timeoutSec: 30\n")
        );
    }

    #[test]
    fn the_id_key_first_anywhere_in_the_item_and_no_command() {
        let text = "version: 2\ngates:\n  - command: make test\n    id: unit\n  - id: only\n";
        assert_eq!(
            set(text, "unit", "7").expect("edit"),
            "version: 2\ngates:\n  - command: make test\n    timeoutSec: 7\n    id: unit\n  - id: only\n"
        );
        assert_eq!(
            set(text, "only", "7").expect("edit"),
            format!("{text}    timeoutSec: 7\n")
        );
    }

    #[test]
    fn flow_style_tabs_and_unknown_gates_are_refused() {
        let flow = "version: 2\ngates: [{id: a, command: x}]\n";
        assert!(matches!(
            set(flow, "a", "5"),
            Err(EditError::FlowStyle { line: 2, .. })
        ));
        let flow_item = "version: 2\ngates:\n  - {id: a, command: x}\n";
        let err = set(flow_item, "a", "5").expect_err("flow");
        assert!(
            err.to_string().starts_with("v.yaml:3: `  - {id: a"),
            "{err}"
        );
        let tab = "version: 1\ngates:\n  - id: a\n\tcommand: x\n";
        assert!(matches!(
            set(tab, "a", "5"),
            Err(EditError::Tab { line: 4, .. })
        ));
        let text = "version: 1\ngates:\n  - id: a\n    command: x\n";
        assert_eq!(
            set(text, "b", "5").expect_err("unknown").to_string(),
            "v.yaml: no gate with `id: b` under `gates:`"
        );
        assert!(matches!(
            set("version: 1\n", "a", "5"),
            Err(EditError::NoGates { .. })
        ));
    }

    #[test]
    fn a_gate_under_another_top_level_key_is_not_taken() {
        let text =
            "version: 2\ngates:\n  - id: a\n    command: x\nextra:\n  - id: b\n    command: y\n";
        assert!(matches!(
            set(text, "b", "5"),
            Err(EditError::GateNotFound { .. })
        ));
    }
}
