//! The committed JSON Schema (`schemas/frame.json`) is the frame types' schema, and frames read
//! back refuse what the schema refuses.
//!
//! After changing a frame type: `GREENLIGHT_UPDATE_SCHEMA=1 cargo test -p greenlight-stream
//! --test schema`, then review and commit the file.

use std::path::PathBuf;

use greenlight_stream::{Frame, frame_schema};

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schemas/frame.json")
}

/// The value with every object's keys sorted, so the file does not depend on whether
/// serde_json's `preserve_order` is on in this build (feature unification turns it on when the
/// crate is built together with the rest of the workspace).
fn sorted(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(sorted).collect())
        }
        other => other,
    }
}

#[test]
fn the_committed_schema_matches_the_types() {
    let generated = sorted(frame_schema());
    let path = committed_path();
    if std::env::var_os("GREENLIGHT_UPDATE_SCHEMA").is_some() {
        let mut text = serde_json::to_string_pretty(&generated).expect("schema serialises");
        text.push('\n');
        std::fs::write(&path, text).expect("write schemas/frame.json");
    }
    let committed: serde_json::Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    assert!(
        committed == generated,
        "schemas/frame.json disagrees with the frame types in greenlight-stream; regenerate it \
         with GREENLIGHT_UPDATE_SCHEMA=1 cargo test -p greenlight-stream --test schema and review \
         the diff"
    );
}

#[test]
fn unknown_keys_are_refused_at_every_level() {
    let good = r#"{"stream":"7","seq":1,"at":5,"body":{"type":"gate-started","gate":1,"of":2,"command":"true"}}"#;
    let frame: Frame = serde_json::from_str(good).expect("a valid frame");
    assert_eq!(frame.cursor(), "7:1");
    let workflow = r#"{"stream":"wf-3","seq":2,"at":5,"body":{"type":"workflow-dispatched","run":3,"step":"fix","item":"a","attempt":1,"family":"command"}}"#;
    let frame: Frame = serde_json::from_str(workflow).expect("a workflow frame");
    assert_eq!(frame.cursor(), "wf-3:2");
    for bad in [
        r#"{"stream":"7","seq":1,"at":5,"extra":1,"body":{"type":"gate-started","gate":1,"of":2,"command":"true"}}"#,
        r#"{"stream":"7","seq":1,"at":5,"body":{"type":"gate-started","gate":1,"of":2,"command":"true","extra":1}}"#,
        r#"{"stream":"7","seq":1,"at":5,"body":{"type":"no-such-kind"}}"#,
        r#"{"stream":"wf-07","seq":1,"at":5,"body":{"type":"workflow-resumed","run":7}}"#,
        r#"{"stream":"wf-7","seq":1,"at":5,"body":{"type":"workflow-resumed","run":7,"extra":1}}"#,
        r#"{"stream":"07","seq":1,"at":5,"body":{"type":"gate-started","gate":1,"of":2,"command":"true"}}"#,
        r#"{"stream":"7","seq":1,"at":5,"body":{"type":"turn-ended","turn":1,"outcome":"ok","tokens":{"input":1,"bogus":2}}}"#,
    ] {
        assert!(
            serde_json::from_str::<Frame>(bad).is_err(),
            "accepted: {bad}"
        );
    }
}

#[test]
fn the_schema_refuses_additional_properties() {
    let schema = frame_schema();
    assert_eq!(schema["additionalProperties"], serde_json::json!(false));
    let text = schema.to_string();
    for kind in [
        "goal-state",
        "run-started",
        "run-finished",
        "turn-started",
        "activity",
        "tool-call",
        "turn-ended",
        "gate-started",
        "gate-output",
        "gate-finished",
        "judge-verdict",
        "workflow-run-started",
        "workflow-dispatched",
        "workflow-settled",
        "workflow-gate-started",
        "workflow-gate-judged",
        "workflow-join-decided",
        "workflow-paused",
        "workflow-resumed",
        "workflow-land-started",
        "workflow-landed",
        "workflow-run-finished",
        "error",
    ] {
        assert!(
            text.contains(&format!("\"{kind}\"")),
            "{kind} missing from the schema"
        );
    }
}
