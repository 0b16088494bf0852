//! The openai family's records: a goal's server settings (never its key) and the write-ahead
//! tool-call ledger, on real SQLite files in temp dirs.

mod common;

use std::sync::Arc;

use greenlight_store::{
    AgentEndpoint, AgentSpec, DispatchEnd, DispatchOutcome, DispatchStep, Error, Family, GoalId,
    NewDispatch, NewGoal, NewToolCall, Reads, StepClock, Store, Tokens, ToolCallStatus,
};

fn open(dir: &tempfile::TempDir) -> Store {
    Store::open_with_clock(
        &common::state_at(dir.path().join("state.db")),
        Arc::new(StepClock::new(1_000, 1)),
    )
    .expect("open")
}

fn openai_goal(store: &mut Store, dir: &tempfile::TempDir) -> GoalId {
    let worktree = dir.path().join("wt");
    std::fs::create_dir_all(&worktree).expect("mkdir");
    store
        .write(|tx| {
            tx.create_goal(&NewGoal {
                worktree,
                text: "fix it".into(),
                agent: AgentSpec {
                    family: Family::OpenAi,
                    model: Some("qwen2.5-coder:7b".into()),
                    argv_template: None,
                    endpoint: Some(AgentEndpoint {
                        base_url: "http://127.0.0.1:8080/v1".into(),
                        api_key_env: "LOCAL_KEY".into(),
                        tool_format: "native".into(),
                    }),
                },
                judge: None,
                max_turns: 3,
                retries: 2,
                gate_timeout_sec: 60,
                gates: vec!["true".into()],
            })
        })
        .expect("goal")
}

fn in_flight(store: &mut Store, goal: GoalId) -> greenlight_store::DispatchId {
    store
        .write(|tx| {
            tx.begin_turn(goal)?;
            tx.begin_dispatch(&NewDispatch {
                goal,
                step: DispatchStep::Agent,
                turn: 1,
                attempt: 1,
                family: Family::OpenAi,
                model: Some("m".into()),
            })
        })
        .expect("dispatch")
}

fn call(dispatch: greenlight_store::DispatchId, seq: u32, tool: &str) -> NewToolCall {
    NewToolCall {
        dispatch,
        seq,
        step: 1,
        call_id: format!("call_{seq}"),
        tool: tool.into(),
        arguments: "{\"path\":\"a.txt\"}".into(),
    }
}

#[test]
fn an_openai_goal_keeps_its_server_and_the_key_variable_name_only() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut store = open(&dir);
    let goal = openai_goal(&mut store, &dir);
    drop(store);
    let store = open(&dir);
    let read = store.goal(goal).expect("read").expect("goal");
    assert_eq!(
        read.agent.endpoint,
        Some(AgentEndpoint {
            base_url: "http://127.0.0.1:8080/v1".into(),
            api_key_env: "LOCAL_KEY".into(),
            tool_format: "native".into(),
        })
    );
    let json = serde_json::to_value(&read).expect("json");
    assert_eq!(json["agent"]["endpoint"]["api_key_env"], "LOCAL_KEY");
}

#[test]
fn a_tool_call_is_an_intent_first_then_completed_exactly_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut store = open(&dir);
    let goal = openai_goal(&mut store, &dir);
    let dispatch = in_flight(&mut store, goal);
    store
        .write(|tx| tx.begin_tool_call(&call(dispatch, 1, "write_file")))
        .expect("intent");
    // Committed before any effect: another connection sees the intent.
    let other = open(&dir);
    let seen = other.tool_calls(dispatch).expect("read");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].status, ToolCallStatus::Intent);
    assert_eq!(seen[0].ended_at, None);
    store
        .write(|tx| {
            tx.finish_tool_call(
                dispatch,
                1,
                ToolCallStatus::Refused,
                "{\"error\":\"refused\"}",
                3,
            )
        })
        .expect("end");
    let done = store.tool_calls(dispatch).expect("read");
    assert_eq!(done[0].status, ToolCallStatus::Refused);
    assert_eq!(done[0].result.as_deref(), Some("{\"error\":\"refused\"}"));
    assert_eq!(done[0].wall_ms, Some(3));
    assert!(done[0].ended_at.is_some());
    let again = store.write(|tx| tx.finish_tool_call(dispatch, 1, ToolCallStatus::Ok, "x", 1));
    assert!(
        matches!(again, Err(Error::ToolCallNotOpen { seq: 1, .. })),
        "{again:?}"
    );
    let intent = store.write(|tx| {
        tx.begin_tool_call(&call(dispatch, 2, "run"))?;
        tx.finish_tool_call(dispatch, 2, ToolCallStatus::Intent, "x", 1)
    });
    assert!(
        matches!(intent, Err(Error::ToolCallFinishedAsIntent { .. })),
        "{intent:?}"
    );
    // The failed transaction left nothing behind.
    assert_eq!(store.tool_calls(dispatch).expect("read").len(), 1);
    let duplicate = store.write(|tx| tx.begin_tool_call(&call(dispatch, 1, "run")));
    assert!(duplicate.is_err(), "a seq is recorded once per dispatch");
    let kinds: Vec<String> = store
        .events_after(Some(goal), 0, 100)
        .expect("events")
        .into_iter()
        .map(|e| e.kind)
        .filter(|k| k.starts_with("tool-call"))
        .collect();
    assert_eq!(kinds, ["tool-call-started", "tool-call-ended"]);
}

#[test]
fn no_tool_call_is_recorded_for_a_dispatch_that_is_not_in_flight() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut store = open(&dir);
    let goal = openai_goal(&mut store, &dir);
    let dispatch = in_flight(&mut store, goal);
    store
        .write(|tx| {
            tx.finish_dispatch(
                dispatch,
                &DispatchEnd {
                    outcome: DispatchOutcome::Ok,
                    wall_ms: Some(1),
                    tokens: Tokens::default(),
                    reason: None,
                    detail: None,
                    reply: Some("done".into()),
                },
            )
        })
        .expect("finish");
    let late = store.write(|tx| tx.begin_tool_call(&call(dispatch, 1, "run")));
    assert!(
        matches!(
            late,
            Err(Error::ToolCallOutsideDispatch {
                outcome: DispatchOutcome::Ok,
                ..
            })
        ),
        "{late:?}"
    );
}

/// A crash between a call's intent and its result: recovery marks the call interrupted, so a
/// person (and the next turn's evidence) knows its effect is unknown.
#[test]
fn recovery_marks_the_open_intents_of_a_crashed_dispatch_interrupted() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut store = open(&dir);
    let goal = openai_goal(&mut store, &dir);
    let dispatch = in_flight(&mut store, goal);
    store
        .write(|tx| {
            tx.begin_tool_call(&call(dispatch, 1, "read_file"))?;
            tx.finish_tool_call(dispatch, 1, ToolCallStatus::Ok, "{}", 1)?;
            tx.begin_tool_call(&call(dispatch, 2, "apply_patch"))
        })
        .expect("calls");
    drop(store);
    let mut store = open(&dir);
    let recovered = store
        .write(|tx| tx.recover_interrupted(goal))
        .expect("recover");
    assert_eq!(recovered.tool_calls, vec![(dispatch, 2)]);
    let calls = store.tool_calls(dispatch).expect("read");
    assert_eq!(
        calls[0].status,
        ToolCallStatus::Ok,
        "a finished call is kept as it was"
    );
    assert_eq!(calls[1].status, ToolCallStatus::Interrupted);
    assert!(calls[1].ended_at.is_some());
    let event = store
        .events_after(Some(goal), 0, 100)
        .expect("events")
        .into_iter()
        .find(|e| e.kind == "recovered")
        .expect("recovered event");
    assert_eq!(event.payload["interrupted_tool_calls"][0][1], 2);
}

/// Only the openai family has a server: other goals read back without one.
#[test]
fn a_goal_of_another_family_reads_back_with_no_endpoint() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut store = open(&dir);
    let worktree = dir.path().join("old");
    std::fs::create_dir_all(&worktree).expect("mkdir");
    let goal = store
        .write(|tx| {
            tx.create_goal(&NewGoal {
                worktree,
                text: "t".into(),
                agent: AgentSpec {
                    family: Family::Claude,
                    ..AgentSpec::default()
                },
                judge: None,
                max_turns: 1,
                retries: 1,
                gate_timeout_sec: 1,
                gates: vec!["true".into()],
            })
        })
        .expect("goal");
    assert_eq!(
        store
            .goal(goal)
            .expect("read")
            .expect("goal")
            .agent
            .endpoint,
        None
    );
}
