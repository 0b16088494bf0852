//! `greenlight workflow check` through the real binary: a valid plan's summary (exit 0), every
//! problem of a bad one at its file:line:column (exit 2), the same as JSON, and a file that is no
//! plan refused with its reason.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::path::PathBuf;

use greenlight_testkit::Cli;

fn example() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../greenlight-workflow/tests/plans/example.yaml");
    std::fs::read_to_string(path).unwrap()
}

/// Runs `greenlight workflow check …` in a directory holding `plan.yaml` with `text`.
fn check(text: &[u8], extra: &[&str]) -> greenlight_testkit::Run {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plan.yaml"), text).unwrap();
    let mut args = vec!["workflow", "check", "plan.yaml"];
    args.extend_from_slice(extra);
    Cli::new(args).current_dir(dir.path()).run()
}

#[test]
fn a_valid_plan_prints_its_summary_and_digest_and_exits_0() {
    let out = check(example().as_bytes(), &[]);
    let digest = out
        .stdout
        .lines()
        .nth(1)
        .unwrap()
        .strip_prefix("digest ")
        .unwrap()
        .to_owned();
    assert!(
        digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
        "{digest}"
    );
    insta::assert_snapshot!(out.render().replace(&digest, "[DIGEST]"), @r"
    exit: 0
    --- stdout
    PLAN fix-modules valid: 7 steps, 1 fan-out (3 members), worst case 8 dispatch units
    digest [DIGEST]
    --- stderr
    ");
    let json = check(example().as_bytes(), &["--json"]);
    assert_eq!(json.code, 0);
    let doc = json.json();
    assert_eq!(doc["valid"], true);
    assert_eq!(doc["digest"], digest.as_str(), "one digest in both forms");
    assert_eq!(doc["summary"]["worstCaseDispatches"], 8);
    assert_eq!(doc["summary"]["fanouts"], 1);
}

#[test]
fn every_problem_is_printed_at_its_file_line_and_column_and_exits_2() {
    let bad = example()
        .replace("maxFanout: 2", "maxFanout: 0")
        .replace("resumeArg: approval", "resumeArg: approve-it")
        .replace("    for: fix\n    policy", "    for: fixx\n    policy")
        .replace("x-owner:", "owner:");
    let out = check(bad.as_bytes(), &[]);
    insta::assert_snapshot!(out.render(), @r"
    exit: 2
    --- stdout
    --- stderr
    plan.yaml:17:1: unknown key `owner` in the plan; allowed: workflow, name, description, base, agent, model, args, budget, steps (or an `x-` key of your own)
    plan.yaml:31:16: pause `approve` resumes with argument `approve-it`, which `args` does not declare; add `approve-it:` under `args`
    plan.yaml:32:9: fan-out `fix` has no join; add a step `kind: join` with `for: fix` and a policy
    plan.yaml:36:16: `maxFanout` must be from 1 to 64, found 0
    plan.yaml:44:10: step `fixed` is `for` `fixx`, which is no step of this plan
    greenlight: 5 problems in plan.yaml; nothing was run
    ");
    let json = check(bad.as_bytes(), &["--json"]);
    assert_eq!(json.code, 2);
    assert_eq!(json.stderr, "", "--json speaks on stdout only");
    let doc = json.json();
    assert_eq!(doc["valid"], false);
    let problems = doc["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 5);
    assert_eq!(problems[3]["line"], 36);
    assert_eq!(problems[3]["column"], 16);
    assert!(
        problems[3]["message"]
            .as_str()
            .unwrap()
            .contains("maxFanout")
    );
}

#[test]
fn a_file_that_is_no_plan_is_refused_with_its_reason() {
    let not_utf8 = check(b"workflow: 1\nname: \xff\n", &[]);
    assert_eq!(not_utf8.code, 2);
    assert!(
        not_utf8.stderr.contains("plan.yaml") && not_utf8.stderr.contains("not UTF-8"),
        "{}",
        not_utf8.stderr
    );
    let dir = tempfile::tempdir().unwrap();
    let missing = Cli::new(["workflow", "check", "gone.yaml"])
        .current_dir(dir.path())
        .run();
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("cannot read the plan gone.yaml"),
        "{}",
        missing.stderr
    );
    let directory = Cli::new(["workflow", "check", "."])
        .current_dir(dir.path())
        .run();
    assert_eq!(directory.code, 2);
    assert!(
        directory.stderr.contains("not a regular file"),
        "{}",
        directory.stderr
    );
    let syntax = check(b"workflow: 1\nsteps: [\n", &[]);
    assert_eq!(syntax.code, 2);
    assert!(syntax.stderr.starts_with("plan.yaml:"), "{}", syntax.stderr);
    assert!(
        syntax.stderr.contains("not valid YAML"),
        "{}",
        syntax.stderr
    );
}
