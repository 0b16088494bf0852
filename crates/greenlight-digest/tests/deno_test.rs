//! `deno test`'s output is complete only as its own record says: the closing count, a block in
//! ERRORS and a name in FAILURES for every failure, nothing after deno's closing lines. Each
//! case takes a real capture and breaks one of those.

mod common;

use greenlight_digest::{Classification, DigestReason, digest};

fn fixture(id: &str) -> common::Fixture {
    common::all()
        .into_iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("fixture {id} exists"))
}

/// `fixture`'s output with `edit` applied to its text, digested with exit code `code`.
fn edited(id: &str, code: i32, edit: impl Fn(&str) -> String) -> greenlight_digest::Digest {
    let f = fixture(id);
    let text = edit(&String::from_utf8_lossy(&f.output));
    assert_ne!(
        text.as_bytes(),
        f.output.as_slice(),
        "{id}: the edit changed nothing"
    );
    digest(text.as_bytes(), Some(code), &f.options())
}

fn partial_with(d: &greenlight_digest::Digest, reason: DigestReason) {
    assert_eq!(d.classification, Classification::Partial, "{:?}", d.reasons);
    assert!(
        d.reasons.contains(&reason),
        "{:?} lacks {reason:?}",
        d.reasons
    );
}

#[test]
fn every_failure_and_the_count_must_agree() {
    // A name dropped from the FAILURES list: fewer listed than the count requires.
    let d = edited("deno-test/fail", 1, |t| {
        t.replacen(
            "mean refuses an empty list => ./math_test.ts:12:6\nlists",
            "lists",
            1,
        )
    });
    partial_with(&d, DigestReason::CountMismatch);
    // A failure's ERRORS block missing: listed, but with nothing to say why it failed.
    let d = edited("deno-test/fail", 1, |t| {
        let start = t.find("mean refuses an empty list =>").unwrap_or_default();
        let end = t[start..].find("\n\n").map_or(start, |e| start + e + 2);
        format!("{}{}", &t[..start], &t[end..])
    });
    partial_with(&d, DigestReason::CountMismatch);
    // One failed test more counted than listed.
    let d = edited("deno-test/fail", 1, |t| {
        t.replace("| 3 failed (1 step) |", "| 4 failed (1 step) |")
    });
    partial_with(&d, DigestReason::FailureWithoutDiagnostic);
    // A step's failure counted without the parent that failed because of it.
    let d = edited("deno-test/fail", 1, |t| {
        t.replace(" FAILED (due to 1 failed step)", " FAILED")
    });
    partial_with(&d, DigestReason::CountMismatch);
}

#[test]
fn the_closing_count_is_the_last_word() {
    let d = edited("deno-test/fail", 1, |t| {
        t.replace(
            "FAILED | 2 passed (1 step) | 3 failed (1 step) | 1 ignored (1s)\n",
            "",
        )
    });
    partial_with(&d, DigestReason::NoSummary);
    let d = edited("deno-test/fail", 1, |t| {
        format!("{t}copying the report to the cache\n")
    });
    partial_with(&d, DigestReason::OutputAfterSummary);
    let d = edited("deno-test/pass", 1, |t| t.replace("(144ms)", "(145ms)"));
    partial_with(&d, DigestReason::SummaryContradictsExitCode);
    // The type checker's own count must match the findings read.
    let d = edited("deno-test/type-error", 1, |t| {
        t.replace("Found 2 errors.", "Found 3 errors.")
    });
    partial_with(&d, DigestReason::CountMismatch);
}

/// A Rust backtrace deno prints after its closing error (`RUST_BACKTRACE=1`) is deno's own.
#[test]
fn deno_s_backtrace_after_its_closing_error_is_its_own() {
    let d = edited("deno-test/fail", 1, |t| {
        format!(
            "{t}\nStack backtrace:\n   0: <unknown>\n   1: deno::main\n             at ./cli/main.rs:3:4\n"
        )
    });
    assert_eq!(
        d.classification,
        Classification::Recognised,
        "{:?}",
        d.reasons
    );
    assert_eq!(d.failures.len(), 3);
}
