//! The line-based linters, type checkers, compilers and format checkers against their truth:
//! every fixture with a `truth.json` (the problems of the tool's own structured report, see
//! scripts/lint-truth.py) is recognised as its tool, with exactly those problems, and no
//! output of one tool is ever read as another's.

mod common;

use greenlight_digest::{Classification, Diagnostic, Digest, DigestOptions, Format, digest};
use serde_json::Value;

/// Formats whose tool prints its own count of what it found, so a problem missing from the
/// output can be noticed.
const COUNTING: &[&str] = &[
    "clang", "mypy", "ruff", "pyright", "biome", "deno", "prettier", "eslint",
];

/// A path as the digest should hold it, relative to the project the fixture ran in: the
/// capture's work directory (`…/greenlight-fixtures/<project>/`), `file://` and `./` removed.
fn relative(path: &str, project: &str) -> String {
    let path = path.strip_prefix("file://").unwrap_or(path);
    let marker = format!(
        "greenlight-fixtures/{}/",
        project.trim_start_matches("fixtures/projects/")
    );
    let path = path
        .find(&marker)
        .map_or(path, |i| &path[i + marker.len()..]);
    path.strip_prefix("./").unwrap_or(path).to_owned()
}

/// Which places the tool's human output prints: mypy prints no column, a list of files to
/// reformat no line. Read from the truth, where such a field is null for every problem.
#[derive(Clone, Copy)]
struct Shape {
    lines: bool,
    columns: bool,
    /// Compare the codes too (the strict check; the lost-line check compares what the brief of
    /// a problem needs: its place, severity and message).
    codes: bool,
}

impl Shape {
    fn of(truth: &[Value]) -> Shape {
        let any = |name: &str| truth.iter().any(|p| !p[name].is_null());
        Shape {
            lines: any("line"),
            columns: any("column"),
            codes: true,
        }
    }
}

/// One problem as a comparable line: file, line, column, severity, code, message; a place the
/// tool does not print is left out on both sides.
#[allow(clippy::too_many_arguments)]
fn key(
    shape: Shape,
    project: &str,
    file: Option<&str>,
    line: Option<u32>,
    column: Option<u32>,
    severity: &str,
    code: Option<&str>,
    message: &str,
) -> String {
    let place = |shown: bool, v: Option<u32>| {
        if shown {
            format!("{v:?}")
        } else {
            "-".to_owned()
        }
    };
    let code = if shape.codes {
        format!("{code:?}")
    } else {
        "-".to_owned()
    };
    format!(
        "{} : {} : {} : {severity} : {code} : {}",
        file.map(|f| relative(f, project)).unwrap_or_default(),
        place(shape.lines, line),
        place(shape.columns, column),
        message.trim(),
    )
}

fn truth_keys(truth: &[Value], project: &str, codes: bool) -> Vec<String> {
    let shape = Shape {
        codes,
        ..Shape::of(truth)
    };
    let mut keys: Vec<String> = truth
        .iter()
        .map(|p| {
            let n = |name: &str| p[name].as_u64().map(|v| v as u32);
            key(
                shape,
                project,
                p["file"].as_str(),
                n("line"),
                n("column"),
                p["severity"].as_str().unwrap_or_default(),
                p["code"].as_str(),
                p["message"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    keys.sort();
    keys
}

fn digest_keys(
    diagnostics: &[Diagnostic],
    truth: &[Value],
    project: &str,
    codes: bool,
) -> Vec<String> {
    let shape = Shape {
        codes,
        ..Shape::of(truth)
    };
    let mut keys: Vec<String> = diagnostics
        .iter()
        .map(|d| {
            let severity = match d.severity {
                greenlight_digest::Severity::Error => "error",
                greenlight_digest::Severity::Warning => "warning",
            };
            key(
                shape,
                project,
                d.file.as_deref(),
                d.line,
                d.column,
                severity,
                d.code.as_deref(),
                &d.message,
            )
        })
        .collect();
    keys.sort();
    keys
}

struct Truth {
    fixture: common::Fixture,
    problems: Vec<Value>,
    project: String,
}

fn truths() -> Vec<Truth> {
    let out: Vec<Truth> = common::all()
        .into_iter()
        .filter_map(|fixture| {
            let text = std::fs::read_to_string(fixture.dir.join("truth.json")).ok()?;
            let truth: Value = serde_json::from_str(&text).expect("truth.json is JSON");
            // A linter's truth lists its problems; a test runner's (tests/truth.rs) its failures.
            let problems = truth
                .get("problems")?
                .as_array()
                .cloned()
                .unwrap_or_default();
            let project = fixture.meta["project"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            Some(Truth {
                fixture,
                problems,
                project,
            })
        })
        .collect();
    assert!(out.len() >= 20, "lint fixtures with a truth: {}", out.len());
    out
}

fn format_dir(id: &str) -> &str {
    id.split('/').next().unwrap_or_default()
}

/// Each fixture is recognised as its own tool, with exactly the problems of the tool's own
/// report: none missing, none misplaced, none extra, and counts that agree.
#[test]
fn every_lint_fixture_lists_exactly_the_tools_own_problems() {
    let mut wrong = Vec::new();
    for t in truths() {
        let d = t.fixture.digest();
        let id = &t.fixture.id;
        if d.classification != Classification::Recognised {
            wrong.push(format!("{id}: {:?}\n{}", d.reasons, d.text()));
            continue;
        }
        if d.format.map(Format::name) != Some(format_dir(id)) {
            wrong.push(format!("{id}: read as {:?}", d.format));
        }
        let diagnostics = short_messages_cut(id, &d.diagnostics, &t.problems);
        // cargo's short lines name no lint (`unused_variables`), only rustc's `E` codes.
        let codes = !id.starts_with("cargo-build/short");
        let (got, want) = (
            digest_keys(&diagnostics, &t.problems, &t.project, codes),
            truth_keys(&t.problems, &t.project, codes),
        );
        if got != want {
            wrong.push(format!("{id}:\n  digest {got:#?}\n  truth {want:#?}"));
        }
        let errors = t
            .problems
            .iter()
            .filter(|p| p["severity"] == "error")
            .count() as u64;
        let summary = d.summary.clone().unwrap_or_default();
        if summary.errors != Some(errors)
            || summary.warnings != Some(t.problems.len() as u64 - errors)
        {
            wrong.push(format!(
                "{id}: summary {summary:?}, truth has {errors} errors"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// `cargo build --message-format=short` prints a message with its primary label (`: not found
/// in this scope`) or help after it, which the JSON message leaves out: the digest's message
/// must start with the JSON's, and is compared as that.
fn short_messages_cut(id: &str, diagnostics: &[Diagnostic], truth: &[Value]) -> Vec<Diagnostic> {
    let mut out = diagnostics.to_vec();
    if !id.starts_with("cargo-build/short") {
        return out;
    }
    for d in &mut out {
        let own = truth
            .iter()
            .filter_map(|p| p["message"].as_str())
            .find(|m| d.message.starts_with(&format!("{m}: ")));
        if let Some(m) = own {
            d.message = m.to_owned();
        }
    }
    out
}

/// A build script's panic is the build's one error: its place and message, and cargo prints
/// nothing after its block.
#[test]
fn a_failed_build_script_is_its_panic() {
    let f = common::all()
        .into_iter()
        .find(|f| f.id == "cargo-build/build-script")
        .expect("cargo-build/build-script is captured");
    let d = f.digest();
    assert_eq!(
        d.classification,
        Classification::Recognised,
        "{:?}",
        d.reasons
    );
    assert_eq!(d.format, Some(Format::CargoBuild));
    assert_eq!(d.diagnostics.len(), 1, "{:?}", d.diagnostics);
    let x = &d.diagnostics[0];
    assert_eq!(x.severity, greenlight_digest::Severity::Error);
    assert_eq!(
        (x.file.as_deref(), x.line, x.column),
        (Some("build.rs"), Some(4), Some(5))
    );
    assert_eq!(x.message, "libfoo 2.0 not found: install it or set FOO_DIR");
}

/// go build has no structured report of its compile errors: the truth is the four mistakes
/// planted in fixtures/projects/lint/go, held here.
#[test]
fn go_build_lists_the_planted_compile_errors() {
    let f = common::all()
        .into_iter()
        .find(|f| f.id == "go-build/build")
        .expect("go-build/build is captured");
    let d = f.digest();
    assert_eq!(
        d.classification,
        Classification::Recognised,
        "{:?}",
        d.reasons
    );
    assert_eq!(d.format, Some(Format::GoBuild));
    let got: Vec<(String, Option<u32>, Option<u32>, String)> = d
        .diagnostics
        .iter()
        .map(|x| {
            (
                x.file.clone().unwrap_or_default(),
                x.line,
                x.column,
                x.message.clone(),
            )
        })
        .collect();
    let want = [
        ("./calc.go", 4, 8, "imported and not used: \"fmt\""),
        ("./calc.go", 7, 2, "unused declared but not used"),
        ("./calc.go", 8, 17, "undefined: missing"),
        (
            "./report.go",
            4,
            9,
            "cannot use n (variable of type int) as type string in return statement",
        ),
    ];
    assert_eq!(got.len(), want.len(), "{got:?}");
    for (file, line, column, message) in want {
        assert!(
            got.iter()
                .any(|g| g.0 == file && g.1 == Some(line) && g.2 == Some(column) && g.3 == message),
            "{file}:{line}:{column} {message} missing from {got:?}"
        );
    }
}

/// Where the tool counts what it found, an output that lost any one line is never recognised
/// with fewer problems than the tool reported: the count gives the loss away.
#[test]
fn a_lost_line_never_yields_a_complete_digest_missing_a_problem() {
    let mut checked = 0;
    for t in truths() {
        let id = &t.fixture.id;
        if !COUNTING.contains(&format_dir(id)) || t.problems.is_empty() {
            continue;
        }
        let text = String::from_utf8_lossy(&t.fixture.output).into_owned();
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        for skip in 0..lines.len() {
            let cut: String = lines
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != skip)
                .map(|(_, l)| *l)
                .collect();
            let d = digest(
                cut.as_bytes(),
                Some(t.fixture.exit_code),
                &DigestOptions::default(),
            );
            if d.classification == Classification::Recognised {
                assert_eq!(
                    digest_keys(&d.diagnostics, &t.problems, &t.project, false),
                    truth_keys(&t.problems, &t.project, false),
                    "{id} without line {}: {:?} is recognised with other problems",
                    skip + 1,
                    lines[skip]
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 200, "lines dropped: {checked}");
}

/// No output is read as another tool's: mypy, ruff and biome close with `Found N errors` like
/// tsc; deno lint prints rustc's `error[…]:` and ` --> ` lines; go vet prints what go test's
/// build failures look like. Every fixture of the corpus (the problem matcher runs too) is
/// either unread or read as its own tool.
#[test]
fn no_output_is_read_as_another_tools() {
    let runs = common::root().join("matchers/runs");
    let mut outputs: Vec<(String, Vec<u8>, i32, String)> = common::all()
        .into_iter()
        .map(|f| {
            let dir = format_dir(&f.id).to_owned();
            (f.id, f.output, f.exit_code, dir)
        })
        .collect();
    for e in std::fs::read_dir(&runs).expect("matchers/runs").flatten() {
        let Ok(output) = std::fs::read(e.path().join("output.txt")) else {
            continue;
        };
        let meta: Value = serde_json::from_str(
            &std::fs::read_to_string(e.path().join("meta.json")).expect("meta.json"),
        )
        .expect("meta.json is JSON");
        let own = match meta["tool"].as_str().unwrap_or_default() {
            "go" => "go-build",
            tool => tool,
        };
        outputs.push((
            format!("matchers/runs/{}", e.file_name().to_string_lossy()),
            output,
            meta["exit_code"].as_i64().unwrap_or(0) as i32,
            own.to_owned(),
        ));
    }
    for (id, output, code, own) in outputs {
        let d: Digest = digest(&output, Some(code), &DigestOptions::default());
        if let Some(format) = d.format {
            assert_eq!(format.name(), own, "{id}: {:?}", d.reasons);
        }
    }
}

fn fixture(id: &str) -> common::Fixture {
    common::all()
        .into_iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("{id} is captured"))
}

/// `make test` echoes the compiler's command, then runs the tests: a banner alone followed by
/// another tool's lines is not a build, and the test run reads as it does alone.
#[test]
fn a_compiler_command_before_a_test_run_leaves_the_test_run_alone() {
    let (build, tests) = (fixture("gcc/clean"), fixture("pytest/fail"));
    let output = [build.output.clone(), tests.output.clone()].concat();
    let d = digest(&output, Some(tests.exit_code), &DigestOptions::default());
    let alone = tests.digest();
    assert_eq!(d.format, Some(Format::Pytest), "{:?}", d.reasons);
    assert_eq!(
        (d.classification, d.failures),
        (alone.classification, alone.failures)
    );
}

/// Two linters in one output (`mypy . && ruff check .` both failing): the second tool's lines
/// are not the first's, so the digest is never complete.
#[test]
fn two_linters_in_one_output_are_never_complete() {
    for (first, second) in [
        ("mypy/errors", "ruff/concise"),
        ("ruff/full", "mypy/errors"),
        ("gcc/make", "shellcheck/gcc"),
        ("biome/lint", "prettier/check"),
    ] {
        let (a, b) = (fixture(first), fixture(second));
        let output = [a.output.clone(), b.output.clone()].concat();
        let d = digest(&output, Some(1), &DigestOptions::default());
        assert_ne!(
            d.classification,
            Classification::Recognised,
            "{first} + {second}: {:?}",
            d.format
        );
    }
}
