//! `greenlight mcp` driven by a client this project did not write: the official Python MCP SDK
//! (PyPI `mcp`, its `ClientSession` over `stdio_client`, which starts the real binary as an MCP
//! host does). The driver `mcp/client.py` runs one scenario and prints what it saw as JSON;
//! these tests set up real git worktrees and assert on that JSON: the tool list and its
//! schemas, green and red runs whose every structured answer validates against the tool's
//! outputSchema (checked by the SDK and again by `jsonschema`, Draft 2020-12), ordered progress
//! with a heartbeat, a cancel that leaves no gate process by pid, and a 50 MB output paged whole.
//!
//! The SDK lives in a venv that `scripts/ci/install-python-mcp.sh` makes (scripts/test runs it);
//! its python is `GREENLIGHT_PYTHON_MCP`, default `.tools/venv-mcp/bin/python` under the
//! workspace root. A missing one fails the test naming the script.

#![allow(clippy::unwrap_used, clippy::print_stderr)]

use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use greenlight_testkit::{TempRepo, greenlight_bin, load, procs};
use serde_json::{Value, json};

/// The tools in the order `tools/list` gives them.
const TOOLS: [&str; 9] = [
    "verify",
    "digest",
    "evidence",
    "goal_status",
    "goal_log",
    "goal_pause",
    "goal_resume",
    "workflow_status",
    "workflow_list",
];

/// The tools that only read: their `readOnlyHint` is true.
const READ_ONLY: [&str; 6] = [
    "digest",
    "evidence",
    "goal_status",
    "goal_log",
    "workflow_status",
    "workflow_list",
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The venv's python with `mcp` and `jsonschema`, or the test fails naming the install script.
fn python() -> PathBuf {
    let (path, from_env) = match std::env::var_os("GREENLIGHT_PYTHON_MCP") {
        Some(path) => (PathBuf::from(path), true),
        None => (workspace_root().join(".tools/venv-mcp/bin/python"), false),
    };
    let how = if from_env {
        "GREENLIGHT_PYTHON_MCP names it; point it at a python that imports mcp and jsonschema, \
         or unset it and run scripts/ci/install-python-mcp.sh"
    } else {
        "run scripts/ci/install-python-mcp.sh (scripts/test does it), or set \
         GREENLIGHT_PYTHON_MCP to a python that imports mcp and jsonschema"
    };
    assert!(
        path.is_file(),
        "the MCP acceptance tests need the Python MCP SDK: {} is missing; {how}",
        path.display()
    );
    let imports = Command::new(&path)
        .args(["-c", "import mcp, jsonschema"])
        .output()
        .unwrap();
    assert!(
        imports.status.success(),
        "{} cannot import mcp and jsonschema ({}); {how}",
        path.display(),
        String::from_utf8_lossy(&imports.stderr).trim()
    );
    path
}

fn driver_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/mcp/client.py")
}

/// The state database of the server a scenario starts (beside the repo's HOME).
fn state_of(repo: &TempRepo) -> PathBuf {
    repo.home().join("state.db")
}

/// The driver running `scenario` against a server started in `repo`, with the environment
/// `TempRepo::greenlight` gives the binary (isolated HOME, lock root, state).
fn driver(repo: &TempRepo, scenario: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg(driver_script())
        .arg(scenario)
        .arg("--server")
        .arg(greenlight_bin())
        .arg("--cwd")
        .arg(repo.path())
        .args(args)
        .current_dir(repo.path())
        .env("HOME", repo.home())
        .env("CM_VERIFY_LOCK_ROOT", repo.lock_root())
        .env("NO_COLOR", "1")
        .env("GREENLIGHT_STATE", state_of(repo))
        .env("XDG_STATE_HOME", repo.home().join("state"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("CM_WORKTREE_INDEX")
        .env_remove("CM_WORKTREE_ID")
        .env_remove("GREENLIGHT_NO_RECORD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    cmd
}

/// A running driver; dropped unfinished, its process group is killed (the server, in a session
/// of its own, then sees its input end and stops its gates).
struct Running {
    child: Option<Child>,
    out: std::thread::JoinHandle<Vec<u8>>,
    err: std::thread::JoinHandle<Vec<u8>>,
}

impl Running {
    fn start(mut cmd: Command) -> Running {
        let mut child = cmd.spawn().expect("start the Python MCP driver");
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stdout.read_to_end(&mut buf);
            buf
        });
        let err = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stderr.read_to_end(&mut buf);
            buf
        });
        Running {
            child: Some(child),
            out,
            err,
        }
    }

    /// Waits at most `limit` for the driver and returns its JSON document.
    fn finish(mut self, limit: Duration) -> Value {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if Instant::now() > deadline {
                kill_group(&mut child);
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = std::mem::replace(&mut self.out, std::thread::spawn(Vec::new))
            .join()
            .unwrap();
        let err = std::mem::replace(&mut self.err, std::thread::spawn(Vec::new))
            .join()
            .unwrap();
        let stderr = String::from_utf8_lossy(&err);
        let Some(status) = status else {
            panic!("the Python MCP driver ran past {limit:?}; its stderr:\n{stderr}");
        };
        let doc: Value = serde_json::from_slice(&out).unwrap_or_else(|e| {
            panic!(
                "the driver ({status}) printed no JSON document ({e}): {}\n--- stderr\n{stderr}",
                String::from_utf8_lossy(&out)
            )
        });
        assert!(
            status.success() && doc.get("failure").is_none(),
            "the driver failed ({status}): {}\n{}\n--- stderr\n{stderr}",
            doc["failure"],
            doc["traceback"].as_str().unwrap_or_default()
        );
        doc
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            kill_group(child);
        }
    }
}

fn kill_group(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
}

fn run_driver(repo: &TempRepo, scenario: &str, args: &[&str], limit: Duration) -> Value {
    Running::start(driver(repo, scenario, args)).finish(limit)
}

/// The one answer of `calls` for the call at `index`, after checking it is a valid result:
/// no protocol error, structured content present and valid against the tool's outputSchema.
fn valid_answer(calls: &[Value], index: usize) -> &Value {
    let call = &calls[index];
    assert!(
        call.get("error").is_none(),
        "call {index} ({}) failed: {}",
        call["tool"],
        call["error"]
    );
    assert!(
        call["structured"].is_object(),
        "call {index} ({}) has no structured content: {call}",
        call["tool"]
    );
    assert_eq!(
        call["schema_errors"],
        json!([]),
        "call {index} ({}) does not match its outputSchema: {}",
        call["tool"],
        call["structured"]
    );
    call
}

fn calls(repo: &TempRepo, calls: &Value, limit: Duration) -> Vec<Value> {
    let doc = run_driver(repo, "calls", &["--calls", &calls.to_string()], limit);
    doc["calls"].as_array().unwrap().clone()
}

fn progress_messages(call: &Value) -> Vec<String> {
    call["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
#[ignore = "needs the Python mcp package: run scripts/test"]
fn tools_list_has_the_nine_tools_with_schemas_and_read_only_hints() {
    let repo = TempRepo::worktree_with_commit();
    let doc = run_driver(&repo, "tools", &[], Duration::from_secs(60));
    assert_eq!(doc["server"]["name"], "greenlight");
    let tools = doc["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, TOOLS);
    for tool in tools {
        let name = tool["name"].as_str().unwrap();
        assert!(
            tool["description"].as_str().is_some_and(|d| d.len() > 40),
            "{name} has no description worth reading: {tool}"
        );
        for schema in ["input_schema", "output_schema"] {
            assert_eq!(
                tool[schema]["type"], "object",
                "{name}'s {schema} is not an object schema: {tool}"
            );
            let problems = format!("{schema}_problems");
            assert_eq!(
                tool[&problems],
                json!([]),
                "{name}'s {schema} is not a Draft 2020-12 schema"
            );
        }
        let read_only = &tool["annotations"]["readOnlyHint"];
        if READ_ONLY.contains(&name) {
            assert_eq!(read_only, &json!(true), "{name}: {tool}");
        } else {
            assert_ne!(read_only, &json!(true), "{name} is not read-only: {tool}");
        }
    }
    let verify = &tools[0];
    let inputs = verify["input_schema"]["properties"].as_object().unwrap();
    let mut keys: Vec<&str> = inputs.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "base_ref",
            "cwd",
            "explain",
            "gates",
            "no_cache",
            "skip_work_evidence"
        ]
    );
    let required = &verify["output_schema"]["required"];
    for field in ["result", "exit_code", "run_id", "gates", "warnings"] {
        assert!(
            required.as_array().unwrap().contains(&json!(field)),
            "verify's outputSchema does not require `{field}`: {required}"
        );
    }
}

/// A unittest module with one passing and one failing test: output the digest recognises.
const FAILING_UNITTEST: &str = "import unittest\n\n\nclass Arithmetic(unittest.TestCase):\n    def test_addition(self):\n        self.assertEqual(1 + 1, 3)\n\n    def test_subtraction(self):\n        self.assertEqual(3 - 1, 2)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";

#[test]
#[ignore = "needs the Python mcp package: run scripts/test"]
fn green_and_red_worktrees_answer_passed_and_failed_and_every_answer_fits_its_schema() {
    let green = TempRepo::worktree_with_commit();
    green.verify_yaml(
        "version: 1\ngates:\n  - id: lint\n    command: echo linted\n  - id: unit\n    command: \"true\"\n",
    );
    let red = TempRepo::worktree_with_commit();
    red.write("test_arithmetic.py", FAILING_UNITTEST);
    red.verify_yaml(
        "version: 1\ngates:\n  - id: unit\n    command: python3 -m unittest\n  - id: build\n    command: echo 'error: the build broke' >&2; exit 3\n",
    );
    // What the red unit gate prints, from the real tool, for the `digest` tool to read.
    let unittest = Command::new("python3")
        .args(["-m", "unittest"])
        .current_dir(red.path())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert_eq!(unittest.status.code(), Some(1), "{unittest:?}");
    let unittest_output = String::from_utf8_lossy(&unittest.stderr).into_owned();
    let goal = load::create_goal(&state_of(&green), green.path());
    let red_dir = red.path().to_str().unwrap();
    let no_config = green.home().to_str().unwrap();
    let answers = calls(
        &green,
        &json!([
            {"tool": "verify", "arguments": {}},
            {"tool": "verify", "arguments": {"cwd": red_dir}},
            {"tool": "evidence", "arguments": {"run_id": "$run_id", "gate": "build"}},
            {"tool": "digest", "arguments": {"text": unittest_output, "exit_code": 1}},
            {"tool": "goal_status", "arguments": {"id": goal.0}},
            {"tool": "goal_log", "arguments": {"id": goal.0}},
            {"tool": "goal_pause", "arguments": {"id": goal.0}},
            {"tool": "goal_resume", "arguments": {"id": goal.0}},
            {"tool": "verify", "arguments": {"cwd": no_config}},
        ]),
        Duration::from_secs(120),
    );
    assert_eq!(answers.len(), 9);
    for (i, answer) in answers.iter().enumerate().take(8) {
        valid_answer(&answers, i);
        assert_eq!(answer["is_error"], false, "call {i}: {answer}");
    }

    let passed = &answers[0]["structured"];
    assert_eq!(passed["result"], "passed", "{passed}");
    assert_eq!(passed["exit_code"], 0);
    let verdicts: Vec<&Value> = passed["gates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| &g["verdict"])
        .collect();
    assert_eq!(verdicts, [&json!("PASS"), &json!("PASS")]);

    let failed = &answers[1]["structured"];
    assert_eq!(failed["result"], "failed", "{failed}");
    assert_eq!(failed["exit_code"], 20);
    assert_eq!(
        answers[1]["is_error"], false,
        "a red gate is not a tool error"
    );
    let unit = &failed["gates"][0];
    assert_eq!(
        (&unit["id"], &unit["verdict"]),
        (&json!("unit"), &json!("FAIL"))
    );
    let compact = unit["digest_compact"].as_str().unwrap_or_else(|| {
        panic!("the unittest failure was not recognised: {unit}");
    });
    assert!(
        compact.contains("test_addition") && compact.contains("test_arithmetic.py"),
        "the compact digest names the failing test and its file: {compact}"
    );
    assert!(!compact.contains("test_subtraction"), "{compact}");
    let build = &failed["gates"][1];
    assert_eq!(build["exit_code"], 3);
    assert_eq!(build["digest_compact"], Value::Null, "{build}");
    assert_eq!(build["tail"], "error: the build broke\n");
    assert!(
        answers[1]["text"]
            .as_str()
            .unwrap()
            .contains("RESULT failed exit=20"),
        "the text form carries the verdict too: {}",
        answers[1]["text"]
    );

    let page = &answers[2]["structured"];
    assert_eq!(page["text"], "error: the build broke\n");
    assert_eq!(page["next_offset"], Value::Null);
    let digest = &answers[3]["structured"];
    assert_eq!(digest["classification"], "recognised", "{digest}");
    assert_eq!(digest["format"], "unittest", "{digest}");
    let failures = digest["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{digest}");
    assert!(
        failures[0]["name"]
            .as_str()
            .is_some_and(|n| n.contains("test_addition")),
        "{digest}"
    );
    assert_eq!(answers[4]["structured"]["goal"]["id"], goal.0);
    assert_eq!(answers[6]["structured"]["goal"]["state"], "paused");
    assert_eq!(answers[7]["structured"]["goal"]["state"], "active");

    let cannot = &answers[8];
    assert!(cannot.get("error").is_none(), "{cannot}");
    assert_eq!(
        cannot["is_error"], true,
        "a verify that cannot run: {cannot}"
    );
    assert!(
        cannot["text"]
            .as_str()
            .unwrap()
            .contains("no .greenlight/verify.yaml or .commandmate/verify.yaml in"),
        "{cannot}"
    );
}

/// How long the slow gate of the progress test runs: past one heartbeat (10 s) with 5 s to
/// spare, and no longer, since it is the longest wait of the suite.
const SLOW_GATE_SECS: u64 = 15;

#[test]
#[ignore = "needs the Python mcp package: run scripts/test"]
fn progress_arrives_in_order_before_the_result_with_a_heartbeat_while_a_gate_runs() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(&format!(
        "version: 1\ngates:\n  - id: first\n    command: echo one\n  - id: slow\n    command: sleep {SLOW_GATE_SECS}\n  - id: last\n    command: echo nope; exit 1\n"
    ));
    let answers = calls(
        &repo,
        &json!([{"tool": "verify", "arguments": {}, "progress": true}]),
        Duration::from_secs(90),
    );
    let call = valid_answer(&answers, 0);
    assert_eq!(call["structured"]["result"], "failed");

    // The wire: every progress notification of the call, then its response, nothing after.
    let wire = call["wire"].as_array().unwrap();
    let (response, progress) = wire.split_last().unwrap();
    assert_eq!(
        response["kind"], "response",
        "the answer comes last: {wire:?}"
    );
    assert!(progress.iter().all(|e| e["kind"] == "progress"), "{wire:?}");
    let values: Vec<f64> = progress
        .iter()
        .map(|e| e["progress"].as_f64().unwrap())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "progress strictly increases: {values:?}"
    );
    // The callback saw the same notifications in the same order, all before call_tool returned.
    let seen = progress_messages(call);
    let sent: Vec<String> = progress
        .iter()
        .map(|e| e["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(seen, sent);

    let at = |text: &str| {
        seen.iter()
            .position(|m| m.starts_with(text))
            .unwrap_or_else(|| panic!("no progress message `{text}…` in {seen:#?}"))
    };
    let mut last = 0;
    for (n, gate, verdict) in [
        (1, "first", "PASS"),
        (2, "slow", "PASS"),
        (3, "last", "FAIL"),
    ] {
        let started = at(&format!("gate {n}/3 {gate}: started"));
        let finished = at(&format!("gate {n}/3 {gate}: {verdict}"));
        assert!(
            last <= started && started < finished,
            "gate {gate} starts after the gate before it and finishes after it starts: {seen:#?}"
        );
        last = finished;
    }
    let beats: Vec<u64> = seen
        .iter()
        .filter_map(|m| m.strip_prefix("gate 2/3 slow: running for "))
        .map(|rest| rest.trim_end_matches(" s").parse().unwrap())
        .collect();
    assert!(
        !beats.is_empty(),
        "a gate running {SLOW_GATE_SECS} s gets a heartbeat: {seen:#?}"
    );
    assert!(
        beats.iter().all(|&s| (8..=SLOW_GATE_SECS).contains(&s)),
        "heartbeats say how long the gate has run: {beats:?}"
    );
    let beat = at("gate 2/3 slow: running for ");
    assert!(at("gate 2/3 slow: started") < beat && beat < at("gate 2/3 slow: PASS"));
}

#[test]
#[ignore = "needs the Python mcp package: run scripts/test"]
fn a_cancelled_verify_leaves_no_gate_process_and_the_server_answers_the_next_call() {
    let repo = TempRepo::worktree_with_commit();
    let gate_pid = repo.home().join("gate.pid");
    let child_pid = repo.home().join("child.pid");
    repo.verify_yaml(&format!(
        "version: 1\ngates:\n  - id: sleeper\n    command: 'sleep 60 & echo $! > {child}; echo $$ > {gate}; exec sleep 60'\n  - id: quick\n    command: echo quick\n",
        child = child_pid.display(),
        gate = gate_pid.display(),
    ));
    let cancelled = repo.home().join("cancelled");
    let resume = repo.home().join("resume");
    let running = Running::start(driver(
        &repo,
        "cancel",
        &[
            "--verify",
            r#"{"gates": ["sleeper"]}"#,
            "--wait-file",
            gate_pid.to_str().unwrap(),
            "--wait-file",
            child_pid.to_str().unwrap(),
            "--cancelled-marker",
            cancelled.to_str().unwrap(),
            "--resume-marker",
            resume.to_str().unwrap(),
            "--then",
            r#"{"gates": ["quick"]}"#,
        ],
    ));
    procs::wait_until(
        Duration::from_secs(60),
        "the driver never cancelled the call",
        || cancelled.exists().then_some(()),
    );
    let pids = [
        procs::wait_for_pid(&gate_pid),
        procs::wait_for_pid(&child_pid),
    ];
    // The session is still open: only the cancel can have ended them.
    let since = Instant::now();
    let ended = (|| {
        while since.elapsed() < Duration::from_secs(5) {
            if pids.iter().all(|&p| !procs::alive(p)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    })();
    let took = since.elapsed();
    procs::assert_all_dead(&pids, "gate processes left running 5 s after the cancel");
    assert!(ended);
    std::fs::write(&resume, "go\n").unwrap();
    let doc = running.finish(Duration::from_secs(60));
    let gone_ms = doc["pids_gone_ms"].as_u64().unwrap_or_else(|| {
        panic!("the driver saw the gate processes outlive the cancel by 10 s: {doc}")
    });
    eprintln!(
        "cancel: the gate and its child were gone {gone_ms} ms after the client cancelled \
         (the client's cancel returned in {} ms; checked here {took:?} after it said so)",
        doc["cancel_returned_ms"]
    );
    assert!(gone_ms < 5000, "{doc}");

    assert_eq!(doc["cancelled_call_finished"], Value::Null, "{doc}");
    let early = doc["cancelled_call_wire"].as_array().unwrap();
    let token = &early
        .first()
        .unwrap_or_else(|| panic!("the cancelled call sent no progress: {doc}"))["token"];
    let wire = doc["wire"].as_array().unwrap();
    assert!(
        !wire
            .iter()
            .any(|e| e["kind"] != "progress" && &e["id"] == token),
        "a cancelled request gets no answer: {wire:?}"
    );
    let then = &doc["then"];
    assert!(then.get("error").is_none(), "{then}");
    assert_eq!(then["structured"]["result"], "passed", "{then}");
    assert_eq!(then["structured"]["gates"][0]["id"], "quick");
    assert_eq!(then["schema_errors"], json!([]));
}

/// Bytes of random data the big gate encodes: base64 makes it 50,657,895 bytes of output.
const RANDOM_BYTES: u64 = 37_500_000;

#[test]
#[ignore = "needs the Python mcp package: run scripts/test"]
fn a_50_mb_gate_output_pages_whole_through_evidence() {
    let repo = TempRepo::worktree_with_commit();
    let printed = repo.home().join("printed.txt");
    let joined = repo.home().join("joined.txt");
    repo.verify_yaml(&format!(
        "version: 1\ngates:\n  - id: big\n    command: head -c {RANDOM_BYTES} /dev/urandom | base64 | tee {}\n",
        printed.display()
    ));
    let limit = 1u64 << 20;
    let doc = run_driver(
        &repo,
        "evidence",
        &[
            "--verify",
            "{}",
            "--gate",
            "big",
            "--limit",
            &limit.to_string(),
            "--out",
            joined.to_str().unwrap(),
        ],
        Duration::from_secs(300),
    );
    let expected = std::fs::read(&printed).unwrap();
    assert!(expected.len() > 50_000_000, "{}", expected.len());
    let verify = &doc["verify"];
    assert_eq!(verify["structured"]["result"], "passed", "{verify}");
    assert_eq!(verify["schema_errors"], json!([]));
    assert_eq!(
        verify["structured"]["gates"][0]["output_bytes"],
        expected.len()
    );

    let paging = &doc["paging"];
    assert_eq!(paging["problems"], json!([]), "{paging}");
    assert_eq!(paging["bytes"], expected.len());
    assert_eq!(paging["total_bytes"], expected.len());
    let pages = paging["pages"].as_u64().unwrap();
    assert_eq!(pages, (expected.len() as u64).div_ceil(limit), "{paging}");
    let got = std::fs::read(&joined).unwrap();
    assert!(
        got == expected,
        "the pages joined ({} bytes) differ from what the gate printed ({} bytes)",
        got.len(),
        expected.len()
    );
    eprintln!(
        "evidence: {} bytes in {pages} pages of {limit} bytes in {} s (sha256 {}); verify took {} s",
        expected.len(),
        paging["seconds"],
        paging["sha256"].as_str().unwrap(),
        verify["seconds"]
    );
}
