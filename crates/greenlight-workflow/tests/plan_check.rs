//! A plan is read whole: every problem at once, each at its line and column, and a valid plan
//! comes back with what it says.

use greenlight_workflow::plan::{self, JoinPolicy, Kind, Problem};

fn example() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/plans/example.yaml"
    ))
    .expect("the example plan")
}

/// Every problem of `text`, as `line:column: message` lines.
fn problems(text: &str) -> Vec<String> {
    match plan::check(text) {
        Ok(_) => panic!("the plan was accepted:\n{text}"),
        Err(problems) => problems.iter().map(Problem::to_string).collect(),
    }
}

#[test]
fn the_example_plan_is_valid_and_reads_as_written() {
    let plan = plan::check(&example()).unwrap_or_else(|p| panic!("{p:#?}"));
    assert_eq!(plan.name, "fix-modules");
    assert_eq!(plan.steps.len(), 7);
    let Kind::Fanout(fix) = &plan.steps[2].kind else {
        panic!("step 3 is the fan-out")
    };
    assert_eq!(fix.items, ["parser", "store", "cli"]);
    assert_eq!(fix.max_fanout, 2);
    assert!(matches!(&plan.steps[3].kind, Kind::Join(j) if j.policy == JoinPolicy::AllActivated));
    assert_eq!(plan.extensions["x-owner"], "platform-team");
    let summary = plan::summary(&plan);
    // survey's 2 attempts, 3 members, integrate's 1, and review's 2 redos of integrate (the
    // gate itself runs verify.yaml gates, which dispatch nothing).
    assert_eq!(summary.worst_case_dispatches, 2 + 3 + 1 + 2);
    assert_eq!((summary.steps, summary.fanouts, summary.members), (7, 1, 3));
}
