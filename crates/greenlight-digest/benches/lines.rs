//! The per-line hot path: a long run's output fed in 64 KiB chunks, as `greenlight digest`
//! reads it, for the line shapes that make up the bulk of real runs.
//!
//! One rule: every input is generated here, deterministic and a few MiB, so a run takes seconds
//! and two runs measure the same work. `scripts/bench-digest.sh` measures the whole process.

// criterion_group! defines an undocumented public function.
#![allow(missing_docs)]

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use greenlight_digest::{DigestOptions, StreamingDigester};
use std::hint::black_box;
use std::time::Duration;

/// Bytes of each generated output.
const SIZE: usize = 4 << 20;
/// The read size of `greenlight digest`.
const CHUNK: usize = 64 * 1024;

/// Repeats `line(i)` until `SIZE` bytes, between `header` and `footer`.
fn generate(header: &str, line: impl Fn(usize) -> String, footer: &str) -> Vec<u8> {
    let mut out = header.as_bytes().to_vec();
    let mut i = 0;
    while out.len() < SIZE {
        out.extend_from_slice(line(i).as_bytes());
        i += 1;
    }
    out.extend_from_slice(footer.as_bytes());
    out
}

fn inputs() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            "libtest",
            generate(
                "\nrunning 100000 tests\n",
                |i| format!("test module_{}::case_{i} ... ok\n", i / 1000),
                "\ntest result: ok. 100000 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.00s\n\n",
            ),
        ),
        (
            "pytest-v",
            generate(
                "============================= test session starts ==============================\n",
                |i| {
                    format!(
                        "tests/test_mod_{}.py::test_case[{i}] PASSED{:20}[ 50%]\n",
                        i / 1000,
                        ""
                    )
                },
                "==== 100000 passed in 9.00s ====\n",
            ),
        ),
        (
            // Colour and CRLF: every line takes the normalising path.
            "jest-color-crlf",
            generate(
                "",
                |i| format!("  \x1b[32m✓\x1b[39m \x1b[2madds case {i} (1 ms)\x1b[22m\r\n"),
                "Tests:       1 passed, 1 total\r\n",
            ),
        ),
        (
            // No format at all: every parser's wake test runs and none is engaged.
            "unrecognised",
            generate(
                "",
                |i| format!("[{i:>8}] compiling unit {} of the build\n", i % 977),
                "",
            ),
        ),
    ]
}

fn lines(c: &mut Criterion) {
    let mut group = c.benchmark_group("digest");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1));
    for (name, input) in inputs() {
        group.throughput(Throughput::Bytes(input.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &input, |b, input| {
            b.iter(|| {
                let mut d = StreamingDigester::new(DigestOptions::default());
                for chunk in input.chunks(CHUNK) {
                    d.push(black_box(chunk));
                }
                black_box(d.finish(Some(0)))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, lines);
criterion_main!(benches);
