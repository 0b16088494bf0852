//! eslint's one-line formatters: `compact` (`/abs/a.js: line 1, col 7, Error - message
//! (rule)`) and `unix` (`/abs/a.js:1:7: message [Error/rule]`), closing with `N problems`.
//!
//! One rule: the finding's severity is the word eslint prints, its code the rule in brackets or
//! parentheses (a parse error has none).

use super::{Count, Dialect, Finding, Read};
use crate::model::{Format, Severity};

#[derive(Debug)]
pub(super) struct EslintLines;

fn severity(word: &str) -> Option<Severity> {
    match word {
        "Error" => Some(Severity::Error),
        "Warning" => Some(Severity::Warning),
        _ => None,
    }
}

/// compact: `file: line 1, col 7, Error - message (rule)`.
fn compact(t: &str) -> Option<Finding> {
    let (file, rest) = t.split_once(": line ")?;
    let (l, rest) = rest.split_once(", col ")?;
    let (c, rest) = rest.split_once(", ")?;
    let (level, msg) = rest.split_once(" - ")?;
    let severity = severity(level)?;
    let (msg, rule) = match msg.rsplit_once(" (") {
        Some((m, r)) if r.ends_with(')') && !r.contains(' ') => (m, Some(&r[..r.len() - 1])),
        _ => (msg, None),
    };
    Some(
        Finding::at(severity, file, Some(l.parse().ok()?), Some(c.parse().ok()?))
            .code(rule)
            .message(msg),
    )
}

/// unix: `file:1:7: message [Error/rule]`.
fn unix(t: &str) -> Option<Finding> {
    let (msg, tag) = t.strip_suffix(']')?.rsplit_once(" [")?;
    let (level, rule) = tag
        .split_once('/')
        .map_or((tag, None), |(l, r)| (l, Some(r)));
    let severity = severity(level)?;
    let (loc, msg) = msg.split_once(": ")?;
    let (file, l, c) = super::super::util::location(loc)?;
    Some(
        Finding::at(severity, file, Some(l), c)
            .code(rule)
            .message(msg),
    )
}

impl Dialect for EslintLines {
    fn format(&self) -> Format {
        Format::Eslint
    }

    fn closes(&self) -> bool {
        true
    }

    fn read(&mut self, t: &str) -> Read {
        if let Some(f) = compact(t).or_else(|| unix(t)) {
            return Read::Finding(f);
        }
        if let Some(n) = t
            .strip_suffix(" problems")
            .or_else(|| t.strip_suffix(" problem"))
            .and_then(|n| n.parse().ok())
        {
            return Read::Count(Count {
                total: Some(n),
                ..Count::default()
            });
        }
        Read::No
    }
}
