//! Every golden turn under `fixtures/golden-turns/` replays to the events it records.
//!
//! `GREENLIGHT_UPDATE_GOLDEN=1 cargo test -p greenlight-openai --test golden_turns` rewrites each
//! file's expected events with what the decoder gives now; review the diff before committing.

use std::path::PathBuf;
use std::sync::OnceLock;

use greenlight_openai::TurnEvent;
use greenlight_openai::golden;

/// The golden files, sorted; with `GREENLIGHT_UPDATE_GOLDEN=1` rewritten first, once, before any
/// test of this binary reads them.
fn golden_files() -> Vec<PathBuf> {
    static FILES: OnceLock<Vec<PathBuf>> = OnceLock::new();
    FILES
        .get_or_init(|| {
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/golden-turns");
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|entry| {
                    entry
                        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                        .path()
                })
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect();
            files.sort();
            if std::env::var("GREENLIGHT_UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
                for path in &files {
                    golden::update(path).unwrap_or_else(|e| panic!("{e}"));
                }
            }
            files
        })
        .clone()
}

#[test]
fn every_golden_turn_replays_to_its_expected_events() {
    let mut failures = Vec::new();
    for path in golden_files() {
        let replay = golden::replay(&path).unwrap_or_else(|e| panic!("{e}"));
        if !replay.matches() {
            failures.push(format!("{}:\n{}", path.display(), replay.diff()));
        }
    }
    assert!(
        failures.is_empty(),
        "golden turns differ (GREENLIGHT_UPDATE_GOLDEN=1 to accept):\n{}",
        failures.join("\n")
    );
}

#[test]
fn golden_files_are_in_the_layout_render_writes() {
    for path in golden_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let turn = golden::parse(&text, &path).unwrap();
        assert_eq!(
            golden::render(&turn),
            text,
            "{}: run GREENLIGHT_UPDATE_GOLDEN=1 to re-render",
            path.display()
        );
    }
}

/// The corpus keeps every kind of event the brief of a turn can hold, so no file's expected list
/// can be emptied without this failing.
#[test]
fn the_corpus_covers_every_event_kind_and_both_endings() {
    let turns: Vec<_> = golden_files()
        .iter()
        .map(|p| golden::load(p).unwrap())
        .collect();
    assert!(turns.len() >= 14, "{} golden turns", turns.len());
    let kind = |e: &TurnEvent| match e {
        TurnEvent::Thought(_) => "thought",
        TurnEvent::Answer(_) => "answer",
        TurnEvent::ToolCall(_) => "tool_call",
        TurnEvent::Violation { .. } => "violation",
        TurnEvent::Usage { .. } => "usage",
        TurnEvent::Finish { .. } => "finish",
        TurnEvent::ServerError { .. } => "server_error",
        TurnEvent::BadChunk { .. } => "bad_chunk",
    };
    let mut seen: Vec<&str> = turns
        .iter()
        .flat_map(|t| t.expected.iter().map(kind))
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen,
        [
            "answer",
            "finish",
            "server_error",
            "thought",
            "tool_call",
            "usage",
            "violation"
        ]
    );
    for t in &turns {
        assert!(!t.expected.is_empty(), "{}", t.description);
        assert!(!t.provenance.is_empty(), "{}", t.description);
    }
    assert!(turns.iter().any(|t| t.end == golden::End::Deadline));
    assert!(
        turns
            .iter()
            .any(|t| t.chunks.iter().any(|c| std::str::from_utf8(c).is_err())),
        "a chunk cut inside a character"
    );
}
