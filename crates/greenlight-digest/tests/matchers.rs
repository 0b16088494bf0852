//! GitHub problem matchers: real matcher files from the projects that publish them, read against
//! real output of their tools, and the files GitHub would refuse, refused with their place.

use std::path::PathBuf;

use greenlight_digest::matchers::MatcherSet;
use greenlight_digest::{
    Classification, Diagnostic, Digest, DigestOptions, DigestReason, Format, Severity,
    StreamingDigester, digest,
};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A published matcher file, parsed; `source` is the path as a user would give it.
fn matcher(name: &str) -> MatcherSet {
    let source = format!("tests/fixtures/matchers/{name}.json");
    let text = std::fs::read_to_string(fixtures().join(format!("matchers/{name}.json")))
        .expect("matcher fixture");
    MatcherSet::parse(&source, &text).unwrap_or_else(|e| panic!("{e}"))
}

/// A captured output and the exit code its meta.json records. The capture runs the tools in a
/// working directory that is `/tmp/greenlight-fixtures` by default and elsewhere when the test
/// script re-captures beside a run of its own; paths the tools printed are put back under the
/// default, so the same exact expectations hold for both.
fn captured(case: &str) -> (Vec<u8>, i32) {
    let dir = fixtures().join(case);
    let output = at_default_workdir(&std::fs::read(dir.join("output.txt")).expect("output.txt"));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).expect("meta"))
            .expect("meta.json is JSON");
    let code = meta["exit_code"].as_i64().expect("exit_code") as i32;
    (output, code)
}

/// Every path `<anything>/greenlight-fixtures/…` rewritten to `/tmp/greenlight-fixtures/…`.
fn at_default_workdir(output: &[u8]) -> Vec<u8> {
    const DIR: &[u8] = b"/greenlight-fixtures/";
    let mut out = Vec::with_capacity(output.len());
    let mut rest = output;
    while let Some(at) = rest.windows(DIR.len()).position(|w| w == DIR) {
        // The path starts after the last byte that cannot be part of it.
        let start = rest[..at]
            .iter()
            .rposition(|b| b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b'(' | b'`'))
            .map_or(0, |i| i + 1);
        out.extend_from_slice(&rest[..start]);
        out.extend_from_slice(b"/tmp");
        out.extend_from_slice(DIR);
        rest = &rest[at + DIR.len()..];
    }
    out.extend_from_slice(rest);
    out
}

fn options(matchers: MatcherSet, format: Option<Format>) -> DigestOptions {
    DigestOptions {
        matchers,
        format,
        ..DigestOptions::default()
    }
}

fn read(case: &str, matchers: MatcherSet) -> Digest {
    let (output, code) = captured(case);
    digest(&output, Some(code), &options(matchers, None))
}

/// Only the matchers read the output (`--format problem-matcher`).
fn read_with_matchers_only(case: &str, matchers: MatcherSet) -> Digest {
    let (output, code) = captured(case);
    digest(
        &output,
        Some(code),
        &options(matchers, Some(Format::ProblemMatcher)),
    )
}

fn problem(
    owner: &str,
    severity: Severity,
    at: (&str, Option<u32>, Option<u32>),
    code: Option<&str>,
    message: &str,
) -> Diagnostic {
    Diagnostic {
        severity,
        file: Some(at.0.to_owned()),
        line: at.1,
        column: at.2,
        code: code.map(str::to_owned),
        message: message.to_owned(),
        owner: Some(owner.to_owned()),
    }
}

fn counts(d: &Digest) -> (u64, u64) {
    let errors = d
        .diagnostics
        .iter()
        .filter(|x| x.severity == Severity::Error)
        .count() as u64;
    (errors, d.diagnostics.len() as u64 - errors)
}

/// eslint's own JSON report of the same project: (errors, warnings).
fn eslint_report_counts(case: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(fixtures().join(case).join("report.json")).expect("report");
    let files: Vec<serde_json::Value> = serde_json::from_str(&text).expect("eslint -f json");
    let sum = |k: &str| files.iter().map(|f| f[k].as_u64().unwrap_or(0)).sum();
    (sum("errorCount"), sum("warningCount"))
}

// ---- each real matcher against real output ----

#[test]
fn setup_go_matcher_reads_go_vet() {
    // go vet has a built-in reading too (`go-build`): the matcher alone is the subject here.
    let d = read_with_matchers_only("matchers/runs/go-vet", matcher("go"));
    assert_eq!(
        d.classification,
        Classification::Recognised,
        "{:?}",
        d.reasons
    );
    assert_eq!(d.format, Some(Format::ProblemMatcher));
    assert_eq!(
        d.diagnostics,
        [
            problem(
                "go",
                Severity::Error,
                ("./report.go", Some(7), Some(9)),
                None,
                "fmt.Sprintf format %d has arg name of wrong type string"
            ),
            problem(
                "go",
                Severity::Error,
                ("./report.go", Some(16), Some(2)),
                None,
                "fmt.Printf format %s has arg sum of wrong type int"
            ),
        ]
    );
    // `go vet -json` reports the same findings: same count, same positions and messages.
    let text = std::fs::read_to_string(fixtures().join("matchers/runs/go-vet/report.json"))
        .expect("report");
    let json = &text[text
        .find('{')
        .expect("a JSON object after go's package line")..];
    let report: serde_json::Value = serde_json::from_str(json).expect("go vet -json");
    let mut reported = Vec::new();
    for analyzers in report.as_object().expect("packages").values() {
        for findings in analyzers.as_object().expect("analyzers").values() {
            for f in findings.as_array().expect("findings") {
                reported.push((
                    f["posn"].as_str().unwrap_or_default().to_owned(),
                    f["message"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
    }
    assert_eq!(reported.len(), d.diagnostics.len());
    for (x, (posn, message)) in d.diagnostics.iter().zip(&reported) {
        let at = format!(
            "/report.go:{}:{}",
            x.line.unwrap_or_default(),
            x.column.unwrap_or_default()
        );
        assert!(posn.ends_with(&at), "{posn} vs {at}");
        assert_eq!(&x.message, message);
    }
    assert_eq!(
        d.compact.as_deref(),
        Some(
            "exit 2 · problem-matcher (go) · 2 errors, 0 warnings\n\
             error ./report.go:7:9: fmt.Sprintf format %d has arg name of wrong type string\n\
             error ./report.go:16:2: fmt.Printf format %s has arg sum of wrong type int\n"
        )
    );
}

/// A matcher published outside GitHub's own actions (lumaxis/shellcheck-problem-matchers) on
/// `shellcheck -f gcc`: its regexp captures `note` as well, a severity GitHub does not know, so
/// shellcheck's info and style findings are no problems and its errors and warnings are exactly
/// what `shellcheck -f json1` reports at those levels.
#[test]
fn shellcheck_gcc_matcher_keeps_errors_and_warnings_and_drops_notes() {
    let case = "matchers/runs/shellcheck-gcc";
    let d = read_with_matchers_only(case, matcher("shellcheck-gcc"));
    assert_eq!(
        d.classification,
        Classification::Recognised,
        "{:?}",
        d.reasons
    );
    assert_eq!(d.format, Some(Format::ProblemMatcher));
    assert_eq!(
        d.diagnostics[0],
        problem(
            "shellcheck-json",
            Severity::Error,
            ("broken.sh", Some(3), Some(1)),
            Some("SC1046"),
            "Couldn't find 'fi' for this 'if'."
        )
    );
    let text = std::fs::read_to_string(fixtures().join(case).join("report.json")).expect("report");
    let report: serde_json::Value = serde_json::from_str(&text).expect("shellcheck -f json1");
    // Severity is not ordered; its name is.
    let key = |file: &str, line: u64, column: u64, code: String, severity: Severity| {
        (file.to_owned(), line, column, code, format!("{severity:?}"))
    };
    let mut reported: Vec<_> = report["comments"]
        .as_array()
        .expect("comments")
        .iter()
        .filter_map(|c| {
            let severity = match c["level"].as_str()? {
                "error" => Severity::Error,
                "warning" => Severity::Warning,
                _ => return None,
            };
            Some(key(
                c["file"].as_str()?,
                c["line"].as_u64()?,
                c["column"].as_u64()?,
                format!("SC{}", c["code"].as_u64()?),
                severity,
            ))
        })
        .collect();
    let mut found: Vec<_> = d
        .diagnostics
        .iter()
        .map(|x| {
            key(
                x.file.as_deref().unwrap_or_default(),
                u64::from(x.line.unwrap_or_default()),
                u64::from(x.column.unwrap_or_default()),
                x.code.clone().unwrap_or_default(),
                x.severity,
            )
        })
        .collect();
    reported.sort();
    found.sort();
    assert!(
        reported.len() >= 3,
        "the project must give errors and warnings"
    );
    assert_eq!(found, reported);
}

#[test]
fn setup_python_matcher_reads_a_traceback_at_its_raise() {
    let d = read("matchers/runs/python-traceback", matcher("python"));
    assert_eq!(
        d.classification,
        Classification::Recognised,
        "{:?}",
        d.reasons
    );
    // Every frame line opens a match; only the innermost is followed by the `raise` line.
    assert_eq!(
        d.diagnostics,
        [problem(
            "python",
            Severity::Error,
            (
                "/tmp/greenlight-fixtures/python/traceback/main.py",
                Some(6),
                None
            ),
            None,
            "port must be a number"
        )]
    );
}

#[test]
fn setup_node_eslint_compact_matcher_reads_eslint_compact() {
    let case = "matchers/runs/eslint-compact";
    let d = read_with_matchers_only(case, matcher("eslint-compact"));
    assert_eq!(
        d.classification,
        Classification::Recognised,
        "{:?}",
        d.reasons
    );
    assert_eq!(d.diagnostics.len(), 5);
    assert_eq!(
        d.diagnostics[0],
        problem(
            "eslint-compact",
            Severity::Error,
            (
                "/tmp/greenlight-fixtures/js/eslint/index.js",
                Some(1),
                Some(7)
            ),
            Some("no-unused-vars"),
            "'unused' is assigned a value but never used."
        )
    );
    // `Warning` as the formatter capitalises it.
    assert_eq!(
        d.diagnostics[1],
        problem(
            "eslint-compact",
            Severity::Warning,
            (
                "/tmp/greenlight-fixtures/js/eslint/index.js",
                Some(4),
                Some(9)
            ),
            Some("eqeqeq"),
            "Expected '===' and instead saw '=='."
        )
    );
    assert_eq!(counts(&d), eslint_report_counts(case));
    let summary = d.summary.as_ref().expect("counts");
    assert_eq!((summary.errors, summary.warnings), (Some(3), Some(2)));
}

#[test]
fn setup_node_eslint_stylish_matcher_loops_over_each_files_rows() {
    let case = "eslint/stylish";
    let d = read_with_matchers_only(case, matcher("eslint-stylish"));
    assert_eq!(
        d.classification,
        Classification::Recognised,
        "{:?}",
        d.reasons
    );
    let index = "/tmp/greenlight-fixtures/js/eslint/index.js";
    let other = "/tmp/greenlight-fixtures/js/eslint/other.js";
    let owner = "eslint-stylish";
    assert_eq!(
        d.diagnostics,
        [
            problem(
                owner,
                Severity::Error,
                (index, Some(1), Some(7)),
                Some("no-unused-vars"),
                "'unused' is assigned a value but never used"
            ),
            problem(
                owner,
                Severity::Warning,
                (index, Some(4), Some(9)),
                Some("eqeqeq"),
                "Expected '===' and instead saw '=='"
            ),
            problem(
                owner,
                Severity::Error,
                (index, Some(5), Some(12)),
                Some("no-undef"),
                "'missingHelper' is not defined"
            ),
            problem(
                owner,
                Severity::Warning,
                (index, Some(5), Some(28)),
                Some("semi"),
                "Missing semicolon"
            ),
            problem(
                owner,
                Severity::Error,
                (other, Some(1), Some(13)),
                Some("no-undef"),
                "'undefinedThing' is not defined"
            ),
        ]
    );
    assert_eq!(counts(&d), eslint_report_counts(case));
    // The colour variant reads the same once the lines are normalised.
    let color = read_with_matchers_only("eslint/stylish-color", matcher("eslint-stylish"));
    assert_eq!(color.diagnostics, d.diagnostics);
}

#[test]
fn setup_node_tsc_matcher_reads_plain_and_pretty_tsc() {
    let d = read_with_matchers_only("tsc/plain", matcher("tsc"));
    assert_eq!(
        d.classification,
        Classification::Recognised,
        "{:?}",
        d.reasons
    );
    assert_eq!(
        d.diagnostics,
        [
            problem(
                "tsc",
                Severity::Error,
                ("src/a.ts", Some(2), Some(9)),
                Some("2322"),
                "Type 'string' is not assignable to type 'number'."
            ),
            problem(
                "tsc",
                Severity::Error,
                ("src/a.ts", Some(6), Some(14)),
                Some("2322"),
                "Type 'number' is not assignable to type 'string'."
            ),
            problem(
                "tsc",
                Severity::Error,
                ("src/b.ts", Some(3), Some(8)),
                Some("2345"),
                "Argument of type 'string' is not assignable to parameter of type 'number'."
            ),
        ]
    );
    // The built-in tsc parser finds the same places and messages.
    let builtin = read("tsc/plain", MatcherSet::default());
    assert_eq!(builtin.diagnostics.len(), d.diagnostics.len());
    for (b, m) in builtin.diagnostics.iter().zip(&d.diagnostics) {
        assert_eq!((&b.file, b.line, b.column), (&m.file, m.line, m.column));
        assert_eq!(b.message, m.message);
    }
    let pretty = read_with_matchers_only("tsc/pretty", matcher("tsc"));
    assert_eq!(pretty.diagnostics, d.diagnostics);
}

#[test]
fn setup_rust_toolchain_clippy_matcher_joins_a_warning_to_its_location() {
    let d = read_with_matchers_only("cargo-build/clippy-lints", matcher("rust"));
    // clippy exits 0 with three warnings: the problems agree with the exit code.
    assert_eq!(
        d.classification,
        Classification::Recognised,
        "{:?}",
        d.reasons
    );
    let saturating = "implicitly performing saturating subtraction";
    assert_eq!(
        d.diagnostics,
        [
            problem(
                "clippy",
                Severity::Warning,
                ("src/lib.rs", Some(2), Some(5)),
                None,
                saturating
            ),
            problem(
                "clippy",
                Severity::Warning,
                ("src/lib.rs", Some(9), Some(5)),
                None,
                saturating
            ),
            problem(
                "clippy",
                Severity::Warning,
                ("src/lib.rs", Some(15), Some(20)),
                None,
                "writing `&Vec` instead of `&[_]` involves a new object where a slice will do"
            ),
        ]
    );
    // The matcher was written for clippy's colours; the digest reads them stripped.
    let color = read_with_matchers_only("cargo-build/clippy-lints-color", matcher("rust"));
    assert_eq!(color.diagnostics, d.diagnostics);
}

/// rustfmt's matcher reports its diffs as warnings: they do not explain why `cargo fmt --check`
/// failed, so the digest does not stand in for the output, and the diff stays in the tail.
#[test]
fn setup_rust_toolchain_rustfmt_warnings_do_not_explain_a_failed_check() {
    let d = read("matchers/runs/rustfmt-check", matcher("rust"));
    let file = "/tmp/greenlight-fixtures/rust/unformatted/src/lib.rs";
    let message = format!("Diff in {file}");
    assert_eq!(
        d.diagnostics,
        [
            problem(
                "rustfmt",
                Severity::Warning,
                (file, Some(1), None),
                None,
                &message
            ),
            problem(
                "rustfmt",
                Severity::Warning,
                (file, Some(13), None),
                None,
                &message
            ),
        ]
    );
    assert_eq!(d.format, Some(Format::ProblemMatcher));
    assert_eq!(d.classification, Classification::Partial);
    assert_eq!(d.reasons, [DigestReason::FailureWithoutDiagnostic]);
    assert_eq!(d.compact, None);
    assert!(d.text().contains("-pub fn add(a:i32,b:i32)->i32{a+b}"));
}

/// No .NET SDK runs here, so this line is written in the shape msbuild prints (`file(line,col):
/// severity code: message [project]`). The matcher rejects MSB codes with a lookbehind and roots
/// the file at the project's directory.
#[test]
fn setup_dotnet_csc_matcher_needs_its_lookbehind_and_roots_files_at_the_project() {
    let set = matcher("csc");
    let output = b"Program.cs(3,5): error CS0103: The name 'x' does not exist in the current context [/src/app/app.csproj]\n\
C:\\Program Files\\dotnet\\sdk\\Microsoft.Common.targets(10,3): error MSB3644: The reference assemblies were not found [/src/app/app.csproj]\n";
    let d = digest(output, Some(1), &options(set, None));
    assert_eq!(
        d.diagnostics,
        [problem(
            "csc",
            Severity::Error,
            ("/src/app/Program.cs", Some(3), Some(5)),
            Some("CS0103"),
            "The name 'x' does not exist in the current context"
        )]
    );
}

// ---- how matchers and built-in formats meet ----

#[test]
fn a_recognised_built_in_format_wins_over_matchers() {
    for (case, name) in [
        ("eslint/stylish", "eslint-stylish"),
        ("tsc/plain", "tsc"),
        ("cargo-build/clippy-lints", "rust"),
        ("go-test/build-fail", "go"),
    ] {
        let with = read(case, matcher(name));
        let without = read(case, MatcherSet::default());
        assert_eq!(without.classification, Classification::Recognised, "{case}");
        assert_eq!(with, without, "{case}");
        assert!(with.diagnostics.iter().all(|x| x.owner.is_none()), "{case}");
    }
}

/// `go vet ./...; eslint -f compact .` in one gate, each with its matcher: the line-based
/// parser reads vet's lines and then finds eslint's that are not go's (partial), but the
/// matchers found all it found, so their reading stands.
#[test]
fn matchers_that_found_everything_a_partial_built_in_format_did_stand_alone() {
    let (vet, _) = captured("matchers/runs/go-vet");
    let (compact, _) = captured("matchers/runs/eslint-compact");
    let output = [vet, compact].concat();
    let builtin = digest(&output, Some(1), &DigestOptions::default());
    assert_eq!(builtin.format, Some(Format::GoBuild));
    assert_eq!(builtin.classification, Classification::Partial);

    let mut set = matcher("go");
    set.extend(matcher("eslint-compact"));
    let d = digest(&output, Some(1), &options(set, None));
    assert_eq!(
        d.classification,
        Classification::Recognised,
        "{:?}",
        d.reasons
    );
    assert_eq!(d.diagnostics.len(), 7);
    assert_eq!(counts(&d), (5, 2));
    let compact = d.compact.expect("recognised");
    assert!(
        compact
            .starts_with("exit 1 · problem-matcher (go, eslint-compact) · 5 errors, 2 warnings\n"),
        "{compact}"
    );
}

/// `go test ./...; python3 main.py`: go's failed tests are not among the matchers' problems,
/// so both are listed and the digest is mixed.
#[test]
fn matchers_beside_a_built_in_format_they_do_not_cover_make_a_mixed_digest() {
    let (tests, _) = captured("go-test/fail");
    let (traceback, _) = captured("matchers/runs/python-traceback");
    let output = [tests.clone(), traceback].concat();
    let alone = digest(&tests, Some(1), &DigestOptions::default());
    let d = digest(&output, Some(1), &options(matcher("python"), None));
    assert_eq!(d.format, Some(Format::Mixed));
    assert_eq!(d.formats, [Format::GoTest, Format::ProblemMatcher]);
    assert_eq!(d.classification, Classification::Partial);
    assert!(d.reasons.contains(&DigestReason::MixedFormats));
    assert_eq!(d.failures, alone.failures);
    assert_eq!(d.diagnostics.len(), 1);
    assert!(
        d.diagnostics
            .iter()
            .all(|x| x.owner.as_deref() == Some("python"))
    );
}

// ---- the rules of a matcher's verdict ----

#[test]
fn errors_with_a_zero_exit_contradict_it() {
    let (output, _) = captured("matchers/runs/go-vet");
    let d = digest(&output, Some(0), &options(matcher("go"), None));
    assert_eq!(d.format, Some(Format::ProblemMatcher));
    assert_eq!(d.reasons, [DigestReason::SummaryContradictsExitCode]);
}

#[test]
fn a_saved_log_with_errors_stands_and_one_with_only_warnings_does_not() {
    // The matchers alone: go vet's own reading (`go-build`) is not the subject here.
    let (output, _) = captured("matchers/runs/go-vet");
    let d = {
        let mut s = StreamingDigester::new(options(matcher("go"), Some(Format::ProblemMatcher)));
        s.push(&output);
        s.finish_without_exit_code()
    };
    assert_eq!(
        d.classification,
        Classification::Recognised,
        "{:?}",
        d.reasons
    );
    assert!(
        d.compact
            .expect("recognised")
            .starts_with("exit ? · problem-matcher (go)")
    );

    let warn = MatcherSet::parse(
        "vet-warnings.json",
        r#"{"problemMatcher": [{"owner": "vet", "severity": "notice",
            "pattern": [{"regexp": "^(.+\\.go):(\\d+):(\\d+): (.*)$", "file": 1, "line": 2, "column": 3, "message": 4}]}]}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut s = StreamingDigester::new(options(warn.clone(), Some(Format::ProblemMatcher)));
    s.push(&output);
    let d = s.finish_without_exit_code();
    assert_eq!(d.reasons, [DigestReason::NoSummary]);
    // A notice counts as a warning: it fails nothing, so vet's exit 2 is left unexplained.
    let d = digest(
        &output,
        Some(2),
        &options(warn, Some(Format::ProblemMatcher)),
    );
    assert_eq!(counts(&d), (0, 2));
    assert_eq!(d.reasons, [DigestReason::FailureWithoutDiagnostic]);
}

#[test]
fn a_severity_github_does_not_know_makes_no_problem() {
    let set = MatcherSet::parse(
        "info.json",
        r#"{"problemMatcher": [{"owner": "lint",
            "pattern": [{"regexp": "^(\\w+): (.*)$", "severity": 1, "message": 2}]}]}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let d = digest(
        b"info: just saying\nWARNING: careful\nerror: broken\nerror:    \n",
        Some(1),
        &options(set, None),
    );
    let seen: Vec<(Severity, &str)> = d
        .diagnostics
        .iter()
        .map(|x| (x.severity, x.message.as_str()))
        .collect();
    assert_eq!(
        seen,
        [(Severity::Warning, "careful"), (Severity::Error, "broken")]
    );
}

#[test]
fn problems_past_the_item_budget_are_counted_and_make_the_digest_partial() {
    let (output, code) = captured("matchers/runs/eslint-compact");
    let d = digest(
        &output,
        Some(code),
        &DigestOptions {
            max_items: 2,
            max_text: 16,
            ..options(matcher("eslint-compact"), Some(Format::ProblemMatcher))
        },
    );
    assert_eq!(d.diagnostics.len(), 2);
    assert_eq!(d.diagnostics[0].message, "'unused' is assi…");
    assert_eq!(
        d.summary.map(|s| (s.errors, s.warnings)),
        Some((Some(3), Some(2)))
    );
    assert!(d.reasons.contains(&DigestReason::DiagnosticBudgetExceeded));
    assert_eq!(d.classification, Classification::Partial);
}

#[test]
fn chunk_boundaries_never_change_what_matchers_find() {
    let cases = [
        ("eslint/stylish", "eslint-stylish"),
        ("matchers/runs/python-traceback", "python"),
        ("cargo-build/clippy-lints-color", "rust"),
        ("matchers/runs/eslint-compact", "eslint-compact"),
    ];
    for (case, name) in cases {
        let (output, code) = captured(case);
        let opts = options(matcher(name), Some(Format::ProblemMatcher));
        let whole = digest(&output, Some(code), &opts);
        assert!(!whole.diagnostics.is_empty(), "{case}");

        let mut bytewise = StreamingDigester::new(opts.clone());
        for b in &output {
            bytewise.push(std::slice::from_ref(b));
        }
        assert_eq!(bytewise.finish(Some(code)), whole, "{case}: 1-byte chunks");

        // A small linear congruential generator: the same "random" cuts on every run.
        for seed in 1..=20u64 {
            let mut state = seed;
            let mut s = StreamingDigester::new(opts.clone());
            let mut rest = output.as_slice();
            while !rest.is_empty() {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let n = ((state >> 33) as usize % 97 + 1).min(rest.len());
                s.push(&rest[..n]);
                rest = &rest[n..];
            }
            assert_eq!(s.finish(Some(code)), whole, "{case}: seed {seed}");
        }
    }
}

// ---- sets ----

#[test]
fn a_later_matcher_with_the_same_owner_replaces_the_earlier() {
    let mut set = matcher("go");
    set.extend(matcher("python"));
    let replacement = MatcherSet::parse(
        "mine.json",
        r#"{"problemMatcher": [{"owner": "GO", "severity": "warning",
            "pattern": [{"regexp": "^(.+\\.go):(\\d+):(\\d+): (.*)$", "file": 1, "line": 2, "column": 3, "message": 4}]}]}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    set.extend(replacement);
    assert_eq!(set.owners().collect::<Vec<_>>(), ["python", "GO"]);
    let (output, code) = captured("matchers/runs/go-vet");
    let d = digest(
        &output,
        Some(code),
        &options(set, Some(Format::ProblemMatcher)),
    );
    assert!(
        d.diagnostics
            .iter()
            .all(|x| x.severity == Severity::Warning)
    );
    assert!(
        d.diagnostics
            .iter()
            .all(|x| x.owner.as_deref() == Some("GO"))
    );
}

#[test]
fn every_published_matcher_parses() {
    let mut owners = Vec::new();
    for name in [
        "csc",
        "eslint-compact",
        "eslint-stylish",
        "go",
        "python",
        "rust",
        "tsc",
    ] {
        owners.extend(matcher(name).owners().map(str::to_owned));
    }
    assert_eq!(
        owners,
        [
            "csc",
            "eslint-compact",
            "eslint-stylish",
            "go",
            "python",
            "rustfmt",
            "clippy",
            "tsc"
        ]
    );
    assert_eq!(matcher("go"), matcher("go"));
    assert_ne!(matcher("go"), matcher("tsc"));
}

// ---- files GitHub refuses ----

fn refused(json: &str) -> String {
    match MatcherSet::parse("ci/matchers/lint.json", json) {
        Ok(set) => panic!("accepted: {set:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_file_that_is_not_json_is_refused_at_its_line_and_column() {
    assert_eq!(
        refused("{\"problemMatcher\": [\n  {\"owner\": \"x\",}\n]}"),
        "ci/matchers/lint.json:2:17: not a problem matcher file: trailing comma; the file must be \
         JSON of the form {\"problemMatcher\": [{\"owner\": …, \"pattern\": [{\"regexp\": …, \
         \"message\": 1}]}]}"
    );
    assert_eq!(
        refused(r#"{"problemMatcher": {"owner": "x"}}"#),
        "ci/matchers/lint.json:1:19: not a problem matcher file: invalid type: map, expected a \
         sequence; the file must be JSON of the form {\"problemMatcher\": [{\"owner\": …, \
         \"pattern\": [{\"regexp\": …, \"message\": 1}]}]}"
    );
    assert_eq!(
        refused("{}"),
        "ci/matchers/lint.json: problemMatcher: no matchers: add at least one matcher to the \
         `problemMatcher` list"
    );
}

#[test]
fn a_matcher_without_owner_is_refused() {
    assert_eq!(
        refused(r#"{"problemMatcher": [{"pattern": [{"regexp": "(.*)", "message": 1}]}]}"#),
        "ci/matchers/lint.json: problemMatcher[0].owner: the matcher has no `owner`: give it a \
         non-empty name, like \"eslint\""
    );
    assert_eq!(
        refused(
            r#"{"problemMatcher": [
                {"owner": "lint", "pattern": [{"regexp": "(.*)", "message": 1}]},
                {"owner": "Lint", "pattern": [{"regexp": "(.*)", "message": 1}]}]}"#
        ),
        "ci/matchers/lint.json: problemMatcher[1].owner: owner `Lint` is already used by \
         problemMatcher[0] (owners are compared without case): give each matcher its own owner"
    );
}

#[test]
fn loop_is_refused_anywhere_but_on_the_last_of_several_patterns() {
    assert_eq!(
        refused(
            r#"{"problemMatcher": [{"owner": "lint", "pattern": [
                {"regexp": "^(\\S.*)$", "file": 1, "loop": true},
                {"regexp": "^\\s+(\\d+): (.*)$", "line": 1, "message": 2}]}]}"#
        ),
        "ci/matchers/lint.json: problemMatcher[0].pattern[0].loop: matcher `lint`: only the last \
         pattern may loop; set `loop` only on the last pattern of a matcher with two or more"
    );
    assert_eq!(
        refused(
            r#"{"problemMatcher": [{"owner": "lint", "pattern": [
                {"regexp": "^(.*)$", "message": 1, "loop": true}]}]}"#
        ),
        "ci/matchers/lint.json: problemMatcher[0].pattern[0].loop: matcher `lint`: a \
         single-pattern matcher cannot loop (it already reads every line); set `loop` only on \
         the last pattern of a matcher with two or more"
    );
    assert_eq!(
        refused(
            r#"{"problemMatcher": [{"owner": "lint", "pattern": [
                {"regexp": "^(\\S.*)$", "message": 1},
                {"regexp": "^\\s+(\\d+)$", "line": 1, "loop": true}]}]}"#
        ),
        "ci/matchers/lint.json: problemMatcher[0].pattern[1]: matcher `lint`: the looping \
         pattern does not set `message`: give it the group of the message, since each line it \
         matches is one problem"
    );
}

#[test]
fn a_regexp_this_engine_cannot_compile_is_refused_with_its_place() {
    let message = refused(
        r#"{"problemMatcher": [
            {"owner": "ok", "pattern": [{"regexp": "(.*)", "message": 1}]},
            {"owner": "dotnet", "pattern": [{"regexp": "^(?<!\\w+)error: (.*)$", "message": 1}]}]}"#,
    );
    assert_eq!(
        message,
        "ci/matchers/lint.json: problemMatcher[1].pattern[0].regexp: matcher `dotnet`: the \
         regexp does not compile here: Look-behind assertion without constant size; matchers \
         are written for .NET's regex engine, and this one lacks some of its constructs \
         (variable-length lookbehind, balancing groups, …): rewrite that part of the pattern"
    );
    assert_eq!(
        refused(r#"{"problemMatcher": [{"owner": "lint", "pattern": [{"message": 1}]}]}"#),
        "ci/matchers/lint.json: problemMatcher[0].pattern[0].regexp: matcher `lint`: the \
         pattern has no `regexp`: add the regular expression it matches"
    );
}

#[test]
fn a_group_the_regexp_does_not_have_is_refused() {
    assert_eq!(
        refused(
            r#"{"problemMatcher": [{"owner": "lint", "pattern": [
                {"regexp": "^(.+):(\\d+) (.*)$", "file": 1, "line": 2, "message": 4}]}]}"#
        ),
        "ci/matchers/lint.json: problemMatcher[0].pattern[0].message: matcher `lint`: `message` \
         is group 4, but the regexp has only groups 0 to 3: count the regexp's capturing \
         parentheses and use one of those numbers"
    );
    assert_eq!(
        refused(
            r#"{"problemMatcher": [{"owner": "lint", "pattern": [
                {"regexp": "^(.+)$", "message": -1}]}]}"#
        ),
        "ci/matchers/lint.json: problemMatcher[0].pattern[0].message: matcher `lint`: `message` \
         is group -1, but the regexp has only groups 0 to 1: count the regexp's capturing \
         parentheses and use one of those numbers"
    );
}

#[test]
fn other_mistakes_github_refuses_are_refused() {
    assert_eq!(
        refused(
            r#"{"problemMatcher": [{"owner": "lint", "pattern": [
                {"regexp": "^(\\S.*)$", "file": 1},
                {"regexp": "^(.+): (.*)$", "file": 1, "message": 2}]}]}"#
        ),
        "ci/matchers/lint.json: problemMatcher[0].pattern[1].file: matcher `lint`: `file` is \
         already set by pattern[0]: set each property in one pattern only"
    );
    assert_eq!(
        refused(
            r#"{"problemMatcher": [{"owner": "lint", "pattern": [{"regexp": "^(.+)$", "file": 1}]}]}"#
        ),
        "ci/matchers/lint.json: problemMatcher[0].pattern: matcher `lint`: no pattern sets \
         `message`: name the group holding the message in one pattern"
    );
    assert_eq!(
        refused(
            r#"{"problemMatcher": [{"owner": "lint", "severity": "info",
                "pattern": [{"regexp": "(.*)", "message": 1}]}]}"#
        ),
        "ci/matchers/lint.json: problemMatcher[0].severity: matcher `lint` has default severity \
         `info`: use \"error\", \"warning\" or \"notice\", or leave it out (problems default to \
         error)"
    );
    assert_eq!(
        refused(r#"{"problemMatcher": [{"owner": "lint", "pattern": []}]}"#),
        "ci/matchers/lint.json: problemMatcher[0].pattern: matcher `lint` has no patterns: give \
         it a `pattern` list with at least one regexp"
    );
}

/// The example in docs/digest.md does what the page says.
#[test]
fn the_documented_example_reads_its_line() {
    let docs = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/digest.md"),
    )
    .expect("docs/digest.md");
    let start = docs
        .find("```json\n{\"problemMatcher\"")
        .expect("the example")
        + 8;
    let end = start + docs[start..].find("```").expect("its end");
    let set =
        MatcherSet::parse("docs/digest.md", &docs[start..end]).unwrap_or_else(|e| panic!("{e}"));
    let d = digest(
        b"src/app.py:3:80: E501 line too long\n",
        Some(1),
        &options(set, None),
    );
    assert_eq!(
        d.diagnostics,
        [problem(
            "mylint",
            Severity::Error,
            ("src/app.py", Some(3), Some(80)),
            Some("E501"),
            "line too long"
        )]
    );
}
