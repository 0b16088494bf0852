//! Several writers on one database file, and a writer killed with SIGKILL.
//!
//! The process tests re-run this test binary with `--exact child` and an environment variable
//! that tells the `child` test what to do; without the variable `child` does nothing.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use greenlight_store::{
    AgentSpec, DispatchOutcome, DispatchStep, Error, Family, GateVerdict, GoalId, NewDispatch,
    NewGateRun, NewGoal, Reads, Store,
};
use serde_json::json;

const CHILD_ENV: &str = "GREENLIGHT_STORE_TEST_CHILD";

fn new_goal(worktree: &Path) -> NewGoal {
    NewGoal {
        worktree: worktree.to_path_buf(),
        text: "stay green".into(),
        agent: AgentSpec {
            family: Family::Claude,
            model: None,
            argv_template: None,
            endpoint: None,
        },
        judge: None,
        max_turns: 1000,
        retries: 3,
        gate_timeout_sec: 60,
        gates: vec!["true".into()],
    }
}

/// One writer's work: a goal of its own, then `n` turns each recording a gate run and events.
fn write_turns(db: &Path, worktree: &Path, n: u32) -> GoalId {
    let mut store = Store::open(db).expect("open");
    let goal = store
        .write(|tx| tx.create_goal(&new_goal(worktree)))
        .expect("create goal");
    let gate = store.gates(goal).expect("gates")[0].id;
    for i in 0..n {
        store
            .write(|tx| {
                let turn = tx.begin_turn(goal)?;
                tx.append_event(Some(goal), Some(turn), "note", &json!({"i": i}))?;
                tx.record_gate_run(&NewGateRun {
                    goal,
                    gate,
                    turn: Some(turn),
                    verdict: GateVerdict::Pass,
                    exit_code: Some(0),
                    duration_ms: 1,
                    workspace_key: None,
                    replayed: false,
                    digest: None,
                    evidence: None,
                })?;
                tx.end_turn(goal, turn, "gates-passed")
            })
            .unwrap_or_else(|e: Error| {
                panic!("writer for {} failed at turn {i}: {e}", worktree.display())
            });
    }
    goal
}

fn assert_contiguous(store: &Store) -> usize {
    let seqs: Vec<i64> = store
        .events_after(None, 0, usize::MAX)
        .expect("events")
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as i64).collect::<Vec<_>>(),
        "event seq must have no gaps"
    );
    seqs.len()
}

fn child_command(mode: &str, db: &Path, worktree: &Path) -> Command {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, mode)
        .env("CHILD_DB", db)
        .env("CHILD_WORKTREE", worktree)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    cmd
}

/// Not a test on its own: the body of a child process started by the tests below.
#[test]
fn child() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = PathBuf::from(std::env::var_os("CHILD_DB").expect("CHILD_DB"));
    let wt = PathBuf::from(std::env::var_os("CHILD_WORKTREE").expect("CHILD_WORKTREE"));
    match mode.as_str() {
        "write" => {
            write_turns(&db, &wt, 150);
        }
        "crash" => {
            let mut store = Store::open(&db).expect("open");
            let goal = store
                .write(|tx| tx.create_goal(&new_goal(&wt)))
                .expect("create");
            let turn = store.write(|tx| tx.begin_turn(goal)).expect("turn");
            store
                .write(|tx| {
                    tx.begin_dispatch(&NewDispatch {
                        step: DispatchStep::Agent,
                        goal,
                        turn,
                        attempt: 1,
                        family: Family::Claude,
                        model: None,
                    })
                })
                .expect("begin dispatch");
            std::fs::write(wt.join("ready"), b"").expect("marker");
            std::thread::sleep(Duration::from_secs(120)); // killed long before this ends
        }
        other => panic!("unknown child mode {other}"),
    }
}

#[test]
fn writers_in_parallel_threads_never_see_database_is_locked() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = common::state_at(dir.path().join("state.db"));
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let db = db.clone();
            let wt = dir.path().join(format!("wt{i}"));
            std::fs::create_dir(&wt).expect("mkdir");
            std::thread::spawn(move || write_turns(&db, &wt, 100))
        })
        .collect();
    let goals: Vec<GoalId> = handles
        .into_iter()
        .map(|h| h.join().expect("writer thread"))
        .collect();
    let store = Store::open(&db).expect("open");
    for g in goals {
        assert_eq!(store.turns(g).expect("turns").len(), 100);
        assert_eq!(store.gate_runs(g).expect("runs").len(), 100);
    }
    // Per goal: created + gate-added, then 4 events per turn (start, note, gate-run, end).
    assert_eq!(assert_contiguous(&store), 4 * (2 + 4 * 100));
}

#[test]
fn writers_in_parallel_processes_never_see_database_is_locked() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = common::state_at(dir.path().join("state.db"));
    let children: Vec<_> = (0..3)
        .map(|i| {
            let wt = dir.path().join(format!("wt{i}"));
            std::fs::create_dir(&wt).expect("mkdir");
            child_command("write", &db, &wt)
                .spawn()
                .expect("spawn child")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child failed: {stderr}");
        assert!(!stderr.contains("locked"), "{stderr}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "the child must have run"
        );
    }
    let store = Store::open(&db).expect("open");
    let goals = store.goals().expect("goals");
    assert_eq!(goals.len(), 3);
    for g in &goals {
        assert_eq!(store.gate_runs(g.id).expect("runs").len(), 150);
    }
    assert_eq!(assert_contiguous(&store), 3 * (2 + 4 * 150));
}

#[test]
fn a_runner_killed_with_sigkill_leaves_a_dispatch_that_recovery_marks_interrupted() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = common::state_at(dir.path().join("state.db"));
    let wt = dir.path().join("wt");
    std::fs::create_dir(&wt).expect("mkdir");
    let mut child = child_command("crash", &db, &wt)
        .spawn()
        .expect("spawn child");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !wt.join("ready").exists() {
        if let Some(status) = child.try_wait().expect("poll child") {
            panic!("child exited early with {status}");
        }
        assert!(
            Instant::now() < deadline,
            "child never reached the in-flight dispatch"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL"); // std's kill is SIGKILL on Unix
    child.wait().expect("reap");

    let mut store = Store::open(&db).expect("reopen after the crash");
    let goal = store
        .live_goal(&wt)
        .expect("read")
        .expect("the goal survived the crash");
    let ledger = store.dispatches(goal.id).expect("ledger");
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0].outcome, DispatchOutcome::InFlight);
    let rec = store
        .write(|tx| tx.recover_interrupted(goal.id))
        .expect("recover");
    assert_eq!(rec.dispatches, [ledger[0].id]);
    assert_eq!(rec.turns, [1]);
    let row = store.dispatch(ledger[0].id).expect("read").expect("row");
    assert_eq!(row.outcome, DispatchOutcome::Interrupted);
    assert_eq!(row.tokens.input, None);
    let kinds: Vec<String> = store
        .events_after(Some(goal.id), 0, 100)
        .expect("events")
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            "goal-created",
            "gate-added",
            "turn-started",
            "dispatch-started",
            "recovered"
        ]
    );
    assert_contiguous(&store);
}

/// Two `goal run`s in two worktrees can be the first to touch a new state file at the same
/// moment: every one of them must open it (CI once saw `database is locked` here).
#[test]
fn many_connections_opening_a_new_file_at_once_all_succeed() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = common::state_at(dir.path().join("state.db"));
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    Store::open(&path).map(drop)
                })
            })
            .collect();
        for h in handles {
            let opened = h.join().unwrap();
            assert!(opened.is_ok(), "round {round}: {opened:?}");
        }
    }
}
