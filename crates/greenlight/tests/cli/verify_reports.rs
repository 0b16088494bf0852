//! `greenlight verify --junit FILE` and `--github` through the real binary: the JUnit file read
//! back with quick-junit's reader (flaky and rerun elements included), the GitHub annotations
//! snapshot, and GitHub's per-step annotation limits on a 500-failure run.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::fmt::Write as _;
use std::time::Duration;

use greenlight_testkit::TempRepo;
use quick_junit::{FlakyOrRerun, NonSuccessKind, Report, TestCase, TestCaseStatus};

/// A gate that fails on its first run and passes on the next (a marker in HOME remembers).
fn flaky(marker: &str) -> String {
    format!(
        "test -f \"$HOME/{marker}\" && echo second run passed || {{ touch \"$HOME/{marker}\"; echo first run broke; exit 7; }}"
    )
}

fn read_junit(repo: &TempRepo, rel: &str) -> Report {
    let xml = repo.read(rel).expect("the JUnit file was written");
    Report::deserialize_from_str(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"))
}

fn case<'a>(report: &'a Report, name: &str) -> &'a TestCase {
    report.test_suites[0]
        .test_cases
        .iter()
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("no test case {name}"))
}

fn tap(failures: usize, passes: usize) -> String {
    let mut out = String::from("TAP version 13\n");
    let mut n = 0;
    for _ in 0..passes {
        n += 1;
        let _ = writeln!(out, "ok {n} - passes {n}");
    }
    for i in 0..failures {
        n += 1;
        let _ = write!(
            out,
            "not ok {n} - case {i}\n  ---\n  operator: equal\n  expected: {i}\n  actual:   {}\n  at: Test.<anonymous> (test/t{}.js:{}:5)\n  ...\n",
            i + 1,
            i % 5,
            i + 9
        );
    }
    let _ = write!(
        out,
        "\n1..{n}\n# tests {n}\n# pass  {passes}\n# fail  {failures}\n"
    );
    out
}

fn tsc(errors: usize) -> String {
    let mut out = String::new();
    for i in 0..errors {
        let _ = writeln!(
            out,
            "src/m{}.ts({},{}): error TS2322: Type 'string' is not assignable to type 'number'.",
            i % 7,
            i + 1,
            i % 13 + 1
        );
    }
    out
}

#[test]
fn junit_report_reads_back_with_one_case_per_gate_and_flaky_runs() {
    let repo = TempRepo::worktree_with_commit();
    repo.write("tap.txt", tap(2, 1));
    let yaml = format!(
        "version: 1
gates:
  - id: pass
    command: echo fine
  - id: digest
    command: cat tap.txt; exit 1
  - id: twice
    command: echo still broken; exit 4
    retryOnFail: 1
  - id: flaky-pass
    command: '{}'
    retryOnFail: 1
    flakyIsPass: true
  - id: flaky-fail
    command: '{}'
    retryOnFail: 1
",
        flaky("m1"),
        flaky("m2")
    );
    repo.verify_yaml(&yaml);
    let out = repo.greenlight(["verify", "--junit", "reports/junit.xml"]);
    assert_eq!(out.code, 20, "{}", out.render());
    // stdout keeps the line contract.
    assert!(
        out.lines()
            .iter()
            .all(|l| l.starts_with("GATE ") || l.starts_with("RESULT ")),
        "{}",
        out.stdout
    );
    let report = read_junit(&repo, "reports/junit.xml");
    let names: Vec<&str> = report.test_suites[0]
        .test_cases
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "work-evidence",
            "pass",
            "digest",
            "twice",
            "flaky-pass",
            "flaky-fail"
        ]
    );
    assert_eq!(report.tests, 6);
    assert_eq!(report.failures, 3, "digest, twice, flaky-fail");

    assert!(matches!(
        case(&report, "work-evidence").status,
        TestCaseStatus::Success { .. }
    ));
    let pass = case(&report, "pass");
    assert!(
        matches!(&pass.status, TestCaseStatus::Success { flaky_runs } if flaky_runs.is_empty())
    );
    assert!(pass.time.is_some(), "time is the gate's duration");
    assert_eq!(pass.properties[0].name.as_str(), "command");
    assert_eq!(pass.properties[0].value.as_str(), "echo fine");

    // A recognised failure's text is its compact digest.
    let TestCaseStatus::NonSuccess {
        kind,
        message,
        description,
        reruns,
        ..
    } = &case(&report, "digest").status
    else {
        panic!("digest must fail")
    };
    assert_eq!(*kind, NonSuccessKind::Failure);
    assert_eq!(message.as_ref().unwrap().as_str(), "exit 1");
    assert_eq!(
        description.as_ref().unwrap().as_str(),
        "exit 1 · tap · 1 passed, 2 failed, 0 skipped\nFAIL case 0 (test/t0.js:9): operator: equal, expected: 0, actual: 1\nFAIL case 1 (test/t1.js:10): operator: equal, expected: 1, actual: 2"
    );
    assert!(reruns.runs.is_empty());

    // Failed twice: the retry is a <rerunFailure>, with its own output.
    let TestCaseStatus::NonSuccess {
        description,
        reruns,
        ..
    } = &case(&report, "twice").status
    else {
        panic!("twice must fail")
    };
    assert_eq!(description.as_ref().unwrap().as_str(), "still broken");
    assert_eq!(reruns.kind, FlakyOrRerun::Rerun);
    assert_eq!(reruns.runs.len(), 1);
    assert_eq!(reruns.runs[0].message.as_ref().unwrap().as_str(), "exit 4");

    // FLAKY with flakyIsPass: a success carrying the failed run as <flakyFailure>.
    let flaky_pass = case(&report, "flaky-pass");
    let TestCaseStatus::Success { flaky_runs } = &flaky_pass.status else {
        panic!("flaky-pass must be a success: {:?}", flaky_pass.status)
    };
    assert_eq!(flaky_runs.len(), 1);
    assert_eq!(flaky_runs[0].kind, NonSuccessKind::Failure);
    assert_eq!(flaky_runs[0].message.as_ref().unwrap().as_str(), "exit 7");
    assert_eq!(
        flaky_runs[0].description.as_ref().unwrap().as_str(),
        "first run broke"
    );
    assert!(flaky_runs[0].time.is_some());

    // FLAKY without flakyIsPass: a failure whose failed run is still a <flakyFailure>.
    let TestCaseStatus::NonSuccess {
        message,
        ty,
        reruns,
        ..
    } = &case(&report, "flaky-fail").status
    else {
        panic!("flaky-fail must fail")
    };
    assert_eq!(ty.as_ref().unwrap().as_str(), "flaky");
    assert!(
        message
            .as_ref()
            .unwrap()
            .as_str()
            .contains("flakyIsPass is false"),
        "{message:?}"
    );
    assert_eq!(reruns.kind, FlakyOrRerun::Flaky);
    assert_eq!(reruns.runs.len(), 1);
    let xml = repo.read("reports/junit.xml").unwrap();
    assert_eq!(xml.matches("<flakyFailure").count(), 2, "{xml}");
    assert_eq!(xml.matches("<rerunFailure").count(), 1, "{xml}");
}

#[test]
fn junit_report_marks_skips_and_timeouts() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: slow\n    command: sleep 30\n    timeoutSec: 1\noptions:\n  requireEnvClean: true\n",
    );
    let mut cmd = repo.command(["verify", "--junit", "j.xml"]);
    cmd.env("GREENLIGHT_KILL_GRACE_MS", "200");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(20));
    let report = read_junit(&repo, "j.xml");
    let slow = case(&report, "slow");
    let TestCaseStatus::NonSuccess { ty, message, .. } = &slow.status else {
        panic!("a timeout fails")
    };
    assert_eq!(ty.as_ref().unwrap().as_str(), "timeout");
    assert_eq!(
        message.as_ref().unwrap().as_str(),
        "timed out after 1s (exit 124)"
    );
    assert!(slow.time.unwrap() >= Duration::from_millis(900));
    assert!(matches!(
        case(&report, "env-clean").status,
        TestCaseStatus::Skipped { .. }
    ));
}

#[test]
fn junit_report_of_a_broken_config_says_why_nothing_ran() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: a\n    command: \"true\"\n    retryOnFail: yes\n",
    );
    let out = repo.greenlight(["verify", "--junit", "j.xml", "--github"]);
    assert_eq!(out.code, 2);
    let report = read_junit(&repo, "j.xml");
    let TestCaseStatus::NonSuccess {
        kind, description, ..
    } = &case(&report, "config").status
    else {
        panic!("config must be an error")
    };
    assert_eq!(*kind, NonSuccessKind::Error);
    assert!(
        description
            .as_ref()
            .unwrap()
            .as_str()
            .contains("retryOnFail")
    );
    assert!(
        out.stderr.lines().any(
            |l| l.starts_with("::error title=greenlight config::") && l.contains("retryOnFail")
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn an_unwritable_junit_path_fails_the_run_loudly() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: a\n    command: \"true\"\n");
    repo.write("blocker", "a file, not a directory\n");
    let out = repo.greenlight(["verify", "--junit", "blocker/j.xml"]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(
        out.stderr.contains("--junit blocker/j.xml"),
        "{}",
        out.stderr
    );
}

/// The workflow-command lines of a run's stderr.
fn workflow_commands(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("::")).collect()
}

#[test]
fn github_annotations_snapshot() {
    let repo = TempRepo::worktree_with_commit();
    repo.write("tap.txt", tap(2, 1));
    repo.write(
        "tsc.txt",
        "src/a.ts(2,9): error TS2322: Type '50%, more' is not assignable to type 'number'.\nsrc/b,c.ts(3,8): error TS2345: Argument of type 'string' is not assignable to parameter of type 'number'.\n",
    );
    let yaml = format!(
        "version: 1
gates:
  - id: ok
    command: \"true\"
  - id: types
    command: cat tsc.txt; exit 2
  - id: tests
    command: cat tap.txt; exit 1
  - id: raw
    command: 'printf \"line one\\nline: two, 100%%\\n\"; exit 5'
  - id: wobbly
    command: '{}'
    retryOnFail: 1
    flakyIsPass: true
",
        flaky("m")
    );
    repo.verify_yaml(&yaml);
    let out = repo.greenlight(["verify", "--github"]);
    assert_eq!(out.code, 20, "{}", out.render());
    insta::assert_snapshot!(out.stdout, @r"
    GATE work-evidence PASS commits=1 uncommitted=3
    GATE ok PASS exit=0 duration=0s
    GATE types FAIL exit=2 duration=0s
    GATE tests FAIL exit=1 duration=0s
    GATE raw FAIL exit=5 duration=0s
    GATE wobbly FLAKY exit=7,0 duration=0s,0s
    RESULT failed
    ");
    // Durations are whole seconds and a loaded machine may round one up.
    let durations = regex::Regex::new(r"duration=[0-9s,]+").unwrap();
    let commands = workflow_commands(&out.stderr).join("\n");
    let commands = durations.replace_all(&commands, "duration=[D]");
    insta::assert_snapshot!(commands, @r#"
    ::error file=src/a.ts,line=2,col=9,title=types%3A TS2322::Type '50%25, more' is not assignable to type 'number'.
    ::error file=src/b%2Cc.ts,line=3,col=8,title=types%3A TS2345::Argument of type 'string' is not assignable to parameter of type 'number'.
    ::error title=gate types failed::GATE types FAIL exit=2 duration=[D]%0Acommand: cat tsc.txt; exit 2%0Aexit 2 · tsc · 2 errors, 0 warnings%0Aerror[TS2322] src/a.ts:2:9: Type '50%25, more' is not assignable to type 'number'.%0Aerror[TS2345] src/b,c.ts:3:8: Argument of type 'string' is not assignable to parameter of type 'number'.
    ::error file=test/t0.js,line=9,title=tests%3A case 0::operator: equal, expected: 0, actual: 1
    ::error file=test/t1.js,line=10,title=tests%3A case 1::operator: equal, expected: 1, actual: 2
    ::error title=gate tests failed::GATE tests FAIL exit=1 duration=[D]%0Acommand: cat tap.txt; exit 1%0Aexit 1 · tap · 1 passed, 2 failed, 0 skipped%0AFAIL case 0 (test/t0.js:9): operator: equal, expected: 0, actual: 1%0AFAIL case 1 (test/t1.js:10): operator: equal, expected: 1, actual: 2
    ::error title=gate raw failed::GATE raw FAIL exit=5 duration=[D]%0Acommand: printf "line one\nline: two, 100%25%25\n"; exit 5%0Alast lines of output:%0Aline one%0Aline: two, 100%25
    ::warning title=gate wobbly flaky::GATE wobbly FLAKY exit=7,0 duration=[D]%0Afailed, then passed on its retry (flakyIsPass: true)%0Acommand: test -f "$HOME/m" && echo second run passed || { touch "$HOME/m"; echo first run broke; exit 7; }
    "#);
}

#[test]
fn github_annotations_stay_within_the_per_step_limits_on_500_failures() {
    let repo = TempRepo::worktree_with_commit();
    repo.write("tap.txt", tap(500, 0));
    repo.write("tsc.txt", tsc(500));
    // The outputs are real recognised formats, as `greenlight digest` says.
    for (file, code, format) in [("tap.txt", "1", "tap"), ("tsc.txt", "2", "tsc")] {
        let digest = repo.greenlight(["digest", "--json", "--exit-code", code, file]);
        let doc: serde_json::Value = serde_json::from_str(&digest.stdout).unwrap();
        assert_eq!(doc["classification"], "recognised", "{file}: {doc}");
        assert_eq!(doc["format"], format);
        let items = doc["failures"].as_array().unwrap().len()
            + doc["diagnostics"].as_array().unwrap().len();
        assert_eq!(items, 500, "{file}");
    }
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: tests\n    command: cat tap.txt; exit 1\n  - id: types\n    command: cat tsc.txt; exit 2\n",
    );
    let out = repo.greenlight(["verify", "--github"]);
    assert_eq!(out.code, 20, "{}", out.render());
    let commands = workflow_commands(&out.stderr);
    let errors = commands
        .iter()
        .filter(|l| l.starts_with("::error "))
        .count();
    let warnings = commands
        .iter()
        .filter(|l| l.starts_with("::warning "))
        .count();
    assert!(errors <= 10, "{errors} error annotations");
    assert!(warnings <= 10, "{warnings} warning annotations");
    assert_eq!(errors, 10, "the room is used");
    for id in ["tests", "types"] {
        assert_eq!(
            commands
                .iter()
                .filter(|l| l.starts_with(&format!("::error title=gate {id} failed::")))
                .count(),
            1,
            "one summary for {id}"
        );
    }
    let notices: Vec<&&str> = commands
        .iter()
        .filter(|l| l.starts_with("::notice "))
        .collect();
    assert_eq!(notices.len(), 1, "{commands:#?}");
    assert!(
        notices[0].contains("992 error and 0 warning annotation(s) left out"),
        "{}",
        notices[0]
    );
    // Every annotation is one line, whatever the gate printed.
    for line in &commands {
        assert!(line.len() < 8 * 1024, "{} bytes", line.len());
    }
}

/// The stderr block that stands before the raw tail when the digest cannot stand in for the
/// output: a real `go test` run whose results were glued to the tests' own output (the digest
/// is partial), under a tail too small to hold them. Every failure the digest parsed is named
/// above the tail, and the block says it is not complete.
#[test]
fn a_partial_digest_names_every_parsed_failure_before_the_tail() {
    let repo = TempRepo::worktree_with_commit();
    let output = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../greenlight-digest/tests/fixtures/go-test/glue/output.txt"),
    )
    .unwrap();
    repo.write("go-test.txt", &output);
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: unit\n    command: cat go-test.txt; exit 1\noptions:\n  maxLogTailBytes: 120\n",
    );
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 20, "{}", out.render());
    let start = out
        .stderr
        .find("--- gate unit (FAIL exit=1): failures parsed from")
        .unwrap_or_else(|| panic!("no block of parsed failures:\n{}", out.render()));
    let tail = out.stderr[start..]
        .find("--- gate unit (FAIL exit=1): last 120 of")
        .map(|at| start + at)
        .unwrap_or_else(|| panic!("no tail after the block:\n{}", out.render()));
    let block = &out.stderr[start..tail];
    for name in ["TestFirst", "TestA", "TestC", "TestY", "TestE/bad"] {
        assert!(block.contains(name), "{name} is not named:\n{block}");
    }
    assert!(
        block.contains(
            "(this list is not complete: greenlight could not read all of the output; its tail follows)"
        ),
        "{block}"
    );
    // The tail alone would not have named them all: the block is what the reader gets.
    let tail_text = &out.stderr[tail..];
    assert!(!tail_text.contains("TestFirst"), "{tail_text}");
}

/// A gate's digest gives the files under the repository relative to it, whatever the tool
/// printed: tsc run with absolute paths reads as `src/a.ts`, a path outside stays as it is.
#[test]
fn a_gate_s_digest_names_repository_files_relative_to_the_repository() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: types\n    command: 'printf \"%s\\n\" \"$PWD/src/a.ts(2,9): error TS2304: Cannot find name foo.\" \"/elsewhere/b.ts(3,8): error TS2304: Cannot find name bar.\"; exit 2'\n",
    );
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 20, "{}", out.render());
    assert!(
        out.stderr
            .contains("error[TS2304] src/a.ts:2:9: Cannot find name foo.\n"),
        "{}",
        out.render()
    );
    assert!(
        out.stderr
            .contains("error[TS2304] /elsewhere/b.ts:3:8: Cannot find name bar.\n"),
        "{}",
        out.render()
    );
}
