//! Golden turns: recorded chunk streams replayed through [`TurnDecoder`](super::TurnDecoder) and
//! compared with their expected events.
//!
//! (First cut: the file format and replay follow.)
