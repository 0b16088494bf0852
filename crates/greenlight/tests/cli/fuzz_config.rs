//! Fuzzing the verify.yaml v1 reader through the real binary: valid files mutated byte by byte
//! (flips, truncation, inserted NUL, tabs, CR, quotes, invalid UTF-8, long runs, duplicated and
//! dropped lines, out-of-range numbers). Whatever the file holds, `greenlight verify` either
//! rejects it with exit 2 and a `path:line:` (or whole-file `path:`) message and nothing on stdout,
//! or judges it with a verdict exit code and a RESULT line; it never panics, never dies by a
//! signal, and never hangs.
//!
//! Cases: `GREENLIGHT_FUZZ_CASES` (48 by default, scripts/test runs 1000), bounded by
//! `GREENLIGHT_FUZZ_SECONDS`. The seeds' gate commands are harmless (`true`, `echo`, `exit`), so
//! a mutated command is at worst a different harmless command or a shell syntax error.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::time::{Duration, Instant};

use greenlight_testkit::TempRepo;
use proptest::prelude::*;

use crate::fuzz_support;

/// Valid files covering every key verify.yaml v1 has, quoted and unquoted, with comments.
const SEEDS: &[&str] = &[
    "version: 1\ngates:\n  - id: lint\n    command: \"true\"\n  - id: unit\n    command: echo ok\n    timeoutSec: 30\n    retryOnFail: 1\n    flakyIsPass: true\noptions:\n  maxLogTailBytes: 4096\n",
    "# gates for the fuzz seed\nversion: 1\n\ngates:\n  - id: a-1\n    command: 'echo \"a\"; exit 0'\n    mutex: port\n  - id: b\n    command: echo fail >&2; exit 3 # trailing comment\n    timeoutSec: 5\noptions:\n  requireCommit: false\n  skipInPrimaryCheckout: true\n  requireEnvClean: false\n",
    "version: 1\ngates:\n  - id: only\n    command: printf 'x\\n'\n",
    "version: \"1\"\ngates:\n  - command: \"true\"\n    id: swapped\n    retryOnFail: 0\noptions:\n  maxLogTailBytes: 0\n  requireCommit: true\n",
];

fn seed() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(SEEDS)
}

/// The verdict exit codes: passed, failed, not_started, skipped.
const VERDICTS: &[i32] = &[0, 20, 21, 22];

fn check(repo: &TempRepo, file: &[u8]) -> Result<(), TestCaseError> {
    let path = repo.path().join(".commandmate/verify.yaml");
    repo.write(".commandmate/verify.yaml", file);
    let out = fuzz_support::run(
        repo.command(["verify"]),
        b"",
        // Every seed gate is instant; a minute is room for a machine under load, not for a hang.
        Duration::from_secs(60),
    )?;
    let shown = || {
        format!(
            "file {:?}\nexit {:?} signal {:?}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(file),
            out.code,
            out.signal,
            out.stdout,
            out.stderr
        )
    };
    prop_assert!(out.signal.is_none(), "killed by a signal: {}", shown());
    prop_assert!(
        !out.stderr.contains("panicked"),
        "greenlight panicked: {}",
        shown()
    );
    let code = out.code.unwrap();
    if code == 2 {
        prop_assert_eq!(
            &out.stdout,
            "",
            "a config error prints no RESULT: {}",
            shown()
        );
        let prefix = format!("{}:", path.display());
        let lines = file.split(|&b| b == b'\n').count();
        let named = out.stderr.lines().find_map(|l| l.strip_prefix(&prefix));
        let Some(rest) = named else {
            return Err(TestCaseError::fail(format!(
                "exit 2 without a `{prefix}…` line: {}",
                shown()
            )));
        };
        // `path:LINE: …` names a line of the file; `path: …` is a whole-file problem.
        if let Some((number, _)) = rest.split_once(':')
            && let Ok(line) = number.parse::<usize>()
        {
            prop_assert!(
                (1..=lines).contains(&line),
                "line {} is not in the {}-line file: {}",
                line,
                lines,
                shown()
            );
        } else {
            prop_assert!(
                rest.starts_with(' '),
                "neither `path:LINE: ` nor `path: `: {}",
                shown()
            );
        }
    } else {
        prop_assert!(
            VERDICTS.contains(&code),
            "exit {} is neither a config error nor a verdict: {}",
            code,
            shown()
        );
        prop_assert!(
            out.stdout
                .lines()
                .last()
                .is_some_and(|l| l.starts_with("RESULT ")),
            "a judged run ends with its RESULT line: {}",
            shown()
        );
    }
    Ok(())
}

#[test]
fn every_seed_is_valid_and_judged() {
    let repo = TempRepo::worktree_with_commit();
    for seed in SEEDS {
        repo.verify_yaml(seed);
        let out = repo.greenlight(["verify"]);
        assert!(
            VERDICTS.contains(&out.code),
            "a seed must be a valid file, or the fuzzer only tests rejections: {}",
            out.render()
        );
    }
}

#[test]
fn a_mutated_verify_yaml_is_rejected_with_its_line_or_judged_never_a_crash() {
    let repo = TempRepo::worktree_with_commit();
    let start = Instant::now();
    let budget = fuzz_support::budget();
    let ran = std::cell::Cell::new(0u32);
    proptest!(fuzz_support::config(), |(
        seed in seed(),
        mutations in proptest::collection::vec(fuzz_support::mutation(), 1..4),
    )| {
        if start.elapsed() < budget {
            ran.set(ran.get() + 1);
            let file = fuzz_support::apply(seed.as_bytes(), &mutations);
            check(&repo, &file)?;
        }
    });
    assert!(
        ran.get() > 0,
        "the time budget ran out before the first case"
    );
    eprintln!(
        "fuzz verify.yaml: {} mutated files in {:?}",
        ran.get(),
        start.elapsed()
    );
}

/// Inputs the byte mutations do not reach: a 2 MB file (past the 1 MiB cap), every line of a
/// file doubled, and 300 gates.
#[test]
fn structural_extremes_are_rejected_or_judged() {
    let repo = TempRepo::worktree_with_commit();
    let mut huge = SEEDS[0].as_bytes().to_vec();
    huge.extend(std::iter::repeat_n(b"# padding\n".as_slice(), 200_000).flatten());
    let doubled: String = SEEDS[1].lines().flat_map(|l| [l, "\n", l, "\n"]).collect();
    let many_gates: String = std::iter::once("version: 1\ngates:\n".to_owned())
        .chain((0..300).map(|i| format!("  - id: g{i}\n    command: \"true\"\n")))
        .collect();
    for file in [huge, doubled.into_bytes(), many_gates.into_bytes()] {
        check(&repo, &file).unwrap();
    }
}
