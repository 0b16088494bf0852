//! Behaviour of the state database through its public API, on real SQLite files in temp dirs.

mod common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use greenlight_store::{
    AgentSpec, DispatchEnd, DispatchOutcome, DispatchStep, Error, Family, GateVerdict, GoalState,
    NewDispatch, NewGateRun, NewGoal, Reads, SCHEMA_VERSION, StepClock, Store, Tokens,
    default_state_path_from,
};
use serde_json::json;

struct Fixture {
    dir: tempfile::TempDir,
    /// The store's location: a file in `dir`, or a fresh PostgreSQL schema.
    db: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = common::state_at(dir.path().join("state").join("state.db"));
        Fixture { dir, db }
    }

    fn db(&self) -> PathBuf {
        self.db.clone()
    }

    fn open(&self) -> Store {
        Store::open_with_clock(&self.db(), Arc::new(StepClock::new(1_000, 1))).expect("open store")
    }

    /// A fresh directory standing in for a worktree.
    fn worktree(&self, name: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::create_dir_all(&p).expect("mkdir worktree");
        p
    }

    fn raw(&self) -> common::Raw {
        common::Raw::open(&self.db)
    }
}

fn new_goal(worktree: &Path) -> NewGoal {
    NewGoal {
        worktree: worktree.to_path_buf(),
        text: "make the tests pass".into(),
        agent: AgentSpec {
            family: Family::Command,
            model: None,
            argv_template: Some(vec!["./fix.sh".into()]),
            endpoint: None,
        },
        judge: None,
        max_turns: 3,
        retries: 2,
        gate_timeout_sec: 300,
        gates: vec!["cargo test".into(), "cargo clippy".into()],
    }
}

fn seqs(store: &Store) -> Vec<i64> {
    store
        .events_after(None, 0, usize::MAX)
        .expect("events")
        .iter()
        .map(|e| e.seq)
        .collect()
}

#[test]
fn migrates_an_empty_file_to_the_current_schema_in_wal_mode() {
    let fx = Fixture::new();
    let _store = fx.open();
    let mut raw = fx.raw();
    assert_eq!(raw.schema_version(), SCHEMA_VERSION);
    let mut tables = if common::postgres_base().is_some() {
        // PostgreSQL has no journal mode to check; it is durable by its own WAL.
        raw.texts(
            "SELECT table_name FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name <> 'greenlight_schema'",
            &[],
        )
    } else {
        assert_eq!(raw.texts("PRAGMA journal_mode", &[]), ["wal"]);
        raw.texts(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
            &[],
        )
    };
    tables.sort();
    assert_eq!(
        tables,
        [
            "dispatches",
            "events",
            "frames",
            "gate_runs",
            "gates",
            "goals",
            "hook_bases",
            "hook_configs",
            "hook_sessions",
            "queue_claims",
            "queue_items",
            "queue_labels",
            "remote_operations",
            "run_gates",
            "runs",
            "tool_calls",
            "turns",
            "workflow_dispatches",
            "workflow_events",
            "workflow_members",
            "workflow_runs"
        ]
    );
}

#[test]
fn a_database_from_a_newer_greenlight_is_refused_with_a_clear_error() {
    let fx = Fixture::new();
    drop(fx.open());
    fx.raw().set_schema_version(SCHEMA_VERSION + 1);
    let err = Store::open(&fx.db()).expect_err("newer schema must be refused");
    assert!(
        matches!(err, Error::SchemaTooNew { found, .. } if found == SCHEMA_VERSION + 1),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("newer than") && msg.contains("upgrade greenlight"),
        "{msg}"
    );
}

#[test]
fn reopening_keeps_goals_gates_and_events() {
    let fx = Fixture::new();
    let wt = fx.worktree("wt");
    let id = fx
        .open()
        .write(|tx| tx.create_goal(&new_goal(&wt)))
        .expect("create");
    let store = fx.open();
    let goal = store.goal(id).expect("read").expect("goal kept");
    assert_eq!(goal.state, GoalState::Active);
    assert_eq!(goal.worktree, std::fs::canonicalize(&wt).expect("canon"));
    assert_eq!(
        goal.agent.argv_template.as_deref(),
        Some(&["./fix.sh".to_string()][..])
    );
    assert_eq!(goal.created_at, 1_000);
    let gates = store.gates(id).expect("gates");
    assert_eq!(
        gates.iter().map(|g| g.command.as_str()).collect::<Vec<_>>(),
        ["cargo test", "cargo clippy"]
    );
    let kinds: Vec<String> = store
        .events_after(Some(id), 0, 100)
        .expect("events")
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["goal-created", "gate-added", "gate-added"]);
}

#[test]
fn one_live_goal_per_worktree_is_enforced_with_a_clear_error() {
    let fx = Fixture::new();
    let (a, b) = (fx.worktree("a"), fx.worktree("b"));
    let mut store = fx.open();
    let first = store
        .write(|tx| tx.create_goal(&new_goal(&a)))
        .expect("first goal");
    store
        .write(|tx| tx.create_goal(&new_goal(&b)))
        .expect("another worktree has its own goal");

    // Paused still holds the worktree; a path spelled differently is the same worktree.
    store
        .write(|tx| tx.pause_goal(first, "turn-budget", Some("used 3 turns")))
        .expect("pause");
    let spelled = fx.dir.path().join("b/../a/.");
    let err = store
        .write(|tx| tx.create_goal(&new_goal(&spelled)))
        .expect_err("second live goal");
    assert!(
        matches!(err, Error::GoalAlreadyLive { existing, state: GoalState::Paused, .. } if existing == first),
        "{err:?}"
    );
    assert!(err.to_string().contains("greenlight goal clear"), "{err}");

    // The index itself refuses, even for a writer that skips the library's check.
    let bypass = fx.raw().execute(
        "INSERT INTO goals (worktree, text, state, agent_family, max_turns, retries, gate_timeout_sec, created_at, updated_at) \
         SELECT worktree, 'x', 'active', 'claude', 1, 1, 1, 0, 0 FROM goals WHERE id = ?1",
        &[first.0.into()],
    );
    assert!(
        bypass.is_err(),
        "partial unique index must reject a second live goal"
    );

    // Once cleared, the worktree is free; the cleared row stays for audit.
    store.write(|tx| tx.clear_goal(first)).expect("clear");
    let second = store
        .write(|tx| tx.create_goal(&new_goal(&a)))
        .expect("new goal after clear");
    assert_ne!(second, first);
    assert_eq!(
        store.goal(first).expect("read").expect("kept").state,
        GoalState::Cleared
    );
    assert_eq!(store.live_goal(&a).expect("read").expect("live").id, second);
}

#[test]
fn a_transaction_that_fails_midway_leaves_nothing_behind() {
    let fx = Fixture::new();
    let wt = fx.worktree("wt");
    let mut store = fx.open();
    let before = store.last_seq().expect("seq");
    let err = store
        .write(|tx| {
            let id = tx.create_goal(&new_goal(&wt))?;
            tx.add_gate(id, "make lint")?;
            tx.begin_turn(id)?;
            tx.pause_goal(id, "Not Kebab", None) // fails after four writes
        })
        .expect_err("bad reason");
    assert!(matches!(err, Error::NotKebabCase { .. }), "{err:?}");
    assert!(store.goals().expect("goals").is_empty());
    assert_eq!(store.last_seq().expect("seq"), before);
    let mut raw = fx.raw();
    for table in ["goals", "gates", "turns", "events"] {
        let n = raw.int(&format!("SELECT COUNT(*) FROM {table}"), &[]);
        assert_eq!(n, 0, "{table} must be empty after the rollback");
    }
}

#[test]
fn event_seq_stays_contiguous_across_commits_and_rollbacks() {
    let fx = Fixture::new();
    let wt = fx.worktree("wt");
    let mut store = fx.open();
    let id = store
        .write(|tx| tx.create_goal(&new_goal(&wt)))
        .expect("create");
    for i in 0..20 {
        let r = store.write(|tx| {
            tx.append_event(Some(id), None, "note", &json!({"i": i}))?;
            if i % 3 == 0 {
                Err(Error::NoSuchGoal(id))
            } else {
                Ok(())
            }
        });
        assert_eq!(r.is_err(), i % 3 == 0);
    }
    let s = seqs(&store);
    assert_eq!(s, (1..=s.len() as i64).collect::<Vec<_>>());
    assert_eq!(s.len(), 3 + 13, "3 creation events + 13 committed notes");
    // events_after pages from a cursor, for `goal log --follow`.
    let tail = store.events_after(Some(id), 10, 3).expect("page");
    assert_eq!(tail.iter().map(|e| e.seq).collect::<Vec<_>>(), [11, 12, 13]);
}

#[test]
fn the_event_log_is_append_only_even_for_raw_sql() {
    let fx = Fixture::new();
    let wt = fx.worktree("wt");
    fx.open()
        .write(|tx| tx.create_goal(&new_goal(&wt)))
        .expect("create");
    let mut raw = fx.raw();
    assert!(raw.execute("UPDATE events SET kind = 'x'", &[]).is_err());
    assert!(raw.execute("DELETE FROM events", &[]).is_err());
}

#[test]
fn tokens_not_reported_stay_null_and_reported_zero_stays_zero() {
    let fx = Fixture::new();
    let wt = fx.worktree("wt");
    let mut store = fx.open();
    let (id, turn) = store
        .write(|tx| {
            let id = tx.create_goal(&new_goal(&wt))?;
            Ok::<_, Error>((id, tx.begin_turn(id)?))
        })
        .expect("setup");
    let unknown = store
        .write(|tx| {
            tx.begin_dispatch(&NewDispatch {
                step: DispatchStep::Agent,
                goal: id,
                turn,
                attempt: 1,
                family: Family::Codex,
                model: None,
            })
        })
        .expect("begin");
    let zero = store
        .write(|tx| {
            tx.begin_dispatch(&NewDispatch {
                step: DispatchStep::Agent,
                goal: id,
                turn,
                attempt: 2,
                family: Family::Claude,
                model: Some("m".into()),
            })
        })
        .expect("begin");
    store
        .write(|tx| {
            tx.finish_dispatch(
                unknown,
                &DispatchEnd {
                    outcome: DispatchOutcome::Error,
                    wall_ms: Some(1234),
                    tokens: Tokens::default(),
                    reason: Some("dispatch-timeout".into()),
                    detail: Some("no answer in 600s".into()),
                    reply: None,
                },
            )?;
            tx.finish_dispatch(
                zero,
                &DispatchEnd {
                    outcome: DispatchOutcome::Ok,
                    wall_ms: Some(10),
                    tokens: Tokens {
                        input: Some(0),
                        output: Some(7),
                        cache_read: Some(0),
                        cache_write: None,
                        cost_usd: Some(0.0),
                        source: Some("claude-json".into()),
                    },
                    reason: None,
                    detail: None,
                    reply: None,
                },
            )
        })
        .expect("finish");
    let nulls = fx.raw().texts(
        "SELECT tokens_in IS NULL AND tokens_out IS NULL AND cache_read_tokens IS NULL \
         AND cache_write_tokens IS NULL AND cost_usd IS NULL AND token_source IS NULL \
         FROM dispatches WHERE id = ?1",
        &[unknown.0.into()],
    );
    assert_eq!(nulls, ["1"]);
    let ledger = store.dispatches(id).expect("ledger");
    assert_eq!(ledger[0].tokens, Tokens::default());
    assert_eq!(ledger[0].reason.as_deref(), Some("dispatch-timeout"));
    assert_eq!(ledger[1].tokens.input, Some(0));
    assert_eq!(ledger[1].tokens.cache_write, None);
    assert_eq!(ledger[1].outcome, DispatchOutcome::Ok);

    // A row is completed exactly once.
    let again = store.write(|tx| {
        tx.finish_dispatch(
            zero,
            &DispatchEnd {
                outcome: DispatchOutcome::Ok,
                wall_ms: None,
                tokens: Tokens::default(),
                reason: None,
                detail: None,
                reply: None,
            },
        )
    });
    assert!(
        matches!(
            again,
            Err(Error::DispatchNotInFlight {
                outcome: DispatchOutcome::Ok,
                ..
            })
        ),
        "{again:?}"
    );
}

#[test]
fn in_flight_dispatches_of_a_crashed_runner_become_interrupted() {
    let fx = Fixture::new();
    let (a, b) = (fx.worktree("a"), fx.worktree("b"));
    let (ga, gb, da, db) = {
        let mut store = fx.open();
        let (ga, ta) = store
            .write(|tx| {
                let g = tx.create_goal(&new_goal(&a))?;
                Ok::<_, Error>((g, tx.begin_turn(g)?))
            })
            .expect("a");
        let (gb, tb) = store
            .write(|tx| {
                let g = tx.create_goal(&new_goal(&b))?;
                Ok::<_, Error>((g, tx.begin_turn(g)?))
            })
            .expect("b");
        let da = store
            .write(|tx| {
                tx.begin_dispatch(&NewDispatch {
                    step: DispatchStep::Agent,
                    goal: ga,
                    turn: ta,
                    attempt: 1,
                    family: Family::Claude,
                    model: None,
                })
            })
            .expect("da");
        let db = store
            .write(|tx| {
                tx.begin_dispatch(&NewDispatch {
                    step: DispatchStep::Agent,
                    goal: gb,
                    turn: tb,
                    attempt: 1,
                    family: Family::Claude,
                    model: None,
                })
            })
            .expect("db");
        (ga, gb, da, db)
        // dropped here without finishing: the runner "died"
    };
    let mut store = fx.open();
    let rec = store
        .write(|tx| tx.recover_interrupted(ga))
        .expect("recover");
    assert_eq!(rec.dispatches, [da]);
    assert_eq!(rec.turns, [1]);
    let row = store.dispatch(da).expect("read").expect("row");
    assert_eq!(row.outcome, DispatchOutcome::Interrupted);
    assert!(row.ended_at.is_some());
    assert_eq!(
        store.turns(ga).expect("turns")[0].outcome.as_deref(),
        Some("interrupted")
    );
    // The other worktree's runner may still be alive: its row is untouched.
    assert_eq!(
        store.dispatch(db).expect("read").expect("row").outcome,
        DispatchOutcome::InFlight
    );
    // Recovery is idempotent and the next turn continues the numbering.
    assert_eq!(
        store.write(|tx| tx.recover_interrupted(ga)).expect("again"),
        Default::default()
    );
    assert_eq!(store.write(|tx| tx.begin_turn(ga)).expect("next turn"), 2);
    let kinds: Vec<String> = store
        .events_after(Some(ga), 0, 100)
        .expect("events")
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds.iter().filter(|k| *k == "recovered").count(), 1);
    let _ = gb;
}

#[test]
fn gate_attempts_count_consecutive_failures_and_a_pass_resets_them() {
    let fx = Fixture::new();
    let wt = fx.worktree("wt");
    let mut store = fx.open();
    let id = store
        .write(|tx| tx.create_goal(&new_goal(&wt)))
        .expect("create");
    let gate = store.gates(id).expect("gates")[0].id;
    let run = |verdict, replayed| NewGateRun {
        goal: id,
        gate,
        turn: None,
        verdict,
        exit_code: Some(if verdict == GateVerdict::Pass { 0 } else { 101 }),
        duration_ms: 5,
        workspace_key: Some("abc".into()),
        replayed,
        digest: Some(json!({"format": "cargo", "failed": 1})),
        evidence: Some("test foo failed".into()),
    };
    let attempts: Vec<u32> = [
        (GateVerdict::Fail, false),
        (GateVerdict::Fail, true),
        (GateVerdict::Timeout, false),
        (GateVerdict::Pass, false),
        (GateVerdict::Fail, false),
    ]
    .into_iter()
    .map(|(v, r)| {
        store
            .write(|tx| tx.record_gate_run(&run(v, r)))
            .expect("record")
            .attempt
    })
    .collect();
    assert_eq!(attempts, [1, 2, 3, 0, 1]);
    let g = &store.gates(id).expect("gates")[0];
    assert_eq!(g.attempts, 1);
    let last = g.last.as_ref().expect("last result");
    assert_eq!(
        (last.verdict, last.exit_code, last.workspace_key.as_deref()),
        (GateVerdict::Fail, Some(101), Some("abc"))
    );
    let runs = store.gate_runs(id).expect("runs");
    assert_eq!(runs.len(), 5);
    assert!(runs[1].replayed && !runs[0].replayed);
    assert_eq!(
        runs[0].digest,
        Some(json!({"format": "cargo", "failed": 1}))
    );
}

#[test]
fn gate_remove_addresses_the_nth_live_gate_and_keeps_the_row() {
    let fx = Fixture::new();
    let wt = fx.worktree("wt");
    let mut store = fx.open();
    let id = store
        .write(|tx| tx.create_goal(&new_goal(&wt)))
        .expect("create");
    store.write(|tx| tx.add_gate(id, "make docs")).expect("add");
    let removed = store.write(|tx| tx.remove_gate(id, 1)).expect("remove 1");
    let live = store.gates(id).expect("gates");
    assert_eq!(
        live.iter()
            .map(|g| (g.number, g.command.as_str()))
            .collect::<Vec<_>>(),
        [(Some(1), "cargo clippy"), (Some(2), "make docs")]
    );
    // Numbers are over live gates: removing 2 now removes "make docs".
    store.write(|tx| tx.remove_gate(id, 2)).expect("remove 2");
    assert_eq!(store.gates(id).expect("gates").len(), 1);
    let err = store
        .write(|tx| tx.remove_gate(id, 2))
        .expect_err("no gate 2");
    assert!(
        matches!(err, Error::NoSuchGate { n: 2, live: 1, .. }),
        "{err:?}"
    );
    assert!(
        store.write(|tx| tx.remove_gate(id, 0)).is_err(),
        "0 is not a gate number"
    );
    let all = store.all_gates(id).expect("all");
    assert_eq!(all.len(), 3);
    assert!(
        all.iter()
            .any(|g| g.id == removed && g.removed && g.number.is_none())
    );
}

/// `goal gate clear` on a paused goal, then `goal resume`, marked the goal done with no gates.
#[test]
fn the_last_gate_of_a_goal_that_is_not_done_cannot_be_removed() {
    let fx = Fixture::new();
    let wt = fx.worktree("wt");
    let mut store = fx.open();
    let id = store
        .write(|tx| tx.create_goal(&new_goal(&wt)))
        .expect("create");
    let err = store.write(|tx| tx.clear_gates(id)).expect_err("clear");
    assert!(matches!(err, Error::LastGate { .. }), "{err:?}");
    store
        .write(|tx| tx.remove_gate(id, 1))
        .expect("remove 1 of 2");
    let err = store.write(|tx| tx.remove_gate(id, 1)).expect_err("last");
    assert!(matches!(err, Error::LastGate { .. }), "{err:?}");
    assert!(
        err.to_string().contains("greenlight goal gate add"),
        "{err}"
    );
    assert_eq!(store.gates(id).expect("gates").len(), 1);
    for blank in ["", "  \t"] {
        let err = store.write(|tx| tx.add_gate(id, blank)).expect_err("blank");
        assert!(matches!(err, Error::EmptyGateCommand { .. }), "{err:?}");
    }
}

#[test]
fn the_turn_budget_is_enforced_and_resume_resets_turns_but_not_gate_attempts() {
    let fx = Fixture::new();
    let wt = fx.worktree("wt");
    let mut store = fx.open();
    let id = store
        .write(|tx| tx.create_goal(&new_goal(&wt)))
        .expect("create");
    let gate = store.gates(id).expect("gates")[0].id;
    for n in 1..=3 {
        let got = store
            .write(|tx| {
                let t = tx.begin_turn(id)?;
                tx.record_gate_run(&NewGateRun {
                    goal: id,
                    gate,
                    turn: Some(t),
                    verdict: GateVerdict::Fail,
                    exit_code: Some(1),
                    duration_ms: 1,
                    workspace_key: None,
                    replayed: false,
                    digest: None,
                    evidence: None,
                })?;
                tx.end_turn(id, t, "gate-failed")?;
                Ok::<_, Error>(t)
            })
            .expect("turn");
        assert_eq!(got, n);
    }
    let err = store
        .write(|tx| tx.begin_turn(id))
        .expect_err("budget spent");
    assert!(
        matches!(err, Error::TurnBudgetSpent { max_turns: 3, .. }),
        "{err:?}"
    );
    store
        .write(|tx| tx.pause_goal(id, "turn-budget", Some("3 of 3 turns used")))
        .expect("pause");
    let paused = store.goal(id).expect("read").expect("goal");
    assert_eq!(
        paused.pause.as_ref().map(|p| p.reason.as_str()),
        Some("turn-budget")
    );
    assert!(matches!(
        store.write(|tx| tx.begin_turn(id)),
        Err(Error::InvalidTransition {
            from: GoalState::Paused,
            ..
        })
    ));

    store.write(|tx| tx.resume_goal(id)).expect("resume");
    let resumed = store.goal(id).expect("read").expect("goal");
    assert_eq!(
        (resumed.state, resumed.turns_used, resumed.pause),
        (GoalState::Active, 0, None)
    );
    assert_eq!(
        store.gates(id).expect("gates")[0].attempts,
        3,
        "resume keeps gate attempts"
    );
    assert_eq!(
        store
            .write(|tx| tx.begin_turn(id))
            .expect("turn after resume"),
        4,
        "turn numbers keep counting"
    );
    assert!(matches!(
        store.write(|tx| tx.resume_goal(id)),
        Err(Error::InvalidTransition {
            from: GoalState::Active,
            ..
        })
    ));
    store.write(|tx| tx.complete_goal(id)).expect("done");
    assert!(store.live_goal(&wt).expect("read").is_none());
}

#[test]
fn timestamps_come_from_the_clock_once_per_transaction() {
    let fx = Fixture::new();
    let wt = fx.worktree("wt");
    let mut store = fx.open(); // StepClock: 1000, 1001, …
    let id = store
        .write(|tx| tx.create_goal(&new_goal(&wt)))
        .expect("create");
    store
        .write(|tx| tx.pause_goal(id, "user-paused", None))
        .expect("pause");
    let events = store.events_after(Some(id), 0, 100).expect("events");
    assert_eq!(
        events.iter().map(|e| e.at).collect::<Vec<_>>(),
        [1000, 1000, 1000, 1001]
    );
    let g = store.goal(id).expect("read").expect("goal");
    assert_eq!((g.created_at, g.updated_at), (1000, 1001));
}

#[test]
fn a_non_utf8_worktree_path_round_trips_exactly() {
    use std::os::unix::ffi::OsStringExt;
    let fx = Fixture::new();
    let name = OsString::from_vec(b"wt-\xff\xfe".to_vec());
    let wt = fx.dir.path().join(&name);
    if std::fs::create_dir(&wt).is_err() {
        panic!(
            "this filesystem refuses non-UTF-8 names; the test needs one that accepts them (ext4, tmpfs)"
        );
    }
    let mut store = fx.open();
    let id = store
        .write(|tx| tx.create_goal(&new_goal(&wt)))
        .expect("create");
    let g = store.goal(id).expect("read").expect("goal");
    assert_eq!(g.worktree, std::fs::canonicalize(&wt).expect("canon"));
    assert_eq!(store.live_goal(&wt).expect("read").map(|g| g.id), Some(id));
    let json = serde_json::to_value(&g).expect("json");
    assert!(
        json["worktree"]
            .as_str()
            .expect("string")
            .ends_with("wt-\u{fffd}\u{fffd}")
    );
}

#[test]
fn the_hook_counts_consecutive_blocks_per_session() {
    let fx = Fixture::new();
    let mut store = fx.open();
    assert_eq!(store.hook_blocks("s1").expect("read"), 0);
    assert_eq!(store.write(|tx| tx.hook_block("s1")).expect("block"), 1);
    assert_eq!(store.write(|tx| tx.hook_block("s1")).expect("block"), 2);
    assert_eq!(store.write(|tx| tx.hook_block("s2")).expect("block"), 1);
    store.write(|tx| tx.hook_reset("s1")).expect("reset");
    assert_eq!(store.hook_blocks("s1").expect("read"), 0);
    assert_eq!(store.hook_blocks("s2").expect("read"), 1);
    let pruned = store
        .write(|tx| tx.prune_hook_sessions(i64::MAX))
        .expect("prune");
    assert_eq!(pruned, 2);
}

#[test]
fn the_default_path_honours_greenlight_state_then_xdg_then_home() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| OsString::from(v))
        }
    };
    let all = env(&[
        ("GREENLIGHT_STATE", "/x/s.db"),
        ("XDG_STATE_HOME", "/xdg"),
        ("HOME", "/home/u"),
    ]);
    assert_eq!(
        default_state_path_from(all).expect("path"),
        PathBuf::from("/x/s.db")
    );
    let xdg = env(&[
        ("GREENLIGHT_STATE", ""),
        ("XDG_STATE_HOME", "/xdg"),
        ("HOME", "/home/u"),
    ]);
    assert_eq!(
        default_state_path_from(xdg).expect("path"),
        PathBuf::from("/xdg/greenlight/state.db")
    );
    let relative_xdg = env(&[("XDG_STATE_HOME", "rel"), ("HOME", "/home/u")]);
    assert_eq!(
        default_state_path_from(relative_xdg).expect("path"),
        PathBuf::from("/home/u/.local/state/greenlight/state.db")
    );
    let err = default_state_path_from(env(&[])).expect_err("nothing set");
    assert!(err.to_string().contains("GREENLIGHT_STATE"), "{err}");
}

#[test]
fn a_snapshot_sees_one_instant_while_another_connection_commits() {
    let fx = Fixture::new();
    let wt = fx.worktree("wt");
    let mut store = fx.open();
    let id = store
        .write(|tx| tx.create_goal(&new_goal(&wt)))
        .expect("create");
    let mut other = fx.open();
    let (before, after) = store
        .read(|snap| {
            let before = snap.gates(id)?.len();
            other.write(|tx| tx.add_gate(id, "make docs"))?; // commits in the middle
            Ok::<_, Error>((before, snap.gates(id)?.len()))
        })
        .expect("read");
    assert_eq!(
        (before, after),
        (2, 2),
        "the snapshot does not see the concurrent commit"
    );
    assert_eq!(
        store.gates(id).expect("gates").len(),
        3,
        "outside the snapshot it is there"
    );
}

#[test]
fn a_store_can_move_to_another_thread() {
    fn send<T: Send>(_: &T) {}
    let fx = Fixture::new();
    let store = fx.open();
    send(&store);
    let path = std::thread::spawn(move || store.path().to_path_buf())
        .join()
        .expect("thread");
    assert_eq!(path, fx.db());
}

#[test]
fn an_open_turn_whose_dispatch_finished_ok_is_kept_open_as_owing_its_gates() {
    let fx = Fixture::new();
    let a = fx.worktree("a");
    let mut store = fx.open();
    let goal = store
        .write(|tx| {
            let g = tx.create_goal(&new_goal(&a))?;
            let t = tx.begin_turn(g)?;
            let d = tx.begin_dispatch(&NewDispatch {
                step: DispatchStep::Agent,
                goal: g,
                turn: t,
                attempt: 1,
                family: Family::Command,
                model: None,
            })?;
            tx.finish_dispatch(
                d,
                &DispatchEnd {
                    outcome: DispatchOutcome::Ok,
                    wall_ms: Some(5),
                    tokens: Tokens::default(),
                    reason: None,
                    detail: None,
                    reply: None,
                },
            )?;
            Ok::<_, Error>(g)
        })
        .expect("a turn whose dispatch finished");
    // The runner died before the gate phase.
    let rec = store
        .write(|tx| tx.recover_interrupted(goal))
        .expect("recover");
    assert_eq!(rec.gates_owed, [1]);
    assert!(rec.turns.is_empty() && rec.dispatches.is_empty(), "{rec:?}");
    assert_eq!(store.turns(goal).expect("turns")[0].ended_at, None);
    // The owed turn can still be ended by its gate phase, exactly once.
    store
        .write(|tx| tx.end_turn(goal, 1, "done"))
        .expect("end the owed turn");
    let payload = store
        .events_after(Some(goal), 0, 100)
        .expect("events")
        .into_iter()
        .find(|e| e.kind == "recovered")
        .expect("a recovered event")
        .payload;
    assert_eq!(
        payload,
        json!({"interrupted_dispatches": [], "interrupted_turns": [], "interrupted_tool_calls": [], "gates_owed": [1]})
    );
}

#[test]
fn an_interrupted_dispatch_is_recorded_with_its_reason() {
    let fx = Fixture::new();
    let a = fx.worktree("a");
    let mut store = fx.open();
    let (goal, d) = store
        .write(|tx| {
            let g = tx.create_goal(&new_goal(&a))?;
            let t = tx.begin_turn(g)?;
            let d = tx.begin_dispatch(&NewDispatch {
                step: DispatchStep::Agent,
                goal: g,
                turn: t,
                attempt: 1,
                family: Family::Command,
                model: None,
            })?;
            Ok::<_, Error>((g, d))
        })
        .expect("a dispatch in flight");
    let rec = store
        .write(|tx| tx.recover_interrupted(goal))
        .expect("recover");
    assert_eq!(rec.turns, [1]);
    assert!(rec.gates_owed.is_empty());
    let row = store.dispatch(d).expect("read").expect("row");
    assert_eq!(row.reason.as_deref(), Some("dispatch-interrupted"));
}

/// Schema 3: a reply, a gate's own limit and mutex, and the probed model survive a reopen.
#[test]
fn replies_gate_settings_and_the_probed_model_round_trip() {
    let fx = Fixture::new();
    let wt = fx.worktree("wt");
    let mut store = fx.open();
    let mut goal = new_goal(&wt);
    goal.gates = vec![greenlight_store::NewGate {
        command: "npm run e2e".into(),
        timeout_sec: Some(1800),
        mutex: Some("e2e-port".into()),
    }];
    let id = store.write(|tx| tx.create_goal(&goal)).expect("create");
    let turn = store.write(|tx| tx.begin_turn(id)).expect("turn");
    let dispatch = store
        .write(|tx| {
            tx.begin_dispatch(&NewDispatch {
                goal: id,
                step: DispatchStep::Agent,
                turn,
                attempt: 1,
                family: Family::Command,
                model: None,
            })
        })
        .expect("begin");
    store
        .write(|tx| {
            tx.finish_dispatch(
                dispatch,
                &DispatchEnd {
                    outcome: DispatchOutcome::Ok,
                    wall_ms: Some(3),
                    tokens: Tokens::default(),
                    reason: None,
                    detail: None,
                    reply: Some("fixed the parser".into()),
                },
            )?;
            tx.record_probe(id, "sonnet")
        })
        .expect("finish");
    drop(store);
    let store = fx.open();
    assert_eq!(
        store
            .dispatch(dispatch)
            .expect("read")
            .expect("row")
            .reply
            .as_deref(),
        Some("fixed the parser")
    );
    let gate = &store.gates(id).expect("gates")[0];
    assert_eq!(
        (gate.timeout_sec, gate.mutex.as_deref()),
        (Some(1800), Some("e2e-port"))
    );
    assert_eq!(
        store
            .goal(id)
            .expect("goal")
            .expect("row")
            .model_probed
            .as_deref(),
        Some("sonnet")
    );
    let kinds: Vec<String> = store
        .events_after(Some(id), 0, usize::MAX)
        .expect("events")
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert!(kinds.contains(&"model-probed".to_owned()), "{kinds:?}");
}

#[test]
fn a_gates_remote_operation_is_kept_until_it_is_ended_and_survives_reopening() {
    let fx = Fixture::new();
    let wt = fx.worktree("wt");
    let mut store = fx.open();
    let id = store
        .write(|tx| tx.create_goal(&new_goal(&wt)))
        .expect("create");
    let gate = store
        .write(|tx| tx.add_gate(id, "cargo test"))
        .expect("add");
    assert_eq!(store.remote_operation(gate).expect("read"), None);
    let action = "a".repeat(64);
    store
        .write(|tx| tx.begin_remote_operation(gate, &action, "operations/1"))
        .expect("begin");
    store
        .write(|tx| tx.begin_remote_operation(gate, &action, "operations/2"))
        .expect("a newer operation replaces the older");
    drop(store);
    let mut store = fx.open();
    assert_eq!(
        store.remote_operation(gate).expect("read"),
        Some((action.clone(), "operations/2".to_owned()))
    );
    let short = store.write(|tx| tx.begin_remote_operation(gate, "abc", "operations/3"));
    assert!(
        short.is_err(),
        "an action that is not a SHA-256 digest is refused"
    );
    store
        .write(|tx| tx.end_remote_operation(gate))
        .expect("end");
    assert_eq!(store.remote_operation(gate).expect("read"), None);
}

/// A goal's verify.yaml snapshot is set with the goal and replaced only by an explicit set; a
/// hook session's is written once and the first record wins; a refunded turn is not counted.
#[test]
fn snapshots_are_kept_and_the_first_hook_record_wins() {
    let fx = Fixture::new();
    let mut store = fx.open();
    let wt = fx.worktree("wt");
    let goal = store
        .write(|tx| {
            let goal = tx.create_goal(&new_goal(&wt))?;
            tx.set_gate_config(goal, Some(r#"{"text":"a"}"#))?;
            Ok::<_, greenlight_store::Error>(goal)
        })
        .expect("create");
    assert_eq!(
        store.gate_config(goal).expect("read").as_deref(),
        Some(r#"{"text":"a"}"#)
    );
    store
        .write(|tx| tx.set_gate_config(goal, None))
        .expect("clear");
    assert_eq!(store.gate_config(goal).expect("read"), None);

    let first = store
        .write(|tx| tx.hook_record_config("s", &wt, r#"{"text":"first"}"#))
        .expect("record");
    let second = store
        .write(|tx| tx.hook_record_config("s", &wt, r#"{"text":"second"}"#))
        .expect("record again");
    assert_eq!(
        (first.as_str(), second.as_str()),
        (r#"{"text":"first"}"#, r#"{"text":"first"}"#)
    );
    assert_eq!(
        store.hook_config("s", &wt).expect("read").as_deref(),
        Some(r#"{"text":"first"}"#)
    );
    assert_eq!(store.hook_config("other", &wt).expect("read"), None);

    store
        .write(|tx| {
            tx.begin_turn(goal)?;
            tx.refund_turn(goal)
        })
        .expect("refund");
    assert_eq!(store.goal(goal).expect("read").expect("goal").turns_used, 0);
}
