//! The store writes every word of `greenlight-types` as the word's own `as_str` (so the
//! database's text is exactly the contract's spelling, with no migration) and reads back the
//! member it wrote: agent families, goal states, dispatch outcomes, gate verdicts of a goal's
//! runs and of recorded verify runs, and run kinds.

mod common;

use std::path::Path;
use std::sync::Arc;

use greenlight_store::greenlight_stream::RunKind;
use greenlight_store::{
    AgentSpec, DispatchEnd, DispatchOutcome, DispatchStep, Error, Family, GateVerdict, GoalId,
    GoalState, NewDispatch, NewGateRun, NewGoal, NewRunGate, Reads, StepClock, Store, Tokens,
};

fn open(path: &Path) -> Store {
    Store::open_with_clock(path, Arc::new(StepClock::new(1_000, 1))).expect("open store")
}

fn goal_for(worktree: &Path, family: Family) -> NewGoal {
    NewGoal {
        worktree: worktree.to_path_buf(),
        text: format!("a {family} goal"),
        agent: AgentSpec {
            family,
            model: Some("m".into()),
            ..AgentSpec::default()
        },
        judge: None,
        max_turns: 9,
        retries: 9,
        gate_timeout_sec: 60,
        gates: vec!["true".into()],
    }
}

/// The text in `column` of the only row of `table` whose `key` is `id`.
fn stored(db: &Path, sql: &str, id: i64) -> String {
    let mut raw = common::Raw::open(db);
    raw.texts(sql, &[id.into()]).remove(0)
}

#[test]
fn every_family_and_dispatch_outcome_is_stored_as_its_name_and_read_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = common::state_at(dir.path().join("state.db"));
    let mut store = open(&db);
    for family in Family::ALL {
        let wt = dir.path().join(family.as_str());
        std::fs::create_dir_all(&wt).expect("worktree");
        let goal = store
            .write(|tx| tx.create_goal(&goal_for(&wt, family)))
            .expect("create goal");
        assert_eq!(
            stored(&db, "SELECT agent_family FROM goals WHERE id = ?1", goal.0),
            family.as_str()
        );
        let read = store.goal(goal).expect("read").expect("goal");
        assert_eq!(read.agent.family, family);

        // One dispatch per finished outcome (in-flight is the row before it ends).
        for outcome in DispatchOutcome::ALL {
            let id = store
                .write(|tx| {
                    let turn = tx.begin_turn(goal)?;
                    let id = tx.begin_dispatch(&NewDispatch {
                        goal,
                        step: DispatchStep::Agent,
                        turn,
                        attempt: 1,
                        family,
                        model: Some("m".into()),
                    })?;
                    if outcome != DispatchOutcome::InFlight {
                        tx.finish_dispatch(
                            id,
                            &DispatchEnd {
                                outcome,
                                wall_ms: Some(1),
                                tokens: Tokens::default(),
                                reason: None,
                                detail: None,
                                reply: None,
                            },
                        )?;
                    }
                    Ok::<_, Error>(id)
                })
                .expect("dispatch");
            let sql = "SELECT family || ' ' || outcome FROM dispatches WHERE id = ?1";
            assert_eq!(
                stored(&db, sql, id.0),
                format!("{} {}", family.as_str(), outcome.as_str())
            );
            let read = store.dispatch(id).expect("read").expect("dispatch");
            assert_eq!((read.family, read.outcome), (family, outcome));
            if outcome == DispatchOutcome::InFlight {
                store
                    .write(|tx| tx.recover_interrupted(goal))
                    .expect("close the open dispatch");
            }
        }
    }
}

#[test]
fn every_goal_state_is_stored_as_its_name_and_read_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = common::state_at(dir.path().join("state.db"));
    let mut store = open(&db);
    let goal = store
        .write(|tx| tx.create_goal(&goal_for(dir.path(), Family::Command)))
        .expect("create goal");
    let check = |store: &Store, goal: GoalId, state: GoalState| {
        assert_eq!(
            stored(&db, "SELECT state FROM goals WHERE id = ?1", goal.0),
            state.as_str()
        );
        assert_eq!(store.goal(goal).expect("read").expect("goal").state, state);
    };
    check(&store, goal, GoalState::Active);
    store
        .write(|tx| tx.pause_goal(goal, "paused-by-user", None))
        .expect("pause");
    check(&store, goal, GoalState::Paused);
    store.write(|tx| tx.resume_goal(goal)).expect("resume");
    check(&store, goal, GoalState::Active);
    store.write(|tx| tx.clear_goal(goal)).expect("clear");
    check(&store, goal, GoalState::Cleared);
    // The worktree is free again: a second goal there ends done.
    let second = store
        .write(|tx| tx.create_goal(&goal_for(dir.path(), Family::Command)))
        .expect("second goal");
    store.write(|tx| tx.complete_goal(second)).expect("done");
    check(&store, second, GoalState::Done);
}

fn gate_run(goal: GoalId, gate: greenlight_store::GateId, verdict: GateVerdict) -> NewGateRun {
    NewGateRun {
        goal,
        gate,
        turn: None,
        verdict,
        exit_code: Some(i32::from(verdict != GateVerdict::Pass)),
        duration_ms: 1,
        workspace_key: None,
        replayed: false,
        digest: None,
        evidence: None,
    }
}

#[test]
fn a_goal_gate_run_keeps_its_verdict_and_refuses_the_verdicts_only_verify_reaches() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = common::state_at(dir.path().join("state.db"));
    let mut store = open(&db);
    let goal = store
        .write(|tx| tx.create_goal(&goal_for(dir.path(), Family::Command)))
        .expect("create goal");
    let gate = store.gates(goal).expect("gates")[0].id;
    for verdict in [GateVerdict::Pass, GateVerdict::Fail, GateVerdict::Timeout] {
        let run = store
            .write(|tx| tx.record_gate_run(&gate_run(goal, gate, verdict)))
            .expect("record");
        assert_eq!(
            stored(&db, "SELECT verdict FROM gate_runs WHERE id = ?1", run.id.0),
            verdict.as_str()
        );
        assert_eq!(
            stored(&db, "SELECT last_verdict FROM gates WHERE id = ?1", gate.0),
            verdict.as_str()
        );
        let last = store.gates(goal).expect("gates")[0]
            .last
            .clone()
            .expect("last");
        assert_eq!(last.verdict, verdict);
        assert_eq!(
            store
                .gate_runs(goal)
                .expect("runs")
                .last()
                .map(|r| r.verdict),
            Some(verdict)
        );
    }
    for verdict in [GateVerdict::Flaky, GateVerdict::Skip] {
        let err = store
            .write(|tx| tx.record_gate_run(&gate_run(goal, gate, verdict)))
            .expect_err("a goal's gate is never flaky or skipped");
        assert!(
            matches!(err, Error::VerdictNotForGoal { verdict: v, .. } if v == verdict),
            "{err:?}"
        );
        assert!(err.to_string().contains(verdict.as_str()), "{err}");
    }
    assert_eq!(
        store.gate_runs(goal).expect("runs").len(),
        3,
        "nothing was recorded"
    );
}

#[test]
fn every_verdict_and_run_kind_of_a_recorded_run_is_stored_as_its_name_and_read_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = common::state_at(dir.path().join("state.db"));
    let mut store = open(&db);
    for kind in RunKind::ALL {
        let run = store
            .write(|tx| {
                let run = tx.begin_run(kind, dir.path(), &[])?;
                for (i, verdict) in GateVerdict::ALL.into_iter().enumerate() {
                    tx.record_run_gate(
                        run,
                        &NewRunGate {
                            gate: format!("g{i}"),
                            verdict,
                            exit_code: None,
                            duration_ms: None,
                            attempts: 0,
                            cached: false,
                            decided_at: 5,
                            digest: None,
                        },
                    )?;
                }
                Ok::<_, Error>(run)
            })
            .expect("record run");
        assert_eq!(
            stored(&db, "SELECT kind FROM runs WHERE id = ?1", run.0),
            kind.as_str()
        );
        assert_eq!(store.run(run).expect("read").expect("run").kind, kind);
        let rows = store.run_gates(run).expect("rows");
        let mut texts = common::Raw::open(&db).texts(
            "SELECT verdict FROM run_gates WHERE run_id = ?1 ORDER BY gate",
            &[run.0.into()],
        );
        texts.sort();
        let mut names: Vec<String> = GateVerdict::NAMES.iter().map(|n| n.to_string()).collect();
        names.sort();
        assert_eq!(texts, names);
        let mut read: Vec<GateVerdict> = rows.iter().map(|r| r.verdict).collect();
        read.sort();
        assert_eq!(read, GateVerdict::ALL.to_vec());
    }
}
