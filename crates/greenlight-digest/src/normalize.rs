//! The normalised view: raw bytes become the lines a terminal would show.
//!
//! One rule: the view is computed per complete line, never across a chunk boundary, so the
//! lines (and so the digest) are the same however the input was chunked. The caller's bytes are
//! never modified; a view is a fresh string or a borrow of an untouched line.

use std::borrow::Cow;

/// Splits a byte stream into lines, whatever the chunk boundaries, keeping at most `max_line`
/// bytes of any one line.
#[derive(Debug)]
pub(crate) struct LineSplitter {
    buf: Vec<u8>,
    /// The line in `buf` was longer than `max_line`; its excess was dropped.
    buf_cut: bool,
    max_line: usize,
}

impl LineSplitter {
    pub(crate) fn new(max_line: usize) -> Self {
        LineSplitter {
            buf: Vec::new(),
            buf_cut: false,
            max_line: max_line.max(1),
        }
    }

    /// Feeds `chunk`, calling `on_line(line, was_cut)` for every line it completes. `line`
    /// excludes the `\n`.
    pub(crate) fn push(&mut self, mut chunk: &[u8], on_line: &mut impl FnMut(&[u8], bool)) {
        while let Some(pos) = memchr::memchr(b'\n', chunk) {
            let (head, rest) = (&chunk[..pos], &chunk[pos + 1..]);
            if self.buf.is_empty() && !self.buf_cut {
                // Fast path: the whole line is inside this chunk; no copy.
                if head.len() > self.max_line {
                    on_line(&head[..self.max_line], true);
                } else {
                    on_line(head, false);
                }
            } else {
                self.append(head);
                on_line(&self.buf, self.buf_cut);
                self.buf.clear();
                self.buf_cut = false;
            }
            chunk = rest;
        }
        self.append(chunk);
    }

    /// Ends the stream: a last line without a newline is still a line.
    pub(crate) fn finish(&mut self, on_line: &mut impl FnMut(&[u8], bool)) {
        if !self.buf.is_empty() || self.buf_cut {
            on_line(&self.buf, self.buf_cut);
            self.buf.clear();
            self.buf_cut = false;
        }
    }

    fn append(&mut self, bytes: &[u8]) {
        let room = self.max_line - self.buf.len();
        if bytes.len() > room {
            self.buf.extend_from_slice(&bytes[..room]);
            self.buf_cut = true;
        } else {
            self.buf.extend_from_slice(bytes);
        }
    }
}

/// The text a terminal would show for one raw line: a trailing `\r` (CRLF) dropped, invalid
/// UTF-8 replaced with U+FFFD, ANSI escape sequences removed, and bare `\r` / backspace /
/// erase-line applied as overwrites.
pub(crate) fn view(raw: &[u8]) -> Cow<'_, str> {
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    if memchr::memchr3(b'\r', 0x1b, 0x08, raw).is_none() {
        // Valid UTF-8 is the common case and std's check has an ASCII fast path.
        return match std::str::from_utf8(raw) {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(raw),
        };
    }
    Cow::Owned(emulate(&String::from_utf8_lossy(raw)))
}

/// Replays one line of text on a one-line terminal.
fn emulate(text: &str) -> String {
    let mut cells: Vec<char> = Vec::with_capacity(text.len());
    let mut cursor = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => cursor = 0,
            '\u{8}' => cursor = cursor.saturating_sub(1),
            '\u{1b}' => match chars.next() {
                Some('[') => {
                    let mut param = String::new();
                    let mut fin = None;
                    for p in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&p) {
                            fin = Some(p);
                            break;
                        }
                        param.push(p);
                    }
                    let n: usize = param.parse().unwrap_or(0);
                    match fin {
                        Some('K') => match n {
                            1 => cells.iter_mut().take(cursor).for_each(|cell| *cell = ' '),
                            2 => cells.iter_mut().for_each(|cell| *cell = ' '),
                            _ => cells.truncate(cursor),
                        },
                        Some('G') => cursor = n.saturating_sub(1),
                        Some('C') => cursor = cursor.saturating_add(n.max(1)),
                        Some('D') => cursor = cursor.saturating_sub(n.max(1)),
                        _ => {}
                    }
                }
                Some(']') => {
                    // OSC (hyperlinks, titles): ends at BEL or ESC '\'.
                    while let Some(p) = chars.next() {
                        if p == '\u{7}' {
                            break;
                        }
                        if p == '\u{1b}' {
                            if chars.peek() == Some(&'\\') {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                Some('(' | ')') => {
                    chars.next();
                }
                _ => {}
            },
            c if c.is_control() && c != '\t' => {}
            c => {
                if cursor < cells.len() {
                    cells[cursor] = c;
                } else {
                    cells.resize(cursor, ' ');
                    cells.push(c);
                }
                cursor += 1;
            }
        }
    }
    let s: String = cells.into_iter().collect();
    s.trim_end_matches(' ').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(chunks: &[&[u8]]) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        let mut s = LineSplitter::new(8);
        let mut f = |l: &[u8], cut: bool| out.push((String::from_utf8_lossy(l).into_owned(), cut));
        for c in chunks {
            s.push(c, &mut f);
        }
        s.finish(&mut f);
        out
    }

    #[test]
    fn splitting_ignores_chunk_boundaries_and_cuts_long_lines() {
        let whole = lines(&[b"ab\ncdefghijkl\nmn"]);
        let split = lines(&[b"a", b"b\ncde", b"fghij", b"kl\nm", b"n"]);
        assert_eq!(whole, split);
        assert_eq!(
            whole,
            vec![
                ("ab".into(), false),
                ("cdefghij".into(), true),
                ("mn".into(), false)
            ]
        );
    }

    #[test]
    fn view_strips_ansi_and_applies_carriage_returns() {
        assert_eq!(view(b"\x1b[32mok\x1b[0m\r"), "ok");
        assert_eq!(view(b"progress 10%\rprogress 100%"), "progress 100%");
        assert_eq!(view(b"abcdef\rXY"), "XYcdef");
        assert_eq!(view(b"abcdef\r\x1b[2K\rdone"), "done");
        assert_eq!(view(b"abc\x1b[K\rZ"), "Zbc");
        assert_eq!(view(b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"), "link");
        assert_eq!(view(b"bad \xff byte"), "bad \u{fffd} byte");
    }
}
