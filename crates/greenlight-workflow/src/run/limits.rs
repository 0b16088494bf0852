//! The run's limits besides the scheduler's dispatch units: wall clock, reported tokens and
//! cost, and the extensions a resume may grant.
//!
//! The rule: a limit that is reached stops only new boundaries (an agent step, a fan-out, a
//! gate not yet started); what has started is let finish, so a run never pauses halfway
//! through a fan-out. Everything here is computed from what the run recorded, so a resume sees
//! the same figures.

use greenlight_types::Reason;

use crate::run::journal::Entry;

/// How many extensions a run may be granted in all (`--budget-extra` and
/// `--wall-clock-extra` on one resume count once). A run that needs more was planned wrong, and
/// a person should look at it instead of feeding it.
pub const MAX_EXTENSIONS: u64 = 5;

/// What the run may spend.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Dispatch units: the first budget plus every extension.
    pub dispatches: u64,
    /// Wall-clock seconds, first limit plus extensions.
    pub wall_clock_sec: Option<u64>,
    /// Reported tokens (in + out).
    pub tokens: Option<u64>,
    /// Reported cost.
    pub cost_usd: Option<f64>,
}

/// What the run spent so far, from its records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spent {
    /// Wall time across every invocation, ms.
    pub wall_ms: u64,
    /// Reported tokens (in + out); a dispatch that reported none adds nothing.
    pub tokens: u64,
    /// Reported cost.
    pub cost_usd: f64,
    /// Extensions granted.
    pub extensions: u64,
}

impl Spent {
    /// From the records (each with its time, ms since the epoch) up to `now_ms`: an
    /// invocation's wall time runs from its `Segment` to its last record (to `now_ms` for the
    /// one running).
    pub fn of(entries: &[(u64, Entry)], now_ms: u64) -> Spent {
        let mut spent = Spent::default();
        let mut segment: Option<(u64, u64)> = None;
        for (at, entry) in entries {
            match entry {
                Entry::Segment { .. } => {
                    if let Some((start, last)) = segment.take() {
                        spent.wall_ms += last.saturating_sub(start);
                    }
                    segment = Some((*at, *at));
                }
                Entry::Ledger { row } => {
                    spent.tokens += row.tokens_in.unwrap_or(0) + row.tokens_out.unwrap_or(0);
                    spent.cost_usd += row.cost_usd.unwrap_or(0.0);
                }
                Entry::Extended { .. } => spent.extensions += 1,
                _ => {}
            }
            if let Some((_, last)) = segment.as_mut() {
                *last = (*last).max(*at);
            }
        }
        if let Some((start, last)) = segment {
            spent.wall_ms += last.max(now_ms).saturating_sub(start);
        }
        spent
    }

    /// The first limit reached, for a person, or `None`.
    pub fn over(&self, limits: &Limits) -> Option<String> {
        if let Some(sec) = limits.wall_clock_sec
            && self.wall_ms >= sec.saturating_mul(1000)
        {
            return Some(format!(
                "the wall clock of {sec}s is spent ({}s so far); resume with --wall-clock-extra DURATION",
                self.wall_ms / 1000
            ));
        }
        if let Some(cap) = limits.tokens
            && self.tokens >= cap
        {
            return Some(format!(
                "the cap of {cap} reported tokens is spent ({}); resume with --tokens-extra N",
                self.tokens
            ));
        }
        if let Some(cap) = limits.cost_usd
            && self.cost_usd >= cap
        {
            return Some(format!(
                "the cap of ${cap} reported cost is spent (${:.4}); resume with --cost-extra USD",
                self.cost_usd
            ));
        }
        None
    }
}

/// What one resume asks to add (each 0 or more).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Extension {
    /// `--budget-extra`: dispatch units.
    pub dispatches: u64,
    /// `--wall-clock-extra`: seconds.
    pub wall_clock_sec: u64,
    /// `--tokens-extra`: reported tokens.
    pub tokens: u64,
    /// `--cost-extra`: US dollars.
    pub cost_usd: f64,
}

impl Extension {
    /// Whether it adds nothing.
    pub fn is_empty(&self) -> bool {
        *self == Extension::default()
    }
}

/// A resume's extension, checked against the cap: each part at most the run's first limit of
/// its kind (a spend cap the run does not have cannot be extended), and [`MAX_EXTENSIONS`] in
/// all.
pub fn check_extension(
    spent: &Spent,
    first: &Limits,
    extra: &Extension,
) -> Result<(), (Reason, String)> {
    let (first_dispatches, first_wall_clock_sec) = (first.dispatches, first.wall_clock_sec);
    let (dispatches, wall_clock_sec) = (extra.dispatches, extra.wall_clock_sec);
    let refuse = |message: String| Err((Reason::BudgetExtensionExhausted, message));
    if spent.extensions >= MAX_EXTENSIONS {
        return refuse(format!(
            "the run was extended {MAX_EXTENSIONS} times already, the most a run may be; look at why it needs more, then start a new run with a larger --budget or --max-wall-clock"
        ));
    }
    if dispatches > first_dispatches {
        return refuse(format!(
            "--budget-extra {dispatches} is more than the run's first budget of {first_dispatches} units, the most one extension may add"
        ));
    }
    let first_wall = first_wall_clock_sec.unwrap_or(0);
    if wall_clock_sec > 0 && wall_clock_sec > first_wall {
        return refuse(format!(
            "--wall-clock-extra {wall_clock_sec}s is more than the run's first wall clock of {first_wall}s, the most one extension may add"
        ));
    }
    match first.tokens {
        None if extra.tokens > 0 => {
            return refuse(
                "--tokens-extra: the run has no token cap (the plan sets no budget.tokens), so there is none to extend".into(),
            );
        }
        Some(cap) if extra.tokens > cap => {
            return refuse(format!(
                "--tokens-extra {} is more than the run's first token cap of {cap}, the most one extension may add",
                extra.tokens
            ));
        }
        _ => {}
    }
    match first.cost_usd {
        None if extra.cost_usd > 0.0 => {
            return refuse(
                "--cost-extra: the run has no cost cap (the plan sets no budget.costUsd), so there is none to extend".into(),
            );
        }
        Some(cap) if extra.cost_usd > cap => {
            return refuse(format!(
                "--cost-extra {} is more than the run's first cost cap of ${cap}, the most one extension may add",
                extra.cost_usd
            ));
        }
        _ => {}
    }
    Ok(())
}
