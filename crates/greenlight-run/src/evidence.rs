//! What an agent reads about a gate that did not pass: which attempt explains it, and that
//! attempt's output as the compact digest when it was recognised, else the parsed failures
//! named before a bounded tail, else a bounded tail.
//!
//! The one rule that keeps it simple: a digest is all or nothing (never cut to fit), and
//! whatever stands in for it is cut to the budget, so evidence never crowds an agent's context.
//! The Stop hook's block reason, the MCP `verify` answer and the goal loop's next prompt all
//! take their evidence from here.

use greenlight_gate::{Attempt, GateReport, GateVerdict, render};

/// Which attempt of a gate an agent is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// The attempt whose output explains the verdict: a FLAKY gate's failed first run, else
    /// the last run (the retry, when both failed). For a gate that counts as failed (the Stop
    /// hook's block reason; the goal loop, whose gates run once, shows its one attempt).
    Deciding,
    /// The last attempt that exited with a code other than 0, for a gate that did not pass or
    /// passed only as FLAKY (the MCP `verify` answer, which reports every gate).
    LastNonZero,
}

/// The attempt of `gate` that `shown` picks, if there is one.
pub fn shown_attempt(gate: &GateReport, shown: Shown) -> Option<&Attempt> {
    match shown {
        Shown::Deciding => match gate.verdict {
            GateVerdict::Flaky => gate.attempts.first(),
            _ => gate.attempts.last(),
        },
        Shown::LastNonZero => gate
            .attempts
            .iter()
            .rev()
            .find(|a| a.exit_code != Some(0) && a.exit_code.is_some())
            .filter(|_| gate.passed != Some(true) || gate.verdict == GateVerdict::Flaky),
    }
}

/// How much of an attempt's output an agent gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Bytes the compact digest may take (a digest gets at least
    /// [`render::MIN_DIGEST_BUDGET`]).
    pub digest: usize,
    /// Only a digest shorter than `digest` is shown; a longer one gives way to the tail.
    pub digest_must_fit: bool,
    /// Bytes of tail when there is no digest.
    pub tail: usize,
    /// The tail starts at a line's start when one is near.
    pub tail_from_line: bool,
}

/// What an agent reads of one attempt's output. Every text is as a terminal shows it: no
/// ANSI escapes, carriage-return overwrites applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// The attempt printed nothing.
    Nothing,
    /// The exact failures, when the output was recognised completely.
    Digest(String),
    /// The digest cannot stand in for the output (partly recognised, or its compact form does
    /// not fit), but failures were parsed: every one named, marked as not complete, then the
    /// end of the output within what is left of the budget. Never worse than the tail alone.
    Partial {
        /// The parsed failures named, ending with the line that says the list is not complete.
        named: String,
        /// The end of the output.
        tail: String,
    },
    /// The end of the output, within the budget.
    Tail {
        /// The end of the output.
        text: String,
        /// Whether `text` is the whole output (nothing was cut).
        whole: bool,
    },
}

/// The share of the budget the names of parsed failures may take; the tail keeps the rest, so
/// the lines around the failure that ended the run are always shown.
const NAMED_SHARE: (usize, usize) = (2, 3);

/// The evidence of one attempt within `budget`.
pub fn attempt_output(attempt: &Attempt, budget: Budget) -> Output {
    if attempt.output_bytes == 0 {
        return Output::Nothing;
    }
    let digest = render::compact_digest(attempt, budget.digest)
        .filter(|c| !budget.digest_must_fit || c.len() < budget.digest);
    if let Some(compact) = digest {
        return Output::Digest(compact);
    }
    let shown = greenlight_digest::terminal_text(&attempt.tail);
    let tail = |max: usize| {
        if budget.tail_from_line {
            tail_within(&shown, max).to_owned()
        } else {
            tail_bytes(&shown, max).to_owned()
        }
    };
    let named_room = budget.tail * NAMED_SHARE.0 / NAMED_SHARE.1;
    match render::named_failures(attempt, named_room).filter(|n| n.len() <= named_room) {
        Some(named) => Output::Partial {
            tail: tail(budget.tail.saturating_sub(named.len())),
            named,
        },
        None => {
            let text = tail(budget.tail);
            let whole =
                attempt.output_bytes == attempt.tail.len() as u64 && text.len() == shown.len();
            Output::Tail { text, whole }
        }
    }
}

/// The end of `text` within `max` bytes, starting on a character boundary.
fn tail_bytes(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The end of `text` within `max` bytes, starting on a character boundary and, when one is
/// near, at the start of a line.
pub fn tail_within(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let rest = tail_bytes(text, max);
    match rest.find('\n') {
        Some(nl) if nl + 1 < rest.len() && nl < max / 2 => &rest[nl + 1..],
        _ => rest,
    }
}

/// Cuts `text` to `budget` bytes on a character boundary, saying that it did.
pub fn cut_to(text: String, budget: usize) -> String {
    if text.len() <= budget {
        return text;
    }
    let marker = "\n… (evidence cut to fit; run `greenlight verify` for all of it)\n";
    let mut end = budget.saturating_sub(marker.len());
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut cut = text[..end].to_owned();
    cut.push_str(marker);
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_start_on_a_character_and_line_boundary() {
        let text = "ééééé\nline two\nline three\n";
        let t = tail_within(text, 16);
        assert!(t.len() <= 16);
        assert_eq!(t, "line three\n");
        assert_eq!(tail_within("short", 100), "short");
        let cut = cut_to("é".repeat(200), 100);
        assert!(cut.len() <= 100, "{}", cut.len());
        assert!(cut.ends_with("all of it)\n"));
    }
}
