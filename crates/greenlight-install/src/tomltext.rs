//! A TOML settings file as text: read into a `toml_edit` document, which keeps every comment,
//! blank line, key order and value as written, edited through that document, and rendered
//! back.
//!
//! The one rule: bytes outside an edit never change. `toml_edit` renders an unedited document
//! byte for byte with two exceptions: it ends lines with `\n` where the file had `\r\n`, and
//! it ends the last line where the file did not. So a file whose every line ends in `\r\n` is
//! edited with `\n` line ends and written back with `\r\n`, a file without a final line end
//! is written back without one, and a file that still would not come back byte for byte (mixed
//! line ends) is refused before anything is changed. Errors name the line and column.

use std::ops::Range;
use std::path::Path;

use crate::Error;
use crate::settings_file::{Syntax, line_col};

/// A parsed file: the document with the spans of what the file says (for messages), and how
/// to edit and render it.
pub(crate) struct TomlText {
    /// The text with `\n` line ends, which the spans point into.
    text: String,
    /// The document as parsed, with spans.
    pub spanned: toml_edit::Document<String>,
    /// True when every line of the file ends in `\r\n`.
    crlf: bool,
    /// True when the file's last line has no line end.
    unended: bool,
}

impl TomlText {
    /// Parses the text of the file at `path`.
    pub(crate) fn parse(path: &Path, text: &str) -> Result<TomlText, Error> {
        let crlf = text.contains("\r\n");
        let lf = if crlf {
            text.replace("\r\n", "\n")
        } else {
            text.to_string()
        };
        let spanned = toml_edit::Document::parse(lf.clone()).map_err(|e| {
            let (line, column) = line_col(&lf, e.span().map_or(0, |s| s.start));
            Syntax::Toml.invalid(path, line, column, e.message().to_string())
        })?;
        let parsed = TomlText {
            text: lf,
            spanned,
            crlf,
            unended: !text.is_empty() && !text.ends_with('\n'),
        };
        if parsed.render(parsed.spanned.clone().into_mut()) != text {
            return Err(Error::NotKeptAsWritten {
                path: path.to_path_buf(),
            });
        }
        Ok(parsed)
    }

    /// The 1-based line and column where `span` starts.
    pub(crate) fn position(&self, span: Option<Range<usize>>) -> (usize, usize) {
        line_col(&self.text, span.map_or(0, |s| s.start))
    }

    /// The document to edit.
    pub(crate) fn editable(&self) -> toml_edit::DocumentMut {
        self.spanned.clone().into_mut()
    }

    /// The text of an edited document, with the file's own line ends.
    pub(crate) fn render(&self, doc: toml_edit::DocumentMut) -> String {
        let mut text = doc.to_string();
        if self.unended && text.ends_with('\n') {
            text.pop();
        }
        if self.crlf {
            text.replace('\n', "\r\n")
        } else {
            text
        }
    }
}

/// What a TOML item is, for messages.
pub(crate) fn kind_name(item: &toml_edit::Item) -> &'static str {
    use toml_edit::{Item, Value};
    match item {
        Item::None => "nothing",
        Item::Table(_) | Item::Value(Value::InlineTable(_)) => "a table",
        Item::ArrayOfTables(_) => "an array of tables",
        Item::Value(Value::Array(_)) => "an array",
        Item::Value(Value::String(_)) => "a string",
        Item::Value(Value::Integer(_)) => "an integer",
        Item::Value(Value::Float(_)) => "a float",
        Item::Value(Value::Boolean(_)) => "a boolean",
        Item::Value(Value::Datetime(_)) => "a date-time",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(text: &str) -> Result<TomlText, Error> {
        TomlText::parse(Path::new("config.toml"), text)
    }

    #[test]
    fn an_unedited_document_renders_byte_for_byte_with_either_line_end() {
        for text in [
            "a = 1\n[b]\nc = 2\n",
            "a = 1\r\n# c\r\n\r\n[b]\r\nc = \"\"\"x\r\ny\"\"\"\r\n",
            "no_final_newline = true",
            "a = 1\r\nb = 2",
            "# a comment, no line end",
            "",
        ] {
            let t = parse(text).unwrap();
            assert_eq!(t.render(t.editable()), text);
        }
    }

    #[test]
    fn mixed_line_ends_are_refused() {
        assert!(matches!(
            parse("a = 1\r\nb = 2\n"),
            Err(Error::NotKeptAsWritten { .. })
        ));
    }

    #[test]
    fn a_parse_error_names_its_line_and_column() {
        match parse("a = 1\r\n[b\r\nc = 2\r\n") {
            Err(Error::InvalidToml { line, column, .. }) => assert_eq!((line, column), (2, 3)),
            other => panic!("{:?}", other.err()),
        }
    }
}
