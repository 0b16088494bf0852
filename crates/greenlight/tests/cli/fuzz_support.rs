//! What the fuzz modules share: how many cases to run (`GREENLIGHT_FUZZ_CASES`, small for plain
//! `cargo test`, large in scripts/test), a wall-clock budget per target
//! (`GREENLIGHT_FUZZ_SECONDS`), the seed (`GREENLIGHT_FUZZ_SEED`: fixed unless asked), byte-level
//! mutations of a valid input, and one run of the real binary with a deadline, so a hang is a
//! failure and not a stuck suite.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::io::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::RngSeed;

/// Cases per fuzz property: `GREENLIGHT_FUZZ_CASES`, else 48 (a few seconds of plain `cargo test`).
pub fn cases() -> u32 {
    cases_or(48)
}

/// Cases per fuzz property whose cases are costly: `GREENLIGHT_FUZZ_CASES`, else `default`.
pub fn cases_or(default: u32) -> u32 {
    std::env::var("GREENLIGHT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// After this much wall time a target stops running new inputs (the remaining cases pass without
/// running), so a large case count on a slow machine stays bounded: `GREENLIGHT_FUZZ_SECONDS`,
/// else 120.
pub fn budget() -> Duration {
    Duration::from_secs(
        std::env::var("GREENLIGHT_FUZZ_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(120),
    )
}

/// The random seed: `GREENLIGHT_FUZZ_SEED` (a number, or `random` for a fresh one each run, as
/// scripts/test does), else a fixed one, so plain `cargo test` runs the same inputs every time.
/// A failure prints the seed's inputs; proptest also saves them under `proptest-regressions/`.
pub fn seed() -> RngSeed {
    match std::env::var("GREENLIGHT_FUZZ_SEED").as_deref() {
        Ok("random") => RngSeed::Random,
        Ok(n) => RngSeed::Fixed(n.parse().unwrap_or_else(|_| {
            panic!("GREENLIGHT_FUZZ_SEED must be a number or `random`, found `{n}`")
        })),
        Err(_) => RngSeed::Fixed(0x6772_6565_6e6c_6974),
    }
}

pub fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        rng_seed: seed(),
        // Shrinking re-runs the binary; a few hundred steps find a small input without taking
        // minutes on a loaded machine.
        max_shrink_iters: 256,
        ..ProptestConfig::default()
    }
}

/// One edit to a byte string. Positions are fractions of the length so they stay in range
/// whatever the earlier edits did.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// XOR one byte with a non-zero mask.
    Flip(f64, u8),
    /// Keep only the first part.
    Truncate(f64),
    /// Insert bytes at a position.
    Insert(f64, Vec<u8>),
    /// Repeat the line at a position (a duplicated key, a repeated header).
    DuplicateLine(f64),
    /// Drop the line at a position.
    DeleteLine(f64),
    /// Replace the first run of digits at or after a position.
    Number(f64, &'static str),
}

/// Bytes that parsers trip on: control characters, quotes, YAML and JSON punctuation, invalid
/// UTF-8, and long runs.
fn nasty() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"\0".to_vec()),
        Just(b"\t".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"'".to_vec()),
        Just(b"#".to_vec()),
        Just(b": ".to_vec()),
        Just(b"- ".to_vec()),
        Just(b"  ".to_vec()),
        Just(b"{".to_vec()),
        Just(b"}".to_vec()),
        Just(b"[".to_vec()),
        Just(b",".to_vec()),
        Just(b"\\".to_vec()),
        Just(b"\xff".to_vec()),
        Just(b"\xc3".to_vec()),
        Just(b"\xef\xbb\xbf".to_vec()),
        Just("\u{202e}".as_bytes().to_vec()),
        Just(vec![b'a'; 70_000]),
        Just(b"[".repeat(5_000)),
        proptest::collection::vec(any::<u8>(), 1..16),
    ]
}

const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "00",
    "+5",
    "1e3",
    "0x10",
    "7201",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "123456789012345678901234567890",
    "1.5",
];

pub fn mutation() -> impl Strategy<Value = Mutation> {
    let at = 0.0..1.0f64;
    prop_oneof![
        4 => (at.clone(), 1..=255u8).prop_map(|(p, m)| Mutation::Flip(p, m)),
        1 => at.clone().prop_map(Mutation::Truncate),
        4 => (at.clone(), nasty()).prop_map(|(p, b)| Mutation::Insert(p, b)),
        2 => at.clone().prop_map(Mutation::DuplicateLine),
        1 => at.clone().prop_map(Mutation::DeleteLine),
        2 => (at, proptest::sample::select(NUMBERS)).prop_map(|(p, n)| Mutation::Number(p, n)),
    ]
}

fn index(len: usize, at: f64) -> usize {
    ((len as f64) * at) as usize
}

/// The byte range of the line holding `pos` (its newline included).
fn line_at(text: &[u8], pos: usize) -> std::ops::Range<usize> {
    let pos = pos.min(text.len().saturating_sub(1));
    let start = text[..pos]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let end = text[pos..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(text.len(), |i| pos + i + 1);
    start..end
}

pub fn apply(text: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut out = text.to_vec();
    for m in mutations {
        if out.is_empty() {
            break;
        }
        match m {
            Mutation::Flip(at, mask) => {
                let i = index(out.len(), *at);
                out[i] ^= mask;
            }
            Mutation::Truncate(at) => out.truncate(index(out.len(), *at)),
            Mutation::Insert(at, bytes) => {
                let i = index(out.len() + 1, *at).min(out.len());
                out.splice(i..i, bytes.iter().copied());
            }
            Mutation::DuplicateLine(at) => {
                let line = line_at(&out, index(out.len(), *at));
                let copy = out[line.clone()].to_vec();
                out.splice(line.end..line.end, copy);
            }
            Mutation::DeleteLine(at) => {
                let line = line_at(&out, index(out.len(), *at));
                out.drain(line);
            }
            Mutation::Number(at, number) => {
                let from = index(out.len(), *at);
                if let Some(start) = out[from..].iter().position(u8::is_ascii_digit) {
                    let start = from + start;
                    let end = out[start..]
                        .iter()
                        .position(|b| !b.is_ascii_digit())
                        .map_or(out.len(), |i| start + i);
                    out.splice(start..end, number.bytes());
                }
            }
        }
    }
    out
}

/// How one run of the binary ended.
pub struct Outcome {
    /// The exit code, or `None` when a signal ended it.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` with `stdin`, killing it (and failing the property) after `limit`: a hang on any
/// input is a bug.
pub fn run(mut cmd: Command, stdin: &[u8], limit: Duration) -> Result<Outcome, TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out");
    let err_path = dir.path().join("err");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    // A thread feeds stdin, so a binary that never reads it still meets the deadline below. It
    // may stop reading early (a size cap, a parse error): a broken pipe is its answer, not a
    // failure of the test.
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let _ = feeder.join();
            return Err(TestCaseError::fail(format!(
                "greenlight did not finish within {limit:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = feeder.join();
    Ok(Outcome {
        code: status.code(),
        signal: status.signal(),
        stdout: String::from_utf8_lossy(&std::fs::read(out_path).unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&std::fs::read(err_path).unwrap()).into_owned(),
    })
}
