//! `greenlight workflow run` through the real binary (build it first: `cargo build -p
//! greenlight`), with scripted `command:` agents, real git worktrees and a real state file.
//!
//! Each agent is a shell script: it answers the probe with `OK`, reads its member's key from the
//! prompt (`ITEM=<key>` at its end), and appends `start`/`end` lines to a shared log with
//! `>>` (O_APPEND, one write per line), which is how the tests measure from inside the agents
//! what ran, how often and how many at once.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use greenlight_testkit::fake_agent::{FakeAgent, FakeCli, Scenario};
use greenlight_testkit::{Run, TempRepo, files::write_executable, files::write_file};
use serde_json::Value;

struct Fixture {
    repo: TempRepo,
    /// Scripts, the log, the plan and the state file: outside the repository.
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let repo = TempRepo::primary();
        let dir = tempfile::tempdir().unwrap();
        Fixture { repo, dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// An agent script: the probe answered, `$item` and `$LOG` set, then `body`.
    fn agent(&self, name: &str, body: &str) -> String {
        let path = self.path(name);
        let log = self.path("log");
        write_executable(
            &path,
            &format!(
                "#!/bin/sh\nprompt=$(cat)\nif [ \"$prompt\" = 'Reply with exactly: OK' ]; then\n  \
                 if [ -e '{dir}/{name}.dead' ]; then exit 1; fi\n  echo OK; exit 0\nfi\n\
                 item=${{prompt##*ITEM=}}\nLOG='{log}'\nDIR='{dir}'\n{body}\n",
                dir = self.dir.path().display(),
                log = log.display(),
            ),
        );
        format!("command:{}", path.display())
    }

    fn plan(&self, text: &str) -> PathBuf {
        let path = self.path("plan.yaml");
        write_file(&path, text);
        path
    }

    fn gates(&self, yaml: &str) {
        self.repo.greenlight_yaml(yaml);
    }

    fn args<'a>(&'a self, plan: &'a Path, extra: &[&'a str]) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "workflow".into(),
            "run".into(),
            plan.display().to_string(),
            "--json".into(),
            "--state".into(),
            self.path("state.db").display().to_string(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args
    }

    fn run(&self, plan: &Path, extra: &[&str]) -> (Run, Value) {
        let run = self
            .repo
            .cli(self.args(plan, extra))
            .within(Duration::from_secs(120))
            .run();
        let doc: Value = serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "stdout is one JSON object ({e}): {}\nstderr: {}",
                run.stdout, run.stderr
            )
        });
        (run, doc)
    }

    fn log(&self) -> Vec<String> {
        greenlight_testkit::files::log_lines(&self.path("log"))
    }

    fn count(&self, line: &str) -> usize {
        self.log().iter().filter(|l| *l == line).count()
    }

    fn worktrees(&self) -> usize {
        self.repo.git(&["worktree", "list"]).lines().count()
    }
}

/// The most `start`s without their `end` at any point of the log.
fn most_in_flight(log: &[String]) -> usize {
    let (mut now, mut most) = (0usize, 0usize);
    for line in log {
        if line.starts_with("start ") {
            now += 1;
            most = most.max(now);
        } else if line.starts_with("end ") {
            now -= 1;
        }
    }
    most
}

const WORKER: &str = "echo \"start $item\" >> \"$LOG\"\nsleep 0.3\nmkdir -p out\n\
                      echo \"$item $CM_WORKTREE_INDEX $CM_WORKTREE_ID\" > \"out/$item.txt\"\n\
                      echo \"end $item\" >> \"$LOG\"\necho done";

#[test]
fn a_fan_out_of_six_never_runs_more_than_two_at_once_each_in_its_own_worktree() {
    let f = Fixture::new();
    let agent = f.agent("worker", WORKER);
    f.gates(&format!(
        "version: 1\ngates:\n  - id: member\n    command: \"test -s out/*.txt && echo $CM_WORKTREE_INDEX-$CM_WORKTREE_ID >> {}\"\n",
        f.path("gates").display()
    ));
    let plan = f.plan(&format!(
        "workflow: 1\nname: six\nagent: \"{agent}\"\nsteps:\n  - id: fix\n    kind: fanout\n    \
         items: [a, b, c, d, e, f]\n    maxFanout: 2\n    template:\n      prompt: \"Fix it. ITEM={{{{item}}}}\"\n      \
         deliverable: file\n      writes: [\"out/{{{{item}}}}.txt\"]\n  - id: fixed\n    kind: join\n    for: fix\n    \
         policy: all-declared\n  - id: review\n    kind: gate\n    needs: [fixed]\n    gates: [member]\n"
    ));
    let (run, doc) = f.run(&plan, &[]);
    assert_eq!(run.code, 0, "{doc}\n{}", run.stderr);
    assert_eq!(doc["status"], "completed");
    assert_eq!(doc["dispatched"], 6);
    let log = f.log();
    assert_eq!(log.len(), 12, "{log:?}");
    assert_eq!(most_in_flight(&log), 2, "{log:?}");
    // Each member's gate ran in its own worktree, with its own index and id.
    let gates = std::fs::read_to_string(f.path("gates")).unwrap();
    let mut seen: Vec<&str> = gates.lines().collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 6, "{gates}");
    assert!(seen.iter().all(|l| l.contains("wf-")), "{gates}");
    // A completed run removes its worktrees and branches.
    assert_eq!(f.worktrees(), 1);
    assert!(!f.repo.git(&["branch"]).contains("greenlight/wf-"));
    // Every dispatch, settle, gate and join decision is a frame of the run's stream.
    let id: i64 = doc["run"].as_str().unwrap().parse().unwrap();
    let mut store = greenlight_store::Store::open(&f.path("state.db")).unwrap();
    let frames = store
        .read(|s| {
            greenlight_store::Reads::frames_after(
                s,
                greenlight_store::greenlight_stream::StreamId::Workflow(id),
                0,
                1000,
            )
        })
        .unwrap();
    let count = |kind: &str| frames.iter().filter(|fr| fr.body.kind() == kind).count();
    assert_eq!(count("workflow-run-started"), 1);
    assert_eq!(count("workflow-dispatched"), 6);
    assert_eq!(count("workflow-settled"), 6);
    assert_eq!(count("workflow-join-decided"), 1);
    assert_eq!(
        (
            count("workflow-gate-started"),
            count("workflow-gate-judged")
        ),
        (1, 1)
    );
    assert_eq!(count("workflow-run-finished"), 1);
}

/// A fan-out of three whose member `b` fails (its agent exits 1).
fn join_plan(f: &Fixture, policy: &str, truncate: bool) -> PathBuf {
    let agent = f.agent(
        "joiner",
        "echo \"start $item\" >> \"$LOG\"\nif [ \"$item\" = b ]; then exit 1; fi\necho ok",
    );
    let cut = if truncate {
        "    truncate: { to: 2, reason: only two today }\n"
    } else {
        ""
    };
    f.plan(&format!(
        "workflow: 1\nname: joins\nagent: \"{agent}\"\nsteps:\n  - id: fan\n    kind: fanout\n    \
         items: [a, b, c]\n    maxFanout: 3\n{cut}    template:\n      prompt: \"Answer. ITEM={{{{item}}}}\"\n  \
         - id: joined\n    kind: join\n    for: fan\n    policy: \"{policy}\"\n  - id: after\n    kind: agent\n    \
         needs: [joined]\n    prompt: \"Sum up. ITEM=after\"\n"
    ))
}

#[test]
fn each_join_policy_passes_and_fails_as_its_members_decide() {
    // (policy, a truncated fan-out, passes?)
    let cases = [
        ("all-declared", false, false),
        ("all-activated", false, false),
        ("any", false, true),
        ("quorum:2", false, true),
        ("quorum:3", false, false),
    ];
    for (policy, truncate, passes) in cases {
        let f = Fixture::new();
        let plan = join_plan(&f, policy, truncate);
        let (run, doc) = f.run(&plan, &[]);
        if passes {
            assert_eq!(run.code, 0, "{policy}: {doc}");
            assert_eq!(f.count("start after"), 1, "{policy}");
        } else {
            assert_eq!(run.code, 1, "{policy}: {doc}");
            assert_eq!(doc["reason"], "join-failed", "{policy}: {doc}");
            assert_eq!(doc["step"], "joined");
            assert!(
                doc["message"].as_str().unwrap().starts_with("b: "),
                "the failed member named: {doc}"
            );
            assert_eq!(
                f.count("start after"),
                0,
                "{policy}: nothing after a failed join"
            );
            // A failed run keeps its worktrees for a person, and lists them: the three
            // members' (no step ran in the run's own worktree, so it was never made).
            assert_eq!(doc["kept"].as_array().unwrap().len(), 3, "{doc}");
        }
    }
}

#[test]
fn all_activated_passes_a_truncated_fan_out_that_all_declared_fails() {
    let f = Fixture::new();
    let agent = f.agent("ok", "echo \"start $item\" >> \"$LOG\"\necho ok");
    for (policy, code) in [("all-activated", 0), ("all-declared", 1)] {
        let plan = f.plan(&format!(
            "workflow: 1\nname: cut\nagent: \"{agent}\"\nsteps:\n  - id: fan\n    kind: fanout\n    \
             items: [a, b, c]\n    maxFanout: 1\n    truncate: {{ to: 2, reason: two today }}\n    template:\n      \
             prompt: \"Answer. ITEM={{{{item}}}}\"\n  - id: joined\n    kind: join\n    for: fan\n    policy: {policy}\n"
        ));
        let (run, doc) = f.run(&plan, &[]);
        assert_eq!(run.code, code, "{policy}: {doc}");
    }
    // Only the first two items ever ran, in both runs.
    assert_eq!(f.count("start c"), 0);
    assert_eq!(f.count("start a"), 2);
}

#[test]
fn a_failing_gate_redoes_its_route_until_green_and_a_terminal_route_ends_the_run() {
    let f = Fixture::new();
    // Each dispatch writes how many times it was dispatched.
    let agent = f.agent(
        "counter",
        "echo \"start $item\" >> \"$LOG\"\nn=$(grep -c '^start' \"$LOG\")\necho \"$n\" > count.txt\necho wrote",
    );
    f.gates("version: 1\ngates:\n  - id: second\n    command: \"grep -qx 2 count.txt\"\n");
    let plan = |route: &str, redos: u64| {
        f.plan(&format!(
            "workflow: 1\nname: redo\nagent: \"{agent}\"\nsteps:\n  - id: write\n    kind: agent\n    \
             prompt: \"Count. ITEM=write\"\n    deliverable: file\n    writes: [count.txt]\n  - id: check\n    \
             kind: gate\n    needs: [write]\n    gates: [second]\n    failRoute: {route}\n    maxRedos: {redos}\n"
        ))
    };
    let (run, doc) = f.run(&plan("write", 2), &[]);
    assert_eq!(run.code, 0, "{doc}\n{}", run.stderr);
    assert_eq!(f.count("start write"), 2, "one redo, then green");

    std::fs::remove_file(f.path("log")).unwrap();
    // The first dispatch writes 1: red, and the route ends the run there.
    let (run, doc) = f.run(&plan("terminal:gave-up", 0), &[]);
    assert_eq!(run.code, 3, "{doc}");
    assert_eq!(doc["status"], "terminal");
    assert_eq!(doc["step"], "gave-up");
    assert_eq!(f.count("start write"), 1);
}

#[test]
fn the_landed_barrier_catches_an_agent_that_says_done_and_writes_nothing() {
    let f = Fixture::new();
    let agent = f.agent("liar", "echo \"start $item\" >> \"$LOG\"\necho done");
    let plan = f.plan(&format!(
        "workflow: 1\nname: liar\nagent: \"{agent}\"\nsteps:\n  - id: write\n    kind: agent\n    \
         prompt: \"Write REPORT.md. ITEM=write\"\n    deliverable: file\n    writes: [REPORT.md]\n    \
         idempotent: true\n    retry: {{ maxAttempts: 3, on: [timeout, transport, malformed-output, policy-refusal] }}\n"
    ));
    let (run, doc) = f.run(&plan, &[]);
    assert_eq!(run.code, 1, "{doc}");
    assert_eq!(doc["reason"], "deliverable-not-landed", "{doc}");
    assert!(
        doc["message"].as_str().unwrap().contains("REPORT.md"),
        "{doc}"
    );
    // Never retried, whatever the step's retry says.
    assert_eq!(f.count("start write"), 1);
}

fn two_steps(f: &Fixture) -> PathBuf {
    let agent = f.agent(
        "steps",
        "echo \"start $item\" >> \"$LOG\"\nif [ -e \"$DIR/slow\" ]; then sleep 30; fi\necho ok",
    );
    f.plan(&format!(
        "workflow: 1\nname: two\nagent: \"{agent}\"\nsteps:\n  - id: first\n    kind: agent\n    \
         prompt: \"One. ITEM=first\"\n  - id: second\n    kind: agent\n    needs: [first]\n    \
         prompt: \"Two. ITEM=second\"\n"
    ))
}

#[test]
fn a_budget_pauses_before_a_boundary_and_an_extension_resumes_it() {
    let f = Fixture::new();
    let plan = two_steps(&f);
    let (run, doc) = f.run(&plan, &["--budget", "1"]);
    assert_eq!(run.code, 75, "{doc}");
    assert_eq!(doc["status"], "paused");
    assert_eq!(doc["reason"], "budget-exhausted");
    assert_eq!(doc["step"], "second");
    let resume = doc["resume"].as_str().unwrap();
    let id = doc["run"].as_str().unwrap().to_owned();
    assert!(resume.contains(&format!("--resume {id}")), "{resume}");
    assert_eq!(f.count("start second"), 0);

    // More than the run's first budget in one extension is past the cap.
    let (run, doc) = f.run(&plan, &["--resume", &id, "--budget-extra", "2"]);
    assert_eq!(run.code, 4, "{doc}");
    assert_eq!(doc["reason"], "budget-extension-exhausted");

    let (run, doc) = f.run(&plan, &["--resume", &id, "--budget-extra", "1"]);
    assert_eq!(run.code, 0, "{doc}\n{}", run.stderr);
    assert_eq!(
        f.count("start first"),
        1,
        "what finished is not dispatched again"
    );
    assert_eq!(f.count("start second"), 1);
}

#[test]
fn resume_refuses_in_order_foreign_completed_stale_then_an_unavailable_model() {
    let f = Fixture::new();
    let plan = two_steps(&f);
    let (run, doc) = f.run(&plan, &["--resume", "99"]);
    assert_eq!(
        (run.code, doc["reason"].as_str()),
        (4, Some("foreign-run-refused"))
    );

    let (_, done) = f.run(&plan, &[]);
    let completed = done["run"].as_str().unwrap().to_owned();
    let (_, paused) = f.run(&plan, &["--budget", "1"]);
    let paused = paused["run"].as_str().unwrap().to_owned();
    // Every input changed, and the agent no longer answers: each refusal names the first.
    let text = std::fs::read_to_string(&plan).unwrap();
    write_file(&plan, text.replace("Two.", "Two, changed."));
    write_file(&f.path("steps.dead"), "");
    let (run, doc) = f.run(&plan, &["--resume", &completed]);
    assert_eq!(
        (run.code, doc["reason"].as_str()),
        (4, Some("resume-already-completed")),
        "{doc}"
    );
    let (run, doc) = f.run(&plan, &["--resume", &paused]);
    assert_eq!(
        (run.code, doc["reason"].as_str()),
        (4, Some("stale-input-refused")),
        "{doc}"
    );
    write_file(&plan, text);
    let (run, doc) = f.run(&plan, &["--resume", &paused]);
    assert_eq!(
        (run.code, doc["reason"].as_str()),
        (4, Some("resume-model-unavailable")),
        "{doc}"
    );
    std::fs::remove_file(f.path("steps.dead")).unwrap();
    let (run, doc) = f.run(&plan, &["--resume", &paused, "--budget-extra", "1"]);
    assert_eq!(run.code, 0, "{doc}");
}

#[test]
fn a_kill_during_a_fan_out_then_resume_dispatches_no_finished_member_again() {
    let f = Fixture::new();
    // a and b finish at once; c and d wait while `slow` exists, then give up without writing
    // (the attempt the kill cut short: it must not land anything).
    let agent = f.agent(
        "hang",
        "echo \"start $item\" >> \"$LOG\"\ncase $item in c|d) if [ -e \"$DIR/slow\" ]; then echo \"waiting $item\" >> \"$LOG\"; \
         n=0; while [ -e \"$DIR/slow\" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done; echo \"gone $item\" >> \"$LOG\"; exit 1; fi;; esac\n\
         mkdir -p out\necho \"$item\" > \"out/$item.txt\"\necho \"end $item\" >> \"$LOG\"\necho done",
    );
    write_file(&f.path("slow"), "");
    let plan = f.plan(&format!(
        "workflow: 1\nname: kill\nagent: \"{agent}\"\nsteps:\n  - id: fix\n    kind: fanout\n    \
         items: [a, b, c, d]\n    maxFanout: 2\n    template:\n      prompt: \"Fix. ITEM={{{{item}}}}\"\n      \
         deliverable: file\n      writes: [\"out/{{{{item}}}}.txt\"]\n  - id: fixed\n    kind: join\n    for: fix\n    \
         policy: all-declared\n"
    ));
    let mut child = f
        .repo
        .command(f.args(&plan, &["--run-id", "7"]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let waited = |what: &str, n: usize| {
        let started = Instant::now();
        while f.log().iter().filter(|l| l.starts_with(what)).count() < n {
            assert!(started.elapsed() < Duration::from_secs(60), "{:?}", f.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    waited("waiting ", 2);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The killed run's agents outlive it (their own process groups); let them go.
    std::fs::remove_file(f.path("slow")).unwrap();
    waited("gone ", 2);
    assert_eq!((f.count("end a"), f.count("end b")), (1, 1));

    let (run, doc) = f.run(&plan, &["--resume", "7"]);
    assert_eq!(run.code, 0, "{doc}\n{}", run.stderr);
    assert_eq!(
        f.count("start a"),
        1,
        "a finished before the kill: {:?}",
        f.log()
    );
    assert_eq!(f.count("start b"), 1, "b finished before the kill");
    // In flight at the kill, never settled: dispatched again.
    assert_eq!(f.count("start c"), 2);
    assert_eq!(f.count("start d"), 2);
    assert_eq!(f.worktrees(), 1);
}

#[test]
fn a_resume_whose_finished_members_worktree_is_gone_is_refused_by_name_and_remakes_nothing() {
    let f = Fixture::new();
    // a finishes; b hangs while `slow` exists (the kill comes then).
    let agent = f.agent(
        "hang",
        "echo \"start $item\" >> \"$LOG\"\nif [ $item = b ] && [ -e \"$DIR/slow\" ]; then echo \"waiting $item\" >> \"$LOG\"; \
         n=0; while [ -e \"$DIR/slow\" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done; exit 1; fi\n\
         mkdir -p out\necho \"$item\" > \"out/$item.txt\"\necho \"end $item\" >> \"$LOG\"\necho done",
    );
    write_file(&f.path("slow"), "");
    let plan = f.plan(&format!(
        "workflow: 1\nname: lost\nagent: \"{agent}\"\nsteps:\n  - id: fix\n    kind: fanout\n    \
         items: [a, b]\n    maxFanout: 2\n    template:\n      prompt: \"Fix. ITEM={{{{item}}}}\"\n      \
         deliverable: file\n      writes: [\"out/{{{{item}}}}.txt\"]\n  - id: fixed\n    kind: join\n    for: fix\n    \
         policy: all-declared\n"
    ));
    let mut child = f
        .repo
        .command(f.args(&plan, &["--run-id", "3"]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !(f.count("end a") == 1 && f.count("waiting b") == 1) {
        assert!(started.elapsed() < Duration::from_secs(60), "{:?}", f.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    std::fs::remove_file(f.path("slow")).unwrap();
    // a's worktree, with its finished work, is removed by hand.
    let lost = f.repo.path().join(".git/greenlight/workflows/wf-3/fix--a");
    assert!(
        lost.join("out/a.txt").exists(),
        "a's work was in {}",
        lost.display()
    );
    std::fs::remove_dir_all(&lost).unwrap();

    let (run, doc) = f.run(&plan, &["--resume", "3"]);
    assert_eq!(run.code, 4, "{doc}\n{}", run.stderr);
    assert_eq!(doc["status"], "refused", "{doc}");
    assert_eq!(doc["reason"], "stale-input-refused", "{doc}");
    let message = doc["message"].as_str().unwrap();
    assert!(
        message.contains("`fix` [a]") && message.contains(&lost.display().to_string()),
        "{message}"
    );
    assert!(!lost.exists(), "not remade from the base");
    assert_eq!(
        f.count("start a"),
        1,
        "a is not dispatched again: {:?}",
        f.log()
    );
}

#[test]
fn an_agent_that_edits_verify_yaml_in_its_worktree_is_still_judged_by_the_base_gates() {
    let f = Fixture::new();
    let agent = f.agent(
        "cheat",
        "echo \"start $item\" >> \"$LOG\"\nmkdir -p .greenlight\n\
         printf 'version: 1\\ngates:\\n  - id: test\\n    command: \"true\"\\n' > .greenlight/verify.yaml\n\
         echo work > work.txt\necho done",
    );
    f.gates("version: 1\ngates:\n  - id: test\n    command: \"test -f never-written\"\n");
    let plan = f.plan(&format!(
        "workflow: 1\nname: cheat\nagent: \"{agent}\"\nsteps:\n  - id: work\n    kind: agent\n    \
         prompt: \"Work. ITEM=work\"\n    deliverable: file\n    writes: [work.txt, .greenlight/verify.yaml]\n  \
         - id: judge\n    kind: gate\n    needs: [work]\n    gates: [test]\n"
    ));
    let (run, doc) = f.run(&plan, &[]);
    assert_eq!(run.code, 1, "{doc}");
    assert_eq!(doc["reason"], "gate-failed", "{doc}");
    // The agent's edit is there, in the kept worktree, and changed nothing.
    let kept = doc["kept"][0]["path"].as_str().unwrap();
    let edited = std::fs::read_to_string(Path::new(kept).join(".greenlight/verify.yaml")).unwrap();
    assert!(edited.contains("true"), "{edited}");
}

#[test]
fn a_pause_request_is_honoured_at_the_next_boundary_and_the_run_resumes() {
    let f = Fixture::new();
    let agent = f.agent(
        "waiter",
        "echo \"start $item\" >> \"$LOG\"\nn=0\nwhile [ ! -e \"$DIR/go\" ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done\necho ok",
    );
    let plan = f.plan(&format!(
        "workflow: 1\nname: pausing\nagent: \"{agent}\"\nsteps:\n  - id: first\n    kind: agent\n    \
         prompt: \"One. ITEM=first\"\n  - id: second\n    kind: agent\n    needs: [first]\n    \
         prompt: \"Two. ITEM=second\"\n"
    ));
    let child = f
        .repo
        .command(f.args(&plan, &["--run-id", "3"]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while f.count("start first") == 0 {
        assert!(started.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(50));
    }
    let state = f.path("state.db").display().to_string();
    let asked = f
        .repo
        .greenlight(["workflow", "pause", "3", "--state", &state]);
    assert_eq!(asked.code, 0, "{}{}", asked.stdout, asked.stderr);
    write_file(&f.path("go"), "");
    let out = child.wait_with_output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(75), "{doc}");
    assert_eq!(doc["reason"], "paused-by-user", "{doc}");
    assert_eq!(
        doc["step"], "second",
        "paused before the next boundary: {doc}"
    );
    assert_eq!(f.count("start second"), 0);

    let (run, doc) = f.run(&plan, &["--resume", "3"]);
    assert_eq!(run.code, 0, "{doc}");
    assert_eq!((f.count("start first"), f.count("start second")), (1, 1));
}

#[test]
fn a_spent_wall_clock_pauses_before_the_next_boundary_and_an_extension_carries_on() {
    let f = Fixture::new();
    let agent = f.agent(
        "slowfirst",
        "echo \"start $item\" >> \"$LOG\"\nif [ \"$item\" = first ]; then sleep 2.5; fi\necho ok",
    );
    let plan = f.plan(&format!(
        "workflow: 1\nname: clock\nagent: \"{agent}\"\nsteps:\n  - id: first\n    kind: agent\n    \
         prompt: \"One. ITEM=first\"\n  - id: second\n    kind: agent\n    needs: [first]\n    \
         prompt: \"Two. ITEM=second\"\n"
    ));
    let (run, doc) = f.run(&plan, &["--max-wall-clock", "2s"]);
    assert_eq!(run.code, 75, "{doc}");
    assert_eq!(doc["reason"], "budget-exhausted");
    assert_eq!(doc["step"], "second");
    assert!(
        doc["message"].as_str().unwrap().contains("wall clock"),
        "{doc}"
    );
    let id = doc["run"].as_str().unwrap().to_owned();
    let (run, doc) = f.run(&plan, &["--resume", &id, "--wall-clock-extra", "2s"]);
    assert_eq!(run.code, 0, "{doc}");
    assert_eq!((f.count("start first"), f.count("start second")), (1, 1));
}

#[test]
fn members_that_passed_are_landed_onto_the_target_one_at_a_time() {
    let f = Fixture::new();
    let agent = f.agent("lander", WORKER);
    let plan = f.plan(&format!(
        "workflow: 1\nname: landing\nagent: \"{agent}\"\nsteps:\n  - id: fix\n    kind: fanout\n    \
         items: [a, b]\n    maxFanout: 2\n    template:\n      prompt: \"Fix. ITEM={{{{item}}}}\"\n      \
         deliverable: file\n      writes: [\"out/{{{{item}}}}.txt\"]\n  - id: fixed\n    kind: join\n    for: fix\n    \
         policy: all-declared\n  - id: ship\n    kind: land\n    needs: [fixed]\n    for: fix\n    target: main\n"
    ));
    let before = f.repo.git(&["rev-parse", "main"]);
    let (run, doc) = f.run(&plan, &[]);
    assert_eq!(run.code, 0, "{doc}\n{}", run.stderr);
    assert_ne!(f.repo.git(&["rev-parse", "main"]), before);
    let tree = f.repo.git(&["ls-tree", "-r", "--name-only", "main"]);
    assert!(
        tree.contains("out/a.txt") && tree.contains("out/b.txt"),
        "{tree}"
    );
    // The primary checkout on main was brought along.
    assert!(f.repo.path().join("out/b.txt").exists());
    assert_eq!(f.worktrees(), 1);
}

#[test]
fn a_verdict_gate_passes_on_gate_pass_and_fails_on_gate_fail_or_no_verdict() {
    let f = Fixture::new();
    let worker = f.agent("work", "echo \"start $item\" >> \"$LOG\"\necho ok");
    let judge = f.agent(
        "judge",
        "echo \"start $item\" >> \"$LOG\"\nprintf 'I read it.\\n%s\\n' \"$(cat \"$DIR/verdict\")\"",
    );
    let plan = f.plan(&format!(
        "workflow: 1\nname: verdict\nagent: \"{worker}\"\nsteps:\n  - id: work\n    kind: agent\n    \
         prompt: \"Work. ITEM=work\"\n  - id: judged\n    kind: gate\n    needs: [work]\n    \
         verdict: {{ prompt: \"Judge. ITEM=judge\", agent: \"{judge}\" }}\n"
    ));
    for (verdict, code, reason) in [
        ("GATE: PASS", 0, None),
        ("GATE: FAIL", 1, Some("gate-failed")),
        ("looks good to me", 1, Some("gate-failed")),
    ] {
        write_file(&f.path("verdict"), verdict);
        let (run, doc) = f.run(&plan, &[]);
        assert_eq!(run.code, code, "{verdict}: {doc}");
        assert_eq!(doc["reason"].as_str(), reason, "{verdict}: {doc}");
        if verdict == "looks good to me" {
            let message = doc["message"].as_str().unwrap();
            assert!(message.contains("gate-verdict-unparseable"), "{message}");
        }
    }
    assert_eq!(f.count("start judge"), 3);
}

#[test]
fn a_declared_write_through_a_symlink_out_of_the_tree_is_refused_before_anything_runs() {
    let f = Fixture::new();
    std::os::unix::fs::symlink(f.dir.path(), f.repo.path().join("escape")).unwrap();
    f.repo.commit_all("a link out of the tree");
    let agent = f.agent("never", "echo \"start $item\" >> \"$LOG\"\necho ok");
    let plan = f.plan(&format!(
        "workflow: 1\nname: escape\nagent: \"{agent}\"\nsteps:\n  - id: write\n    kind: agent\n    \
         prompt: \"Write. ITEM=write\"\n    deliverable: file\n    writes: [escape/stolen.txt]\n"
    ));
    let (run, doc) = f.run(&plan, &[]);
    assert_eq!(run.code, 2, "{doc}");
    let message = doc["message"].as_str().unwrap();
    assert!(
        message.contains("escape/stolen.txt") && message.contains("outside the root"),
        "{message}"
    );
    assert!(f.log().is_empty(), "nothing was dispatched");
}

#[test]
fn a_gate_of_one_fan_out_does_not_end_the_agents_of_another_still_running() {
    let f = Fixture::new();
    let agent = f.agent(
        "mixed",
        "echo \"start $item\" >> \"$LOG\"\ncase $item in slow*) sleep 1.5;; esac\nmkdir -p out\n\
         echo \"$item\" > \"out/$item.txt\"\necho \"end $item\" >> \"$LOG\"\necho done",
    );
    f.gates("version: 1\ngates:\n  - id: quick\n    command: \"test -s out/fast.txt\"\n");
    let plan = f.plan(&format!(
        "workflow: 1\nname: overlap\nagent: \"{agent}\"\nsteps:\n  - id: a\n    kind: fanout\n    \
         items: [fast]\n    maxFanout: 1\n    template:\n      prompt: \"A. ITEM={{{{item}}}}\"\n      \
         deliverable: file\n      writes: [\"out/{{{{item}}}}.txt\"]\n  - id: a-done\n    kind: join\n    for: a\n    \
         policy: all-declared\n  - id: a-gate\n    kind: gate\n    needs: [a-done]\n    gates: [quick]\n  \
         - id: b\n    kind: fanout\n    items: [slow1, slow2]\n    maxFanout: 2\n    template:\n      \
         prompt: \"B. ITEM={{{{item}}}}\"\n      deliverable: file\n      writes: [\"out/{{{{item}}}}.txt\"]\n  \
         - id: b-done\n    kind: join\n    for: b\n    policy: all-declared\n"
    ));
    let (run, doc) = f.run(&plan, &[]);
    assert_eq!(run.code, 0, "{doc}\n{:?}", f.log());
    assert_eq!(
        (f.count("end slow1"), f.count("end slow2")),
        (1, 1),
        "{:?}",
        f.log()
    );
}

#[test]
fn sigterm_ends_the_agents_and_says_how_to_resume_and_the_resume_finishes_the_run() {
    let f = Fixture::new();
    let plan = two_steps(&f);
    write_file(&f.path("slow"), "");
    let child = f
        .repo
        .command(f.args(&plan, &["--run-id", "5"]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while f.count("start first") == 0 {
        assert!(started.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(50));
    }
    let run = greenlight_testkit::signal_and_wait(child, "-TERM", Duration::from_secs(20));
    assert_eq!(run.code, 143, "{}{}", run.stdout, run.stderr);
    let doc: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(doc["status"], "interrupted", "{doc}");
    assert!(
        doc["resume"].as_str().unwrap().contains("--resume 5"),
        "{doc}"
    );
    std::fs::remove_file(f.path("slow")).unwrap();
    let (run, doc) = f.run(&plan, &["--resume", "5"]);
    assert_eq!(run.code, 0, "{doc}");
    // The interrupted dispatch never settled: it ran again, once.
    assert_eq!((f.count("start first"), f.count("start second")), (2, 1));
}

/// Whether `pid` (read from a file an agent or gate wrote) is a live process.
fn alive_from(f: &Fixture, file: &str) -> (i32, bool) {
    let pid: i32 = std::fs::read_to_string(f.path(file))
        .unwrap_or_else(|e| panic!("{file}: {e}; log: {:?}", f.log()))
        .trim()
        .parse()
        .unwrap();
    (pid, greenlight_testkit::fake_agent::pid_alive(pid))
}

/// A gate ends only what is provably its own while another step's agent runs: the agent's
/// descendant that left its group and dropped its environment (so nothing marks it as the
/// agent's) outlives the gate and is ended by the run's end; the gate's own escapee (its token
/// kept) is ended by the gate. The gate runs while the agent is still running.
#[test]
fn a_gate_beside_a_running_agent_spares_its_escapee_and_the_run_end_ends_it() {
    let f = Fixture::new();
    let dir = f.dir.path().display().to_string();
    let agent = f.agent(
        "beside",
        "alive() { s=$(cut -d' ' -f3 \"/proc/$1/stat\" 2>/dev/null); [ -n \"$s\" ] && [ \"$s\" != Z ]; }\n\
         case $item in\n\
         long)\n  echo \"start long\" >> \"$LOG\"\n  setsid env -i sleep 40 >/dev/null 2>&1 &\n  \
         echo $! > \"$DIR/agent-escapee\"\n  i=0\n  \
         while [ ! -e \"$DIR/checked\" ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done\n  \
         if [ -e \"$DIR/checked\" ]; then echo \"overlapped\" >> \"$LOG\"; fi\n  \
         mkdir -p out; echo long > out/long.txt;;\n\
         check)\n  \
         if alive \"$(cat \"$DIR/agent-escapee\")\"; then echo \"agent escapee alive\" >> \"$LOG\"; fi\n  \
         if alive \"$(cat \"$DIR/gate-escapee\")\"; then echo \"gate escapee alive\" >> \"$LOG\"; fi\n  \
         touch \"$DIR/checked\";;\n\
         esac\necho done",
    );
    f.gates(&format!(
        "version: 1\ngates:\n  - id: escapes\n    command: \"setsid sleep 40 >/dev/null 2>&1 & echo $! > {dir}/gate-escapee\"\n"
    ));
    let plan = f.plan(&format!(
        "workflow: 1\nname: beside\nagent: \"{agent}\"\nsteps:\n  - id: work\n    kind: fanout\n    \
         items: [long]\n    maxFanout: 1\n    template:\n      prompt: \"Work. ITEM={{{{item}}}}\"\n  \
         - id: worked\n    kind: join\n    for: work\n    policy: all-declared\n  \
         - id: judged\n    kind: gate\n    gates: [escapes]\n  \
         - id: look\n    kind: agent\n    needs: [judged]\n    prompt: \"Look. ITEM=check\"\n"
    ));
    let (run, doc) = f.run(&plan, &[]);
    assert_eq!(run.code, 0, "{doc}\n{}", run.stderr);
    let log = f.log();
    assert!(
        log.contains(&"overlapped".to_owned()),
        "the gate waited for the agent: {log:?}"
    );
    assert!(
        log.contains(&"agent escapee alive".to_owned()),
        "the gate ended another step's agent's escapee: {log:?}"
    );
    assert!(
        !log.contains(&"gate escapee alive".to_owned()),
        "the gate's own escapee outlived it: {log:?}"
    );
    let (pid, alive) = alive_from(&f, "agent-escapee");
    assert!(!alive, "the agent's escapee {pid} outlived the run");
    let (pid, alive) = alive_from(&f, "gate-escapee");
    assert!(!alive, "the gate's escapee {pid} outlived the run");
    assert_eq!(f.worktrees(), 1, "no worktree outlives the run");
}

/// Three steps one after another: two by the fake `claude` (which reports usage and cost), the
/// last by a `command:` agent (which reports neither), under `budget`.
fn usage_plan(f: &Fixture, budget: &str) -> PathBuf {
    let quiet = f.agent("quiet", "echo \"start $item\" >> \"$LOG\"\necho ok");
    f.plan(&format!(
        "workflow: 1\nname: spend\nagent: claude\nbudget:\n  {budget}\nsteps:\n  - id: first\n    kind: agent\n    \
         prompt: \"One.\"\n  - id: second\n    kind: agent\n    needs: [first]\n    prompt: \"Two.\"\n  \
         - id: third\n    kind: agent\n    needs: [second]\n    agent: \"{quiet}\"\n    prompt: \"Three. ITEM=third\"\n"
    ))
}

/// `PATH` with the fake agent's directory first.
fn with_fake(fake: &FakeAgent) -> std::ffi::OsString {
    let mut path = std::ffi::OsString::from(fake.dir());
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    path
}

impl Fixture {
    fn run_with_path(&self, plan: &Path, extra: &[&str], path: &std::ffi::OsStr) -> (Run, Value) {
        let run = self
            .repo
            .cli(self.args(plan, extra))
            .env("PATH", path)
            .within(Duration::from_secs(120))
            .run();
        let doc: Value = serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "stdout is one JSON object ({e}): {}\nstderr: {}",
                run.stdout, run.stderr
            )
        });
        (run, doc)
    }

    /// `workflow log ID --json`'s ledger.
    fn ledger(&self, id: &str) -> Vec<Value> {
        let state = self.path("state.db").display().to_string();
        let run = self
            .repo
            .cli(["workflow", "log", id, "--json", "--state", &state])
            .run();
        assert_eq!(run.code, 0, "{}", run.stderr);
        let doc: Value = serde_json::from_str(run.stdout.trim()).unwrap();
        doc["dispatches"].as_array().unwrap().clone()
    }
}

/// Spend caps over reported usage: a run that reached its cap pauses before the next boundary
/// (never inside one), says which cap, and a resume that extends that cap carries on; the
/// ledger holds what each agent reported, and nothing (not 0) for an agent that reported none.
#[test]
#[ignore = "needs python3: run scripts/test"]
fn a_token_cap_and_a_cost_cap_pause_before_the_next_boundary_and_an_extension_resumes() {
    for (budget, cap_words, extension) in [
        ("tokens: 20", "reported tokens", ["--tokens-extra", "20"]),
        ("costUsd: 0.02", "reported cost", ["--cost-extra", "0.02"]),
    ] {
        let f = Fixture::new();
        let fake = FakeAgent::install(FakeCli::Claude, Scenario::Ok).unwrap();
        let path = with_fake(&fake);
        let plan = usage_plan(&f, budget);
        let (run, doc) = f.run_with_path(&plan, &[], &path);
        assert_eq!(run.code, 75, "{budget}: {doc}\n{}", run.stderr);
        assert_eq!(doc["status"], "paused", "{doc}");
        assert_eq!(doc["reason"], "budget-exhausted", "{doc}");
        assert_eq!(
            doc["step"], "third",
            "{budget}: the first claude step stays under the cap: {doc}"
        );
        assert!(
            doc["message"].as_str().unwrap().contains(cap_words),
            "{doc}"
        );
        assert_eq!(f.count("start third"), 0);
        let id = doc["run"].as_str().unwrap().to_owned();

        // Resuming without more room pauses again at once, before the same boundary.
        let (run, doc) = f.run_with_path(&plan, &["--resume", &id], &path);
        assert_eq!(
            (run.code, doc["step"].as_str()),
            (75, Some("third")),
            "{doc}"
        );
        // More than the first cap in one extension, or a cap the plan does not set, is refused.
        let tokens = budget.starts_with("tokens");
        let too_much = [extension[0], if tokens { "21" } else { "0.03" }];
        let not_set = if tokens {
            ["--cost-extra", "0.01"]
        } else {
            ["--tokens-extra", "5"]
        };
        for refused in [too_much, not_set] {
            let mut args = vec!["--resume", id.as_str()];
            args.extend(refused);
            let (run, doc) = f.run_with_path(&plan, &args, &path);
            assert_eq!(run.code, 4, "{refused:?}: {doc}");
            assert_eq!(doc["reason"], "budget-extension-exhausted", "{doc}");
        }

        let mut resume = vec!["--resume", id.as_str()];
        resume.extend(extension);
        let (run, doc) = f.run_with_path(&plan, &resume, &path);
        assert_eq!(run.code, 0, "{budget}: {doc}\n{}", run.stderr);
        assert_eq!(f.count("start third"), 1);
        let dispatched = fake
            .invocations()
            .iter()
            .filter(|i| !i.stdin.contains("Reply with exactly: OK"))
            .count();
        assert_eq!(dispatched, 2, "each claude step once, none again");

        let ledger = f.ledger(&id);
        let steps: Vec<&str> = ledger.iter().map(|r| r["step"].as_str().unwrap()).collect();
        assert_eq!(steps, ["first", "second", "third"]);
        for row in &ledger[..2] {
            assert!(row["tokens_in"].as_u64().unwrap() > 0, "{row}");
            assert!(row["tokens_out"].as_u64().unwrap() > 0, "{row}");
            assert_eq!(row["cost_usd"].as_f64(), Some(0.0123), "{row}");
        }
        for key in ["tokens_in", "tokens_out", "cost_usd"] {
            assert_eq!(ledger[2][key], Value::Null, "{key}: {}", ledger[2]);
        }
    }
}

/// A land step onto `target` of two members that each write their own file.
fn land_plan(f: &Fixture, target: &str, gates: &str) -> PathBuf {
    let agent = f.agent("lander", WORKER);
    f.plan(&format!(
        "workflow: 1\nname: landing\nagent: \"{agent}\"\nsteps:\n  - id: fix\n    kind: fanout\n    \
         items: [a, b]\n    maxFanout: 2\n    template:\n      prompt: \"Fix. ITEM={{{{item}}}}\"\n      \
         deliverable: file\n      writes: [\"out/{{{{item}}}}.txt\"]\n  - id: fixed\n    kind: join\n    for: fix\n    \
         policy: all-declared\n  - id: ship\n    kind: land\n    needs: [fixed]\n    for: fix\n    target: {target}\n{gates}"
    ))
}

/// A landing that errors (here: its target names no commit) is no verdict on the member: the
/// run ends with the error exit code and a message naming the member, the step and the error,
/// records no landing, and a resume once the target exists lands both members.
#[test]
fn a_land_that_errors_records_no_verdict_and_a_resume_lands_the_member() {
    let f = Fixture::new();
    let plan = land_plan(&f, "release", "");
    let (run, doc) = f.run(&plan, &["--run-id", "7"]);
    assert_eq!(run.code, 5, "{doc}\n{}", run.stderr);
    assert_eq!(doc["status"], "error", "{doc}");
    let message = doc["message"].as_str().unwrap();
    for word in ["`ship`", "`a`", "release", "--resume 7"] {
        assert!(message.contains(word), "{word} in {message}");
    }
    let state = f.path("state.db").display().to_string();
    let log = f
        .repo
        .cli(["workflow", "log", "7", "--state", &state])
        .run();
    assert!(!log.stdout.contains("land-target-busy"), "{}", log.stdout);
    assert!(!log.stdout.contains("land-ended"), "{}", log.stdout);

    f.repo.git(&["branch", "release", "main"]);
    let (run, doc) = f.run(&plan, &["--resume", "7"]);
    assert_eq!(run.code, 0, "{doc}\n{}", run.stderr);
    let tree = f.repo.git(&["ls-tree", "-r", "--name-only", "release"]);
    assert!(
        tree.contains("out/a.txt") && tree.contains("out/b.txt"),
        "{tree}"
    );
    assert_eq!(
        (f.count("start a"), f.count("start b")),
        (1, 1),
        "no member dispatched again"
    );
    assert_eq!(f.worktrees(), 1);
}

/// A landing cut short by a signal records nothing for its member: the run stops interrupted
/// and a resume lands it.
#[test]
fn an_interrupted_land_records_nothing_and_a_resume_lands_the_member() {
    let f = Fixture::new();
    let dir = f.dir.path().display().to_string();
    f.gates(&format!(
        "version: 1\ngates:\n  - id: slow\n    command: \"touch {dir}/landing; if [ -e {dir}/slow ]; then sleep 30; fi\"\n"
    ));
    f.repo.commit_all("the landing gate");
    let plan = land_plan(&f, "main", "    gates: [slow]\n");
    write_file(&f.path("slow"), "");
    let child = f
        .repo
        .command(f.args(&plan, &["--run-id", "8"]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !f.path("landing").exists() {
        assert!(started.elapsed() < Duration::from_secs(60), "{:?}", f.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let run = greenlight_testkit::signal_and_wait(child, "-TERM", Duration::from_secs(20));
    assert_eq!(run.code, 143, "{}{}", run.stdout, run.stderr);
    let state = f.path("state.db").display().to_string();
    let log = f
        .repo
        .cli(["workflow", "log", "8", "--state", &state])
        .run();
    assert!(!log.stdout.contains("land-ended"), "{}", log.stdout);

    std::fs::remove_file(f.path("slow")).unwrap();
    let (run, doc) = f.run(&plan, &["--resume", "8"]);
    assert_eq!(run.code, 0, "{doc}\n{}", run.stderr);
    let tree = f.repo.git(&["ls-tree", "-r", "--name-only", "main"]);
    assert!(
        tree.contains("out/a.txt") && tree.contains("out/b.txt"),
        "{tree}"
    );
    assert_eq!(f.worktrees(), 1);
}

/// The run's end sweeps whichever way the run ends: here its gate fails (no fail route), the
/// run fails, and still no escapee of an agent or of the gate outlives it.
#[test]
fn a_failed_run_still_ends_what_its_agents_and_gates_left() {
    let f = Fixture::new();
    let dir = f.dir.path().display().to_string();
    let agent = f.agent(
        "leaver",
        "setsid env -i sleep 40 >/dev/null 2>&1 &\necho $! > \"$DIR/agent-escapee\"\n\
         i=0\nwhile [ ! -e \"$DIR/gated\" ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done\necho done",
    );
    f.gates(&format!(
        "version: 1\ngates:\n  - id: red\n    command: \"setsid env -i sleep 40 >/dev/null 2>&1 & echo $! > {dir}/gate-escapee; touch {dir}/gated; exit 1\"\n"
    ));
    let plan = f.plan(&format!(
        "workflow: 1\nname: leaves\nagent: \"{agent}\"\nsteps:\n  - id: work\n    kind: fanout\n    \
         items: [one]\n    maxFanout: 1\n    template:\n      prompt: \"Work. ITEM={{{{item}}}}\"\n  \
         - id: worked\n    kind: join\n    for: work\n    policy: all-declared\n  \
         - id: judged\n    kind: gate\n    gates: [red]\n"
    ));
    let (run, doc) = f.run(&plan, &[]);
    assert_eq!(run.code, 1, "{doc}\n{}", run.stderr);
    assert_eq!(doc["reason"], "gate-failed", "{doc}");
    for file in ["agent-escapee", "gate-escapee"] {
        let (pid, alive) = alive_from(&f, file);
        assert!(!alive, "{file} {pid} outlived the failed run");
    }
}

/// The merge queue through the binary: of four members that each passed on their own, `b`
/// conflicts with `a` (both write `shared.txt`), and `d` is green alone but red merged after `c`
/// (the target's gate fails when both files are there). `a` and `c` land, in item order; `b` and
/// `d` stop with their reasons, kept for a person, and neither blocks the member after it.
#[test]
fn land_stops_a_conflicting_and_a_red_after_merge_member_and_lands_the_others() {
    let f = Fixture::new();
    f.gates(
        "version: 1\ngates:\n  - id: apart\n    command: \"! { test -f out/c.txt && test -f out/d.txt; }\"\n",
    );
    f.repo.git(&["add", "-A"]);
    f.repo
        .git(&["commit", "-q", "-m", "the gate that judges landings"]);
    let before = f.repo.git(&["rev-parse", "main"]);
    let agent = f.agent(
        "lander",
        "mkdir -p out\necho \"$item\" > \"out/$item.txt\"\n\
         case $item in a|b) echo \"$item\" > shared.txt ;; esac\necho done",
    );
    let plan = f.plan(&format!(
        "workflow: 1\nname: queue\nagent: \"{agent}\"\nsteps:\n  - id: fix\n    kind: fanout\n    \
         items: [a, b, c, d]\n    maxFanout: 4\n    template:\n      prompt: \"Fix. ITEM={{{{item}}}}\"\n      \
         deliverable: file\n      writes: [\"out/{{{{item}}}}.txt\"]\n  - id: fixed\n    kind: join\n    for: fix\n    \
         policy: all-declared\n  - id: ship\n    kind: land\n    needs: [fixed]\n    for: fix\n    target: main\n    \
         gates: [apart]\n"
    ));
    let (run, doc) = f.run(&plan, &["--run-id", "3"]);
    assert_ne!(
        run.code, 0,
        "two members did not land: {doc}\n{}",
        run.stderr
    );

    let tree = f.repo.git(&["ls-tree", "-r", "--name-only", "main"]);
    let landed: Vec<&str> = ["a", "b", "c", "d"]
        .into_iter()
        .filter(|item| tree.lines().any(|l| l == format!("out/{item}.txt")))
        .collect();
    assert_eq!(landed, ["a", "c"], "{tree}");
    assert_eq!(
        f.repo.git(&["show", "main:shared.txt"]).trim(),
        "a",
        "the first member's side stands"
    );
    // Two landings, one merge commit each, onto the tip the run started from.
    let merges = f
        .repo
        .git(&["rev-list", "--merges", &format!("{}..main", before.trim())]);
    assert_eq!(merges.lines().count(), 2, "{merges}");

    let state = f.path("state.db").display().to_string();
    let log = f
        .repo
        .cli(["workflow", "log", "3", "--json", "--state", &state])
        .run();
    assert_eq!(log.code, 0, "{}", log.stderr);
    let text = log.stdout;
    assert!(text.contains("land-conflict"), "{text}");
    assert!(
        text.contains("shared.txt"),
        "the conflict names its file: {text}"
    );
    assert!(text.contains("land-red"), "{text}");
    assert!(
        text.contains("apart"),
        "the red landing names its gate: {text}"
    );
    // The members that did not land keep their branches for a person.
    let branches = f.repo.git(&["branch", "--list", "greenlight/wf-3/*"]);
    for item in ["b", "d"] {
        assert!(
            branches
                .lines()
                .any(|l| l.trim().ends_with(&format!("/{item}"))),
            "{item} kept: {branches}"
        );
    }
}
