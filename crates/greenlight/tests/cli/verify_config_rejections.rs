//! The configurations CommandMate's runner rejects (the 27 of its suite), each through the real binary: exit 2,
//! nothing on stdout (no RESULT), the problem on stderr as `path:line: …`, and no gate run.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use greenlight_testkit::TempRepo;

const GATE: &str = "  - id: a\n    command: touch ran\n";

/// (class, file text, line of the problem or 0 for a whole-file problem, words the message names)
fn cases() -> Vec<(&'static str, String, usize, &'static [&'static str])> {
    let with_gate = |extra: &str| format!("version: 1\ngates:\n{GATE}{extra}");
    vec![
        (
            // `version: 2` is greenlight's YAML format (tests in verify_v2.rs); CommandMate's
            // runner rejects any version but 1, and so does greenlight past 2.
            "bad version",
            format!("version: 3\ngates:\n{GATE}"),
            1,
            &["version", "3"],
        ),
        (
            "missing version",
            format!("gates:\n{GATE}"),
            0,
            &["version"],
        ),
        (
            "duplicate id",
            with_gate("  - id: a\n    command: \"true\"\n"),
            5,
            &["a"],
        ),
        (
            "reserved id work-evidence",
            "version: 1\ngates:\n  - id: work-evidence\n    command: x\n".into(),
            3,
            &["work-evidence"],
        ),
        (
            "reserved id env-clean",
            "version: 1\ngates:\n  - id: env-clean\n    command: x\n".into(),
            3,
            &["env-clean"],
        ),
        (
            "reserved id scope",
            "version: 1\ngates:\n  - id: scope\n    command: x\n".into(),
            3,
            &["scope"],
        ),
        (
            "invalid id",
            "version: 1\ngates:\n  - id: Lint_All\n    command: x\n".into(),
            3,
            &["Lint_All"],
        ),
        (
            "timeout out of range",
            with_gate("    timeoutSec: 7201\n"),
            5,
            &["timeoutSec", "7201"],
        ),
        (
            "timeout not an integer",
            with_gate("    timeoutSec: 10m\n"),
            5,
            &["timeoutSec", "10m"],
        ),
        (
            "missing command",
            "version: 1\ngates:\n  - id: a\n".into(),
            3,
            &["command"],
        ),
        (
            "missing id",
            "version: 1\ngates:\n  - command: x\n".into(),
            3,
            &["id"],
        ),
        (
            "unknown gate key",
            with_gate("    parallel: true\n"),
            5,
            &["parallel"],
        ),
        (
            "unknown options key",
            with_gate("options:\n  parallel: true\n"),
            6,
            &["parallel"],
        ),
        (
            "non-boolean option",
            with_gate("options:\n  skipInPrimaryCheckout: yes\n"),
            6,
            &["skipInPrimaryCheckout", "yes"],
        ),
        (
            "non-boolean requireCommit",
            with_gate("options:\n  requireCommit: 1\n"),
            6,
            &["requireCommit", "1"],
        ),
        (
            "flow-style value",
            "version: 1\ngates:\n  - id: a\n    command: [make, test]\n".into(),
            4,
            &["flow"],
        ),
        (
            "anchor or alias",
            "version: 1\ngates:\n  - id: a\n    command: *cmd\n".into(),
            4,
            &["alias"],
        ),
        (
            "block scalar",
            "version: 1\ngates:\n  - id: a\n    command: |\n      make test\n".into(),
            4,
            &["block"],
        ),
        (
            "indentation not a multiple of 2",
            "version: 1\ngates:\n   - id: a\n    command: x\n".into(),
            3,
            &["indent"],
        ),
        (
            "tab",
            "version: 1\ngates:\n  - id: a\n\tcommand: x\n".into(),
            4,
            &["tab"],
        ),
        ("no gates", "version: 1\ngates:\n".into(), 0, &["gate"]),
        (
            "retryOnFail out of range",
            with_gate("    retryOnFail: 2\n"),
            5,
            &["retryOnFail", "2"],
        ),
        (
            "retryOnFail not an integer",
            with_gate("    retryOnFail: once\n"),
            5,
            &["retryOnFail", "once"],
        ),
        (
            "flakyIsPass without retryOnFail 1",
            with_gate("    flakyIsPass: true\n"),
            5,
            &["flakyIsPass", "retryOnFail"],
        ),
        (
            "flakyIsPass not a boolean",
            with_gate("    retryOnFail: 1\n    flakyIsPass: maybe\n"),
            6,
            &["flakyIsPass", "maybe"],
        ),
        (
            "invalid mutex name",
            with_gate("    mutex: e2e port\n"),
            5,
            &["mutex", "e2e port"],
        ),
        (
            "mutex longer than 64",
            with_gate(&format!("    mutex: {}\n", "m".repeat(65))),
            5,
            &["mutex", "64"],
        ),
        (
            "requireEnvClean not a boolean",
            with_gate("options:\n  requireEnvClean: on\n"),
            6,
            &["requireEnvClean", "on"],
        ),
    ]
}

#[test]
fn each_rejection_class_exits_2_with_its_line_and_runs_nothing() {
    let repo = TempRepo::worktree_with_commit();
    let cases = cases();
    // The field notes name 26 classes with "reserved id" covering three ids; each id is a case.
    assert_eq!(cases.len(), 28);
    for (class, text, line, words) in cases {
        repo.verify_yaml(&text);
        let out = repo.greenlight(["verify"]);
        assert_eq!(out.code, 2, "{class}: {}", out.render());
        assert_eq!(out.stdout, "", "{class}: stdout must be empty (no RESULT)");
        let prefix = if line == 0 {
            format!(
                "{}: ",
                repo.path().join(".commandmate/verify.yaml").display()
            )
        } else {
            format!(
                "{}:{line}: ",
                repo.path().join(".commandmate/verify.yaml").display()
            )
        };
        let problem = out.stderr.lines().find(|l| l.starts_with(&prefix));
        let problem =
            problem.unwrap_or_else(|| panic!("{class}: no `{prefix}…` line in:\n{}", out.stderr));
        for word in words {
            assert!(
                problem.to_lowercase().contains(&word.to_lowercase()),
                "{class}: `{problem}` does not name `{word}`"
            );
        }
        assert!(repo.read("ran").is_none(), "{class}: a gate ran");
    }
}
