//! The committed JSON Schema (`schemas/workflow-plan.json` in this crate) is the plan types'
//! schema, and it is as closed as the reader: unknown keys are refused, `x-` keys allowed.
//!
//! After changing a plan type: `GREENLIGHT_UPDATE_SCHEMA=1 cargo test -p greenlight-workflow
//! --test schema`, then review and commit the file.

use std::path::PathBuf;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schemas/workflow-plan.json")
}

#[test]
fn the_committed_schema_matches_the_plan_types() {
    let generated = greenlight_workflow::plan::schema();
    let path = committed_path();
    if std::env::var_os("GREENLIGHT_UPDATE_SCHEMA").is_some() {
        let mut text = serde_json::to_string_pretty(&generated).expect("schema serialises");
        text.push('\n');
        std::fs::write(&path, text).expect("write schemas/workflow-plan.json");
    }
    let committed: serde_json::Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    assert!(
        committed == generated,
        "crates/greenlight-workflow/schemas/workflow-plan.json disagrees with the plan types; \
         regenerate it with GREENLIGHT_UPDATE_SCHEMA=1 cargo test -p greenlight-workflow --test \
         schema and review the diff"
    );
}

#[test]
fn the_schema_is_closed_but_for_x_keys() {
    let schema = greenlight_workflow::plan::schema();
    assert_eq!(schema["additionalProperties"], serde_json::json!(false));
    assert_eq!(schema["patternProperties"]["^x-"], serde_json::json!(true));
    let text = schema.to_string();
    for word in [
        "all-declared",
        "quorum",
        "return-value",
        "malformed-output",
        "rebase",
        "maxFanout",
        "failRoute",
        "resumeArg",
    ] {
        assert!(text.contains(word), "{word} missing from the schema");
    }
}

/// A checked plan's JSON form is valid under the schema, and the schema refuses what the reader
/// refuses: an unknown key at the top, in a step, in a fan-out's template, or a bad join policy.
#[test]
fn a_real_validator_accepts_a_checked_plan_and_refuses_unknown_keys() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/plans/example.yaml"
    ))
    .expect("the example plan");
    let plan = greenlight_workflow::plan::check(&text).expect("the example is valid");
    let good = serde_json::to_value(&plan).expect("a plan serialises");
    let validator =
        jsonschema::validator_for(&greenlight_workflow::plan::schema()).expect("a valid schema");
    let errors: Vec<String> = validator
        .iter_errors(&good)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");

    type Edit = fn(&mut serde_json::Value);
    let edits: [(&str, Edit); 4] = [
        ("top", |v| v["colour"] = "blue".into()),
        ("step", |v| v["steps"][0]["colour"] = "red".into()),
        ("template", |v| {
            v["steps"][2]["template"]["colour"] = "red".into()
        }),
        ("policy", |v| v["steps"][3]["policy"] = "most".into()),
    ];
    for (place, edit) in edits {
        let mut bad = good.clone();
        edit(&mut bad);
        assert!(
            !validator.is_valid(&bad),
            "an unknown key at {place} was accepted"
        );
    }
    // The plan has no null: an absent key says none, and the reader refuses `key: null`.
    let mut null = good.clone();
    null["description"] = serde_json::Value::Null;
    assert!(
        !validator.is_valid(&null),
        "a null description was accepted"
    );
    let mut null = good.clone();
    null["steps"][2]["truncate"] = serde_json::Value::Null;
    assert!(!validator.is_valid(&null), "a null truncate was accepted");
    assert!(
        !schema_text_has_null(),
        "the schema still allows null somewhere"
    );
    let mut kept = good.clone();
    kept["steps"][0]["x-note"] = "mine".into();
    kept["steps"][2]["template"]["x-note"] = "mine".into();
    assert!(validator.is_valid(&kept), "x- keys are allowed everywhere");
}

fn schema_text_has_null() -> bool {
    greenlight_workflow::plan::schema()
        .to_string()
        .contains("\"null\"")
}
