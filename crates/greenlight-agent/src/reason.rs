//! The one closed list of failure reasons for the whole product, and who may produce each.
//!
//! There is no second taxonomy: every failure greenlight records (a dispatch, a gate, a judge, a
//! goal that pauses) names exactly one `Reason`. Adding a member is a deliberate change to a
//! public contract, so the list lives here, once, with its producer table beside it.

use serde::{Deserialize, Serialize};

/// Why a dispatch, a step or a goal did not succeed. Serialised in kebab-case; the names are a
/// stable contract (ledger rows, `--json` output, frames).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// The dispatch deadline fired while the agent was still running; its process group was
    /// ended. "It was still working."
    DispatchTimeout,
    /// Nothing usable came back: the binary could not be spawned, vanished without an exit code,
    /// exited nonzero, reported an error (`is_error`, `turn.failed`), or exited cleanly with
    /// nothing parseable ("spawned but mute").
    DispatchDead,
    /// The assembled prompt is longer than the runtime's ceiling; it was refused before any
    /// process started, never truncated.
    PromptOverCeiling,
    /// No candidate model id answered the liveness probe, or the agent's executable cannot be
    /// started at all (not installed).
    ProbeFailed,
    /// An openai dispatch spent its bound of model requests or tokens while the model was still
    /// calling tools, or one model reply streamed more text than a CLI agent's output is kept to
    /// (the work it did so far stays in the worktree; the next turn goes on).
    DispatchBudgetExhausted,
    /// A model id does not match the family's safe grammar (claude and codex:
    /// `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`; command also allows `:` and `/`) and so could be
    /// read as an option; refused before any process started.
    ModelIdInvalid,
    /// A declared read or write is absolute, contains `..` or a control character, or resolves
    /// (through a symlinked ancestor) outside the root.
    PathEscapesRoot,
    /// A file-mode dispatch came back ok but a declared write does not exist or did not change.
    DeliverableNotLanded,
    /// A reply that must end in a gate verdict does not: the last non-empty line is not exactly
    /// `GATE: PASS` or `GATE: FAIL`, or more than one verdict line is present.
    GateVerdictUnparseable,
    /// A gate command judged the work and exited nonzero.
    GateFailed,
    /// The goal failed its gates on every allowed retry and paused.
    RetriesExhausted,
    /// The goal spent its turn budget and paused.
    TurnBudgetExhausted,
    /// The goal's worktree is gone; the goal pauses without charging an attempt.
    WorktreeMissing,
    /// The judge could not be run (its dispatch failed) too many times in a row.
    JudgeFailed,
    /// The judge answered, but not in its grammar, too many times in a row.
    JudgeUnparseable,
    /// A dispatch was in flight when greenlight stopped; on resume its result is unknown.
    DispatchInterrupted,
    /// A person paused the goal (`greenlight goal pause`, Ctrl-C or SIGTERM during `goal run`).
    PausedByUser,
    /// The goal has no gate left, so nothing could say it is done; it pauses until one is added.
    NoGates,
    /// The machine, not the agent, failed the dispatch before the agent could start: the
    /// prompt file could not be written (no space, no usable temp dir), or the agent could not
    /// be spawned for want of file descriptors, memory or processes. Retrying would fail the
    /// same way, so the goal pauses at once and charges no turn.
    MachineFailure,
}

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
}

impl Reason {
    /// Every member, in declaration order.
    pub const ALL: [Reason; 19] = [
        Reason::DispatchTimeout,
        Reason::DispatchDead,
        Reason::PromptOverCeiling,
        Reason::ProbeFailed,
        Reason::DispatchBudgetExhausted,
        Reason::ModelIdInvalid,
        Reason::PathEscapesRoot,
        Reason::DeliverableNotLanded,
        Reason::GateVerdictUnparseable,
        Reason::GateFailed,
        Reason::RetriesExhausted,
        Reason::TurnBudgetExhausted,
        Reason::WorktreeMissing,
        Reason::JudgeFailed,
        Reason::JudgeUnparseable,
        Reason::DispatchInterrupted,
        Reason::PausedByUser,
        Reason::NoGates,
        Reason::MachineFailure,
    ];

    /// The kebab-case name, as serialised.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::DispatchTimeout => "dispatch-timeout",
            Reason::DispatchDead => "dispatch-dead",
            Reason::PromptOverCeiling => "prompt-over-ceiling",
            Reason::ProbeFailed => "probe-failed",
            Reason::DispatchBudgetExhausted => "dispatch-budget-exhausted",
            Reason::ModelIdInvalid => "model-id-invalid",
            Reason::PathEscapesRoot => "path-escapes-root",
            Reason::DeliverableNotLanded => "deliverable-not-landed",
            Reason::GateVerdictUnparseable => "gate-verdict-unparseable",
            Reason::GateFailed => "gate-failed",
            Reason::RetriesExhausted => "retries-exhausted",
            Reason::TurnBudgetExhausted => "turn-budget-exhausted",
            Reason::WorktreeMissing => "worktree-missing",
            Reason::JudgeFailed => "judge-failed",
            Reason::JudgeUnparseable => "judge-unparseable",
            Reason::DispatchInterrupted => "dispatch-interrupted",
            Reason::PausedByUser => "paused-by-user",
            Reason::NoGates => "no-gates",
            Reason::MachineFailure => "machine-failure",
        }
    }

    /// Which parts of greenlight may emit this reason.
    pub const fn producers(self) -> &'static [Producer] {
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
        }
    }

    /// Whether `producer` may emit this reason.
    pub fn may_be_produced_by(self, producer: Producer) -> bool {
        self.producers().contains(&producer)
    }

    /// Parses a kebab-case name; `None` for anything not in the list.
    pub fn from_name(name: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
