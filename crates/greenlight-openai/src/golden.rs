//! Golden turns: recorded response bodies replayed through [`TurnDecoder`] and compared, as
//! canonical text, with the events they must give.
//!
//! A golden file is JSON: how the turn was obtained (`provenance`), the decoder's `format`, how
//! the body ended (`end`: `eof` — `[DONE]` or the connection closed — or `deadline`), the body
//! as the `chunks` that arrived (a string each, or `{"base64": …}` for a chunk that is not UTF-8
//! on its own, such as one cut inside a character), and the `expected` events in canonical form
//! ([`canonical`]), one per line. [`render`] writes that layout, so a file rewritten with new
//! expected events changes only where the events did.
//!
//! The comparison is textual: each event becomes one line of JSON with its object keys sorted
//! ([`event_line`]), so argument key order does not matter and a mismatch reads as a line diff.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;
use serde_json::Value;

use super::turn::{ToolFormat, TurnDecoder, TurnEvent, canonical};

/// How a recorded body ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum End {
    /// The body ended (`[DONE]`, or the server closed the connection): [`TurnDecoder::finish`].
    #[default]
    Eof,
    /// The caller's deadline came: [`TurnDecoder::finish_at_deadline`].
    Deadline,
}

impl End {
    /// The kebab-case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            End::Eof => "eof",
            End::Deadline => "deadline",
        }
    }
}

/// One golden turn, as read from its file.
#[derive(Debug, Clone, PartialEq)]
pub struct GoldenTurn {
    /// What the turn shows.
    pub description: String,
    /// Where the chunks came from: the server, version and command, or that they were written
    /// by hand in the shape of a named server's stream, and why.
    pub provenance: String,
    /// The decoder's tool format.
    pub format: ToolFormat,
    /// How the body ended.
    pub end: End,
    /// The body, in the chunks it arrived in.
    pub chunks: Vec<Vec<u8>>,
    /// The canonical events it must give.
    pub expected: Vec<TurnEvent>,
}

/// Errors reading or writing a golden file. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    /// The file could not be read.
    #[error("{path}: cannot read the golden turn: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a golden turn (bad JSON, unknown or missing field, wrong type).
    #[error(
        "{path}:{line}:{column}: not a golden turn: {message}; see docs/agents.md, \"Golden turns\""
    )]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line of the fault.
        line: usize,
        /// 1-based column of the fault.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A `{"base64": …}` chunk that is not base64.
    #[error("{path}: chunk {index} (from 0) is not valid base64: {message}")]
    Base64 {
        /// The file.
        path: PathBuf,
        /// Which chunk.
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// The file could not be written.
    #[error("{path}: cannot write the golden turn: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A replayed turn: what the file expects and what the decoder gave, both canonical.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// The file's expected events.
    pub expected: Vec<TurnEvent>,
    /// The decoder's canonical events.
    pub actual: Vec<TurnEvent>,
}

impl Replay {
    /// Whether the two agree, line for line ([`event_line`]).
    pub fn matches(&self) -> bool {
        lines(&self.expected) == lines(&self.actual)
    }

    /// A line diff of expected (`-`) against actual (`+`), common lines prefixed with a space;
    /// empty when they match.
    pub fn diff(&self) -> String {
        if self.matches() {
            return String::new();
        }
        line_diff(&lines(&self.expected), &lines(&self.actual))
    }
}

/// Reads and replays one golden file.
pub fn replay(path: &Path) -> Result<Replay, GoldenError> {
    Ok(replay_turn(&load(path)?))
}

/// Replays a golden turn already read.
pub fn replay_turn(turn: &GoldenTurn) -> Replay {
    let chunks: Vec<&[u8]> = turn.chunks.iter().map(Vec::as_slice).collect();
    Replay {
        expected: turn.expected.clone(),
        actual: decode(turn.format, turn.end, &chunks),
    }
}

/// Decodes a body given as `chunks` and ended as `end`: the canonical events.
pub fn decode(format: ToolFormat, end: End, chunks: &[&[u8]]) -> Vec<TurnEvent> {
    let mut decoder = TurnDecoder::new(format);
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(decoder.feed(chunk));
    }
    events.extend(match end {
        End::Eof => decoder.finish(),
        End::Deadline => decoder.finish_at_deadline(),
    });
    canonical(&events)
}

/// Reads a golden file.
pub fn load(path: &Path) -> Result<GoldenTurn, GoldenError> {
    let text = std::fs::read_to_string(path).map_err(|source| GoldenError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// Reads a golden turn from its text; `path` only names it in errors.
pub fn parse(text: &str, path: &Path) -> Result<GoldenTurn, GoldenError> {
    let wire: WireTurn = serde_json::from_str(text).map_err(|e| GoldenError::Syntax {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let chunks = wire
        .chunks
        .into_iter()
        .enumerate()
        .map(|(index, chunk)| match chunk {
            WireChunk::Text(s) => Ok(s.into_bytes()),
            WireChunk::Bytes { base64 } => {
                BASE64
                    .decode(base64.as_bytes())
                    .map_err(|e| GoldenError::Base64 {
                        path: path.to_path_buf(),
                        index,
                        message: e.to_string(),
                    })
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(GoldenTurn {
        description: wire.description,
        provenance: wire.provenance,
        format: wire.format,
        end: wire.end,
        chunks,
        expected: wire.expected,
    })
}

/// Rewrites a golden file with the events the decoder gives now (`GREENLIGHT_UPDATE_GOLDEN=1`),
/// to be reviewed as a diff before it is committed. Returns whether the file changed.
pub fn update(path: &Path) -> Result<bool, GoldenError> {
    let mut turn = load(path)?;
    let replay = replay_turn(&turn);
    turn.expected = replay.actual;
    let text = render(&turn);
    let old = std::fs::read_to_string(path).unwrap_or_default();
    if old == text {
        return Ok(false);
    }
    std::fs::write(path, text).map_err(|source| GoldenError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(true)
}

/// The file text of a golden turn: one chunk and one event per line.
pub fn render(turn: &GoldenTurn) -> String {
    let string = |s: &str| Value::String(s.to_string()).to_string();
    let mut out = String::from("{\n");
    let _ = writeln!(out, "  \"description\": {},", string(&turn.description));
    let _ = writeln!(out, "  \"provenance\": {},", string(&turn.provenance));
    let _ = writeln!(out, "  \"format\": {},", string(turn.format.as_str()));
    let _ = writeln!(out, "  \"end\": {},", string(turn.end.as_str()));
    let chunks: Vec<String> = turn
        .chunks
        .iter()
        .map(|c| match std::str::from_utf8(c) {
            Ok(s) => string(s),
            Err(_) => format!("{{\"base64\": {}}}", string(&BASE64.encode(c))),
        })
        .collect();
    list(&mut out, "chunks", &chunks, ",");
    list(&mut out, "expected", &lines(&turn.expected), "");
    out.push_str("}\n");
    out
}

fn list(out: &mut String, key: &str, items: &[String], after: &str) {
    if items.is_empty() {
        let _ = writeln!(out, "  \"{key}\": []{after}");
        return;
    }
    let _ = writeln!(out, "  \"{key}\": [");
    for (i, item) in items.iter().enumerate() {
        let comma = if i + 1 < items.len() { "," } else { "" };
        let _ = writeln!(out, "    {item}{comma}");
    }
    let _ = writeln!(out, "  ]{after}");
}

/// One event as one line of JSON, object keys sorted at every depth.
pub fn event_line(event: &TurnEvent) -> String {
    let value = serde_json::to_value(event).unwrap_or_else(|e| Value::String(e.to_string()));
    sorted(value).to_string()
}

fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

fn lines(events: &[TurnEvent]) -> Vec<String> {
    events.iter().map(event_line).collect()
}

/// A longest-common-subsequence line diff (event lists are short: tens of lines).
fn line_diff(old: &[String], new: &[String]) -> String {
    let (n, m) = (old.len(), new.len());
    // lcs[i][j]: the common length of old[i..] and new[j..].
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if old[i] == new[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = String::from("--- expected\n+++ actual\n");
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && old[i] == new[j] {
            let _ = writeln!(out, " {}", old[i]);
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            let _ = writeln!(out, "+{}", new[j]);
            j += 1;
        } else {
            let _ = writeln!(out, "-{}", old[i]);
            i += 1;
        }
    }
    out
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireTurn {
    description: String,
    provenance: String,
    #[serde(default)]
    format: ToolFormat,
    #[serde(default)]
    end: End,
    chunks: Vec<WireChunk>,
    #[serde(default)]
    expected: Vec<TurnEvent>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum WireChunk {
    Text(String),
    Bytes { base64: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"{
  "description": "d",
  "provenance": "p",
  "format": "auto",
  "end": "eof",
  "chunks": [
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\u00e9\"},\"finish_reason\":null}]}\n\n",
    {"base64": "ZGF0YTogeyJjaG9pY2VzIjpbeyJpbmRleCI6MCwiZGVsdGEiOnsiY29udGVudCI6ImgifSwiZmluaXNoX3JlYXNvbiI6bnVsbH1dfQoKZGF0YTogeyJjaG9pY2VzIjpbeyJpbmRleCI6MCwiZGVsdGEiOnsiY29udGVudCI6IsM="},
    {"base64": "qSJ9LCJmaW5pc2hfcmVhc29uIjoic3RvcCJ9XX0KCg=="}
  ],
  "expected": [
    {"answer":"éhé"},
    {"finish":{"reason":"stop"}}
  ]
}
"#;

    #[test]
    fn a_file_reads_replays_and_renders_back_to_the_same_text() {
        let turn = parse(FILE, Path::new("t.json")).unwrap();
        assert_eq!(turn.chunks.len(), 3);
        let replay = replay_turn(&turn);
        assert!(replay.matches(), "{}", replay.diff());
        assert_eq!(render(&turn), FILE.replace("\\u00e9", "é"));
    }

    #[test]
    fn a_mismatch_is_a_line_diff() {
        let replay = Replay {
            expected: vec![
                TurnEvent::Answer("a".into()),
                TurnEvent::Finish {
                    reason: "stop".into(),
                },
            ],
            actual: vec![
                TurnEvent::Answer("b".into()),
                TurnEvent::Finish {
                    reason: "stop".into(),
                },
            ],
        };
        assert!(!replay.matches());
        assert_eq!(
            replay.diff(),
            "--- expected\n+++ actual\n+{\"answer\":\"b\"}\n-{\"answer\":\"a\"}\n {\"finish\":{\"reason\":\"stop\"}}\n"
        );
    }

    #[test]
    fn argument_key_order_does_not_matter() {
        let call = |args: &str| {
            TurnEvent::ToolCall(super::super::ToolCall {
                id: "c".into(),
                name: "f".into(),
                arguments: serde_json::from_str(args).unwrap(),
            })
        };
        let replay = Replay {
            expected: vec![call(r#"{"a":1,"b":2}"#)],
            actual: vec![call(r#"{"b":2,"a":1}"#)],
        };
        assert!(replay.matches());
    }

    #[test]
    fn update_fills_in_the_expected_events_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let empty = FILE[..FILE.find("  \"expected\"").unwrap()]
            .trim_end()
            .trim_end_matches(',')
            .to_string()
            + "\n}\n";
        std::fs::write(&path, &empty).unwrap();
        assert!(!replay(&path).unwrap().matches());
        assert!(update(&path).unwrap());
        assert!(replay(&path).unwrap().matches());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            FILE.replace("\\u00e9", "é")
        );
        assert!(!update(&path).unwrap());
        let missing = dir.path().join("none.json");
        assert!(
            replay(&missing)
                .unwrap_err()
                .to_string()
                .contains("none.json: cannot read")
        );
    }

    #[test]
    fn errors_name_the_file_and_the_place() {
        let e = parse("{\n  \"description\": 1\n}", Path::new("x.json")).unwrap_err();
        assert!(e.to_string().starts_with("x.json:2:"), "{e}");
        let e = parse(
            r#"{"description":"","provenance":"","chunks":[{"base64":"!!"}]}"#,
            Path::new("y.json"),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("y.json: chunk 0"), "{e}");
        let e = parse(
            r#"{"description":"","provenance":"","chunks":[],"extra":1}"#,
            Path::new("z.json"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
    }
}
