//! `greenlight serve` woken by committing writers, through the real binary: a frame this test
//! process commits reaches a watcher of the server process well under the safety poll; a
//! killed server's socket does not stop the next; a lost wake-up still delivers by the safety
//! poll; two servers on one file are both woken; nothing is left beside the file afterwards.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use greenlight_server::wake::SAFETY_POLL;
use greenlight_store::greenlight_stream::StreamId;
use greenlight_store::{GoalId, Store};
use greenlight_testkit::{load, signal_and_wait, sse};

use crate::serve_cli::serve;

/// The longest a frame may take when nothing arrives at all (the test then fails, not hangs).
const LIMIT: Duration = Duration::from_secs(10);

struct Fixture {
    dir: tempfile::TempDir,
    state: PathBuf,
    goal: GoalId,
}

impl Fixture {
    /// A state file with one goal (its `goal-state` frame is seq 1) and no connection open.
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.db");
        let goal = load::create_goal(&state, dir.path());
        Fixture { dir, state, goal }
    }

    fn wake_dir(&self) -> PathBuf {
        greenlight_store::wake::dir_for(&self.state)
    }

    /// The sockets in the wake directory, by name.
    fn sockets(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.wake_dir())
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// What the state directory holds, by name.
    fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Watches `goal` on `addr` (reading its first frame), then commits `frames` frames from
/// this process, one transaction each, a few milliseconds apart (so none lines up with a
/// poll), and returns how long each took from its commit returning to its arrival.
fn delivery_after_commit(
    f: &Fixture,
    goal: GoalId,
    addr: SocketAddr,
    frames: u64,
    before_commits: impl FnOnce(),
) -> Vec<Duration> {
    runtime().block_on(async {
        let path = format!("/api/goals/{}/stream", goal.0);
        let mut watcher = sse::request(addr, "GET", &path, &[]).await.unwrap();
        assert_eq!(watcher.status, 200);
        let first = next_event(&mut watcher).await;
        assert_eq!(first.id.as_deref(), Some(format!("{}:1", goal.0).as_str()));
        before_commits();
        let mut store = Store::open(&f.state).unwrap();
        let mut took = Vec::new();
        for i in 0..frames {
            tokio::time::sleep(Duration::from_millis(7 + (i * 13) % 23)).await;
            store
                .write(|tx| tx.append_frame(StreamId::Goal(goal.0), &load::stamped_frame(i)))
                .unwrap();
            let committed = Instant::now();
            let event = next_event(&mut watcher).await;
            took.push(committed.elapsed());
            assert_eq!(
                event.id.as_deref(),
                Some(format!("{}:{}", goal.0, i + 2).as_str()),
                "every frame once, in order"
            );
        }
        took.sort_unstable();
        took
    })
}

async fn next_event(watcher: &mut sse::Response) -> sse::Event {
    tokio::time::timeout(LIMIT, watcher.next_event())
        .await
        .expect("a frame in time")
        .unwrap()
        .expect("the stream goes on")
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Asserts the frames were woken for, not polled for: by the safety poll alone the median
/// would be about half of it (125 ms). The bounds leave room for a loaded 2-core machine.
fn assert_woken(took: &[Duration]) {
    let median = quantile(took, 0.5);
    let p90 = quantile(took, 0.9);
    assert!(
        median < SAFETY_POLL / 5 && p90 < SAFETY_POLL / 2,
        "frames should arrive well under the {SAFETY_POLL:?} safety poll after their commit; \
         median {median:?}, p90 {p90:?} (all: {took:?})"
    );
}

fn stop(child: std::process::Child) {
    let out = signal_and_wait(child, "-TERM", LIMIT);
    assert_eq!(out.code, 0, "{}", out.render());
}

#[test]
fn a_frame_committed_by_another_process_reaches_a_watcher_well_under_the_safety_poll() {
    let f = Fixture::new();
    let (child, _reaper, addr) = serve(&f.state);
    let took = delivery_after_commit(&f, f.goal, addr, 30, || {});
    assert_woken(&took);
    stop(child);
}

#[test]
fn serve_leaves_nothing_in_the_state_directory_when_it_exits() {
    let f = Fixture::new();
    let before = f.entries();
    assert_eq!(before, ["state.db"], "the fixture closed its connection");
    let (child, _reaper, addr) = serve(&f.state);
    assert_eq!(f.sockets().len(), 1, "serving: one socket beside the file");
    delivery_after_commit(&f, f.goal, addr, 3, || {});
    stop(child);
    assert_eq!(f.entries(), before, "after serve exits");
}

#[test]
fn a_killed_serves_leftover_socket_does_not_stop_the_next_serve() {
    let f = Fixture::new();
    let (mut killed, _reaper, _) = serve(&f.state);
    let leftover = f.sockets();
    assert_eq!(leftover.len(), 1, "{leftover:?}");
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert_eq!(f.sockets(), leftover, "SIGKILL leaves the socket behind");

    let (next, _reaper, addr) = serve(&f.state);
    let now = f.sockets();
    assert_eq!(
        now.len(),
        1,
        "the dead server's socket was removed: {now:?}"
    );
    assert_ne!(now, leftover, "the next server has a socket of its own");
    assert_woken(&delivery_after_commit(&f, f.goal, addr, 15, || {}));
    stop(next);
    assert!(!f.wake_dir().exists(), "{:?}", f.entries());
}

#[test]
fn a_lost_wake_up_still_delivers_by_the_safety_poll() {
    let f = Fixture::new();
    let (child, _reaper, addr) = serve(&f.state);
    // Removing the server's socket loses every later poke: writers find nobody to wake.
    let wake_dir = f.wake_dir();
    let took = delivery_after_commit(&f, f.goal, addr, 6, || {
        for name in f.sockets() {
            std::fs::remove_file(wake_dir.join(name)).unwrap();
        }
    });
    let slowest = quantile(&took, 1.0);
    assert!(
        slowest < SAFETY_POLL * 4,
        "each frame within the safety poll (with room for a loaded machine): {took:?}"
    );
    // Six frames all under 5 ms by the poll alone has odds of about (5/250)^6: the pokes
    // really were lost, and it was the safety poll that delivered.
    assert!(
        slowest > Duration::from_millis(5),
        "the frames came too soon for a poll; was a poke still heard? {took:?}"
    );
    stop(child);
    assert!(!Path::new(&wake_dir).exists(), "{:?}", f.entries());
}

#[test]
fn two_serves_on_one_state_file_are_both_woken_and_the_last_removes_the_directory() {
    let f = Fixture::new();
    let (first, _reaper1, first_addr) = serve(&f.state);
    let (second, _reaper2, second_addr) = serve(&f.state);
    assert_eq!(f.sockets().len(), 2, "{:?}", f.sockets());
    assert_woken(&delivery_after_commit(&f, f.goal, first_addr, 10, || {}));
    stop(first);
    assert_eq!(f.sockets().len(), 1, "the second server's socket stays");
    // A second goal, so the second server's watcher starts at seq 1 too.
    let worktree = f.dir.path().join("other");
    std::fs::create_dir(&worktree).unwrap();
    let other = load::create_goal(&f.state, &worktree);
    assert_woken(&delivery_after_commit(&f, other, second_addr, 10, || {}));
    stop(second);
    assert!(!f.wake_dir().exists(), "{:?}", f.entries());
}
