//! Coalescing live output into frames: an agent's activity and a gate's output, rate-limited and
//! bounded, so a chatty agent or test suite cannot flood the store or a watcher.
//!
//! **Pure**: the caller passes the time in (milliseconds from any fixed start) and appends what
//! comes out. The one rule for activity: text is merged only with the text right before it of
//! the same kind, so nothing is ever reordered, and tool calls are never merged.

use std::collections::{HashMap, VecDeque};

use crate::bound::{MAX_GATE_OUTPUT_BYTES, MAX_TEXT_BYTES, bounded};
use crate::frame::{ActivityKind, FrameBody};

/// At most one activity frame per this many milliseconds per goal: 20 frames a second, about
/// the rate a person can follow and well under what the store and a watcher take.
pub const ACTIVITY_INTERVAL_MS: u64 = 50;
/// At most one output frame per this many milliseconds per gate (4 a second).
pub const GATE_OUTPUT_INTERVAL_MS: u64 = 250;

/// Room kept at the end of a cut text frame for the note saying how much was left out.
const NOTE_ROOM: usize = 48;

/// One pending frame: a text run still open to merging, or a tool call.
#[derive(Debug)]
enum Pending {
    Text {
        turn: u32,
        kind: ActivityKind,
        text: String,
        /// Bytes that did not fit under the bound.
        dropped: u64,
    },
    Frame(FrameBody),
}

/// An agent's activity, coalesced: consecutive text of one kind merged up to
/// [`MAX_TEXT_BYTES`], at most one frame per [`ACTIVITY_INTERVAL_MS`], order kept.
#[derive(Debug)]
pub struct ActivityCoalescer {
    pending: VecDeque<Pending>,
    interval_ms: u64,
    max_text: usize,
    last_emit: Option<u64>,
    /// Calls started and not yet returned: their name and input, for a result that does not
    /// repeat them.
    open_calls: HashMap<String, (String, String)>,
}

impl Default for ActivityCoalescer {
    fn default() -> Self {
        Self::new(ACTIVITY_INTERVAL_MS, MAX_TEXT_BYTES)
    }
}

impl ActivityCoalescer {
    /// A coalescer emitting at most one frame per `interval_ms`, text frames at most
    /// `max_text` bytes (at least [`NOTE_ROOM`] + 1 is useful).
    pub fn new(interval_ms: u64, max_text: usize) -> Self {
        Self {
            pending: VecDeque::new(),
            interval_ms,
            max_text: max_text.max(NOTE_ROOM + 4),
            last_emit: None,
            open_calls: HashMap::new(),
        }
    }

    /// Takes one piece of activity: an `Activity` frame body (merged with the text before it
    /// when of the same turn and kind) or a `ToolCall` (kept as its own frame, its input and
    /// output cut to the bound, a result's missing name and input filled from its start).
    /// Other kinds pass through unchanged.
    pub fn push(&mut self, body: FrameBody) {
        match body {
            FrameBody::Activity { turn, kind, text } => self.push_text(turn, kind, &text),
            FrameBody::ToolCall {
                turn,
                id,
                mut name,
                mut input,
                status,
                output,
            } => {
                if status == crate::ToolStatus::Started {
                    self.open_calls
                        .insert(id.clone(), (name.clone(), input.clone()));
                } else if let Some((started_name, started_input)) = self.open_calls.remove(&id) {
                    if name.is_empty() {
                        name = started_name;
                    }
                    if input.is_empty() {
                        input = started_input;
                    }
                }
                let cut = |s: &str| bounded(s, self.max_text).0;
                self.pending.push_back(Pending::Frame(FrameBody::ToolCall {
                    turn,
                    input: cut(&input),
                    name: cut(&name),
                    id: cut(&id),
                    status,
                    output: output.as_deref().map(cut),
                }));
            }
            other => self.pending.push_back(Pending::Frame(other)),
        }
    }

    fn push_text(&mut self, turn: u32, kind: ActivityKind, text: &str) {
        if text.is_empty() {
            return;
        }
        let max = self.max_text;
        if let Some(Pending::Text {
            turn: t,
            kind: k,
            text: open,
            dropped,
        }) = self.pending.back_mut()
            && *t == turn
            && *k == kind
        {
            append_bounded(open, dropped, text, max);
            return;
        }
        let mut open = String::new();
        let mut dropped = 0;
        append_bounded(&mut open, &mut dropped, text, max);
        self.pending.push_back(Pending::Text {
            turn,
            kind,
            text: open,
            dropped,
        });
    }

    /// The frame due at `now_ms`, if any: at most one per interval.
    pub fn poll(&mut self, now_ms: u64) -> Option<FrameBody> {
        if self
            .last_emit
            .is_some_and(|last| now_ms.saturating_sub(last) < self.interval_ms)
        {
            return None;
        }
        let next = self.pending.pop_front()?;
        self.last_emit = Some(now_ms);
        Some(self.frame(next))
    }

    /// Everything still pending, in order, whatever the rate (the turn is ending).
    pub fn finish(&mut self) -> Vec<FrameBody> {
        let pending: Vec<Pending> = self.pending.drain(..).collect();
        pending.into_iter().map(|p| self.frame(p)).collect()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    fn frame(&self, pending: Pending) -> FrameBody {
        match pending {
            Pending::Frame(body) => body,
            Pending::Text {
                turn,
                kind,
                mut text,
                dropped,
            } => {
                if dropped > 0 {
                    text.push_str(&format!("\n[… {dropped} bytes left out]"));
                }
                FrameBody::Activity { turn, kind, text }
            }
        }
    }
}

/// Appends `more` to `open` while it stays within `max` (leaving room for the note), counting
/// the rest in `dropped`. Once something was dropped, later text is dropped too, so what is
/// kept is always a prefix of what came.
fn append_bounded(open: &mut String, dropped: &mut u64, more: &str, max: usize) {
    let room = max - NOTE_ROOM;
    if *dropped == 0 && open.len() + more.len() <= max {
        open.push_str(more);
        return;
    }
    if *dropped == 0 && open.len() < room {
        let (head, _) = bounded(more, room - open.len());
        open.push_str(&head);
        *dropped += (more.len() - head.len()) as u64;
        return;
    }
    if *dropped == 0 {
        // The text already fills the room: cut it back so the note fits.
        let (head, _) = bounded(open, room);
        *dropped += (open.len() - head.len()) as u64;
        *open = head;
    }
    *dropped += more.len() as u64;
}

/// A running gate's output, throttled to one frame per [`GATE_OUTPUT_INTERVAL_MS`] and bounded
/// to [`MAX_GATE_OUTPUT_BYTES`] per frame; what does not fit is counted in the next frame's
/// `dropped`. Bytes are decoded as UTF-8 with replacement, a character split between chunks
/// kept whole.
#[derive(Debug)]
pub struct GateOutputThrottle {
    gate: u32,
    interval_ms: u64,
    max_bytes: usize,
    pending: Vec<u8>,
    dropped: u64,
    last_emit: Option<u64>,
}

impl GateOutputThrottle {
    /// For gate number `gate` (1-based), with the default interval and bound.
    pub fn new(gate: u32) -> Self {
        Self::with_limits(gate, GATE_OUTPUT_INTERVAL_MS, MAX_GATE_OUTPUT_BYTES)
    }

    /// With an explicit interval and bound.
    pub fn with_limits(gate: u32, interval_ms: u64, max_bytes: usize) -> Self {
        Self {
            gate,
            interval_ms,
            max_bytes: max_bytes.max(4),
            pending: Vec::new(),
            dropped: 0,
            last_emit: None,
        }
    }

    /// Takes a chunk of output: kept up to the bound, the rest counted.
    pub fn push(&mut self, bytes: &[u8]) {
        let room = self.max_bytes.saturating_sub(self.pending.len());
        let kept = bytes.len().min(room);
        self.pending.extend_from_slice(&bytes[..kept]);
        self.dropped += (bytes.len() - kept) as u64;
    }

    /// The frame due at `now_ms`, if any.
    pub fn poll(&mut self, now_ms: u64) -> Option<FrameBody> {
        if self
            .last_emit
            .is_some_and(|last| now_ms.saturating_sub(last) < self.interval_ms)
        {
            return None;
        }
        let frame = self.take(false)?;
        self.last_emit = Some(now_ms);
        Some(frame)
    }

    /// What is left when the gate ends.
    pub fn finish(&mut self) -> Option<FrameBody> {
        self.take(true)
    }

    fn take(&mut self, all: bool) -> Option<FrameBody> {
        // Keep an incomplete character at the end for the next chunk (unless this is the end).
        let end = if all {
            self.pending.len()
        } else {
            complete_prefix(&self.pending)
        };
        if end == 0 && self.dropped == 0 {
            return None;
        }
        let bytes: Vec<u8> = self.pending.drain(..end).collect();
        let decoded = String::from_utf8_lossy(&bytes);
        // Replacement characters are three bytes for one: cut again, and count what went.
        let (text, cut) = bounded(&decoded, self.max_bytes);
        let mut dropped = std::mem::take(&mut self.dropped);
        if cut {
            dropped += (decoded.len() - text.len()) as u64;
        }
        if text.is_empty() && dropped == 0 {
            return None;
        }
        Some(FrameBody::GateOutput {
            gate: self.gate,
            text,
            dropped,
        })
    }
}

/// The length of `bytes` without a trailing incomplete UTF-8 sequence (at most 3 bytes).
fn complete_prefix(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(3) {
        let b = bytes[len - back];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: look further back for its lead
        }
        let need = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return len,
        };
        return if back < need { len - back } else { len };
    }
    len
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ToolStatus;

    fn text(kind: ActivityKind, t: &str) -> FrameBody {
        FrameBody::Activity {
            turn: 1,
            kind,
            text: t.to_owned(),
        }
    }

    fn tool(id: &str, status: ToolStatus) -> FrameBody {
        FrameBody::ToolCall {
            turn: 1,
            id: id.to_owned(),
            name: if status == ToolStatus::Started {
                "Bash".into()
            } else {
                String::new()
            },
            input: if status == ToolStatus::Started {
                "ls".into()
            } else {
                String::new()
            },
            status,
            output: (status != ToolStatus::Started).then(|| "out".to_owned()),
        }
    }

    #[test]
    fn text_merges_tool_calls_do_not_and_a_result_gets_its_name() {
        let mut c = ActivityCoalescer::default();
        c.push(text(ActivityKind::Text, "Hel"));
        c.push(text(ActivityKind::Text, "lo"));
        c.push(tool("t1", ToolStatus::Started));
        c.push(tool("t1", ToolStatus::Ok));
        c.push(text(ActivityKind::Thinking, "hm"));
        assert_eq!(c.poll(0), Some(text(ActivityKind::Text, "Hello")));
        assert_eq!(c.poll(49), None, "rate");
        assert!(matches!(
            c.poll(50),
            Some(FrameBody::ToolCall {
                status: ToolStatus::Started,
                ..
            })
        ));
        let rest = c.finish();
        assert_eq!(rest.len(), 2);
        assert!(
            matches!(&rest[0], FrameBody::ToolCall { name, input, status: ToolStatus::Ok, .. } if name == "Bash" && input == "ls"),
            "{rest:?}"
        );
        assert_eq!(rest[1], text(ActivityKind::Thinking, "hm"));
        assert!(c.is_empty());
    }

    #[test]
    fn text_over_the_bound_is_cut_and_says_how_much() {
        let mut c = ActivityCoalescer::new(50, 100);
        c.push(text(ActivityKind::Output, &"a".repeat(80)));
        c.push(text(ActivityKind::Output, &"b".repeat(80)));
        let Some(FrameBody::Activity { text, .. }) = c.poll(0) else {
            panic!("a frame");
        };
        assert!(text.len() <= 100, "{}", text.len());
        assert!(text.starts_with(&"a".repeat(52)));
        assert!(text.ends_with("[… 108 bytes left out]"), "{text}");
    }

    #[test]
    fn gate_output_is_throttled_bounded_and_counts_what_it_drops() {
        let mut g = GateOutputThrottle::with_limits(2, 250, 10);
        g.push(b"hello ");
        g.push(b"world, and more");
        let Some(FrameBody::GateOutput {
            gate,
            text,
            dropped,
        }) = g.poll(0)
        else {
            panic!("a frame");
        };
        assert_eq!((gate, text.as_str(), dropped), (2, "hello worl", 11));
        g.push(b"x");
        assert_eq!(g.poll(100), None);
        // "é" split across chunks is kept whole.
        g.push(&[0xC3]);
        assert!(matches!(g.poll(250), Some(FrameBody::GateOutput { ref text, .. }) if text == "x"));
        g.push(&[0xA9]);
        assert!(
            matches!(g.finish(), Some(FrameBody::GateOutput { ref text, dropped: 0, .. }) if text == "é")
        );
        assert_eq!(g.finish(), None);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Text(u8, String),
        Tool(u8, bool),
        Wait(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..3, "[a-zé ]{0,12}").prop_map(|(k, t)| Op::Text(k, t)),
            1 => (0u8..4, any::<bool>()).prop_map(|(id, done)| Op::Tool(id, done)),
            3 => (0u64..80).prop_map(Op::Wait),
        ]
    }

    fn kind(k: u8) -> ActivityKind {
        [
            ActivityKind::Text,
            ActivityKind::Thinking,
            ActivityKind::Output,
        ][usize::from(k % 3)]
    }

    /// Consecutive text of one kind joined: the shape that must survive coalescing.
    fn normal(frames: &[FrameBody]) -> Vec<FrameBody> {
        let mut out: Vec<FrameBody> = Vec::new();
        for f in frames {
            match (out.last_mut(), f) {
                (
                    Some(FrameBody::Activity { kind: k, text, .. }),
                    FrameBody::Activity {
                        kind, text: more, ..
                    },
                ) if k == kind => text.push_str(more),
                (_, FrameBody::Activity { text, .. }) if text.is_empty() => {}
                (_, FrameBody::ToolCall { id, status, .. }) => out.push(FrameBody::ToolCall {
                    turn: 1,
                    id: id.clone(),
                    name: String::new(),
                    input: String::new(),
                    status: *status,
                    output: None,
                }),
                _ => out.push(f.clone()),
            }
        }
        out
    }

    proptest! {
        #[test]
        fn nothing_lost_or_reordered_under_the_bound_and_the_rate_holds(ops in prop::collection::vec(op(), 0..60)) {
            let mut c = ActivityCoalescer::default();
            let mut now = 0;
            let mut input = Vec::new();
            let mut emitted: Vec<(u64, FrameBody)> = Vec::new();
            for op in ops {
                match op {
                    Op::Text(k, t) => {
                        let f = text(kind(k), &t);
                        input.push(f.clone());
                        c.push(f);
                    }
                    Op::Tool(id, done) => {
                        let status = if done { ToolStatus::Ok } else { ToolStatus::Started };
                        let f = tool(&id.to_string(), status);
                        input.push(f.clone());
                        c.push(f);
                    }
                    Op::Wait(ms) => now += ms,
                }
                if let Some(f) = c.poll(now) {
                    emitted.push((now, f));
                }
            }
            for pair in emitted.windows(2) {
                prop_assert!(pair[1].0 - pair[0].0 >= ACTIVITY_INTERVAL_MS);
            }
            let mut all: Vec<FrameBody> = emitted.into_iter().map(|(_, f)| f).collect();
            all.extend(c.finish());
            prop_assert_eq!(normal(&all), normal(&input));
        }

        #[test]
        fn every_text_frame_is_bounded_and_a_prefix_of_its_input(chunks in prop::collection::vec("[a-zé]{0,40}", 1..40), max in 60usize..200) {
            let mut c = ActivityCoalescer::new(50, max);
            for chunk in &chunks {
                c.push(text(ActivityKind::Text, chunk));
            }
            let frames = c.finish();
            prop_assert!(frames.len() <= 1);
            let joined: String = chunks.concat();
            for f in frames {
                let FrameBody::Activity { text, .. } = f else { unreachable!() };
                prop_assert!(text.len() <= max);
                let kept = text.split("\n[… ").next().unwrap_or_default();
                prop_assert!(joined.starts_with(kept));
                prop_assert_eq!(kept.len() == joined.len(), !text.contains("left out]"));
            }
        }

        #[test]
        fn gate_output_keeps_every_byte_under_the_bound(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..30), 0..30)) {
            let mut g = GateOutputThrottle::with_limits(1, 0, 1 << 20);
            let mut out = String::new();
            for chunk in &chunks {
                g.push(chunk);
                if let Some(FrameBody::GateOutput { text, dropped, .. }) = g.poll(0) {
                    prop_assert_eq!(dropped, 0);
                    out.push_str(&text);
                }
            }
            if let Some(FrameBody::GateOutput { text, .. }) = g.finish() {
                out.push_str(&text);
            }
            prop_assert_eq!(out, String::from_utf8_lossy(&chunks.concat()).into_owned());
        }
    }
}
