//! A scripted OpenAI-compatible `/v1/chat/completions` server on a real loopback socket.
//!
//! Each request is answered by the script (a list of [`Reply`]s taken in order, or a closure
//! that looks at the request), and every request is kept for the test to read back. Streams
//! go out as HTTP/1.1 chunked bodies, one HTTP chunk per piece with a flush after each and
//! `TCP_NODELAY` on, so a reply split one byte per piece reaches the client one byte per write
//! (the hostile chunking real servers produce under load); a stream can end properly, be cut
//! (the connection closed without the terminating chunk), or hang. Status replies (429 with
//! `Retry-After`, 500) are whole responses. Nothing here knows greenlight: it is an HTTP server
//! that speaks the wire format of llama.cpp's, vLLM's and Ollama's streams.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

/// How a streamed reply ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// The terminating chunk: a complete response.
    Complete,
    /// The connection is closed without the terminating chunk (a server that died mid-reply).
    Cut,
    /// Nothing more is sent and the connection stays open until the server is dropped.
    Hang,
}

/// One answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A `200 text/event-stream` response whose body is written as these pieces, one HTTP
    /// chunk and one flush each, `pause` apart, ended as `end` says.
    Stream {
        /// The body's pieces, in order.
        pieces: Vec<Vec<u8>>,
        /// The wait before each piece after the first.
        pause: Duration,
        /// How the response ends.
        end: StreamEnd,
    },
    /// A whole response with this status, these headers and this body.
    Status {
        /// The status code.
        code: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// A complete `200 text/event-stream` response of `head`, then `piece` written `times`
    /// times (one HTTP chunk each), then `tail`: a stream far larger than the server holds (a
    /// model that will not stop). Writing stops when the client hangs up.
    Repeated {
        /// The first piece.
        head: Vec<u8>,
        /// The piece sent `times` times.
        piece: Vec<u8>,
        /// How many times.
        times: usize,
        /// The last piece.
        tail: Vec<u8>,
    },
    /// The request is read and never answered; the connection stays open until the server is
    /// dropped.
    Hang,
}

impl Reply {
    /// A complete stream of `body` in one piece.
    pub fn stream(body: impl Into<Vec<u8>>) -> Self {
        Reply::Stream {
            pieces: vec![body.into()],
            pause: Duration::ZERO,
            end: StreamEnd::Complete,
        }
    }

    /// A complete stream of `body`, one byte per piece.
    pub fn byte_by_byte(body: impl Into<Vec<u8>>) -> Self {
        Reply::Stream {
            pieces: body.into().into_iter().map(|b| vec![b]).collect(),
            pause: Duration::ZERO,
            end: StreamEnd::Complete,
        }
    }

    /// A stream of `body` split at these byte offsets (anywhere: inside a UTF-8 sequence, a
    /// tag, a JSON string).
    pub fn split_at(body: impl Into<Vec<u8>>, offsets: &[usize]) -> Self {
        let body = body.into();
        let mut pieces = Vec::new();
        let mut from = 0;
        for &at in offsets {
            let at = at.clamp(from, body.len());
            pieces.push(body[from..at].to_vec());
            from = at;
        }
        pieces.push(body[from..].to_vec());
        pieces.retain(|p| !p.is_empty());
        Reply::Stream {
            pieces,
            pause: Duration::ZERO,
            end: StreamEnd::Complete,
        }
    }

    /// The first `bytes` bytes of `body`, then the connection closed mid-reply.
    pub fn cut(body: impl Into<Vec<u8>>, bytes: usize) -> Self {
        let mut body = body.into();
        body.truncate(bytes);
        Reply::Stream {
            pieces: vec![body],
            pause: Duration::ZERO,
            end: StreamEnd::Cut,
        }
    }

    /// The first `bytes` bytes of `body`, then silence with the connection open.
    pub fn stall(body: impl Into<Vec<u8>>, bytes: usize) -> Self {
        let mut body = body.into();
        body.truncate(bytes);
        Reply::Stream {
            pieces: vec![body],
            pause: Duration::ZERO,
            end: StreamEnd::Hang,
        }
    }

    /// A complete stream: the role delta, then `bytes` of content (in deltas of 64 KiB of `x`),
    /// then `stop`, usage and `[DONE]`; written as it goes, never held whole.
    pub fn flood(bytes: usize) -> Self {
        const DELTA: usize = 64 << 10;
        Reply::Repeated {
            head: Body::new().role().events_only().into_bytes(),
            piece: Body::new()
                .content(&"x".repeat(DELTA))
                .events_only()
                .into_bytes(),
            times: bytes.div_ceil(DELTA),
            tail: Body::new().finish("stop").usage(1, 1).done().into_bytes(),
        }
    }

    /// `429 Too Many Requests` with `Retry-After: seconds`.
    pub fn too_many_requests(retry_after: &str) -> Self {
        Reply::Status {
            code: 429,
            headers: vec![("Retry-After".into(), retry_after.into())],
            body: json!({"error": {"message": "rate limited", "type": "rate_limit"}}).to_string(),
        }
    }

    /// A status with an OpenAI-style error body.
    pub fn status(code: u16, message: &str) -> Self {
        Reply::Status {
            code,
            headers: Vec::new(),
            body: json!({"error": {"message": message}}).to_string(),
        }
    }
}

/// The body of a streamed reply, built chunk by chunk in the servers' wire format.
#[derive(Debug, Clone, Default)]
pub struct Body {
    events: Vec<String>,
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
    .to_string()
}

impl Body {
    /// An empty body.
    pub fn new() -> Self {
        Self::default()
    }

    /// The role delta servers open with.
    pub fn role(mut self) -> Self {
        self.events
            .push(chunk(json!({"role": "assistant", "content": ""}), None));
        self
    }

    /// A content delta.
    pub fn content(mut self, text: &str) -> Self {
        self.events.push(chunk(json!({"content": text}), None));
        self
    }

    /// A reasoning delta (`reasoning_content`, as llama.cpp and vLLM send it).
    pub fn reasoning(mut self, text: &str) -> Self {
        self.events
            .push(chunk(json!({"reasoning_content": text}), None));
        self
    }

    /// A native tool call, its arguments split over `pieces` deltas as servers stream them.
    pub fn tool_call(
        mut self,
        index: u32,
        id: &str,
        name: &str,
        arguments: &Value,
        pieces: usize,
    ) -> Self {
        let text = arguments.to_string();
        self.events.push(chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
            None,
        ));
        let chars: Vec<char> = text.chars().collect();
        let size = chars.len().div_ceil(pieces.max(1)).max(1);
        for part in chars.chunks(size) {
            let part: String = part.iter().collect();
            self.events.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": part}}]}),
                None,
            ));
        }
        self
    }

    /// The finish reason.
    pub fn finish(mut self, reason: &str) -> Self {
        self.events.push(chunk(json!({}), Some(reason)));
        self
    }

    /// A usage chunk (no choices), as `stream_options.include_usage` asks for.
    pub fn usage(mut self, prompt: u64, completion: u64) -> Self {
        self.events.push(
            json!({
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion},
            })
            .to_string(),
        );
        self
    }

    /// An `error` object in the stream (a server that failed mid-generation).
    pub fn error(mut self, message: &str) -> Self {
        self.events
            .push(json!({"error": {"message": message}}).to_string());
        self
    }

    /// The SSE text: each event as `data: …` and a blank line, then `data: [DONE]`.
    pub fn done(&self) -> String {
        let mut out = self.events_only();
        out.push_str("data: [DONE]\n\n");
        out
    }

    /// The SSE text of the events, without `[DONE]` (a piece of a longer stream).
    pub fn events_only(&self) -> String {
        let mut out = String::new();
        for event in &self.events {
            out.push_str("data: ");
            out.push_str(event);
            out.push_str("\n\n");
        }
        out
    }
}

/// A complete answer in text: role, the text in a few deltas, `stop`, usage, `[DONE]`.
pub fn answer(text: &str, usage: (u64, u64)) -> String {
    let mut body = Body::new().role();
    let chars: Vec<char> = text.chars().collect();
    for part in chars.chunks(7) {
        body = body.content(&part.iter().collect::<String>());
    }
    body.finish("stop").usage(usage.0, usage.1).done()
}

/// One native tool call and nothing else, finish `tool_calls`, usage, `[DONE]`.
pub fn call(id: &str, name: &str, arguments: Value, usage: (u64, u64)) -> String {
    Body::new()
        .role()
        .tool_call(0, id, name, &arguments, 3)
        .finish("tool_calls")
        .usage(usage.0, usage.1)
        .done()
}

/// One request as received.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// `POST`, …
    pub method: String,
    /// The path.
    pub path: String,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Value::Null` when it is not JSON).
    pub body: Value,
}

impl Request {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The messages sent.
    pub fn messages(&self) -> Vec<Value> {
        self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The text of the last user message (for scripts that answer by prompt).
    pub fn last_user_text(&self) -> String {
        self.messages()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

type Responder = Box<dyn FnMut(&Request) -> Reply + Send>;

struct Shared {
    responder: Mutex<Responder>,
    requests: Mutex<Vec<Request>>,
    stop: AtomicBool,
}

/// The server; stops (and closes every connection) when dropped.
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ScriptedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ScriptedServer {
    /// Serves `replies` in order, one per request; a request past the end gets a 500 saying
    /// the script is exhausted.
    pub fn start(replies: Vec<Reply>) -> Self {
        let mut queue = std::collections::VecDeque::from(replies);
        Self::with(move |_| {
            queue
                .pop_front()
                .unwrap_or_else(|| Reply::status(500, "the scripted server's script is exhausted"))
        })
    }

    /// Serves each request with what `responder` makes of it.
    pub fn with(responder: impl FnMut(&Request) -> Reply + Send + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        Self::serve(listener, Box::new(responder))
    }

    /// [`ScriptedServer::start`] on a given address (a port chosen earlier: a server that comes
    /// up after its client started).
    pub fn start_at(addr: SocketAddr, replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind(addr).expect("bind the chosen port");
        let mut queue = std::collections::VecDeque::from(replies);
        Self::serve(
            listener,
            Box::new(move |_| {
                queue.pop_front().unwrap_or_else(|| {
                    Reply::status(500, "the scripted server's script is exhausted")
                })
            }),
        )
    }

    fn serve(listener: TcpListener, responder: Responder) -> Self {
        let addr = listener.local_addr().expect("local address");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let shared = Arc::new(Shared {
            responder: Mutex::new(responder),
            requests: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let accept_shared = Arc::clone(&shared);
        let accept = std::thread::spawn(move || {
            while !accept_shared.stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let shared = Arc::clone(&accept_shared);
                        std::thread::spawn(move || serve_connection(stream, &shared));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// `http://127.0.0.1:PORT/v1`: what `--base-url` takes.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// A free loopback address nothing listens on (yet).
pub fn unused_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("local address")
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

fn hold_open(shared: &Shared) {
    while !shared.stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The head of a `200` SSE response with a chunked body.
fn write_stream_head(stream: &mut TcpStream) -> std::io::Result<()> {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    stream.write_all(head.as_bytes())?;
    stream.flush()
}

/// One HTTP chunk, flushed.
fn write_chunk(stream: &mut TcpStream, piece: &[u8]) -> std::io::Result<()> {
    let mut framed = format!("{:x}\r\n", piece.len()).into_bytes();
    framed.extend_from_slice(piece);
    framed.extend_from_slice(b"\r\n");
    stream.write_all(&framed)?;
    stream.flush()
}

fn serve_connection(mut stream: TcpStream, shared: &Shared) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_nonblocking(false);
    // One request per connection keeps every reply's framing independent.
    let Some(request) = read_request(&stream) else {
        return;
    };
    if let Ok(mut requests) = shared.requests.lock() {
        requests.push(request.clone());
    }
    let reply = match shared.responder.lock() {
        Ok(mut responder) => responder(&request),
        Err(_) => Reply::status(500, "the scripted server's responder panicked"),
    };
    match reply {
        Reply::Hang => hold_open(shared),
        Reply::Status {
            code,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {code} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
            let _ = stream.flush();
        }
        Reply::Repeated {
            head,
            piece,
            times,
            tail,
        } => {
            if write_stream_head(&mut stream).is_err() {
                return;
            }
            let pieces = std::iter::once(&head)
                .chain(std::iter::repeat_n(&piece, times))
                .chain(std::iter::once(&tail));
            for piece in pieces {
                if shared.stop.load(Ordering::SeqCst) || write_chunk(&mut stream, piece).is_err() {
                    return;
                }
            }
            let _ = stream.write_all(b"0\r\n\r\n");
            let _ = stream.flush();
        }
        Reply::Stream { pieces, pause, end } => {
            if write_stream_head(&mut stream).is_err() {
                return;
            }
            for (i, piece) in pieces.iter().enumerate() {
                if i > 0 && !pause.is_zero() {
                    std::thread::sleep(pause);
                }
                if shared.stop.load(Ordering::SeqCst) || write_chunk(&mut stream, piece).is_err() {
                    return;
                }
            }
            match end {
                StreamEnd::Complete => {
                    let _ = stream.write_all(b"0\r\n\r\n");
                    let _ = stream.flush();
                }
                StreamEnd::Cut => {}
                StreamEnd::Hang => hold_open(shared),
            }
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}
