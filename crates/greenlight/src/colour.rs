//! Colour for a person at a terminal: the verdict words of the `GATE …`/`RESULT …` lines and of
//! the goal loop, and the closing summary.
//!
//! The one rule that keeps scripts safe: stdout is coloured only when it is a terminal, so a
//! pipe or a file gets CommandMate's line contract byte for byte whatever the environment says.
//! stderr follows the usual conventions (`NO_COLOR` turns colour off, `CLICOLOR_FORCE` on for a
//! stream that is not a terminal). `NO_COLOR` and `TERM=dumb` win everywhere. Only the verdict
//! word is coloured, never the fields a reader parses.

use std::io::IsTerminal;

use anstyle::{AnsiColor, Style};

/// Which stream a text is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The line contract (verify) or the loop's progress (goal run).
    Stdout,
    /// Reasons, tails and the summary line.
    Stderr,
}

/// Whether text for `stream` is coloured, from the environment the process started with.
pub fn enabled(stream: Stream) -> bool {
    let vars = &crate::environment::get().vars;
    let set = |name: &str| vars.get(name).is_some_and(|v| !v.is_empty());
    if set("NO_COLOR") || vars.get("TERM").is_some_and(|t| t == "dumb") {
        return false;
    }
    match stream {
        Stream::Stdout => std::io::stdout().is_terminal(),
        Stream::Stderr => {
            (set("CLICOLOR_FORCE") && vars.get("CLICOLOR_FORCE").is_some_and(|v| v != "0"))
                || std::io::stderr().is_terminal()
        }
    }
}

/// The style of a verdict word: green for a pass, red for a failure, yellow for what is
/// neither (flaky, skipped, not started); `None` for a word that is not a verdict.
fn verdict_style(word: &str) -> Option<Style> {
    let colour = match word {
        "PASS" | "passed" | "green" => AnsiColor::Green,
        "FAIL" | "TIMEOUT" | "failed" | "red" | "timed out" => AnsiColor::Red,
        "FLAKY" | "SKIP" | "skipped" | "not_started" | "flaky" => AnsiColor::Yellow,
        _ => return None,
    };
    Some(Style::new().fg_color(Some(colour.into())).bold())
}

/// `word` in its verdict colour when `on`; as it is otherwise.
pub fn paint(word: &str, on: bool) -> String {
    match verdict_style(word).filter(|_| on) {
        Some(style) => format!("{style}{word}{style:#}"),
        None => word.to_owned(),
    }
}

/// A `GATE id WORD …` or `RESULT word` line with its verdict word coloured for `stream` (the
/// line unchanged when colour is off there).
pub fn contract_line(line: &str, stream: Stream) -> String {
    if !enabled(stream) {
        return line.to_owned();
    }
    let at = if line.starts_with("GATE ") { 2 } else { 1 };
    line.split(' ')
        .enumerate()
        .map(|(i, token)| {
            if i == at {
                paint(token, true)
            } else {
                token.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The summary line (`2 gates: 1 red, 1 green in 1.2s`) with each count coloured by its
/// verdict, for stderr.
pub fn summary(line: &str) -> String {
    let split = line
        .split_once(": ")
        .and_then(|(head, rest)| rest.rsplit_once(" in ").map(|(c, t)| (head, c, t)));
    let Some((head, counts, time)) = split.filter(|_| enabled(Stream::Stderr)) else {
        return line.to_owned();
    };
    let counts: Vec<String> = counts
        .split(", ")
        .map(|part| {
            let word = part.split_once(' ').map_or(part, |(_, word)| word);
            match verdict_style(word) {
                Some(style) => format!("{style}{part}{style:#}"),
                None => part.to_owned(),
            }
        })
        .collect();
    format!("{head}: {} in {time}", counts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_verdict_word_is_painted() {
        assert_eq!(paint("PASS", false), "PASS");
        assert_eq!(paint("PASS", true), "\u{1b}[1m\u{1b}[32mPASS\u{1b}[0m");
        assert_eq!(paint("exit=0", true), "exit=0");
    }
}
