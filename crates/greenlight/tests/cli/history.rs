//! `greenlight history` and `verify --suggest-timeouts` over runs recorded by the real binary
//! (and, where exact percentiles matter, rows written through the store's API): the runs
//! table, each gate's figures, one gate's rows, the repository-wide scope, and a timeout diff
//! that `git apply` takes and that parses as a valid config.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::path::{Path, PathBuf};

use camino::Utf8Path;
use greenlight_store::greenlight_stream::{GateVerdict, RunKind};
use greenlight_store::{NewRunGate, Reads, Store};
use greenlight_testkit::{Run, TempRepo};

/// Four gates: one passes, one fails, one takes ≥ 50 ms, one fails then passes on its retry
/// (FLAKY, every run: the flag it leaves is removed by the retry).
fn gates(flag: &Path) -> String {
    format!(
        "version: 1\ngates:\n  - id: ok\n    command: \"true\"\n  - id: bad\n    command: exit 3\n  - id: slow\n    command: sleep 0.05\n  - id: wobbly\n    command: if [ -f {f} ]; then rm {f}; else touch {f}; exit 1; fi\n    retryOnFail: 1\n",
        f = flag.display()
    )
}

fn state_of(repo: &TempRepo) -> PathBuf {
    repo.home().join("history.db")
}

fn greenlight(repo: &TempRepo, args: &[&str]) -> Run {
    let state = state_of(repo);
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--state", state.to_str().unwrap()]);
    repo.cli(all).env_remove("GREENLIGHT_NO_RECORD").run()
}

fn verify_times(repo: &TempRepo, times: usize) {
    for _ in 0..times {
        let run = greenlight(repo, &["verify"]);
        assert_eq!(run.code, 20, "{}", run.render());
    }
}

#[test]
fn history_lists_the_runs_then_each_gates_figures_and_json_agrees() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(&gates(&repo.home().join("flag")));
    verify_times(&repo, 3);

    let doc = greenlight(&repo, &["history", "--json"]);
    assert_eq!(doc.code, 0, "{}", doc.render());
    let doc = doc.json();
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for run in runs {
        assert_eq!(
            (
                &run["kind"],
                &run["result"],
                &run["exit_code"],
                &run["gates"]
            ),
            (
                &serde_json::json!("verify"),
                &serde_json::json!("failed"),
                &serde_json::json!(20),
                &serde_json::json!(4)
            )
        );
    }
    assert!(
        runs[0]["id"].as_i64() > runs[1]["id"].as_i64(),
        "newest first"
    );
    let gate = |id: &str| {
        doc["gates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["gate"] == id)
            .unwrap_or_else(|| panic!("no {id} in {doc}"))
            .clone()
    };
    let (ok, bad, slow, wobbly) = (gate("ok"), gate("bad"), gate("slow"), gate("wobbly"));
    for g in [&ok, &bad, &slow, &wobbly] {
        assert_eq!(g["samples"], 3, "{g}");
    }
    assert_eq!(
        (&ok["failure_rate"], &ok["last_verdict"]),
        (&0.0.into(), &"pass".into())
    );
    assert_eq!(
        (&bad["failure_rate"], &bad["last_verdict"]),
        (&1.0.into(), &"fail".into())
    );
    assert_eq!(
        (
            &wobbly["flaky_rate"],
            &wobbly["failure_rate"],
            &wobbly["last_verdict"]
        ),
        (&1.0.into(), &0.0.into(), &"flaky".into())
    );
    let slow_p50 = slow["p50_ms"].as_u64().unwrap();
    assert!(slow_p50 >= 50, "{slow}");
    assert!(slow["p95_ms"].as_u64().unwrap() >= slow_p50, "{slow}");
    assert_eq!(doc["window"], 100);
    let repository = doc["scope"]["repository"].as_str().unwrap();
    assert!(repository.ends_with("/.git"), "{repository}");

    let text = greenlight(&repo, &["history"]);
    assert_eq!(text.code, 0, "{}", text.render());
    let lines = text.lines();
    assert_eq!(lines[0], "recent runs (newest first)");
    assert!(lines[1].starts_with("run  when"), "{}", text.stdout);
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["run", "when", "kind", "result", "duration", "gates"]
    );
    let table_start = lines.iter().position(|l| l.starts_with("gates (")).unwrap();
    assert_eq!(
        table_start, 6,
        "three runs, then a blank line: {}",
        text.stdout
    );
    assert_eq!(
        lines[table_start + 1]
            .split_whitespace()
            .collect::<Vec<_>>(),
        [
            "gate", "runs", "p50", "p95", "fail%", "flaky%", "exact", "partial", "raw", "last"
        ]
    );
    let row = |id: &str| {
        lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    // gate, runs, p50 (value and unit), p95 (value and unit), fail%, flaky%, exact, partial,
    // raw, last verdict, …; `exit 3` prints nothing, so its evidence was the (empty) tail.
    assert_eq!(
        (
            row("bad")[1],
            row("bad")[6],
            &row("bad")[8..11],
            row("bad")[11]
        ),
        ("3", "100.0", &["0", "0", "3"][..], "fail")
    );
    assert_eq!((row("wobbly")[6], row("wobbly")[7]), ("0.0", "100.0"));
}

#[test]
fn one_gates_rows_and_an_unknown_gate_is_refused_naming_the_known_ones() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(&gates(&repo.home().join("flag")));
    verify_times(&repo, 2);

    let doc = greenlight(
        &repo,
        &["history", "--gate", "wobbly", "--limit", "1", "--json"],
    );
    assert_eq!(doc.code, 0, "{}", doc.render());
    let doc = doc.json();
    assert_eq!(doc["gate"], "wobbly");
    assert_eq!(doc["stats"]["samples"], 2);
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "--limit 1");
    assert_eq!(
        (
            &rows[0]["verdict"],
            &rows[0]["attempts"],
            &rows[0]["exit_code"],
            &rows[0]["cached"]
        ),
        (&"flaky".into(), &2.into(), &0.into(), &false.into())
    );

    let text = greenlight(&repo, &["history", "--gate", "bad"]);
    assert_eq!(text.code, 0, "{}", text.render());
    assert!(
        text.stdout.starts_with("gate bad: 2 measured runs, p50 "),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("fail 100.0%, flaky 0.0%, evidence exact 0 partial 0 raw 2, last fail at "),
        "{}",
        text.stdout
    );
    let rows: Vec<Vec<&str>> = text
        .lines()
        .iter()
        .skip(3)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{}", text.stdout);
    for row in rows {
        // from (`run N`), date, time, UTC, verdict, exit, duration (2 words), attempts,
        // cached, evidence
        assert_eq!(
            (row[0], row[5], row[6], row[9], row[10], &row[11..]),
            ("run", "fail", "3", "1", "no", &["raw:", "empty-output"][..]),
            "{row:?}"
        );
    }

    let unknown = greenlight(&repo, &["history", "--gate", "nope"]);
    assert_eq!(unknown.code, 2, "{}", unknown.render());
    assert_eq!(unknown.stdout, "");
    assert_eq!(
        unknown.stderr.trim_end(),
        "greenlight: no recorded results for gate `nope` in this repository; gates with history: bad, ok, slow, wobbly"
    );
}

#[test]
fn no_history_is_one_line_and_exit_0_and_creates_no_file() {
    let repo = TempRepo::worktree_with_commit();
    let out = greenlight(&repo, &["history"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        out.stdout,
        format!(
            "no recorded runs for {} yet: `greenlight verify` records each run\n",
            repo.path().display()
        )
    );
    assert!(!state_of(&repo).exists());
    let json = greenlight(&repo, &["history", "--json"]);
    assert_eq!(
        (json.code, &json.json()["runs"]),
        (0, &serde_json::json!([]))
    );
    let gate = greenlight(&repo, &["history", "--gate", "unit"]);
    assert_eq!(
        gate.code,
        0,
        "nothing recorded is not an unknown gate: {}",
        gate.render()
    );
}

/// Worktrees of one repository run the same gates, so each sees the others' history.
#[test]
fn history_covers_every_worktree_of_the_repository() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(&gates(&repo.home().join("flag")));
    verify_times(&repo, 1);
    let primary = repo.path().parent().unwrap().join("repo");
    let from_primary = greenlight(
        &repo,
        &["history", "-C", primary.to_str().unwrap(), "--json"],
    );
    assert_eq!(from_primary.code, 0, "{}", from_primary.render());
    let doc = from_primary.json();
    assert_eq!(doc["runs"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc["runs"][0]["worktree"], repo.path().to_str().unwrap());
    // Another repository sees none of it.
    let other = TempRepo::primary();
    let elsewhere = greenlight(&repo, &["history", "-C", other.path().to_str().unwrap()]);
    assert!(
        elsewhere.stdout.starts_with("no recorded runs for "),
        "{}",
        elsewhere.render()
    );
}

/// Rows with exact durations, recorded as runs of this repository.
fn seed(repo: &TempRepo, gate: &str, durations_ms: &[u64]) {
    let common = repo.git(&["rev-parse", "--git-common-dir"]);
    let common = std::fs::canonicalize(repo.path().join(common)).unwrap();
    let mut store = Store::open(&state_of(repo)).unwrap();
    for &ms in durations_ms {
        store
            .write(|tx| {
                let run =
                    tx.begin_run_in(RunKind::Verify, repo.path(), Some(&common), &[gate.into()])?;
                tx.record_run_gate(
                    run,
                    &NewRunGate {
                        gate: gate.into(),
                        verdict: GateVerdict::Pass,
                        exit_code: Some(0),
                        duration_ms: Some(ms),
                        attempts: 1,
                        cached: false,
                        decided_at: tx.now(),
                        digest: None,
                    },
                )?;
                tx.finish_run(run, "passed", 0, ms).map(|_| ())
            })
            .unwrap();
    }
}

const CONFIG: &str = "version: 1\n# gates of the project\ngates:\n  - id: lint\n    command: touch ran-lint\n    timeoutSec: 600\n  - id: unit\n    command: \"touch ran-unit\"\n    retryOnFail: 1\n  - id: new\n    command: touch ran-new\n";

#[test]
fn suggest_timeouts_prints_a_diff_that_git_apply_takes_and_that_parses() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(CONFIG);
    repo.commit_all("gates");
    // unit: 1 … 20 s, so its p99 (nearest rank) is 20 s → 30 s; lint: 50 s → 75 s → 90 s.
    seed(
        &repo,
        "unit",
        &(1..=20).map(|s| s * 1000).collect::<Vec<_>>(),
    );
    seed(&repo, "lint", &[50_000; 10]);
    seed(&repo, "new", &[1_000; 4]);
    let runs_before = Store::open(&state_of(&repo))
        .unwrap()
        .runs(100)
        .unwrap()
        .len();

    let out = greenlight(&repo, &["verify", "--suggest-timeouts"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        out.stdout,
        "--- a/.commandmate/verify.yaml\n+++ b/.commandmate/verify.yaml\n@@ -3,9 +3,10 @@\n gates:\n   - id: lint\n     command: touch ran-lint\n-    timeoutSec: 600\n+    timeoutSec: 90\n   - id: unit\n     command: \"touch ran-unit\"\n+    timeoutSec: 30\n     retryOnFail: 1\n   - id: new\n     command: touch ran-new\n"
    );
    assert!(
        out.stderr.contains(
            "greenlight: new: 4 recorded run(s), fewer than 5: its timeoutSec is left as it is"
        ),
        "{}",
        out.stderr
    );
    // No gate ran and nothing was recorded.
    for gate in ["lint", "unit", "new"] {
        assert!(repo.read(&format!("ran-{gate}")).is_none(), "{gate} ran");
    }
    let store = Store::open(&state_of(&repo)).unwrap();
    assert_eq!(store.runs(100).unwrap().len(), runs_before);

    let patch = repo.home().join("timeouts.diff");
    std::fs::write(&patch, &out.stdout).unwrap();
    repo.git(&["apply", "--check", patch.to_str().unwrap()]);
    let patched = std::process::Command::new("patch")
        .args(["-p1", "--dry-run", "-i", patch.to_str().unwrap()])
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert!(
        patched.status.success(),
        "{}",
        String::from_utf8_lossy(&patched.stdout)
    );
    repo.git(&["apply", patch.to_str().unwrap()]);
    let text = repo.read(".commandmate/verify.yaml").unwrap();
    let config = greenlight_gate::config::parse_v1(Utf8Path::new("verify.yaml"), &text).unwrap();
    let timeouts: Vec<(&str, u32)> = config
        .gates
        .iter()
        .map(|g| (g.id.as_str(), g.timeout_sec))
        .collect();
    assert_eq!(timeouts, [("lint", 90), ("unit", 30), ("new", 600)]);

    // Applied, the suggestion is what the file says: nothing left to change.
    let again = greenlight(&repo, &["verify", "--suggest-timeouts"]);
    assert_eq!(
        (again.code, again.stdout.as_str()),
        (0, ""),
        "{}",
        again.render()
    );
}

#[test]
fn suggest_timeouts_with_too_few_runs_changes_nothing_and_says_why() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: slow\n    command: sleep 0.05\n");
    for _ in 0..2 {
        assert_eq!(greenlight(&repo, &["verify"]).code, 0);
    }
    let out = greenlight(&repo, &["verify", "--suggest-timeouts"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        "greenlight: slow: 2 recorded run(s), fewer than 5: its timeoutSec is left as it is\n"
    );
    let bad = greenlight(
        &repo,
        &["verify", "--suggest-timeouts", "--config", "missing.yaml"],
    );
    assert_eq!(bad.code, 2, "{}", bad.render());
    assert!(bad.stderr.contains("missing.yaml"), "{}", bad.stderr);
}

#[test]
fn suggest_timeouts_edits_a_v2_file_in_place_and_it_still_reads_as_v2() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 2\noptions:\n  jobs: 2\ngates:\n  - id: lint\n    command: touch ran-lint\n    inputs: [src]\n  - id: unit\n    command: \"touch ran-unit\"\n    timeoutSec: 600\n    needs: [lint]\n",
    );
    repo.commit_all("gates");
    seed(&repo, "lint", &[50_000; 10]);
    seed(
        &repo,
        "unit",
        &(1..=20).map(|s| s * 1000).collect::<Vec<_>>(),
    );
    let out = greenlight(&repo, &["verify", "--suggest-timeouts"]);
    assert_eq!(out.code, 0, "{}", out.render());
    let patch = repo.home().join("timeouts.diff");
    std::fs::write(&patch, &out.stdout).unwrap();
    repo.git(&["apply", patch.to_str().unwrap()]);
    let text = repo.read(".greenlight/verify.yaml").unwrap();
    let loaded =
        greenlight_gate::config::parse(Utf8Path::new(".greenlight/verify.yaml"), &text).unwrap();
    assert_eq!(loaded.version(), 2);
    let timeouts: Vec<(&str, u32)> = loaded
        .gates
        .iter()
        .map(|g| (g.id.as_str(), g.timeout_sec))
        .collect();
    assert_eq!(timeouts, [("lint", 90), ("unit", 30)]);
    assert_eq!(loaded.gate_v2(1).unwrap().needs, ["lint"]);
    assert_eq!(loaded.gate_v2(0).unwrap().inputs, ["src"]);
}

/// A verify killed with SIGKILL mid-gate was listed as "unfinished" for good (and by serve as
/// running): history closes the run as interrupted, in the file, and says so in both forms.
#[test]
fn history_shows_a_verify_killed_with_sigkill_as_interrupted() {
    let repo = TempRepo::worktree_with_commit();
    let state = state_of(&repo);
    let killed = crate::run_record::verify_killed_mid_gate(&repo, &state);

    let doc = greenlight(&repo, &["history", "--json"]);
    assert_eq!(doc.code, 0, "{}", doc.render());
    let doc = doc.json();
    let run = &doc["runs"][0];
    assert_eq!(run["id"], killed.0);
    assert_eq!(
        (&run["result"], &run["exit_code"]),
        (&serde_json::json!("interrupted"), &serde_json::Value::Null),
        "{doc:#}"
    );
    assert!(
        run["ended_at"].is_i64() && run["duration_ms"].is_i64(),
        "{doc:#}"
    );
    let text = greenlight(&repo, &["history"]);
    assert_eq!(text.code, 0, "{}", text.render());
    let row = text
        .stdout
        .lines()
        .find(|l| l.starts_with(&killed.0.to_string()))
        .unwrap();
    assert!(row.contains("interrupted"), "{}", text.stdout);
    assert!(!text.stdout.contains("unfinished"), "{}", text.stdout);
    let stored = Store::open(&state).unwrap().run(killed).unwrap().unwrap();
    assert_eq!(stored.result.as_deref(), Some("interrupted"));
}

/// A 1 s mutex gate was proposed `timeoutSec: 5`, but the limit also bounds the wait for the
/// mutex: with 8 worktrees queueing, 3 runs became `SKIP reason=mutex-wait`. The history has
/// no waits to size it from, so a mutex gate gets no proposal and stderr says why.
#[test]
fn suggest_timeouts_leaves_a_mutex_gate_alone_and_says_why() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: e2e\n    command: \"true\"\n    mutex: port\n  - id: unit\n    command: \"true\"\n");
    repo.commit_all("gates");
    seed(&repo, "e2e", &[1_000; 10]);
    seed(&repo, "unit", &[1_000; 10]);
    let out = greenlight(&repo, &["verify", "--suggest-timeouts"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        out.stderr.contains("greenlight: e2e: takes mutex `port`, and its timeoutSec also bounds the wait for the mutex, which the history does not measure: its timeoutSec is left as it is"),
        "{}",
        out.render()
    );
    assert!(
        !out.stdout.contains("id: e2e\n     command: \"true\"\n+"),
        "{}",
        out.stdout
    );
    assert_eq!(
        out.stdout.matches("+    timeoutSec: 5\n").count(),
        1,
        "only unit is proposed: {}",
        out.stdout
    );
}

/// pytest's own output of a failing run (a committed fixture of the digest), whole, without its
/// closing summary line, and a line no tool writes: the evidence is exact, partial and raw.
fn three_readings(repo: &TempRepo) {
    let pytest = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../greenlight-digest/tests/fixtures/pytest/fail-q/output.txt"),
    )
    .unwrap();
    let cut = pytest.trim_end().rfind('\n').unwrap();
    repo.write("full.txt", &pytest);
    repo.write("part.txt", &pytest[..=cut]);
    repo.write("raw.txt", "something broke\n");
    repo.write("show", "cat \"$1\"\nexit 1\n");
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: exact\n    command: sh show full.txt\n  - id: partial\n    command: sh show part.txt\n  - id: raw\n    command: sh show raw.txt\n  - id: green\n    command: sh show raw.txt || true\n",
    );
}

/// Observe telemetry: each recorded gate keeps how the digest read its output, history counts
/// the readings of the runs that did not pass per gate (table and JSON), one gate's rows name
/// format and reasons, and the store holds words only (no command, no output).
#[test]
fn history_counts_exact_partial_and_raw_evidence_per_gate_and_the_store_keeps_only_words() {
    let repo = TempRepo::worktree_with_commit();
    three_readings(&repo);
    verify_times(&repo, 2);

    let doc = greenlight(&repo, &["history", "--json"]).json();
    let evidence = |id: &str| {
        doc["gates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["gate"] == id)
            .unwrap_or_else(|| panic!("no {id} in {doc}"))["evidence"]
            .clone()
    };
    let counts = |exact: u32, partial: u32, raw: u32| serde_json::json!({ "exact": exact, "partial": partial, "raw": raw });
    assert_eq!(evidence("exact"), counts(2, 0, 0));
    assert_eq!(evidence("partial"), counts(0, 2, 0));
    assert_eq!(evidence("raw"), counts(0, 0, 2));
    // A pass is no evidence, however its output reads.
    assert_eq!(evidence("green"), counts(0, 0, 0));

    let text = greenlight(&repo, &["history"]);
    let line = |id: &str| -> Vec<String> {
        text.lines()
            .iter()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("no {id} in {}", text.stdout))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    // gate, runs, p50 (2), p95 (2), fail%, flaky%, exact, partial, raw, …
    assert_eq!(line("exact")[8..11], ["2", "0", "0"]);
    assert_eq!(line("partial")[8..11], ["0", "2", "0"]);
    assert_eq!(line("raw")[8..11], ["0", "0", "2"]);
    assert!(
        text.stdout.contains(
            "exact: the digest read the whole output; partial: part of it, the rest as a tail; raw: only the tail"
        ),
        "{}",
        text.stdout
    );

    let rows = greenlight(&repo, &["history", "--gate", "partial", "--json"]).json();
    assert_eq!(
        rows["rows"][0]["digest"],
        serde_json::json!({
            "evidence": "partial",
            "classification": "partial",
            "format": "pytest",
            "reasons": ["no-summary"],
        })
    );
    let one = greenlight(&repo, &["history", "--gate", "raw"]);
    assert!(
        one.lines()[3].ends_with("raw: no-known-format"),
        "{}",
        one.stdout
    );

    // The table's columns are the figures and the words, nothing that could hold a command or
    // its output; and no cell holds either.
    let db = rusqlite::Connection::open(state_of(&repo)).unwrap();
    let columns: Vec<String> = db
        .prepare("SELECT name FROM pragma_table_info('run_gates') ORDER BY cid")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        columns,
        [
            "id",
            "run_id",
            "goal_id",
            "turn",
            "gate",
            "verdict",
            "exit_code",
            "duration_ms",
            "attempts",
            "cached",
            "decided_at",
            "repository",
            "worktree",
            "digest_class",
            "digest_format",
            "digest_reasons"
        ]
    );
    // gate, digest_class, digest_format, digest_reasons
    type Words = (String, Option<String>, Option<String>, Option<String>);
    let words: Vec<Words> = db
        .prepare(
            "SELECT gate, digest_class, digest_format, digest_reasons FROM run_gates ORDER BY id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(words.len(), 8, "{words:?}");
    for (gate, class, format, reasons) in &words {
        let cells = format!("{gate} {class:?} {format:?} {reasons:?}");
        for leak in ["show", "test_math", "something", "broke"] {
            assert!(!cells.contains(leak), "{leak} stored: {cells}");
        }
    }
    assert_eq!(
        words[0..4]
            .iter()
            .map(|(g, c, f, r)| (g.as_str(), c.as_deref(), f.as_deref(), r.as_deref()))
            .collect::<Vec<_>>(),
        [
            ("exact", Some("recognised"), Some("pytest"), Some("")),
            (
                "partial",
                Some("partial"),
                Some("pytest"),
                Some("no-summary")
            ),
            ("raw", Some("unrecognised"), None, Some("no-known-format")),
            // `a || true` is compound: a line no format explains may be a whole inner run.
            (
                "green",
                Some("unrecognised"),
                None,
                Some("no-known-format,unclaimed-output")
            ),
        ]
    );
}
