//! `greenlight workflow submit` and the worker that runs workflow items, through the real
//! binary: a bad plan or argument refused at submit with nothing queued; queued runs taken by a
//! `goal worker` and ended by how each run ended (SQLite); and, on a real PostgreSQL
//! (`GREENLIGHT_TEST_PG`, which scripts/test starts), a worker killed with SIGKILL in the middle
//! of a fan-out, the run resumed by the next worker from what was committed: no finished member
//! dispatched again, one run, the item done.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use greenlight_store::{QueueKind, QueueState, Reads, Store};
use greenlight_testkit::files::{write_executable, write_file};
use greenlight_testkit::{TempRepo, greenlight_bin};

use crate::goal_queue::{claims_of, fresh_store};
use crate::serve_cli::EndOnDrop;

/// A repository to submit from, and a directory outside it for scripts, plans, the agents' log
/// and the workers' work directories.
struct Fixture {
    repo: TempRepo,
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            repo: TempRepo::primary(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A `command:` agent: answers the probe, reads its member from `ITEM=` at the prompt's
    /// end, logs `start <item>`, runs `body`.
    fn agent(&self, body: &str) -> String {
        let path = self.path("agent.sh");
        write_executable(
            &path,
            &format!(
                "#!/bin/sh\nprompt=$(cat)\nif [ \"$prompt\" = 'Reply with exactly: OK' ]; then echo OK; exit 0; fi\n\
                 item=${{prompt##*ITEM=}}\nLOG='{log}'\nDIR='{dir}'\necho \"start $item\" >> \"$LOG\"\n{body}\n",
                log = self.path("log").display(),
                dir = self.dir.path().display(),
            ),
        );
        format!("command:{}", path.display())
    }

    /// A plan fanning `items` out to `agent` (two at once), each writing `out/<item>.txt`, and
    /// a join that needs every one.
    fn plan(&self, name: &str, agent: &str, items: &str) -> PathBuf {
        let path = self.path(&format!("{name}.yaml"));
        write_file(
            &path,
            format!(
                "workflow: 1\nname: {name}\nagent: \"{agent}\"\nsteps:\n  - id: fix\n    kind: fanout\n    \
                 items: [{items}]\n    maxFanout: 2\n    template:\n      prompt: \"Fix. ITEM={{{{item}}}}\"\n      \
                 deliverable: file\n      writes: [\"out/{{{{item}}}}.txt\"]\n  - id: fixed\n    kind: join\n    \
                 for: fix\n    policy: all-declared\n"
            ),
        );
        path
    }

    fn submit(&self, store: &str, plan: &Path, extra: &[&str]) -> std::process::Output {
        Command::new(greenlight_bin())
            .args(["workflow", "submit"])
            .arg(plan)
            .args(extra)
            .args(["--store", store])
            .current_dir(self.repo.path())
            .output()
            .unwrap()
    }

    /// A `goal worker` process with the work directory `work` (one name, one machine).
    fn worker(&self, store: &str, name: &str, lease: &str, work: &str) -> Child {
        Command::new(greenlight_bin())
            .args(["goal", "worker", "--until-empty", "--lease", lease])
            .args(["--name", name, "--store", store, "--work-dir"])
            .arg(self.path(work))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.path(&format!("{name}.log"))).unwrap())
            .process_group(0)
            .spawn()
            .unwrap()
    }

    fn log(&self) -> Vec<String> {
        greenlight_testkit::files::log_lines(&self.path("log"))
    }

    fn count(&self, line: &str) -> usize {
        self.log().iter().filter(|l| *l == line).count()
    }

    fn wait_log(&self, prefix: &str, n: usize) {
        let started = Instant::now();
        while self.log().iter().filter(|l| l.starts_with(prefix)).count() < n {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "waited for {n} `{prefix}` lines: {:?}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn worker_log(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(&format!("{name}.log"))).unwrap_or_default()
    }
}

fn wait_success(mut child: Child, limit: Duration, what: &str, log: impl Fn() -> String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{what} exited {status}: {}", log());
            return;
        }
        assert!(
            start.elapsed() < limit,
            "{what} still running after {limit:?}: {}",
            log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

const WRITE: &str =
    "mkdir -p out\necho \"$item\" > \"out/$item.txt\"\necho \"end $item\" >> \"$LOG\"\necho done";

#[test]
fn a_plan_with_a_problem_or_a_bad_argument_is_refused_at_submit_and_nothing_is_queued() {
    let f = Fixture::new();
    let store = f.path("state.db").display().to_string();
    let bad = f.path("bad.yaml");
    write_file(
        &bad,
        "workflow: 1\nname: bad\nagent: claude\nsteps:\n  - id: a\n    kind: nope\n",
    );
    let out = f.submit(&store, &bad, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:6:", bad.display())),
        "the problem at its file and line: {stderr}"
    );
    assert!(stderr.contains("nothing was queued"), "{stderr}");

    let plan = f.plan("ok", &f.agent(WRITE), "a");
    let out = f.submit(&store, &plan, &["--arg", "ticket=1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--arg ticket: the plan declares no argument `ticket`"),
        "{stderr}"
    );
    let out = f.submit(&store, &plan, &["--label", "gpu ok"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let queue = Store::open(Path::new(&store)).unwrap();
    assert_eq!(queue.queue_items().unwrap().len(), 0, "nothing was queued");
}

#[test]
fn queued_workflow_runs_are_run_by_a_worker_and_each_item_ends_as_its_run_ended() {
    let f = Fixture::new();
    let store = f.path("state.db").display().to_string();
    // Member `bad` says done and writes nothing: the join that needs every member fails.
    let agent = f.agent(&format!(
        "if [ \"$item\" = bad ]; then echo done; exit 0; fi\n{WRITE}"
    ));
    let good = f.plan("good", &agent, "a, b, c");
    let failing = f.plan("failing", &agent, "x, bad");
    for plan in [&good, &failing] {
        let out = f.submit(&store, plan, &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("queued workflow item"));
    }
    let worker = f.worker(&store, "w", "30s", "work");
    let _reaper = EndOnDrop(worker.id() as i32);
    wait_success(worker, Duration::from_secs(120), "the worker", || {
        f.worker_log("w")
    });

    let queue = Store::open(Path::new(&store)).unwrap();
    let items = queue.queue_items().unwrap();
    assert_eq!(items.len(), 2);
    let ended: Vec<_> = items
        .iter()
        .map(|i| (i.kind, i.state, i.outcome.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        ended[0],
        (QueueKind::Workflow, QueueState::Ended, "done".into())
    );
    assert_eq!(
        (ended[1].0, ended[1].1),
        (QueueKind::Workflow, QueueState::Ended)
    );
    assert!(
        ended[1].2.starts_with("failed:"),
        "the failing run's item says it failed: {ended:?}"
    );
    for item in &items {
        let run = queue
            .workflow_run(item.workflow_run.expect("each item names its run"))
            .unwrap()
            .unwrap();
        assert!(run.status.is_ended(), "{:?}", run.status);
    }
    assert_eq!(
        queue.workflow_runs(10).unwrap().len(),
        2,
        "one run per item"
    );
    for item in ["a", "b", "c", "x", "bad"] {
        assert_eq!(f.count(&format!("start {item}")), 1, "{:?}", f.log());
    }
}

#[test]
fn a_worker_told_to_stop_ends_its_runs_agents_gives_the_item_back_and_the_next_resumes_it() {
    let f = Fixture::new();
    let store = f.path("state.db").display().to_string();
    let agent = f.agent(&format!(
        "if [ $item = b ] && [ -e \"$DIR/slow\" ]; then echo \"waiting $item\" >> \"$LOG\"; \
         n=0; while [ -e \"$DIR/slow\" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done; \
         echo \"gone $item\" >> \"$LOG\"; exit 1; fi\n{WRITE}"
    ));
    write_file(&f.path("slow"), "");
    let plan = f.plan("stop", &agent, "a, b");
    assert!(f.submit(&store, &plan, &[]).status.success());
    let first = f.worker(&store, "first", "30s", "work");
    let _first_reaper = EndOnDrop(first.id() as i32);
    f.wait_log("waiting b", 1);
    f.wait_log("end a", 1);
    let stopped = greenlight_testkit::signal_and_wait(first, "-TERM", Duration::from_secs(20));
    assert_eq!(stopped.code, 143, "{}", f.worker_log("first"));
    // b's agent was ended with the run: it never sees `slow` go.
    std::fs::remove_file(f.path("slow")).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        f.count("gone b"),
        0,
        "the agent outlived its run: {:?}",
        f.log()
    );

    let queue = Store::open(Path::new(&store)).unwrap();
    let item = queue.queue_items().unwrap().remove(0);
    assert_eq!(
        item.state,
        QueueState::Queued,
        "given back: {}",
        f.worker_log("first")
    );
    let run = item.workflow_run.expect("linked to its run");

    let next = f.worker(&store, "next", "30s", "work");
    let _next_reaper = EndOnDrop(next.id() as i32);
    wait_success(next, Duration::from_secs(120), "the next worker", || {
        f.worker_log("next")
    });
    let item = queue.queue_item(item.id).unwrap().unwrap();
    assert_eq!(
        (item.state, item.outcome.as_deref(), item.workflow_run),
        (QueueState::Ended, Some("done"), Some(run)),
        "{}",
        f.worker_log("next")
    );
    assert_eq!(
        (f.count("start a"), f.count("start b")),
        (1, 2),
        "{:?}",
        f.log()
    );
}

#[test]
#[ignore = "needs PostgreSQL: run scripts/test"]
fn a_worker_killed_mid_fan_out_loses_its_run_to_the_next_that_resumes_it_without_redoing_a_member()
{
    let f = Fixture::new();
    let store = fresh_store("kill");
    // a and b finish at once; c and d wait while `slow` exists, then give up without writing
    // (the attempts the kill cut short: they must not count).
    let agent = f.agent(&format!(
        "case $item in c|d) if [ -e \"$DIR/slow\" ]; then echo \"waiting $item\" >> \"$LOG\"; \
         n=0; while [ -e \"$DIR/slow\" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done; \
         echo \"gone $item\" >> \"$LOG\"; exit 1; fi;; esac\n{WRITE}"
    ));
    write_file(&f.path("slow"), "");
    let plan = f.plan("kill", &agent, "a, b, c, d");
    let out = f.submit(&store, &plan, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut doomed = f.worker(&store, "doomed", "3s", "work");
    let _doomed_reaper = EndOnDrop(doomed.id() as i32);
    f.wait_log("waiting ", 2);
    assert_eq!((f.count("end a"), f.count("end b")), (1, 1));
    doomed.kill().unwrap(); // SIGKILL: no chance to record anything more
    doomed.wait().unwrap();
    // The dead worker's agents outlive it (process groups of their own); let them go.
    std::fs::remove_file(f.path("slow")).unwrap();
    f.wait_log("gone ", 2);

    let queue = Store::open(Path::new(&store)).unwrap();
    let item = queue.queue_items().unwrap().remove(0);
    let run = item
        .workflow_run
        .expect("the first worker's run is linked to the item");
    assert_eq!(item.state, QueueState::Claimed, "held by the dead worker");

    // The next worker on this machine takes the item once the lease runs out and resumes.
    let heir = f.worker(&store, "heir", "3s", "work");
    let _heir_reaper = EndOnDrop(heir.id() as i32);
    wait_success(heir, Duration::from_secs(120), "the second worker", || {
        f.worker_log("heir")
    });

    let item = queue.queue_item(item.id).unwrap().unwrap();
    assert_eq!(
        (item.state, item.outcome.as_deref(), item.workflow_run),
        (QueueState::Ended, Some("done"), Some(run)),
        "{}",
        f.worker_log("heir")
    );
    assert_eq!(
        claims_of(&queue, item.id),
        [(1, "doomed".to_owned()), (2, "heir".to_owned())]
    );
    assert_eq!(
        queue.workflow_runs(10).unwrap().len(),
        1,
        "one run, resumed"
    );
    let recorded = queue.workflow_run(run).unwrap().unwrap();
    assert_eq!(
        recorded.status,
        greenlight_store::greenlight_types::WorkflowStatus::Completed
    );
    // Finished before the kill: never dispatched again. In flight at the kill: again, once.
    assert_eq!(
        (f.count("start a"), f.count("start b")),
        (1, 1),
        "{:?}",
        f.log()
    );
    assert_eq!(
        (f.count("start c"), f.count("start d")),
        (2, 2),
        "{:?}",
        f.log()
    );
    assert_eq!((f.count("end c"), f.count("end d")), (1, 1));
}

#[test]
#[ignore = "needs PostgreSQL: run scripts/test"]
fn a_run_whose_worker_died_with_its_machine_never_ends_done_on_another() {
    let f = Fixture::new();
    let store = fresh_store("lost");
    let agent = f.agent(&format!(
        "case $item in c) if [ -e \"$DIR/slow\" ]; then echo \"waiting $item\" >> \"$LOG\"; \
         n=0; while [ -e \"$DIR/slow\" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done; \
         echo \"gone $item\" >> \"$LOG\"; exit 1; fi;; esac\n{WRITE}"
    ));
    write_file(&f.path("slow"), "");
    let plan = f.plan("lost", &agent, "a, b, c");
    assert!(f.submit(&store, &plan, &[]).status.success());
    let mut doomed = f.worker(&store, "doomed", "2s", "machine-1");
    let _doomed_reaper = EndOnDrop(doomed.id() as i32);
    f.wait_log("waiting ", 1);
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    std::fs::remove_file(f.path("slow")).unwrap();
    f.wait_log("gone ", 1);
    // The machine is gone with its disk: the clone, the member worktrees and their commits.
    std::fs::remove_dir_all(f.path("machine-1")).unwrap();

    let heir = f.worker(&store, "heir", "2s", "machine-2");
    let _heir_reaper = EndOnDrop(heir.id() as i32);
    wait_success(heir, Duration::from_secs(120), "the second worker", || {
        f.worker_log("heir")
    });
    let queue = Store::open(Path::new(&store)).unwrap();
    let item = queue.queue_items().unwrap().remove(0);
    assert_eq!(item.state, QueueState::Ended, "{}", f.worker_log("heir"));
    let outcome = item.outcome.unwrap_or_default();
    // Refused by name, the lost worktree's recorded place said; never remade from the base and
    // passed off as the work.
    assert!(
        outcome.starts_with("failed: its run was refused (stale-input-refused)")
            && outcome.contains(&format!("{}", f.path("machine-1").display())),
        "{outcome}\n{}",
        f.worker_log("heir")
    );
    assert_eq!(f.count("start a") + f.count("start b"), 2, "{:?}", f.log());
}
