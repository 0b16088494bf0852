//! Who may produce each member of the one closed list of failure reasons.
//!
//! The list itself is [`greenlight_types::Reason`], so the store, the frames and the front ends
//! name a reason without depending on the agents; the producer table lives here, beside the
//! producers, and the tests below hold every member to at least one producer in the code.

use serde::{Deserialize, Serialize};

pub use greenlight_types::Reason;

/// The part of greenlight that may emit a reason. Used to keep the reason list honest: every
/// member has at least one producer, and an adapter never invents a loop reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Producer {
    /// A claude, codex, command or openai adapter's `dispatch`.
    Adapter,
    /// An adapter's `probe`.
    Probe,
    /// Declared-path containment, at preflight and again just before each dispatch.
    Containment,
    /// The landed barrier for file deliverables.
    LandedBarrier,
    /// The gate-verdict grammar (`parse_verdict`).
    VerdictGrammar,
    /// The goal loop's own bookkeeping (gates, retries, budgets, resume).
    GoalLoop,
    /// The goal loop's judge step.
    Judge,
    /// The workflow scheduler (joins, budget reservations).
    Scheduler,
    /// The workflow resume check (a recorded run, not finished, same inputs).
    Resume,
    /// A workflow land step's merge queue (merge, landing gates, advancing the target).
    Land,
}

/// Who may produce a [`Reason`]: the producer table, kept beside the producers rather than with
/// the word, which lives in `greenlight-types` for every crate to name.
pub trait Produced {
    /// Which parts of greenlight may emit this reason.
    fn producers(self) -> &'static [Producer];

    /// Whether `producer` may emit this reason.
    fn may_be_produced_by(self, producer: Producer) -> bool;
}

impl Produced for Reason {
    fn producers(self) -> &'static [Producer] {
        match self {
            Reason::DispatchTimeout
            | Reason::DispatchDead
            | Reason::PromptOverCeiling
            | Reason::DispatchBudgetExhausted
            | Reason::MachineFailure => &[Producer::Adapter],
            // The goal loop's start-of-run check finds an agent that cannot start.
            Reason::ProbeFailed => &[Producer::Probe, Producer::GoalLoop],
            Reason::ModelIdInvalid => &[Producer::Adapter],
            Reason::PathEscapesRoot => &[Producer::Containment],
            Reason::DeliverableNotLanded => &[Producer::LandedBarrier],
            Reason::GateVerdictUnparseable => &[Producer::VerdictGrammar],
            Reason::GateFailed
            | Reason::RetriesExhausted
            | Reason::TurnBudgetExhausted
            | Reason::WorktreeMissing
            | Reason::DispatchInterrupted
            | Reason::PausedByUser
            | Reason::NoGates => &[Producer::GoalLoop],
            Reason::JudgeFailed | Reason::JudgeUnparseable => &[Producer::Judge],
            Reason::JoinFailed | Reason::BudgetExhausted => &[Producer::Scheduler],
            Reason::ForeignRunRefused
            | Reason::ResumeAlreadyCompleted
            | Reason::StaleInputRefused
            | Reason::ResumeModelUnavailable
            | Reason::BudgetExtensionExhausted => &[Producer::Resume],
            Reason::LandConflict | Reason::LandRed | Reason::LandTargetBusy => &[Producer::Land],
        }
    }

    fn may_be_produced_by(self, producer: Producer) -> bool {
        self.producers().contains(&producer)
    }
}

/// The reasons a producer may emit, in declaration order.
pub fn produced_by(producer: Producer) -> Vec<Reason> {
    Reason::ALL
        .into_iter()
        .filter(|r| r.may_be_produced_by(producer))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_a_producer_and_a_stable_name() {
        for r in Reason::ALL {
            assert!(!r.producers().is_empty(), "{r} has no producer");
            let json = serde_json::to_string(&r).expect("a unit enum serialises");
            assert_eq!(json, format!("\"{}\"", r.as_str()));
            assert_eq!(Reason::from_name(r.as_str()), Some(r));
        }
    }

    #[test]
    fn adapters_produce_only_the_dispatch_reasons() {
        assert_eq!(
            produced_by(Producer::Adapter),
            vec![
                Reason::DispatchTimeout,
                Reason::DispatchDead,
                Reason::PromptOverCeiling,
                Reason::DispatchBudgetExhausted,
                Reason::ModelIdInvalid,
                Reason::MachineFailure
            ]
        );
        assert_eq!(produced_by(Producer::Probe), vec![Reason::ProbeFailed]);
        assert!(!Reason::GateFailed.may_be_produced_by(Producer::Adapter));
    }

    /// Every source file of the workspace's crates, without its trailing `#[cfg(test)]` part.
    fn workspace_sources() -> Vec<(std::path::PathBuf, String)> {
        fn walk(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, String)>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    let code = text.split("#[cfg(test)]").next().unwrap_or("").to_owned();
                    out.push((path, code));
                }
            }
        }
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&crates)
            .expect("the crates directory")
            .flatten()
        {
            walk(&entry.path().join("src"), &mut out);
        }
        out
    }

    /// `judge-blocked` was in this list with nothing producing it. A member that no
    /// code outside this file (and outside tests) names is a promise nobody keeps.
    #[test]
    fn every_reason_has_a_reachable_producer_in_the_code() {
        let sources = workspace_sources();
        assert!(sources.len() > 20, "the workspace sources were not found");
        for reason in Reason::ALL {
            let needle = format!("Reason::{reason:?}");
            let producers: Vec<_> = sources
                .iter()
                .filter(|(path, code)| !path.ends_with("reason.rs") && code.contains(&needle))
                .map(|(path, _)| path.display().to_string())
                .collect();
            assert!(
                !producers.is_empty(),
                "{reason} is in the closed list but no code outside tests produces it: produce it or remove it"
            );
        }
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Reason::ALL.len());
    }
}
