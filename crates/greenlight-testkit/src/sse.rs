//! A small HTTP/1.1 + Server-Sent Events client for tests and the load harness: one GET per
//! connection over a plain TCP socket, chunked bodies decoded, events parsed as the WHATWG rules
//! say (`id:`, `event:`, `data:`, `retry:`, comments, dispatch on a blank line).

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One dispatched event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    /// The `id:` field, when the event carried one.
    pub id: Option<String>,
    /// The `event:` field (`None` = `message`).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// What the parser found in a block of bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// An event (a blank line ended it).
    Event(Event),
    /// A `retry:` value.
    Retry(u64),
    /// A comment line (`: ping`).
    Comment(String),
}

/// Incremental SSE line parser: feed bytes, take items.
#[derive(Debug, Default)]
pub struct Parser {
    line: Vec<u8>,
    event: Event,
    has_data: bool,
    after_cr: bool,
}

impl Parser {
    /// Parses `bytes`, appending what they complete to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<Item>) {
        while let Some(&first) = bytes.first() {
            if std::mem::take(&mut self.after_cr) && first == b'\n' {
                bytes = &bytes[1..];
                continue;
            }
            // Whole runs up to a line end at a time: the load client parses a million frames a
            // second, so no per-byte push and no allocation per line (the buffer is reused).
            let Some(end) = bytes.iter().position(|&b| b == b'\r' || b == b'\n') else {
                self.line.extend_from_slice(bytes);
                return;
            };
            self.after_cr = bytes[end] == b'\r';
            let mut line = std::mem::take(&mut self.line);
            line.extend_from_slice(&bytes[..end]);
            self.line_done(&String::from_utf8_lossy(&line), out);
            line.clear();
            self.line = line;
            bytes = &bytes[end + 1..];
        }
    }

    fn line_done(&mut self, line: &str, out: &mut Vec<Item>) {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            if std::mem::take(&mut self.has_data) {
                out.push(Item::Event(event));
            }
            return;
        }
        if let Some(comment) = line.strip_prefix(':') {
            out.push(Item::Comment(comment.trim_start().to_owned()));
            return;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" if !value.contains('\0') => self.event.id = Some(value.to_owned()),
            "event" => self.event.event = Some(value.to_owned()),
            "data" => {
                if self.has_data {
                    self.event.data.push('\n');
                }
                self.event.data.push_str(value);
                self.has_data = true;
            }
            "retry" => {
                if let Ok(ms) = value.parse() {
                    out.push(Item::Retry(ms));
                }
            }
            _ => {}
        }
    }
}

/// An open response: its status and headers, and the body read as it arrives.
#[derive(Debug)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    socket: TcpStream,
    buf: Vec<u8>,
    chunked: bool,
    /// Bytes of the current chunk still to read (chunked), or of the body (content-length).
    remaining: Option<usize>,
    ended: bool,
    parser: Parser,
    items: std::collections::VecDeque<Item>,
}

/// GETs (or POSTs, with `method`) `path` from `addr` with extra `headers`; returns once the
/// status line and headers arrived.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> io::Result<Response> {
    request_with_body(addr, method, path, headers, &[]).await
}

/// [`request`] with a body (sent with its `Content-Length`; the caller names its type).
pub async fn request_with_body(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> io::Result<Response> {
    let mut socket = TcpStream::connect(addr).await?;
    socket.set_nodelay(true)?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n");
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("accept"))
    {
        head.push_str("Accept: text/event-stream\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if method != "GET" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let head = if headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        // A test that sends its own Host replaces ours.
        head.replacen(&format!("Host: {addr}\r\n"), "", 1)
    } else {
        head
    };
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body).await?;
    let mut buf = Vec::with_capacity(8192);
    let end = loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            break end;
        }
        if socket.read_buf(&mut buf).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed before the headers",
            ));
        }
    };
    let text = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad status line in {text:?}"),
            )
        })?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let length = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok());
    buf.drain(..end + 4);
    Ok(Response {
        status,
        headers,
        socket,
        buf,
        chunked,
        remaining: if chunked { None } else { length },
        ended: false,
        parser: Parser::default(),
        items: Default::default(),
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

impl Response {
    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    async fn fill(&mut self) -> io::Result<bool> {
        Ok(self.socket.read_buf(&mut self.buf).await? > 0)
    }

    /// The next block of body bytes; `None` at the end of the body.
    pub async fn chunk(&mut self) -> io::Result<Option<Vec<u8>>> {
        if self.ended {
            return Ok(None);
        }
        if !self.chunked {
            if self.remaining == Some(0) {
                self.ended = true;
                return Ok(None);
            }
            if self.buf.is_empty() && !self.fill().await? {
                self.ended = true;
                return Ok(None);
            }
            let take = self
                .remaining
                .map_or(self.buf.len(), |r| r.min(self.buf.len()));
            if let Some(r) = &mut self.remaining {
                *r -= take;
            }
            return Ok(Some(self.buf.drain(..take).collect()));
        }
        loop {
            match self.remaining {
                None => {
                    let Some(end) = find(&self.buf, b"\r\n") else {
                        if !self.fill().await? {
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "body cut inside a chunk header",
                            ));
                        }
                        continue;
                    };
                    let size_text = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                    let size =
                        usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                            .map_err(|_| {
                                io::Error::new(
                                    io::ErrorKind::InvalidData,
                                    format!("bad chunk size {size_text:?}"),
                                )
                            })?;
                    self.buf.drain(..end + 2);
                    if size == 0 {
                        self.ended = true;
                        return Ok(None);
                    }
                    self.remaining = Some(size);
                }
                Some(left) => {
                    if self.buf.is_empty() && !self.fill().await? {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "body cut inside a chunk",
                        ));
                    }
                    let take = left.min(self.buf.len());
                    let data: Vec<u8> = self.buf.drain(..take).collect();
                    if take == left {
                        // The CRLF after the chunk's data.
                        while self.buf.len() < 2 {
                            if !self.fill().await? {
                                return Err(io::Error::new(
                                    io::ErrorKind::UnexpectedEof,
                                    "body cut after a chunk",
                                ));
                            }
                        }
                        self.buf.drain(..2);
                        self.remaining = None;
                    } else {
                        self.remaining = Some(left - take);
                    }
                    return Ok(Some(data));
                }
            }
        }
    }

    /// The whole (rest of the) body.
    pub async fn body(&mut self) -> io::Result<Vec<u8>> {
        let mut all = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            all.extend_from_slice(&chunk);
        }
        Ok(all)
    }

    /// The next SSE item; `None` when the body ended.
    pub async fn next_item(&mut self) -> io::Result<Option<Item>> {
        loop {
            if let Some(item) = self.items.pop_front() {
                return Ok(Some(item));
            }
            let Some(chunk) = self.chunk().await? else {
                return Ok(None);
            };
            let mut out = Vec::new();
            self.parser.feed(&chunk, &mut out);
            self.items.extend(out);
        }
    }

    /// The next SSE event (retry and comments skipped); `None` when the body ended.
    pub async fn next_event(&mut self) -> io::Result<Option<Event>> {
        loop {
            match self.next_item().await? {
                Some(Item::Event(e)) => return Ok(Some(e)),
                Some(_) => continue,
                None => return Ok(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_whatwg_cases() {
        let mut p = Parser::default();
        let mut out = Vec::new();
        p.feed(
            b"retry: 2000\n\n: ping\r\nid: 7:1\r\ndata: {\"a\"",
            &mut out,
        );
        p.feed(
            b":1}\ndata:x\n\nevent: error\ndata: gap\n\nid: 5\n\n",
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                Item::Retry(2000),
                Item::Comment("ping".into()),
                Item::Event(Event {
                    id: Some("7:1".into()),
                    event: None,
                    data: "{\"a\":1}\nx".into()
                }),
                Item::Event(Event {
                    id: None,
                    event: Some("error".into()),
                    data: "gap".into()
                }),
            ]
        );
    }

    #[test]
    fn any_split_of_the_input_gives_the_same_items() {
        let input: &[u8] =
            b"retry: 2000\r\n\r: ping\rid: 7:1\r\ndata: a\r\rdata: \xff\n\nid: 9\n\n";
        let mut whole = Vec::new();
        Parser::default().feed(input, &mut whole);
        assert_eq!(whole.len(), 4, "{whole:?}");
        for cut in 0..=input.len() {
            for second in cut..=input.len() {
                let mut parser = Parser::default();
                let mut out = Vec::new();
                parser.feed(&input[..cut], &mut out);
                parser.feed(&input[cut..second], &mut out);
                parser.feed(&input[second..], &mut out);
                assert_eq!(out, whole, "cut at {cut} and {second}");
            }
        }
    }
}
