//! `greenlight workflow status|log|list|pause` through the real binary, on a state file filled
//! through the store's API: what a run spent (unknown figures shown as unknown, never 0), each
//! step's newest attempt, the worktrees kept, the ledger, the list, a pause asked and seen by the
//! store, and a run whose process died shown as interrupted.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::path::{Path, PathBuf};

use greenlight_store::greenlight_types::{Family, MemberState, WorkflowStatus};
use greenlight_store::{
    NewWorkflowDispatch, NewWorkflowMember, NewWorkflowRun, Reads, Store, WorkflowBudget,
    WorkflowDetail, WorkflowDispatchEnd, WorkflowRunId,
};
use greenlight_testkit::Cli;

fn new_run(name: &str, units: Option<u64>) -> NewWorkflowRun {
    NewWorkflowRun {
        id: None,
        name: name.into(),
        plan_path: "plans/fix.yaml".into(),
        repository: "/r/.git".into(),
        worktree: "/r".into(),
        base_commit: "0123abcd".into(),
        plan_digest: "d1g3st".into(),
        args_hash: "h4sh".into(),
        plan_json: r#"{"name":"fix"}"#.into(),
        args_json: "{}".into(),
        budget: WorkflowBudget {
            units,
            ..WorkflowBudget::default()
        },
    }
}

fn dispatch(
    store: &mut Store,
    run: WorkflowRunId,
    item: &str,
    attempt: u32,
    end: WorkflowDispatchEnd,
) {
    store
        .write(|tx| {
            let (id, _) = tx.start_workflow_dispatch(&NewWorkflowDispatch {
                run,
                step: "fix".into(),
                item: Some(item.into()),
                attempt,
                family: Family::Command,
                model: Some("scripted".into()),
                worktree: Some(PathBuf::from(format!("/r/.wt/{item}"))),
            })?;
            tx.finish_workflow_dispatch(id, &end)
        })
        .unwrap();
}

/// A run of plan `fix` with budget 5 (+2): member `a` done with its figures, member `b` failed
/// twice without reporting any, and `b`'s worktree kept.
fn filled(db: &Path) -> WorkflowRunId {
    let mut store = Store::open(db).unwrap();
    let run = store
        .write(|tx| tx.create_workflow_run(&new_run("fix", Some(5))))
        .unwrap();
    store
        .write(|tx| {
            tx.append_workflow_event(run, r#"{"kind":"started"}"#, None)?;
            tx.extend_workflow_budget(run, 2)
        })
        .unwrap();
    dispatch(
        &mut store,
        run,
        "a",
        1,
        WorkflowDispatchEnd {
            outcome: "ok".into(),
            wall_ms: Some(120),
            tokens_in: Some(300),
            tokens_out: Some(40),
            cost_usd: Some(0.25),
            ..WorkflowDispatchEnd::default()
        },
    );
    for attempt in [1, 2] {
        dispatch(
            &mut store,
            run,
            "b",
            attempt,
            WorkflowDispatchEnd {
                outcome: "failed".into(),
                reason: Some("deliverable-not-landed".into()),
                wall_ms: Some(80),
                ..WorkflowDispatchEnd::default()
            },
        );
    }
    store
        .write(|tx| {
            tx.add_workflow_member(&NewWorkflowMember {
                run,
                step: "fix".into(),
                item: Some("b".into()),
                branch: "wf-1/fix-b".into(),
                worktree: "/r/.wt/b".into(),
            })?;
            tx.set_workflow_member_state(
                run,
                "fix",
                Some("b"),
                MemberState::Kept,
                Some("gate-failed"),
            )
        })
        .unwrap();
    run
}

fn greenlight(db: &Path, args: &[&str]) -> greenlight_testkit::Run {
    let mut all = vec!["workflow"];
    all.extend_from_slice(args);
    all.extend(["--state", db.to_str().unwrap()]);
    Cli::new(all).run()
}

#[test]
fn status_shows_the_spend_each_steps_newest_attempt_and_the_kept_worktree() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let run = filled(&db);
    let out = greenlight(&db, &["status", &run.to_string()]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        out.stdout,
        "workflow 1 fix [running] in /r\n\
         \x20 plan plans/fix.yaml digest d1g3st base 0123abcd\n\
         \x20 dispatch units 3/7 (1 extension, +2); tokens in 300 out 40; cost $0.2500\n\
         \x20 step fix [a] ok (attempt 1)\n\
         \x20 step fix [b] failed deliverable-not-landed (attempt 2)\n\
         \x20 kept worktree /r/.wt/b (branch wf-1/fix-b): gate-failed\n"
    );
    let doc = greenlight(&db, &["status", "1", "--json"]).json();
    assert_eq!(doc["run"]["status"], "running");
    assert_eq!(doc["run"]["spent"]["units"], 3);
    assert_eq!(doc["run"]["spent"]["tokens_in"], 300);
    assert_eq!(doc["run"]["budget"]["units"], 5);
    assert_eq!(doc["run"]["extension_units"], 2);
    assert_eq!(doc["steps"][1]["attempts"], 2);
    assert_eq!(doc["members"][0]["state"], "kept");
    assert!(doc["greenlight_version"].is_string());
}

#[test]
fn log_shows_the_events_and_the_ledger_with_unreported_figures_unknown_not_zero() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    filled(&db);
    let out = greenlight(&db, &["log", "1"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        out.lines(),
        [
            r#"event 1 {"kind":"started"}"#,
            "dispatch fix [a] attempt 1 command scripted ok wall_ms=120 tokens_in=300 tokens_out=40 cost=$0.2500",
            "dispatch fix [b] attempt 1 command scripted failed reason=deliverable-not-landed wall_ms=80 tokens_in=- tokens_out=- cost=-",
            "dispatch fix [b] attempt 2 command scripted failed reason=deliverable-not-landed wall_ms=80 tokens_in=- tokens_out=- cost=-",
        ]
    );
    let doc = greenlight(&db, &["log", "1", "--json"]).json();
    assert_eq!(doc["events"][0]["event"], r#"{"kind":"started"}"#);
    let b = &doc["dispatches"][1];
    assert_eq!(b["tokens_in"], serde_json::Value::Null);
    assert_eq!(b["cost_usd"], serde_json::Value::Null);
    assert_eq!(doc["dispatches"][0]["tokens_out"], 40);
}

#[test]
fn list_shows_every_run_newest_first_and_an_unknown_id_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let empty = greenlight(&db, &["list"]);
    assert_eq!(empty.code, 0);
    assert!(
        empty.stdout.starts_with("no workflow runs in "),
        "{}",
        empty.stdout
    );
    filled(&db);
    let mut store = Store::open(&db).unwrap();
    let second = store
        .write(|tx| tx.create_workflow_run(&new_run("docs", None)))
        .unwrap();
    store
        .write(|tx| tx.finish_workflow_run(second, WorkflowStatus::Completed, None))
        .unwrap();
    let out = greenlight(&db, &["list"]);
    assert_eq!(
        out.lines(),
        [
            "2 docs [completed] units 0 (no limit) in /r",
            "1 fix [running] units 3/7 in /r"
        ]
    );
    let doc = greenlight(&db, &["list", "--json"]).json();
    assert_eq!(doc.as_array().unwrap().len(), 2);
    assert_eq!(doc[0]["id"], 2);
    let missing = greenlight(&db, &["status", "9"]);
    assert_eq!(missing.code, 2);
    assert_eq!(
        missing.stderr,
        "greenlight: no workflow run 9; `greenlight workflow list` shows the runs this state file holds\n"
    );
}

#[test]
fn pause_records_a_request_the_runtime_reads_and_refuses_an_ended_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let run = filled(&db);
    let out = greenlight(&db, &["pause", "1"]);
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (
            0,
            "greenlight: workflow run 1 pauses at its next boundary\n"
        )
    );
    let mut store = Store::open(&db).unwrap();
    let asked = store.workflow_run(run).unwrap().unwrap();
    assert!(
        asked.pause_requested_at.is_some(),
        "the request is in the store"
    );
    assert_eq!(
        asked.status,
        WorkflowStatus::Running,
        "asking does not stop a process"
    );
    let status = greenlight(&db, &["status", "1"]);
    assert!(
        status
            .stdout
            .contains("  pause requested: it pauses at its next boundary\n"),
        "{}",
        status.stdout
    );
    let again = greenlight(&db, &["pause", "1"]);
    assert_eq!(again.code, 0);
    assert!(
        again.stdout.contains("already asked to pause"),
        "{}",
        again.stdout
    );
    // The runtime answers at its boundary.
    store
        .write(|tx| {
            tx.pause_workflow_run(
                run,
                &WorkflowDetail {
                    reason: "paused-by-user".into(),
                    step: Some("land".into()),
                    ..WorkflowDetail::default()
                },
            )
        })
        .unwrap();
    let paused = greenlight(&db, &["pause", "1"]);
    assert_eq!(
        paused.stdout,
        "greenlight: workflow run 1 is already paused; `greenlight workflow run PLAN --resume 1` carries on\n"
    );
    let status = greenlight(&db, &["status", "1"]);
    assert!(
        status.stdout.contains("  paused: paused-by-user at land\n"),
        "{}",
        status.stdout
    );
    store.write(|tx| tx.resume_workflow_run(run)).unwrap();
    store
        .write(|tx| tx.finish_workflow_run(run, WorkflowStatus::Completed, None))
        .unwrap();
    let ended = greenlight(&db, &["pause", "1"]);
    assert_eq!(ended.code, 2);
    assert_eq!(
        ended.stderr,
        "greenlight: workflow run 1 is completed: it has ended, so it cannot pause\n"
    );
}

#[test]
fn a_run_whose_process_died_shows_as_interrupted_with_its_dispatch_settled() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let mut store = Store::open(&db).unwrap();
    let run = store
        .write(|tx| tx.create_workflow_run(&new_run("fix", None)))
        .unwrap();
    store
        .write(|tx| {
            tx.start_workflow_dispatch(&NewWorkflowDispatch {
                run,
                step: "fix".into(),
                item: Some("a".into()),
                attempt: 1,
                family: Family::Command,
                model: None,
                worktree: None,
            })
        })
        .unwrap();
    // Its owner: a process that ran and is gone (a reaped child), as after kill -9.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = i64::from(child.id());
    child.wait().unwrap();
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("UPDATE workflow_runs SET owner_pid = ?1", [dead])
        .unwrap();
    let out = greenlight(&db, &["status", "1"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        out.stdout
            .starts_with("workflow 1 fix [interrupted] in /r\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("  step fix [a] interrupted (attempt 1)\n"),
        "{}",
        out.stdout
    );
    // A live run (this test process owns it) is never judged dead.
    let live = store
        .write(|tx| tx.create_workflow_run(&new_run("live", None)))
        .unwrap();
    let list = greenlight(&db, &["list"]);
    assert!(
        list.stdout.contains(&format!("{live} live [running]")),
        "{}",
        list.stdout
    );
}
