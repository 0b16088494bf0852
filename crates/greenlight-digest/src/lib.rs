//! Recognising test and build output and turning it into exact diagnostics.
//!
//! Pure: bytes and an exit code in, a `Digest` out. No I/O, no clock.
