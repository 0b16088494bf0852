//! What the settings-file tests share: temp files, and JSON documents generated at random and
//! laid out the ways people and agents write them.

#![allow(dead_code)]

use std::path::Path;

use proptest::prelude::*;
use serde_json::Value;

pub fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

pub fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("mkdir: {e}"));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write: {e}"));
}

pub fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z é\"\\\\/]{0,8}".prop_map(Value::from),
    ]
}

/// Any JSON value, nested up to three deep.
pub fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// `doc` as text, in one of five layouts (`style` 0 to 4): compact; two spaces and a final
/// newline; tabs and `\r\n`; four spaces and no final newline; two spaces and no final newline
/// (Claude Code's own `~/.claude.json`).
pub fn layout(doc: &Value, style: u8) -> String {
    let pretty = |indent: &[u8]| {
        let mut buf = Vec::new();
        let f = serde_json::ser::PrettyFormatter::with_indent(indent);
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, f);
        let _ = serde::Serialize::serialize(doc, &mut ser);
        String::from_utf8_lossy(&buf).into_owned()
    };
    match style {
        0 => doc.to_string(),
        1 => format!("{}\n", pretty(b"  ")),
        2 => pretty(b"\t").replace('\n', "\r\n"),
        3 => pretty(b"    "),
        _ => pretty(b"  "),
    }
}
