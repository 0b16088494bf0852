//! Drift guard: every flag greenlight passes to the real `claude` and `codex` appears in their
//! own `--help`. The CLIs come from npm (`scripts/ci/install-agent-clis.sh`, which scripts/test
//! runs). Plain `cargo test` skips these tests (`#[ignore]`); scripts/test runs them with
//! `--include-ignored`, and there a missing CLI fails them loudly.
//!
//! Where the CLIs are found: the directory in `GREENLIGHT_AGENT_CLI_BIN`, else
//! `.tools/npm/node_modules/.bin` under the workspace root (`greenlight_testkit::real_agent_cli`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use greenlight_agent::{Deliverable, claude, codex};
use greenlight_testkit::real_agent_cli;
use regex::Regex;

fn help(bin: &Path, args: &[&str]) -> String {
    let home = tempfile::tempdir().expect("tempdir");
    let out_path = home.path().join("help.txt");
    let out_file = std::fs::File::create(&out_path).expect("create");
    let mut child = Command::new(bin)
        .args(args)
        // A fresh HOME: reading help must not depend on (or touch) a user's configuration.
        .env("HOME", home.path())
        .env("CODEX_HOME", home.path().join(".codex"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(out_file.try_clone().expect("clone"))
        .stderr(out_file)
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", bin.display()));
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            assert!(
                status.success(),
                "{} {args:?} exited {status}",
                bin.display()
            );
            break;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{} {args:?} did not finish within 60 s", bin.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::read_to_string(&out_path).expect("help is text")
}

fn assert_flags_documented(help: &str, argv: &[String], cli: &str) {
    let flags: Vec<&String> = argv
        .iter()
        .filter(|a| a.starts_with('-') && a.len() > 1)
        .collect();
    assert!(!flags.is_empty());
    for flag in flags {
        let re =
            Regex::new(&format!(r"(^|[\s,/]){}([\s,=<\[]|$)", regex::escape(flag))).expect("regex");
        assert!(
            re.is_match(help),
            "`{cli}` no longer documents `{flag}` in its help:\n{help}"
        );
    }
}

#[test]
#[ignore = "needs the claude and codex CLIs (npm): run scripts/test"]
fn every_claude_flag_greenlight_passes_is_in_the_real_help() {
    let text = help(&real_agent_cli("claude"), &["--help"]);
    for deliverable in [Deliverable::ReturnValue, Deliverable::File] {
        assert_flags_documented(&text, &claude::argv("sonnet", deliverable), "claude");
    }
    // The values greenlight passes with them.
    assert!(
        text.contains("\"stream-json\""),
        "`--output-format stream-json` is no longer documented"
    );
    assert!(
        text.contains("Use \"\" to disable all"),
        "`--tools \"\"` is no longer documented"
    );
}

#[test]
#[ignore = "needs the claude and codex CLIs (npm): run scripts/test"]
fn every_codex_flag_greenlight_passes_is_in_the_real_help() {
    let text = help(&real_agent_cli("codex"), &["exec", "--help"]);
    for deliverable in [Deliverable::ReturnValue, Deliverable::File] {
        let argv = codex::argv("gpt-5", deliverable);
        assert_eq!(argv.first().map(String::as_str), Some("exec"));
        assert_flags_documented(&text, &argv, "codex exec");
    }
    assert!(
        text.contains("read-only"),
        "`--sandbox read-only` is no longer documented"
    );
    assert!(
        text.contains("`-`"),
        "reading the prompt from stdin with `-` is no longer documented"
    );
}
