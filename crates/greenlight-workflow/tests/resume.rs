//! A resume is refused in its fixed order: a run not recorded, a finished run, a changed plan,
//! changed arguments; the answer a pause waits for is not a change.

use std::collections::BTreeMap;

use greenlight_types::Reason;
use greenlight_workflow::plan;
use greenlight_workflow::resume::{self, Recorded};

const PLAN: &str = "\
workflow: 1
name: resume
agent: claude
args: { topic: { default: a }, answer: {} }
steps:
  - id: ask
    kind: agent
    prompt: 'on {{args.topic}}'
  - id: wait
    kind: pause
    needs: [ask]
    state: waiting
    resumeArg: answer
";

fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect()
}

#[test]
fn each_refusal_comes_in_its_order_and_a_resume_answer_is_no_change() {
    let plan = plan::check(PLAN).expect("valid");
    let started = Recorded {
        plan_digest: plan::digest(&plan),
        args_hash: plan::args_hash(&plan, &args(&[])),
        finished: false,
    };
    assert_eq!(
        resume::check("r1", Some(&started), &plan, &args(&[("answer", "yes")])),
        Ok(())
    );

    let reason = |recorded: Option<&Recorded>, plan: &plan::Plan, given: &[(&str, &str)]| {
        resume::check("r1", recorded, plan, &args(given))
            .expect_err("refused")
            .reason
    };
    // No record: foreign, whatever else is true.
    assert_eq!(reason(None, &plan, &[]), Reason::ForeignRunRefused);
    // Finished comes before a changed input.
    let finished = Recorded {
        finished: true,
        ..started.clone()
    };
    let other =
        plan::check(&PLAN.replace("on {{args.topic}}", "about {{args.topic}}")).expect("valid");
    assert_eq!(
        reason(Some(&finished), &other, &[]),
        Reason::ResumeAlreadyCompleted
    );
    // A changed plan, then changed arguments.
    assert_eq!(
        reason(Some(&started), &other, &[]),
        Reason::StaleInputRefused
    );
    let refusal =
        resume::check("r1", Some(&started), &plan, &args(&[("topic", "b")])).expect_err("refused");
    assert_eq!(refusal.reason, Reason::StaleInputRefused);
    assert!(refusal.message.contains("arguments changed"), "{refusal}");
}
