//! The goal loop's evidence of a failed gate whose digest cannot stand in for its output: every
//! parsed failure is named, the list is marked as not complete, and no escape byte reaches the
//! agent. Outputs are built from a real vitest run's blocks (the digest's fixtures).

#![allow(clippy::unwrap_used)] // a test that cannot read its fixture should stop loudly

use greenlight_digest::{Classification, DigestOptions};
use greenlight_gate::{Attempt, AttemptStatus};
use greenlight_goal::prompt::{self, EVIDENCE_BUDGET, OutputEvidence};
use greenlight_run::evidence::{self, Output};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../greenlight-digest/tests/fixtures"
);

fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/{path}")).unwrap()
}

/// A vitest run of `n` failing tests, made of the real run's blocks (`vitest/fail`): its
/// header, one `×` line and one `FAIL` block per test (the fixture's first failure, renamed),
/// and its summary with the counts changed. `detail` makes each failure's message longer.
fn vitest_failures(n: usize, detail: &str) -> String {
    let real = fixture("vitest/fail/output.txt");
    let block_start = real.find(" FAIL  math.test.ts > adds wrongly").unwrap();
    let block_end = real.find(" FAIL  math.test.ts > suite > throws").unwrap();
    let block = &real[block_start..block_end];
    let mut out = String::from("\n RUN  v3.2.7 /tmp/project\n\n");
    out.push_str(&format!(
        " ❯ math.test.ts ({} tests | {n} failed) 10ms\n   ✓ adds 1ms\n",
        n + 1
    ));
    for i in 0..n {
        out.push_str(&format!(
            "   × adds wrongly {i:02} 7ms\n     → expected 4 to be 5{detail} // Object.is equality\n"
        ));
    }
    out.push_str(&format!("\n⎯⎯⎯⎯⎯⎯⎯ Failed Tests {n} ⎯⎯⎯⎯⎯⎯⎯\n\n"));
    for i in 0..n {
        let renamed = block
            .replace("adds wrongly", &format!("adds wrongly {i:02}"))
            .replace(
                "Object.is equality",
                &format!("{} Object.is equality", detail.trim()),
            )
            .replace("[1/2]", &format!("[{}/{n}]", i + 1));
        out.push_str(&renamed);
    }
    out.push_str(&format!(
        "\n Test Files  1 failed (1)\n      Tests  {n} failed | 1 passed ({})\n   Start at  22:10:51\n   Duration  334ms\n\n",
        n + 1
    ));
    out
}

/// The attempt a gate that printed `output` and exited 1 records: its digest, and the last
/// bytes of its output that a verify run keeps.
fn failed_attempt(output: &str) -> Attempt {
    let digest = greenlight_digest::digest(output.as_bytes(), Some(1), &DigestOptions::default());
    let mut start = output.len().saturating_sub(prompt::OUTPUT_TAIL_BYTES);
    while !output.is_char_boundary(start) {
        start += 1;
    }
    Attempt {
        exit_code: Some(1),
        tail: output[start..].to_owned(),
        output_bytes: output.len() as u64,
        digest: Some(digest),
        ..Attempt::blank(AttemptStatus::Fail)
    }
}

fn names(n: usize) -> impl Iterator<Item = String> {
    (0..n).map(|i| format!("math.test.ts > adds wrongly {i:02}"))
}

#[test]
fn a_31_failure_vitest_run_too_long_for_its_digest_names_all_31() {
    // Each message long enough that the compact form of 31 failures exceeds the budget.
    let output = vitest_failures(31, &" (the value came from the cache)".repeat(6));
    let attempt = failed_attempt(&output);
    let digest = attempt.digest.as_ref().unwrap();
    assert_eq!(digest.failures.len(), 31, "{:?}", digest.reasons);
    assert_eq!(
        digest.classification,
        Classification::Recognised,
        "{:?}",
        digest.reasons
    );
    // The raw tail alone, within the same budget, misses the early failures: what the rule fixes.
    let raw = evidence::tail_within(&attempt.tail, EVIDENCE_BUDGET.tail);
    assert!(
        names(31).any(|name| !raw.contains(&name)),
        "the fixture must be too long for a tail"
    );
    let shown = evidence::attempt_output(&attempt, EVIDENCE_BUDGET);
    let Output::Partial { named, tail } = &shown else {
        panic!("31 long failures must not fit the digest budget: {shown:?}")
    };
    for name in names(31) {
        assert!(named.contains(&name), "{name} missing from:\n{named}");
    }
    assert!(named.contains("not complete"), "{named}");
    assert!(
        named.len() + tail.len() <= EVIDENCE_BUDGET.tail,
        "{}",
        named.len() + tail.len()
    );
    assert!(!tail.is_empty(), "the tail keeps its share of the budget");

    // And the prompt the agent reads says all of it.
    let OutputEvidence::Partial {
        named: in_prompt, ..
    } = prompt::failure_output(&attempt)
    else {
        panic!("the goal loop must show the partial evidence")
    };
    assert_eq!(&in_prompt, named);
    if std::env::var_os("SHOW_EVIDENCE").is_some() {
        eprintln!("{named}---\n{tail}");
    }
}

#[test]
fn a_partial_digest_names_every_parsed_failure() {
    // A vitest run cut short (killed after its failure blocks, before its summary): partial.
    let full = vitest_failures(31, "");
    let cut = &full[..full.find("\n Test Files").unwrap()];
    let attempt = failed_attempt(cut);
    let digest = attempt.digest.as_ref().unwrap();
    assert_eq!(digest.classification, Classification::Partial);
    assert!(!digest.failures.is_empty());
    let Output::Partial { named, .. } = evidence::attempt_output(&attempt, EVIDENCE_BUDGET) else {
        panic!("a partial digest with failures must name them")
    };
    for f in &digest.failures {
        assert!(named.contains(&f.name), "{} missing from:\n{named}", f.name);
    }
    assert!(named.contains("not complete"), "{named}");
}

#[test]
fn coloured_output_reaches_the_agent_without_escapes() {
    let output = fixture("vitest/fail-color/output.txt");
    assert!(output.contains('\x1b'));
    // Unrecognised (no digest at all) and cut to a small tail: the raw escapes must be gone.
    let attempt = Attempt {
        digest: None,
        ..failed_attempt(&output)
    };
    let budget = evidence::Budget {
        tail: 300,
        ..EVIDENCE_BUDGET
    };
    for budget in [EVIDENCE_BUDGET, budget] {
        let text = match evidence::attempt_output(&attempt, budget) {
            Output::Tail { text, .. } => text,
            other => panic!("no digest gives a tail: {other:?}"),
        };
        assert!(!text.contains('\x1b'), "{text:?}");
        assert!(
            text.contains("boom in suite") || budget.tail < 1000,
            "{text}"
        );
    }
    let prompt_text = match prompt::failure_output(&attempt) {
        OutputEvidence::Complete(t) | OutputEvidence::Tail { text: t, .. } => t,
        other => panic!("{other:?}"),
    };
    assert!(!prompt_text.contains('\x1b'));
}
