//! `greenlight verify` and `hook stop` record each run in the state database as a `run-N`
//! stream (run-started, each gate's start and verdict, run-finished), and a state database that
//! cannot be written only warns: the run's stdout and exit code stay what they were.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::path::Path;
use std::time::Duration;

use greenlight_store::greenlight_stream::{Frame, FrameBody, GateVerdict, RunKind};
use greenlight_store::{DigestClass, Reads, Run, RunId, Store};
use greenlight_testkit::{TempRepo, procs};

const TWO_GATES: &str = "version: 1\ngates:\n  - id: lint\n    command: \"true\"\n  - id: unit\n    command: echo 'assertion failed: 2 + 2 == 5' >&2; exit 3\n";

fn recorded(state: &Path) -> Vec<(Run, Vec<Frame>)> {
    let store = Store::open(state).unwrap();
    store
        .runs(100)
        .unwrap()
        .into_iter()
        .map(|run| {
            let frames = store.frames_after(run.id.stream(), 0, 100).unwrap();
            let seqs: Vec<u64> = frames.iter().map(|f| f.seq).collect();
            assert_eq!(seqs, (1..=frames.len() as u64).collect::<Vec<_>>());
            (run, frames)
        })
        .collect()
}

fn kinds(frames: &[Frame]) -> Vec<&'static str> {
    frames.iter().map(|f| f.body.kind()).collect()
}

#[test]
fn verify_records_a_run_with_its_gates_and_the_failing_gates_evidence() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(TWO_GATES);
    let state = repo.home().join("runs.db");
    let run = repo
        .cli(["verify", "--state", state.to_str().unwrap()])
        .env_remove("GREENLIGHT_NO_RECORD")
        .run();
    assert_eq!(run.code, 20, "{}", run.stderr);
    assert!(!run.stderr.contains("cannot record"), "{}", run.stderr);
    let runs = recorded(&state);
    assert_eq!(runs.len(), 1);
    let (run, frames) = &runs[0];
    assert_eq!(run.kind, RunKind::Verify);
    assert_eq!(
        (run.result.as_deref(), run.exit_code, run.gates),
        (Some("failed"), Some(20), 2)
    );
    assert_eq!(
        kinds(frames),
        [
            "run-started",
            "gate-started",
            "gate-finished",
            "gate-started",
            "gate-finished",
            "run-finished"
        ]
    );
    assert!(matches!(
        &frames[2].body,
        FrameBody::GateFinished {
            gate: 1,
            verdict: GateVerdict::Pass,
            exit_code: Some(0),
            ..
        }
    ));
    let FrameBody::GateFinished {
        gate,
        verdict,
        exit_code,
        digest,
        command,
        ..
    } = &frames[4].body
    else {
        panic!("{:?}", frames[4]);
    };
    assert_eq!(
        (*gate, *verdict, *exit_code),
        (2, GateVerdict::Fail, Some(3))
    );
    assert!(command.starts_with("echo 'assertion failed"), "{command}");
    let digest = digest.as_deref().unwrap();
    assert!(digest.contains("assertion failed: 2 + 2 == 5"), "{digest}");
    assert!(matches!(
        &frames[5].body,
        FrameBody::RunFinished { result, exit_code: Some(20), .. } if result == "failed"
    ));
}

#[test]
fn verify_records_in_the_default_state_file_and_no_record_records_nothing() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: ok\n    command: \"true\"\n");
    // TempRepo points XDG_STATE_HOME into its own home: the default path never leaves it.
    let default = repo
        .home()
        .join("state")
        .join("greenlight")
        .join("state.db");
    let quiet = repo
        .cli(["verify", "--no-record"])
        .env_remove("GREENLIGHT_NO_RECORD")
        .run();
    let by_env = repo.cli(["verify"]).env("GREENLIGHT_NO_RECORD", "1").run();
    assert_eq!((quiet.code, by_env.code), (0, 0));
    assert!(!default.exists(), "nothing recorded, nothing created");
    let recorded_run = repo
        .cli(["verify"])
        .env_remove("GREENLIGHT_NO_RECORD")
        .run();
    assert_eq!(recorded_run.code, 0, "{}", recorded_run.stderr);
    assert_eq!(recorded_run.stdout, quiet.stdout);
    // The same stderr, but for the summary's wall time.
    assert_eq!(recorded_run.render(), quiet.render());
    let runs = recorded(&default);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].0.result.as_deref(), Some("passed"));
}

#[test]
fn a_state_file_that_cannot_be_written_warns_once_and_changes_nothing_else() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(TWO_GATES);
    let blocker = repo.home().join("a-file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let state = blocker.join("state.db");
    let unrecorded = repo
        .cli(["verify", "--no-record"])
        .env_remove("GREENLIGHT_NO_RECORD")
        .run();
    let run = repo
        .cli(["verify", "--state", state.to_str().unwrap()])
        .env_remove("GREENLIGHT_NO_RECORD")
        .run();
    assert_eq!(run.code, unrecorded.code);
    assert_eq!(run.stdout, unrecorded.stdout);
    assert_eq!(
        run.stderr.matches("cannot record this run").count(),
        1,
        "{}",
        run.stderr
    );
    let warning = run
        .stderr
        .lines()
        .find(|l| l.contains("cannot record this run"))
        .unwrap();
    assert!(warning.contains("a-file/state.db"), "{warning}");
    assert!(warning.contains("--no-record"), "{warning}");
    assert!(warning.contains("GREENLIGHT_NO_RECORD=1"), "{warning}");
    // Everything else on stderr is what an unrecorded run says.
    let rest: Vec<String> = run
        .stderr
        .lines()
        .filter(|l| !l.contains("cannot record this run"))
        .map(greenlight_testkit::without_durations)
        .collect();
    let unrecorded: Vec<String> = unrecorded
        .stderr
        .lines()
        .map(greenlight_testkit::without_durations)
        .collect();
    assert_eq!(rest, unrecorded);
}

#[test]
fn hook_stop_records_a_hook_run_with_its_decision() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(TWO_GATES);
    repo.commit_all("gates");
    let state = repo.home().join("state.db");
    let payload = serde_json::json!({
        "session_id": "s-record",
        "cwd": repo.path().display().to_string(),
        "hook_event_name": "Stop",
        "stop_hook_active": false,
    });
    let run = repo
        .cli(["hook", "stop", "--state", state.to_str().unwrap()])
        .env_remove("GREENLIGHT_NO_RECORD")
        .stdin(payload.to_string().as_bytes())
        .run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("\"decision\":\"block\""),
        "{}",
        run.stdout
    );
    let runs = recorded(&state);
    assert_eq!(runs.len(), 1);
    let (hook_run, frames) = &runs[0];
    assert_eq!(hook_run.kind, RunKind::Hook);
    assert_eq!(hook_run.result.as_deref(), Some("block"));
    // Each decided gate has its history row, and the run knows its repository.
    let rows = Store::open(&state).unwrap().run_gates(hook_run.id).unwrap();
    let verdicts: Vec<(&str, GateVerdict, Option<i32>, u32)> = rows
        .iter()
        .map(|r| (r.gate.as_str(), r.verdict, r.exit_code, r.attempts))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("lint", GateVerdict::Pass, Some(0), 1),
            ("unit", GateVerdict::Fail, Some(3), 1)
        ]
    );
    // Each row keeps how the digest read the output, in words: the failing gate's one line of
    // stderr is no known tool's, and nothing of it is stored.
    let unit = rows[1].digest.as_ref().unwrap();
    assert_eq!(
        (unit.class, unit.format.as_deref()),
        (DigestClass::Unrecognised, None)
    );
    assert!(
        unit.reasons.contains(&"no-known-format".to_owned()),
        "{unit:?}"
    );
    assert!(
        rows[0].digest.is_some(),
        "a pass's reading is kept on its row"
    );
    let common = repo.git(&["rev-parse", "--git-common-dir"]);
    assert_eq!(
        hook_run.repository.as_deref(),
        Some(
            std::fs::canonicalize(repo.path().join(common))
                .unwrap()
                .as_path()
        )
    );
    assert_eq!(kinds(frames).first(), Some(&"run-started"));
    assert_eq!(kinds(frames).last(), Some(&"run-finished"));
    assert!(frames.iter().any(|f| matches!(
        &f.body,
        FrameBody::GateFinished { verdict: GateVerdict::Fail, digest: Some(d), .. }
            if d.contains("assertion failed")
    )));
}

#[test]
fn a_gate_replayed_from_the_cache_is_recorded_as_replayed_and_counted_apart() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 2\ngates:\n  - id: unit\n    command: sleep 0.1\n");
    let state = repo.home().join("runs.db");
    for _ in 0..2 {
        let run = repo
            .cli(["verify", "--state", state.to_str().unwrap()])
            .env_remove("GREENLIGHT_NO_RECORD")
            .run();
        assert_eq!(run.code, 0, "{}", run.render());
    }
    let runs = recorded(&state);
    assert_eq!(runs.len(), 2);
    let finished = |frames: &[Frame]| {
        frames
            .iter()
            .find_map(|f| match &f.body {
                FrameBody::GateFinished {
                    replayed,
                    duration_ms,
                    ..
                } => Some((*replayed, duration_ms.is_some())),
                _ => None,
            })
            .unwrap()
    };
    // Newest first.
    assert_eq!(finished(&runs[0].1), (true, false));
    assert_eq!(finished(&runs[1].1), (false, true));
    let history = repo.greenlight([
        "history",
        "--gate",
        "unit",
        "--json",
        "--state",
        state.to_str().unwrap(),
    ]);
    assert_eq!(history.code, 0, "{}", history.render());
    let doc = history.json();
    let rows = doc["rows"]
        .as_array()
        .or_else(|| doc["runs"].as_array())
        .unwrap();
    let cached: Vec<bool> = rows
        .iter()
        .map(|r| r["cached"].as_bool().unwrap())
        .collect();
    assert_eq!(cached, [true, false], "{doc:#}");
    // The replay read no output now: no reading, so the one measurement is not counted twice.
    let readings: Vec<bool> = rows.iter().map(|r| r["digest"].is_null()).collect();
    assert_eq!(readings, [true, false], "{doc:#}");
}

/// A verify killed with SIGKILL in the middle of a gate: its run was begun in `state` and never
/// finished. Returns the run; the gate (a `sleep` that outlived verify) is ended too.
pub(crate) fn verify_killed_mid_gate(repo: &TempRepo, state: &Path) -> RunId {
    let gate_pid = repo.home().join("gate.pid");
    repo.verify_yaml(&format!(
        "version: 1\ngates:\n  - id: long\n    command: echo $$ > {}; exec sleep 60\n",
        gate_pid.display()
    ));
    let mut verify = repo
        .command(["verify", "--state", state.to_str().unwrap()])
        .env_remove("GREENLIGHT_NO_RECORD")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let gate = procs::wait_for_pid(&gate_pid);
    let run = procs::wait_until(Duration::from_secs(10), "the run was recorded", || {
        let store = Store::open(state).ok()?;
        let run = store.runs(1).ok()?.pop()?;
        // Recorded up to the gate's start, so the kill lands while the run is open.
        let frames = store.frames_after(run.id.stream(), 0, 10).ok()?;
        (frames.len() >= 2).then_some(run.id)
    });
    procs::signal("-KILL", verify.id());
    verify.wait().unwrap();
    procs::end(gate);
    run
}

/// A verify killed with SIGKILL left its run open; the next recorded run notices its owner is
/// gone and closes it as interrupted, with the frame that ends its stream (it stayed open,
/// `result: null`, for good).
#[test]
fn the_next_verify_closes_a_killed_verifys_run_as_interrupted() {
    let repo = TempRepo::worktree_with_commit();
    let state = repo.home().join("runs.db");
    let killed = verify_killed_mid_gate(&repo, &state);
    let open = Store::open(&state).unwrap().run(killed).unwrap().unwrap();
    assert_eq!((open.result.as_deref(), open.ended_at), (None, None));

    repo.verify_yaml(TWO_GATES);
    let next = repo
        .cli(["verify", "--state", state.to_str().unwrap()])
        .env_remove("GREENLIGHT_NO_RECORD")
        .run();
    assert_eq!(next.code, 20, "{}", next.render());
    let runs = recorded(&state);
    let (run, frames) = runs.iter().find(|(r, _)| r.id == killed).unwrap();
    assert_eq!(
        (run.result.as_deref(), run.exit_code),
        (Some("interrupted"), None)
    );
    assert!(run.ended_at.is_some_and(|end| end >= run.started_at));
    assert_eq!(
        kinds(frames),
        ["run-started", "gate-started", "run-finished"]
    );
    assert!(matches!(
        &frames[2].body,
        FrameBody::RunFinished { result, exit_code: None, .. } if result == "interrupted"
    ));
}
