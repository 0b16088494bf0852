//! The incremental text parser: thoughts and tool calls written into a model's content.
//!
//! Models served without native tool calling write their calls into the text, and many write
//! their reasoning there too. [`ToolCallParser`] reads that text as it streams, in pieces cut
//! anywhere, and returns [`TurnEvent`]s. It is a small mode machine:
//!
//! - **answer** (the start): text is [`TurnEvent::Answer`]. `<think>` enters *thought*;
//!   `<tool_call>` enters *tag*; a code fence opens *fence* or *code* (below). The tags are
//!   recognised anywhere in a line, exactly as written (lower case).
//! - **thought**: text is [`TurnEvent::Thought`] until `</think>`, which returns to answer.
//!   Nothing else is recognised inside a thought (a model may think about a `<tool_call>`).
//! - **tag** (Hermes / Qwen style): text is held until `</tool_call>`, then judged: a JSON object
//!   with a non-empty string `name`, and `arguments` (or `parameters`) that is an object, a string
//!   holding a JSON object, or absent (`{}`), is a [`TurnEvent::ToolCall`]; an array of such
//!   objects is one call each; anything else is a [`TurnEvent::Violation`] with the raw text from
//!   `<tool_call>` to `</tool_call>`. An optional string `id` becomes the call's id.
//! - **fence**: a line that starts (after any spaces or tabs) with three or more backticks opens a
//!   code fence; its info string (the rest of the line, trimmed; at most [`MAX_INFO`] bytes)
//!   decides what it is:
//!   - `tool_call` (any case): a call fence. Its body is held and judged like a tag's body;
//!     anything but a call is a violation.
//!   - `json` (any case): a *candidate*. Its body is held; it is a call only if it is a single
//!     JSON object with exactly the keys `name` (a non-empty string) and `arguments` or
//!     `parameters` (an object), plus optionally `id`. Anything else — a JSON example, a config
//!     file, an array — is ordinary code, released as answer text exactly as written. A
//!     candidate whose body passes [`TOOL_BUFFER_LIMIT`] is ordinary code too.
//!   - anything else, or none: **code**, an ordinary fence. Its text is answer text, streamed at
//!     once, and nothing inside it is recognised — so an answer that shows `<tool_call>` or
//!     `<think>` in a code block is not taken for a call or a thought.
//!
//!   A fence closes at a line of at most [`MAX_CLOSING_LINE`] bytes holding only spaces or tabs,
//!   at least as many backticks as opened it, and spaces, tabs or a CR.
//! - **discard** (the violation mode): a tag or call fence whose body passed
//!   [`TOOL_BUFFER_LIMIT`] has been reported as a violation with its first bytes; the rest, up
//!   to its closing marker, is read and dropped so memory stays bounded.
//!
//! A piece may end inside a marker (`<tool_` | `call>`, `` `` `` | `` `json ``): the fragment
//! is held, never emitted early, and released as text of the current mode once the next piece
//! shows it is not a marker. Held fragments are bounded (a marker, a fence's opening line of at
//! most [`MAX_INFO`] bytes, a closing line), so memory is the tool buffer's limit plus one piece.
//!
//! Text events may be split differently for different piecings of the same text; adjacent text
//! of one kind merged ([`canonical`](super::canonical)), the events are identical for every
//! piecing. At the end of the text ([`ToolCallParser::finish`]) held fragments are released as
//! text and an open tag or call fence is a violation (a held candidate fence too: its text may be
//! a cut call); at a deadline ([`ToolCallParser::finish_at_deadline`]) held fragments are
//! violations as well, since the text did not end. Either way nothing stays held.

use memchr::memmem;
use serde_json::{Map, Value};

use super::turn::{ToolCall, TurnEvent};

/// The most body text one tool call may hold before it is a violation (or, for a `json`
/// candidate fence, ordinary code): 1 MiB. A real call's arguments are a few KiB; a file's
/// content passed as an argument can be more, and the limit leaves room for it.
pub const TOOL_BUFFER_LIMIT: usize = 1 << 20;

/// The longest info string (after the backticks of an opening fence line) that is read to decide
/// whether a fence is a tool fence. `tool_call` and `json` need far less; a longer line is an
/// ordinary fence, so the opening line held while deciding stays small.
pub const MAX_INFO: usize = 64;

/// The longest line that can close a fence. A closing line is backticks and a little
/// whitespace; the bound keeps a held line small.
pub const MAX_CLOSING_LINE: usize = 128;

/// The longest backtick run that can open or close a fence.
const MAX_TICKS: usize = 64;

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";
const TAG_OPEN: &str = "<tool_call>";
const TAG_CLOSE: &str = "</tool_call>";

/// What kind of held fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FenceKind {
    /// ```` ```tool_call ````: must be a call.
    Call,
    /// ```` ```json ````: a call if its body is exactly a call object, else answer text.
    Candidate,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    Answer,
    Thought,
    /// Inside an ordinary code fence opened by `ticks` backticks.
    Code {
        ticks: usize,
    },
    /// Inside `<tool_call>`; the body is in `buf`.
    Tag,
    /// Inside a held fence; `opener` is its opening line, the body is in `buf`, `scan` is where
    /// the first line not yet read to its end starts.
    Fence {
        kind: FenceKind,
        ticks: usize,
        opener: String,
        scan: usize,
    },
    /// Dropping the rest of an oversized tag.
    DiscardTag,
    /// Dropping the rest of an oversized call fence; `mid_line`: the current line started in an
    /// earlier piece and cannot close the fence.
    DiscardFence {
        ticks: usize,
        mid_line: bool,
    },
}

/// What a mode's step did with the input from its position.
enum Step {
    /// Consumed up to here; go on (possibly in a new mode).
    At(usize),
    /// Consumed everything.
    End,
    /// Consumed up to here; the rest is a fragment to hold for the next piece.
    Hold(usize),
    /// Consumed everything, and put a fragment of the mode's own text into `hold`; the line so
    /// far at its start is as given (see [`ToolCallParser::indent`]).
    HeldOwn(Option<usize>),
}

/// Incremental parser of model text into thoughts, answer text and tool calls (see the module
/// documentation for the exact grammar).
#[derive(Debug)]
pub struct ToolCallParser {
    /// Whether tool calls are recognised (`false`: `<think>` only).
    calls: bool,
    /// Generated ids so far.
    ids: u64,
    mode: Mode,
    /// A fragment that may be the start of a marker, kept for the next piece.
    hold: String,
    /// At the start of `hold`: `Some(n)` when the line so far is `n` spaces or tabs (a fence may
    /// start here), `None` otherwise.
    indent: Option<usize>,
    /// The held body of a tag or fence.
    buf: String,
}

impl Default for ToolCallParser {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolCallParser {
    /// A parser for `<think>`, `<tool_call>` tags and tool fences.
    pub fn new() -> Self {
        Self::with_calls(true)
    }

    /// A parser for `<think>` only: tool calls written into the text stay answer text (for a
    /// server that sends calls natively).
    pub fn thoughts_only() -> Self {
        Self::with_calls(false)
    }

    fn with_calls(calls: bool) -> Self {
        Self {
            calls,
            ids: 0,
            mode: Mode::Answer,
            hold: String::new(),
            indent: Some(0),
            buf: String::new(),
        }
    }

    /// Whether a fragment or a tool body is held (a tag or fence not yet closed).
    pub fn is_holding(&self) -> bool {
        !self.hold.is_empty()
            || !self.buf.is_empty()
            || !matches!(self.mode, Mode::Answer | Mode::Thought | Mode::Code { .. })
    }

    /// The next generated call id: `call_1`, `call_2`, … (shared with native calls that come
    /// without an id, so ids stay unique within the parser's life).
    pub fn next_call_id(&mut self) -> String {
        self.ids += 1;
        format!("call_{}", self.ids)
    }

    /// Reads the next piece of text and returns the events it completes.
    pub fn feed(&mut self, text: &str) -> Vec<TurnEvent> {
        let mut out = Vec::new();
        self.feed_into(text, &mut out);
        out
    }

    /// [`feed`](Self::feed) that appends to `out` instead, merging text into the last event of
    /// `out` when it is text of the same kind: a caller that gathers a read's worth of token
    /// pieces into one vector gets one event per run of text, not one per token.
    #[inline]
    pub fn feed_into(&mut self, text: &str, out: &mut Vec<TurnEvent>) {
        if text.is_empty() {
            return;
        }
        if self.hold.is_empty() {
            // The common piece — a token of plain text — needs no mode machine.
            let plain = match self.mode {
                Mode::Answer => find2(b'<', b'`', text.as_bytes())
                    .is_none()
                    .then_some(Kind::Answer),
                Mode::Code { .. } => find1(b'`', text.as_bytes())
                    .is_none()
                    .then_some(Kind::Answer),
                Mode::Thought => find1(b'<', text.as_bytes())
                    .is_none()
                    .then_some(Kind::Thought),
                _ => None,
            };
            if let Some(kind) = plain {
                push_text(out, kind, text);
                self.indent = indent_before(text, text.len(), self.indent);
                return;
            }
            self.run(text, out);
        } else {
            let mut input = std::mem::take(&mut self.hold);
            input.push_str(text);
            self.run(&input, out);
            // Keep the allocation for the next fragment.
            input.clear();
            if self.hold.is_empty() {
                self.hold = input;
            }
        }
    }

    /// The text ended: held fragments are released as text of the current mode; an open tag or
    /// tool fence is a violation (a fence whose last line closes it without a line end closes
    /// normally). The parser is then at the start of a new text.
    pub fn finish(&mut self) -> Vec<TurnEvent> {
        let mut out = Vec::new();
        let hold = std::mem::take(&mut self.hold);
        match std::mem::replace(&mut self.mode, Mode::Answer) {
            Mode::Answer | Mode::Code { .. } => push_text(&mut out, Kind::Answer, &hold),
            Mode::Thought => push_text(&mut out, Kind::Thought, &hold),
            Mode::Tag => {
                let raw = format!("{TAG_OPEN}{}", self.buf);
                out.push(violation(
                    raw,
                    format!("the text ended inside {TAG_OPEN} (no {TAG_CLOSE})"),
                ));
            }
            Mode::Fence {
                kind,
                ticks,
                opener,
                scan,
            } => {
                let buf = std::mem::take(&mut self.buf);
                let (body, last) = buf.split_at(scan);
                if is_closing_line(last, ticks) && body.len() <= TOOL_BUFFER_LIMIT {
                    self.close_fence(kind, &opener, body, last, &mut out);
                } else {
                    let raw = format!("{opener}{buf}");
                    out.push(violation(raw, unterminated_fence(kind, "the text ended")));
                }
            }
            Mode::DiscardTag | Mode::DiscardFence { .. } => {} // reported when it overflowed
        }
        self.reset();
        out
    }

    /// The deadline came: nothing more will be read. A held fragment, an open tag and an open
    /// tool fence are each a violation with their raw text; nothing stays held. Returns at once.
    pub fn finish_at_deadline(&mut self) -> Vec<TurnEvent> {
        let mut out = Vec::new();
        let hold = std::mem::take(&mut self.hold);
        match std::mem::replace(&mut self.mode, Mode::Answer) {
            Mode::Answer | Mode::Code { .. } | Mode::Thought => {}
            Mode::Tag => {
                let raw = format!("{TAG_OPEN}{}", self.buf);
                out.push(violation(
                    raw,
                    format!("the deadline came inside {TAG_OPEN} (no {TAG_CLOSE})"),
                ));
            }
            Mode::Fence { kind, opener, .. } => {
                let raw = format!("{opener}{}", self.buf);
                out.push(violation(
                    raw,
                    unterminated_fence(kind, "the deadline came"),
                ));
            }
            Mode::DiscardTag | Mode::DiscardFence { .. } => {}
        }
        if !hold.is_empty() {
            out.push(violation(
                hold,
                "the deadline came while this fragment was held (a marker not yet complete)".into(),
            ));
        }
        self.reset();
        out
    }

    fn reset(&mut self) {
        let (calls, ids) = (self.calls, self.ids);
        *self = Self::with_calls(calls);
        self.ids = ids;
    }

    /// Runs the mode machine over `input` (the held fragment, then the new piece).
    fn run(&mut self, input: &str, out: &mut Vec<TurnEvent>) {
        let start_indent = self.indent;
        let mut pos = 0;
        let (held_from, own_indent) = loop {
            let step = match self.mode {
                Mode::Answer => self.answer(input, pos, start_indent, out),
                Mode::Thought => self.thought(input, pos, out),
                Mode::Code { ticks } => self.code(input, pos, ticks, start_indent, out),
                Mode::Tag => self.tag(input, pos, out),
                Mode::Fence { .. } => self.fence(input, pos, out),
                Mode::DiscardTag => self.discard_tag(input, pos),
                Mode::DiscardFence { .. } => self.discard_fence(input, pos),
            };
            match step {
                Step::At(next) if next < input.len() => pos = next,
                Step::At(_) | Step::End => break (input.len(), None),
                Step::Hold(from) => break (from, None),
                Step::HeldOwn(indent) => break (input.len(), Some(indent)),
            }
        };
        match own_indent {
            Some(indent) => self.indent = indent,
            None => {
                self.hold.push_str(&input[held_from..]);
                self.indent = indent_before(input, held_from, start_indent);
            }
        }
    }

    fn answer(
        &mut self,
        s: &str,
        pos: usize,
        start_indent: Option<usize>,
        out: &mut Vec<TurnEvent>,
    ) -> Step {
        let bytes = s.as_bytes();
        let mut i = pos;
        loop {
            let Some(off) = find2(b'<', b'`', &bytes[i..]) else {
                push_text(out, Kind::Answer, &s[pos..]);
                return Step::End;
            };
            let at = i + off;
            if bytes[at] == b'<' {
                let tags: &[&str] = if self.calls {
                    &[THINK_OPEN, TAG_OPEN]
                } else {
                    &[THINK_OPEN]
                };
                match match_marker(&s[at..], tags) {
                    Marker::Full(tag) => {
                        push_text(out, Kind::Answer, &s[pos..at]);
                        if tag == TAG_OPEN {
                            self.buf.clear();
                            self.mode = Mode::Tag;
                        } else {
                            self.mode = Mode::Thought;
                        }
                        return Step::At(at + tag.len());
                    }
                    Marker::Partial => {
                        push_text(out, Kind::Answer, &s[pos..at]);
                        return Step::Hold(at);
                    }
                    Marker::No => i = at + 1,
                }
                continue;
            }
            let run = backtick_run(&bytes[at..]);
            if indent_before(s, at, start_indent).is_none() || run > MAX_TICKS {
                i = at + run;
                continue;
            }
            let after = at + run;
            if after == s.len() {
                // More backticks may follow in the next piece.
                push_text(out, Kind::Answer, &s[pos..at]);
                return Step::Hold(at);
            }
            if run < 3 {
                i = after;
                continue;
            }
            let window = &bytes[after..s.len().min(after + MAX_INFO + 1)];
            let info = match memchr::memchr(b'\n', window) {
                Some(nl) => Some((trim_ws(&s[after..after + nl]), after + nl + 1)),
                None if window.len() <= MAX_INFO => {
                    push_text(out, Kind::Answer, &s[pos..at]);
                    return Step::Hold(at);
                }
                None => None, // too long to be a tool fence's opening line
            };
            let kind = match info {
                Some((info, _)) if self.calls && info.eq_ignore_ascii_case("tool_call") => {
                    Some(FenceKind::Call)
                }
                Some((info, _)) if self.calls && info.eq_ignore_ascii_case("json") => {
                    Some(FenceKind::Candidate)
                }
                _ => None,
            };
            match (kind, info) {
                (Some(kind), Some((_, body))) => {
                    push_text(out, Kind::Answer, &s[pos..at]);
                    self.buf.clear();
                    self.mode = Mode::Fence {
                        kind,
                        ticks: run,
                        opener: s[at..body].to_string(),
                        scan: 0,
                    };
                    return Step::At(body);
                }
                _ => {
                    // An ordinary fence: its text stays answer text, from here on unexamined.
                    push_text(out, Kind::Answer, &s[pos..after]);
                    self.mode = Mode::Code { ticks: run };
                    return Step::At(after);
                }
            }
        }
    }

    fn thought(&mut self, s: &str, pos: usize, out: &mut Vec<TurnEvent>) -> Step {
        let bytes = s.as_bytes();
        let mut i = pos;
        loop {
            let Some(off) = find1(b'<', &bytes[i..]) else {
                push_text(out, Kind::Thought, &s[pos..]);
                return Step::End;
            };
            let at = i + off;
            match match_marker(&s[at..], &[THINK_CLOSE]) {
                Marker::Full(tag) => {
                    push_text(out, Kind::Thought, &s[pos..at]);
                    self.mode = Mode::Answer;
                    return Step::At(at + tag.len());
                }
                Marker::Partial => {
                    push_text(out, Kind::Thought, &s[pos..at]);
                    return Step::Hold(at);
                }
                Marker::No => i = at + 1,
            }
        }
    }

    fn code(
        &mut self,
        s: &str,
        pos: usize,
        ticks: usize,
        start_indent: Option<usize>,
        out: &mut Vec<TurnEvent>,
    ) -> Step {
        let bytes = s.as_bytes();
        let mut i = pos;
        loop {
            let Some(off) = find1(b'`', &bytes[i..]) else {
                push_text(out, Kind::Answer, &s[pos..]);
                return Step::End;
            };
            let at = i + off;
            let run = backtick_run(&bytes[at..]);
            let Some(indent) = indent_before(s, at, start_indent) else {
                i = at + run;
                continue;
            };
            match closing_from(&bytes[at..], indent, ticks) {
                Closing::Yes(len) => {
                    push_text(out, Kind::Answer, &s[pos..at + len]);
                    self.mode = Mode::Answer;
                    return Step::At(at + len);
                }
                Closing::Maybe => {
                    push_text(out, Kind::Answer, &s[pos..at]);
                    return Step::Hold(at);
                }
                Closing::No => i = at + run,
            }
        }
    }

    fn tag(&mut self, s: &str, pos: usize, out: &mut Vec<TurnEvent>) -> Step {
        let old_len = self.buf.len();
        let scan_from = old_len.saturating_sub(TAG_CLOSE.len() - 1);
        self.buf.push_str(&s[pos..]);
        if let Some(off) = memmem::find(&self.buf.as_bytes()[scan_from..], TAG_CLOSE.as_bytes()) {
            let end = scan_from + off;
            let resume = pos + (end + TAG_CLOSE.len() - old_len);
            let body = std::mem::take(&mut self.buf);
            let body = &body[..end];
            self.mode = Mode::Answer;
            if body.len() > TOOL_BUFFER_LIMIT {
                out.push(self.oversized(TAG_OPEN, body));
            } else {
                match self.judge(body, false) {
                    Ok(calls) => out.extend(calls.into_iter().map(TurnEvent::ToolCall)),
                    Err(why) => out.push(violation(format!("{TAG_OPEN}{body}{TAG_CLOSE}"), why)),
                }
            }
            return Step::At(resume);
        }
        let maybe_closer = partial_suffix(&self.buf, TAG_CLOSE);
        let committed = self.buf.len() - maybe_closer;
        if committed > TOOL_BUFFER_LIMIT {
            let body = std::mem::take(&mut self.buf);
            out.push(self.oversized(TAG_OPEN, &body[..committed]));
            self.mode = Mode::DiscardTag;
            self.hold.push_str(&body[committed..]);
            // Only a closing tag is looked for in what is held: no line start matters.
            return Step::HeldOwn(None);
        }
        Step::End
    }

    fn fence(&mut self, s: &str, pos: usize, out: &mut Vec<TurnEvent>) -> Step {
        let Mode::Fence {
            kind,
            ticks,
            ref opener,
            scan,
        } = self.mode
        else {
            return Step::End;
        };
        let old_len = self.buf.len();
        self.buf.push_str(&s[pos..]);
        let mut line = scan;
        while let Some(off) = memchr::memchr(b'\n', &self.buf.as_bytes()[line..]) {
            let nl = line + off;
            if is_closing_line(&self.buf[line..nl], ticks) {
                let opener = opener.clone();
                let buf = std::mem::take(&mut self.buf);
                let (body, closer) = (&buf[..line], &buf[line..=nl]);
                self.mode = Mode::Answer;
                match kind {
                    _ if body.len() <= TOOL_BUFFER_LIMIT => {
                        self.close_fence(kind, &opener, body, closer, out)
                    }
                    FenceKind::Candidate => {
                        push_text(out, Kind::Answer, &opener);
                        push_text(out, Kind::Answer, body);
                        push_text(out, Kind::Answer, closer);
                    }
                    FenceKind::Call => out.push(self.oversized(&opener, body)),
                }
                return Step::At(pos + (nl + 1 - old_len));
            }
            line = nl + 1;
        }
        let last = &self.buf[line..];
        let committed = if could_close(last, ticks) {
            line
        } else {
            self.buf.len()
        };
        if committed > TOOL_BUFFER_LIMIT {
            let opener = opener.clone();
            let buf = std::mem::take(&mut self.buf);
            match kind {
                FenceKind::Candidate => {
                    // Too big to be a call: ordinary code, released as it was written.
                    push_text(out, Kind::Answer, &opener);
                    push_text(out, Kind::Answer, &buf[..committed]);
                    self.mode = Mode::Code { ticks };
                }
                FenceKind::Call => {
                    out.push(self.oversized(&opener, &buf[..committed]));
                    self.mode = Mode::DiscardFence {
                        ticks,
                        mid_line: false,
                    };
                }
            }
            // An unfinished line that may close the fence is read again in the new mode; it
            // starts a line.
            self.hold.push_str(&buf[committed..]);
            return Step::HeldOwn(Some(0));
        }
        if let Mode::Fence { scan, .. } = &mut self.mode {
            *scan = line;
        }
        Step::End
    }

    fn discard_tag(&mut self, s: &str, pos: usize) -> Step {
        match memmem::find(&s.as_bytes()[pos..], TAG_CLOSE.as_bytes()) {
            Some(off) => {
                self.mode = Mode::Answer;
                Step::At(pos + off + TAG_CLOSE.len())
            }
            None => Step::Hold(s.len() - partial_suffix(&s[pos..], TAG_CLOSE)),
        }
    }

    fn discard_fence(&mut self, s: &str, pos: usize) -> Step {
        let Mode::DiscardFence {
            ticks,
            mut mid_line,
        } = self.mode
        else {
            return Step::End;
        };
        let mut line = pos;
        while let Some(off) = memchr::memchr(b'\n', &s.as_bytes()[line..]) {
            let nl = line + off;
            if !mid_line && is_closing_line(&s[line..nl], ticks) {
                self.mode = Mode::Answer;
                return Step::At(nl + 1);
            }
            mid_line = false;
            line = nl + 1;
        }
        if !mid_line && could_close(&s[line..], ticks) {
            self.mode = Mode::DiscardFence {
                ticks,
                mid_line: false,
            };
            return Step::Hold(line);
        }
        self.mode = Mode::DiscardFence {
            ticks,
            mid_line: true,
        };
        Step::End
    }

    fn close_fence(
        &mut self,
        kind: FenceKind,
        opener: &str,
        body: &str,
        closer: &str,
        out: &mut Vec<TurnEvent>,
    ) {
        match (kind, self.judge(body, kind == FenceKind::Candidate)) {
            (_, Ok(calls)) => out.extend(calls.into_iter().map(TurnEvent::ToolCall)),
            (FenceKind::Call, Err(why)) => {
                out.push(violation(format!("{opener}{body}{closer}"), why))
            }
            (FenceKind::Candidate, Err(_)) => {
                push_text(out, Kind::Answer, opener);
                push_text(out, Kind::Answer, body);
                push_text(out, Kind::Answer, closer);
            }
        }
    }

    fn oversized(&self, opener: &str, body: &str) -> TurnEvent {
        let mut cut = TOOL_BUFFER_LIMIT.min(body.len());
        while !body.is_char_boundary(cut) {
            cut -= 1;
        }
        violation(
            format!("{opener}{}", &body[..cut]),
            format!(
                "a tool call longer than {TOOL_BUFFER_LIMIT} bytes: its first {cut} bytes are kept here, the rest up to its end is discarded"
            ),
        )
    }

    /// Judges a tag's or fence's body. `strict` (a `json` fence): one object with exactly
    /// `name`, `arguments` or `parameters`, and optionally `id`.
    fn judge(&mut self, body: &str, strict: bool) -> Result<Vec<ToolCall>, String> {
        let text = body.trim();
        if text.is_empty() {
            return Err("an empty tool call".into());
        }
        let value: Value = serde_json::from_str(text)
            .map_err(|e| format!("the tool call is not valid JSON ({e})"))?;
        let objects = match value {
            Value::Object(map) => vec![map],
            Value::Array(items) if !strict && !items.is_empty() => items
                .into_iter()
                .map(|item| match item {
                    Value::Object(map) => Ok(map),
                    _ => Err("a tool call list holds something that is not an object".to_string()),
                })
                .collect::<Result<_, _>>()?,
            _ => return Err("the tool call is not a JSON object".into()),
        };
        let shapes = objects
            .into_iter()
            .map(|map| call_shape(map, strict))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(shapes
            .into_iter()
            .map(|(id, name, arguments)| ToolCall {
                id: id.unwrap_or_else(|| self.next_call_id()),
                name,
                arguments,
            })
            .collect())
    }
}

/// The id, name and arguments of a call object, or why it is not one.
fn call_shape(
    mut map: Map<String, Value>,
    strict: bool,
) -> Result<(Option<String>, String, Value), String> {
    let name = match map.remove("name") {
        Some(Value::String(s)) if !s.trim().is_empty() => s,
        _ => return Err("the tool call has no \"name\" string".into()),
    };
    let arguments = match (map.remove("arguments"), map.remove("parameters")) {
        (Some(_), Some(_)) => {
            return Err("the tool call has both \"arguments\" and \"parameters\"".into());
        }
        (Some(a), None) | (None, Some(a)) => Some(a),
        (None, None) => None,
    };
    let arguments = match arguments {
        Some(v @ Value::Object(_)) => v,
        Some(Value::String(s)) if !strict => match serde_json::from_str::<Value>(&s) {
            Ok(v @ Value::Object(_)) => v,
            _ => return Err("the tool call's \"arguments\" string is not a JSON object".into()),
        },
        None | Some(Value::Null) if !strict => Value::Object(Map::new()),
        _ => return Err("the tool call's \"arguments\" is not an object".into()),
    };
    let id = match map.remove("id") {
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        None => None,
        Some(_) if strict => return Err("the tool call's \"id\" is not a string".into()),
        Some(_) => None,
    };
    if strict && !map.is_empty() {
        return Err("the object has keys a tool call does not".into());
    }
    Ok((id, name, arguments))
}

#[derive(Clone, Copy)]
enum Kind {
    Answer,
    Thought,
}

/// Appends text, merged into the last event when it is text of the same kind.
#[inline]
fn push_text(out: &mut Vec<TurnEvent>, kind: Kind, text: &str) {
    if text.is_empty() {
        return;
    }
    match (kind, out.last_mut()) {
        (Kind::Answer, Some(TurnEvent::Answer(s)))
        | (Kind::Thought, Some(TurnEvent::Thought(s))) => s.push_str(text),
        (Kind::Answer, _) => out.push(TurnEvent::Answer(text.to_string())),
        (Kind::Thought, _) => out.push(TurnEvent::Thought(text.to_string())),
    }
}

fn violation(raw: String, why: String) -> TurnEvent {
    TurnEvent::Violation { raw, why }
}

fn unterminated_fence(kind: FenceKind, when: &str) -> String {
    match kind {
        FenceKind::Call => format!("{when} inside a ```tool_call fence (no closing fence)"),
        FenceKind::Candidate => {
            format!("{when} inside a ```json fence (no closing fence); it may be a cut tool call")
        }
    }
}

enum Marker {
    Full(&'static str),
    Partial,
    No,
}

/// Whether `s` (starting at `<`) starts with one of `markers`, or is cut short inside one.
fn match_marker(s: &str, markers: &[&'static str]) -> Marker {
    let mut partial = false;
    for &m in markers {
        if s.len() >= m.len() {
            if s.as_bytes().starts_with(m.as_bytes()) {
                return Marker::Full(m);
            }
        } else if m.as_bytes().starts_with(s.as_bytes()) {
            partial = true;
        }
    }
    if partial { Marker::Partial } else { Marker::No }
}

/// The length of the longest suffix of `s` that is a proper prefix of `marker`.
fn partial_suffix(s: &str, marker: &str) -> usize {
    let (s, m) = (s.as_bytes(), marker.as_bytes());
    (1..m.len().min(s.len() + 1))
        .rev()
        .find(|&n| s.ends_with(&m[..n]))
        .unwrap_or(0)
}

/// Below this many bytes a plain loop finds a byte faster than the vectorised search, whose
/// setup dominates on a token-sized piece (measured with the `tool_parser` bench).
const SHORT: usize = 16;

#[inline]
fn find1(needle: u8, bytes: &[u8]) -> Option<usize> {
    if bytes.len() < SHORT {
        bytes.iter().position(|&b| b == needle)
    } else {
        memchr::memchr(needle, bytes)
    }
}

#[inline]
fn find2(a: u8, b: u8, bytes: &[u8]) -> Option<usize> {
    if bytes.len() < SHORT {
        bytes.iter().position(|&c| c == a || c == b)
    } else {
        memchr::memchr2(a, b, bytes)
    }
}

fn backtick_run(bytes: &[u8]) -> usize {
    bytes.iter().take_while(|&&b| b == b'`').count()
}

fn trim_ws(s: &str) -> &str {
    s.trim_matches(|c| c == ' ' || c == '\t' || c == '\r')
}

/// `Some(n)` when `s[..i]` ends a line's start of `n` spaces or tabs (counting `start` when the
/// blank run reaches the beginning of `s`), `None` when something else precedes `i` on its line.
#[inline]
fn indent_before(s: &str, i: usize, start: Option<usize>) -> Option<usize> {
    let bytes = &s.as_bytes()[..i];
    let blank = bytes
        .iter()
        .rev()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    if blank == bytes.len() {
        start.map(|n| n + blank)
    } else if bytes[bytes.len() - blank - 1] == b'\n' {
        Some(blank)
    } else {
        None
    }
}

enum Closing {
    /// A closing line of this many bytes (with its line end).
    Yes(usize),
    /// Cut short: could still be one.
    Maybe,
    No,
}

/// Whether `bytes`, starting at backticks after `indent` blanks at a line start, are a closing
/// line of a fence opened by `ticks` backticks.
fn closing_from(bytes: &[u8], indent: usize, ticks: usize) -> Closing {
    let run = backtick_run(bytes);
    let tail = bytes[run..]
        .iter()
        .take_while(|&&b| is_line_blank(b))
        .count();
    let end = run + tail;
    if indent + end > MAX_CLOSING_LINE || run > MAX_TICKS {
        return Closing::No;
    }
    if run == bytes.len() {
        return Closing::Maybe; // more backticks may follow
    }
    if run < ticks {
        return Closing::No;
    }
    match bytes.get(end) {
        Some(b'\n') => Closing::Yes(end + 1),
        Some(_) => Closing::No,
        None => Closing::Maybe,
    }
}

fn is_line_blank(b: u8) -> bool {
    b == b' ' || b == b'\t' || b == b'\r'
}

/// Whether a whole line (without its line end) closes a fence of `ticks` backticks.
fn is_closing_line(line: &str, ticks: usize) -> bool {
    let bytes = line.as_bytes();
    let indent = bytes
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    let run = backtick_run(&bytes[indent..]);
    line.len() <= MAX_CLOSING_LINE
        && (ticks..=MAX_TICKS).contains(&run)
        && bytes[indent + run..].iter().all(|&b| is_line_blank(b))
}

/// Whether an unfinished line could still become a closing line.
fn could_close(line: &str, ticks: usize) -> bool {
    let bytes = line.as_bytes();
    let indent = bytes
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    if indent == bytes.len() {
        return indent <= MAX_CLOSING_LINE;
    }
    !matches!(closing_from(&bytes[indent..], indent, ticks), Closing::No)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical;
    use serde_json::json;

    fn run(parser: &mut ToolCallParser, pieces: &[&str]) -> Vec<TurnEvent> {
        let mut out: Vec<TurnEvent> = pieces.iter().flat_map(|p| parser.feed(p)).collect();
        out.extend(parser.finish());
        canonical(&out)
    }

    /// The canonical events of `text`, checked to be the same for every cut into two pieces and
    /// for one character per piece.
    fn parse_with(calls: bool, text: &str) -> Vec<TurnEvent> {
        let fresh = || ToolCallParser::with_calls(calls);
        let whole = run(&mut fresh(), &[text]);
        for (cut, _) in text.char_indices().skip(1) {
            let split = run(&mut fresh(), &[&text[..cut], &text[cut..]]);
            assert_eq!(split, whole, "cut at byte {cut} of {text:?}");
        }
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(
            run(&mut fresh(), &refs),
            whole,
            "one character per piece of {text:?}"
        );
        whole
    }

    fn parse(text: &str) -> Vec<TurnEvent> {
        parse_with(true, text)
    }

    fn answer(s: &str) -> TurnEvent {
        TurnEvent::Answer(s.into())
    }

    fn thought(s: &str) -> TurnEvent {
        TurnEvent::Thought(s.into())
    }

    fn call(id: &str, name: &str, arguments: Value) -> TurnEvent {
        TurnEvent::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
        })
    }

    fn why(event: &TurnEvent) -> (&str, &str) {
        match event {
            TurnEvent::Violation { raw, why } => (raw, why),
            other => panic!("not a violation: {other:?}"),
        }
    }

    #[test]
    fn think_then_answer_then_hermes_call() {
        let text = "<think>I should read it.</think>\n\nReading.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/a<b>.rs\"}}\n</tool_call>";
        assert_eq!(
            parse(text),
            vec![
                thought("I should read it."),
                answer("\n\nReading.\n"),
                call("call_1", "read_file", json!({"path": "src/a<b>.rs"})),
            ]
        );
    }

    #[test]
    fn angle_brackets_and_near_miss_tags_are_answer_text() {
        let text = "if a<b && c <tool_calls> <think > </think> <tool_call ok";
        assert_eq!(parse(text), vec![answer(text)]);
    }

    #[test]
    fn inside_a_thought_only_the_closing_tag_counts() {
        let text =
            "<think>maybe <tool_call>{\"name\":\"x\"}</tool_call>? ```json\n{}\n```</think>done";
        assert_eq!(
            parse(text),
            vec![
                thought("maybe <tool_call>{\"name\":\"x\"}</tool_call>? ```json\n{}\n```"),
                answer("done")
            ]
        );
    }

    #[test]
    fn several_calls_ids_count_and_an_id_in_the_text_is_kept() {
        let text = "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call><tool_call>[{\"name\":\"b\"},{\"name\":\"c\",\"parameters\":{\"x\":1},\"id\":\"own\"}]</tool_call><tool_call>{\"name\":\"d\",\"arguments\":\"{\\\"y\\\":2}\"}</tool_call>";
        assert_eq!(
            parse(text),
            vec![
                call("call_1", "a", json!({})),
                call("call_2", "b", json!({})),
                call("own", "c", json!({"x": 1})),
                call("call_3", "d", json!({"y": 2})),
            ]
        );
    }

    #[test]
    fn a_malformed_tag_is_a_violation_with_its_raw_text_and_parsing_goes_on() {
        let text = "a<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": }</tool_call>b<tool_call>{\"arguments\":{}}</tool_call>c<tool_call>[]</tool_call>";
        let events = parse(text);
        assert_eq!(events.len(), 6, "{events:?}");
        assert_eq!(events[0], answer("a"));
        let (raw, why1) = why(&events[1]);
        assert_eq!(
            raw,
            "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": }</tool_call>"
        );
        assert!(why1.contains("not valid JSON"), "{why1}");
        assert_eq!(events[2], answer("b"));
        assert!(why(&events[3]).1.contains("no \"name\""));
        assert_eq!(events[4], answer("c"));
        assert!(why(&events[5]).1.contains("not a JSON object"));
    }

    #[test]
    fn json_fences_are_calls_only_when_exactly_a_call_object() {
        let call_fence =
            "Sure.\n```json\n{\"name\": \"run\", \"arguments\": {\"cmd\": \"ls\"}}\n```\nDone.";
        assert_eq!(
            parse(call_fence),
            vec![
                answer("Sure.\n"),
                call("call_1", "run", json!({"cmd": "ls"})),
                answer("Done.")
            ]
        );
        for code in [
            "Config:\n```json\n{\"name\": \"my-app\", \"version\": \"1.0.0\"}\n```\n",
            "```json\n{\"name\": \"x\", \"arguments\": {}, \"extra\": 1}\n```",
            "```json\n[{\"name\": \"x\", \"arguments\": {}}]\n```",
            "```JSON\n{\"name\": \"x\", \"arguments\": \"{}\"}\n```\n",
            "```json\nnot json\n```",
        ] {
            assert_eq!(parse(code), vec![answer(code)], "{code:?}");
        }
    }

    #[test]
    fn tool_call_fences_must_be_calls() {
        let text = "  ```tool_call\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}\n  ```\nx\n```tool_call\n{oops}\n```";
        let events = parse(text);
        assert_eq!(
            events[..3],
            [
                answer("  "),
                call("call_1", "f", json!({"a": [1, 2]})),
                answer("x\n")
            ]
        );
        assert_eq!(why(&events[3]).0, "```tool_call\n{oops}\n```");
    }

    #[test]
    fn ordinary_code_fences_hide_tags_and_close_only_on_a_closing_line() {
        let text = "Example:\n````\n<tool_call>{\"name\":\"no\"}</tool_call>\n```\n<think>no</think>\n````\n<think>yes</think>";
        assert_eq!(
            parse(text),
            vec![
                answer(
                    "Example:\n````\n<tool_call>{\"name\":\"no\"}</tool_call>\n```\n<think>no</think>\n````\n"
                ),
                thought("yes"),
            ]
        );
        // Backticks that are not at a line start never open a fence.
        let inline = "use ```json\n<tool_call>{\"name\":\"f\"}</tool_call>";
        assert_eq!(
            parse(inline),
            vec![answer("use ```json\n"), call("call_1", "f", json!({}))]
        );
        // A bare fence, a fence with another language: code.
        let rust = "```rust\nlet s = \"<think>\";\n```\n```\n<tool_call>\n```\n";
        assert_eq!(parse(rust), vec![answer(rust)]);
    }

    #[test]
    fn unterminated_calls_are_violations_and_unterminated_code_is_answer() {
        let events = parse("x<tool_call>{\"name\":\"f\",\"argu");
        assert_eq!(events[0], answer("x"));
        assert_eq!(
            why(&events[1]),
            (
                "<tool_call>{\"name\":\"f\",\"argu",
                "the text ended inside <tool_call> (no </tool_call>)"
            )
        );
        let events = parse("```tool_call\n{\"name\":\"f\"}\n``");
        assert_eq!(why(&events[0]).0, "```tool_call\n{\"name\":\"f\"}\n``");
        let events = parse("```json\n{\"name\":\"f\",\"arguments\":{}}\n");
        assert!(why(&events[0]).1.contains("```json"));
        assert_eq!(
            parse("```py\nprint(1)\n``"),
            vec![answer("```py\nprint(1)\n``")]
        );
        // A closing line without its line end at the very end still closes.
        assert_eq!(
            parse("```tool_call\n{\"name\":\"f\"}\n```"),
            vec![call("call_1", "f", json!({}))]
        );
    }

    #[test]
    fn held_fragments_are_released_as_text_when_the_text_ends() {
        assert_eq!(parse("a <tool_"), vec![answer("a <tool_")]);
        assert_eq!(parse("<think>b </thi"), vec![thought("b </thi")]);
        assert_eq!(parse("``"), vec![answer("``")]);
        assert_eq!(parse("```jso"), vec![answer("```jso")]);
    }

    #[test]
    fn the_deadline_reports_held_fragments_and_open_calls_and_holds_nothing() {
        let mut p = ToolCallParser::new();
        assert_eq!(p.feed("a <tool_"), vec![answer("a ")]);
        assert!(p.is_holding());
        let events = p.finish_at_deadline();
        assert_eq!(why(&events[0]).0, "<tool_");
        assert!(!p.is_holding());
        p.feed("```tool_call\n{\"name\":");
        assert!(p.is_holding());
        let events = p.finish_at_deadline();
        assert_eq!(why(&events[0]).0, "```tool_call\n{\"name\":");
        assert!(!p.is_holding());
        assert!(p.feed("<think>x").len() == 1 && p.finish_at_deadline().is_empty());
    }

    #[test]
    fn thoughts_only_leaves_calls_as_answer_text() {
        let text =
            "<think>t</think><tool_call>{\"name\":\"f\"}</tool_call>\n```tool_call\n{}\n```\n";
        assert_eq!(
            parse_with(false, text),
            vec![
                thought("t"),
                answer("<tool_call>{\"name\":\"f\"}</tool_call>\n```tool_call\n{}\n```\n")
            ]
        );
    }

    #[test]
    fn multibyte_text_around_markers() {
        let text = "中文🙂<think>思考🤔</think>答え<tool_call>{\"name\":\"é\",\"arguments\":{\"q\":\"😀\"}}</tool_call>終";
        assert_eq!(
            parse(text),
            vec![
                answer("中文🙂"),
                thought("思考🤔"),
                answer("答え"),
                call("call_1", "é", json!({"q": "😀"})),
                answer("終")
            ]
        );
    }

    #[test]
    fn an_oversized_tag_is_one_violation_and_the_rest_of_it_is_dropped() {
        let big = "x".repeat(TOOL_BUFFER_LIMIT + 10);
        let text = format!(
            "a<tool_call>{{\"name\":\"f\",\"arguments\":{{\"s\":\"{big}\"}}}}</tool_call>b"
        );
        for pieces in [
            vec![text.as_str()],
            text.as_bytes()
                .chunks(4096)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect(),
        ] {
            let events = run(&mut ToolCallParser::new(), &pieces);
            assert_eq!(events.len(), 3);
            assert_eq!(events[0], answer("a"));
            let (raw, why) = why(&events[1]);
            assert_eq!(raw.len(), TAG_OPEN.len() + TOOL_BUFFER_LIMIT);
            assert!(why.contains("longer than"));
            assert_eq!(events[2], answer("b"));
        }
    }

    #[test]
    fn an_oversized_json_fence_is_ordinary_code_and_an_oversized_call_fence_a_violation() {
        let big = "y".repeat(TOOL_BUFFER_LIMIT);
        let json = format!("```json\n{{\"data\": \"{big}\"}}\n```\nafter");
        let call = format!(
            "```tool_call\n{{\"name\":\"f\",\"arguments\":{{\"s\":\"{big}\"}}}}\n```\nafter"
        );
        for pieces in [1, 4096, 100_000] {
            let cut = |t: &str| -> Vec<TurnEvent> {
                let parts: Vec<&str> = t
                    .as_bytes()
                    .chunks(pieces.max(1))
                    .map(|c| std::str::from_utf8(c).unwrap())
                    .collect();
                let parts = if pieces == 1 { vec![t] } else { parts };
                run(&mut ToolCallParser::new(), &parts)
            };
            assert_eq!(cut(&json), vec![answer(&json)]);
            let events = cut(&call);
            assert_eq!(events.len(), 2, "{pieces}");
            assert!(why(&events[0]).1.contains("longer than"));
            assert_eq!(events[1], answer("after"));
        }
    }
}
