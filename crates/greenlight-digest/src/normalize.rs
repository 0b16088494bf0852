//! The normalised view: raw bytes become the lines a terminal would show.
//!
//! One rule: the view is computed per complete line, never across a chunk boundary, so the
//! lines (and so the digest) are the same however the input was chunked. The caller's bytes are
//! never modified; a view is a fresh string or a borrow of an untouched line.

use std::borrow::Cow;

use crate::formats::Markers;

/// One line as the splitter hands it over.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawLine<'a> {
    /// The line's bytes, without the `\n`, cut to the line budget.
    pub bytes: &'a [u8],
    /// The line was longer than the budget; its excess was dropped.
    pub cut: bool,
    /// Set when the chunk scan proved the line needs no normalising (valid UTF-8, no CR, ESC or
    /// backspace but a final CR): then it is [`view`] of `bytes`, with [`RawLine::markers`].
    pub plain: Option<&'a str>,
    /// Which of the markers the splitter was built with `plain` contains, one bit each (a
    /// marker holds no CR or LF). Only meaningful with `plain`.
    pub markers: Markers,
    /// The line before, as handed over (cut to the line budget), when it came from the same
    /// chunk; `None` when it is the last line of an earlier [`LineSink::lines_done`].
    pub prev: Option<&'a [u8]>,
}

/// Where the splitter hands its lines.
pub(crate) trait LineSink {
    /// One line, in order.
    fn line(&mut self, line: RawLine<'_>);
    /// The lines just handed over, as one region: `count` lines joined by `\n` (a line in it
    /// may still exceed the line budget), for the sink to keep a tail of without copying every
    /// line as it passes.
    fn lines_done(&mut self, region: &[u8], count: usize);
}

/// Splits a byte stream into lines, whatever the chunk boundaries, keeping at most `max_line`
/// bytes of any one line.
///
/// Why it scans whole chunks: checking UTF-8, looking for control bytes and for the markers once
/// per 64 KiB chunk is several times cheaper than once per 40-byte line, and it decides nothing
/// a per-line check would decide differently.
#[derive(Debug)]
pub(crate) struct LineSplitter {
    buf: Vec<u8>,
    /// The line in `buf` was longer than `max_line`; its excess was dropped.
    buf_cut: bool,
    max_line: usize,
    markers: Finders,
}

/// One finder per marker, in the order of the markers' bits.
pub(crate) type Finders = Vec<memchr::memmem::Finder<'static>>;

/// Finders for `markers` (at most 8: one bit each).
pub(crate) fn finders(markers: &[&'static [u8]]) -> Finders {
    debug_assert!(markers.len() <= 8);
    markers
        .iter()
        .map(|&m| memchr::memmem::Finder::new(m))
        .collect()
}

/// The markers `text` contains, one bit each.
pub(crate) fn markers_in(finders: &Finders, text: &[u8]) -> Markers {
    finders
        .iter()
        .enumerate()
        .filter(|(_, f)| f.find(text).is_some())
        .fold(0, |set, (i, _)| set | 1 << i)
}

impl LineSplitter {
    pub(crate) fn new(max_line: usize, markers: &[&'static [u8]]) -> Self {
        LineSplitter {
            buf: Vec::new(),
            buf_cut: false,
            max_line: max_line.max(1),
            markers: finders(markers),
        }
    }

    /// Feeds `chunk`, handing `sink` every line it completes.
    pub(crate) fn push(&mut self, mut chunk: &[u8], sink: &mut impl LineSink) {
        if !self.buf.is_empty() || self.buf_cut {
            // The end of a line begun in an earlier chunk.
            let Some(pos) = memchr::memchr(b'\n', chunk) else {
                self.append(chunk);
                return;
            };
            self.append(&chunk[..pos]);
            self.flush(sink);
            chunk = &chunk[pos + 1..];
        }
        // Whole lines inside this chunk: no copy.
        let mut scan = ChunkScan::new(chunk, &self.markers);
        let mut start = 0;
        let mut count = 0;
        let mut prev = None;
        while let Some(pos) = memchr::memchr(b'\n', &chunk[start..]) {
            let end = start + pos;
            let head = &chunk[start..end];
            let line = if head.len() > self.max_line {
                RawLine {
                    bytes: &head[..self.max_line],
                    cut: true,
                    plain: None,
                    markers: 0,
                    prev,
                }
            } else {
                let (plain, markers) = scan.plain(start, end, &self.markers);
                RawLine {
                    bytes: head,
                    cut: false,
                    plain,
                    markers,
                    prev,
                }
            };
            sink.line(line);
            prev = Some(line.bytes);
            count += 1;
            start = end + 1;
        }
        if count > 0 {
            sink.lines_done(&chunk[..start - 1], count);
        }
        self.append(&chunk[start..]);
    }

    /// Ends the stream: a last line without a newline is still a line.
    pub(crate) fn finish(&mut self, sink: &mut impl LineSink) {
        if !self.buf.is_empty() || self.buf_cut {
            self.flush(sink);
        }
    }

    /// Hands over the line in `buf`.
    fn flush(&mut self, sink: &mut impl LineSink) {
        sink.line(RawLine {
            bytes: &self.buf,
            cut: self.buf_cut,
            plain: None,
            markers: 0,
            prev: None,
        });
        sink.lines_done(&self.buf, 1);
        self.buf.clear();
        self.buf_cut = false;
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

/// What one pass over a chunk knows about the lines in it, asked in line order. Each search
/// restarts only once a line starts past its last answer, so a chunk is scanned about once.
struct ChunkScan<'c> {
    chunk: &'c [u8],
    /// `chunk[valid_from..valid_from + valid.len()]` is valid UTF-8.
    valid_from: usize,
    valid: &'c str,
    /// The first CR, ESC or backspace at or after the last line that asked (or `usize::MAX`).
    special: usize,
    /// Per marker, its first place at or after the last line that asked (or `usize::MAX`).
    markers: [usize; 8],
}

impl<'c> ChunkScan<'c> {
    fn new(chunk: &'c [u8], finders: &Finders) -> Self {
        let mut scan = ChunkScan {
            chunk,
            valid_from: 0,
            valid: "",
            special: 0,
            markers: [usize::MAX; 8],
        };
        scan.validate(0);
        scan.special = scan.find_special(0);
        for (at, f) in scan.markers.iter_mut().zip(finders) {
            *at = f.find(chunk).unwrap_or(usize::MAX);
        }
        scan
    }

    fn validate(&mut self, from: usize) {
        let rest = &self.chunk[from..];
        self.valid_from = from;
        self.valid = match std::str::from_utf8(rest) {
            Ok(s) => s,
            Err(e) => std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default(),
        };
    }

    fn find_special(&self, from: usize) -> usize {
        memchr::memchr3(b'\r', 0x1b, 0x08, &self.chunk[from..]).map_or(usize::MAX, |p| from + p)
    }

    /// The line `chunk[start..end]` as text when it needs no normalising, and which markers it
    /// holds.
    fn plain(&mut self, start: usize, end: usize, finders: &Finders) -> (Option<&'c str>, Markers) {
        if self.special < start {
            self.special = self.find_special(start);
        }
        // A final CR (CRLF) is dropped by the view; any other is an overwrite to replay.
        let end = if end > start && self.special == end - 1 && self.chunk[end - 1] == b'\r' {
            end - 1
        } else {
            end
        };
        if self.special < end {
            return (None, 0);
        }
        if start > self.valid_from + self.valid.len() {
            self.validate(start);
        }
        let Some(text) = self
            .valid
            .get(start.wrapping_sub(self.valid_from)..end.wrapping_sub(self.valid_from))
        else {
            return (None, 0);
        };
        let mut markers = 0;
        for (i, (at, f)) in self.markers.iter_mut().zip(finders).enumerate() {
            // Each marker is searched again only once a line starts past its last place, so
            // the chunk is scanned about once per marker whatever the number of lines.
            if *at < start {
                *at = f
                    .find(&self.chunk[start..])
                    .map_or(usize::MAX, |p| start + p);
            }
            if *at < end {
                markers |= 1 << i;
            }
        }
        (Some(text), markers)
    }
}

/// Text as a terminal shows it, line by line through [`view`]: escape sequences (colour,
/// cursor moves, erasures, titles, links) removed, carriage-return and backspace overwrites
/// applied, a CRLF's `\r` dropped. The one renderer of output for people and agents: every
/// evidence text, verify's stderr and the dashboard show a gate's output through it, so none
/// of them keeps what the digest itself would not read. Text without ESC, CR or backspace is
/// returned as it is.
pub fn terminal_text(text: &str) -> String {
    if memchr::memchr3(b'\r', 0x1b, 0x08, text.as_bytes()).is_none() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&view(line.as_bytes()));
    }
    out
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
    append_only(text).unwrap_or_else(|| replay(text))
}

/// The common case of coloured output: no sequence moves the cursor or erases, so the line is
/// its text without escapes and control characters. `None` as soon as something would move the
/// cursor (CR, backspace, CSI `K` `G` `C` `D`): then the line needs [`replay`]. Same rules as
/// `replay`, without its grid of cells.
fn append_only(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' | '\u{8}' => return None,
            '\u{1b}' => match chars.next() {
                Some('[') => {
                    for p in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&p) {
                            if matches!(p, 'K' | 'G' | 'C' | 'D') {
                                return None;
                            }
                            break;
                        }
                    }
                }
                Some(']') => {
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
            c => out.push(c),
        }
    }
    let end = out.trim_end_matches(' ').len();
    out.truncate(end);
    Some(out)
}

/// Replays one line on a grid of cells, cursor movements and erasures included.
fn replay(text: &str) -> String {
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

    /// Collects lines and checks that every line's `prev` and every region agree with the
    /// lines handed over.
    #[derive(Default)]
    struct Collect {
        lines: Vec<(String, bool)>,
        raw: Vec<Vec<u8>>,
        regions: Vec<Vec<u8>>,
        finders: Finders,
    }

    const TEST_MARKERS: [&[u8]; 3] = [b" TS", b"--- ", b"ab"];

    impl LineSink for Collect {
        fn line(&mut self, l: RawLine<'_>) {
            if let Some(prev) = l.prev {
                assert_eq!(Some(&prev.to_vec()), self.raw.last());
            }
            if let Some(text) = l.plain {
                assert_eq!(text, view(l.bytes));
                // The chunk scan finds each marker as a search of the line alone would.
                assert_eq!(
                    l.markers,
                    markers_in(&self.finders, text.as_bytes()),
                    "{text:?}"
                );
            }
            self.lines
                .push((String::from_utf8_lossy(l.bytes).into_owned(), l.cut));
            self.raw.push(l.bytes.to_vec());
        }

        fn lines_done(&mut self, region: &[u8], count: usize) {
            assert_eq!(region.split(|&b| b == b'\n').count(), count);
            self.regions.push(region.to_vec());
        }
    }

    fn lines(chunks: &[&[u8]]) -> Vec<(String, bool)> {
        let mut out = Collect {
            finders: finders(&TEST_MARKERS),
            ..Collect::default()
        };
        let mut s = LineSplitter::new(8, &TEST_MARKERS);
        for c in chunks {
            s.push(c, &mut out);
        }
        s.finish(&mut out);
        out.lines
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
    fn each_marker_is_found_in_every_line_that_holds_it() {
        let mut out = Collect {
            finders: finders(&TEST_MARKERS),
            ..Collect::default()
        };
        let mut s = LineSplitter::new(1024, &TEST_MARKERS);
        let text = b"x --- FAIL: ab\nplain\n--- \na TS2 ab\nab\n\nlast --- ab TS\n";
        // Whole, then in pieces that cut markers apart.
        s.push(text, &mut out);
        for piece in text.chunks(3) {
            s.push(piece, &mut out);
        }
        s.finish(&mut out);
        assert_eq!(out.lines.len(), 14);
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

    #[test]
    fn terminal_text_shows_what_a_terminal_shows() {
        assert_eq!(terminal_text("\x1b[31mred\x1b[0m ok\n"), "red ok\n");
        assert_eq!(terminal_text("10%\r55%\r100%\n"), "100%\n");
        assert_eq!(terminal_text("abcdef\rXY\n"), "XYcdef\n");
        assert_eq!(terminal_text("a\r\nb\r\n"), "a\nb\n");
        assert_eq!(terminal_text("\x1b]0;title\x07text"), "text");
        assert_eq!(terminal_text("\x1b]8;;u\x1b\\link\x1b]8;;\x1b\\"), "link");
        assert_eq!(terminal_text("50%\x1b[2K\rdone\n\tx"), "done\n\tx");
        assert_eq!(terminal_text("ab\x08c\n"), "ac\n");
        // Nothing to render: the text itself, a NUL the gate printed still in it.
        assert_eq!(terminal_text("plain\ttext\x00\n"), "plain\ttext\x00\n");
    }

    #[test]
    fn append_only_lines_read_as_a_replay_does() {
        let lines = [
            "\x1b[32m✓\x1b[39m adds \x1b[2m(1 ms)\x1b[22m  ",
            "a\x1b]8;;http://x\x1b\\link\x1b]8;;\x07 b",
            "a\x1b]8;;unterminated",
            "\x1b(Bplain\x1b)0 x\x1bZy\x1b",
            "tab\there\x07\x00 ",
            "\x1b[1;31merror\x1b[0m: \x1b[",
        ];
        for line in lines {
            assert_eq!(
                append_only(line).as_deref(),
                Some(replay(line).as_str()),
                "{line:?}"
            );
        }
        for line in [
            "a\rb",
            "ab\x08c",
            "x\x1b[Ky",
            "x\x1b[5Gy",
            "x\x1b[Cy",
            "x\x1b[2Dy",
        ] {
            assert_eq!(append_only(line), None, "{line:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn append_only_never_disagrees_with_a_replay(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a", " ", "\t", "é", "✓", "\x1b", "[", "]", "(", ")", "\\", "\x07", "\x00",
                    "\r", "\x08", "m", "K", "1", ";", "G", "2", "\x1b[", "\x1b]", "\x1b[0m",
                ]),
                0..24,
            )
        ) {
            let line = parts.concat();
            if let Some(out) = append_only(&line) {
                proptest::prop_assert_eq!(out, replay(&line));
            }
        }
    }
}
