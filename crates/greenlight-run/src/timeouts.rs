//! `verify --suggest-timeouts`: each gate's `timeoutSec` proposed from its recorded durations,
//! as an edit of the user's own verify.yaml.
//!
//! The rule: a proposal is p99 × 1.5 rounded up to a readable number, only for a gate with at
//! least [`MIN_SAMPLES`] measured runs, and the file is changed as text (`config::edit`), so
//! the diff shows exactly the lines that would change and nothing else.
//!
//! A gate with a `mutex:` gets no proposal: its `timeoutSec` bounds the wait for the mutex as
//! well as the run, and the history records how long each run took, not how long it waited, so
//! a limit set from its durations alone turns waits into `SKIP reason=mutex-wait` as soon as
//! worktrees queue for the mutex.

use camino::Utf8Path;
use greenlight_gate::config::edit::{EditError, set_gate_key};
use greenlight_gate::config::{Config, MAX_TIMEOUT_SEC};
use greenlight_store::GateStats;

/// Fewest measured runs a gate needs before its timeout is proposed: below five, the p99 is
/// simply the slowest run seen, too thin to set a limit from.
pub const MIN_SAMPLES: u32 = 5;

/// The `timeoutSec` proposed for a gate whose p99 is `p99_ms`: p99 × 1.5 in whole seconds,
/// rounded up to a multiple of 5 s up to a minute, of 30 s up to ten minutes, of a minute
/// above, and clamped to 1..=7200 (v1's range). The headroom of 1.5 lets a gate run half as
/// long again as its slowest usual run before it is called hung.
pub fn suggested_timeout_sec(p99_ms: u64) -> u32 {
    // Whole milliseconds × 1.5, exactly: 3/2 with the division rounded up.
    let ms = p99_ms.saturating_mul(3).div_ceil(2);
    let sec = ms.div_ceil(1000).max(1);
    let step = match sec {
        0..=60 => 5,
        61..=600 => 30,
        _ => 60,
    };
    let rounded = sec.div_ceil(step).saturating_mul(step);
    u32::try_from(rounded)
        .unwrap_or(u32::MAX)
        .clamp(1, MAX_TIMEOUT_SEC)
}

/// One gate's proposal.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// The gate id.
    pub gate: String,
    /// How many measured runs it is based on.
    pub samples: u32,
    /// Their p99 (nearest rank).
    pub p99_ms: u64,
    /// The timeout the config gives it now (its default when it writes none).
    pub current_sec: u32,
    /// The timeout proposed.
    pub suggested_sec: u32,
}

impl Proposal {
    /// Whether the file would change.
    pub fn changes(&self) -> bool {
        self.current_sec != self.suggested_sec
    }
}

/// Everything `--suggest-timeouts` found: the proposals, the gates left alone for lack of
/// history, and the file before and after.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeoutPlan {
    /// Gates with enough history, in config order (changed or not).
    pub proposals: Vec<Proposal>,
    /// Gates of the config with fewer than [`MIN_SAMPLES`] measured runs, with their count.
    pub too_few: Vec<(String, u32)>,
    /// Gates with a `mutex:`, with its name: left alone (see the module's comment).
    pub under_mutex: Vec<(String, String)>,
    /// The file as it is.
    pub before: String,
    /// The file with every changed proposal written in.
    pub after: String,
}

impl TimeoutPlan {
    /// A unified diff of the file (empty when nothing would change), with `a/<label>` and
    /// `b/<label>` headers so `git apply` and `patch -p1` take it from where `label` is
    /// relative to.
    pub fn diff(&self, label: &str) -> String {
        if self.before == self.after {
            return String::new();
        }
        similar::TextDiff::from_lines(&self.before, &self.after)
            .unified_diff()
            .context_radius(3)
            .header(&format!("a/{label}"), &format!("b/{label}"))
            .to_string()
    }
}

/// Proposes a timeout for every gate of `config` with enough history in `stats`, and writes
/// the changed ones into `text` (the file `config` was read from).
pub fn plan(
    path: &Utf8Path,
    config: &Config,
    text: &str,
    stats: &[GateStats],
) -> Result<TimeoutPlan, EditError> {
    let mut proposals = Vec::new();
    let mut too_few = Vec::new();
    let mut under_mutex = Vec::new();
    let mut after = text.to_owned();
    for gate in &config.gates {
        if let Some(mutex) = &gate.mutex {
            under_mutex.push((gate.id.clone(), mutex.clone()));
            continue;
        }
        let found = stats.iter().find(|s| s.gate == gate.id);
        let (samples, p99) = match found {
            Some(s) => (s.samples, s.p99_ms),
            None => (0, None),
        };
        let Some(p99_ms) = p99.filter(|_| samples >= MIN_SAMPLES) else {
            too_few.push((gate.id.clone(), samples));
            continue;
        };
        let proposal = Proposal {
            gate: gate.id.clone(),
            samples,
            p99_ms,
            current_sec: gate.timeout_sec,
            suggested_sec: suggested_timeout_sec(p99_ms),
        };
        if proposal.changes() {
            after = set_gate_key(
                path,
                &after,
                &gate.id,
                "timeoutSec",
                &proposal.suggested_sec.to_string(),
            )?;
        }
        proposals.push(proposal);
    }
    Ok(TimeoutPlan {
        proposals,
        too_few,
        under_mutex,
        before: text.to_owned(),
        after,
    })
}

#[cfg(test)]
mod tests {
    use greenlight_store::greenlight_stream::GateVerdict;

    use super::*;

    #[test]
    fn the_rule_rounds_up_to_readable_steps_and_stays_in_range() {
        let cases = [
            (0, 5),
            (10, 5),
            (3_333, 5),     // 5.0 s
            (3_334, 10),    // 5.001 s
            (20_000, 30),   // 30 s
            (40_000, 60),   // 60 s
            (40_001, 90),   // 60.0015 s → 61 → 90
            (100_000, 150), // 150 s
            (400_000, 600), // 600 s
            (400_001, 660), // 601 s → 660
            (5_000_000, 7200),
            (u64::MAX, 7200),
        ];
        for (p99, expected) in cases {
            assert_eq!(suggested_timeout_sec(p99), expected, "p99 {p99} ms");
        }
    }

    fn stats(gate: &str, samples: u32, p99: u64) -> GateStats {
        GateStats {
            gate: gate.into(),
            samples,
            p50_ms: Some(p99),
            p95_ms: Some(p99),
            p99_ms: Some(p99),
            failure_rate: 0.0,
            flaky_rate: 0.0,
            exact: 0,
            partial: 0,
            raw: 0,
            last_verdict: GateVerdict::Pass,
            last_at: 1,
        }
    }

    #[test]
    fn only_gates_with_enough_history_and_a_different_timeout_change_the_file() {
        let path = Utf8Path::new(".commandmate/verify.yaml");
        let text = "version: 1\ngates:\n  - id: lint\n    command: make lint\n    timeoutSec: 5\n  - id: unit\n    command: make test\n  - id: new\n    command: make new\n";
        let config = greenlight_gate::config::parse_v1(path, text).expect("valid");
        let found = [
            stats("lint", 9, 2_000),  // 3 s → 5: already 5
            stats("unit", 5, 30_000), // 45 s → 45
            stats("new", 4, 1_000),   // too few
        ];
        let plan = plan(path, &config, text, &found).expect("plan");
        assert_eq!(plan.too_few, [("new".to_owned(), 4)]);
        let changed: Vec<(&str, u32, u32)> = plan
            .proposals
            .iter()
            .map(|p| (p.gate.as_str(), p.current_sec, p.suggested_sec))
            .collect();
        assert_eq!(changed, [("lint", 5, 5), ("unit", 600, 45)]);
        assert_eq!(
            plan.after,
            text.replace("make test\n", "make test\n    timeoutSec: 45\n")
        );
        let diff = plan.diff(path.as_str());
        assert!(
            diff.starts_with("--- a/.commandmate/verify.yaml\n+++ b/.commandmate/verify.yaml\n"),
            "{diff}"
        );
        assert!(diff.contains("\n+    timeoutSec: 45\n"), "{diff}");
        let none = super::plan(path, &config, text, &found[..1]).expect("plan");
        assert_eq!(none.diff("x"), "");
    }

    #[test]
    fn a_mutex_gate_gets_no_proposal_however_much_history_it_has() {
        let path = Utf8Path::new(".commandmate/verify.yaml");
        let text = "version: 1\ngates:\n  - id: e2e\n    command: make e2e\n    mutex: port\n    timeoutSec: 120\n";
        let config = greenlight_gate::config::parse_v1(path, text).expect("valid");
        let plan = plan(path, &config, text, &[stats("e2e", 50, 1_000)]).expect("plan");
        assert_eq!(plan.under_mutex, [("e2e".to_owned(), "port".to_owned())]);
        assert!(plan.proposals.is_empty() && plan.too_few.is_empty());
        assert_eq!(plan.after, text);
    }
}
