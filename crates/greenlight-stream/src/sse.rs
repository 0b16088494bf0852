//! Frames as Server-Sent Events: `id: <stream>:<seq>` and the frame as one `data:` line.
//!
//! The terminal gap frame carries no `id:`, so the watcher's cursor does not move: a browser that
//! reconnected anyway would ask from the same place and get the same answer, and the page is told
//! to close and reload from the snapshot instead.

use crate::frame::{Frame, FrameBody, StreamId};

/// The code of the terminal frame sent when a cursor cannot be honoured.
pub const GAP_CODE: &str = "SEQUENCE_GAP";
/// What a watcher should do on a gap: load the snapshot and open a fresh stream.
pub const RESYNC_ADVICE: &str = "RESYNC_REQUIRED";

/// One frame as an SSE event: `id:`, one `data:` line (JSON never contains a raw newline), and
/// the blank line that dispatches it.
pub fn encode_frame(frame: &Frame) -> String {
    let json = serde_json::to_string(frame).unwrap_or_default();
    format!("id: {}\ndata: {json}\n\n", frame.cursor())
}

/// The reconnection delay, sent once at the start of a stream.
pub fn encode_retry(retry_ms: u64) -> String {
    format!("retry: {retry_ms}\n\n")
}

/// The terminal `SEQUENCE_GAP` frame for `stream`, with no `id:`. `detail` says why (a cursor
/// past the head, a pruned range, a malformed cursor).
pub fn encode_gap(stream: StreamId, at: i64, detail: &str) -> String {
    let frame = Frame {
        stream,
        seq: 0,
        at,
        body: FrameBody::Error {
            code: GAP_CODE.to_owned(),
            message: format!(
                "{RESYNC_ADVICE}: {detail}; load the snapshot and open the stream again without a cursor"
            ),
        },
    };
    let json = serde_json::to_string(&frame).unwrap_or_default();
    format!("event: error\ndata: {json}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_one_event_with_its_cursor() {
        let frame = Frame {
            stream: StreamId::Goal(3),
            seq: 12,
            at: 1,
            body: FrameBody::Activity {
                turn: 1,
                kind: crate::ActivityKind::Text,
                text: "two\nlines".into(),
            },
        };
        let sse = encode_frame(&frame);
        assert!(sse.starts_with("id: 3:12\ndata: {"), "{sse}");
        assert!(sse.ends_with("}\n\n"));
        assert_eq!(
            sse.matches('\n').count(),
            3,
            "the text's newline must be escaped: {sse}"
        );
    }

    #[test]
    fn the_gap_has_no_id() {
        let sse = encode_gap(StreamId::Goal(3), 1, "cursor 3:99 is past the head 40");
        assert!(!sse.contains("id:"), "{sse}");
        assert!(sse.contains("SEQUENCE_GAP") && sse.contains("RESYNC_REQUIRED"));
    }
}
