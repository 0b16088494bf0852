//! Server-sent events: a response body's bytes, split anywhere, into `data:` payloads.
//!
//! Lines end in LF, CRLF or a lone CR, and a chunk may end anywhere — between CR and LF or inside
//! a UTF-8 sequence — because a line is kept as bytes until its end is seen and only then decoded
//! (with replacement: a byte that is not UTF-8 is never dropped). An event's `data:` lines are
//! joined with `\n` and the event is complete at a blank line. Comment lines (`:` keepalives)
//! and the other fields (`event:`, `id:`, `retry:`) carry nothing for a chat completion and are
//! skipped; any other line is returned as [`SseItem::Stray`] rather than ignored, so a body that
//! is not SSE is noticed. `data: [DONE]` ends the stream: nothing after it is read. A line or an
//! event's data longer than [`MAX_EVENT`] is not kept: it is reported ([`SseItem::Overlong`])
//! with its first bytes, so memory stays bounded whatever the server sends.

/// One thing the body said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    /// The data of one event (its `data:` lines joined with `\n`).
    Data(String),
    /// `data: [DONE]`: the server ended the stream.
    Done,
    /// A line that is neither a field nor a comment (a body that is not SSE at all, such as a
    /// JSON error response), kept for the caller to judge.
    Stray(String),
    /// A line or an event's data longer than [`MAX_EVENT`], dropped: its length and first bytes.
    Overlong {
        /// Its length in bytes.
        bytes: usize,
        /// Its first [`OVERLONG_HEAD`] bytes, decoded with replacement.
        head: String,
    },
}

/// The most bytes one line, or one event's data, may hold: 8 MiB. A chunk is a few hundred
/// bytes; a non-streamed answer read as one line can be large, and this leaves it room.
pub const MAX_EVENT: usize = 8 << 20;

/// How much of an overlong line is kept to show what it was.
pub const OVERLONG_HEAD: usize = 256;

/// Incremental SSE reader. Feed it the body in any chunking; it returns the same items.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// The bytes of the line being read, not yet ended (at most [`MAX_EVENT`] of them), and its
    /// length so far.
    line: Vec<u8>,
    line_len: usize,
    /// The data of the event being read, whether it has a `data:` line yet, and the length of
    /// its data counting what was not kept.
    data: String,
    has_data: bool,
    data_len: usize,
    /// The previous chunk ended in CR: an LF starting this one belongs to that line end.
    after_cr: bool,
    done: bool,
}

impl SseDecoder {
    /// A reader at the start of a body.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `[DONE]` was read; bytes after it are ignored.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Reads `bytes`, returning every item they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseItem> {
        let mut out = Vec::new();
        let mut rest = bytes;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        while !rest.is_empty() && !self.done {
            match memchr::memchr2(b'\n', b'\r', rest) {
                None => {
                    self.keep(rest);
                    break;
                }
                Some(end) => {
                    let is_cr = rest[end] == b'\r';
                    if self.line_len == 0 {
                        self.take_line(&rest[..end], end, &mut out);
                    } else {
                        self.keep(&rest[..end]);
                        let mut line = std::mem::take(&mut self.line);
                        self.take_line(&line, self.line_len, &mut out);
                        line.clear();
                        self.line = line;
                    }
                    self.line_len = 0;
                    rest = &rest[end + 1..];
                    if is_cr {
                        match rest.first() {
                            Some(b'\n') => rest = &rest[1..],
                            Some(_) => {}
                            None => self.after_cr = true,
                        }
                    }
                }
            }
        }
        out
    }

    /// The body ended: a last line without its line end is read, and an event without its blank
    /// line is still delivered (a cut stream keeps what it said). The reader is then empty.
    pub fn finish(&mut self) -> Vec<SseItem> {
        let mut out = Vec::new();
        if !self.done {
            let line = std::mem::take(&mut self.line);
            if self.line_len > 0 {
                self.take_line(&line, self.line_len, &mut out);
            }
            if !self.done {
                self.dispatch(&mut out);
            }
        }
        *self = Self::default();
        out
    }

    /// Takes what is held — an unended line and an event without its blank line — as text, and
    /// empties the reader (for a deadline, which reads nothing more).
    pub fn take_partial(&mut self) -> String {
        let mut held = String::new();
        if !self.done {
            if self.has_data {
                held.push_str("data: ");
                held.push_str(&self.data);
                held.push('\n');
            }
            held.push_str(&String::from_utf8_lossy(&self.line));
        }
        *self = Self::default();
        held
    }

    /// Adds bytes to the unended line, keeping at most [`MAX_EVENT`] of them.
    fn keep(&mut self, bytes: &[u8]) {
        self.line_len += bytes.len();
        let room = MAX_EVENT.saturating_sub(self.line.len());
        self.line.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// Reads one line of `len` bytes, of which `line` holds the first [`MAX_EVENT`].
    fn take_line(&mut self, line: &[u8], len: usize, out: &mut Vec<SseItem>) {
        if len > MAX_EVENT {
            out.push(overlong(line, len));
            return;
        }
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        let name_end = memchr::memchr(b':', line).unwrap_or(line.len());
        let value = match &line[..name_end] {
            b"data" => match &line[name_end..] {
                [b':', b' ', rest @ ..] | [b':', rest @ ..] => rest,
                _ => &[][..],
            },
            // A comment (keepalive) or a field a chat turn has no use for.
            b"" | b"event" | b"id" | b"retry" => return,
            _ => {
                out.push(SseItem::Stray(String::from_utf8_lossy(line).into_owned()));
                return;
            }
        };
        if self.has_data {
            self.data_len += 1;
        }
        self.data_len += value.len();
        if self.data_len > MAX_EVENT {
            // Kept up to the limit, to show what it was; dropped at its end.
            if self.data.len() < OVERLONG_HEAD {
                self.data.push_str(&String::from_utf8_lossy(
                    &value[..value.len().min(OVERLONG_HEAD)],
                ));
            }
        } else {
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(&String::from_utf8_lossy(value));
        }
        self.has_data = true;
    }

    fn dispatch(&mut self, out: &mut Vec<SseItem>) {
        if !self.has_data {
            return;
        }
        self.has_data = false;
        let data = std::mem::take(&mut self.data);
        let len = std::mem::take(&mut self.data_len);
        if len > MAX_EVENT {
            out.push(overlong(data.as_bytes(), len));
        } else if data.trim() == "[DONE]" {
            self.done = true;
            out.push(SseItem::Done);
        } else {
            out.push(SseItem::Data(data));
        }
    }
}

fn overlong(kept: &[u8], bytes: usize) -> SseItem {
    SseItem::Overlong {
        bytes,
        head: String::from_utf8_lossy(&kept[..kept.len().min(OVERLONG_HEAD)]).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseItem> {
        let mut d = SseDecoder::new();
        let mut out: Vec<SseItem> = chunks.iter().flat_map(|c| d.feed(c)).collect();
        out.extend(d.finish());
        out
    }

    fn data(s: &str) -> SseItem {
        SseItem::Data(s.to_string())
    }

    #[test]
    fn events_end_at_blank_lines_and_done_stops_reading() {
        let body = b": keepalive\n\ndata: {\"a\":1}\n\nevent: x\nid: 3\nretry: 5\ndata: b\n\ndata: [DONE]\n\ndata: after\n\n";
        assert_eq!(
            all(&[body]),
            vec![data("{\"a\":1}"), data("b"), SseItem::Done]
        );
    }

    #[test]
    fn a_line_that_is_not_sse_is_returned_not_ignored() {
        assert_eq!(
            all(&[b"{\"error\":\"x\"}\ndatabase: 1\n"]),
            vec![
                SseItem::Stray("{\"error\":\"x\"}".into()),
                SseItem::Stray("database: 1".into())
            ]
        );
    }

    #[test]
    fn crlf_lone_cr_and_a_cr_lf_split_across_chunks() {
        assert_eq!(
            all(&[b"data: a\r\n\r\ndata: b\r\r"]),
            vec![data("a"), data("b")]
        );
        assert_eq!(
            all(&[b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]),
            vec![data("a"), data("b")]
        );
    }

    #[test]
    fn multi_line_data_is_joined_and_the_space_after_the_colon_is_optional() {
        assert_eq!(all(&[b"data:x\ndata:  y\ndata\n\n"]), vec![data("x\n y\n")]);
    }

    #[test]
    fn a_split_inside_a_utf8_sequence_decodes_whole_and_bad_bytes_are_replaced() {
        let body = "data: é🙂中\n\n".as_bytes();
        for cut in 0..body.len() {
            assert_eq!(
                all(&[&body[..cut], &body[cut..]]),
                vec![data("é🙂中")],
                "cut at {cut}"
            );
        }
        assert_eq!(all(&[b"data: a\xffb\n\n"]), vec![data("a\u{fffd}b")]);
    }

    #[test]
    fn an_overlong_line_or_event_is_reported_once_whatever_the_chunking_and_reading_goes_on() {
        let long = "x".repeat(MAX_EVENT + 5);
        let line = format!("data: {long}\n\ndata: after\n\n");
        let half = format!(
            "data: {}\ndata: {}\n\ndata: after\n\n",
            &long[..MAX_EVENT / 2],
            &long[..MAX_EVENT / 2]
        );
        for body in [line, half] {
            let whole = all(&[body.as_bytes()]);
            assert!(
                matches!(&whole[0], SseItem::Overlong { bytes, head } if *bytes > MAX_EVENT && head.len() == OVERLONG_HEAD),
                "{:?}",
                &whole[0]
            );
            assert_eq!(whole[1..], [data("after")]);
            let pieces: Vec<&[u8]> = body.as_bytes().chunks(1 << 16).collect();
            assert_eq!(all(&pieces), whole);
        }
    }

    #[test]
    fn a_cut_stream_keeps_its_last_event() {
        assert_eq!(all(&[b"data: {\"a\":1}"]), vec![data("{\"a\":1}")]);
        assert_eq!(all(&[b"data: x\n"]), vec![data("x")]);
    }
}
