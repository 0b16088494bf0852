//! `goal worker --capacity 2` through the real binary, on a SQLite store: each slot is a process
//! of its own, so the sweep after one item's gates leaves alone the background process another
//! slot's agent is still using; a SIGKILLed supervisor takes its slots with it, and they give
//! their items back at once rather than holding them until their leases run out.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use greenlight_store::{QueueState, Reads, Store};
use greenlight_testkit::fake_agent::pid_alive;
use greenlight_testkit::{TempRepo, greenlight_bin, signal_and_wait};

use crate::goal_queue::{claims_of, done_on_one_claim};
use crate::serve_cli::EndOnDrop;

/// An agent script at `dir/NAME.sh` that runs `body` and replies.
fn agent(dir: &Path, name: &str, body: &str) -> String {
    let script = dir.join(format!("{name}.sh"));
    std::fs::write(&script, format!("#!/bin/sh\n{body}\necho done\n")).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    format!("command:{}", script.display())
}

fn submit(store: &Path, repo: &Path, text: &str, agent: &str, gate: &str) {
    crate::goal_queue::submit_gated(store.to_str().unwrap(), repo, text, agent, gate);
}

/// `goal worker --capacity 2` named `w`, its log in `dir/NAME.log`.
fn worker(store: &Path, dir: &Path, name: &str, capacity: &str) -> Child {
    Command::new(greenlight_bin())
        .args(["goal", "worker", "--until-empty", "--capacity", capacity])
        .args(["--lease", "30s", "--name", name, "--store"])
        .arg(store)
        .arg("--work-dir")
        .arg(dir.join(format!("work-{name}")))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("{name}.log"))).unwrap())
        .process_group(0)
        .spawn()
        .unwrap()
}

fn log_of(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
}

/// The exit code of `child` once it ends within `limit` (-1 for a signal).
fn wait_code(mut child: Child, limit: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        assert!(start.elapsed() < limit, "still running after {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_for(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn one_slots_gates_never_end_the_background_process_another_slots_agent_is_using() {
    let repo = TempRepo::primary();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let store = dir.path().join("state.db");
    // Goal a's agent leaves a process running that it still uses (its parent subshell ends, so
    // the slot adopts it), waits until goal b's turn has ended and its gate has run, each with
    // its sweep, and says whether its process lived through that.
    let a = agent(
        dir.path(),
        "a",
        &format!(
            "( sleep 120 & echo $! > '{d}/orphan.pid' )\n\
             i=0; while [ ! -e '{d}/b-gated' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n\
             [ -e '{d}/b-gated' ] || {{ echo 'b never gated' > '{d}/verdict'; exit 0; }}\n\
             sleep 1\n\
             if kill -0 \"$(cat '{d}/orphan.pid')\" 2>/dev/null; then v=alive; else v=ended; fi\n\
             echo \"$v\" > '{d}/verdict'\n\
             touch done.txt"
        ),
    );
    // Goal b's turn ends (the sweep of what its agent left) once a's process is running.
    let b = agent(
        dir.path(),
        "b",
        &format!(
            "i=0; while [ ! -e '{d}/orphan.pid' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
             touch done.txt"
        ),
    );
    submit(&store, repo.path(), "a", &a, "test -f done.txt");
    submit(
        &store,
        repo.path(),
        "b",
        &b,
        &format!("touch '{d}/b-gated'; test -f done.txt"),
    );

    let run = worker(&store, dir.path(), "w", "2");
    let _reaper = EndOnDrop(run.id() as i32);
    let code = wait_code(run, Duration::from_secs(120));
    assert_eq!(code, 0, "{}", log_of(dir.path(), "w"));

    let verdict = std::fs::read_to_string(dir.path().join("verdict")).unwrap();
    assert_eq!(
        verdict.trim(),
        "alive",
        "goal a's background process, mid-turn, through goal b's turn end and gates on the \
         other slot\n{}",
        log_of(dir.path(), "w")
    );
    let orphan: i32 = std::fs::read_to_string(dir.path().join("orphan.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !pid_alive(orphan),
        "goal a's background process (pid {orphan}) outlived its own item"
    );

    let queue = Store::open(&store).unwrap();
    let items = queue.queue_items().unwrap();
    assert_eq!(items.len(), 2);
    let mut claimers = Vec::new();
    for item in &items {
        claimers.push(done_on_one_claim(&queue, item));
    }
    claimers.sort();
    assert_eq!(
        claimers,
        ["w/0", "w/1"],
        "one item on each slot, named by the worker and the slot"
    );
}

/// The pids of `parent`'s children, as its main thread's `/proc` entry lists them.
fn children_of(parent: u32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// Two goals whose first turns hang (each agent's pid in `dir/NAME.pid`), and a capacity-2
/// worker named `doomed` running both.
struct HungSlots {
    _repo: TempRepo,
    dir: tempfile::TempDir,
    store: std::path::PathBuf,
    supervisor: Child,
    slots: Vec<i32>,
    agents: Vec<i32>,
    _reapers: Vec<EndOnDrop>,
}

fn two_hung_slots() -> HungSlots {
    let repo = TempRepo::primary();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("state.db");
    let d = dir.path().display();
    // Each goal's first turn records its pid and hangs; a later turn finishes it.
    for name in ["a", "b"] {
        let script = agent(
            dir.path(),
            name,
            &format!(
                "if [ ! -e '{d}/{name}.pid' ]; then echo $$ > '{d}/{name}.pid'; sleep 120; fi\n\
                 touch done.txt"
            ),
        );
        submit(&store, repo.path(), name, &script, "test -f done.txt");
    }
    let supervisor = worker(&store, dir.path(), "doomed", "2");
    wait_for(Duration::from_secs(60), "both first turns started", || {
        dir.path().join("a.pid").exists() && dir.path().join("b.pid").exists()
    });
    let agents: Vec<i32> = ["a", "b"]
        .iter()
        .map(|n| {
            std::fs::read_to_string(dir.path().join(format!("{n}.pid")))
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
        .collect();
    let slots = children_of(supervisor.id());
    assert_eq!(slots.len(), 2, "one process per slot: {slots:?}");
    let _reapers = slots
        .iter()
        .chain(&[supervisor.id() as i32])
        .map(|&p| EndOnDrop(p))
        .collect();
    HungSlots {
        _repo: repo,
        dir,
        store,
        supervisor,
        slots,
        agents,
        _reapers,
    }
}

/// Another worker finishes both goals; each was claimed by a slot of `doomed`, then by it.
fn heir_finishes_both(store: &Path, dir: &Path) {
    let heir = worker(store, dir, "heir", "1");
    let _heir_reaper = EndOnDrop(heir.id() as i32);
    let code = wait_code(heir, Duration::from_secs(120));
    assert_eq!(code, 0, "{}", log_of(dir, "heir"));
    let queue = Store::open(store).unwrap();
    for item in queue.queue_items().unwrap() {
        assert_eq!(item.outcome.as_deref(), Some("done"), "item {}", item.id);
        let claims = claims_of(&queue, item.id);
        assert_eq!(claims.len(), 2, "{claims:?}");
        assert!(claims[0].1.starts_with("doomed/"), "{claims:?}");
        assert_eq!(claims[1].1, "heir", "{claims:?}");
    }
}

fn states(store: &Path) -> Vec<QueueState> {
    let queue = Store::open(store).unwrap();
    queue
        .queue_items()
        .unwrap()
        .iter()
        .map(|i| i.state)
        .collect()
}

/// A supervisor stopped by `signal` stops its slots, which end their agents and give their
/// items back well inside the 30 s lease; it exits with `code`.
fn stopped_supervisor_gives_every_item_back(signal: &str, code: Option<i32>) {
    // Held whole to the test's end (the repository, the reapers); the worker is moved out.
    let hung = two_hung_slots();
    let (dir, store, slots, agents) = (&hung.dir, &hung.store, &hung.slots, &hung.agents);
    let stopped = signal_and_wait(hung.supervisor, signal, Duration::from_secs(15));
    if let Some(code) = code {
        assert_eq!(stopped.code, code, "{}", log_of(dir.path(), "doomed"));
    }
    wait_for(
        Duration::from_secs(15),
        "both items back on the queue",
        || states(store) == [QueueState::Queued, QueueState::Queued],
    );
    wait_for(Duration::from_secs(10), "the slots and agents gone", || {
        slots.iter().chain(agents).all(|&p| !pid_alive(p))
    });
    heir_finishes_both(store, dir.path());
}

#[test]
fn a_supervisor_killed_with_sigkill_takes_its_slots_with_it_and_their_items_go_back_at_once() {
    stopped_supervisor_gives_every_item_back("-KILL", None);
}

#[test]
fn a_supervisor_stopped_with_sigterm_passes_it_on_and_exits_143() {
    stopped_supervisor_gives_every_item_back("-TERM", Some(143));
}

#[test]
fn a_slot_that_dies_stops_the_worker_which_ends_what_the_dead_slot_left_running() {
    // Held whole to the test's end (the repository, the reapers); the worker is moved out.
    let hung = two_hung_slots();
    let (dir, store, slots, agents) = (&hung.dir, &hung.store, &hung.slots, &hung.agents);
    greenlight_testkit::procs::signal("-KILL", slots[0] as u32);
    let code = wait_code(hung.supervisor, Duration::from_secs(20));
    let log = log_of(dir.path(), "doomed");
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("worker slot 0 was killed") && log.contains("the other slots were stopped"),
        "{log}"
    );
    // The dead slot's agent came to the supervisor and was ended there; the other slot ended
    // its own.
    assert!(agents.iter().all(|&p| !pid_alive(p)), "{agents:?}\n{log}");
    assert!(!pid_alive(slots[1]), "{log}");
    // The other slot gave its item back; the dead slot's waits for its lease.
    let mut now = states(store);
    now.sort_by_key(|s| *s != QueueState::Queued);
    assert_eq!(now, [QueueState::Queued, QueueState::Claimed], "{log}");
}

#[test]
fn a_slot_word_that_is_not_the_supervisors_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    for (value, why) in [
        ("not-a-slot", "it is not `<pid> <slot> <name>`"),
        ("1 0 w/0", "process 1 is not this worker's parent"),
    ] {
        let out = Command::new(greenlight_bin())
            .args(["goal", "worker", "--until-empty", "--store"])
            .arg(dir.path().join("state.db"))
            .env("GREENLIGHT_WORKER_SLOT", value)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!("GREENLIGHT_WORKER_SLOT={value:?}"))
                && stderr.contains(why)
                && stderr.contains("unset it"),
            "{stderr}"
        );
    }
}
