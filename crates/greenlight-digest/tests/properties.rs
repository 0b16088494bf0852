//! Invariants over arbitrary input: never panic, chunking never matters, and a recognised
//! digest never explains fewer failures than its summary counts.

mod common;

use greenlight_digest::{Classification, DigestOptions, StreamingDigester, digest};
use proptest::prelude::*;

/// Pieces that real outputs are made of, so the generator reaches deep parser states.
const PIECES: &[&str] = &[
    "running 2 tests\n",
    "test a ... FAILED\n",
    "test b ... ok\n",
    "---- a stdout ----\n",
    "thread 'a' panicked at src/lib.rs:3:5:\n",
    "boom\n",
    "test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n",
    "============================= test session starts ==============================\n",
    "FAILED t.py::x - assert 1 == 2\n",
    "==== 1 failed, 2 passed in 0.01s ====\n",
    "--- FAIL: TestX (0.00s)\n",
    "    x_test.go:3: nope\n",
    "FAIL\tpkg\t0.01s\n",
    "ok  \tpkg\t0.01s\n",
    "TAP version 13\n",
    "not ok 1 - thing\n",
    "ok 2 - other\n",
    "1..2\n",
    "# fail 1\n",
    "src/a.ts(1,2): error TS2322: bad\n",
    "Found 1 error.\n",
    "error[E0308]: mismatched types\n",
    " --> src/lib.rs:1:1\n",
    "\x1b[31m",
    "\r",
    "\r\n",
    "\u{fffd}",
    "  ● suite › t\n",
    "Tests:       1 failed, 1 passed, 2 total\n",
    "{\"Action\":\"output\",\"Output\":\"--- FAIL: TestY (0.00s)\\n\"}\n",
];

fn output() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(PIECES).prop_map(|s| s.as_bytes().to_vec()),
            prop::collection::vec(any::<u8>(), 0..12),
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

fn exit_code() -> impl Strategy<Value = Option<i32>> {
    prop_oneof![
        Just(None),
        Just(Some(0)),
        Just(Some(1)),
        any::<i32>().prop_map(Some)
    ]
}

fn chunked(
    bytes: &[u8],
    cuts: &[usize],
    exit: Option<i32>,
    options: &DigestOptions,
) -> greenlight_digest::Digest {
    let mut s = StreamingDigester::new(options.clone());
    let mut at = 0;
    for &c in cuts {
        let end = (at + c).min(bytes.len());
        s.push(&bytes[at..end]);
        at = end;
    }
    s.push(&bytes[at..]);
    s.finish(exit)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048), exit in exit_code()) {
        let d = digest(&bytes, exit, &DigestOptions::default());
        prop_assert_eq!(d.bytes, bytes.len() as u64);
    }

    #[test]
    fn any_chunking_gives_the_same_digest(
        bytes in output(),
        cuts in prop::collection::vec(0usize..64, 0..20),
        exit in exit_code(),
        small in any::<bool>(),
    ) {
        let options = if small {
            DigestOptions { max_line_bytes: 16, max_items: 2, max_scan_bytes: 300, max_text: 16, ..DigestOptions::default() }
        } else {
            DigestOptions::default()
        };
        let whole = digest(&bytes, exit, &options);
        prop_assert_eq!(chunked(&bytes, &cuts, exit, &options), whole);
    }

    #[test]
    fn recognised_never_reports_fewer_failures_than_counted(bytes in output(), exit in exit_code()) {
        let d = digest(&bytes, exit, &DigestOptions::default());
        if d.classification == Classification::Recognised {
            let counted = d.summary.as_ref().map_or(0, |s| s.failed.unwrap_or(0));
            prop_assert!(d.failures.len() as u64 >= counted, "{:?}", d);
            prop_assert!(d.exit_code.is_some());
            if d.exit_code != Some(0) {
                prop_assert!(!d.failures.is_empty() || !d.diagnostics.is_empty(), "{:?}", d);
            }
        }
    }

    #[test]
    fn chunking_a_real_fixture_never_matters(index in 0usize..64, cuts in prop::collection::vec(1usize..4096, 0..30)) {
        let all = common::all();
        let f = &all[index % all.len()];
        let whole = f.digest();
        prop_assert_eq!(chunked(&f.output, &cuts, Some(f.exit_code), &f.options()), whole);
    }
}
