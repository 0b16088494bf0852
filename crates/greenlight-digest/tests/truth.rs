//! Every fixture with a `truth.json` (what a person read in its raw output: the counts and
//! every failure's name, file, line and message) against its digest, strictly: a digest that
//! claims to be complete must hold exactly those failures, no more, no fewer, none misplaced.

mod common;

use greenlight_digest::{Classification, Digest};
use serde_json::Value;

/// The failures of a digest as the truth file writes them.
fn failures(d: &Digest) -> Value {
    Value::Array(
        d.failures
            .iter()
            .map(|f| {
                serde_json::json!({
                    "name": f.name, "file": f.file, "line": f.line, "message": f.message,
                })
            })
            .collect(),
    )
}

#[test]
fn complete_digests_hold_exactly_the_failures_of_their_truth_file() {
    let mut checked = 0;
    for fixture in common::all() {
        let Ok(text) = std::fs::read_to_string(fixture.dir.join("truth.json")) else {
            continue;
        };
        let truth: Value = serde_json::from_str(&text).expect("truth.json is JSON");
        let d = fixture.digest();
        let id = &fixture.id;
        let complete = truth["complete"]
            .as_bool()
            .expect("truth.json says `complete`");
        assert_eq!(
            d.classification == Classification::Recognised,
            complete,
            "{id}: {:?} {:?}",
            d.classification,
            d.reasons
        );
        if d.classification == Classification::Recognised {
            assert_eq!(failures(&d), truth["failures"], "{id}: failures");
            let summary = serde_json::to_value(&d.summary).unwrap_or_default();
            for (count, n) in truth["summary"].as_object().into_iter().flatten() {
                assert_eq!(&summary[count], n, "{id}: summary.{count}");
            }
        }
        if let Some(scope) = truth.get("scope") {
            assert_eq!(
                &serde_json::to_value(d.scope).unwrap_or_default(),
                scope,
                "{id}: scope"
            );
        }
        checked += 1;
    }
    assert!(checked >= 10, "truth files checked: {checked}");
}
