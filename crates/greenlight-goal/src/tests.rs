//! The engine inside its crate: a fake [`Dispatcher`] (the real trait, scripted per call), a
//! real SQLite store in a temp dir, a real git worktree and real gate processes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test that cannot set up should stop loudly

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use greenlight_agent::{
    Activity, BoxFuture, DispatchRequest, DispatchResult, Dispatcher, Family, Outcome,
    ProbeOutcome, Reason,
};
use greenlight_store::greenlight_stream::{Frame, FrameBody, GateVerdict, ToolStatus};
use greenlight_store::{
    AgentSpec, DispatchEnd, DispatchOutcome, DispatchStep, GoalId, GoalState, NewDispatch, NewGoal,
    Reads, Store, Tokens,
};

use crate::engine::{Engine, Finish, Settings};
use crate::progress::Progress;

/// What the fake does on one call: write files into the worktree, then answer (or fail).
type Script = dyn Fn(&DispatchRequest, usize) -> DispatchResult + Send + Sync;

/// A scripted agent behind the real `Dispatcher` trait; it records every request it gets.
struct FakeAgent {
    script: Box<Script>,
    answers_probe: bool,
    requests: Mutex<Vec<DispatchRequest>>,
    /// What every agent turn (not the judge) does live, a pause after each piece.
    activity: Vec<Activity>,
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
        sink: &'a dyn greenlight_agent::ActivitySink,
    ) -> BoxFuture<'a, DispatchResult> {
        let mut requests = self.requests.lock().unwrap();
        let n = requests.len();
        requests.push(request.clone());
        drop(requests);
        let result = (self.script)(request, n);
        let live = if request.step_id == "judge" {
            Vec::new()
        } else {
            self.activity.clone()
        };
        Box::pin(async move {
            for piece in live {
                sink.activity(piece);
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            result
        })
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
    r.tokens_in = Some(100);
    r.tokens_out = Some(20);
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
                family: Family::Command,
                model: Some("m".into()),
                argv_template: Some(vec!["fake".into()]),
                endpoint: None,
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
            agent_search_path: std::ffi::OsString::new(),
            probe: false,
            lock_root: self.dir.path().join("locks"),
            env: greenlight_proc::ProcessEnv::default(),
            cache: None,
            remote: None,
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
        activity: Vec::new(),
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

/// The goal's frames, checked to be numbered 1..N with no hole.
fn frames_of(store: &Store, goal: GoalId) -> Vec<Frame> {
    let frames = store
        .frames_after(crate::frames::stream(goal), 0, 10_000)
        .unwrap();
    let seqs: Vec<u64> = frames.iter().map(|f| f.seq).collect();
    assert_eq!(seqs, (1..=frames.len() as u64).collect::<Vec<_>>());
    frames
}

/// The kinds of the frames, live activity and gate output left out (their count varies with
/// timing).
fn milestones(frames: &[Frame]) -> Vec<&'static str> {
    frames
        .iter()
        .map(|f| f.body.kind())
        .filter(|k| !matches!(*k, "activity" | "tool-call" | "gate-output"))
        .collect()
}

#[test]
fn a_goal_run_is_one_contiguous_stream_from_active_to_done() {
    let mut fx = Fixture::new();
    let goal = fx.goal(None, 3);
    let mut agent = fake(fixes_on_call(1, &fx.worktree()));
    agent.activity = vec![
        Activity::Thinking("Let me look".into()),
        Activity::Text("I will ".into()),
        Activity::Text("fix it.".into()),
        Activity::ToolStarted {
            id: "t1".into(),
            name: "Bash".into(),
            input: "cat value.txt".into(),
        },
        Activity::ToolFinished {
            id: "t1".into(),
            name: String::new(),
            failed: false,
            output: "bad".into(),
        },
        Activity::Text("Done.".into()),
    ];
    let (settings, _) = fx.settings(agent, None);
    let (finish, _) = fx.run(goal, &settings);
    assert_eq!(finish, Finish::Done);
    let frames = frames_of(&fx.store, goal);
    assert_eq!(
        milestones(&frames),
        [
            "goal-state",
            "turn-started",
            "turn-ended",
            "gate-started",
            "gate-finished",
            "turn-started",
            "turn-ended",
            "gate-started",
            "gate-finished",
            "goal-state",
        ]
    );
    let at = |kind: &str, nth: usize| {
        frames
            .iter()
            .filter(|f| f.body.kind() == kind)
            .nth(nth)
            .unwrap_or_else(|| panic!("no {kind} #{nth}"))
    };
    assert!(
        matches!(&at("goal-state", 0).body, FrameBody::GoalState { state, .. } if state == "active")
    );
    assert!(
        matches!(&at("goal-state", 1).body, FrameBody::GoalState { state, .. } if state == "done")
    );
    // The second turn's prompt carries the first failure's evidence.
    let FrameBody::TurnStarted { turn, prompt, .. } = &at("turn-started", 1).body else {
        unreachable!()
    };
    assert_eq!(*turn, 2);
    assert!(prompt.contains("got bad"), "{prompt}");
    // Each turn's activity sits between its start and its end, text merged in order, the tool
    // call as a start and a result that carries its name.
    let first_end = at("turn-ended", 0).seq;
    let live: Vec<&FrameBody> = frames
        .iter()
        .filter(|f| f.seq > at("turn-started", 0).seq && f.seq < first_end)
        .map(|f| &f.body)
        .collect();
    let texts: String = live
        .iter()
        .filter_map(|b| match b {
            FrameBody::Activity { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, "Let me lookI will fix it.Done.");
    let tools: Vec<(ToolStatus, &str)> = live
        .iter()
        .filter_map(|b| match b {
            FrameBody::ToolCall { status, name, .. } => Some((*status, name.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        tools,
        [(ToolStatus::Started, "Bash"), (ToolStatus::Ok, "Bash")]
    );
    // The turn's end carries the reply and the tokens.
    let FrameBody::TurnEnded {
        outcome,
        reply,
        tokens,
        ..
    } = &at("turn-ended", 1).body
    else {
        unreachable!()
    };
    assert_eq!(outcome, "ok");
    assert_eq!(reply.as_deref(), Some("fixed value.txt"));
    let tokens = tokens.clone().expect("tokens reported");
    assert_eq!((tokens.input, tokens.output), (Some(100), Some(20)));
    // The failing gate's output streamed while it ran, and its evidence is in its verdict.
    let FrameBody::GateFinished {
        verdict,
        digest,
        exit_code,
        turn,
        ..
    } = &at("gate-finished", 0).body
    else {
        unreachable!()
    };
    assert_eq!(
        (*verdict, *exit_code, *turn),
        (GateVerdict::Fail, Some(1), Some(1))
    );
    let digest = digest.as_deref().expect("evidence");
    assert!(digest.contains("got bad"), "{digest}");
    let output = at("gate-output", 0);
    assert!(output.seq > at("gate-started", 0).seq && output.seq < at("gate-finished", 0).seq);
    assert!(matches!(&output.body, FrameBody::GateOutput { text, .. } if text.contains("got bad")));
    assert!(matches!(
        &at("gate-finished", 1).body,
        FrameBody::GateFinished {
            verdict: GateVerdict::Pass,
            ..
        }
    ));
}

/// What a runner killed after its agent's dispatch came back ok leaves behind: an open turn
/// whose ledger row holds the reply, and the worktree as the agent left it.
fn crashed_after_a_dispatch(fx: &mut Fixture, goal: GoalId, reply: Option<&str>) {
    fx.store
        .write(|tx| {
            let turn = tx.begin_turn(goal)?;
            tx.append_frame(
                crate::frames::stream(goal),
                &crate::frames::turn_started(turn, "the prompt"),
            )?;
            let dispatch = tx.begin_dispatch(&NewDispatch {
                step: DispatchStep::Agent,
                goal,
                turn,
                attempt: 1,
                family: Family::Command,
                model: Some("m".into()),
            })?;
            if let Some(reply) = reply {
                tx.finish_dispatch(
                    dispatch,
                    &DispatchEnd {
                        outcome: DispatchOutcome::Ok,
                        wall_ms: Some(5),
                        tokens: Tokens::default(),
                        reason: None,
                        detail: None,
                        reply: Some(reply.into()),
                    },
                )?;
            }
            Ok::<_, greenlight_store::Error>(())
        })
        .unwrap();
}

#[test]
fn after_a_crash_the_judge_sees_the_stored_reply_and_the_numbering_goes_on() {
    let mut fx = Fixture::new();
    let goal = fx.goal(Some("judge-model"), 3);
    crashed_after_a_dispatch(&mut fx, goal, Some("fixed value.txt for real"));
    std::fs::write(fx.worktree().join("value.txt"), "good\n").unwrap();
    let (settings, agent) =
        fx.settings(fake(fixes_on_call(0, &fx.worktree())), Some("judge-model"));
    let (finish, _) = fx.run(goal, &settings);
    assert_eq!(finish, Finish::Done);
    let requests = agent.requests.lock().unwrap();
    // The open turn ran its owed gates and went to the judge: no second agent dispatch.
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].step_id, "judge");
    assert!(
        requests[0].prompt.contains("fixed value.txt for real"),
        "{}",
        requests[0].prompt
    );
    let frames = frames_of(&fx.store, goal);
    assert_eq!(
        milestones(&frames),
        [
            "goal-state",
            "turn-started",
            "gate-started",
            "gate-finished",
            "judge-verdict",
            "goal-state"
        ]
    );
    assert!(matches!(
        &frames[frames.len() - 2].body,
        FrameBody::JudgeVerdict { passed: true, reply, .. } if reply.contains("GATE: PASS")
    ));
}

#[test]
fn a_dispatch_cut_by_a_crash_ends_its_turn_on_the_stream_and_the_next_turn_follows() {
    let mut fx = Fixture::new();
    let goal = fx.goal(None, 3);
    crashed_after_a_dispatch(&mut fx, goal, None);
    let (settings, _) = fx.settings(fake(fixes_on_call(0, &fx.worktree())), None);
    let (finish, _) = fx.run(goal, &settings);
    assert_eq!(finish, Finish::Done);
    let frames = frames_of(&fx.store, goal);
    assert_eq!(
        milestones(&frames),
        [
            "goal-state",
            "turn-started",
            "turn-ended",
            "turn-started",
            "turn-ended",
            "gate-started",
            "gate-finished",
            "goal-state"
        ]
    );
    assert!(matches!(
        &frames[2].body,
        FrameBody::TurnEnded { turn: 1, outcome, .. } if outcome == "interrupted"
    ));
}

#[test]
fn a_pause_and_a_resume_are_goal_state_frames_and_a_machine_error_ends_the_stream() {
    let mut fx = Fixture::new();
    let goal = fx.goal(None, 1);
    let (settings, _) = fx.settings(fake(fixes_on_call(usize::MAX, &fx.worktree())), None);
    let (finish, _) = fx.run(goal, &settings);
    assert!(matches!(finish, Finish::Paused { .. }), "{finish:?}");
    let frames = frames_of(&fx.store, goal);
    assert!(matches!(
        &frames.last().unwrap().body,
        FrameBody::GoalState { state, reason: Some(reason), .. }
            if state == "paused" && reason == "retries-exhausted"
    ));
    fx.store.write(|tx| tx.resume_goal(goal)).unwrap();
    // Changed by hand, so the gates run first; the gate lock root is a file, so the gate cannot
    // take its mutex and the loop fails.
    std::fs::write(fx.worktree().join("value.txt"), "other\n").unwrap();
    let db = rusqlite::Connection::open(fx.dir.path().join("state.db")).unwrap();
    db.execute("UPDATE gates SET mutex = 'm'", []).unwrap();
    drop(db);
    std::fs::write(fx.dir.path().join("locks"), "not a directory").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut on_progress = |_: Progress<'_>| {};
    let (_tx, mut interrupt) = tokio::sync::watch::channel(None);
    let error = runtime
        .block_on(Engine::new(&mut fx.store, goal, &settings, &mut on_progress).run(&mut interrupt))
        .expect_err("the lock root is unusable");
    let frames = frames_of(&fx.store, goal);
    let kinds: Vec<&str> = frames.iter().rev().take(2).map(|f| f.body.kind()).collect();
    assert_eq!(kinds[1], "gate-started");
    assert!(
        matches!(&frames.last().unwrap().body, FrameBody::Error { code, message } if code == "HARNESS_ERROR" && *message == error.to_string()),
        "{:?}",
        frames.last()
    );
    assert!(frames.iter().any(
        |f| matches!(&f.body, FrameBody::GoalState { state, .. } if state == "active") && f.seq > 1
    ));
}
