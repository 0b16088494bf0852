//! A recorded run whose process is gone is closed as `interrupted`, with its `run-finished`
//! frame, by whoever looks; a run whose owner lives, or lives in another pid namespace or on
//! another host, stays open.

mod common;

use std::path::Path;
use std::sync::Arc;

use greenlight_store::greenlight_stream::{FrameBody, RunKind};
use greenlight_store::{Reads, RunId, StepClock, Store};

fn open(path: &Path) -> Store {
    Store::open_with_clock(path, Arc::new(StepClock::new(1_000, 10))).expect("open store")
}

/// A pid that was ours and is gone: a child that exited and was reaped.
fn reaped_pid() -> i64 {
    let mut child = std::process::Command::new("true").spawn().expect("spawn");
    let pid = i64::from(child.id());
    child.wait().expect("wait");
    pid
}

fn begin(store: &mut Store) -> RunId {
    store
        .write(|tx| tx.begin_run(RunKind::Verify, Path::new("/w"), &["sleep 9".into()]))
        .expect("begin")
}

#[test]
fn a_run_whose_owner_is_gone_is_closed_as_interrupted_once_with_its_frame() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = common::state_at(dir.path().join("s.db"));
    let mut store = open(&db);
    let live = begin(&mut store);
    let killed = begin(&mut store);
    let foreign_ns = begin(&mut store);
    let foreign_host = begin(&mut store);
    let mut raw = common::Raw::open(&db);
    let dead = reaped_pid();
    for (run, extra) in [
        (killed, ""),
        (foreign_ns, ", owner_pidns = 'pid:[1]'"),
        (foreign_host, ", owner_host = 'elsewhere 0'"),
    ] {
        raw.execute(
            &format!("UPDATE runs SET owner_pid = ?1{extra} WHERE id = ?2"),
            &[dead.into(), run.0.into()],
        )
        .expect("owner");
    }
    // The killed run got as far as one more frame; it ended, as far as anyone knows, there.
    let last = store
        .write(|tx| {
            tx.append_frame(
                killed.stream(),
                &FrameBody::GateStarted {
                    gate: 1,
                    of: 1,
                    command: "sleep 9".into(),
                    turn: None,
                },
            )
        })
        .expect("frame");

    assert_eq!(store.close_abandoned_runs().expect("close"), [killed]);
    assert_eq!(store.close_abandoned_runs().expect("again"), []);

    let closed = store.run(killed).expect("read").expect("run");
    assert_eq!(
        (closed.result.as_deref(), closed.exit_code, closed.ended_at),
        (Some("interrupted"), None, Some(last.at))
    );
    let frames = store.frames_after(killed.stream(), 0, 10).expect("frames");
    let end = frames.last().expect("a frame");
    assert_eq!(end.seq, 3);
    assert!(
        matches!(
            &end.body,
            FrameBody::RunFinished { result, exit_code: None, duration_ms }
                if result == "interrupted" && *duration_ms == u64::try_from(last.at - closed.started_at).unwrap()
        ),
        "{:?}",
        end.body
    );
    for open_run in [live, foreign_ns, foreign_host] {
        let run = store.run(open_run).expect("read").expect("run");
        assert_eq!((run.result, run.ended_at), (None, None), "{open_run:?}");
    }
}

#[test]
fn a_run_closed_meanwhile_by_its_owner_is_left_as_its_owner_wrote_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = common::state_at(dir.path().join("s.db"));
    let mut store = open(&db);
    let run = begin(&mut store);
    store
        .write(|tx| tx.finish_run(run, "passed", 0, 5))
        .expect("finish");
    let mut raw = common::Raw::open(&db);
    raw.execute(
        "UPDATE runs SET owner_pid = ?1 WHERE id = ?2",
        &[reaped_pid().into(), run.0.into()],
    )
    .expect("owner");
    assert_eq!(store.close_abandoned_runs().expect("close"), []);
    let kept = store.run(run).expect("read").expect("run");
    assert_eq!(
        (kept.result.as_deref(), kept.exit_code),
        (Some("passed"), Some(0))
    );
}
