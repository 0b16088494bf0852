//! A runner's marker glued to the end of a test's unterminated output (`loading fixtures...
//! --- FAIL: TestC (0.00s)`): in every format the digest lists that failure or is not
//! `recognised`, and a listing that disagrees with the run's own count is never `recognised`.
//! Each case is a real capture of the tool (`scripts/capture-fixtures.sh`).

mod common;

use greenlight_digest::{Classification, Digest, DigestOptions, DigestReason, digest};

fn fixture(id: &str) -> common::Fixture {
    common::all()
        .into_iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("fixture {id} exists"))
}

fn names(d: &Digest) -> Vec<&str> {
    d.failures.iter().map(|f| f.name.as_str()).collect()
}

/// The reasons' JSON names (a reason this suite adds is named before it exists).
fn reasons(d: &Digest) -> Vec<&'static str> {
    d.reasons.iter().map(|r| r.name()).collect()
}

fn message<'a>(d: &'a Digest, name: &str) -> &'a str {
    d.failures
        .iter()
        .find(|f| f.name == name)
        .and_then(|f| f.message.as_deref())
        .unwrap_or_default()
}

/// The case: TestB prints without a newline, so TestC's `--- FAIL` starts mid-line.
/// Without `-v` nothing can tell it from a test printing the same words (TestD prints
/// `report: --- FAIL: TestY (0.00s)`), so both are listed and the digest is partial.
#[test]
fn go_test_lists_a_failure_glued_to_a_tests_output_and_never_calls_it_complete() {
    let d = fixture("go-test/glue-one").digest();
    assert_eq!(names(&d), ["TestA", "TestC", "TestY", "TestE/bad"], "{d:?}");
    assert_eq!(message(&d, "TestC"), "Double(3) = 6, want 7");
    assert_eq!(d.classification, Classification::Partial);
    assert!(reasons(&d).contains(&"marker-mid-line"), "{:?}", d.reasons);
    assert!(d.compact.is_none());

    // The whole module: the first package's only line of output before its log is the glued
    // `--- FAIL: TestFirst`, which the parser must see before it knows the run is go's.
    let d = fixture("go-test/glue").digest();
    assert_eq!(
        names(&d),
        ["TestFirst", "TestA", "TestC", "TestY", "TestE/bad"],
        "{d:?}"
    );
    assert_eq!(message(&d, "TestFirst"), "Triple(2) = 6, want 7");
    assert_eq!(d.classification, Classification::Partial);
    assert!(reasons(&d).contains(&"marker-mid-line"), "{:?}", d.reasons);
}

/// With `-v` (and `-json`, which runs the tests with `-v`), a glued result or `=== RUN` counts
/// when it names the test that is running: TestB's glued PASS is counted, TestE's glued
/// subtest start is read, TestFirst's glued log line is its message, and neither TestD's log
/// (`--- FAIL: TestX`) nor its print (`--- FAIL: TestY`) is a failure.
#[test]
fn go_test_v_reads_glued_lines_of_the_running_test_and_counts_every_result() {
    for id in ["go-test/glue-v", "go-test/glue-json"] {
        let d = fixture(id).digest();
        // `-json` printed the packages in the order they finished.
        let mut listed = names(&d);
        listed.sort_unstable();
        assert_eq!(
            listed,
            ["TestA", "TestC", "TestE/bad", "TestFirst"],
            "{id}: {d:?}"
        );
        assert_eq!(message(&d, "TestFirst"), "Triple(2) = 6, want 7", "{id}");
        let s = d.summary.clone().expect("summary");
        // TestB, TestD and TestE/ok passed.
        assert_eq!(
            (s.passed, s.failed, s.skipped),
            (Some(3), Some(4), Some(0)),
            "{id}"
        );
        assert_eq!(
            d.classification,
            Classification::Recognised,
            "{id}: {:?}",
            d.reasons
        );
    }
}

/// A `go test -v` test that started and printed no result (its result line was lost, however)
/// makes the digest partial: the passes and failures read cannot be the whole run.
#[test]
fn go_test_v_with_a_test_that_never_ended_is_partial() {
    let f = fixture("go-test/glue-v");
    let text = String::from_utf8(f.output.clone()).expect("utf-8");
    for lost in [
        "--- PASS: TestD (0.00s)\n",
        "loading fixtures... --- PASS: TestB (0.00s)\n",
    ] {
        assert!(text.contains(lost));
        let out = text.replacen(lost, "", 1);
        let d = digest(out.as_bytes(), Some(1), &DigestOptions::default());
        assert_eq!(d.classification, Classification::Partial, "{lost}");
        assert!(
            reasons(&d).contains(&"count-mismatch"),
            "{lost}: {:?}",
            d.reasons
        );
    }
}

/// pytest ends its own progress line after a test's output (`-s`), and its failure blocks,
/// short summary and counts start their lines: the glued output changes nothing, and a test
/// printing pytest's `FAILED …` line is not a failure.
#[test]
fn pytest_output_glued_to_its_progress_line_changes_nothing() {
    for id in ["pytest/glue-s", "pytest/glue-s-v"] {
        let d = fixture(id).digest();
        assert_eq!(
            names(&d),
            ["test_glue.py::test_a", "test_glue.py::test_c"],
            "{id}"
        );
        assert_eq!(
            d.classification,
            Classification::Recognised,
            "{id}: {:?}",
            d.reasons
        );
        let s = d.summary.clone().expect("summary");
        assert_eq!((s.passed, s.failed), (Some(2), Some(2)), "{id}");
    }
}

/// jest's file header glued to a test's `process.stdout.write` is read (before, jest was not
/// recognised at all); both failures are listed.
#[test]
fn jest_file_header_glued_to_a_tests_output_is_read() {
    let d = fixture("jest/glue").digest();
    assert_eq!(names(&d), ["a", "c"], "{d:?}");
    assert_eq!(
        d.classification,
        Classification::Recognised,
        "{:?}",
        d.reasons
    );
}

/// TAP points carry free text, so `not ok 2 …` is not looked for mid-line: mocha's TAP
/// reporter glues it to the test's output, the point is lost, and its own count (`# fail 2`)
/// and plan (`1..3`) make the digest partial.
#[test]
fn a_tap_point_glued_to_a_tests_output_leaves_the_digest_partial() {
    let d = fixture("tap/mocha-glue").digest();
    assert_eq!(names(&d), ["glue a"], "{d:?}");
    assert_eq!(d.classification, Classification::Partial);
    for reason in ["count-mismatch", "failure-without-diagnostic"] {
        assert!(reasons(&d).contains(&reason), "{:?}", d.reasons);
    }
}

/// libtest's `test name ... FAILED` glued to a test's `print!` (with `--nocapture`) is not read
/// (a test's own output can hold those words); `test result:`'s count makes the digest partial.
#[test]
fn a_libtest_result_glued_to_a_tests_output_leaves_the_digest_partial() {
    // In parallel, whichever result was written next is glued (tests::a's in this capture);
    // with one thread, the failing test's own.
    for (id, listed) in [
        ("cargo-test/glue-nocapture", 1),
        ("cargo-test/glue-nocapture-1", 0),
    ] {
        let d = fixture(id).digest();
        assert_eq!(d.failures.len(), listed, "{id}: {:?}", names(&d));
        assert_eq!(d.summary.as_ref().and_then(|s| s.failed), Some(2), "{id}");
        assert_eq!(d.classification, Classification::Partial, "{id}");
        assert!(
            d.reasons.contains(&DigestReason::FailureWithoutDiagnostic),
            "{id}: {:?}",
            d.reasons
        );
    }
}

/// The safety net for every format whose summary counts failures: a test printing a line that
/// the parser takes for a failure header lists more failures than the run counts, and such a
/// digest is never `recognised`.
#[test]
fn more_failures_listed_than_the_summary_counts_is_never_recognised() {
    for (id, after, injected) in [
        // Inside a failure's captured output, a block header of pytest's.
        (
            "pytest/fail",
            "E       assert 4 == 5\n",
            "____________________ test_printed_header ____________________\n",
        ),
        // Inside a failure's captured stdout, a result line of libtest's.
        (
            "cargo-test/fail",
            "---- tests::adds stdout ----\n",
            "test tests::printed ... FAILED\n",
        ),
        // In a test's captured output, a status line of nextest's.
        (
            "nextest/fail",
            "    some captured stdout\n",
            "        FAIL [   0.001s] (8/7) digest-fail tests::printed\n",
        ),
        // After a traceback, a block header of unittest's.
        (
            "unittest/fail",
            "AssertionError: 4 != 5\n",
            "FAIL: test_printed (test_calc.CalcTest.test_printed)\n",
        ),
        // Inside a failure block, jest's, vitest's and bun's failure headers.
        (
            "jest/fail",
            "    Expected: 5\n",
            "  \u{25cf} printed by a test\n",
        ),
        (
            "vitest/fail",
            "AssertionError: expected 4 to be 5 // Object.is equality\n",
            " FAIL  math.test.ts > printed\n",
        ),
        (
            "bun-test/fail",
            "Received: 4\n",
            "(fail) printed [0.01ms]\n",
        ),
        // In node's closing list, a failed test's line.
        (
            "node-test/spec",
            "test at math.test.mjs:10:1\n",
            "\u{2716} printed (0.1ms)\n",
        ),
        // After a diff, a numbered block of mocha's; inside a YAML block, a TAP point.
        ("mocha/spec", "      -4\n", "  6) printed\n"),
        (
            "tap/tape",
            "    operator: equal\n",
            "    not ok 9 printed\n",
        ),
    ] {
        let f = fixture(id);
        let before = f.digest();
        assert_eq!(
            before.classification,
            Classification::Recognised,
            "{id}: {:?}",
            before.reasons
        );
        let text = String::from_utf8(f.output.clone()).expect("utf-8");
        assert!(text.contains(after), "{id}");
        let out = text.replacen(after, &format!("{after}{injected}"), 1);
        let d = digest(out.as_bytes(), Some(f.exit_code), &DigestOptions::default());
        assert!(d.failures.len() > before.failures.len(), "{id}: {d:?}");
        assert_eq!(d.classification, Classification::Partial, "{id}");
        assert!(
            reasons(&d).contains(&"count-mismatch"),
            "{id}: {:?}",
            d.reasons
        );
    }
}
