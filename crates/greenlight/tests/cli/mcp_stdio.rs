//! `greenlight mcp` over a raw pipe, one JSON-RPC line at a time, as no SDK would write them:
//! a line that is not JSON, an unknown tool, an argument of the wrong type and a `cwd` that is
//! not a directory each get a JSON-RPC error whose message names what is wrong, and the server
//! goes on serving: the valid call after them runs its gates, and the server exits 0 when its
//! input ends, or 143 on SIGTERM with its input still open.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use greenlight_testkit::TempRepo;
use serde_json::{Value, json};

/// How long one answer may take (a verify of two `echo` gates included).
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

pub(crate) struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Server {
    pub(crate) fn start(repo: &TempRepo) -> Server {
        let mut child = repo
            .command(["mcp"])
            .env("GREENLIGHT_STATE", repo.home().join("state.db"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Server {
            child,
            stdin,
            lines,
        }
    }

    pub(crate) fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The handshake, checking that the server names itself.
    pub(crate) fn initialize(&mut self) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "raw pipe", "version": "1"}}})
            .to_string(),
        );
        let init = self.answer();
        assert_eq!(init["result"]["serverInfo"]["name"], "greenlight", "{init}");
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    /// The next line the server writes, as JSON.
    pub(crate) fn answer(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(ANSWER_WITHIN)
            .unwrap_or_else(|e| panic!("the server wrote no line within {ANSWER_WITHIN:?}: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Sends `line` and returns the error the server answers it with (code, message).
    fn error_for(&mut self, line: &str, id: &Value) -> (i64, String) {
        self.send(line);
        let answer = self.answer();
        assert_eq!(&answer["id"], id, "{answer}");
        assert!(
            answer.get("result").is_none(),
            "{line} was answered: {answer}"
        );
        let code = answer["error"]["code"].as_i64().unwrap();
        let message = answer["error"]["message"].as_str().unwrap().to_owned();
        (code, message)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub(crate) fn call(id: u64, tool: &str, arguments: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
        .to_string()
}

#[test]
fn malformed_requests_get_errors_that_name_the_fault_and_the_server_keeps_serving() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: lint\n    command: echo linted\n");
    let mut server = Server::start(&repo);
    server.initialize();

    let (code, message) = server.error_for(r#"{"jsonrpc":"2.0","id":1,"method":"#, &Value::Null);
    assert_eq!(code, -32700, "{message}");
    assert!(message.contains("line 3 is not JSON"), "{message}");

    let (code, message) = server.error_for(&call(2, "nope", &json!({})), &json!(2));
    assert_eq!(code, -32602, "{message}");
    assert!(
        message.contains("unknown tool `nope`") && message.contains("verify, digest, evidence"),
        "{message}"
    );

    let (code, message) = server.error_for(&call(3, "verify", &json!({"gates": 5})), &json!(3));
    assert_eq!(code, -32602, "{message}");
    assert!(
        message.contains("argument `gates`") && message.contains("expected a sequence"),
        "{message}"
    );

    let file = repo.path().join("src/work.txt");
    let (code, message) = server.error_for(
        &call(4, "verify", &json!({"cwd": file.to_str().unwrap()})),
        &json!(4),
    );
    assert_eq!(code, -32602, "{message}");
    assert!(
        message.contains(&format!("`cwd` {} is not a directory", file.display())),
        "{message}"
    );

    server.send(&call(5, "verify", &json!({})));
    let answer = server.answer();
    assert_eq!(answer["id"], 5, "{answer}");
    let result = &answer["result"];
    assert_eq!(result["isError"], false, "{answer}");
    assert_eq!(result["structuredContent"]["result"], "passed", "{answer}");
    assert_eq!(result["structuredContent"]["gates"][0]["id"], "lint");

    drop(server.stdin.take());
    let status = greenlight_testkit::procs::wait_until(
        Duration::from_secs(10),
        "the server did not exit when its input ended",
        || server.child.try_wait().unwrap(),
    );
    assert!(status.success(), "{status}");
}

/// Zombie children of `parent`, from `/proc`.
fn zombies_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Some(fields) = greenlight_testkit::procs::stat_fields(&pid.to_string()) else {
            continue;
        };
        if fields.len() > 1 && fields[0] == "Z" && fields[1] == parent.to_string() {
            found.push(pid);
        }
    }
    found
}

#[test]
fn a_process_that_left_its_session_and_ended_later_is_reaped_not_left_a_zombie() {
    let repo = TempRepo::worktree_with_commit();
    // Two gates run at once, so adopted processes are not claimed by either; the first starts
    // a process in a session of its own without greenlight's token, which outlives the gate and
    // is adopted by the server (a child subreaper). Once no gate runs, the run ends it and reaps
    // it: it is neither alive nor left as the server's zombie.
    repo.verify_yaml(
        "version: 2\noptions:\n  cache: off\ngates:\n  - id: detach\n    command: setsid env -i /bin/sh -c 'echo $$ > detach.pid; sleep 30' </dev/null >/dev/null 2>&1 & while ! [ -s detach.pid ]; do sleep 0.05; done\n  - id: other\n    command: \"true\"\n",
    );
    let mut server = Server::start(&repo);
    server.initialize();
    server.send(&call(1, "verify", &json!({})));
    let answer = server.answer();
    assert_eq!(
        answer["result"]["structuredContent"]["result"], "passed",
        "{answer}"
    );
    let detached: i32 = repo.read("detach.pid").unwrap().trim().parse().unwrap();
    assert!(
        !greenlight_testkit::procs::alive(detached),
        "the detached process outlived the run"
    );
    let pid = server.child.id();
    assert!(
        !zombies_of(pid).contains(&(detached as u32)),
        "left as the server's zombie"
    );
}

/// A SIGTERM while a gate runs and the client keeps stdin open: the gate's group ends, its
/// mutex lock is released, and the server exits 143 at once. Before, the gates ended but the
/// server waited for the client's next line (tokio's stdin read could not be cancelled).
#[test]
fn sigterm_with_stdin_still_open_ends_the_running_gate_and_the_server_at_once() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: long\n    command: sleep 600 & echo $! >> pids; echo $$ >> pids; wait\n    mutex: held\n",
    );
    let mut server = Server::start(&repo);
    server.initialize();
    server.send(&call(1, "verify", &json!({})));
    let pids = repo.wait_for_pids("pids", 2, ANSWER_WITHIN);
    let lock = repo.lock_root().join("held.lock");
    assert!(lock.exists(), "the gate runs without its lock");

    greenlight_testkit::procs::signal("-TERM", server.child.id());
    let status = greenlight_testkit::procs::wait_until(
        Duration::from_secs(10),
        "the server did not exit after SIGTERM with stdin open",
        || server.child.try_wait().unwrap(),
    );
    assert!(server.stdin.is_some(), "stdin stayed open throughout");
    assert_eq!(status.code(), Some(143), "{status}");
    greenlight_testkit::procs::assert_all_dead(&pids, "the gate outlived the server's SIGTERM");
    assert!(!lock.exists(), "the lock outlived the server");
}

/// `printf '<initialize>\n<initialized>\n<tools/call verify>\n' | greenlight mcp` exited 0 with
/// only the handshake's answer: the call still running when stdin closed was never answered
/// (though its run completed and was stored): the SDK waits 5 s for handlers after its input
/// ends. Every call in flight at the end of input is answered before the server exits.
#[test]
fn calls_still_running_when_stdin_closes_are_answered_before_the_server_exits() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: slow\n    command: sleep 7; echo slept\n  - id: unit\n    command: echo broken; exit 4\n",
    );
    let mut input = String::new();
    input.push_str(
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "printf", "version": "1"}}})
        .to_string(),
    );
    input.push('\n');
    input.push_str(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    input.push('\n');
    input.push_str(&call(1, "verify", &json!({})));
    input.push('\n');
    input.push_str(&call(2, "verify", &json!({"gates": ["unit"]})));
    input.push('\n');
    let mut command = repo.command(["mcp"]);
    command.env("GREENLIGHT_STATE", repo.home().join("state.db"));
    let out = greenlight_testkit::Cli::from_command(command)
        .stdin(input)
        .within(Duration::from_secs(60))
        .run();
    assert_eq!(out.code, 0, "{}", out.render());
    let answers: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|m: &Value| m.get("id").is_some() && m.get("method").is_none())
        .collect();
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(ids.len(), 3, "{}", out.render());
    for id in [0, 1, 2] {
        assert!(
            ids.contains(&&json!(id)),
            "no answer to {id}: {}",
            out.render()
        );
    }
    let first = answers.iter().find(|a| a["id"] == 1).unwrap();
    let text = first["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("slow") && text.contains("unit"), "{first}");
    assert!(out.stderr.is_empty(), "{}", out.render());
}

/// Waiting for answers at the end of input is bounded: a request the MCP library refuses
/// without naming its id (params that are not an object) gets no answer with that id, and the
/// server still exits within seconds, naming it on stderr.
#[test]
fn a_request_refused_without_its_id_does_not_hold_the_server_at_the_end_of_input() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: lint\n    command: echo linted\n");
    let input = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "printf", "version": "1"}}})
        .to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"not an object"}"#.to_owned(),
        call(6, "verify", &json!({})),
    ]
    .join("\n")
        + "\n";
    let mut command = repo.command(["mcp"]);
    command.env("GREENLIGHT_STATE", repo.home().join("state.db"));
    let started = std::time::Instant::now();
    let out = greenlight_testkit::Cli::from_command(command)
        .stdin(input)
        .within(Duration::from_secs(30))
        .run();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.code, 1, "{}", out.render());
    assert!(
        out.stderr
            .contains("no answer naming request 5 was written"),
        "{}",
        out.render()
    );
    let verify = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|m| m["id"] == 6)
        .unwrap_or_else(|| panic!("no answer to the verify: {}", out.render()));
    assert_eq!(
        verify["result"]["structuredContent"]["result"], "passed",
        "{verify}"
    );
}

/// The `verify` tool reads greenlight's own `.greenlight/verify.yaml` (version 2 is allowed
/// there), as `greenlight verify` does.
#[test]
fn verify_reads_greenlight_s_own_config_home() {
    let repo = TempRepo::worktree_with_commit();
    repo.greenlight_yaml("version: 2\ngates:\n  - id: own\n    command: echo ours\n");
    let mut server = Server::start(&repo);
    server.initialize();
    server.send(&call(1, "verify", &json!({})));
    let answer = server.answer();
    let result = &answer["result"]["structuredContent"];
    assert_eq!(result["result"], "passed", "{answer}");
    assert_eq!(result["gates"][0]["id"], "own", "{answer}");
}
