//! Many waiters breaking one dead holder's lock at the same moment: exactly one of them holds it
//! at a time. Each waiter is a thread of its own with its own runtime, as separate greenlight
//! processes would be; a look then a remove that is not serialized lets a second breaker remove
//! the lock the first has just taken. The trials run side by side (each has a lock root of its
//! own), so forty of them take about as long as one.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use greenlight_gate::lock::{self, Acquired, Owner};

const WAITERS: usize = 8;
const TRIALS: usize = 40;

/// A pid that was alive a moment ago and is dead now: a reaped child's.
fn dead_pid() -> i64 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    child.wait().unwrap();
    i64::from(child.id())
}

fn plant_dead_holder(root: &Path, name: &str) {
    let dir = root.join(format!("{name}.lock"));
    fs::create_dir_all(&dir).unwrap();
    let owner = Owner {
        pid: dead_pid(),
        host: lock::host_name(),
        token: "dead-holder".into(),
        acquired_at: 0,
        pid_ns: greenlight_gate::procs::pid_namespace(),
    };
    fs::write(dir.join("owner"), serde_json::to_string(&owner).unwrap()).unwrap();
}

/// One trial: how many waiters held the lock at once at most, and how many broke it.
fn trial() -> (usize, usize) {
    let root = tempfile::tempdir().unwrap();
    plant_dead_holder(root.path(), "race");
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(WAITERS));
    let threads: Vec<_> = (0..WAITERS)
        .map(|_| {
            let (root, inside, most, start) = (
                root.path().to_path_buf(),
                inside.clone(),
                most.clone(),
                start.clone(),
            );
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .unwrap();
                let (_keep, mut interrupt) = tokio::sync::watch::channel(None);
                start.wait();
                runtime.block_on(async {
                    let acquired =
                        lock::acquire(&root, "race", Duration::from_secs(30), &mut interrupt)
                            .await
                            .unwrap();
                    let Acquired::Held {
                        guard, broke_stale, ..
                    } = acquired
                    else {
                        panic!("a waiter gave up: {acquired:?}");
                    };
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(30));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release();
                    broke_stale.is_some()
                })
            })
        })
        .collect();
    let breakers = threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .filter(|b| *b)
        .count();
    assert!(
        !root.path().join("race.lock").exists(),
        "the last holder's release leaves no lock"
    );
    (most.load(Ordering::SeqCst), breakers)
}

#[test]
fn waiters_breaking_one_dead_holder_never_hold_the_lock_together() {
    let trials: Vec<_> = (0..TRIALS).map(|_| std::thread::spawn(trial)).collect();
    let results: Vec<(usize, usize)> = trials.into_iter().map(|t| t.join().unwrap()).collect();
    let overlaps = results.iter().filter(|(most, _)| *most > 1).count();
    let breaks: Vec<usize> = results.iter().map(|(_, broke)| *broke).collect();
    assert_eq!(
        overlaps, 0,
        "trials in which two waiters held the lock at once"
    );
    assert!(
        breaks.iter().all(|b| *b == 1),
        "the dead holder's lock is broken once a trial, by one waiter: {breaks:?}"
    );
}
