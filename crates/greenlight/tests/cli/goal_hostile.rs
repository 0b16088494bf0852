//! The goal loop against a hostile agent (a scripted command agent): what it plants during its
//! turn must not change how the goal's gates are run, keyed or judged.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::time::Duration;

use crate::goal_support::{Fixture, GATE, kinds, of_kind};
use greenlight_testkit::{greenlight_bin, procs};

/// The agent writes a v2 verify.yaml declaring the goal's own gate with `inputs` that cover no
/// file, then runs `greenlight verify` in a scratch repository of its own where the check
/// passes: that stores a PASS under exactly the key the goal would compute from the planted
/// file. The goal's gates were fixed when it started (no verify.yaml then), so the gate runs
/// for real and fails.
#[test]
fn an_agent_written_verify_yaml_cannot_key_the_goal_gate_onto_a_planted_pass() {
    let fx = Fixture::new();
    let planted = "version: 2\\ngates:\\n  - id: check\\n    command: sh check.sh\\n    timeoutSec: 300\\n    inputs: [\\\"no-such-file\\\"]\\n";
    let scratch_yaml = "version: 2\\noptions:\\n  skipInPrimaryCheckout: false\\ngates:\\n  - id: check\\n    command: sh check.sh\\n    timeoutSec: 300\\n    inputs: [\\\"no-such-file\\\"]\\n";
    let body = format!(
        "mkdir -p .greenlight\n\
         printf '{planted}' > .greenlight/verify.yaml\n\
         R=\"$S/own-repo\"; rm -rf \"$R\"; git init -q \"$R\"; mkdir -p \"$R/.greenlight\"\n\
         cp check.sh \"$R/\"; echo good > \"$R/value.txt\"\n\
         printf '{scratch_yaml}' > \"$R/.greenlight/verify.yaml\"\n\
         (cd \"$R\" && git add -A && git -c user.email=a@b -c user.name=a commit -qm own && \
          GREENLIGHT_STATE=\"$S/state.db\" '{bin}' verify --skip-work-evidence --no-cache --base-ref HEAD > \"$S/planted.out\" 2>&1)\n\
         echo planted",
        bin = greenlight_bin().display()
    );
    let agent = fx.script("agent.sh", &body);
    let out = fx.run_goal("fix the value", &agent, GATE, &["--max-turns", "1"]);
    let planted_out = std::fs::read_to_string(fx.scratch().join("planted.out")).unwrap();
    assert!(
        planted_out.contains("GATE check PASS"),
        "the agent's own verify must have stored its PASS: {planted_out}"
    );
    assert_eq!(out.code, 75, "{}", out.render());
    assert!(
        out.stdout.contains("gate 1 FAIL exit=1  $ sh check.sh"),
        "{}",
        out.render()
    );
    assert!(!out.stdout.contains("goal 1 done"), "{}", out.render());
    assert_eq!(
        fx.gate_verdicts_and_replays(),
        [("fail".into(), false.into())]
    );
}

/// The same planted file, now with `options.remote` and `run: remote` naming an endpoint the
/// agent chose: the goal never contacts it (nothing listens there; a goal that read the file
/// would warn that the cluster is unreachable) and runs its gate here.
#[test]
fn an_agent_written_remote_endpoint_is_never_used_by_the_goal() {
    let fx = Fixture::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let planted = format!(
        "version: 2\\noptions:\\n  remote:\\n    endpoint: http://127.0.0.1:{port}\\ngates:\\n  - id: check\\n    command: sh check.sh\\n    timeoutSec: 300\\n    run: remote\\n"
    );
    let body =
        format!("mkdir -p .greenlight\nprintf '{planted}' > .greenlight/verify.yaml\necho planted");
    let agent = fx.script("agent.sh", &body);
    let out = fx.run_goal("fix the value", &agent, GATE, &["--max-turns", "1"]);
    assert_eq!(out.code, 75, "{}", out.render());
    assert!(
        out.stdout.contains("gate 1 FAIL exit=1  $ sh check.sh"),
        "{}",
        out.render()
    );
    assert!(
        listener.accept().is_err(),
        "the goal connected to the endpoint the agent planted"
    );
    assert!(!out.stderr.contains("127.0.0.1"), "{}", out.render());
}

/// A goal started from a v2 verify.yaml keeps the file as it was: an agent that rewrites it to
/// key its gate on nothing cannot get a planted PASS replayed, on this run or on a resume.
#[test]
fn a_goal_from_verify_yaml_keeps_its_snapshot_through_a_resume() {
    let fx = Fixture::new();
    fx.repo.write(
        ".greenlight/verify.yaml",
        "version: 2\ngates:\n  - id: check\n    command: sh check.sh\n    timeoutSec: 30\n    inputs: [\"check.sh\", \"value.txt\"]\n",
    );
    fx.repo.commit_all("gates");
    let planted = "version: 2\\ngates:\\n  - id: check\\n    command: sh check.sh\\n    timeoutSec: 30\\n    inputs: [\\\"no-such-file\\\"]\\n";
    let scratch_yaml = "version: 2\\noptions:\\n  skipInPrimaryCheckout: false\\ngates:\\n  - id: check\\n    command: sh check.sh\\n    timeoutSec: 30\\n    inputs: [\\\"no-such-file\\\"]\\n";
    let body = format!(
        "printf '{planted}' > .greenlight/verify.yaml\n\
         R=\"$S/own-repo\"; rm -rf \"$R\"; git init -q \"$R\"; mkdir -p \"$R/.greenlight\"\n\
         cp check.sh \"$R/\"; echo good > \"$R/value.txt\"\n\
         printf '{scratch_yaml}' > \"$R/.greenlight/verify.yaml\"\n\
         (cd \"$R\" && git add -A && git -c user.email=a@b -c user.name=a commit -qm own && \
          GREENLIGHT_STATE=\"$S/state.db\" '{bin}' verify --skip-work-evidence --no-cache --base-ref HEAD > \"$S/planted.out\" 2>&1)\n\
         echo \"turn $N\" >> notes.txt\n\
         echo planted",
        bin = greenlight_bin().display()
    );
    let agent = fx.script("agent.sh", &body);
    let agent_arg = fx.agent(&agent);
    let out = fx.goal(&["run", "fix", "--agent", &agent_arg, "--max-turns", "1"]);
    assert_eq!(out.code, 75, "{}", out.render());
    let planted_out = std::fs::read_to_string(fx.scratch().join("planted.out")).unwrap();
    assert!(planted_out.contains("GATE check PASS"), "{planted_out}");
    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 75, "{}", out.render());
    assert!(!out.stdout.contains("PASS"), "{}", out.render());
    let runs = fx.gate_verdicts_and_replays();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(runs.iter().all(|(v, _)| v == "fail"), "{runs:?}");
}

/// An agent process that escapes its turn (`setsid env -i`: its own session, no marker, no
/// token) and rewrites the file the gate reads while the gate reads it. Every process left
/// from the turn is ended before any gate runs, and reported.
#[test]
fn a_process_escaped_from_the_turn_is_ended_before_the_gates() {
    let fx = Fixture::new();
    let agent = fx.script(
        "agent.sh",
        "setsid env -i /bin/sh -c 'echo $$ > \"$0/escaped.pid\"; sleep 0.5; echo good > value.txt; sleep 3; echo bad > value.txt; sleep 30' \"$S\" < /dev/null > /dev/null 2>&1 &\n\
         while [ ! -s \"$S/escaped.pid\" ]; do sleep 0.02; done\n\
         echo 'left a helper running'",
    );
    let out = fx.run_goal(
        "fix the value",
        &agent,
        "sleep 1; sh check.sh",
        &["--max-turns", "1"],
    );
    let escaped = fx.pid_in("escaped.pid");
    let survived = procs::alive(escaped);
    procs::end(escaped);
    assert!(!survived, "the escaped process outlived the goal run");
    assert_eq!(out.code, 75, "{}", out.render());
    assert!(out.stdout.contains("gate 1 FAIL"), "{}", out.render());
    // The escaped shell, and perhaps its `sleep` if it was adopted before the group's SIGKILL
    // reached it.
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains("process(es) the agent's turn left running:"))
        .unwrap_or_else(|| panic!("no report of the leftovers: {}", out.render()));
    assert!(line.contains(&format!("pid {escaped} (")), "{line}");
    procs::wait_until(
        Duration::from_secs(5),
        "the escaped process is gone",
        || (!procs::alive(escaped)).then_some(()),
    );
    let events = fx.log();
    let ended = of_kind(&events, "agent-leftovers-ended");
    assert_eq!(ended.len(), 1, "{:?}", kinds(&events));
    let pids: Vec<i64> = ended[0]["payload"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_i64().unwrap())
        .collect();
    assert!(pids.contains(&i64::from(escaped)), "{pids:?}");
    let order = kinds(&events);
    let at = |k: &str| order.iter().position(|x| x == k).unwrap();
    assert!(at("dispatch-ended") < at("agent-leftovers-ended"));
    assert!(at("agent-leftovers-ended") < at("gate-run"));
}

/// A person's `goal gate add` takes verify.yaml as it is then: a goal started with `--gate` and
/// no verify.yaml (no cache), whose person then declares the gate in a v2 verify.yaml and adds
/// another gate, replays the PASS `verify` stored for the fixed tree instead of running it.
#[test]
fn a_persons_gate_add_takes_verify_yaml_as_it_is_then() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", "echo notes >> notes.txt\necho 'looked around'");
    let out = fx.run_goal("fix the value", &agent, GATE, &["--max-turns", "1"]);
    assert_eq!(out.code, 75, "{}", out.render());
    // The person fixes the tree, declares the gate, and lets verify store its PASS.
    fx.repo.write("value.txt", "good\n");
    fx.repo.write(
        ".greenlight/verify.yaml",
        "version: 2\ngates:\n  - id: check\n    command: sh check.sh\n    timeoutSec: 300\n    inputs: [\"check.sh\", \"value.txt\"]\n",
    );
    let state = fx.state();
    let verify = fx.repo.greenlight([
        "verify",
        "--skip-work-evidence",
        "--base-ref",
        "HEAD",
        "--state",
        state.to_str().unwrap(),
    ]);
    assert!(
        verify.stdout.contains("GATE check PASS"),
        "{}",
        verify.render()
    );
    let added = fx.goal(&["gate", "add", "true"]);
    assert_eq!(added.code, 0, "{}", added.render());
    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        fx.gate_verdicts_and_replays(),
        [
            ("fail".into(), false.into()),
            ("pass".into(), true.into()),
            ("pass".into(), false.into())
        ],
        "gate 1 replayed from verify's cache, gate 2 ran"
    );
}
