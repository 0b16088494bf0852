//! Several runs of one tool in one output (`pytest a; pytest b`, `npm test --workspaces`
//! running vitest in each package): two captured outputs of the same format, one after the
//! other, digest as both runs, never as the last one alone.

mod common;

use greenlight_digest::{Classification, DigestOptions, Summary, digest};

/// Pairs of real outputs of one format, each recognised on its own.
const PAIRS: [(&str, &str); 5] = [
    ("pytest/fail", "pytest/fail-q"),
    ("pytest/tox", "pytest/make-c"),
    ("vitest/fail", "vitest/v4"),
    ("bun-test/fail", "bun-test/more"),
    ("node-test/spec", "node-test/pass"),
];

fn add(a: &Option<Summary>, b: &Option<Summary>) -> Option<Summary> {
    let sum = |x: Option<u64>, y: Option<u64>| match (x, y) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
    };
    let (a, b) = (a.clone()?, b.clone()?);
    Some(Summary {
        passed: sum(a.passed, b.passed),
        failed: sum(a.failed, b.failed),
        skipped: sum(a.skipped, b.skipped),
        errors: sum(a.errors, b.errors),
        warnings: sum(a.warnings, b.warnings),
    })
}

#[test]
fn two_runs_of_one_tool_add_up_and_keep_every_failure() {
    let all = common::all();
    let get = |id: &str| {
        all.iter()
            .find(|f| f.id == id)
            .unwrap_or_else(|| panic!("fixture {id}"))
    };
    for (first, second) in PAIRS {
        let (a, b) = (get(first), get(second));
        // Without their roots: the two ran in different directories, the whole in neither.
        let alone =
            |f: &common::Fixture| digest(&f.output, Some(f.exit_code), &DigestOptions::default());
        let (da, db) = (alone(a), alone(b));
        assert_eq!(da.classification, Classification::Recognised, "{first}");
        assert_eq!(db.classification, Classification::Recognised, "{second}");
        let mut both = a.output.clone();
        both.extend_from_slice(&b.output);
        let exit = if a.exit_code != 0 {
            a.exit_code
        } else {
            b.exit_code
        };
        let d = digest(&both, Some(exit), &DigestOptions::default());
        let pair = format!("{first} then {second}");
        assert_eq!(
            d.classification,
            Classification::Recognised,
            "{pair}: {:?}",
            d.reasons
        );
        assert_eq!(d.summary, add(&da.summary, &db.summary), "{pair}");
        let expected: Vec<_> = da.failures.iter().chain(&db.failures).cloned().collect();
        assert_eq!(d.failures, expected, "{pair}");
    }
}

/// A second run that starts and never prints its summary leaves the whole without one.
#[test]
fn a_second_run_cut_short_leaves_no_summary() {
    let all = common::all();
    let f = all
        .iter()
        .find(|f| f.id == "pytest/fail")
        .expect("pytest/fail");
    let text = String::from_utf8_lossy(&f.output);
    let cut: String = text.lines().take(5).map(|l| format!("{l}\n")).collect();
    let mut both = f.output.clone();
    both.extend_from_slice(cut.as_bytes());
    let d = digest(&both, Some(1), &DigestOptions::default());
    assert_eq!(d.classification, Classification::Partial);
    assert!(
        d.reasons
            .contains(&greenlight_digest::DigestReason::NoSummary),
        "{:?}",
        d.reasons
    );
}

/// `npm test --workspaces`' failures are placed under each package's directory, and given
/// relative to the directory the command ran in; a directory that only shares a prefix of the
/// name is not an ancestor, and leaves the paths as they are.
#[test]
fn workspace_failures_are_relative_to_the_directory_the_command_ran_in() {
    let all = common::all();
    let f = all
        .iter()
        .find(|f| f.id == "node-test/npm-workspaces")
        .expect("node-test/npm-workspaces");
    let root = f.meta["root"].as_str().expect("the fixture names its root");
    let files = |root: Option<String>| {
        let options = DigestOptions {
            root,
            ..f.options()
        };
        let d = digest(&f.output, Some(f.exit_code), &options);
        assert_eq!(
            d.classification,
            Classification::Recognised,
            "{:?}",
            d.reasons
        );
        d.failures
            .into_iter()
            .map(|x| x.file.unwrap_or_default())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        files(Some(root.to_owned())),
        [
            "packages/cookie/cookie.test.mjs",
            "packages/jar/jar.test.mjs"
        ]
    );
    let parent = root
        .rsplit_once('/')
        .map(|(p, _)| format!("{p}/"))
        .unwrap_or_default();
    assert_eq!(
        files(Some(parent)),
        [
            "npm-ws/packages/cookie/cookie.test.mjs",
            "npm-ws/packages/jar/jar.test.mjs"
        ]
    );
    let absolute = [
        format!("{root}/packages/cookie/cookie.test.mjs"),
        format!("{root}/packages/jar/jar.test.mjs"),
    ];
    assert_eq!(
        files(Some(root.trim_end_matches("-ws").to_owned())),
        absolute
    );
    assert_eq!(files(None), absolute);
}
