//! The goal queue across processes, through the real binary, against a real PostgreSQL
//! (`GREENLIGHT_TEST_PG`, from `scripts/ci/remote-services.sh start DIR`; scripts/test starts it
//! and runs these): 200 queued goals taken by 4 worker processes, each done exactly once by the
//! agents' own records; a worker killed with SIGKILL mid-turn, its goal finished by another
//! worker, and a watcher of `serve` (a process of its own) seeing the goal's stream without a
//! gap or a duplicate, resuming by cursor across the death; a worker whose clock runs ahead
//! (faketime) taking nothing from a live holder, since leases run by the database's clock.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use greenlight_store::{QueueState, Reads, Store};
use greenlight_testkit::{TempRepo, greenlight_bin, signal_and_wait, sse};

use crate::serve_cli::EndOnDrop;

/// A fresh, empty store of this test's own on the test server: a schema of its own.
pub(crate) fn fresh_store(test: &str) -> String {
    let base = std::env::var("GREENLIGHT_TEST_PG").unwrap_or_else(|_| {
        panic!(
            "GREENLIGHT_TEST_PG is not set: start PostgreSQL with \
             `scripts/ci/remote-services.sh start DIR` and `source DIR/env` (scripts/test does both)"
        )
    });
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let schema = format!("q_{test}_{}_{nanos}", std::process::id());
    let mut client = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .unwrap();
    format!("{base}?options=-csearch_path%3D{schema}")
}

/// A scripted agent: appends `<its worktree's name> <pid>` to `records`, runs `body`, and
/// replies (an agent that says nothing is a dead dispatch, and its turn is run again).
fn agent(dir: &Path, records: &Path, body: &str) -> String {
    let script = dir.join("agent.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$(basename \"$PWD\") $$\" >> '{}'\n{body}\necho done\n",
            records.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    format!("command:{}", script.display())
}

fn submit(store: &str, repo: &Path, text: &str, agent: &str) {
    submit_gated(store, repo, text, agent, "test -f done.txt");
}

/// `goal submit` of `text` for `agent`, judged by `gate`, within 4 turns.
pub(crate) fn submit_gated(store: &str, repo: &Path, text: &str, agent: &str, gate: &str) {
    let out = Command::new(greenlight_bin())
        .args(["goal", "submit", text, "--agent", agent, "--gate", gate])
        .args(["--max-turns", "4", "--store", store, "--cwd"])
        .arg(repo)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A `goal worker` process with a work directory of its own (as on another machine).
pub(crate) fn worker(store: &str, name: &str, work: &Path, lease: &str, log: &Path) -> Child {
    Command::new(greenlight_bin())
        .args([
            "goal",
            "worker",
            "--until-empty",
            "--lease",
            lease,
            "--name",
            name,
        ])
        .args(["--store", store, "--work-dir"])
        .arg(work.join(name))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log.join(format!("{name}.log"))).unwrap())
        .process_group(0)
        .spawn()
        .unwrap()
}

pub(crate) fn wait_exit(mut child: Child, limit: Duration, what: &str) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{what} exited {status}");
            return;
        }
        assert!(
            start.elapsed() < limit,
            "{what} still running after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Who claimed `item`, as (epoch, worker), in order.
pub(crate) fn claims_of(queue: &Store, item: greenlight_store::QueueItemId) -> Vec<(u64, String)> {
    queue
        .queue_claims(item)
        .unwrap()
        .into_iter()
        .map(|c| (c.epoch, c.worker))
        .collect()
}

/// Checks that `item` ended `done` after exactly one claim; returns the worker that claimed it.
pub(crate) fn done_on_one_claim(queue: &Store, item: &greenlight_store::QueueItem) -> String {
    assert_eq!(
        (item.state, item.outcome.as_deref()),
        (QueueState::Ended, Some("done")),
        "item {}",
        item.id
    );
    let mut claims = claims_of(queue, item.id);
    assert_eq!(
        claims.len(),
        1,
        "item {} was claimed once: {claims:?}",
        item.id
    );
    claims.remove(0).1
}

/// Lines of the agents' records, as (worktree name, pid).
fn records(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (a.to_owned(), b.to_owned())
        })
        .collect()
}

#[test]
#[ignore = "needs PostgreSQL: run scripts/test"]
fn two_hundred_queued_goals_on_four_worker_processes_are_each_done_exactly_once() {
    const GOALS: usize = 200;
    let store = fresh_store("many");
    let repo = TempRepo::primary();
    let dir = tempfile::tempdir().unwrap();
    let records_file = dir.path().join("records");
    let agent = agent(dir.path(), &records_file, "touch done.txt");
    let mut queue = Store::open(Path::new(&store)).unwrap();
    for i in 0..GOALS {
        submit(&store, repo.path(), &format!("task {i}"), &agent);
    }
    assert_eq!(queue.queue_open_count().unwrap(), GOALS as u64);
    let workers: Vec<_> = (0..4)
        .map(|w| worker(&store, &format!("w{w}"), dir.path(), "30s", dir.path()))
        .collect();
    let _reapers: Vec<_> = workers.iter().map(|w| EndOnDrop(w.id() as i32)).collect();
    for (i, w) in workers.into_iter().enumerate() {
        wait_exit(w, Duration::from_secs(300), &format!("worker w{i}"));
    }

    let items = queue.queue_items().unwrap();
    assert_eq!(items.len(), GOALS);
    let mut by_worker: BTreeMap<String, usize> = BTreeMap::new();
    for item in &items {
        *by_worker
            .entry(done_on_one_claim(&queue, item))
            .or_default() += 1;
    }
    // The agents' own records: one turn per goal, in the goal's own worktree, none twice.
    let seen = records(&records_file);
    assert_eq!(seen.len(), GOALS, "one agent turn per goal");
    let mut worktrees: Vec<_> = seen.iter().map(|(w, _)| w.clone()).collect();
    worktrees.sort();
    worktrees.dedup();
    assert_eq!(worktrees.len(), GOALS, "no goal's turn ran twice");
    assert!(
        by_worker.len() >= 2,
        "the workers shared the queue: {by_worker:?}"
    );
    queue
        .read(|s| {
            for item in &items {
                let goal = s.goal(item.goal.unwrap())?.unwrap();
                assert_eq!(goal.state, greenlight_store::GoalState::Done);
            }
            Ok::<_, greenlight_store::Error>(())
        })
        .unwrap();
}

/// Reads the next SSE event of `watcher` within `limit`.
async fn next_event(watcher: &mut sse::Response, limit: Duration) -> Option<sse::Event> {
    tokio::time::timeout(limit, watcher.next_event())
        .await
        .ok()
        .and_then(|e| e.ok().flatten())
}

fn seq_of(event: &sse::Event) -> u64 {
    let id = event.id.as_deref().unwrap();
    id.rsplit_once(':').unwrap().1.parse().unwrap()
}

#[test]
#[ignore = "needs PostgreSQL: run scripts/test"]
fn a_worker_killed_mid_turn_loses_its_goal_to_another_that_finishes_it_with_an_unbroken_stream() {
    let store = fresh_store("kill");
    let repo = TempRepo::primary();
    let dir = tempfile::tempdir().unwrap();
    let records_file = dir.path().join("records");
    let marker = dir.path().join("first-turn-started");
    // The first turn (on the worker to be killed) hangs; the next one makes the gate pass.
    let agent = agent(
        dir.path(),
        &records_file,
        &format!(
            "if [ ! -e '{m}' ]; then touch '{m}'; sleep 60; fi\ntouch done.txt",
            m = marker.display()
        ),
    );
    submit(&store, repo.path(), "survive a dead worker", &agent);

    // `serve` in a process of its own, on the same store.
    let mut server = Command::new(greenlight_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--store", &store])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let _server_reaper = EndOnDrop(server.id() as i32);
    let mut line = String::new();
    BufReader::new(server.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let start = line.find("http://").unwrap() + 7;
    let addr: std::net::SocketAddr = line[start..].split('/').next().unwrap().parse().unwrap();

    let first = worker(&store, "doomed", dir.path(), "3s", dir.path());
    let first_pid = first.id() as i32;
    let _first_reaper = EndOnDrop(first_pid);
    let waited = Instant::now();
    while !marker.exists() {
        assert!(
            waited.elapsed() < Duration::from_secs(60),
            "the first turn never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let queue = Store::open(Path::new(&store)).unwrap();
    let item = queue.queue_items().unwrap().remove(0);
    let goal = item.goal.expect("the first worker made the goal");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let path = format!("/api/goals/{}/stream", goal.0);
        let mut watcher = sse::request(addr, "GET", &path, &[]).await.unwrap();
        assert_eq!(watcher.status, 200);
        let mut seqs = Vec::new();
        // What the first worker committed before its death (the stream's replay), live.
        while let Some(event) = next_event(&mut watcher, Duration::from_millis(700)).await {
            seqs.push(seq_of(&event));
        }
        assert!(!seqs.is_empty(), "the goal's frames so far are served");

        // SIGKILL mid-turn: the agent is still sleeping in its first turn.
        let killed = signal_and_wait(first, "-KILL", Duration::from_secs(10));
        assert!(killed.code != 0, "{}", killed.render());
        drop(watcher);

        // Another worker (its own work directory: as on another machine) takes over once the
        // lease has run out, and finishes the goal.
        let second = worker(&store, "heir", dir.path(), "3s", dir.path());
        let _second_reaper = EndOnDrop(second.id() as i32);

        // The watcher comes back with its cursor and sees everything after it, live, up to
        // the goal's end.
        let cursor = format!("{}:{}", goal.0, seqs.last().unwrap());
        let mut watcher = sse::request(addr, "GET", &path, &[("Last-Event-ID", cursor.as_str())])
            .await
            .unwrap();
        assert_eq!(watcher.status, 200);
        let mut done = false;
        while let Some(event) = next_event(&mut watcher, Duration::from_secs(60)).await {
            seqs.push(seq_of(&event));
            if event.data.contains(r#""type":"goal-state""#)
                && event.data.contains(r#""state":"done""#)
            {
                done = true;
                break;
            }
        }
        assert!(done, "the goal's stream ends with it done; seqs {seqs:?}");
        let expected: Vec<u64> = (1..=*seqs.last().unwrap()).collect();
        assert_eq!(
            seqs, expected,
            "every frame once, in order, across the worker's death"
        );
        wait_exit(second, Duration::from_secs(60), "the second worker");
    });

    let item = queue.queue_item(item.id).unwrap().unwrap();
    assert_eq!(
        (item.state, item.outcome.as_deref()),
        (QueueState::Ended, Some("done"))
    );
    assert_eq!(
        claims_of(&queue, item.id),
        [(1, "doomed".to_owned()), (2, "heir".to_owned())]
    );
    // Two turns by the agents' records: the hung one on the dead worker, the finishing one in
    // the second worker's own worktree.
    let seen = records(&records_file);
    assert_eq!(seen.len(), 2, "{seen:?}");
    let goal_now = queue.goal(goal).unwrap().unwrap();
    assert_eq!(goal_now.state, greenlight_store::GoalState::Done);
    assert!(
        goal_now.worktree.starts_with(dir.path().join("heir")),
        "{:?}",
        goal_now.worktree
    );
    assert!(goal_now.worktree.join("done.txt").exists());
    // The hung agent of the dead worker was ended by the one that took over.
    let hung_pid: i32 = seen[0].1.parse().unwrap();
    assert!(
        !greenlight_testkit::fake_agent::pid_alive(hung_pid),
        "the dead worker's agent (pid {hung_pid}) is left running"
    );
    let out = signal_and_wait(server, "-TERM", Duration::from_secs(10));
    assert_eq!(out.code, 0, "{}", out.render());
}

#[test]
#[ignore = "needs PostgreSQL and faketime: run scripts/test"]
fn a_worker_whose_clock_runs_two_minutes_ahead_takes_no_item_from_its_live_holder() {
    let store = fresh_store("skew");
    let repo = TempRepo::primary();
    let dir = tempfile::tempdir().unwrap();
    let records_file = dir.path().join("records");
    let marker = dir.path().join("turn-started");
    // One turn of 6 s: two renewals of a 3 s lease at least.
    let agent = agent(
        dir.path(),
        &records_file,
        &format!("touch '{m}'; sleep 6; touch done.txt", m = marker.display()),
    );
    // Submitted through faketime: proof that it moves this binary's clock.
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let out = Command::new("faketime")
        .args(["-f", "+120s"])
        .arg(greenlight_bin())
        .args([
            "goal",
            "submit",
            "hold it",
            "--agent",
            &agent,
            "--gate",
            "test -f done.txt",
        ])
        .args(["--store", &store, "--cwd"])
        .arg(repo.path())
        .output()
        .unwrap_or_else(|e| panic!("faketime (apt-get install faketime) does not run: {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let queue = Store::open(Path::new(&store)).unwrap();
    let item = queue.queue_items().unwrap().remove(0);
    assert!(
        item.submitted_at - before > 100_000,
        "faketime did not move greenlight's clock: submitted at {} ms, {before} ms before",
        item.submitted_at
    );

    let honest = worker(&store, "honest", dir.path(), "3s", dir.path());
    let _honest_reaper = EndOnDrop(honest.id() as i32);
    let waited = Instant::now();
    while !marker.exists() {
        assert!(
            waited.elapsed() < Duration::from_secs(60),
            "the turn never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A worker on a machine whose clock is two minutes ahead: by its own clock every lease the
    // honest one holds ran out long ago.
    let ahead = Command::new("faketime")
        .args(["-f", "+120s"])
        .arg(greenlight_bin())
        .args([
            "goal",
            "worker",
            "--until-empty",
            "--lease",
            "3s",
            "--name",
            "ahead",
        ])
        .args(["--store", &store, "--work-dir"])
        .arg(dir.path().join("ahead"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("ahead.log")).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let _ahead_reaper = EndOnDrop(ahead.id() as i32);
    wait_exit(honest, Duration::from_secs(60), "the honest worker");
    wait_exit(ahead, Duration::from_secs(30), "the worker ahead");

    let item = queue.queue_item(item.id).unwrap().unwrap();
    assert_eq!(item.outcome.as_deref(), Some("done"));
    assert_eq!(
        claims_of(&queue, item.id),
        [(1, "honest".to_owned())],
        "the item stayed with its live holder; the worker ahead's log:\n{}",
        std::fs::read_to_string(dir.path().join("ahead.log")).unwrap_or_default()
    );
    assert_eq!(
        records(&records_file).len(),
        1,
        "one turn, on the honest worker"
    );
}

#[test]
fn a_worker_given_a_worktree_refuses_it_by_name_instead_of_ignoring_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(greenlight_bin())
        .args(["goal", "worker", "--until-empty", "--cwd"])
        .arg(dir.path())
        .arg("--store")
        .arg(dir.path().join("s.db"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("--cwd {}", dir.path().display()))
            && stderr.contains("--work-dir"),
        "{stderr}"
    );
}
