//! The stdio transport: one JSON-RPC message per line on stdin and stdout. Between the pipes
//! and the SDK sits a line check, because the SDK drops a line that is not JSON without a word:
//! here such a line is answered with a JSON-RPC parse error (-32700) and a line that is JSON but
//! not a JSON-RPC 2.0 message with an invalid-request error (-32600), each saying what was
//! wrong, and the server goes on reading. Every line reaches stdout whole, whoever wrote it.
//!
//! The end of input does not cut a call short: the SDK gives its handlers 5 s once its input
//! ends and drops what is still running, so its input is ended only once every request it was
//! given has been answered (or cancelled by the client). What the SDK still did not answer is
//! returned, for the binary to name.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

use crate::McpServer;

/// The longest line read (a message larger than this is refused with an error, not buffered).
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// After the input ended, with no tool call running: how long the SDK may stay silent before
/// the requests it has not answered are given up (it answered them without their id, or
/// dropped them). A request still on its way to its tool reaches it well within this.
const QUIET: std::time::Duration = std::time::Duration::from_secs(1);

/// How long the server waits at the end for a running verify to end its gates.
const SHUTDOWN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// How a session on stdio ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ended {
    /// The ids (as JSON) of the client's requests no answer carrying their id was written for
    /// (the SDK refused them without naming them, or stopped serving); empty when every request
    /// was answered.
    pub unanswered: Vec<String>,
}

/// The client's requests given to the SDK and not answered yet, by id (as JSON text, with how
/// many are open under it), and whether the SDK's output has ended (nothing more will come).
#[derive(Debug, Default)]
struct Pending {
    ids: HashMap<String, usize>,
    sdk_ended: bool,
}

impl Pending {
    fn open(&mut self, id: &Value) {
        *self.ids.entry(id.to_string()).or_default() += 1;
    }

    fn close(&mut self, id: &Value) {
        let key = id.to_string();
        if let Some(open) = self.ids.get_mut(&key) {
            *open -= 1;
            if *open == 0 {
                self.ids.remove(&key);
            }
        }
    }

    fn settled(&self) -> bool {
        self.ids.is_empty() || self.sdk_ended
    }
}

/// Returns once every request given to the SDK was answered, or the SDK ended, or no tool call
/// is running and the SDK said nothing for [`QUIET`].
async fn wait_for_answers(pending: &watch::Sender<Pending>, mut calls: watch::Receiver<usize>) {
    let mut pending = pending.subscribe();
    loop {
        if pending.borrow_and_update().settled() {
            return;
        }
        let idle = *calls.borrow_and_update() == 0;
        tokio::select! {
            _ = pending.changed() => {}
            changed = calls.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(QUIET), if idle => return,
        }
    }
}

/// The id of a response the SDK wrote (a line with an `id` and no `method`).
fn answered_id(line: &[u8]) -> Option<Value> {
    let Ok(Value::Object(mut message)) = serde_json::from_slice::<Value>(line) else {
        return None;
    };
    if message.contains_key("method") {
        return None;
    }
    message.remove("id")
}

/// Serves `server` on `input` and `output` (stdin and stdout) until the input ends and every
/// request read before its end was answered.
pub async fn serve<R, W>(server: McpServer, input: R, output: W) -> std::io::Result<Ended>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (ours, sdk_side) = tokio::io::duplex(1 << 20);
    let (from_sdk, mut to_sdk) = tokio::io::split(ours);
    let (errors, mut error_lines) = mpsc::unbounded_channel::<String>();
    let pending = Arc::new(watch::Sender::new(Pending::default()));
    let reader_pending = Arc::clone(&pending);
    let writer_pending = Arc::clone(&pending);
    let calls = server.calls_running();

    let reader = tokio::spawn(async move {
        let mut input = BufReader::with_capacity(1 << 16, input);
        let mut line = Vec::new();
        let mut number = 0u64;
        loop {
            line.clear();
            let n = match read_line(&mut input, &mut line).await {
                Ok(n) => n,
                Err(_) => break,
            };
            if n == 0 {
                break;
            }
            number += 1;
            match check(&line, number) {
                Check::Forward { opens, cancels } => {
                    reader_pending.send_modify(|p| {
                        if let Some(id) = &opens {
                            p.open(id);
                        }
                        // A cancelled request gets no answer.
                        if let Some(id) = &cancels {
                            p.close(id);
                        }
                    });
                    if !line.ends_with(b"\n") {
                        line.push(b'\n');
                    }
                    if to_sdk.write_all(&line).await.is_err() {
                        break;
                    }
                }
                Check::Skip => {}
                Check::Answer(error) => {
                    let _ = errors.send(error);
                }
            }
        }
        // Ended now, the SDK would drop the calls still running after 5 s: wait for them.
        wait_for_answers(&reader_pending, calls).await;
        let _ = to_sdk.shutdown().await;
    });

    let writer = tokio::spawn(async move {
        let mut output = output;
        let mut from_sdk = BufReader::new(from_sdk);
        let mut line = Vec::new();
        let mut sdk_open = true;
        let mut errors_open = true;
        while sdk_open || errors_open {
            tokio::select! {
                read = from_sdk.read_until(b'\n', &mut line), if sdk_open => {
                    match read {
                        Ok(0) | Err(_) => {
                            sdk_open = false;
                            writer_pending.send_modify(|p| p.sdk_ended = true);
                        }
                        Ok(_) => {
                            let written = output.write_all(&line).await.is_ok() && output.flush().await.is_ok();
                            if let Some(id) = answered_id(&line) {
                                writer_pending.send_modify(|p| p.close(&id));
                            }
                            if !written {
                                writer_pending.send_modify(|p| p.sdk_ended = true);
                                return;
                            }
                            line.clear();
                        }
                    }
                }
                error = error_lines.recv(), if errors_open => {
                    match error {
                        None => errors_open = false,
                        Some(error) => {
                            let bytes = format!("{error}\n");
                            if output.write_all(bytes.as_bytes()).await.is_err() || output.flush().await.is_err() {
                                return;
                            }
                        }
                    }
                }
            }
        }
    });

    let handle = server.clone();
    let service = server
        .serve(sdk_side)
        .await
        .map_err(|e| std::io::Error::other(format!("the MCP session did not start: {e}")));
    let result = match service {
        Ok(running) => running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| std::io::Error::other(e.to_string())),
        Err(e) => Err(e),
    };
    reader.abort();
    // The client is gone: a verify still running ends its gates before the server exits.
    handle.shutdown(SHUTDOWN_PATIENCE).await;
    let _ = writer.await;
    let mut unanswered: Vec<String> = pending.borrow().ids.keys().cloned().collect();
    unanswered.sort();
    result.map(|()| Ended { unanswered })
}

/// Reads one line (with its newline) into `line`, refusing to hold more than
/// [`MAX_LINE_BYTES`]: the rest of an overlong line is read and dropped, and `line` then holds
/// only a marker the check answers with an error.
async fn read_line<R: AsyncRead + Unpin>(
    input: &mut BufReader<R>,
    line: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            return Ok(total);
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if line.len() + take <= MAX_LINE_BYTES {
            line.extend_from_slice(&buf[..take]);
        } else if !line.starts_with(OVERLONG) {
            line.clear();
            line.extend_from_slice(OVERLONG);
        }
        input.consume(take);
        total += take;
        if done {
            return Ok(total);
        }
    }
}

const OVERLONG: &[u8] = b"\0overlong";

enum Check {
    /// Passed to the SDK; `opens`: the id of a request it must answer; `cancels`: the id of a
    /// request the client cancelled (`notifications/cancelled`), which gets no answer.
    Forward {
        opens: Option<Value>,
        cancels: Option<Value>,
    },
    Skip,
    Answer(String),
}

fn error(id: Value, code: i64, message: String) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

/// What to do with one input line.
fn check(line: &[u8], number: u64) -> Check {
    if line.starts_with(OVERLONG) {
        return Check::Answer(error(
            Value::Null,
            -32600,
            format!(
                "Invalid Request: input line {number} is longer than {MAX_LINE_BYTES} bytes and was dropped"
            ),
        ));
    }
    let text = line.trim_ascii();
    if text.is_empty() {
        return Check::Skip;
    }
    let value: Value = match serde_json::from_slice(text) {
        Ok(value) => value,
        Err(e) => {
            return Check::Answer(error(
                Value::Null,
                -32700,
                format!(
                    "Parse error: input line {number} is not JSON ({e}); send one JSON-RPC 2.0 message per line"
                ),
            ));
        }
    };
    let Value::Object(message) = &value else {
        let what = if value.is_array() {
            "a batch (array); batches are not supported, send one message per line"
        } else {
            "not an object; a JSON-RPC 2.0 message is an object"
        };
        return Check::Answer(error(
            Value::Null,
            -32600,
            format!("Invalid Request: input line {number} is {what}"),
        ));
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    if message.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Check::Answer(error(
            id,
            -32600,
            format!("Invalid Request: input line {number} lacks \"jsonrpc\": \"2.0\""),
        ));
    }
    match message.get("method") {
        Some(Value::String(method)) => Check::Forward {
            opens: message.get("id").cloned(),
            cancels: (method == "notifications/cancelled")
                .then(|| message.get("params")?.get("requestId").cloned())
                .flatten(),
        },
        Some(_) => Check::Answer(error(
            id,
            -32600,
            format!("Invalid Request: input line {number} has a \"method\" that is not a string"),
        )),
        // A response to one of the server's own requests.
        None if message.contains_key("result") || message.contains_key("error") => Check::Forward {
            opens: None,
            cancels: None,
        },
        None => Check::Answer(error(
            id,
            -32600,
            format!("Invalid Request: input line {number} has no \"method\""),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> Value {
        match check(line.as_bytes(), 3) {
            Check::Answer(text) => serde_json::from_str(&text).expect("json"),
            Check::Forward { .. } => panic!("forwarded {line}"),
            Check::Skip => panic!("skipped {line}"),
        }
    }

    #[test]
    fn lines_that_are_not_messages_get_errors_that_say_why() {
        let parse = answer("{not json");
        assert_eq!(parse["error"]["code"], -32700);
        assert!(
            parse["error"]["message"]
                .as_str()
                .expect("msg")
                .contains("line 3 is not JSON")
        );
        assert_eq!(parse["id"], Value::Null);
        let batch = answer("[1,2]");
        assert!(
            batch["error"]["message"]
                .as_str()
                .expect("msg")
                .contains("batch")
        );
        let version = answer(r#"{"id":7,"method":"tools/list"}"#);
        assert_eq!(version["id"], 7);
        assert_eq!(version["error"]["code"], -32600);
        let method = answer(r#"{"jsonrpc":"2.0","id":"a","method":5}"#);
        assert_eq!(method["id"], "a");
    }

    #[test]
    fn messages_and_blank_lines_pass() {
        assert!(matches!(
            check(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, 1),
            Check::Forward { opens: Some(Value::Number(n)), cancels: None } if n.as_u64() == Some(1)
        ));
        assert!(matches!(
            check(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, 1),
            Check::Forward {
                opens: None,
                cancels: None
            }
        ));
        assert!(matches!(
            check(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r"}}"#, 1),
            Check::Forward { opens: None, cancels: Some(Value::String(id)) } if id == "r"
        ));
        assert!(matches!(check(b"  \r\n", 1), Check::Skip));
    }
}
