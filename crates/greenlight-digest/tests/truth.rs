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

/// How `fixture`'s digest departs from its truth file, if it does.
fn departures(fixture: &common::Fixture, truth: &Value) -> Vec<String> {
    let d = fixture.digest();
    let id = &fixture.id;
    let mut out = Vec::new();
    let complete = truth["complete"]
        .as_bool()
        .unwrap_or_else(|| panic!("{id}: truth.json says `complete`"));
    if (d.classification == Classification::Recognised) != complete {
        out.push(format!(
            "{id}: {:?} {:?}, truth says complete={complete}",
            d.classification, d.reasons
        ));
    }
    if d.classification == Classification::Recognised {
        if failures(&d) != truth["failures"] {
            out.push(format!(
                "{id}: failures {} != truth {}",
                failures(&d),
                truth["failures"]
            ));
        }
        let summary = serde_json::to_value(&d.summary).unwrap_or_default();
        for (count, n) in truth["summary"].as_object().into_iter().flatten() {
            if &summary[count] != n {
                out.push(format!(
                    "{id}: summary.{count} {} != truth {n}",
                    summary[count]
                ));
            }
        }
    }
    if let Some(scope) = truth.get("scope")
        && &serde_json::to_value(d.scope).unwrap_or_default() != scope
    {
        out.push(format!("{id}: scope {:?} != truth {scope}", d.scope));
    }
    out
}

#[test]
fn complete_digests_hold_exactly_the_failures_of_their_truth_file() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for fixture in common::all() {
        let Ok(text) = std::fs::read_to_string(fixture.dir.join("truth.json")) else {
            continue;
        };
        let truth: Value = serde_json::from_str(&text).expect("truth.json is JSON");
        if truth.get("problems").is_some() {
            continue; // a linter's truth: its problems, checked by tests/lint.rs
        }
        wrong.extend(departures(&fixture, &truth));
        checked += 1;
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 15, "truth files checked: {checked}");
}
