//! Cursors and the four ways a (re)connecting watcher is answered.
//!
//! A cursor is `<stream>:<seq>` (the SSE `id:` of the last frame the watcher saw), or a bare
//! decimal read as a seq of the stream the URL names. What the watcher gets:
//!
//! | cursor | answer |
//! |---|---|
//! | none (or empty) | **fresh**: every frame from 1, then live |
//! | this stream's `N`, frames `N+1..=head` still stored | **replay** them, then live |
//! | malformed, `N > head` (never issued) or `N+1` pruned | **gap**: one terminal `SEQUENCE_GAP` frame, then the end |
//! | another stream's cursor | **reject**: no frame at all (HTTP 409) |
//!
//! Replaying only reads what is stored; it never runs anything again, and the same cursor twice
//! gives the same frames.

use crate::frame::StreamId;

/// A cursor as read against the stream a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cursor {
    /// The last frame seen in this stream (0: none yet).
    Seq(u64),
    /// A well-formed cursor of another stream.
    OtherStream(StreamId),
    /// Not a cursor at all.
    Malformed,
}

/// What to send a watcher who connects with a cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// No cursor: every frame from the first, then live.
    Fresh,
    /// Frames after `after`, then live.
    Replay {
        /// The last frame the watcher has.
        after: u64,
    },
    /// The cursor cannot be honoured: one terminal `SEQUENCE_GAP` frame, then end.
    Gap,
    /// The cursor names another stream: refuse, send nothing.
    Reject,
}

/// A non-negative decimal with no sign and no spaces (leading zeros refused, `0` allowed).
fn seq(text: &str) -> Option<u64> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}

/// Reads `raw` (a `Last-Event-ID` header or `last_event_id` query value) against the stream
/// the URL names. `None` for an empty value, which EventSource treats as "no cursor" too.
pub fn parse_cursor(raw: &str, stream: StreamId) -> Option<Cursor> {
    let raw = raw.trim_matches([' ', '\t']);
    if raw.is_empty() {
        return None;
    }
    let cursor = match raw.rsplit_once(':') {
        None => seq(raw).map_or(Cursor::Malformed, Cursor::Seq),
        Some((name, n)) => match (name.parse::<StreamId>(), seq(n)) {
            (Ok(named), Some(n)) if named == stream => Cursor::Seq(n),
            (Ok(named), Some(_)) => Cursor::OtherStream(named),
            _ => Cursor::Malformed,
        },
    };
    Some(cursor)
}

/// Decides what a watcher of `stream` with cursor `raw` gets, given the stream's `head` (its
/// last seq, 0 when empty) and `oldest` (the lowest seq still stored; `head + 1` when none is).
pub fn resolve(raw: Option<&str>, stream: StreamId, head: u64, oldest: u64) -> Resume {
    match raw.and_then(|raw| parse_cursor(raw, stream)) {
        None => Resume::Fresh,
        Some(Cursor::Malformed) => Resume::Gap,
        Some(Cursor::OtherStream(_)) => Resume::Reject,
        Some(Cursor::Seq(n)) if n > head => Resume::Gap,
        // Frames after n were pruned: what the watcher missed is gone.
        Some(Cursor::Seq(n)) if n < head && n + 1 < oldest => Resume::Gap,
        Some(Cursor::Seq(n)) => Resume::Replay { after: n },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G7: StreamId = StreamId::Goal(7);

    #[test]
    fn the_four_outcomes() {
        assert_eq!(resolve(None, G7, 40, 1), Resume::Fresh);
        assert_eq!(resolve(Some(""), G7, 40, 1), Resume::Fresh);
        assert_eq!(resolve(Some("7:5"), G7, 40, 1), Resume::Replay { after: 5 });
        assert_eq!(resolve(Some("5"), G7, 40, 1), Resume::Replay { after: 5 });
        assert_eq!(
            resolve(Some("7:40"), G7, 40, 1),
            Resume::Replay { after: 40 }
        );
        assert_eq!(resolve(Some("7:0"), G7, 40, 1), Resume::Replay { after: 0 });
        assert_eq!(resolve(Some("7:99"), G7, 40, 1), Resume::Gap);
        assert_eq!(resolve(Some("garbage"), G7, 40, 1), Resume::Gap);
        assert_eq!(resolve(Some("7:"), G7, 40, 1), Resume::Gap);
        assert_eq!(resolve(Some("7:-1"), G7, 40, 1), Resume::Gap);
        assert_eq!(resolve(Some("7:05"), G7, 40, 1), Resume::Gap);
        assert_eq!(resolve(Some("x:5"), G7, 40, 1), Resume::Gap);
        assert_eq!(resolve(Some("8:5"), G7, 40, 1), Resume::Reject);
        assert_eq!(resolve(Some("run-7:5"), G7, 40, 1), Resume::Reject);
        assert_eq!(
            resolve(Some("run-7:5"), StreamId::Run(7), 40, 1),
            Resume::Replay { after: 5 }
        );
        assert_eq!(
            resolve(Some("wf-7:5"), StreamId::Workflow(7), 40, 1),
            Resume::Replay { after: 5 }
        );
        assert_eq!(resolve(Some("wf-7:5"), G7, 40, 1), Resume::Reject);
        assert_eq!(
            resolve(Some("run-7:5"), StreamId::Workflow(7), 40, 1),
            Resume::Reject
        );
    }

    #[test]
    fn a_pruned_hole_is_a_gap_but_a_caught_up_cursor_is_not() {
        // Frames 1..=10 pruned; 11..=40 stored.
        assert_eq!(resolve(Some("7:5"), G7, 40, 11), Resume::Gap);
        assert_eq!(
            resolve(Some("7:10"), G7, 40, 11),
            Resume::Replay { after: 10 }
        );
        // Everything pruned, but the watcher has it all already.
        assert_eq!(
            resolve(Some("7:40"), G7, 40, 41),
            Resume::Replay { after: 40 }
        );
    }

    #[test]
    fn an_empty_stream_accepts_only_zero() {
        assert_eq!(resolve(Some("7:0"), G7, 0, 1), Resume::Replay { after: 0 });
        assert_eq!(resolve(Some("7:1"), G7, 0, 1), Resume::Gap);
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_a_valid_cursor_is_read_back(raw in ".{0,40}", n in 0u64..100) {
            let _ = resolve(Some(&raw), G7, 50, 1);
            let replay = n <= 50;
            let got = resolve(Some(&format!("7:{n}")), G7, 50, 1);
            proptest::prop_assert_eq!(got == (Resume::Replay { after: n }), replay);
        }
    }
}
