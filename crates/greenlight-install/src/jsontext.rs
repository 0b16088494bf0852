//! A JSON document as text with spans: find values by key, then insert or remove members and
//! list items by editing the bytes around them, never by re-serialising the document.
//!
//! The one rule: bytes outside an edit are never touched, so every number keeps its digits,
//! every string its escapes, and the file its formatting; an insertion is the exact inverse of
//! the removal of the same member or item (install then uninstall gives back the same bytes).
//! Only valid JSON is read (serde_json checks it first, with line and column); a repeated key
//! in any object is refused, because which copy an agent reads is not ours to guess.

use std::ops::Range;
use std::path::Path;

use crate::Error;
use crate::settings_file::line_col;

/// A value in the text: where it is, and what it holds.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    /// Bytes of the value, from its first to just past its last character.
    pub span: Range<usize>,
    pub kind: Kind,
}

/// What a value holds.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Object(Vec<Member>),
    Array(Vec<Node>),
    /// A string, decoded.
    String(String),
    /// A number, `true`, `false` or `null`, as written.
    Other,
}

/// One `"key": value` of an object.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub key: String,
    /// Where the key's opening quote is.
    pub key_start: usize,
    /// Just past the key's closing quote.
    pub key_end: usize,
    pub value: Node,
}

impl Node {
    pub(crate) fn members(&self) -> Option<&[Member]> {
        match &self.kind {
            Kind::Object(m) => Some(m),
            _ => None,
        }
    }

    pub(crate) fn items(&self) -> Option<&[Node]> {
        match &self.kind {
            Kind::Array(i) => Some(i),
            _ => None,
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        self.members()?
            .iter()
            .find(|m| m.key == key)
            .map(|m| &m.value)
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::String(s) => Some(s),
            _ => None,
        }
    }

    /// What the value is, for messages.
    pub(crate) fn kind_name(&self) -> &'static str {
        match &self.kind {
            Kind::Object(_) => "an object",
            Kind::Array(_) => "a list",
            Kind::String(_) => "a string",
            Kind::Other => "a number, boolean or null",
        }
    }
}

/// Why a text could not be read as a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ParseError {
    /// Not JSON at all: serde_json's message, line and column.
    Invalid {
        line: usize,
        column: usize,
        message: String,
    },
    /// An object names the same key twice.
    DuplicateKey {
        key: String,
        line: usize,
        column: usize,
    },
}

/// Reads the text of the settings file at `path` into nodes with spans, or the error that
/// names the file, line and column; the top level must be an object.
pub(crate) fn parse_settings(path: &Path, text: &str) -> Result<Node, Error> {
    let doc = parse(text).map_err(|e| match e {
        ParseError::Invalid {
            line,
            column,
            message,
        } => Error::InvalidJson {
            path: path.to_path_buf(),
            line,
            column,
            message,
        },
        ParseError::DuplicateKey { key, line, column } => Error::DuplicateKey {
            path: path.to_path_buf(),
            line,
            column,
            key,
        },
    })?;
    if doc.members().is_none() {
        return Err(shape(path, text, "the top level", "an object", &doc));
    }
    Ok(doc)
}

/// The error for a value of the wrong kind at `pointer` (e.g. `hooks.Stop`), naming where it
/// starts in the file.
pub(crate) fn shape(
    path: &Path,
    text: &str,
    pointer: &str,
    expected: &'static str,
    found: &Node,
) -> Error {
    let (line, column) = line_col(text, found.span.start);
    Error::UnexpectedShape {
        path: path.to_path_buf(),
        line,
        column,
        pointer: pointer.to_string(),
        expected,
        found: found.kind_name(),
    }
}

/// A whole new settings file holding `doc`: two-space indentation and a final newline.
pub(crate) fn render_file(doc: &serde_json::Value) -> String {
    let layout = Layout {
        unit: "  ".to_string(),
        newline: "\n",
    };
    let mut text = render_value(doc, &layout, "", true);
    text.push('\n');
    text
}

/// Reads `text` (valid JSON, one value) into nodes with spans.
pub(crate) fn parse(text: &str) -> Result<Node, ParseError> {
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        return Err(ParseError::Invalid {
            line: e.line(),
            column: e.column().max(1),
            message: e
                .to_string()
                .split(" at line ")
                .next()
                .unwrap_or("")
                .to_string(),
        });
    }
    let mut p = Parser { text, pos: 0 };
    p.ws();
    p.value()
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> u8 {
        self.bytes().get(self.pos).copied().unwrap_or(0)
    }

    fn ws(&mut self) {
        while matches!(self.peek(), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn line_col(&self, at: usize) -> (usize, usize) {
        line_col(self.text, at)
    }

    // serde_json has accepted the text, so every branch below meets valid JSON; the
    // fallbacks only keep a malformed input from panicking.
    fn value(&mut self) -> Result<Node, ParseError> {
        let start = self.pos;
        match self.peek() {
            b'{' => {
                self.pos += 1;
                let mut members: Vec<Member> = Vec::new();
                self.ws();
                if self.peek() == b'}' {
                    self.pos += 1;
                } else {
                    loop {
                        self.ws();
                        let key_start = self.pos;
                        let key = self.string()?;
                        let key_end = self.pos;
                        if members.iter().any(|m| m.key == key) {
                            let (line, column) = self.line_col(key_start);
                            return Err(ParseError::DuplicateKey { key, line, column });
                        }
                        self.ws();
                        self.pos += 1; // ':'
                        self.ws();
                        let value = self.value()?;
                        members.push(Member {
                            key,
                            key_start,
                            key_end,
                            value,
                        });
                        self.ws();
                        let c = self.peek();
                        self.pos += 1;
                        if c != b',' {
                            break;
                        }
                    }
                }
                Ok(Node {
                    span: start..self.pos,
                    kind: Kind::Object(members),
                })
            }
            b'[' => {
                self.pos += 1;
                let mut items = Vec::new();
                self.ws();
                if self.peek() == b']' {
                    self.pos += 1;
                } else {
                    loop {
                        self.ws();
                        items.push(self.value()?);
                        self.ws();
                        let c = self.peek();
                        self.pos += 1;
                        if c != b',' {
                            break;
                        }
                    }
                }
                Ok(Node {
                    span: start..self.pos,
                    kind: Kind::Array(items),
                })
            }
            b'"' => {
                let s = self.string()?;
                Ok(Node {
                    span: start..self.pos,
                    kind: Kind::String(s),
                })
            }
            _ => {
                while self.pos < self.text.len()
                    && !matches!(
                        self.peek(),
                        b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'
                    )
                {
                    self.pos += 1;
                }
                Ok(Node {
                    span: start..self.pos,
                    kind: Kind::Other,
                })
            }
        }
    }

    fn string(&mut self) -> Result<String, ParseError> {
        let start = self.pos;
        self.pos += 1; // opening quote
        while self.pos < self.text.len() {
            match self.peek() {
                b'\\' => self.pos += 2,
                b'"' => {
                    self.pos += 1;
                    break;
                }
                _ => self.pos += 1,
            }
        }
        let raw = self.text.get(start..self.pos).unwrap_or("\"\"");
        serde_json::from_str::<String>(raw).map_err(|e| {
            let (line, column) = self.line_col(start);
            ParseError::Invalid {
                line,
                column,
                message: e.to_string(),
            }
        })
    }
}

/// How the document lays itself out, so inserted text looks like its neighbours.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    /// One level of indentation (`"  "`, `"\t"`, …).
    pub unit: String,
    /// `"\r\n"` or `"\n"`.
    pub newline: &'static str,
}

impl Layout {
    pub(crate) fn of(text: &str) -> Layout {
        let unit = text
            .lines()
            .skip(1)
            .find_map(|l| {
                let ws: String = l.chars().take_while(|c| *c == ' ' || *c == '\t').collect();
                (!ws.is_empty()).then_some(ws)
            })
            .unwrap_or_else(|| "  ".to_string());
        Layout {
            unit,
            newline: if text.contains("\r\n") { "\r\n" } else { "\n" },
        }
    }
}

/// A set of byte edits to one text, applied together.
#[derive(Debug, Default)]
pub(crate) struct Edits {
    edits: Vec<(Range<usize>, String)>,
}

impl Edits {
    pub(crate) fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    pub(crate) fn replace(&mut self, span: Range<usize>, with: String) {
        self.edits.push((span, with));
    }

    /// Applies every edit; edits must not overlap (the callers edit disjoint nodes).
    pub(crate) fn apply(mut self, text: &str) -> String {
        self.edits.sort_by_key(|(r, _)| (r.start, r.end));
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (range, with) in self.edits {
            let start = range.start.max(at);
            out.push_str(text.get(at..start).unwrap_or(""));
            out.push_str(&with);
            at = range.end.max(start);
        }
        out.push_str(text.get(at..).unwrap_or(""));
        out
    }

    /// Adds members (already rendered `"key": value` pairs as JSON values) at the end of an
    /// object, in the object's own style.
    pub(crate) fn add_members(
        &mut self,
        text: &str,
        object: &Node,
        new: &[(&str, serde_json::Value)],
        layout: &Layout,
    ) {
        let Some(members) = object.members() else {
            return;
        };
        let render_member =
            |key: &str, value: &serde_json::Value, colon: &str, indent: &str, pretty: bool| {
                format!(
                    "{}{colon}{}",
                    json_string(key),
                    render_value(value, layout, indent, pretty)
                )
            };
        match members.first() {
            Some(first) => {
                let sep = &text[inner_start(object)..first.key_start];
                let colon = colon_of(text, first);
                let indent = indent_after_newline(sep);
                let pretty = sep.contains('\n');
                let mut insert = String::new();
                for (k, v) in new {
                    insert.push(',');
                    insert.push_str(sep);
                    insert.push_str(&render_member(k, v, colon, indent, pretty));
                }
                let end = members
                    .last()
                    .map_or(first.value.span.end, |m| m.value.span.end);
                self.replace(end..end, insert);
            }
            None => self.fill_empty(text, object, layout, |indent, pretty| {
                new.iter()
                    .map(|(k, v)| {
                        let colon = if pretty { ": " } else { ":" };
                        render_member(k, v, colon, indent, pretty)
                    })
                    .collect()
            }),
        }
    }

    /// Gives `object` each of the `wanted` members: a value that differs is replaced where it
    /// stands (the key keeps its place), an absent member is added at the end, and a member
    /// that already holds the value is not touched. Returns true when anything changes.
    pub(crate) fn set_members<'k>(
        &mut self,
        text: &str,
        object: &Node,
        wanted: impl IntoIterator<Item = (&'k str, serde_json::Value)>,
        layout: &Layout,
    ) -> bool {
        let mut absent: Vec<(&str, serde_json::Value)> = Vec::new();
        let mut changed = false;
        for (key, value) in wanted {
            match object.get(key) {
                Some(node) => {
                    let same = text
                        .get(node.span.clone())
                        .and_then(|raw| serde_json::from_str::<serde_json::Value>(raw).ok())
                        .is_some_and(|v| v == value);
                    if !same {
                        self.replace(node.span.clone(), value.to_string());
                        changed = true;
                    }
                }
                None => absent.push((key, value)),
            }
        }
        if !absent.is_empty() {
            self.add_members(text, object, &absent, layout);
            changed = true;
        }
        changed
    }

    /// Appends items at the end of a list, in the list's own style.
    pub(crate) fn add_items(
        &mut self,
        text: &str,
        array: &Node,
        new: &[serde_json::Value],
        layout: &Layout,
    ) {
        let Some(items) = array.items() else {
            return;
        };
        match (items.first(), items.last()) {
            (Some(first), Some(last)) => {
                let sep = &text[inner_start(array)..first.span.start];
                let indent = indent_after_newline(sep);
                let pretty = sep.contains('\n');
                let mut insert = String::new();
                for v in new {
                    insert.push(',');
                    insert.push_str(sep);
                    insert.push_str(&render_value(v, layout, indent, pretty));
                }
                self.replace(last.span.end..last.span.end, insert);
            }
            _ => self.fill_empty(text, array, layout, |indent, pretty| {
                new.iter()
                    .map(|v| render_value(v, layout, indent, pretty))
                    .collect()
            }),
        }
    }

    /// Fills an empty `{}` or `[]`: on its own lines when the document is laid out on lines,
    /// else inline.
    fn fill_empty(
        &mut self,
        text: &str,
        container: &Node,
        layout: &Layout,
        render: impl Fn(&str, bool) -> Vec<String>,
    ) {
        let open = container.span.start;
        let close = container.span.end.saturating_sub(1);
        let pretty = text.contains('\n');
        let line_indent = line_indent_at(text, open);
        let inner = format!("{line_indent}{}", layout.unit);
        let parts = render(&inner, pretty);
        let body = if pretty {
            let sep = format!(",{}{inner}", layout.newline);
            format!(
                "{}{inner}{}{}{line_indent}",
                layout.newline,
                parts.join(&sep),
                layout.newline
            )
        } else {
            parts.join(",")
        };
        self.replace(open + 1..close, body);
    }

    /// Removes the members of `object` at `remove` (indices, ascending), taking their
    /// separators with them so that what is left reads as if they had never been there.
    pub(crate) fn remove_members(&mut self, object: &Node, remove: &[usize]) {
        let Some(members) = object.members() else {
            return;
        };
        let spans: Vec<Range<usize>> = members
            .iter()
            .map(|m| m.key_start..m.value.span.end)
            .collect();
        self.remove_from(object, &spans, remove);
    }

    /// Removes the items of `array` at `remove` (indices, ascending).
    pub(crate) fn remove_items(&mut self, array: &Node, remove: &[usize]) {
        let Some(items) = array.items() else {
            return;
        };
        let spans: Vec<Range<usize>> = items.iter().map(|i| i.span.clone()).collect();
        self.remove_from(array, &spans, remove);
    }

    fn remove_from(&mut self, container: &Node, spans: &[Range<usize>], remove: &[usize]) {
        let n = spans.len();
        if remove.is_empty() || n == 0 {
            return;
        }
        if remove.len() >= n {
            // Everything goes: the container becomes `{}` / `[]`.
            let open = container.span.start;
            let close = container.span.end.saturating_sub(1);
            self.replace(open + 1..close, String::new());
            return;
        }
        // Runs of consecutive removed indices: a run that ends the list takes the separator
        // before it; any other run takes the separator after it.
        let mut i = 0;
        while i < remove.len() {
            let a = remove[i];
            let mut b = a;
            while i + 1 < remove.len() && remove[i + 1] == b + 1 {
                i += 1;
                b += 1;
            }
            if b + 1 == n {
                if let Some(prev) = a.checked_sub(1) {
                    self.replace(spans[prev].end..spans[b].end, String::new());
                }
            } else {
                self.replace(spans[a].start..spans[b + 1].start, String::new());
            }
            i += 1;
        }
    }
}

/// Where the inside of `{`/`[` starts.
fn inner_start(container: &Node) -> usize {
    container.span.start + 1
}

/// The text between a member's key and its value (`": "`, `":"`, `" : "`).
fn colon_of<'a>(text: &'a str, member: &Member) -> &'a str {
    text.get(member.key_end..member.value.span.start)
        .unwrap_or(": ")
}

/// The indentation that follows the last newline of `sep` (empty when `sep` has none).
fn indent_after_newline(sep: &str) -> &str {
    sep.rsplit_once('\n').map_or("", |(_, after)| after)
}

/// The leading whitespace of the line holding byte `at`.
fn line_indent_at(text: &str, at: usize) -> String {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

/// A string as a JSON literal.
pub(crate) fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// Renders a new value: on lines indented from `indent` when `pretty`, else compact (with a
/// space after each colon and comma only when the neighbours have one).
pub(crate) fn render_value(
    value: &serde_json::Value,
    layout: &Layout,
    indent: &str,
    pretty: bool,
) -> String {
    if !pretty {
        return value.to_string();
    }
    let mut buf = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(layout.unit.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    // Serialising a Value into memory cannot fail.
    let _ = serde::Serialize::serialize(value, &mut ser);
    let text = String::from_utf8_lossy(&buf).into_owned();
    text.replace('\n', &format!("{}{indent}", layout.newline))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn round_trip(text: &str, key: &str, value: serde_json::Value) -> String {
        let doc = parse(text).unwrap();
        let layout = Layout::of(text);
        let mut edits = Edits::default();
        edits.add_members(text, &doc, &[(key, value)], &layout);
        let added = edits.apply(text);
        let doc2 = parse(&added).unwrap();
        let idx = doc2
            .members()
            .unwrap()
            .iter()
            .position(|m| m.key == key)
            .unwrap();
        let mut edits = Edits::default();
        edits.remove_members(&doc2, &[idx]);
        assert_eq!(edits.apply(&added), text, "after adding: {added}");
        added
    }

    #[test]
    fn adding_then_removing_a_member_gives_back_the_bytes() {
        let added = round_trip("{\"a\":1}", "h", json!({"x": [1]}));
        assert_eq!(added, "{\"a\":1,\"h\":{\"x\":[1]}}");
        let added = round_trip("{\n  \"a\": 1\n}\n", "h", json!({"x": 2}));
        assert_eq!(added, "{\n  \"a\": 1,\n  \"h\": {\n    \"x\": 2\n  }\n}\n");
        round_trip("{\r\n\t\"a\": 1\r\n}", "h", json!({"x": [1, 2]}));
        round_trip("{ \"a\" : 1 , \"b\": 2 }", "h", json!(3));
    }

    #[test]
    fn numbers_and_escapes_outside_an_edit_keep_their_bytes() {
        let text = "{\"n\": 123456789012345678901234567890, \"s\": \"\\u00e9\", \"f\": 1.50}";
        let added = round_trip(text, "h", json!(true));
        assert!(added.contains("123456789012345678901234567890"));
        assert!(added.contains("\\u00e9") && added.contains("1.50"));
    }

    #[test]
    fn duplicate_keys_are_refused_with_their_place() {
        let e = parse("{\n  \"hooks\": {},\n  \"hooks\": {}\n}").unwrap_err();
        assert_eq!(
            e,
            ParseError::DuplicateKey {
                key: "hooks".into(),
                line: 3,
                column: 3
            }
        );
        assert!(matches!(parse("{,}"), Err(ParseError::Invalid { .. })));
    }

    #[test]
    fn removing_runs_of_items_keeps_the_rest_well_formed() {
        let text = "[1, 2, 3, 4, 5]";
        let doc = parse(text).unwrap();
        for (remove, want) in [
            (vec![0], "[2, 3, 4, 5]"),
            (vec![4], "[1, 2, 3, 4]"),
            (vec![3, 4], "[1, 2, 3]"),
            (vec![0, 2, 4], "[2, 4]"),
            (vec![1, 2], "[1, 4, 5]"),
            (vec![0, 1, 2, 3, 4], "[]"),
        ] {
            let mut e = Edits::default();
            e.remove_items(&doc, &remove);
            let out = e.apply(text);
            assert_eq!(out, want, "{remove:?}");
            assert!(parse(&out).is_ok());
        }
    }

    #[test]
    fn an_empty_object_is_filled_on_lines_in_a_laid_out_file() {
        let text = "{\n  \"hooks\": {}\n}\n";
        let doc = parse(text).unwrap();
        let hooks = doc.get("hooks").unwrap();
        let mut e = Edits::default();
        e.add_members(text, hooks, &[("Stop", json!([]))], &Layout::of(text));
        assert_eq!(
            e.apply(text),
            "{\n  \"hooks\": {\n    \"Stop\": []\n  }\n}\n"
        );
    }
}
