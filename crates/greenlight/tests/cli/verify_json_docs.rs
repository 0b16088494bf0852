//! Every field `greenlight verify --format json` emits is documented in the reference's table
//! (docs/reference/json.md): a field added to the renderer without a line there fails here.
//! (The test keeps the name it had when the table was in the README.)

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::collections::BTreeSet;
use std::fs;

use greenlight_testkit::TempRepo;
use greenlight_testkit::procs::hostname;
use serde_json::Value;

/// The reference's text from the JSON table of `greenlight verify` to the config-error sentence
/// after it (inclusive): its section of docs/reference/json.md.
fn documented_names() -> BTreeSet<String> {
    let reference = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/reference/json.md"
    ))
    .unwrap();
    let start = reference
        .find("`--format json` prints one JSON document")
        .expect("docs/reference/json.md documents verify's JSON");
    let rest = &reference[start..];
    let end = rest
        .find("\n## ")
        .expect("verify's JSON section ends at the next heading of docs/reference/json.md");
    let section = &rest[..end];
    let words = regex::Regex::new(r"[A-Za-z_]+").unwrap();
    let mut names = BTreeSet::new();
    for span in section.split('`').skip(1).step_by(2) {
        for word in words.find_iter(span) {
            names.insert(word.as_str().to_owned());
        }
    }
    names
}

/// Every object key in `value`, with the path it sits at; the digest object is documented in
/// docs/digest.md and is not walked.
fn keys(value: &Value, path: &str, out: &mut BTreeSet<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let at = format!("{path}.{k}");
                out.insert((k.clone(), at.clone()));
                if k != "digest" {
                    keys(v, &at, out);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                keys(item, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

fn assert_documented(doc: &Value) {
    let documented = documented_names();
    let mut emitted = BTreeSet::new();
    keys(doc, "", &mut emitted);
    let missing: Vec<&String> = emitted
        .iter()
        .filter(|(name, _)| !documented.contains(name))
        .map(|(_, path)| path)
        .collect();
    assert!(
        missing.is_empty(),
        "fields verify's JSON emits but docs/reference/json.md's table does not document: {missing:?}"
    );
}

#[test]
fn every_field_of_verifys_json_is_documented_in_the_readme() {
    let repo = TempRepo::worktree_with_commit();
    // A held lock (a live holder: this test) for the skipped gate's lock_holder.
    repo.plant_lock("busy", i64::from(std::process::id()), &hostname(), "t");
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: flaky\n    command: test -f once || { touch once; exit 1; }\n    retryOnFail: 1\n    mutex: free\n  - id: leaks\n    command: sleep 30 &\n  - id: busy\n    command: \"true\"\n    mutex: busy\n    timeoutSec: 1\n  - id: moves\n    command: mv \"$PWD\" \"$PWD.moved\"\n  - id: gone\n    command: \"true\"\noptions:\n  requireEnvClean: true\n",
    );
    let out = repo.greenlight(["verify", "--format", "json"]);
    fs::rename(repo.path().with_extension("moved"), repo.path()).unwrap();
    assert_eq!(out.code, 20, "{}", out.render());
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    // The run really produced the nested objects the table documents.
    let gates = doc["gates"].as_array().unwrap();
    assert!(
        gates[1]["attempts"][0]["leftovers"][0]["pid"].is_number(),
        "{doc}"
    );
    assert!(
        gates[2]["attempts"][0]["lock_holder"]["token"].is_string(),
        "{doc}"
    );
    assert!(gates[4]["attempts"][0]["start_error"].is_string(), "{doc}");
    assert!(doc["env_clean"].is_object(), "{doc}");
    assert_documented(&doc);

    repo.verify_yaml("version: 1\n");
    let out = repo.greenlight(["verify", "--format", "json"]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert_documented(&serde_json::from_str(&out.stdout).unwrap());
}
