//! One test per class of evidence that used to mislead, each driven from real fixtures of
//! several tools: load errors, library frames, TAP details, mocha's spec reporter, Bun, closing
//! trailers, the values that explain a failure, and an exit code nobody gave.

mod common;

use greenlight_digest::{Classification, DigestOptions, Failure, Format, StreamingDigester};

fn fixture(id: &str) -> common::Fixture {
    common::all()
        .into_iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("fixture {id} exists"))
}

fn recognised(id: &str) -> Vec<Failure> {
    let d = fixture(id).digest();
    assert_eq!(
        d.classification,
        Classification::Recognised,
        "{id}: {:?}",
        d.reasons
    );
    d.failures
}

fn at(f: &Failure) -> (String, u32) {
    (
        f.file
            .clone()
            .unwrap_or_default()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
        f.line.unwrap_or(0),
    )
}

fn message(f: &Failure) -> &str {
    f.message.as_deref().unwrap_or_default()
}

/// Class 1: a test file that does not parse is reported at its own file and line, with the
/// error's own text (pytest used to point into `ast.py` with `File "…", line 8` as the message;
/// node said `'test failed'` at line 1; vitest pointed into esbuild).
#[test]
fn a_file_that_does_not_load_is_located_by_its_own_error() {
    for (id, file, line, text) in [
        (
            "pytest/syntax-error",
            "test_syntax.py",
            8,
            "SyntaxError: invalid syntax",
        ),
        (
            "pytest/syntax-error-color",
            "test_syntax.py",
            8,
            "SyntaxError: invalid syntax",
        ),
        (
            "node-test/syntax-error",
            "broken.test.mjs",
            5,
            "SyntaxError: missing ) after argument list",
        ),
        (
            "node-test/syntax-error-tap",
            "broken.test.mjs",
            5,
            "SyntaxError: missing ) after argument list",
        ),
        (
            "vitest/syntax-error",
            "broken.test.ts",
            5,
            "Expected \")\" but found \";\"",
        ),
        ("jest/syntax-error", "broken.test.js", 4, "SyntaxError: "),
        (
            "jest/syntax-error-color",
            "broken.test.js",
            4,
            "SyntaxError: ",
        ),
        (
            "bun-test/syntax-error",
            "broken.test.ts",
            4,
            "Expected \")\" but found \";\"",
        ),
        (
            "bun-test/syntax-error-pty",
            "broken.test.ts",
            4,
            "Expected \")\" but found \";\"",
        ),
    ] {
        let failures = recognised(id);
        assert_eq!(failures.len(), 1, "{id}: {failures:?}");
        assert_eq!(
            at(&failures[0]),
            (file.to_owned(), line),
            "{id}: {failures:?}"
        );
        assert!(
            message(&failures[0]).starts_with(text),
            "{id}: {failures:?}"
        );
    }
}

/// Class 1: without the error's place, a file-level failure explains nothing and the run is
/// not recognised.
#[test]
fn a_load_failure_without_its_error_is_not_recognised() {
    let f = fixture("node-test/syntax-error");
    let text = String::from_utf8_lossy(&f.output);
    let without: String = text
        .lines()
        .filter(|l| !l.starts_with("SyntaxError"))
        .map(|l| format!("{l}\n"))
        .collect();
    let d = greenlight_digest::digest(without.as_bytes(), Some(1), &DigestOptions::default());
    assert_eq!(d.classification, Classification::Partial, "{d:?}");
}

/// Class 2: the place of a failure is the innermost frame in the project, never the runtime,
/// the standard library or an installed package.
#[test]
fn library_frames_never_locate_a_failure() {
    for (id, name, file, line) in [
        ("pytest/lib-frames", "test_json_in_helper", "test_lib.py", 7),
        ("pytest/lib-frames", "test_site_packages", "test_lib.py", 19),
        ("pytest/tb-short", "test_site_packages", "test_lib.py", 19),
        ("tap/mocha-spec", "parses yaml", "math.test.js", 20),
        ("mocha/spec", "parses yaml", "math.test.js", 20),
        ("bun-test/more", "parses yaml", "more.test.ts", 24),
        ("bun-test/more", "parses a port", "helper.ts", 4),
        (
            "cargo-test/values-backtrace",
            "overflows_in_std",
            "lib.rs",
            19,
        ),
        ("go-test/lib-panic", "TestCompile", "parse_test.go", 11),
        ("go-test/fail", "TestDivPanics", "sub.go", 4),
        (
            "unittest/lib-frames",
            "test_json_in_helper",
            "test_lib.py",
            6,
        ),
    ] {
        let failures = recognised(id);
        let f = failures
            .iter()
            .find(|f| f.name.contains(name))
            .unwrap_or_else(|| panic!("{id}: {name} in {failures:?}"));
        assert_eq!(at(f), (file.to_owned(), line), "{id}: {f:?}");
    }
    // A panic inside the standard library with no backtrace has no place in the project.
    let failures = recognised("cargo-test/values");
    let f = failures
        .iter()
        .find(|f| f.name.contains("overflows_in_std"));
    assert_eq!(f.and_then(|f| f.file.clone()), None, "{f:?}");
}

/// Class 3: TAP block scalars keep their value, group comments and subtests name failures,
/// and a plan-count failure is located in the test file.
#[test]
fn tap_details_survive() {
    let tape = recognised("tap/tape-groups");
    let names: Vec<&str> = tape.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "strings › multi-line strings",
            "strings › objects",
            "planned › plan != count",
            "inner › one is two"
        ]
    );
    assert!(
        message(&tape[1]).contains("expected: { a: 1, b: [ 1, 3 ] }"),
        "{tape:?}"
    );
    assert!(!message(&tape[1]).contains("|-"), "{tape:?}");
    assert_eq!(at(&tape[2]), ("test.js".to_owned(), 14));
    let sub = recognised("tap/node-tap-sub");
    let names: Vec<&str> = sub.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["group › one is two", "outer › inner › objects differ"]
    );
    assert!(
        message(&sub[0]).contains("-2") && message(&sub[0]).contains("+1"),
        "{sub:?}"
    );
}

/// Class 4: mocha's default reporter is a format of its own, read with colour and on a
/// terminal too.
#[test]
fn mochas_spec_reporter_is_recognised() {
    for id in [
        "mocha/spec",
        "mocha/spec-color",
        "mocha/spec-pty",
        "mocha/pass",
    ] {
        let d = fixture(id).digest();
        assert_eq!(d.format, Some(Format::Mocha), "{id}");
        assert_eq!(
            d.classification,
            Classification::Recognised,
            "{id}: {:?}",
            d.reasons
        );
    }
    let failures = recognised("mocha/spec");
    assert_eq!(failures.len(), 5);
    assert_eq!(failures[3].name, "math nested compares objects");
    assert_eq!(message(&failures[1]), "Error: boom in math");
    assert_eq!(at(&failures[4]), ("math.test.js".to_owned(), 27));
}

/// Class 5: every failing Bun test has its message and place, plain, coloured and on a
/// terminal; passing runs with warnings are recognised.
#[test]
fn every_bun_failure_has_message_and_place() {
    for id in [
        "bun-test/fail",
        "bun-test/more",
        "bun-test/more-color",
        "bun-test/more-pty",
        "bun-test/pass",
        "bun-test/pass-pty",
    ] {
        let d = fixture(id).digest();
        assert_eq!(
            d.classification,
            Classification::Recognised,
            "{id}: {:?}",
            d.reasons
        );
        let counted = d.summary.as_ref().and_then(|s| s.failed).unwrap_or(0);
        assert_eq!(d.failures.len() as u64, counted, "{id}");
        for f in &d.failures {
            assert!(f.file.is_some() && !message(f).is_empty(), "{id}: {f:?}");
        }
    }
}

/// Class 6: cargo's closing lines, a doc-test section after the unit tests, `-q`, nextest's
/// lines after a failed build and a go timeout are read whole.
#[test]
fn closing_trailers_are_not_significant() {
    for id in [
        "cargo-test/values",
        "cargo-test/values-q",
        "cargo-test/rerun-trailer",
        "cargo-build/nextest-compile-error",
        "go-test/timeout",
        "go-test/timeout-v",
    ] {
        recognised(id);
    }
    let q = recognised("cargo-test/values-q");
    assert_eq!(q.len(), 9, "{q:?}");
    let go = recognised("go-test/timeout");
    assert_eq!(go[0].name, "TestSlow");
    assert_eq!(at(&go[0]), ("slow_test.go".to_owned(), 15));
}

/// Class 7: the lines that carry the values are part of the message; clippy's lint is named
/// every time; `--tb=line` keeps its place.
#[test]
fn the_values_that_explain_a_failure_are_kept() {
    let rust = recognised("cargo-test/values");
    let eq = rust.iter().find(|f| f.name == "tests::eq_with_message");
    assert_eq!(
        eq.and_then(|f| f.message.as_deref()),
        Some("assertion `left == right` failed: adding 1 and 2; left: 3; right: 4")
    );
    let nextest = recognised("nextest/values");
    assert!(
        nextest.iter().all(|f| !message(f).is_empty()),
        "{nextest:?}"
    );
    let jest = recognised("jest/fail");
    assert!(
        message(&jest[0]).ends_with("; Expected: 5; Received: 4"),
        "{jest:?}"
    );
    let bun = recognised("bun-test/fail");
    assert!(
        message(&bun[0]).ends_with("; Expected: 5; Received: 4"),
        "{bun:?}"
    );
    let clippy = fixture("cargo-build/clippy-lints").digest();
    assert!(
        clippy
            .diagnostics
            .iter()
            .all(|d| d.code.as_deref().is_some_and(|c| c.starts_with("clippy::"))),
        "{:?}",
        clippy.diagnostics
    );
    let tb = recognised("pytest/tb-line");
    let wrong = tb.iter().find(|f| f.name.ends_with("test_add_wrong"));
    assert_eq!(wrong.map(at), Some(("test_math.py".to_owned(), 13)));
}

/// Class 8: a saved log digested without an exit code is judged by its own summary.
#[test]
fn an_exit_code_nobody_gave_is_unknown_not_zero() {
    for id in ["pytest/fail", "cargo-test/fail", "pytest/pass"] {
        let f = fixture(id);
        let mut s = StreamingDigester::new(DigestOptions::default());
        s.push(&f.output);
        let d = s.finish_without_exit_code();
        assert_eq!(
            d.classification,
            Classification::Recognised,
            "{id}: {:?}",
            d.reasons
        );
        assert_eq!(d.exit_code, None);
        assert!(!d.exit_code_given);
        assert!(d.to_json().contains("\"exit_code_given\":false"));
        assert!(
            d.compact
                .as_deref()
                .is_some_and(|c| c.starts_with("exit ? · ")),
            "{id}"
        );
    }
}
