//! greenlight's live frames: what a goal (or a verify or hook run) tells a watcher, in order.
//!
//! A stream is one goal's or one run's life as a sequence of [`Frame`]s numbered 1, 2, 3, …
//! with no hole. The store assigns the number inside the transaction that persists the frame;
//! only then is it published. A watcher's cursor (`<stream>:<seq>`, the SSE `id:`) therefore
//! names a stream and a position in it, and [`resolve`] decides what a reconnecting watcher gets:
//! everything (fresh), the rest (replay), a terminal `SEQUENCE_GAP` (gap) or nothing (reject).
//!
//! **Pure**: types, parsing and encoding; no I/O, no clock.

mod bound;
mod coalesce;
mod cursor;
mod frame;
mod sse;

pub use bound::{MAX_GATE_OUTPUT_BYTES, MAX_PROMPT_BYTES, MAX_TEXT_BYTES, bounded};
pub use coalesce::{
    ACTIVITY_INTERVAL_MS, ActivityCoalescer, GATE_OUTPUT_INTERVAL_MS, GateOutputThrottle,
};
pub use cursor::{Cursor, Resume, parse_cursor, resolve};
pub use frame::{
    ActivityKind, Frame, FrameBody, GateVerdict, RunKind, StreamId, StreamIdError, ToolStatus,
    TurnTokens, frame_schema,
};
pub use sse::{GAP_CODE, RESYNC_ADVICE, encode_frame, encode_gap, encode_retry};
