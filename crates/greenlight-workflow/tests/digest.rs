//! A plan's digest names what it says, not how it is written; the argument hash leaves out the
//! arguments a resume gives, and nothing else.

use std::collections::BTreeMap;

use greenlight_workflow::plan;

const PLAN: &str = "\
workflow: 1
name: digest
agent: claude
args:
  topic: { default: parsing }
  answer: {}
x-team: { b: 2, a: 1 }
steps:
  - id: ask
    kind: agent
    prompt: Write about {{args.topic}}.
  - id: wait
    kind: pause
    needs: [ask]
    state: waiting
    resumeArg: answer
";

fn digest(text: &str) -> String {
    plan::digest(&plan::check(text).unwrap_or_else(|p| panic!("{p:#?}")))
}

#[test]
fn the_digest_ignores_layout_and_follows_meaning() {
    let base = digest(PLAN);
    assert_eq!(base.len(), 64, "a BLAKE3 hex digest");
    // Comments, flow style, key order and quoting say the same plan.
    let relaid = "\
# the same plan, laid out differently
name: \"digest\"
workflow: 1
x-team: { a: 1, b: 2 }
agent: claude
args: { answer: {}, topic: { default: 'parsing' } }
steps:
  - { kind: agent, id: ask, prompt: 'Write about {{args.topic}}.' }
  - id: wait
    needs: [ask]
    kind: pause
    resumeArg: answer
    state: waiting
";
    assert_eq!(digest(relaid), base);
    for changed in [
        PLAN.replace("Write about", "Write on"),
        PLAN.replace("b: 2", "b: 3"),
        PLAN.replace("default: parsing", "default: lexing"),
        PLAN.replace("agent: claude", "agent: codex"),
    ] {
        assert_ne!(digest(&changed), base, "{changed}");
    }
}

#[test]
fn the_argument_hash_leaves_out_resume_arguments_only() {
    let plan = plan::check(PLAN).expect("valid");
    let args = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let first = plan::args_hash(&plan, &args(&[]));
    // The default written out is the same input; the resume answer is not an input.
    assert_eq!(
        plan::args_hash(&plan, &args(&[("topic", "parsing")])),
        first
    );
    assert_eq!(plan::args_hash(&plan, &args(&[("answer", "yes")])), first);
    assert_ne!(plan::args_hash(&plan, &args(&[("topic", "lexing")])), first);
    assert_eq!(
        plan::resume_args(&plan).into_iter().collect::<Vec<_>>(),
        ["answer"]
    );
}
