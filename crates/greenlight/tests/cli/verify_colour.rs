//! What a person at a terminal sees at the end of verify, and what a script never sees: the
//! summary line on stderr, the verdict words coloured on a terminal, and stdout's contract
//! lines byte for byte the same whenever stdout is not a terminal.

#![allow(clippy::unwrap_used)]

use greenlight_testkit::TempRepo;

const GATES: &str = "version: 1\ngates:\n  - id: broken\n    command: exit 3\n  - id: slow\n    command: sleep 5\n    timeoutSec: 1\n  - id: fine\n    command: \"true\"\n";

const SGR: &str = "\u{1b}[";

/// There was no closing line: a person had to count the GATE lines to know how it went.
#[test]
fn the_summary_line_counts_the_gates_by_verdict_on_stderr() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(GATES);
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 20, "{}", out.render());
    let last = out.render().lines().last().unwrap().to_owned();
    assert_eq!(
        last,
        "3 gates: 1 red, 1 timed out, 1 green in [S]s",
        "{}",
        out.render()
    );
    assert!(
        !out.stdout.contains("3 gates"),
        "the summary went to stdout"
    );

    repo.verify_yaml("version: 1\ngates:\n  - id: fine\n    command: \"true\"\n");
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        out.render().ends_with("\n1 gate: 1 green in [S]s\n"),
        "{}",
        out.render()
    );
}

/// CLICOLOR_FORCE colours stderr for a log that wants it, but a piped stdout keeps
/// CommandMate's bytes; NO_COLOR wins over CLICOLOR_FORCE.
#[test]
fn forced_colour_reaches_stderr_only_and_no_color_wins() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: broken\n    command: exit 3\n  - id: fine\n    command: \"true\"\n");
    let plain = repo.greenlight(["verify"]);
    assert!(
        !plain.stdout.contains(SGR) && !plain.stderr.contains(SGR),
        "{}",
        plain.render()
    );

    let forced = repo
        .cli(["verify"])
        .env_remove("NO_COLOR")
        .env("CLICOLOR_FORCE", "1")
        .run();
    assert_eq!(forced.code, 20);
    assert_eq!(forced.stdout, plain.stdout, "a piped stdout got colour");
    let summary = forced.stderr.lines().last().unwrap();
    assert!(
        summary.starts_with(
            "2 gates: \u{1b}[1m\u{1b}[31m1 red\u{1b}[0m, \u{1b}[1m\u{1b}[32m1 green\u{1b}[0m in "
        ),
        "{summary:?}"
    );

    let both = repo
        .cli(["verify"])
        .env("NO_COLOR", "1")
        .env("CLICOLOR_FORCE", "1")
        .run();
    assert!(
        !both.stdout.contains(SGR) && !both.stderr.contains(SGR),
        "{}",
        both.render()
    );
}

/// PASS/FAIL were never coloured: on a terminal (a real pty, through `script`) the verdict
/// word of each GATE and RESULT line is, and nothing else on the line.
#[test]
fn a_terminal_sees_the_verdict_words_coloured() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: fine\n    command: \"true\"\n");
    let env = repo.command(["verify"]);
    let command = format!("{} verify", greenlight_testkit::greenlight_bin().display());
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(repo.path())
        .envs(
            env.get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .env_remove("NO_COLOR")
        .env("TERM", "xterm")
        .output()
        .expect("script (util-linux) runs");
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    assert!(
        text.contains("GATE fine \u{1b}[1m\u{1b}[32mPASS\u{1b}[0m exit=0 duration=0s\n"),
        "{text:?}"
    );
    assert!(
        text.contains("RESULT \u{1b}[1m\u{1b}[32mpassed\u{1b}[0m\n"),
        "{text:?}"
    );
    assert!(
        text.contains("GATE work-evidence \u{1b}[1m\u{1b}[32mPASS\u{1b}[0m commits=1"),
        "{text:?}"
    );
}
