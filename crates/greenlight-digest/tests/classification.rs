//! The conservative rules, each driven from a real fixture: what turns a digest `partial` or
//! `unrecognised`, and the all-or-nothing compact form.

mod common;

use greenlight_digest::{
    Classification, DigestOptions, DigestReason, Format, StreamingDigester, digest,
};

fn fixture(id: &str) -> common::Fixture {
    common::all()
        .into_iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("fixture {id} exists"))
}

#[test]
fn a_run_cut_before_its_summary_is_partial() {
    let f = fixture("cargo-test/fail-no-fail-fast");
    let half = &f.output[..f.output.len() / 2];
    let d = digest(half, Some(101), &DigestOptions::default());
    assert_eq!(d.classification, Classification::Partial);
    assert!(
        d.reasons.contains(&DigestReason::NoSummary),
        "{:?}",
        d.reasons
    );
    assert_eq!(d.compact, None);
}

#[test]
fn the_exit_code_wins_over_a_summary_that_contradicts_it() {
    let pass = fixture("pytest/pass");
    let d = digest(&pass.output, Some(1), &DigestOptions::default());
    assert_eq!(d.classification, Classification::Partial);
    assert_eq!(d.reasons, vec![DigestReason::SummaryContradictsExitCode]);

    let fail = fixture("go-test/fail");
    let d = digest(&fail.output, Some(0), &DigestOptions::default());
    assert_eq!(d.reasons, vec![DigestReason::SummaryContradictsExitCode]);
}

#[test]
fn a_killed_run_is_never_recognised() {
    let f = fixture("cargo-test/pass");
    let d = digest(&f.output, None, &DigestOptions::default());
    assert_eq!(d.classification, Classification::Partial);
    assert_eq!(d.reasons, vec![DigestReason::NoExitCode]);
    assert_eq!(d.exit_code, None);
}

#[test]
fn a_build_step_then_tests_of_another_ecosystem_is_mixed() {
    let mut both = fixture("tsc/plain").output;
    both.extend_from_slice(&fixture("jest/fail").output);
    let d = digest(&both, Some(1), &DigestOptions::default());
    assert_eq!(d.format, Some(Format::Mixed));
    assert_eq!(d.formats, vec![Format::Jest, Format::Tsc]);
    assert_eq!(d.reasons, vec![DigestReason::MixedFormats]);
    // Nothing is dropped from a mixed digest: both tools' findings are there.
    assert_eq!(d.failures.len(), 2);
    assert_eq!(d.diagnostics.len(), 3);
}

#[test]
fn unknown_output_is_unrecognised_and_keeps_its_tail() {
    let text = b"building widgets\nwidget 3 broke: gear slipped\nsomething failed\n";
    let d = digest(text, Some(3), &DigestOptions::default());
    assert_eq!(d.classification, Classification::Unrecognised);
    assert_eq!(d.format, None);
    assert_eq!(d.reasons, vec![DigestReason::NoKnownFormat]);
    assert_eq!(
        d.tail,
        vec![
            "building widgets",
            "widget 3 broke: gear slipped",
            "something failed"
        ]
    );

    let d = digest(b"\n\n", Some(0), &DigestOptions::default());
    assert_eq!(d.reasons, vec![DigestReason::EmptyOutput]);
}

#[test]
fn significant_output_after_the_summary_makes_it_partial() {
    let mut out = fixture("pytest/fail").output;
    out.extend_from_slice(b"Traceback (most recent call last):\nRuntimeError: teardown crashed\n");
    let d = digest(&out, Some(1), &DigestOptions::default());
    assert_eq!(d.reasons, vec![DigestReason::OutputAfterSummary]);
}

#[test]
fn stray_lines_in_tsc_output_are_unparsed() {
    let mut out = fixture("tsc/pretty").output;
    let at = out.windows(5).position(|w| w == b"Found").unwrap_or(0);
    out.splice(
        at..at,
        b"Segmentation fault (core dumped)\n".iter().copied(),
    );
    let d = digest(&out, Some(1), &DigestOptions::default());
    assert!(
        d.reasons.contains(&DigestReason::UnparsedLines),
        "{:?}",
        d.reasons
    );
}

#[test]
fn budgets_make_the_digest_partial_never_silently_short() {
    let f = fixture("cargo-test/large");
    let small = DigestOptions {
        max_items: 2,
        ..DigestOptions::default()
    };
    let d = digest(&f.output, Some(101), &small);
    assert_eq!(d.failures.len(), 2);
    assert!(
        d.reasons.contains(&DigestReason::DiagnosticBudgetExceeded),
        "{:?}",
        d.reasons
    );

    let scan = DigestOptions {
        max_scan_bytes: 1000,
        ..DigestOptions::default()
    };
    let d = digest(&f.output, Some(101), &scan);
    assert!(
        d.reasons.contains(&DigestReason::ScanBudgetExceeded),
        "{:?}",
        d.reasons
    );
    assert_eq!(d.bytes, 1000);

    let line = DigestOptions {
        max_line_bytes: 20,
        ..DigestOptions::default()
    };
    let d = digest(&f.output, Some(101), &line);
    assert!(
        d.reasons.contains(&DigestReason::LineTooLong),
        "{:?}",
        d.reasons
    );
}

#[test]
fn the_compact_form_is_all_or_nothing() {
    let f = fixture("nextest/fail");
    let d = f.digest();
    let full = d
        .compact(usize::MAX)
        .expect("a recognised digest has a compact form");
    assert_eq!(d.compact(full.len()).as_deref(), Some(full.as_str()));
    assert_eq!(d.compact(full.len() - 1), None);
    for failure in &d.failures {
        assert!(
            full.contains(&failure.name),
            "{} missing from {full}",
            failure.name
        );
    }
}

#[test]
fn on_large_runs_the_compact_form_is_twenty_times_smaller_and_names_every_failure() {
    let mut checked = 0;
    for f in common::all()
        .into_iter()
        .filter(|f| f.id.ends_with("/large"))
    {
        let d = f.digest();
        let compact = d
            .compact
            .clone()
            .unwrap_or_else(|| panic!("{}: {:?}", f.id, d.reasons));
        assert!(
            compact.len() * 20 <= f.output.len(),
            "{}: compact {} bytes vs raw {} bytes",
            f.id,
            compact.len(),
            f.output.len()
        );
        assert!(!d.failures.is_empty(), "{}", f.id);
        for failure in &d.failures {
            assert!(
                compact.contains(&failure.name),
                "{}: {} missing",
                f.id,
                failure.name
            );
        }
        checked += 1;
    }
    assert!(checked >= 5, "one large run per ecosystem, found {checked}");
}

#[test]
fn a_forced_format_reads_only_that_format() {
    let f = fixture("jest/fail");
    let forced = DigestOptions {
        format: Some(Format::Tsc),
        ..DigestOptions::default()
    };
    let d = digest(&f.output, Some(1), &forced);
    assert_eq!(d.classification, Classification::Unrecognised);
    let forced = DigestOptions {
        format: Some(Format::Jest),
        ..DigestOptions::default()
    };
    assert_eq!(
        digest(&f.output, Some(1), &forced).classification,
        Classification::Recognised
    );
}

#[test]
fn windows_line_endings_and_progress_overwrites_read_the_same() {
    let f = fixture("pytest/fail");
    let crlf: Vec<u8> = String::from_utf8_lossy(&f.output)
        .replace('\n', "\r\n")
        .into_bytes();
    let mut with_progress = b"collecting 1 item\rcollecting 3 items\r".to_vec();
    with_progress.extend_from_slice(&crlf);
    let plain = f.digest();
    let d = digest(&with_progress, Some(1), &DigestOptions::default());
    assert_eq!(d.failures, plain.failures);
    assert_eq!(d.classification, plain.classification);
}

#[test]
fn streaming_in_small_chunks_gives_the_same_digest() {
    for f in common::all() {
        let whole = f.digest();
        let mut s = StreamingDigester::new(f.options());
        for chunk in f.output.chunks(7) {
            s.push(chunk);
        }
        assert_eq!(s.finish(Some(f.exit_code)), whole, "{}", f.id);
    }
}

/// Found by the property test: a TAP plan left short, every point `ok`, exit 1. The run failed
/// and nothing in the output says why, so it cannot be `recognised`.
#[test]
fn a_failed_run_with_no_failure_or_error_to_show_is_not_recognised() {
    let d = greenlight_digest::digest(
        b"ok 2 - other\n\0running 2 tests\n1..2\n",
        Some(1),
        &greenlight_digest::DigestOptions::default(),
    );
    assert_ne!(
        d.classification,
        greenlight_digest::Classification::Recognised,
        "{d:?}"
    );
    assert!(
        d.reasons
            .contains(&greenlight_digest::DigestReason::FailureWithoutDiagnostic),
        "{d:?}"
    );
    assert_eq!(d.compact, None);
}
