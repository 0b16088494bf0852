//! `greenlight worker` against a real BuildGrid: actions submitted through the REAPI Execution
//! service run on the real binary's leases, with real processes checked by pid.
//!
//! Every test gives its actions and its workers a platform property `pool=<unique>`, so tests
//! running side by side never take each other's leases. BuildGrid and its PostgreSQL come from
//! `scripts/ci/remote-services.sh start DIR`, whose `DIR/env` exports `GREENLIGHT_TEST_REAPI`
//! (scripts/test does this); the tests that need it are ignored in a plain `cargo test`.

#![allow(clippy::unwrap_used, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use greenlight_remote::proto::build::bazel::remote::execution::v2 as reapi;
use greenlight_remote::{ActionSpec, BlobSet, DigestProto, Endpoint, Remote, prepare};
use greenlight_testkit::{Cli, greenlight_bin, procs};

/// The grid every test here talks to, or a failure that says how to start one.
pub(crate) fn grid() -> String {
    std::env::var("GREENLIGHT_TEST_REAPI").unwrap_or_else(|_| {
        panic!(
            "GREENLIGHT_TEST_REAPI is not set: start BuildGrid with \
             `scripts/ci/remote-services.sh start DIR` and `source DIR/env` (scripts/test does both)"
        )
    })
}

/// How long a submitted action may take, queue included; every action here takes seconds.
const EXECUTE_LIMIT: Duration = Duration::from_secs(90);

/// A pool name no other test (or run) uses (the grid keeps results between runs, so it also
/// salts commands).
pub(crate) fn unique_pool(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{test}-{}-{nanos:x}", std::process::id())
}

fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// A `greenlight worker` process, its stderr in a file the test reads as it grows.
pub(crate) struct Worker {
    child: Child,
    name: String,
    log: PathBuf,
}

impl Worker {
    /// Starts a worker in `pool` and waits until the grid has accepted its session.
    pub(crate) fn start(pool: &str, capacity: u16, cache: &Path, name: &str) -> Worker {
        Worker::start_offering(pool, capacity, cache, name, &[])
    }

    /// [`Worker::start`], offering `extra` platform properties too.
    fn start_offering(
        pool: &str,
        capacity: u16,
        cache: &Path,
        name: &str,
        extra: &[&str],
    ) -> Worker {
        let log = cache.parent().unwrap().join(format!("{name}.log"));
        let child = Command::new(greenlight_bin())
            .args([
                "worker",
                "--grid",
                &grid(),
                "--capacity",
                &capacity.to_string(),
            ])
            .args(["--property", &format!("pool={pool}"), "--name", name])
            .args(extra.iter().flat_map(|p| ["--property", p]))
            .arg("--cache-dir")
            .arg(cache)
            // Stopped leases get half a second between SIGTERM and SIGKILL, not five.
            .env("GREENLIGHT_KILL_GRACE_MS", "500")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .process_group(0)
            .spawn()
            .unwrap();
        let worker = Worker {
            child,
            name: name.to_owned(),
            log,
        };
        worker.wait_for_log("connected, session", Duration::from_secs(20));
        worker
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_for_log(&self, needle: &str, limit: Duration) {
        procs::wait_until(
            limit,
            &format!(
                "worker {} to log {needle:?}; its log:\n{}",
                self.name,
                self.log()
            ),
            || self.log().contains(needle).then_some(()),
        );
    }

    /// SIGKILLs it and reaps it, as the supervisor of a killed worker does (until then its pid
    /// is a zombie, which still reads as alive).
    fn kill(mut self) {
        procs::signal("-KILL", self.child.id());
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits for the exit code.
    fn terminate(mut self, limit: Duration) -> (i32, String) {
        procs::signal("-TERM", self.child.id());
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let log = self.log();
                return (status.code().unwrap_or(-1), log);
            }
            assert!(
                started.elapsed() < limit,
                "worker {} still running {limit:?} after SIGTERM; its log:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // A test that failed midway: SIGTERM lets it hand back and end its leases.
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
            for _ in 0..200 {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            procs::end(self.pid());
            let _ = self.child.wait();
        }
    }
}

/// One action to submit.
struct Job {
    argv: Vec<String>,
    pool: String,
    timeout: Option<Duration>,
    /// Files of the input root: path (may hold `/`), content, executable.
    files: Vec<(String, Vec<u8>, bool)>,
    symlinks: Vec<(String, String)>,
    /// Empty directories at the top of the input root.
    empty_dirs: Vec<String>,
    /// An input root given whole (a hostile one), instead of the three above.
    raw_root: Option<reapi::Directory>,
    /// The `toolchain` platform property.
    toolchain: Option<String>,
}

impl Job {
    fn sh(pool: &str, script: &str) -> Job {
        Job {
            argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
            pool: pool.to_owned(),
            timeout: None,
            files: Vec::new(),
            symlinks: Vec::new(),
            empty_dirs: Vec::new(),
            raw_root: None,
            toolchain: None,
        }
    }
}

/// What came back from the Execution service.
#[derive(Debug)]
struct Finished {
    exit_code: i32,
    /// The status was DEADLINE_EXCEEDED (the action's timeout ended it).
    timed_out: bool,
    stdout: String,
    worker: String,
    /// Why the execution failed, when it did (a cancelled operation, …).
    error: Option<String>,
    elapsed: Duration,
}

/// The job's input root as a tree of `Directory` messages, added to `blobs`; returns the
/// root's digest.
fn input_root(blobs: &mut BlobSet, job: &Job) -> greenlight_remote::Digest {
    if let Some(raw) = &job.raw_root {
        return blobs.insert_message(raw);
    }
    #[derive(Default)]
    struct Dir {
        files: Vec<reapi::FileNode>,
        links: Vec<reapi::SymlinkNode>,
        dirs: BTreeMap<String, Dir>,
    }
    fn place<'a>(root: &'a mut Dir, path: &str) -> (&'a mut Dir, String) {
        let mut parts: Vec<&str> = path.split('/').collect();
        let name = parts.pop().unwrap().to_owned();
        let mut dir = root;
        for part in parts {
            dir = dir.dirs.entry(part.to_owned()).or_default();
        }
        (dir, name)
    }
    fn store(blobs: &mut BlobSet, dir: Dir) -> greenlight_remote::Digest {
        let mut message = reapi::Directory {
            files: dir.files,
            symlinks: dir.links,
            ..Default::default()
        };
        for (name, child) in dir.dirs {
            let digest = store(blobs, child);
            message.directories.push(reapi::DirectoryNode {
                name,
                digest: Some(digest.to_proto()),
            });
        }
        message.files.sort_by(|a, b| a.name.cmp(&b.name));
        message.symlinks.sort_by(|a, b| a.name.cmp(&b.name));
        blobs.insert_message(&message)
    }
    let mut root = Dir::default();
    for name in &job.empty_dirs {
        root.dirs.entry(name.clone()).or_default();
    }
    for (path, content, executable) in &job.files {
        let digest = blobs.insert_bytes(content.clone());
        let (dir, name) = place(&mut root, path);
        dir.files.push(reapi::FileNode {
            name,
            digest: Some(digest.to_proto()),
            is_executable: *executable,
            ..Default::default()
        });
    }
    for (path, target) in &job.symlinks {
        let (dir, name) = place(&mut root, path);
        dir.links.push(reapi::SymlinkNode {
            name,
            target: target.clone(),
            ..Default::default()
        });
    }
    store(blobs, root)
}

/// Uploads the job and follows its Execute stream to the end.
fn execute(job: &Job) -> Finished {
    execute_naming(job, |_| {})
}

/// [`execute`], telling `on_name` the operation's name as soon as the grid gives it.
fn execute_naming(job: &Job, on_name: impl FnMut(&str)) -> Finished {
    block_on(async {
        let remote = Remote::connect(&Endpoint::new(grid())).await.unwrap();
        let mut blobs = BlobSet::new();
        let root = input_root(&mut blobs, job);
        remote.upload(&blobs).await.unwrap();
        let spec = ActionSpec {
            argv: job.argv.clone(),
            // A variable unique to this submission: its own digest, never merged with another.
            env: BTreeMap::from([(
                "GREENLIGHT_TEST_NONCE".to_owned(),
                format!("{:?}", Instant::now()),
            )]),
            platform: [
                ("pool", Some(&job.pool)),
                ("toolchain", job.toolchain.as_ref()),
            ]
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.clone())))
            .collect(),
            timeout: job.timeout,
            do_not_cache: true,
            ..ActionSpec::default()
        };
        let action = prepare(&spec, &root);
        let started = Instant::now();
        // An action no worker can take waits in the queue for ever: fail the test instead.
        let executed = tokio::time::timeout(EXECUTE_LIMIT, remote.execute(&action, true, on_name))
            .await
            .unwrap_or_else(|_| panic!("no result within {EXECUTE_LIMIT:?} (pool {})", job.pool));
        let elapsed = started.elapsed();
        match executed {
            Ok(outcome) => Finished {
                exit_code: outcome.exit_code,
                timed_out: outcome.timed_out,
                stdout: String::from_utf8_lossy(&outcome.stdout).into_owned(),
                worker: outcome.worker.unwrap_or_default(),
                error: None,
                elapsed,
            },
            Err(e) => Finished {
                exit_code: -1,
                timed_out: false,
                stdout: String::new(),
                worker: String::new(),
                error: Some(e.to_string()),
                elapsed,
            },
        }
    })
}

/// Submits on a thread of its own, for a test that acts while the action runs.
fn execute_in_background(job: Job) -> std::thread::JoinHandle<Finished> {
    std::thread::spawn(move || execute(&job))
}

/// A script that records its shell's pid and a background child's pid in `pids`, then waits
/// for the child (a `sleep` that outlives any test).
fn recording_pids(pids: &Path) -> String {
    let pids = pids.display();
    format!("echo $$ >> {pids}; sleep 300 & echo $! >> {pids}; wait")
}

fn wait_for_pids(path: &Path, count: usize) -> Vec<i32> {
    procs::wait_until(
        Duration::from_secs(30),
        &format!("{count} pids in {}", path.display()),
        || {
            let pids = procs::pids_in(&std::fs::read_to_string(path).unwrap_or_default());
            (pids.len() >= count).then_some(pids)
        },
    )
}

fn wait_all_dead(pids: &[i32], what: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline && pids.iter().any(|&p| procs::alive(p)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    procs::assert_all_dead(pids, what);
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn a_remote_run_returns_its_exit_code_and_interleaved_output_from_its_input_tree() {
    let dir = tempfile::tempdir().unwrap();
    let pool = unique_pool("basic");
    let cache = dir.path().join("cache");
    let worker = Worker::start(&pool, 1, &cache, "basic-worker");
    let mut job = Job::sh(
        &pool,
        "cat data/in.txt; echo to-stderr >&2; ./tool.sh; readlink link; \
         test -d empty && echo empty-dir; echo \"cargo=$CARGO_HOME\"; exit 3",
    );
    job.files = vec![
        (
            "data/in.txt".into(),
            b"from the input tree\n".to_vec(),
            false,
        ),
        (
            "tool.sh".into(),
            b"#!/bin/sh\necho tool ran\n".to_vec(),
            true,
        ),
    ];
    job.symlinks = vec![("link".into(), "data/in.txt".into())];
    job.empty_dirs = vec!["empty".into()];
    let done = execute(&job);
    assert_eq!(
        (done.error.as_deref(), done.exit_code),
        (None, 3),
        "{done:?}"
    );
    let cargo_home = cache
        .canonicalize()
        .unwrap()
        .join("toolchains/default/cargo");
    assert_eq!(
        done.stdout,
        format!(
            "from the input tree\nto-stderr\ntool ran\ndata/in.txt\nempty-dir\ncargo={}\n",
            cargo_home.display()
        )
    );
    assert_eq!(done.worker, "basic-worker");
    let log = worker.log();
    assert!(log.contains("finished: exit 3"), "{log}");
    // The lease's directory is gone once it finished.
    let leases: Vec<_> = std::fs::read_dir(cache.join("leases")).unwrap().collect();
    assert!(leases.is_empty(), "{leases:?}");
    let (code, _) = worker.terminate(Duration::from_secs(10));
    assert_eq!(code, 0);
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn an_input_tree_entry_that_is_not_a_file_name_fails_the_action_and_writes_nothing_outside() {
    let dir = tempfile::tempdir().unwrap();
    let pool = unique_pool("hostile");
    let cache = dir.path().join("cache");
    let worker = Worker::start(&pool, 1, &cache, "hostile-worker");
    // Upload the content the entry points at, so only its name is wrong.
    let content = block_on(async {
        let remote = Remote::connect(&Endpoint::new(grid())).await.unwrap();
        let mut blobs = BlobSet::new();
        let digest = blobs.insert_bytes(b"escaped\n".to_vec());
        remote.upload(&blobs).await.unwrap();
        digest
    });
    // From the lease's root, `../../../escaped` would be `cache/escaped`.
    for name in ["..", "../../../escaped", "a/b"] {
        let mut job = Job::sh(&pool, "echo ran");
        job.raw_root = Some(reapi::Directory {
            files: vec![reapi::FileNode {
                name: name.into(),
                digest: Some(content.to_proto()),
                ..Default::default()
            }],
            ..Default::default()
        });
        let done = execute(&job);
        let error = done.error.unwrap_or_default();
        assert!(
            error.contains("InvalidArgument") && error.contains("not a file name"),
            "{name}: {error}"
        );
        assert!(!done.stdout.contains("ran"), "{name}: the command ran");
    }
    assert!(!cache.join("escaped").exists());
    assert!(
        worker.log().contains("failed: the input tree"),
        "{}",
        worker.log()
    );
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn leases_of_one_toolchain_share_a_persistent_cargo_home_and_others_get_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let pool = unique_pool("toolchain");
    let cache = dir.path().join("cache");
    let _worker = Worker::start_offering(
        &pool,
        1,
        &cache,
        "toolchain-worker",
        &["toolchain=rust-test"],
    );
    let script = "ls \"$CARGO_HOME\"; echo \"$CARGO_HOME\"; touch \"$CARGO_HOME/left-by-$N\"";
    let run = |toolchain: Option<&str>, n: &str| {
        let mut job = Job::sh(&pool, &script.replace("$N", n));
        job.toolchain = toolchain.map(str::to_owned);
        let done = execute(&job);
        assert_eq!(
            (done.error.as_deref(), done.exit_code),
            (None, 0),
            "{done:?}"
        );
        done.stdout
    };
    let root = cache.canonicalize().unwrap().join("toolchains");
    let first = run(Some("rust-test"), "one");
    assert_eq!(
        first,
        format!("{}\n", root.join("rust-test/cargo").display())
    );
    // The next lease of that toolchain finds what the first left in its CARGO_HOME.
    let second = run(Some("rust-test"), "two");
    assert_eq!(
        second,
        format!("left-by-one\n{}\n", root.join("rust-test/cargo").display())
    );
    // A lease without a toolchain gets the default directories, empty of the others' files.
    let other = run(None, "three");
    assert_eq!(other, format!("{}\n", root.join("default/cargo").display()));
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn a_timeout_is_deadline_exceeded_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let pool = unique_pool("timeout");
    let worker = Worker::start(&pool, 1, &dir.path().join("cache"), "timeout-worker");
    let pids_file = dir.path().join("pids");
    let mut job = Job::sh(
        &pool,
        &format!("echo before; {}", recording_pids(&pids_file)),
    );
    job.timeout = Some(Duration::from_secs(1));
    let done = execute(&job);
    // DEADLINE_EXCEEDED, with the output up to the deadline and timeout(1)'s exit code.
    assert!(done.timed_out, "{done:?}");
    assert_eq!(done.exit_code, 124);
    assert_eq!(done.stdout, "before\n");
    let pids = wait_for_pids(&pids_file, 2);
    procs::assert_all_dead(&pids, "processes of a timed-out action");
    assert!(
        worker.log().contains("finished: timed out"),
        "{}",
        worker.log()
    );
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn sigterm_mid_lease_ends_its_processes_says_terminating_and_the_action_finishes_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let pool = unique_pool("sigterm");
    let pids_file = dir.path().join("pids");
    let marker = dir.path().join("first-run");
    // The first run records its pids and hangs; the retry finds the marker and finishes.
    let script = format!(
        "if [ -e {m} ]; then echo second run; exit 0; fi; touch {m}; {}",
        recording_pids(&pids_file),
        m = marker.display()
    );
    let first = Worker::start(&pool, 1, &dir.path().join("cache-a"), "sigterm-a");
    let submitted = execute_in_background(Job::sh(&pool, &script));
    let pids = wait_for_pids(&pids_file, 2);
    let group = procs::pids_in(&std::fs::read_to_string(&pids_file).unwrap())[0];

    let (code, log) = first.terminate(Duration::from_secs(15));
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("BOT_TERMINATING"), "{log}");
    wait_all_dead(
        &pids,
        "processes of the lease a SIGTERM ended",
        Duration::from_secs(2),
    );
    assert!(
        greenlight_testkit::fake_agent::group_members(group).is_empty(),
        "the lease's process group outlived its worker"
    );

    let second = Worker::start(&pool, 1, &dir.path().join("cache-b"), "sigterm-b");
    let second_up = Instant::now();
    let done = submitted.join().unwrap();
    // Handed back at once, not requeued when the first session's keepalive (10 s) ran out.
    let waited = second_up.elapsed();
    assert!(
        waited < Duration::from_secs(6),
        "the retry waited {waited:?}"
    );
    assert_eq!(
        (done.error.as_deref(), done.exit_code),
        (None, 0),
        "{done:?}"
    );
    assert_eq!(done.stdout, "second run\n");
    assert_eq!(done.worker, "sigterm-b");
    drop(second);
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn sigkill_mid_lease_is_retried_on_another_worker_which_ends_the_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let pool = unique_pool("sigkill");
    // Both workers share one cache directory, so the survivor may sweep the dead one's orphans.
    let cache = dir.path().join("cache");
    let pids_file = dir.path().join("pids");
    let marker = dir.path().join("first-run");
    let script = format!(
        "if [ -e {m} ]; then echo second run; exit 0; fi; touch {m}; {}",
        recording_pids(&pids_file),
        m = marker.display()
    );
    let first = Worker::start(&pool, 1, &cache, "sigkill-a");
    let submitted = execute_in_background(Job::sh(&pool, &script));
    let pids = wait_for_pids(&pids_file, 2);
    // The second worker comes up while the first still runs the lease: nothing to sweep yet.
    let second = Worker::start(&pool, 1, &cache, "sigkill-b");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        pids.iter().all(|&p| procs::alive(p)),
        "a live worker's lease was swept"
    );

    first.kill();
    let killed_at = Instant::now();
    // The grid requeues the lease once the dead session's keepalive (10 s) runs out.
    let done = submitted.join().unwrap();
    assert_eq!(
        (done.error.as_deref(), done.exit_code),
        (None, 0),
        "{done:?}"
    );
    assert_eq!(done.stdout, "second run\n");
    assert_eq!(done.worker, "sigkill-b");
    eprintln!(
        "SIGKILLed lease finished on the second worker {:?} after the kill",
        killed_at.elapsed()
    );
    wait_all_dead(
        &pids,
        "processes of the SIGKILLed worker's lease",
        Duration::from_secs(10),
    );
    second.wait_for_log("left by a dead worker", Duration::from_secs(5));
    let leases: Vec<_> = std::fs::read_dir(cache.join("leases")).unwrap().collect();
    assert!(leases.is_empty(), "lease directories left: {leases:?}");
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn a_cancelled_operation_ends_its_lease_and_the_worker_takes_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let pool = unique_pool("cancel");
    let worker = Worker::start(&pool, 1, &dir.path().join("cache"), "cancel-worker");
    let pids_file = dir.path().join("pids");
    let (name_tx, name_rx) = std::sync::mpsc::channel();
    let job = Job::sh(&pool, &recording_pids(&pids_file));
    let submitted = std::thread::spawn(move || {
        execute_naming(&job, |name| {
            let _ = name_tx.send(name.to_owned());
        })
    });
    let operation = name_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let pids = wait_for_pids(&pids_file, 2);
    block_on(async {
        let remote = Remote::connect(&Endpoint::new(grid())).await.unwrap();
        remote.cancel(&operation).await.unwrap();
    });
    let done = submitted.join().unwrap();
    let error = done.error.unwrap_or_default();
    assert!(error.contains("Cancelled"), "{error}");
    // The grid drops the lease from the session; the worker's next heartbeat (2 s) ends it.
    wait_all_dead(
        &pids,
        "processes of a cancelled lease",
        Duration::from_secs(10),
    );
    worker.wait_for_log("withdrawn by the grid", Duration::from_secs(5));
    // Its slot is free again.
    let next = execute(&Job::sh(&pool, "echo next"));
    assert_eq!(
        (next.exit_code, next.stdout.as_str()),
        (0, "next\n"),
        "{next:?}"
    );
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn capacity_two_runs_two_leases_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let pool = unique_pool("capacity");
    let worker = Worker::start(&pool, 2, &dir.path().join("cache"), "capacity-worker");
    let spans = dir.path().join("spans");
    let script = format!(
        "s=$(date +%s.%N); sleep 1; echo \"$s $(date +%s.%N)\" >> {}",
        spans.display()
    );
    let started = Instant::now();
    let a = execute_in_background(Job::sh(&pool, &script));
    let b = execute_in_background(Job::sh(&pool, &script));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    let wall = started.elapsed();
    assert_eq!((a.exit_code, b.exit_code), (0, 0), "{a:?} {b:?}");
    assert_eq!(
        (a.worker.as_str(), b.worker.as_str()),
        ("capacity-worker", "capacity-worker")
    );
    let spans: Vec<(f64, f64)> = std::fs::read_to_string(&spans)
        .unwrap()
        .lines()
        .map(|l| {
            let (s, e) = l.split_once(' ').unwrap();
            (s.parse().unwrap(), e.parse().unwrap())
        })
        .collect();
    assert_eq!(spans.len(), 2);
    let overlap = spans[0].1.min(spans[1].1) - spans[0].0.max(spans[1].0);
    eprintln!("two `sleep 1` on capacity 2: {wall:?} wall, {overlap:.3}s overlap");
    // Run one after the other they could not overlap at all; side by side they share most of
    // their second (the wall time is printed, not judged: a busy machine stretches it).
    assert!(
        overlap > 0.5,
        "the two leases ran one after the other: {spans:?}"
    );
    drop(worker);
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn lease_latency_and_idle_memory_are_measured() {
    let dir = tempfile::tempdir().unwrap();
    let pool = unique_pool("latency");
    let worker = Worker::start(&pool, 1, &dir.path().join("cache"), "latency-worker");
    let mut times: Vec<Duration> = (0..10)
        .map(|_| {
            let done = execute(&Job {
                argv: vec!["true".into()],
                ..Job::sh(&pool, "")
            });
            assert_eq!(
                (done.error.as_deref(), done.exit_code),
                (None, 0),
                "{done:?}"
            );
            done.elapsed
        })
        .collect();
    times.sort();
    std::thread::sleep(Duration::from_secs(1));
    let status = std::fs::read_to_string(format!("/proc/{}/status", worker.pid())).unwrap();
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    eprintln!(
        "lease latency (Execute → completed, `true`, 10 runs): min {:?} median {:?} max {:?}; idle worker RSS {} MiB",
        times[0],
        times[5],
        times[9],
        rss_kb / 1024
    );
    assert!(
        times[5] < Duration::from_secs(2),
        "median latency {:?}",
        times[5]
    );
    assert!(rss_kb < 100 * 1024, "an idle worker uses {rss_kb} KiB");
    drop(worker);
}

#[test]
fn a_property_that_is_not_key_value_is_refused_naming_it() {
    let run = Cli::new([
        "worker",
        "--grid",
        "http://127.0.0.1:9",
        "--capacity",
        "1",
        "--property",
        "pool",
    ])
    .within(Duration::from_secs(20))
    .run();
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("`pool` is not key=value"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_unreachable_grid_is_an_error_naming_its_url() {
    // A port nothing listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let run = Cli::from_command({
        let mut cmd = Command::new(greenlight_bin());
        cmd.args(["worker", "--grid", &url, "--capacity", "1", "--cache-dir"])
            .arg(&cache);
        cmd
    })
    .within(Duration::from_secs(30))
    .run();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains(&url), "{}", run.stderr);
    assert!(run.stderr.contains("cannot be reached"), "{}", run.stderr);
}

#[test]
fn sigterm_while_the_grid_does_not_answer_stops_at_once() {
    // A listener that accepts connections and never answers: the capabilities call hangs.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("worker.log");
    let child = Command::new(greenlight_bin())
        .args(["worker", "--grid", &url, "--capacity", "1", "--cache-dir"])
        .arg(dir.path().join("cache"))
        .stderr(std::fs::File::create(&log).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    procs::wait_until(Duration::from_secs(10), "the worker's first line", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains(&url)
            .then_some(())
    });
    std::thread::sleep(Duration::from_millis(300));
    let run = greenlight_testkit::signal_and_wait(child, "-TERM", Duration::from_secs(5));
    assert_eq!(
        run.code,
        0,
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}
