//! The goal list is paged newest first, finished goals unchanged for a week are archived (out
//! of the default list, still there by id and with archived goals included), and a watcher
//! learns which goals and runs changed since it last looked.

mod common;

use std::path::{Path, PathBuf};

use greenlight_store::greenlight_stream::RunKind;
use greenlight_store::{
    ARCHIVE_AFTER_MS, AgentSpec, Family, GoalId, GoalPage, NewGoal, Reads, Store, SystemClock,
    WallClock,
};

fn new_goal(worktree: PathBuf) -> NewGoal {
    NewGoal {
        worktree,
        text: "make it pass".into(),
        agent: AgentSpec {
            family: Family::Command,
            model: None,
            argv_template: Some(vec!["true".into()]),
            endpoint: None,
        },
        judge: None,
        max_turns: 1,
        retries: 1,
        gate_timeout_sec: 60,
        gates: vec!["true".into()],
    }
}

fn ids(goals: &[greenlight_store::Goal]) -> Vec<i64> {
    goals.iter().map(|g| g.id.0).collect()
}

/// Goals 1..=12: odd ones done, 1–6 of them finished more than a week ago; 12 stays active.
fn twelve_goals(dir: &Path) -> Store {
    let db = common::state_at(dir.join("s.db"));
    let mut store = Store::open(&db).expect("open");
    for i in 1..=12 {
        let worktree = dir.join(format!("wt{i}"));
        std::fs::create_dir_all(&worktree).expect("mkdir");
        store
            .write(|tx| {
                let goal = tx.create_goal(&new_goal(worktree))?;
                if i % 2 == 1 {
                    tx.complete_goal(goal)?;
                }
                Ok::<_, greenlight_store::Error>(())
            })
            .expect("goal");
    }
    let mut raw = common::Raw::open(&db);
    let old = SystemClock.now_ms() - ARCHIVE_AFTER_MS - 60_000;
    raw.execute(
        "UPDATE goals SET updated_at = ?1 WHERE id <= 6",
        &[old.into()],
    )
    .expect("age");
    store
}

#[test]
fn the_default_list_pages_newest_first_without_old_finished_goals() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = twelve_goals(dir.path());
    let now = SystemClock.now_ms();
    let page = |before: Option<i64>, limit: usize, archived: bool| {
        ids(&store
            .goal_page(&GoalPage {
                before: before.map(GoalId),
                limit,
                archived,
                now,
            })
            .expect("page"))
    };
    // 1, 3 and 5 are done and a week old: archived. 2, 4 and 6 are active (old, but live).
    assert_eq!(page(None, 5, false), [12, 11, 10, 9, 8]);
    assert_eq!(page(Some(8), 5, false), [7, 6, 4, 2]);
    assert_eq!(page(None, 100, true), (1..=12).rev().collect::<Vec<_>>());
    assert_eq!(page(Some(4), 2, true), [3, 2]);
    // An archived goal is still reachable by id.
    assert!(store.goal(GoalId(3)).expect("read").is_some());
}

#[test]
fn changes_since_names_only_the_goals_and_runs_touched_after_the_positions() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut store = twelve_goals(dir.path());
    let start = store.changes_since(0, 0).expect("changes");
    assert_eq!(start.goals.len(), 12);
    let (seq, position) = (start.event_seq, start.frame_position);
    assert_eq!(store.changes_since(seq, position).expect("none").goals, []);
    let run = store
        .write(|tx| {
            tx.pause_goal(GoalId(4), "paused-by-user", None)?;
            tx.begin_run(RunKind::Verify, Path::new("/w"), &[])
        })
        .expect("touch");
    let changed = store.changes_since(seq, position).expect("changes");
    assert_eq!(changed.goals, [GoalId(4)]);
    assert_eq!(changed.runs, [run]);
    assert!(changed.event_seq > seq && changed.frame_position > position);
}
