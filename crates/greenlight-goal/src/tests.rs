//! The engine inside its crate: a fake [`Dispatcher`] (the real trait, scripted per call), a
//! real SQLite store in a temp dir, a real git worktree and real gate processes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test that cannot set up should stop loudly

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use greenlight_agent::{
    BoxFuture, DispatchRequest, DispatchResult, Dispatcher, Family, Outcome, ProbeOutcome, Reason,
};
use greenlight_store::{AgentSpec, DispatchStep, GoalId, GoalState, NewGoal, Reads, Store};

use crate::engine::{Engine, Finish, Settings};
use crate::progress::Progress;

/// What the fake does on one call: write files into the worktree, then answer (or fail).
type Script = dyn Fn(&DispatchRequest, usize) -> DispatchResult + Send + Sync;

/// A scripted agent behind the real `Dispatcher` trait; it records every request it gets.
struct FakeAgent {
    script: Box<Script>,
    answers_probe: bool,
    requests: Mutex<Vec<DispatchRequest>>,
}

impl Dispatcher for FakeAgent {
    fn family(&self) -> Family {
        Family::Command
    }

    fn probe<'a>(&'a self, candidates: &'a [String]) -> BoxFuture<'a, ProbeOutcome> {
        let id = candidates.first().cloned().filter(|_| self.answers_probe);
        Box::pin(async move {
            ProbeOutcome {
                failure: id.is_none().then(|| greenlight_agent::DispatchFailure {
                    reason: Reason::ProbeFailed,
                    detail: "no answer".into(),
                }),
                detail: "probed".into(),
                wall_ms: 1,
                id,
            }
        })
    }

    fn dispatch_observed<'a>(
        &'a self,
        request: &'a DispatchRequest,
        _activity: &'a dyn greenlight_agent::ActivitySink,
    ) -> BoxFuture<'a, DispatchResult> {
        let mut requests = self.requests.lock().unwrap();
        let n = requests.len();
        requests.push(request.clone());
        drop(requests);
        let result = (self.script)(request, n);
        Box::pin(async move { result })
    }
}

fn reply(text: &str) -> DispatchResult {
    let mut r = DispatchResult::failed(
        Outcome::Ok,
        Family::Command,
        "m",
        5,
        Reason::DispatchDead,
        "",
    );
    r.failure = None;
    r.text = Some(text.to_owned());
    r.exit_code = Some(0);
    r
}

fn dead() -> DispatchResult {
    DispatchResult::failed(
        Outcome::Null,
        Family::Command,
        "m",
        5,
        Reason::DispatchDead,
        "exited 1",
    )
}

/// The gate runner treats every child of this process as the running gate's (the goal loop
/// runs one thing at a time) and ends leftovers: a `git` another test thread spawned meanwhile
/// would be killed as one. So these tests run one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

struct Fixture {
    _serial: std::sync::MutexGuard<'static, ()>,
    dir: tempfile::TempDir,
    store: Store,
}

impl Fixture {
    /// A git worktree whose `value.txt` says `bad`, and a store beside it.
    fn new() -> Self {
        let serial = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = tempfile::tempdir().unwrap();
        let wt = dir.path().join("wt");
        std::fs::create_dir(&wt).unwrap();
        std::fs::write(wt.join("value.txt"), "bad\n").unwrap();
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .arg("-C")
                .arg(&wt)
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t.invalid",
                    "-c",
                    "commit.gpgsign=false",
                ])
                .args(args)
                .env_remove("GIT_DIR")
                .env_remove("GIT_WORK_TREE")
                .env_remove("GIT_INDEX_FILE")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        git(&["init", "-q"]);
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "bad value"]);
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        Self {
            _serial: serial,
            dir,
            store,
        }
    }

    fn worktree(&self) -> PathBuf {
        self.dir.path().join("wt").canonicalize().unwrap()
    }

    fn goal(&mut self, judge: Option<&str>, retries: u32) -> GoalId {
        let new = NewGoal {
            worktree: self.worktree(),
            text: "make value.txt say good".into(),
            agent: AgentSpec {
                family: "command".into(),
                model: Some("m".into()),
                argv_template: Some(vec!["fake".into()]),
            },
            judge: judge.map(str::to_owned),
            max_turns: 5,
            retries,
            gate_timeout_sec: 30,
            gates: vec![
                "grep -q good value.txt || { echo \"got $(cat value.txt)\"; exit 1; }".into(),
            ],
        };
        self.store.write(|tx| tx.create_goal(&new)).unwrap()
    }

    fn settings(&self, agent: FakeAgent, judge: Option<&str>) -> (Settings, Arc<FakeAgent>) {
        let agent = Arc::new(agent);
        let settings = Settings {
            agent: agent.clone(),
            family: Family::Command,
            model: "m".into(),
            judge: judge.map(str::to_owned),
            dispatch_timeout: Duration::from_secs(10),
            kill_grace: Duration::from_millis(200),
            gate_env: Vec::new(),
            agent_bin: None,
            probe: false,
            lock_root: self.dir.path().join("locks"),
        };
        (settings, agent)
    }

    /// Runs the engine to its end; returns how it finished and the progress lines it reported.
    fn run(&mut self, goal: GoalId, settings: &Settings) -> (Finish, Vec<String>) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut seen = Vec::new();
        let mut on_progress = |p: Progress<'_>| seen.push(format!("{p:?}"));
        let (_tx, mut interrupt) = tokio::sync::watch::channel(None);
        let finish = runtime
            .block_on(
                Engine::new(&mut self.store, goal, settings, &mut on_progress).run(&mut interrupt),
            )
            .unwrap();
        (finish, seen)
    }
}

fn fixes_on_call(fix_at: usize, worktree: &Path) -> Box<Script> {
    let wt = worktree.to_path_buf();
    Box::new(move |req, n| {
        if req.step_id == "judge" {
            return reply("It is good.\nGATE: PASS");
        }
        if n == fix_at {
            std::fs::write(wt.join("value.txt"), "good\n").unwrap();
            return reply("fixed value.txt");
        }
        reply("looked around")
    })
}

fn fake(script: Box<Script>) -> FakeAgent {
    FakeAgent {
        script,
        answers_probe: true,
        requests: Mutex::new(Vec::new()),
    }
}

#[test]
fn red_then_fixed_sends_the_evidence_and_is_done_on_the_second_turn() {
    let mut fx = Fixture::new();
    let goal = fx.goal(None, 3);
    let (settings, agent) = fx.settings(fake(fixes_on_call(1, &fx.worktree())), None);
    let (finish, _) = fx.run(goal, &settings);
    assert_eq!(finish, Finish::Done);
    let requests = agent.requests.lock().unwrap();
    assert_eq!(requests.len(), 2);
    assert!(!requests[0].prompt.contains("The last check failed"));
    assert!(
        requests[1]
            .prompt
            .contains("Gate 1 of 1 failed (attempt 1/3)."),
        "{}",
        requests[1].prompt
    );
    assert!(requests[1].prompt.contains("got bad"));
    let dispatches = fx.store.dispatches(goal).unwrap();
    assert_eq!(dispatches[1].reply.as_deref(), Some("fixed value.txt"));
    assert_eq!(fx.store.goal(goal).unwrap().unwrap().state, GoalState::Done);
}

#[test]
fn a_gate_never_fixed_pauses_at_the_retry_bound_replaying_at_most_once_in_a_row() {
    let mut fx = Fixture::new();
    let goal = fx.goal(None, 3);
    let (settings, _) = fx.settings(fake(fixes_on_call(usize::MAX, &fx.worktree())), None);
    let (finish, seen) = fx.run(goal, &settings);
    assert!(
        matches!(
            finish,
            Finish::Paused {
                reason: Reason::RetriesExhausted,
                ..
            }
        ),
        "{finish:?}"
    );
    let replayed: Vec<bool> = fx
        .store
        .gate_runs(goal)
        .unwrap()
        .iter()
        .map(|r| r.replayed)
        .collect();
    assert_eq!(replayed, [false, true, false]);
    // The failure that spent the last attempt is marked as such for the renderer.
    let last = seen
        .iter()
        .rev()
        .find(|l| l.starts_with("GateFinished"))
        .unwrap();
    assert!(last.contains("last_attempt: true"), "{last}");
}

/// The store refuses to remove the last gate; gates that vanish anyway (an older binary, a hand
/// edit) must pause the goal, never let it be done with nothing judging it.
#[test]
fn gates_that_vanish_behind_the_stores_back_pause_the_goal_with_no_gates() {
    let mut fx = Fixture::new();
    let goal = fx.goal(None, 3);
    let db = rusqlite::Connection::open(fx.dir.path().join("state.db")).unwrap();
    db.execute("UPDATE gates SET removed = 1", []).unwrap();
    drop(db);
    let (settings, agent) = fx.settings(fake(fixes_on_call(0, &fx.worktree())), None);
    let (finish, _) = fx.run(goal, &settings);
    assert!(
        matches!(
            finish,
            Finish::Paused {
                reason: Reason::NoGates,
                ..
            }
        ),
        "{finish:?}"
    );
    assert_eq!(
        agent.requests.lock().unwrap().len(),
        0,
        "no turn without gates"
    );
    let goal = fx.store.goal(goal).unwrap().unwrap();
    assert_eq!(goal.state, GoalState::Paused);
    assert_eq!(goal.pause.unwrap().reason, "no-gates");
}

#[test]
fn the_judge_judges_the_reply_the_ledger_stored() {
    let mut fx = Fixture::new();
    let goal = fx.goal(Some("judge-model"), 3);
    let (settings, agent) =
        fx.settings(fake(fixes_on_call(0, &fx.worktree())), Some("judge-model"));
    let (finish, _) = fx.run(goal, &settings);
    assert_eq!(finish, Finish::Done);
    let requests = agent.requests.lock().unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].step_id, "judge");
    assert!(
        requests[1].prompt.contains("fixed value.txt"),
        "{}",
        requests[1].prompt
    );
    let steps: Vec<_> = fx
        .store
        .dispatches(goal)
        .unwrap()
        .iter()
        .map(|d| d.step)
        .collect();
    assert_eq!(steps, [DispatchStep::Agent, DispatchStep::Judge]);
}

#[test]
fn a_judge_that_cannot_run_pauses_after_its_limit_counted_across_runs() {
    let mut fx = Fixture::new();
    let goal = fx.goal(Some("judge-model"), 3);
    let wt = fx.worktree();
    let script: Box<Script> = Box::new(move |req, _| {
        if req.step_id == "judge" {
            return dead();
        }
        std::fs::write(wt.join("value.txt"), "good\n").unwrap();
        reply("fixed")
    });
    let (settings, _) = fx.settings(fake(script), Some("judge-model"));
    // max_turns 5 = 5 judge failures: the limit is reached within the first run...
    let (finish, _) = fx.run(goal, &settings);
    assert!(
        matches!(
            finish,
            Finish::Paused {
                reason: Reason::JudgeFailed,
                ..
            }
        ),
        "{finish:?}"
    );
    // ...and a resume does not start the streak over: the next failure pauses at once.
    fx.store.write(|tx| tx.resume_goal(goal)).unwrap();
    let (finish, _) = fx.run(goal, &settings);
    assert!(
        matches!(
            finish,
            Finish::Paused {
                reason: Reason::JudgeFailed,
                ..
            }
        ),
        "{finish:?}"
    );
    let judged = fx
        .store
        .dispatches(goal)
        .unwrap()
        .iter()
        .filter(|d| d.step == DispatchStep::Judge)
        .count();
    assert_eq!(judged, 6);
}

#[test]
fn an_agent_that_cannot_start_or_a_model_that_does_not_answer_pauses_before_any_turn() {
    let mut fx = Fixture::new();
    let goal = fx.goal(None, 3);
    let (mut settings, agent) = fx.settings(fake(fixes_on_call(0, &fx.worktree())), None);
    settings.agent_bin = Some(PathBuf::from("/nonexistent/agent"));
    let (finish, _) = fx.run(goal, &settings);
    assert!(
        matches!(&finish, Finish::Paused { reason: Reason::ProbeFailed, detail } if detail.contains("does not exist")),
        "{finish:?}"
    );
    assert_eq!(agent.requests.lock().unwrap().len(), 0);

    let mut silent = fake(fixes_on_call(0, &fx.worktree()));
    silent.answers_probe = false;
    let (mut settings, agent) = fx.settings(silent, None);
    settings.probe = true;
    fx.store.write(|tx| tx.resume_goal(goal)).unwrap();
    let (finish, _) = fx.run(goal, &settings);
    assert!(
        matches!(&finish, Finish::Paused { reason: Reason::ProbeFailed, detail } if detail.contains("does not answer")),
        "{finish:?}"
    );
    assert_eq!(agent.requests.lock().unwrap().len(), 0);
    assert_eq!(fx.store.goal(goal).unwrap().unwrap().model_probed, None);

    let (mut settings, _) = fx.settings(fake(fixes_on_call(0, &fx.worktree())), None);
    settings.probe = true;
    fx.store.write(|tx| tx.resume_goal(goal)).unwrap();
    let (finish, _) = fx.run(goal, &settings);
    assert_eq!(finish, Finish::Done);
    assert_eq!(
        fx.store
            .goal(goal)
            .unwrap()
            .unwrap()
            .model_probed
            .as_deref(),
        Some("m")
    );
}

#[test]
fn a_transport_failure_spends_the_turn_and_the_next_turn_retries() {
    let mut fx = Fixture::new();
    let goal = fx.goal(None, 3);
    let wt = fx.worktree();
    let script: Box<Script> = Box::new(move |_, n| {
        if n == 0 {
            return dead();
        }
        std::fs::write(wt.join("value.txt"), "good\n").unwrap();
        reply("fixed")
    });
    let (settings, _) = fx.settings(fake(script), None);
    let (finish, _) = fx.run(goal, &settings);
    assert_eq!(finish, Finish::Done);
    let outcomes: Vec<_> = fx
        .store
        .turns(goal)
        .unwrap()
        .into_iter()
        .map(|t| t.outcome.unwrap_or_default())
        .collect();
    assert_eq!(outcomes, ["dispatch-dead", "done"]);
}
