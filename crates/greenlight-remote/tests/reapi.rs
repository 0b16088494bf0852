//! The client against a real REAPI server (BuildGrid on loopback). The server comes from
//! `scripts/ci/remote-services.sh start DIR`, whose `DIR/env` names it in
//! `GREENLIGHT_TEST_REAPI`; `scripts/test` starts it and runs these.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use greenlight_remote::proto::build::bazel::remote::execution::v2 as reapi;
use greenlight_remote::{
    ActionSpec, Blob, BlobSet, Digest, DigestProto, Endpoint, FileDigests, InputRoot, LocalResult,
    Remote, RemoteError, digest_of, prepare,
};

fn grid_url() -> String {
    match std::env::var("GREENLIGHT_TEST_REAPI") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!(
            "GREENLIGHT_TEST_REAPI is unset: start the services with \
             `scripts/ci/remote-services.sh start DIR` and `source DIR/env` \
             (scripts/test does both), then run these tests again"
        ),
    }
}

async fn connect() -> Remote {
    let url = grid_url();
    match Remote::connect(&Endpoint::new(&url)).await {
        Ok(remote) => remote,
        Err(e) => panic!("connecting to {url}: {e}"),
    }
}

/// Bytes no earlier run can have uploaded, so "missing" means missing.
fn unique(label: &str) -> Vec<u8> {
    format!("{label} {}", uuid::Uuid::new_v4()).into_bytes()
}

/// `len` bytes that do not compress and differ from run to run.
fn noise(len: usize) -> Vec<u8> {
    let seed = uuid::Uuid::new_v4().as_u128();
    let mut state = (seed as u64) | 1;
    (0..len)
        .map(|_| {
            // xorshift64: cheap bytes that defeat any dedup or compression on the way.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn capabilities_offer_sha256_execution_and_a_batch_limit() {
    let remote = connect().await;
    assert_eq!(remote.instance(), "");
    assert!(
        remote.can_execute(),
        "the test grid runs the execution service"
    );
    // BuildGrid states 4,193,280 bytes; any server must state something usable.
    assert!(
        remote.max_batch_total_size() >= 1024 * 1024,
        "{}",
        remote.max_batch_total_size()
    );
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn upload_sends_only_what_is_missing_and_reads_back_the_same_bytes() {
    let remote = connect().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut blobs = BlobSet::new();
    let mut contents = BTreeMap::new();
    for i in 0..50 {
        let bytes = unique(&format!("blob {i}"));
        let digest = blobs.insert_bytes(bytes.clone());
        contents.insert(digest, bytes);
    }
    let file = dir.path().join("small.txt");
    let file_bytes = unique("a small file");
    std::fs::write(&file, &file_bytes).expect("write");
    let file_digest = digest_of(&file_bytes);
    blobs.insert(file_digest.clone(), Blob::File(file.clone()));
    contents.insert(file_digest, file_bytes);

    let first = remote.upload(&blobs).await.expect("first upload");
    assert_eq!((first.blobs, first.missing, first.batched), (51, 51, 51));
    assert_eq!(first.streamed, 0);
    assert_eq!(first.batch_calls, 1);

    let second = remote.upload(&blobs).await.expect("second upload");
    assert_eq!((second.blobs, second.missing, second.bytes), (51, 0, 0));

    let digests: Vec<Digest> = contents.keys().cloned().collect();
    let read = remote.read_blobs(&digests).await.expect("read back");
    assert_eq!(read.len(), contents.len());
    for (digest, bytes) in &contents {
        assert_eq!(read.get(digest), Some(bytes), "{digest}");
    }
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn a_blob_larger_than_a_batch_round_trips_through_bytestream() {
    let remote = connect().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let big = noise(6 * 1024 * 1024 + 17);
    let path = dir.path().join("big.bin");
    std::fs::write(&path, &big).expect("write");
    let digest = digest_of(&big);
    let mut blobs = BlobSet::new();
    blobs.insert(digest.clone(), Blob::File(path));

    let stats = remote.upload(&blobs).await.expect("upload");
    assert_eq!((stats.missing, stats.streamed, stats.batched), (1, 1, 0));
    assert_eq!(stats.bytes, big.len() as u64);
    assert_eq!(remote.upload(&blobs).await.expect("again").missing, 0);

    let back = remote.read_blob(&digest).await.expect("read");
    assert!(back == big, "6 MiB blob came back different");
    let copy = dir.path().join("copy.bin");
    remote
        .read_blob_to_file(&digest, &copy)
        .await
        .expect("read to file");
    assert!(std::fs::read(&copy).expect("copy") == big);

    // An in-memory blob above the limit takes the same path.
    let mut memory = BlobSet::new();
    let bytes = noise(5 * 1024 * 1024);
    let d = memory.insert_bytes(bytes.clone());
    assert_eq!(remote.upload(&memory).await.expect("upload").streamed, 1);
    let read = remote
        .read_blobs(std::slice::from_ref(&d))
        .await
        .expect("read");
    assert!(read.get(&d) == Some(&bytes));
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn a_file_that_changed_after_hashing_is_refused_not_uploaded() {
    let remote = connect().await;
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, len) in [("small", 1000), ("large", 5 * 1024 * 1024)] {
        let path = dir.path().join(name);
        let before = noise(len);
        std::fs::write(&path, &before).expect("write");
        let digest = digest_of(&before);
        std::fs::write(&path, noise(len)).expect("rewrite");
        let mut blobs = BlobSet::new();
        blobs.insert(digest.clone(), Blob::File(path.clone()));
        let err = remote.upload(&blobs).await.expect_err("changed file");
        assert!(
            matches!(&err, RemoteError::ChangedWhileUploading { path: p, .. } if p == &path),
            "{name}: {err}"
        );
        let missing = remote.find_missing(std::slice::from_ref(&digest)).await;
        assert_eq!(
            missing.expect("find"),
            vec![digest],
            "{name} must not be stored"
        );
    }
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn reading_a_blob_the_server_lacks_names_it() {
    let remote = connect().await;
    for bytes in [unique("never uploaded"), noise(5 * 1024 * 1024)] {
        let digest = digest_of(&bytes);
        let err = remote.read_blob(&digest).await.expect_err("missing");
        assert!(
            matches!(&err, RemoteError::BlobMissing { digest: d, .. } if d == &digest),
            "{err}"
        );
        assert!(err.to_string().contains(&digest.hash), "{err}");
    }
    assert_eq!(
        remote.read_blob(&Digest::empty()).await.expect("empty"),
        b""
    );
}

/// A small workspace with a unique file, built and uploaded.
async fn uploaded_tree(remote: &Remote, dir: &Path) -> InputRoot {
    std::fs::create_dir_all(dir.join("src")).expect("mkdir");
    std::fs::write(dir.join("src/lib.rs"), unique("// lib")).expect("write");
    std::fs::write(dir.join("README"), "readme\n").expect("write");
    let files = [PathBuf::from("src/lib.rs"), PathBuf::from("README")];
    let tree = InputRoot::build(dir, &files, &mut FileDigests::new()).expect("build");
    remote.upload(&tree.blobs).await.expect("upload tree");
    tree
}

fn gate_spec(run: &str) -> ActionSpec {
    ActionSpec {
        argv: vec!["/bin/sh".into(), "-c".into(), run.into()],
        env: BTreeMap::from([("LANG".to_string(), "C.UTF-8".to_string())]),
        platform: BTreeMap::new(),
        keys: Vec::new(),
        working_directory: String::new(),
        timeout: Some(Duration::from_secs(60)),
        do_not_cache: false,
    }
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn a_published_failure_is_a_miss_then_a_hit_with_the_same_bytes() {
    let remote = connect().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = uploaded_tree(&remote, dir.path()).await;
    let action = prepare(&gate_spec("cargo test"), &tree.digest);
    assert_eq!(remote.lookup(&action).await.expect("lookup"), None);

    let started = SystemTime::now() - Duration::from_millis(1500);
    let local = LocalResult {
        exit_code: 3,
        stdout: [b"test result: FAILED\n".as_slice(), &unique("run")].concat(),
        // Not UTF-8: output is bytes, and comes back as the same bytes.
        stderr: b"warning: caf\xe9\n".to_vec(),
        started,
        finished: started + Duration::from_millis(1250),
    };
    remote.publish(&action, &local).await.expect("publish");

    let hit = remote
        .lookup(&action)
        .await
        .expect("lookup")
        .expect("a hit");
    assert_eq!(hit.exit_code, 3);
    assert_eq!(hit.stdout, local.stdout);
    assert_eq!(hit.stderr, local.stderr);
    assert!(hit.cached);
    assert!(!hit.timed_out);
    assert_eq!(hit.duration, Some(Duration::from_millis(1250)));
    assert_eq!(hit.operation, None);

    // The environment is part of the key: one more variable, another action, a miss.
    let mut strict = gate_spec("cargo test");
    strict.env.insert("GATE_MODE".into(), "strict".into());
    let other = prepare(&strict, &tree.digest);
    assert_ne!(other.digest, action.digest);
    assert_eq!(remote.lookup(&other).await.expect("lookup"), None);
    // Re-publishing uploads only what is new: the Command and Action of the new key.
    let mut blobs = other.blobs.clone();
    blobs.insert_bytes(local.stdout.clone());
    blobs.insert_bytes(local.stderr.clone());
    let missing = remote
        .find_missing(&blobs.digests().cloned().collect::<Vec<_>>())
        .await
        .expect("find");
    assert_eq!(
        missing.len(),
        2,
        "only the new Command and Action: {missing:?}"
    );
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn a_do_not_cache_action_is_never_published() {
    let remote = connect().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = uploaded_tree(&remote, dir.path()).await;
    let mut spec = gate_spec("date");
    spec.do_not_cache = true;
    let action = prepare(&spec, &tree.digest);
    let now = SystemTime::now();
    let local = LocalResult {
        exit_code: 0,
        stdout: b"today".to_vec(),
        stderr: Vec::new(),
        started: now,
        finished: now,
    };
    remote.publish(&action, &local).await.expect("publish");
    assert_eq!(remote.lookup(&action).await.expect("lookup"), None);
}

/// Results written by other clients may carry their streams inline (`stdout_raw`) or by
/// digest; a lookup reads both, and an entry whose stream blob is gone is a miss.
#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn results_with_inline_or_digest_streams_both_read_and_a_lost_stream_is_a_miss() {
    let remote = connect().await;
    let url = grid_url();
    let mut client = reapi::action_cache_client::ActionCacheClient::connect(url.clone())
        .await
        .expect("raw client");
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = uploaded_tree(&remote, dir.path()).await;
    let stored = unique("stored stderr");
    let mut blobs = BlobSet::new();
    let stored_digest = blobs.insert_bytes(stored.clone());
    remote.upload(&blobs).await.expect("upload");
    let never_uploaded = digest_of(&unique("evicted stdout"));

    let cases = [
        (
            "inline",
            b"inline out".to_vec(),
            None,
            Some(stored_digest.clone()),
            true,
        ),
        ("lost", Vec::new(), Some(never_uploaded), None, false),
    ];
    for (label, stdout_raw, stdout_digest, stderr_digest, readable) in cases {
        let action = prepare(&gate_spec(&format!("echo {label}")), &tree.digest);
        remote.upload(&action.blobs).await.expect("upload action");
        let result = reapi::ActionResult {
            exit_code: 1,
            stdout_raw: stdout_raw.clone(),
            stdout_digest: stdout_digest.map(|d: Digest| d.to_proto()),
            stderr_digest: stderr_digest.map(|d: Digest| d.to_proto()),
            ..Default::default()
        };
        client
            .update_action_result(reapi::UpdateActionResultRequest {
                action_digest: Some(action.digest.to_proto()),
                action_result: Some(result),
                ..Default::default()
            })
            .await
            .expect("update");
        let found = remote.lookup(&action).await.expect("lookup");
        if readable {
            let hit = found.expect("hit");
            assert_eq!(
                (hit.exit_code, hit.stdout, hit.stderr),
                (1, stdout_raw, stored.clone())
            );
        } else {
            assert_eq!(found, None, "{label}");
        }
    }
}

/// CPU time this thread has used (from the kernel's scheduler statistics): unlike wall time it
/// does not grow when other processes share the machine's cores.
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns = stat
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

/// Keying a 20,000-file workspace twice: the first build reads every file, the second (the
/// file-digest cache loaded from disk) reads none. Then the first upload sends everything and
/// the second only asks. Prints the times (and the builds' CPU time); asserts the counts, not
/// the times.
#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
#[allow(clippy::print_stdout)]
async fn a_20k_file_tree_keys_again_without_reading_and_uploads_nothing_twice() {
    const FILES: usize = 20_000;
    let remote = connect().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("ws");
    let cache_file = dir.path().join("file-digests");
    let salt = uuid::Uuid::new_v4();
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
    let mut files = Vec::with_capacity(FILES);
    for i in 0..FILES {
        // 200 directories of 100 files, 1-4 KiB each: the shape of a mid-sized repository.
        let rel = PathBuf::from(format!("pkg{:03}/src/file{:05}.rs", i % 200, i));
        let path = root.join(&rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        let len = 1024 + (i * 7919) % 3072;
        let line = format!("// {salt} {i}\n");
        let body: String = line
            .repeat(len / line.len() + 1)
            .chars()
            .take(len)
            .collect();
        std::fs::write(&path, body).expect("write");
        // Outside the cache's racy window, as files in a workspace mostly are.
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_times(std::fs::FileTimes::new().set_modified(an_hour_ago)))
            .expect("mtime");
        files.push(rel);
    }

    // In the order `git ls-files` lists them.
    files.sort();

    let (started, cpu) = (std::time::Instant::now(), thread_cpu());
    let mut cache = FileDigests::load(&cache_file);
    let cold = InputRoot::build(&root, &files, &mut cache).expect("cold build");
    cache.save().expect("save");
    let (cold_time, cold_cpu) = (started.elapsed(), thread_cpu() - cpu);
    assert_eq!((cold.files, cache.reads(), cache.hits()), (FILES, FILES, 0));

    let (started, cpu) = (std::time::Instant::now(), thread_cpu());
    let mut cache = FileDigests::load(&cache_file);
    let warm = InputRoot::build(&root, &files, &mut cache).expect("warm build");
    cache.save().expect("save");
    let (warm_time, warm_cpu) = (started.elapsed(), thread_cpu() - cpu);
    assert_eq!(warm.digest, cold.digest);
    assert_eq!((cache.reads(), cache.hits()), (0, FILES));

    let started = std::time::Instant::now();
    let first = remote.upload(&cold.blobs).await.expect("first upload");
    let first_time = started.elapsed();
    assert_eq!(first.missing, cold.blobs.len());
    let started = std::time::Instant::now();
    let second = remote.upload(&warm.blobs).await.expect("second upload");
    let second_time = started.elapsed();
    assert_eq!((second.missing, second.bytes), (0, 0));

    println!(
        "20k-file tree ({} files, {} bytes, {} blobs): build cold {:.3} s wall / {:.3} s CPU \
         (read {FILES}), warm {:.3} s wall / {:.3} s CPU (read 0); upload first {:.3} s \
         ({} batch calls, {} bytes), second {:.3} s (0 missing)",
        cold.files,
        cold.bytes,
        cold.blobs.len(),
        cold_time.as_secs_f64(),
        cold_cpu.as_secs_f64(),
        warm_time.as_secs_f64(),
        warm_cpu.as_secs_f64(),
        first_time.as_secs_f64(),
        first.batch_calls,
        first.bytes,
        second_time.as_secs_f64(),
    );
}

// ---- Remote execution: these need a worker. Each test starts `greenlight worker` (the
// binary built next to this test, or GREENLIGHT_TEST_WORKER_BIN) on a pool of its own, so
// no other test's worker takes its actions, and ends it when done.

/// A `greenlight worker` process in its own process group, ended (SIGTERM, then SIGKILL after
/// 15 s) and reaped when dropped.
struct Worker {
    child: std::process::Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Worker {
    fn start(url: &str, pool: &str) -> Worker {
        use std::os::unix::process::CommandExt;
        let bin = worker_bin();
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("worker.log");
        let out = std::fs::File::create(&log).expect("log");
        let err = out.try_clone().expect("log");
        let child = std::process::Command::new(&bin)
            .args(["worker", "--grid", url, "--capacity", "2"])
            .arg("--property")
            .arg(format!("pool={pool}"))
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .stdin(std::process::Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {} worker: {e}", bin.display()));
        Worker {
            child,
            log,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.log).unwrap_or_default()).into_owned()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        use rustix::process::{Pid, Signal, kill_process_group};
        let group = Pid::from_child(&self.child);
        let _ = kill_process_group(group, Signal::TERM);
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while std::time::Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = kill_process_group(group, Signal::KILL);
        let _ = self.child.wait();
    }
}

/// The worker: GREENLIGHT_TEST_WORKER_BIN, else the `greenlight` binary of this build.
fn worker_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("GREENLIGHT_TEST_WORKER_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("test binary path");
    let mut dir = exe.parent().expect("target dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join("greenlight");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p greenlight` (or point \
         GREENLIGHT_TEST_WORKER_BIN at a greenlight binary)",
        bin.display()
    );
    bin
}

fn pool() -> String {
    format!("remote-test-{}", uuid::Uuid::new_v4())
}

fn on_pool(mut spec: ActionSpec, pool: &str) -> ActionSpec {
    spec.platform.insert("pool".into(), pool.into());
    spec
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn execute_runs_on_a_worker_then_replays_from_the_cache() {
    let remote = connect().await;
    let pool = pool();
    let worker = Worker::start(&grid_url(), &pool);
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = uploaded_tree(&remote, dir.path()).await;
    let spec = on_pool(
        gate_spec("cat src/lib.rs; echo \"mode=$GATE_MODE\"; echo oops >&2; exit 4"),
        &pool,
    );
    let mut spec = spec;
    spec.env.insert("GATE_MODE".into(), "strict".into());
    let action = prepare(&spec, &tree.digest);
    let lib = std::fs::read(dir.path().join("src/lib.rs")).expect("read");

    let mut names = Vec::new();
    let ran = tokio::time::timeout(
        Duration::from_secs(120),
        remote.execute(&action, false, |name| names.push(name.to_string())),
    )
    .await
    .unwrap_or_else(|_| panic!("no result in 120 s; worker log:\n{}", worker.log()))
    .unwrap_or_else(|e| panic!("{e}; worker log:\n{}", worker.log()));
    assert_eq!(ran.exit_code, 4);
    let output = [ran.stdout.as_slice(), ran.stderr.as_slice()].concat();
    let text = String::from_utf8_lossy(&output);
    assert!(output.starts_with(&lib), "{text}");
    assert!(
        text.contains("mode=strict") && text.contains("oops"),
        "{text}"
    );
    assert!(!ran.cached && !ran.timed_out);
    assert_eq!(names.len(), 1, "on_name is called once: {names:?}");
    assert_eq!(ran.operation.as_deref(), Some(names[0].as_str()));
    assert!(ran.worker.is_some(), "{ran:?}");

    // The worker's result is in the action cache, for lookups and executions alike.
    let looked = remote
        .lookup(&action)
        .await
        .expect("lookup")
        .expect("a hit");
    assert_eq!(
        (looked.exit_code, looked.stdout.clone()),
        (4, ran.stdout.clone())
    );
    let again = remote
        .execute(&action, false, |_| {})
        .await
        .expect("second execute");
    assert!(again.cached, "{again:?}");
    assert_eq!((again.exit_code, again.stdout), (4, ran.stdout.clone()));

    // A suspected flake runs again.
    let rerun = remote
        .execute(&action, true, |_| {})
        .await
        .expect("forced execute");
    assert!(!rerun.cached);
    assert_eq!(rerun.exit_code, 4);
    drop(worker);
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn a_run_past_its_timeout_comes_back_timed_out() {
    let remote = connect().await;
    let pool = pool();
    let worker = Worker::start(&grid_url(), &pool);
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = uploaded_tree(&remote, dir.path()).await;
    let mut spec = on_pool(gate_spec("echo started; sleep 30"), &pool);
    spec.timeout = Some(Duration::from_secs(1));
    let action = prepare(&spec, &tree.digest);
    let started = std::time::Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        remote.execute(&action, false, |_| {}),
    )
    .await
    .unwrap_or_else(|_| panic!("no result in 60 s; worker log:\n{}", worker.log()))
    .unwrap_or_else(|e| panic!("{e}; worker log:\n{}", worker.log()));
    assert!(outcome.timed_out, "{outcome:?}");
    assert!(!outcome.cached);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    // A timed-out run is not a verdict: nothing is cached.
    assert_eq!(remote.lookup(&action).await.expect("lookup"), None);
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn wait_reattaches_to_an_execution_whose_client_went_away() {
    let remote = connect().await;
    let pool = pool();
    let worker = Worker::start(&grid_url(), &pool);
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = uploaded_tree(&remote, dir.path()).await;
    let action = prepare(
        &on_pool(gate_spec("sleep 3; echo finished"), &pool),
        &tree.digest,
    );

    let (tx, rx) = tokio::sync::oneshot::channel();
    let first = {
        let (remote, action) = (remote.clone(), action.clone());
        tokio::spawn(async move {
            let mut tx = Some(tx);
            remote
                .execute(&action, false, move |name| {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(name.to_string());
                    }
                })
                .await
        })
    };
    let name = tokio::time::timeout(Duration::from_secs(30), rx)
        .await
        .expect("named within 30 s")
        .expect("a name");
    // The client that started it goes away mid-run (its stream is dropped).
    first.abort();
    let _ = first.await;

    let outcome = tokio::time::timeout(Duration::from_secs(60), remote.wait(&name))
        .await
        .unwrap_or_else(|_| panic!("no result in 60 s; worker log:\n{}", worker.log()))
        .unwrap_or_else(|e| panic!("{e}; worker log:\n{}", worker.log()));
    assert_eq!(outcome.exit_code, 0);
    assert_eq!(String::from_utf8_lossy(&outcome.stdout), "finished\n");
    assert_eq!(outcome.operation.as_deref(), Some(name.as_str()));
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn cancel_ends_a_running_execution() {
    let remote = connect().await;
    let pool = pool();
    let worker = Worker::start(&grid_url(), &pool);
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = uploaded_tree(&remote, dir.path()).await;
    let action = prepare(&on_pool(gate_spec("sleep 60"), &pool), &tree.digest);

    let (tx, rx) = tokio::sync::oneshot::channel();
    let running = {
        let (remote, action) = (remote.clone(), action.clone());
        tokio::spawn(async move {
            let mut tx = Some(tx);
            remote
                .execute(&action, false, move |name| {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(name.to_string());
                    }
                })
                .await
        })
    };
    let name = tokio::time::timeout(Duration::from_secs(30), rx)
        .await
        .expect("named within 30 s")
        .expect("a name");
    let started = std::time::Instant::now();
    remote.cancel(&name).await.expect("cancel");
    let ended = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "still running 30 s after cancel; worker log:\n{}",
                worker.log()
            )
        })
        .expect("task");
    match ended {
        Err(RemoteError::ExecutionFailed {
            code, operation, ..
        }) => {
            assert_eq!(code, tonic::Code::Cancelled);
            assert_eq!(operation, name);
        }
        other => panic!("expected a cancelled execution, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// A loopback TCP proxy to the grid that can cut every open connection at once (new ones
/// are still let through), as a restarted load balancer or a network blip would.
struct CuttingProxy {
    url: String,
    cut: tokio::sync::watch::Sender<u64>,
    connections: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    accept: tokio::task::JoinHandle<()>,
}

impl CuttingProxy {
    async fn start(grid: &str) -> CuttingProxy {
        use std::sync::atomic::Ordering;
        let target = grid
            .split_once("://")
            .map(|(_, rest)| rest.trim_end_matches('/').to_string())
            .expect("grid URL with a scheme");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let (cut, _) = tokio::sync::watch::channel(0u64);
        let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let accept = {
            let (cut, connections) = (cut.clone(), connections.clone());
            tokio::spawn(async move {
                while let Ok((mut client, _)) = listener.accept().await {
                    connections.fetch_add(1, Ordering::SeqCst);
                    let mut cut = cut.subscribe();
                    let target = target.clone();
                    tokio::spawn(async move {
                        let Ok(mut server) = tokio::net::TcpStream::connect(&target).await else {
                            return;
                        };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                            _ = cut.changed() => {}
                        }
                    });
                }
            })
        };
        CuttingProxy {
            url,
            cut,
            connections,
            accept,
        }
    }

    fn cut_all(&self) {
        self.cut.send_modify(|generation| *generation += 1);
    }

    fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for CuttingProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut_all();
    }
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn a_dropped_execute_stream_is_picked_up_again_with_wait_execution() {
    let direct = connect().await;
    let pool = pool();
    let worker = Worker::start(&grid_url(), &pool);
    let proxy = CuttingProxy::start(&grid_url()).await;
    let remote = Remote::connect(&Endpoint::new(&proxy.url))
        .await
        .expect("connect through the proxy");
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = uploaded_tree(&direct, dir.path()).await;
    let action = prepare(
        &on_pool(gate_spec("sleep 4; echo survived"), &pool),
        &tree.digest,
    );

    let (named_tx, named_rx) = tokio::sync::oneshot::channel::<()>();
    let cutter = {
        let cut = proxy.cut.clone();
        tokio::spawn(async move {
            if named_rx.await.is_ok() {
                // Mid-run: the worker has the lease, the client holds the Execute stream.
                tokio::time::sleep(Duration::from_millis(1500)).await;
                cut.send_modify(|generation| *generation += 1);
            }
        })
    };
    let mut named_tx = Some(named_tx);
    let mut names = 0;
    let outcome = tokio::time::timeout(
        Duration::from_secs(90),
        remote.execute(&action, false, |_| {
            names += 1;
            if let Some(tx) = named_tx.take() {
                let _ = tx.send(());
            }
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("no result in 90 s; worker log:\n{}", worker.log()))
    .unwrap_or_else(|e| panic!("{e}; worker log:\n{}", worker.log()));
    cutter.await.expect("cutter");
    assert_eq!(outcome.exit_code, 0);
    assert_eq!(String::from_utf8_lossy(&outcome.stdout), "survived\n");
    assert_eq!(
        names, 1,
        "the name is reported once, not again on re-attach"
    );
    assert!(
        proxy.connections() >= 2,
        "the cut forced a new connection ({} seen)",
        proxy.connections()
    );
}
