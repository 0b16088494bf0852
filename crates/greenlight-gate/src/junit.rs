//! The JUnit report of a run (`greenlight verify --junit FILE`): one test case per gate.
//!
//! The one rule that keeps it simple: the report says what the line contract says, in JUnit's
//! words. Each gate's verdict maps to exactly one status; a retry is never hidden: a FLAKY gate
//! carries its failed first run as `<flakyFailure>`, a gate that failed twice carries its retry
//! as `<rerunFailure>`. A failure's text is the compact digest when the output was recognised,
//! else the output's tail (the same evidence `greenlight verify` prints on stderr).

use std::time::Duration;

pub use quick_junit::Report;
use quick_junit::{
    FlakyOrRerun, NonSuccessKind, Property, TestCase, TestCaseStatus, TestRerun, TestSuite,
};

use crate::render;
use crate::report::{
    Attempt, AttemptStatus, GateReport, GateVerdict, RunReport, WorkEvidenceReport,
};

/// The test suite's name; the report's too.
pub const SUITE: &str = "greenlight";

/// The `classname` of every test case, so CI viewers group the gates together.
pub const CLASSNAME: &str = "gates";

/// The JUnit report of a finished (or interrupted) run. `tail_limit` is the config's
/// `maxLogTailBytes`, the budget for a failure's text.
pub fn report(run: &RunReport, tail_limit: usize) -> Report {
    let mut suite = TestSuite::new(SUITE);
    suite.add_test_case(work_evidence_case(&run.work_evidence));
    for gate in &run.gates {
        suite.add_test_case(gate_case(gate, tail_limit));
    }
    if run.env_clean_skipped {
        let mut status = TestCaseStatus::skipped();
        status.set_message("reason=no-baseline");
        status.set_description(render::ENV_CLEAN_NOTE);
        suite.add_test_case(case("env-clean", status));
    }
    let total: Duration = run
        .gates
        .iter()
        .flat_map(|g| &g.attempts)
        .map(|a| a.duration)
        .sum();
    suite.set_time(total);
    let mut report = Report::new(SUITE);
    report.set_time(total);
    report.add_test_suite(suite);
    report
}

/// The report of a run that never started because the config (or the command line) is
/// unusable: one errored test case named `config`, so a CI test view shows why nothing ran.
pub fn config_error(errors: &[String]) -> Report {
    let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
    status.set_message(format!(
        "{} problem(s) in the config; no gate ran",
        errors.len()
    ));
    status.set_type("config-error");
    status.set_description(errors.join("\n"));
    let mut suite = TestSuite::new(SUITE);
    suite.add_test_case(case("config", status));
    let mut report = Report::new(SUITE);
    report.add_test_suite(suite);
    report
}

fn case(name: &str, status: TestCaseStatus) -> TestCase {
    let mut case = TestCase::new(name, status);
    case.set_classname(CLASSNAME);
    case
}

fn work_evidence_case(we: &WorkEvidenceReport) -> TestCase {
    let line = render::work_evidence_line(we);
    let status = match we {
        WorkEvidenceReport::Pass { .. } => TestCaseStatus::success(),
        WorkEvidenceReport::Skip => {
            let mut s = TestCaseStatus::skipped();
            s.set_message("reason=flag");
            s
        }
        WorkEvidenceReport::Fail { .. } => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(line.trim_start_matches("GATE work-evidence ").to_owned());
            s.set_type("work-evidence");
            if let Some(why) = render::work_evidence_stderr(we) {
                s.set_description(why);
            }
            s
        }
    };
    case("work-evidence", status)
}

/// The text of a failed attempt: compact digest when recognised, else the tail.
fn failure_text(attempt: &Attempt, tail_limit: usize) -> String {
    if let Some(compact) = render::compact_digest(attempt, tail_limit) {
        return compact;
    }
    if attempt.output_bytes == 0 {
        return "(no output)".to_owned();
    }
    if tail_limit == 0 {
        return "(log tail disabled: maxLogTailBytes is 0)".to_owned();
    }
    attempt.tail.clone()
}

fn exit_of(attempt: &Attempt) -> String {
    attempt
        .exit_code
        .map(|c| c.to_string())
        .unwrap_or_else(|| "none".to_owned())
}

fn attempt_message(attempt: &Attempt, timeout_sec: u32) -> String {
    match attempt.status {
        AttemptStatus::Timeout => format!("timed out after {timeout_sec}s (exit 124)"),
        AttemptStatus::MutexSkip => "its mutex never came free".to_owned(),
        _ => format!("exit {}", exit_of(attempt)),
    }
}

fn rerun(attempt: &Attempt, timeout_sec: u32, tail_limit: usize) -> TestRerun {
    let mut r = TestRerun::new(NonSuccessKind::Failure);
    r.set_time(attempt.duration);
    r.set_message(attempt_message(attempt, timeout_sec));
    r.set_type(if attempt.status == AttemptStatus::Timeout {
        "timeout"
    } else {
        "exit-code"
    });
    r.set_description(failure_text(attempt, tail_limit));
    r
}

fn gate_case(gate: &GateReport, tail_limit: usize) -> TestCase {
    let first = gate.attempts.first();
    let last = gate.attempts.last();
    let (status, time) = match (gate.verdict, first, last) {
        (GateVerdict::Skip, _, _) | (_, None, _) | (_, _, None) => {
            let mut s = TestCaseStatus::skipped();
            let reason = gate.skip_reason.map(|r| r.as_str()).unwrap_or("unknown");
            s.set_message(format!("reason={reason}"));
            (s, None)
        }
        (GateVerdict::Pass, Some(a), _) => (TestCaseStatus::success(), Some(a.duration)),
        (GateVerdict::Flaky, Some(failed), Some(passed)) if gate.passed == Some(true) => {
            let mut s = TestCaseStatus::success();
            s.add_rerun(rerun(failed, gate.timeout_sec, tail_limit));
            (s, Some(passed.duration))
        }
        (GateVerdict::Flaky, Some(failed), Some(passed)) => {
            // The retry passed, but flakyIsPass is false: the gate fails the run. The failed
            // run is still a flaky run, not a rerun, so it is written as <flakyFailure>.
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!(
                "flaky: exit {}, then exit {} on the retry; counts as a failure (flakyIsPass is false)",
                exit_of(failed),
                exit_of(passed)
            ));
            s.set_type("flaky");
            s.set_description(
                "run 1 failed (its output is in flakyFailure), run 2 passed; set flakyIsPass: true \
                 on the gate to count such a run as a pass",
            );
            s.set_rerun_kind(FlakyOrRerun::Flaky);
            s.add_rerun(rerun(failed, gate.timeout_sec, tail_limit));
            (s, Some(passed.duration))
        }
        (_, Some(a), _) => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            let mut message = attempt_message(a, gate.timeout_sec);
            if let Some(status) = gate.retry_without_verdict {
                let what = if status == AttemptStatus::Timeout {
                    "timed out"
                } else {
                    "never got its mutex"
                };
                message.push_str(&format!("; the retry {what}, so this failure stands"));
            }
            s.set_message(message);
            s.set_type(if gate.verdict == GateVerdict::Timeout {
                "timeout"
            } else {
                "exit-code"
            });
            s.set_description(failure_text(a, tail_limit));
            for retry in gate.attempts.iter().skip(1) {
                s.add_rerun(rerun(retry, gate.timeout_sec, tail_limit));
            }
            (s, Some(a.duration))
        }
    };
    let mut case = case(&gate.id, status);
    if let Some(time) = time {
        case.set_time(time);
    }
    case.add_property(Property::new("command", gate.command.as_str()));
    case
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_config_error_report_reads_back_as_one_errored_case() {
        let xml = config_error(&["verify.yaml:3: bad".into()])
            .to_string()
            .unwrap();
        let back = Report::deserialize_from_str(&xml).unwrap();
        let case = &back.test_suites[0].test_cases[0];
        assert_eq!(case.name.as_str(), "config");
        assert!(matches!(
            case.status,
            TestCaseStatus::NonSuccess {
                kind: NonSuccessKind::Error,
                ..
            }
        ));
    }
}
