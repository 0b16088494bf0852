//! Every outcome of `select`, `status`, `pause` and `resume` against a real SQLite state file,
//! each change read back through a second connection as another front end would see it.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::path::PathBuf;
use std::sync::Arc;

use greenlight_store::{Goal, GoalId, GoalState, Reads, StepClock, Store};
use greenlight_testkit::load::command_goal;

use super::*;

struct Fixture {
    dir: tempfile::TempDir,
    store: Store,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        // Every write a millisecond later than the one before, so an unchanged `updated_at`
        // proves no write touched the goal.
        let store = Store::open_with_clock(
            &dir.path().join("state.db"),
            Arc::new(StepClock::new(1_000, 1)),
        )
        .unwrap();
        Fixture { dir, store }
    }

    fn worktree(&self, name: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    /// An active goal in the worktree `name`.
    fn goal(&mut self, name: &str) -> GoalId {
        let worktree = self.worktree(name);
        self.store
            .write(|tx| tx.create_goal(&command_goal(worktree, "make it pass")))
            .unwrap()
    }

    /// The goal as a fresh connection to the file reads it.
    fn stored(&self, id: GoalId) -> Goal {
        Store::open(&self.dir.path().join("state.db"))
            .unwrap()
            .goal(id)
            .unwrap()
            .unwrap()
    }

    fn events(&self, id: GoalId) -> Vec<String> {
        self.store
            .events_after(Some(id), 0, 1000)
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect()
    }
}

#[test]
fn pausing_an_active_goal_stores_the_detail_of_the_front_end_it_came_through() {
    let mut fx = Fixture::new();
    for (name, via) in [
        ("cli", Via::Cli),
        ("dash", Via::Dashboard),
        ("mcp", Via::Mcp),
    ] {
        let id = fx.goal(name);
        let steered = pause(&mut fx.store, id, via).unwrap();
        assert_eq!(steered.outcome, Pause::Paused, "{via:?}");
        assert_eq!(steered.goal, fx.stored(id), "the answer is the stored goal");
        assert_eq!(steered.goal.state, GoalState::Paused);
        let stored = steered.goal.pause.unwrap();
        assert_eq!(stored.reason, "paused-by-user");
        assert_eq!(stored.detail.as_deref(), Some(via.detail()));
    }
    // The details the database already holds from earlier versions, kept word for word.
    assert_eq!(
        Via::Cli.detail(),
        "paused with `greenlight goal pause`; `greenlight goal resume` continues"
    );
    assert_eq!(
        Via::Dashboard.detail(),
        "paused from the dashboard; resume it there or with `greenlight goal resume`"
    );
    assert_eq!(
        Via::Mcp.detail(),
        "paused through MCP (`goal_pause`); `goal_resume` or `greenlight goal resume` continues"
    );
}

#[test]
fn pausing_a_paused_goal_is_already_paused_and_keeps_the_first_pause() {
    let mut fx = Fixture::new();
    let id = fx.goal("wt");
    pause(&mut fx.store, id, Via::Cli).unwrap();
    let before = fx.stored(id);
    let events = fx.events(id);

    let again = pause(&mut fx.store, id, Via::Mcp).unwrap();
    assert_eq!(again.outcome, Pause::AlreadyPaused);
    assert_eq!(again.outcome.refusal(id), None, "not an error");
    assert_eq!(again.goal, before);
    assert_eq!(
        fx.stored(id),
        before,
        "not written: same detail, same updated_at"
    );
    assert_eq!(fx.events(id), events, "no second goal-paused event");
}

#[test]
fn resuming_a_paused_goal_makes_it_active_with_a_new_turn_budget() {
    let mut fx = Fixture::new();
    let id = fx.goal("wt");
    fx.store.write(|tx| tx.begin_turn(id)).unwrap();
    pause(&mut fx.store, id, Via::Dashboard).unwrap();
    assert_eq!(fx.stored(id).turns_used, 1);

    let steered = resume(&mut fx.store, id).unwrap();
    assert_eq!(steered.outcome, Resume::Resumed);
    assert_eq!(steered.goal, fx.stored(id));
    assert_eq!(steered.goal.state, GoalState::Active);
    assert_eq!(steered.goal.pause, None);
    assert_eq!(steered.goal.turns_used, 0);
    assert_eq!(
        fx.events(id).last().map(String::as_str),
        Some("goal-resumed")
    );
}

#[test]
fn resuming_an_active_goal_is_already_active_and_writes_nothing() {
    let mut fx = Fixture::new();
    let id = fx.goal("wt");
    fx.store.write(|tx| tx.begin_turn(id)).unwrap();
    let before = fx.stored(id);

    let steered = resume(&mut fx.store, id).unwrap();
    assert_eq!(steered.outcome, Resume::AlreadyActive);
    assert_eq!(steered.outcome.refusal(id), None, "not an error");
    assert_eq!(fx.stored(id), before, "the turn budget is not reset");
}

#[test]
fn a_done_or_cleared_goal_is_neither_paused_nor_resumed_and_stays_as_it_was() {
    let mut fx = Fixture::new();
    let done = fx.goal("done");
    fx.store.write(|tx| tx.complete_goal(done)).unwrap();
    let cleared = fx.goal("cleared");
    fx.store.write(|tx| tx.clear_goal(cleared)).unwrap();

    for (id, state) in [(done, GoalState::Done), (cleared, GoalState::Cleared)] {
        let before = fx.stored(id);
        let events = fx.events(id);

        let paused = pause(&mut fx.store, id, Via::Dashboard).unwrap();
        assert_eq!(paused.outcome, Pause::NotPausable { state });
        assert_eq!(
            paused.outcome.refusal(id).unwrap(),
            format!("goal {id} is {state}; only an active goal can be paused")
        );
        let resumed = resume(&mut fx.store, id).unwrap();
        assert_eq!(resumed.outcome, Resume::NotResumable { state });
        assert_eq!(
            resumed.outcome.refusal(id).unwrap(),
            format!("goal {id} is {state}; only a paused goal can be resumed")
        );

        assert_eq!(paused.goal, before);
        assert_eq!(fx.stored(id), before, "{state}: the row is untouched");
        assert_eq!(fx.events(id), events, "{state}: no event");
    }
}

#[test]
fn pausing_or_resuming_a_goal_that_does_not_exist_names_its_id() {
    let mut fx = Fixture::new();
    let missing = GoalId(41);
    let e = pause(&mut fx.store, missing, Via::Cli).unwrap_err();
    assert!(matches!(e, Error::NoSuchGoal(GoalId(41))), "{e:?}");
    assert_eq!(e.to_string(), "no goal 41");
    let e = resume(&mut fx.store, missing).unwrap_err();
    assert!(matches!(e, Error::NoSuchGoal(GoalId(41))), "{e:?}");
}

#[test]
fn a_worktree_means_its_newest_goal_and_an_id_any_worktrees_goal() {
    let mut fx = Fixture::new();
    let first = fx.goal("wt");
    fx.store.write(|tx| tx.complete_goal(first)).unwrap();
    let second = fx.goal("wt");
    let other = fx.goal("other");
    let wt = fx.worktree("wt");

    assert_eq!(
        select(&fx.store, Selector::Worktree(&wt)).unwrap().id,
        second
    );
    fx.store.write(|tx| tx.clear_goal(second)).unwrap();
    let newest = select(&fx.store, Selector::Worktree(&wt)).unwrap();
    assert_eq!(
        (newest.id, newest.state),
        (second, GoalState::Cleared),
        "with no live goal, the newest it had"
    );
    assert_eq!(select(&fx.store, Selector::Id(first)).unwrap().id, first);
    assert_eq!(select(&fx.store, Selector::Id(other)).unwrap().id, other);

    let empty = fx.worktree("empty");
    let e = select(&fx.store, Selector::Worktree(&empty)).unwrap_err();
    assert!(matches!(&e, Error::NoGoalIn(p) if *p == empty), "{e:?}");
    assert!(
        e.to_string().contains("greenlight goal run"),
        "says how to start one: {e}"
    );
    let e = select(&fx.store, Selector::Id(GoalId(99))).unwrap_err();
    assert!(matches!(e, Error::NoSuchGoal(GoalId(99))), "{e:?}");
}

#[test]
fn status_is_the_goal_with_its_gates_and_dispatches_in_one_document() {
    let mut fx = Fixture::new();
    let id = fx.goal("wt");
    fx.store.write(|tx| tx.complete_goal(id)).unwrap();
    let wt = fx.worktree("wt");

    let doc = status(&mut fx.store, Selector::Worktree(&wt)).unwrap();
    assert_eq!(
        doc.goal,
        fx.stored(id),
        "a finished goal still has a status"
    );
    assert_eq!(doc.gates.len(), 1);
    assert_eq!(doc.gates[0].command, "true");
    assert!(doc.dispatches.is_empty());
    let json = serde_json::to_value(&doc).unwrap();
    let mut keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["dispatches", "gates", "goal", "greenlight_version"]);
    assert_eq!(json["greenlight_version"], env!("CARGO_PKG_VERSION"));

    let e = status(&mut fx.store, Selector::Id(GoalId(7))).unwrap_err();
    assert!(matches!(e, Error::NoSuchGoal(GoalId(7))), "{e:?}");
}
