//! verify.yaml version 2 through the real binary: every new key and every error class (each
//! problem at its line and column, all at once, nothing run), `needs` and parallel jobs (wall
//! time near the critical path, lines in config order, a failed need skipping its dependents),
//! the JSON fields v2 adds, and problem matchers reading a tool greenlight has no parser for.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::fs;
use std::process::Stdio;
use std::time::{Duration, Instant};

use greenlight_testkit::{TempRepo, procs, signal_and_wait};

/// A v2 file with options that let a test run in any checkout, and the given gates.
fn v2(gates: &str) -> String {
    format!("version: 2\noptions:\n  cache: off\ngates:\n{gates}")
}

/// (case, file, expected `line:column: ` prefix, words the message names)
fn rejections() -> Vec<(&'static str, String, &'static str, &'static [&'static str])> {
    let gate = "  - id: a\n    command: touch ran\n";
    vec![
        (
            "unknown gate key",
            v2(&format!("{gate}    colour: red\n")),
            "7:5",
            &["colour", "allowed"],
        ),
        (
            "unknown options key",
            "version: 2\noptions:\n  parallel: 2\ngates:\n  - id: a\n    command: touch ran\n"
                .into(),
            "3:3",
            &["parallel", "jobs"],
        ),
        (
            "unknown top-level key",
            format!("version: 2\nstages: []\ngates:\n{gate}"),
            "2:1",
            &["stages"],
        ),
        (
            "timeout as a string",
            v2(&format!("{gate}    timeoutSec: \"30\"\n")),
            "7:17",
            &["timeoutSec", "integer", "quotes"],
        ),
        (
            "timeout out of range",
            v2(&format!("{gate}    timeoutSec: 7201\n")),
            "7:17",
            &["timeoutSec", "7200"],
        ),
        (
            "cache as yes",
            v2(&format!("{gate}    cache: yes\n")),
            "7:12",
            &["cache", "true or false"],
        ),
        (
            "needs not a list",
            v2(&format!("{gate}    needs: b\n")),
            "7:12",
            &["needs", "list"],
        ),
        (
            "unknown need",
            v2(&format!("{gate}    needs: [nope]\n")),
            "7:13",
            &["nope", "known: a"],
        ),
        (
            "self need",
            v2(&format!("{gate}    needs: [a]\n")),
            "7:13",
            &["needs itself"],
        ),
        (
            "cycle",
            v2(
                "  - id: a\n    command: x\n    needs: [b]\n  - id: b\n    command: y\n    needs: [a]\n",
            ),
            "5:1",
            &["cycle", "a → b → a"],
        ),
        (
            "duplicate id",
            v2("  - id: a\n    command: x\n  - id: a\n    command: y\n"),
            "7:9",
            &["`a`", "line 5"],
        ),
        (
            "reserved id",
            v2("  - id: work-evidence\n    command: x\n"),
            "5:9",
            &["reserved"],
        ),
        (
            "invalid id",
            v2("  - id: Lint_All\n    command: x\n"),
            "5:9",
            &["Lint_All"],
        ),
        ("missing command", v2("  - id: a\n"), "5:5", &["command"]),
        (
            "empty command",
            v2("  - id: a\n    command: \"\"\n"),
            "6:14",
            &["empty"],
        ),
        (
            "bad env name",
            v2(&format!("{gate}    env: [1FOO]\n")),
            "7:11",
            &["1FOO"],
        ),
        (
            "input leaves the worktree",
            v2(&format!("{gate}    inputs: [../x]\n")),
            "7:14",
            &["..", "worktree"],
        ),
        (
            "absolute input",
            v2(&format!("{gate}    inputs: [/etc/passwd]\n")),
            "7:14",
            &["relative"],
        ),
        (
            "input glob that does not compile",
            v2(&format!("{gate}    inputs: [\"src/[a\"]\n")),
            "7:14",
            &["src/[a"],
        ),
        (
            "jobs zero",
            "version: 2\noptions:\n  jobs: 0\ngates:\n  - id: a\n    command: x\n".into(),
            "3:9",
            &["jobs", "between 1 and 256"],
        ),
        (
            "options cache unknown",
            "version: 2\noptions:\n  cache: remote\ngates:\n  - id: a\n    command: x\n".into(),
            "3:10",
            &["local", "off", "remote"],
        ),
        (
            "missing matcher file",
            v2(&format!("{gate}    matchers: [nope.json]\n")),
            "7:16",
            &["nope.json", "relative to the directory"],
        ),
        (
            "flakyIsPass without retry",
            v2(&format!("{gate}    flakyIsPass: true\n")),
            "7:18",
            &["retryOnFail"],
        ),
        (
            "retryOnFail 2",
            v2(&format!("{gate}    retryOnFail: 2\n")),
            "7:18",
            &["0 or 1"],
        ),
        (
            "keys not strings",
            v2(&format!("{gate}    keys: [1]\n")),
            "7:12",
            &["keys", "strings"],
        ),
        (
            "duplicate YAML key",
            v2("  - id: a\n    command: x\n    command: y\n"),
            "7:5",
            &["`command`", "twice", "keep one"],
        ),
        (
            "YAML syntax error",
            "version: 2\ngates:\n  - id: a\n    command: [unclosed\n".into(),
            "",
            &["not valid YAML"],
        ),
        (
            "run remote without a cluster",
            v2(&format!("{gate}    run: remote\n")),
            "7:10",
            &["run: remote", "options.remote", "endpoint"],
        ),
        (
            "run neither local nor remote",
            v2(&format!("{gate}    run: cloud\n")),
            "7:10",
            &["local", "remote", "cloud"],
        ),
        (
            "remote without endpoint",
            format!("version: 2\noptions:\n  remote:\n    cache: shared\ngates:\n{gate}"),
            "4:5",
            &["endpoint", "grpc://host:port"],
        ),
        (
            "remote endpoint scheme",
            format!("version: 2\noptions:\n  remote:\n    endpoint: ftp://h:1\ngates:\n{gate}"),
            "4:15",
            &["ftp", "grpc://"],
        ),
        (
            "remote cache unknown",
            format!(
                "version: 2\noptions:\n  remote:\n    endpoint: grpc://h:1\n    cache: maybe\ngates:\n{gate}"
            ),
            "5:12",
            &["shared", "shared-read", "maybe"],
        ),
        (
            "remote platform reserved prefix",
            format!(
                "version: 2\noptions:\n  remote:\n    endpoint: grpc://h:1\n    platform:\n      greenlight.keys: x\ngates:\n{gate}"
            ),
            "6:7",
            &["greenlight.", "not allowed"],
        ),
        ("no gates", "version: 2\n".into(), "1:1", &["gates"]),
        (
            "gates empty",
            "version: 2\ngates: []\n".into(),
            "2:8",
            &["no gates"],
        ),
    ]
}

#[test]
fn every_error_class_is_reported_at_its_line_and_column_and_nothing_runs() {
    let repo = TempRepo::worktree_with_commit();
    let mut failures = Vec::new();
    for (case, file, at, words) in rejections() {
        repo.verify_yaml(&file);
        let out = repo.greenlight(["verify"]);
        let located = if at.is_empty() {
            out.stderr.contains("verify.yaml:")
        } else {
            out.stderr.contains(&format!("verify.yaml:{at}: "))
        };
        let named = words.iter().all(|w| out.stderr.contains(w));
        if out.code != 2
            || !out.stdout.is_empty()
            || !located
            || !named
            || repo.read("ran").is_some()
        {
            failures.push(format!(
                "{case}: exit {} at {at:?}\n{}",
                out.code,
                out.render()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n---\n"));
}

#[test]
fn every_problem_of_a_file_is_reported_at_once() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 2\noptions:\n  jobs: many\ngates:\n  - id: a\n    command: touch ran\n    colour: red\n  - id: b\n    command: x\n    needs: [zzz]\n",
    );
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 2, "{}", out.render());
    let located: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("verify.yaml:"))
        .collect();
    assert_eq!(located.len(), 3, "{}", out.stderr);
    assert!(located[0].contains("verify.yaml:3:9:"), "{}", out.stderr);
    assert!(located[1].contains("verify.yaml:7:5:"), "{}", out.stderr);
    assert!(located[2].contains("verify.yaml:10:13:"), "{}", out.stderr);
    assert!(out.stderr.contains("3 problem(s)"), "{}", out.stderr);
    assert!(repo.read("ran").is_none());
}

#[test]
fn a_version_2_below_the_first_key_or_an_unknown_version_says_what_to_change() {
    let repo = TempRepo::worktree_with_commit();
    repo.greenlight_yaml("gates:\n  - id: a\n    command: touch ran\nversion: 2\n");
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(
        out.stderr
            .contains("verify.yaml:4: `version: 2` is read only as the file's first key")
            && out.stderr.contains("move `version: 2` to the top"),
        "{}",
        out.render()
    );

    repo.greenlight_yaml("version: 3\ngates:\n  - id: a\n    command: touch ran\n");
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(
        out.stderr
            .contains("verify.yaml:1: `version` must be 1 (CommandMate's format) or 2")
            && out.stderr.contains("found `3`"),
        "{}",
        out.render()
    );
    assert!(out.stdout.is_empty() && repo.read("ran").is_none());
}

#[test]
fn every_v2_key_is_accepted_and_means_what_it_says() {
    let repo = TempRepo::worktree_with_commit();
    repo.write(".greenlight/tsc.json", MATCHER);
    repo.verify_yaml(
        "# every key\nversion: 2\noptions:\n  baseRef: main\n  skipInPrimaryCheckout: true\n  maxLogTailBytes: 4096\n  requireCommit: false\n  requireEnvClean: false\n  jobs: 2\n  cache: off\n  keys: [\"echo v1\"]\ngates:\n  - id: build\n    command: echo built > built.txt\n    timeoutSec: 30\n    mutex: cargo\n    retryOnFail: 1\n    flakyIsPass: true\n    inputs: [src, \"!src/gen/**\", \"*.toml\"]\n    env: [GREENLIGHT_TEST_FLAVOUR]\n    keys: [\"echo k\"]\n    cache: false\n    matchers: [tsc.json]\n  - id: check\n    command: test \"$GREENLIGHT_TEST_FLAVOUR\" = plain && test -f built.txt\n    needs: [build]\n",
    );
    let out = repo
        .cli(["verify"])
        .env("GREENLIGHT_TEST_FLAVOUR", "plain")
        .run();
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        &out.lines()[1..],
        [
            "GATE build PASS exit=0 duration=0s waited=0s",
            "GATE check PASS exit=0 duration=0s",
            "RESULT passed"
        ]
    );
}

#[test]
fn a_gate_whose_need_failed_is_skipped_naming_it_and_the_others_still_run() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(&v2(
        "  - id: build\n    command: exit 3\n  - id: test\n    command: touch tested\n    needs: [build]\n  - id: e2e\n    command: touch e2e\n    needs: [test]\n  - id: lint\n    command: touch linted\n",
    ));
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 20, "{}", out.render());
    assert_eq!(
        &out.lines()[1..],
        [
            "GATE build FAIL exit=3 duration=0s",
            "GATE test SKIP reason=needs:build",
            "GATE e2e SKIP reason=needs:test",
            "GATE lint PASS exit=0 duration=0s",
            "RESULT failed"
        ]
    );
    assert!(repo.read("tested").is_none() && repo.read("e2e").is_none());
    assert!(repo.read("linted").is_some());
}

#[test]
fn gates_selects_what_the_chosen_gates_need() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(&v2(
        "  - id: build\n    command: touch built\n  - id: lint\n    command: touch linted\n  - id: test\n    command: test -f built\n    needs: [build]\n",
    ));
    let out = repo.greenlight(["verify", "--gates", "test"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        &out.lines()[1..],
        [
            "GATE build PASS exit=0 duration=0s",
            "GATE test PASS exit=0 duration=0s",
            "RESULT passed"
        ]
    );
    assert!(repo.read("linted").is_none());
}

/// Six sleeping gates: a 0.6 s; b 0.4 needs a; c 0.8 needs a; d 0.4 needs b, c; e 1.0; f 0.2
/// needs e. Critical path a → c → d: 1.8 s; everything in a row would be 3.4 s.
const DAG: &str = "  - id: a\n    command: sleep 0.6; date +%s.%N > a.end\n  - id: b\n    command: sleep 0.4\n    needs: [a]\n  - id: c\n    command: sleep 0.8\n    needs: [a]\n  - id: d\n    command: sleep 0.4\n    needs: [b, c]\n  - id: e\n    command: sleep 1.0\n  - id: f\n    command: sleep 0.2\n    needs: [e]\n";

#[test]
fn a_dag_runs_in_about_its_critical_path_with_lines_in_config_order() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(&format!(
        "version: 2\noptions:\n  cache: off\n  jobs: 6\ngates:\n{DAG}"
    ));
    let started = Instant::now();
    let out = repo.greenlight(["verify", "--format", "json"]);
    let wall = started.elapsed();
    assert_eq!(out.code, 0, "{}", out.render());
    // Loose here (a loaded CI machine); scripts/bench-verify-v2.sh measures it exactly.
    assert!(wall >= Duration::from_millis(1800), "{wall:?}");
    assert!(
        wall < Duration::from_millis(3200),
        "no faster than in a row: {wall:?}"
    );
    let doc = out.json();
    let gates = doc["gates"].as_array().unwrap();
    let ids: Vec<&str> = gates.iter().map(|g| g["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["a", "b", "c", "d", "e", "f"]);
    let start = |id: &str| {
        gates.iter().find(|g| g["id"] == id).unwrap()["started_ms"]
            .as_u64()
            .unwrap()
    };
    let end = |id: &str| {
        let g = gates.iter().find(|g| g["id"] == id).unwrap();
        start(id) + g["durations_ms"][0].as_u64().unwrap()
    };
    // Each gate starts only after what it needs ended; independent ones start at once.
    assert!(start("b") >= end("a") && start("c") >= end("a"), "{doc:#}");
    assert!(start("d") >= end("b").max(end("c")), "{doc:#}");
    assert!(start("f") >= end("e"), "{doc:#}");
    assert!(
        start("e") < 300,
        "e needs nothing and starts with a: {doc:#}"
    );
    assert_eq!(gates[3]["needs"], serde_json::json!(["b", "c"]));
    assert_eq!(gates[0]["cached"], false);
}

#[test]
fn jobs_bounds_how_many_gates_run_at_once() {
    let repo = TempRepo::worktree_with_commit();
    // Each gate records how many gates run beside it by counting marker files.
    let gate = |id: &str| {
        format!(
            "  - id: {id}\n    command: touch run.{id}; sleep 0.3; ls run.* | wc -l >> peak; rm run.{id}\n"
        )
    };
    let gates: String = ["a", "b", "c", "d"].iter().map(|id| gate(id)).collect();
    repo.verify_yaml(&format!(
        "version: 2\noptions:\n  cache: off\n  jobs: 2\ngates:\n{gates}"
    ));
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    let peak = repo.read("peak").unwrap();
    let most: u32 = peak
        .lines()
        .map(|l| l.trim().parse::<u32>().unwrap())
        .max()
        .unwrap();
    assert_eq!(most, 2, "{peak}");
}

#[test]
fn a_v1_file_still_runs_its_gates_one_after_another() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: a\n    command: sleep 0.3\n  - id: b\n    command: sleep 0.3\n",
    );
    let started = Instant::now();
    let out = repo.greenlight(["verify", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(started.elapsed() >= Duration::from_millis(600));
    let doc = out.json();
    assert!(
        doc["gates"][1]["started_ms"].as_u64().unwrap() >= 300,
        "{doc:#}"
    );
}

/// The TypeScript matcher as GitHub's setup-node action publishes it.
const MATCHER: &str = r#"{
    "problemMatcher": [
        {
            "owner": "tsc",
            "pattern": [
                {
                    "regexp": "^([^\\s].*)[\\(:](\\d+)[,:](\\d+)(?:\\):\\s+|\\s+-\\s+)(error|warning|info)\\s+TS(\\d+)\\s*:\\s*(.*)$",
                    "file": 1,
                    "line": 2,
                    "column": 3,
                    "severity": 4,
                    "code": 5,
                    "message": 6
                }
            ]
        }
    ]
}"#;

#[test]
fn a_gate_with_matchers_gets_exact_diagnostics_from_output_greenlight_has_no_parser_for() {
    let repo = TempRepo::worktree_with_commit();
    repo.write(".greenlight/lint.json", MATCHER);
    // A home-grown checker that prints tsc-shaped lines among noise greenlight cannot read.
    repo.verify_yaml(&v2(
        "  - id: check\n    command: \"echo 'checking 3 files'; echo 'src/app.ts(12,5): error TS2322: Type string is not assignable to type number.'; echo '=== done ==='; exit 2\"\n    matchers: [lint.json]\n",
    ));
    let out = repo.greenlight(["verify", "--format", "json"]);
    assert_eq!(out.code, 20, "{}", out.render());
    let digest = &out.json()["gates"][0]["attempts"][0]["digest"];
    assert_eq!(digest["format"], "problem-matcher", "{digest:#}");
    assert_eq!(digest["classification"], "recognised", "{digest:#}");
    let d = &digest["diagnostics"][0];
    assert_eq!(d["file"], "src/app.ts");
    assert_eq!(d["line"], 12);
    assert_eq!(d["column"], 5);
    assert_eq!(d["code"], "2322");
    assert_eq!(
        d["message"],
        "Type string is not assignable to type number."
    );
}

#[test]
fn a_matcher_file_that_is_not_a_matcher_is_a_config_error_at_its_entry() {
    let repo = TempRepo::worktree_with_commit();
    repo.write(
        ".greenlight/bad.json",
        r#"{"problemMatcher": [{"pattern": [{"regexp": "x", "message": 0}]}]}"#,
    );
    repo.verify_yaml(&v2(
        "  - id: a\n    command: touch ran\n    matchers: [bad.json]\n",
    ));
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(
        out.stderr
            .contains("verify.yaml:7:16: matcher file `bad.json` is refused"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("owner"), "{}", out.stderr);
    assert!(repo.read("ran").is_none());
}

/// On a terminal, the progress line names every gate running at once.
#[test]
#[ignore = "needs python3: run scripts/test"]
fn a_terminal_sees_every_running_gate() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 2\noptions:\n  cache: off\n  jobs: 2\ngates:\n  - id: left\n    command: sleep 1\n  - id: right\n    command: sleep 1\n",
    );
    let (stdout, stderr) = crate::verify::verify_on_a_terminal(&repo);
    assert_eq!(
        stdout.lines().skip(1).collect::<Vec<_>>(),
        [
            "GATE left PASS exit=0 duration=1s",
            "GATE right PASS exit=0 duration=1s",
            "RESULT passed"
        ]
    );
    assert!(
        stderr.contains("running left 0s, right 0s"),
        "no line with both gates: {stderr:?}"
    );
}

#[test]
fn sigterm_during_parallel_gates_ends_every_group_releases_every_lock_and_stores_nothing() {
    let repo = TempRepo::worktree_with_commit();
    let gate = |id: &str, mutex: &str| {
        format!(
            "  - id: {id}\n    command: sleep 600 & echo $! >> pids; echo $$ >> pids; wait\n    mutex: {mutex}\n"
        )
    };
    repo.verify_yaml(&format!(
        "version: 2\noptions:\n  jobs: 3\ngates:\n{}{}  - id: after\n    command: touch after-ran\n    needs: [left]\n",
        gate("left", "lock-left"),
        gate("right", "lock-right"),
    ));
    let child = repo
        .command(["verify"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both gates run at once: four pids (a shell and its sleep each).
    repo.wait_for_pids("pids", 4, Duration::from_secs(10));
    for name in ["lock-left", "lock-right"] {
        assert!(
            repo.lock_root().join(format!("{name}.lock")).exists(),
            "{name} not held"
        );
    }
    let out = signal_and_wait(child, "-TERM", Duration::from_secs(8));
    assert_eq!(out.code, 143, "{}\n{}", out.stdout, out.stderr);
    assert!(!out.stdout.contains("RESULT"), "{}", out.stdout);
    assert!(out.stderr.contains("interrupted by"), "{}", out.stderr);
    for name in ["lock-left", "lock-right"] {
        assert!(
            !repo.lock_root().join(format!("{name}.lock")).exists(),
            "{name} outlived the run"
        );
    }
    let pids = crate::verify_leaks::pids(&repo, "pids");
    assert_eq!(pids.len(), 4, "{pids:?}");
    procs::assert_all_dead(&pids, "processes survived greenlight");
    assert!(
        repo.read("after-ran").is_none(),
        "a gate started after the interrupt"
    );
    let entries = repo.home().join("cache/greenlight/entries");
    let stored = fs::read_dir(&entries).map(|d| d.count()).unwrap_or(0);
    assert_eq!(stored, 0, "an interrupted run stored results");
}

#[test]
fn sigkill_during_parallel_gates_leaves_both_to_the_next_run_which_ends_them() {
    let repo = TempRepo::worktree_with_commit();
    let gate = |id: &str| {
        format!("  - id: {id}\n    command: sleep 600 & echo $! >> pids; echo $$ >> pids; wait\n")
    };
    repo.verify_yaml(&format!(
        "version: 2\noptions:\n  jobs: 2\ngates:\n{}{}",
        gate("left"),
        gate("right")
    ));
    let mut child = repo
        .command(["verify"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    repo.wait_for_pids("pids", 4, Duration::from_secs(10));
    child.kill().unwrap(); // SIGKILL: nothing in greenlight can act on it
    child.wait().unwrap();
    let orphans = crate::verify_leaks::pids(&repo, "pids");
    assert!(orphans.iter().all(|&p| procs::alive(p)), "{orphans:?}");
    repo.verify_yaml(&v2("  - id: quick\n    command: \"true\"\n"));
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        out.stderr
            .contains("ended 4 gate process(es) left running by an earlier greenlight"),
        "{}",
        out.stderr
    );
    procs::assert_all_dead(&orphans, "the next run left them running");
}
