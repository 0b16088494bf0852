//! The scheduler driven as a runtime would drive it: every action run, every result recorded as
//! an event, the cursor rebuilt from the events at every step.
//!
//! Property tests: never more than `maxFanout` members in flight; replaying the recorded events
//! into a fresh scheduler gives the same next actions and never starts a finished unit again;
//! a join decides by its policy.

use greenlight_types::Reason;
use greenlight_workflow::plan::{self, FailureClass, JoinPolicy, Plan};
use greenlight_workflow::schedule::{Action, End, Event, Outcome, Scheduler, decide};
use proptest::prelude::*;

fn plan(text: &str) -> Plan {
    plan::check(text).unwrap_or_else(|p| panic!("{p:#?}"))
}

fn fanout_plan(items: usize, max_fanout: u64, policy: &str) -> Plan {
    let items: Vec<String> = (0..items).map(|i| format!("m{i}")).collect();
    plan(&format!(
        "workflow: 1\nname: wide\nagent: claude\nsteps:\n  - id: first\n    kind: agent\n    prompt: go\n  \
         - id: wide\n    kind: fanout\n    needs: [first]\n    items: [{}]\n    maxFanout: {max_fanout}\n    \
         template: {{ prompt: 'do {{{{item}}}}', idempotent: true, retry: {{ maxAttempts: 2, on: [transport] }} }}\n  \
         - id: joined\n    kind: join\n    for: wide\n    policy: {policy}\n  \
         - id: after\n    kind: agent\n    needs: [joined]\n    prompt: done\n",
        items.join(", ")
    ))
}

/// Replays `events` into a fresh scheduler.
fn replay<'p>(plan: &'p Plan, budget: u64, events: &[Event]) -> Scheduler<'p> {
    let mut s = Scheduler::new(plan, budget);
    for e in events {
        s.apply(e).expect("every recorded event fits the plan");
    }
    s
}

/// A dispatch of `step` (member `item`), attempt `attempt`, as recorded.
fn dispatched(step: &str, item: Option<&str>, attempt: u64) -> Event {
    Event::Dispatched {
        step: step.into(),
        item: item.map(str::to_owned),
        attempt,
    }
}

/// A gate run as recorded: started, then judged.
fn judged(step: &str, passed: bool) -> [Event; 2] {
    [
        Event::GateStarted { step: step.into() },
        Event::Judged {
            step: step.into(),
            passed,
        },
    ]
}

/// A dispatch's result from a scripted outcome.
fn settle(step: &str, item: Option<String>, ok: bool, transport: bool) -> Event {
    Event::Settled {
        step: step.into(),
        item,
        outcome: if ok {
            Outcome::Ok
        } else {
            Outcome::Failed {
                reason: Reason::DispatchDead,
                class: transport.then_some(FailureClass::Transport),
            }
        },
    }
}

/// Drives a run to its end. `pick` chooses which in-flight dispatch settles next and how;
/// `check` sees the scheduler after every event.
fn drive(
    plan: &Plan,
    budget: u64,
    mut pick: impl FnMut(usize) -> (usize, bool, bool),
    mut check: impl FnMut(&Scheduler<'_>, &[Event]),
) -> (End, Vec<Event>) {
    let mut events: Vec<Event> = Vec::new();
    let mut in_flight: Vec<(String, Option<String>)> = Vec::new();
    for _ in 0..10_000 {
        let s = replay(plan, budget, &events);
        check(&s, &events);
        let actions = s.next();
        for action in &actions {
            match action {
                Action::Dispatch {
                    step,
                    item,
                    attempt,
                } => {
                    events.push(Event::Dispatched {
                        step: step.clone(),
                        item: item.clone(),
                        attempt: *attempt,
                    });
                    in_flight.push((step.clone(), item.clone()));
                }
                Action::Finished(end) => return (end.clone(), events),
                other => panic!("this plan has no {other:?}"),
            }
        }
        if !in_flight.is_empty() {
            let (which, ok, transport) = pick(in_flight.len());
            let (step, item) = in_flight.remove(which % in_flight.len());
            events.push(settle(&step, item, ok, transport));
        } else if actions.is_empty() {
            panic!("nothing runs and nothing can start, but the run did not end: {events:#?}");
        }
    }
    panic!("the run did not end")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// However the members settle, never more than maxFanout run at once, and a unit that
    /// finished is never dispatched again, by the scheduler or by one rebuilt from the record.
    #[test]
    fn the_window_holds_and_finished_units_are_never_dispatched_again(
        items in 1usize..8,
        max_fanout in 1u64..4,
        script in proptest::collection::vec((0usize..8, any::<bool>(), any::<bool>()), 64),
    ) {
        let plan = fanout_plan(items, max_fanout, "any");
        let mut turn = 0;
        let (end, events) = drive(
            &plan,
            1_000,
            |_| { turn += 1; script[turn % script.len()] },
            |s, events| {
                let mut running = std::collections::BTreeSet::new();
                let mut finished = std::collections::BTreeSet::new();
                for e in events {
                    match e {
                        Event::Dispatched { step, item, .. } => { running.insert((step.clone(), item.clone())); }
                        Event::Settled { step, item, outcome } => {
                            let key = (step.clone(), item.clone());
                            running.remove(&key);
                            let retried = matches!(outcome, Outcome::Failed { class: Some(_), .. })
                                && events.iter().filter(|d| matches!(d, Event::Dispatched { step: s2, item: i2, .. } if *s2 == key.0 && *i2 == key.1)).count() < 2;
                            if !retried { finished.insert(key); }
                        }
                        _ => {}
                    }
                }
                let wide = running.iter().filter(|(s, _)| s == "wide").count() as u64;
                assert!(wide <= max_fanout, "{wide} members in flight, window {max_fanout}");
                for action in s.next() {
                    if let Action::Dispatch { step, item, .. } = action {
                        assert!(!finished.contains(&(step.clone(), item.clone())), "{step} {item:?} dispatched again after it finished");
                        assert!(!running.contains(&(step.clone(), item.clone())), "{step} {item:?} dispatched while in flight");
                    }
                }
            },
        );
        // `any` fails only when every member failed.
        let members_ok = events.iter().any(|e| matches!(e, Event::Settled { step, outcome: Outcome::Ok, .. } if step == "wide"));
        let first_ok = events.iter().any(|e| matches!(e, Event::Settled { step, outcome: Outcome::Ok, .. } if step == "first"));
        match end {
            End::Completed => prop_assert!(members_ok),
            End::Failed { step, reason: Reason::JoinFailed } => { prop_assert_eq!(step, "joined"); prop_assert!(!members_ok); }
            End::Failed { step, reason: Reason::DispatchDead } => prop_assert!(!first_ok || step == "after"),
            other => prop_assert!(false, "unexpected end {:?}", other),
        }
    }

    /// A join's decision is its policy's: any fails only when all failed, quorum counts passes,
    /// all-activated fails on one failure, all-declared also fails when items were cut.
    #[test]
    fn a_join_decides_by_its_policy(outcomes in proptest::collection::vec(any::<bool>(), 1..10), cut in 0u64..3, n in 1u64..10) {
        let passed = outcomes.iter().filter(|p| **p).count() as u64;
        let ran = outcomes.len() as u64;
        let declared = ran + cut;
        prop_assert_eq!(decide(JoinPolicy::Any, declared, &outcomes), passed > 0);
        prop_assert_eq!(decide(JoinPolicy::Quorum(n), declared, &outcomes), passed >= n);
        prop_assert_eq!(decide(JoinPolicy::AllActivated, declared, &outcomes), passed == ran);
        prop_assert_eq!(decide(JoinPolicy::AllDeclared, declared, &outcomes), passed == ran && cut == 0);
    }
}

#[test]
fn each_join_policy_passes_and_fails_through_the_scheduler() {
    // Three members; the script fails member m1 only (no retry class, so not retried).
    for (policy, completes) in [
        ("any", true),
        ("quorum:2", true),
        ("quorum:3", false),
        ("all-activated", false),
        ("all-declared", false),
    ] {
        let plan = fanout_plan(3, 3, policy);
        let mut s = Scheduler::new(&plan, 100);
        let run = |s: &mut Scheduler<'_>| -> Option<End> {
            for _ in 0..20 {
                let actions = s.next();
                for a in &actions {
                    match a {
                        Action::Dispatch {
                            step,
                            item,
                            attempt,
                        } => {
                            s.apply(&Event::Dispatched {
                                step: step.clone(),
                                item: item.clone(),
                                attempt: *attempt,
                            })
                            .unwrap();
                            let ok = item.as_deref() != Some("m1");
                            s.apply(&settle(step, item.clone(), ok, false)).unwrap();
                        }
                        Action::Finished(end) => return Some(end.clone()),
                        other => panic!("{other:?}"),
                    }
                }
            }
            None
        };
        let end = run(&mut s).expect("the run ends");
        if completes {
            assert_eq!(end, End::Completed, "{policy}");
        } else {
            assert_eq!(
                end,
                End::Failed {
                    step: "joined".into(),
                    reason: Reason::JoinFailed
                },
                "{policy}"
            );
        }
    }
}

#[test]
fn a_boundary_that_cannot_reserve_its_worst_case_pauses_before_it_and_resumes_with_more() {
    // first: 1 unit; wide: 4 members × 2 attempts = 8; after: 1. A budget of 5 runs `first`
    // and then stops before the fan-out, with no member started.
    let plan = fanout_plan(4, 2, "any");
    let mut events = vec![
        dispatched("first", None, 1),
        settle("first", None, true, false),
    ];
    let s = replay(&plan, 5, &events);
    assert_eq!(
        s.next(),
        [Action::AwaitBudget {
            before: "wide".into(),
            need: 8,
            left: 4,
            reason: Reason::BudgetExhausted
        }]
    );
    // The same record with a larger budget (an extension) goes on with the fan-out's window.
    let s = replay(&plan, 10, &events);
    let next = s.next();
    assert_eq!(next.len(), 2, "{next:?}");
    assert!(
        next.iter()
            .all(|a| matches!(a, Action::Dispatch { step, .. } if step == "wide"))
    );
    events.push(dispatched("wide", Some("m0"), 1));
    assert_eq!(replay(&plan, 10, &events).reserved(), 1 + 8);
}

#[test]
fn a_gate_redoes_its_route_then_fails_or_ends_at_its_terminal_label() {
    let text = |route: &str| {
        format!(
            "workflow: 1\nname: redo\nagent: claude\nsteps:\n  - id: work\n    kind: agent\n    prompt: go\n  \
             - id: check\n    kind: gate\n    needs: [work]\n    gates: [test]\n    failRoute: {route}\n    maxRedos: 1\n"
        )
    };
    let plan_redo = plan(&text("work"));
    let mut events = vec![
        dispatched("work", None, 1),
        settle("work", None, true, false),
    ];
    assert_eq!(
        replay(&plan_redo, 10, &events).next(),
        [Action::RunGate {
            step: "check".into()
        }]
    );
    events.extend(judged("check", false));
    // The redo: the route runs again, as a new round, numbered after the last one (the ledger
    // keeps one row per dispatch, so two dispatches of a step never share a number).
    assert_eq!(
        replay(&plan_redo, 10, &events).next(),
        [Action::Dispatch {
            step: "work".into(),
            item: None,
            attempt: 2
        }]
    );
    events.push(dispatched("work", None, 2));
    events.push(settle("work", None, true, false));
    events.extend(judged("check", false));
    assert_eq!(
        replay(&plan_redo, 10, &events).next(),
        [Action::Finished(End::Failed {
            step: "check".into(),
            reason: Reason::GateFailed
        })]
    );

    let plan_terminal = plan(&text("terminal:needs-a-person").replace("    maxRedos: 1\n", ""));
    let mut events = vec![
        dispatched("work", None, 1),
        settle("work", None, true, false),
    ];
    events.extend(judged("check", false));
    assert_eq!(
        replay(&plan_terminal, 10, &events).next(),
        [Action::Finished(End::Terminal("needs-a-person".into()))]
    );
}

#[test]
fn a_pause_stops_the_run_until_resumed_and_lands_members_one_at_a_time() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/plans/example.yaml"
    ))
    .expect("the example plan");
    let plan = plan(&text);
    let budget = Scheduler::default_budget(&plan);
    let mut events = vec![
        dispatched("survey", None, 1),
        settle("survey", None, true, false),
    ];
    assert_eq!(
        replay(&plan, budget, &events).next(),
        [Action::Pause {
            step: "approve".into()
        }]
    );
    events.push(Event::Resumed {
        step: "approve".into(),
    });
    for item in ["parser", "store", "cli"] {
        events.push(dispatched("fix", Some(item), 1));
        events.push(settle("fix", Some(item.into()), item != "store", false));
    }
    // all-activated: store failed, so the join fails and nothing lands.
    assert_eq!(
        replay(&plan, budget, &events).next(),
        [Action::Finished(End::Failed {
            step: "fixed".into(),
            reason: Reason::JoinFailed
        })]
    );
    // With store passing, integrate, the gate, then one landing at a time.
    let events: Vec<Event> = events
        .into_iter()
        .map(|e| match e {
            Event::Settled { step, item, .. } => settle(&step, item, true, false),
            other => other,
        })
        .chain([
            dispatched("integrate", None, 1),
            settle("integrate", None, true, false),
        ])
        .chain(judged("review", true))
        .collect();
    let s = replay(&plan, budget, &events);
    assert_eq!(
        s.next(),
        [Action::Land {
            step: "ship".into(),
            item: "parser".into()
        }]
    );
    let mut events = events;
    events.push(Event::LandStarted {
        step: "ship".into(),
        item: "parser".into(),
    });
    assert_eq!(
        replay(&plan, budget, &events).next(),
        [],
        "one landing at a time"
    );
    events.push(Event::Landed {
        step: "ship".into(),
        item: "parser".into(),
        failure: None,
    });
    for item in ["store", "cli"] {
        assert_eq!(
            replay(&plan, budget, &events).next(),
            [Action::Land {
                step: "ship".into(),
                item: item.into()
            }]
        );
        events.push(Event::LandStarted {
            step: "ship".into(),
            item: item.into(),
        });
        events.push(Event::Landed {
            step: "ship".into(),
            item: item.into(),
            failure: (item == "store").then_some(Reason::GateFailed),
        });
    }
    // A member that did not land fails the run, once the others were tried.
    assert_eq!(
        replay(&plan, budget, &events).next(),
        [Action::Finished(End::Failed {
            step: "ship".into(),
            reason: Reason::GateFailed
        })]
    );
}

#[test]
fn an_event_from_another_plan_is_refused() {
    let plan = fanout_plan(2, 1, "any");
    let mut s = Scheduler::new(&plan, 10);
    let err = s
        .apply(&dispatched("ghost", None, 1))
        .expect_err("no such step");
    assert!(err.to_string().contains("ghost"), "{err}");
    assert!(s.apply(&dispatched("wide", Some("m9"), 1)).is_err());
    assert!(
        s.apply(&Event::Resumed {
            step: "first".into()
        })
        .is_err()
    );
    // A record that dispatches a finished unit again is not one greenlight wrote.
    s.apply(&dispatched("first", None, 1)).unwrap();
    s.apply(&settle("first", None, true, false)).unwrap();
    assert!(s.apply(&dispatched("first", None, 2)).is_err());
}

/// A join that fails while another branch is running starts nothing new and ends the run only
/// once that branch settled, so its result is recorded (it used to end the run at once).
#[test]
fn a_failed_join_waits_for_what_is_running_before_it_ends_the_run() {
    let plan = plan(
        "workflow: 1\nname: two\nagent: claude\nsteps:\n  - id: slow\n    kind: agent\n    prompt: slow\n  \
         - id: wide\n    kind: fanout\n    items: [a]\n    maxFanout: 1\n    template: { prompt: 'do {{item}}' }\n  \
         - id: joined\n    kind: join\n    for: wide\n    policy: any\n",
    );
    let mut events = vec![
        dispatched("slow", None, 1),
        dispatched("wide", Some("a"), 1),
    ];
    events.push(settle("wide", Some("a".into()), false, false));
    assert_eq!(
        replay(&plan, 10, &events).next(),
        [],
        "slow is still running"
    );
    events.push(settle("slow", None, true, false));
    assert_eq!(
        replay(&plan, 10, &events).next(),
        [Action::Finished(End::Failed {
            step: "joined".into(),
            reason: Reason::JoinFailed
        })]
    );
}
