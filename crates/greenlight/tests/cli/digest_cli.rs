//! `greenlight digest` through the real binary: file, stdin and command modes, text and JSON.

use std::path::PathBuf;

use greenlight_testkit::Cli;

fn fixture(id: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../greenlight-digest/tests/fixtures")
        .join(id)
        .join("output.txt")
}

#[test]
fn a_failing_cargo_test_file_prints_its_compact_digest() {
    let path = fixture("cargo-test/fail");
    let out = Cli::new([
        "digest",
        "--exit-code",
        "101",
        path.to_str().unwrap_or_default(),
    ])
    .run();
    assert_eq!(out.code, 0);
    insta::assert_snapshot!(out.stdout, @r"
    exit 101 · cargo-test · 1 passed, 4 failed, 1 skipped
    FAIL tests::adds (src/lib.rs:17): assertion `left == right` failed; left: 3; right: 4
    FAIL tests::prints_then_fails (src/lib.rs:42): zero plus zero was 0
    FAIL tests::should_panic_but_does_not (src/lib.rs:33): test did not panic as expected
    FAIL tests::unwraps_none (src/lib.rs:28): value must be present
    ");
}

#[test]
fn json_from_stdin_carries_the_contract_fields() {
    let bytes = std::fs::read(fixture("tsc/plain")).expect("fixture exists");
    let out = Cli::new(["digest", "--json", "--exit-code", "1", "-"])
        .stdin(bytes)
        .run();
    assert_eq!(out.code, 0);
    let v = out.json();
    for key in [
        "classification",
        "format",
        "exit_code",
        "summary",
        "failures",
        "diagnostics",
        "reasons",
        "compact",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["classification"], "recognised");
    assert_eq!(v["format"], "tsc");
    assert_eq!(v["diagnostics"][0]["code"], "TS2322");
    assert_eq!(v["diagnostics"][0]["line"], 2);
    assert_eq!(v["diagnostics"][0]["column"], 9);
}

/// A saved log of a failing run, digested without `--exit-code`, used to come out
/// `partial (summary-contradicts-exit-code)` because a missing exit code was taken for 0.
#[test]
fn without_exit_code_the_runs_own_summary_decides() {
    for (args, stdin) in [
        (vec!["digest", "--json", "-"], true),
        (vec!["digest", "--json"], true),
        (vec!["digest", "--json", "FILE"], false),
    ] {
        let path = fixture("pytest/fail");
        let bytes = std::fs::read(&path).expect("fixture exists");
        let args: Vec<&str> = args
            .iter()
            .map(|a| {
                if *a == "FILE" {
                    path.to_str().unwrap_or_default()
                } else {
                    a
                }
            })
            .collect();
        let mut cli = Cli::new(&args);
        if stdin {
            cli = cli.stdin(bytes.clone());
        }
        let out = cli.run();
        assert_eq!(out.code, 0, "{args:?}");
        let v = out.json();
        assert_eq!(v["classification"], "recognised", "{args:?}: {v}");
        assert_eq!(v["exit_code"], serde_json::Value::Null, "{args:?}");
        assert_eq!(v["exit_code_given"], false, "{args:?}");
        assert!(
            v["compact"]
                .as_str()
                .is_some_and(|c| c.starts_with("exit ? · pytest · ")),
            "{v}"
        );
    }
    let out = Cli::new(["digest", "--json", "--exit-code", "1", "-"])
        .stdin(std::fs::read(fixture("pytest/fail")).expect("fixture exists"))
        .run();
    let v = out.json();
    assert_eq!(v["exit_code_given"], true);
    assert_eq!(v["exit_code"], 1);
}

#[test]
fn a_budget_too_small_falls_back_to_the_tail() {
    let path = fixture("pytest/fail");
    let out = Cli::new([
        "digest",
        "--exit-code",
        "1",
        "--budget",
        "40",
        path.to_str().unwrap_or_default(),
    ])
    .run();
    let stdout = out.stdout;
    assert!(
        stdout
            .starts_with("exit 1 · pytest · recognised (the compact form does not fit the budget)"),
        "{stdout}"
    );
    assert!(stdout.contains("3 failed, 2 passed, 1 skipped"), "{stdout}");
}

#[test]
fn a_command_is_run_and_its_exit_code_passed_through() {
    let script = "printf 'running 1 test\\ntest a ... FAILED\\n\\nfailures:\\n\\n---- a stdout ----\\n' ; \
                  printf \"thread 'a' panicked at src/lib.rs:3:5:\\nboom\\n\" >&2 ; \
                  printf '\\nfailures:\\n    a\\n\\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\\n' ; exit 101";
    let out = Cli::new(["digest", "--", "sh", "-c", script]).run();
    assert_eq!(out.code, 101);
    insta::assert_snapshot!(out.stdout, @r"
    exit 101 · cargo-test · 0 passed, 1 failed, 0 skipped
    FAIL a (src/lib.rs:3): boom
    ");
}

#[test]
fn a_command_killed_by_a_signal_is_never_recognised() {
    let out = Cli::new([
        "digest",
        "--json",
        "--",
        "sh",
        "-c",
        "echo 'running 1 test'; kill -TERM $$",
    ])
    .run();
    assert_eq!(out.code, 128 + 15);
    let v = out.json();
    assert_eq!(v["exit_code"], serde_json::Value::Null);
    assert_eq!(v["classification"], "partial");
    assert!(
        v["reasons"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x == "no-exit-code")),
        "{v}"
    );
}

#[test]
fn unknown_output_passes_through_as_its_tail() {
    let out = Cli::new(["digest", "--exit-code", "3", "-"])
        .stdin(b"gear slipped\r\n\x1b[31mwidget broke\x1b[0m\n")
        .run();
    insta::assert_snapshot!(out.stdout, @r"
    exit 3 · no known format · unrecognised (no-known-format)
    --- last 2 lines of 2
    gear slipped
    widget broke
    ");
}

#[test]
fn bad_arguments_name_the_fault_and_the_way_out() {
    let out = Cli::new(["digest", "--format", "maven", "-"])
        .stdin(b"")
        .run();
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("unknown format `maven`; use auto or one of: cargo-test"),
        "{}",
        out.stderr
    );

    let out = Cli::new(["digest", "/nonexistent/output.txt"]).run();
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("cannot read `/nonexistent/output.txt`"),
        "{}",
        out.stderr
    );

    let out = Cli::new(["digest", "--", "greenlight-no-such-program"]).run();
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("cannot run `greenlight-no-such-program`"),
        "{}",
        out.stderr
    );
}

fn matcher_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../greenlight-digest/tests/fixtures/matchers")
        .join(format!("{name}.json"))
}

#[test]
fn a_matcher_file_reads_output_greenlight_has_no_parser_for() {
    // A Python traceback: no built-in format reads it (shellcheck's lines, this test's first
    // subject, have one of their own now).
    let output = fixture("matchers/runs/python-traceback");
    let python = matcher_file("python");
    let without = Cli::new([
        "digest",
        "--exit-code",
        "1",
        output.to_str().unwrap_or_default(),
    ])
    .run();
    assert!(
        without.stdout.contains("no known format"),
        "{}",
        without.stdout
    );

    let out = Cli::new([
        "digest",
        "--exit-code",
        "1",
        "--matcher",
        python.to_str().unwrap_or_default(),
        output.to_str().unwrap_or_default(),
    ])
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let first = out.stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("exit 1 · problem-matcher (python) · "),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("main.py:6") && out.stdout.contains("port must be a number"),
        "{}",
        out.stdout
    );

    let matcher = matcher_file("shellcheck-gcc");
    // A command's output reads through the matcher as well.
    let out = Cli::new([
        "digest",
        "--matcher",
        matcher.to_str().unwrap_or_default(),
        "--",
        "sh",
        "-c",
        "echo 'run.sh:2:7: error: Quote this. [SC2086]'; exit 1",
    ])
    .run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stdout.contains("error[SC2086] run.sh:2:7: Quote this."),
        "{}",
        out.stdout
    );
}

#[test]
fn a_matcher_file_github_would_refuse_is_named_with_its_place() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"problemMatcher": [{"owner": "x", "pattern": [{"regexp": "^(.*)$", "message": 4}]}]}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let output = fixture("matchers/runs/shellcheck-gcc");
    let output = output.to_str().unwrap_or_default();
    let out = Cli::new([
        "digest",
        "--matcher",
        bad.to_str().unwrap_or_default(),
        output,
    ])
    .run();
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("bad.json: problemMatcher[0].pattern[0]")
            && out.stderr.contains("`message` is group 4"),
        "{}",
        out.stderr
    );

    let out = Cli::new(["digest", "--matcher", "/nonexistent/m.json", output]).run();
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("cannot read the matcher file `/nonexistent/m.json`"),
        "{}",
        out.stderr
    );
}

/// A check's finding printed before a passing pytest run (`check; pytest`, whose exit code is
/// pytest's 0) was digested as a clean pytest run: the command line now says it was compound,
/// and a line no format reads makes such a digest partial.
#[test]
fn a_compound_command_with_a_line_no_format_reads_is_not_complete() {
    let path = fixture("pytest/compound-unread");
    let path = path.to_str().unwrap_or_default();
    let alone = Cli::new(["digest", "--json", "--exit-code", "0", path]).run();
    assert_eq!(alone.json()["classification"], "recognised");
    assert_eq!(alone.json()["scope"], serde_json::Value::Null);
    let line = "python3 check_config.py; python3 -m pytest -p no:cacheprovider";
    let out = Cli::new([
        "digest",
        "--json",
        "--exit-code",
        "0",
        "--command",
        line,
        path,
    ])
    .run();
    assert_eq!(out.code, 0);
    let v = out.json();
    assert_eq!(v["classification"], "partial");
    assert_eq!(v["scope"], "compound");
    assert_eq!(v["reasons"], serde_json::json!(["unclaimed-output"]));
    assert_eq!(v["compact"], serde_json::Value::Null);
}

/// `-- sh -c SCRIPT` is read as SCRIPT; a plain argv is one program.
#[test]
fn a_commands_scope_comes_from_what_it_runs() {
    let compound = Cli::new(["digest", "--json", "--", "sh", "-c", "echo a; echo b"]).run();
    assert_eq!(compound.json()["scope"], "compound");
    let simple = Cli::new(["digest", "--json", "--", "echo", "a;b"]).run();
    assert_eq!(simple.json()["scope"], "simple");
}
