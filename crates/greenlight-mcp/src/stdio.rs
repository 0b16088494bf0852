//! The stdio transport: one JSON-RPC message per line on stdin and stdout. Between the pipes
//! and the SDK sits a line check, because the SDK drops a line that is not JSON without a word:
//! here such a line is answered with a JSON-RPC parse error (-32700) and a line that is JSON but
//! not a JSON-RPC 2.0 message with an invalid-request error (-32600), each saying what was
//! wrong, and the server goes on reading. Every line reaches stdout whole, whoever wrote it.

use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::McpServer;

/// The longest line read (a message larger than this is refused with an error, not buffered).
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// How long the server waits at the end for a running verify to end its gates.
const SHUTDOWN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Serves `server` on `input` and `output` (stdin and stdout) until the input ends.
pub async fn serve<R, W>(server: McpServer, input: R, output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (ours, sdk_side) = tokio::io::duplex(1 << 20);
    let (from_sdk, mut to_sdk) = tokio::io::split(ours);
    let (errors, mut error_lines) = mpsc::unbounded_channel::<String>();

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
                Check::Forward => {
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
                        Ok(0) | Err(_) => sdk_open = false,
                        Ok(_) => {
                            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
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
    result
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
    Forward,
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
        Some(Value::String(_)) => Check::Forward,
        Some(_) => Check::Answer(error(
            id,
            -32600,
            format!("Invalid Request: input line {number} has a \"method\" that is not a string"),
        )),
        // A response to one of the server's own requests.
        None if message.contains_key("result") || message.contains_key("error") => Check::Forward,
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
            Check::Forward => panic!("forwarded {line}"),
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
            Check::Forward
        ));
        assert!(matches!(
            check(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, 1),
            Check::Forward
        ));
        assert!(matches!(check(b"  \r\n", 1), Check::Skip));
    }
}
