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

#[test]
fn unknown_keys_wrong_types_and_domains_are_all_reported_with_their_positions() {
    let text = "\
workflow: 1
name: Bad Name
colour: blue
x-anything: [kept, 1]
budget: { dispatches: 0, costUsd: -1 }
steps:
  - id: a
    kind: agent
    agent: claude
    prompt: hi
    timeoutSec: \"90\"
    idempotent: yes
    deliverable: files
    writes: [/etc/passwd, ../up]
    x-note: fine
    colour: red
  - id: b
    kind: teleport
";
    assert_eq!(
        problems(text),
        [
            "2:7: `name` must be lowercase letters, digits, `-` or `_`, starting with a letter or digit, at most 64 characters; found `Bad Name`",
            "3:1: unknown key `colour` in the plan; allowed: workflow, name, description, base, agent, model, args, budget, steps (or an `x-` key of your own)",
            "5:23: `budget.dispatches` must be from 1 to 100000, found 0",
            "5:35: `budget.costUsd` must be above 0 and at most 1000000, found -1",
            "11:17: `timeoutSec` must be an integer, found the string `90`; remove the quotes",
            "12:17: `idempotent` must be true or false, found a string",
            "13:18: `deliverable` must be one of return-value, file, found `files`",
            "14:14: `writes`: declared path `/etc/passwd` is absolute; declare it relative to the root",
            "14:27: `writes`: declared path `../up` contains `..`; declare it without parent references",
            "16:5: unknown key `colour` in a step; allowed: id, kind, needs, prompt, agent, model, deliverable, reads, writes, idempotent, retry, timeoutSec (or an `x-` key of your own)",
            "18:11: `kind` must be one of agent, gate, fanout, join, pause, land, found `teleport`",
        ]
    );
}

#[test]
fn a_yaml_syntax_error_is_one_problem_at_its_position() {
    let found = problems("workflow: 1\nsteps: [a, b\n");
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("not valid YAML"), "{found:?}");
    assert!(
        found[0].starts_with("3:") || found[0].starts_with("2:"),
        "{found:?}"
    );
    let twice = problems("workflow: 1\nname: a\nname: b\nsteps: []\n");
    assert!(
        twice[0].contains("not valid YAML") && twice[0].contains("name"),
        "{twice:?}"
    );
}

#[test]
fn references_cycles_and_named_joins_are_checked_across_steps() {
    let text = "\
workflow: 1
name: refs
agent: claude
steps:
  - id: a
    kind: agent
    prompt: one
    needs: [c, ghost, a]
  - id: b
    kind: agent
    prompt: two
    needs: [a]
  - id: c
    kind: agent
    prompt: three
    needs: [b]
  - id: wide
    kind: fanout
    items: [x, y]
    maxFanout: 2
    template: { prompt: 'do {{item}}' }
  - id: uses-wide
    kind: agent
    prompt: after
    needs: [wide]
  - id: j
    kind: join
    for: a
    policy: any
  - id: gate
    kind: gate
    needs: [b]
    gates: [test]
    failRoute: nowhere
    maxRedos: 1
  - id: gate2
    kind: gate
    gates: [test]
    failRoute: c
  - id: a
    kind: pause
    state: s
    resumeArg: go
";
    assert_eq!(
        problems(text),
        [
            "5:9: the steps a → c → b → a wait for each other in a cycle; remove one of these needs",
            "8:16: step `a` needs `ghost`, which is no step of this plan",
            "8:23: step `a` needs itself; remove `a`",
            "17:9: fan-out `wide` has no join; add a step `kind: join` with `for: wide` and a policy",
            "25:13: step `uses-wide` needs fan-out `wide` directly; need its join instead, which decides whether the fan-out passed",
            "28:10: step `j` is `for` `a`, which is no fan-out",
            "34:16: gate `gate` routes its failure to `nowhere`, which is no step of this plan (write `terminal:<label>` to end the run there)",
            "39:16: gate `gate2` routes its failure to `c`, which it does not wait for; a fail route redoes work the gate judges, so add `c` to the gate's needs (directly or through a step)",
            "40:9: step id `a` is used twice; give each step its own id",
            "43:16: pause `a` resumes with argument `go`, which `args` does not declare; add `go:` under `args`",
        ]
    );
}

#[test]
fn fan_out_bounds_cuts_retries_pauses_and_placeholders_are_held_to_their_rules() {
    let text = "\
workflow: 1
name: rules
agent: codex
args: { topic: { default: x } }
budget: { dispatches: 3 }
steps:
  - id: wide
    kind: fanout
    items: [a, b, c, B]
    truncate: { to: 9 }
    template:
      prompt: same for all {{args.nope}} {{who}}
      retry: { maxAttempts: 3 }
  - id: j
    kind: join
    for: wide
    policy: quorum:5
  - id: once
    kind: agent
    prompt: 'use {{item}} and {{args.topic}}'
    deliverable: file
  - id: wait
    kind: pause
    state: waiting
    resumeArg: answer
  - id: ask
    kind: gate
    verdict: { prompt: judge }
    maxRedos: 2
";
    assert_eq!(
        problems(text),
        [
            "7:5: a fan-out has no `maxFanout`; say how many members may run at once (1 to 64)",
            "7:9: step `wide` may take 9 dispatch units at worst, more than the whole `budget.dispatches` of 3; raise the budget or lower its attempts, items or redos",
            "9:22: item key `B` must be lowercase letters, digits, `-`, `_` or `.`, at most 64 characters: it names a branch and a worktree",
            "10:15: `truncate` has no `reason`; a cut drops work, so say why",
            "10:15: fan-out `wide` truncates to 9 of its 3 items, which cuts nothing; remove `truncate`",
            "12:7: fan-out `wide`'s template never uses `{{item}}`, so every member would be asked the same; name the item in its prompt",
            "12:7: step `wide` uses `{{args.nope}}`, but `args` declares no `nope`",
            "12:7: step `wide` uses `{{who}}`; a placeholder is `{{item}}` or `{{args.NAME}}`",
            "13:7: step `wide` is retried (3 attempts) but not marked `idempotent: true`; a retry runs it twice, so mark it or set maxAttempts to 1",
            "13:7: step `wide` is retried but `retry.on` names no failure class (timeout, transport, malformed-output, policy-refusal); no failure would be retried",
            "17:13: join `j` asks a quorum of 5, but fan-out `wide` runs only 3 members",
            "18:9: step `once` delivers a file but declares no `writes`; name the files it must write",
            "20:13: step `once` uses `{{item}}`, which only a fan-out's template has",
            "25:16: pause `wait` resumes with argument `answer`, which `args` does not declare; add `answer:` under `args`",
            "26:9: gate `ask` has maxRedos 2 but no `failRoute` to a step to redo; add one or remove maxRedos",
        ]
    );
}

/// Nothing in a plan file may crash or stall the check: deep nesting and alias bombs are
/// refused as problems, quickly.
#[test]
fn hostile_yaml_is_a_problem_not_a_crash() {
    let deep = format!(
        "workflow: 1\nname: deep\nx-deep: {}{}\nsteps: []\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let bomb = "workflow: 1\nname: bomb\na: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\nsteps: []\n";
    let expanded = problems(bomb);
    assert!(
        expanded[0].contains("aliases (`*name`) expand to more than 10000 nodes"),
        "{expanded:?}"
    );
    for text in [
        deep.as_str(),
        bomb,
        "\u{feff}",
        "",
        "---\n...\n",
        "- a\n- b\n",
        "workflow: 1\nsteps: [\u{0}]\n",
    ] {
        let started = std::time::Instant::now();
        let found = problems(text);
        assert!(!found.is_empty());
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?} took {:?}",
            &text[..text.len().min(40)],
            started.elapsed()
        );
    }
}
