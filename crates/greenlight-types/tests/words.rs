//! Every word's text form round-trips: `as_str`, `FromStr`, `Display` and serde all spell each
//! member the same way, every spelling is unique, and a text that names no member is refused
//! with a message that says what it found and what it accepts.

use std::collections::HashSet;
use std::fmt::Debug;
use std::str::FromStr;

use greenlight_types::{
    DispatchOutcome, Family, GateVerdict, GoalState, Reason, RunKind, UnknownWord,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn round_trips<W>(all: &[W], as_str: fn(W) -> &'static str)
where
    W: Copy + Debug + PartialEq + FromStr<Err = UnknownWord> + std::fmt::Display,
    W: Serialize + DeserializeOwned,
{
    let mut seen = HashSet::new();
    for &word in all {
        let text = as_str(word);
        assert!(seen.insert(text), "{word:?}: `{text}` is spelled twice");
        assert!(
            !text.is_empty() && text.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
            "{word:?}: `{text}` is not kebab-case"
        );
        assert_eq!(text.parse::<W>(), Ok(word), "FromStr of `{text}`");
        assert_eq!(word.to_string(), text, "Display of {word:?}");
        let json = serde_json::to_string(&word).expect("a unit enum serialises");
        assert_eq!(json, format!("\"{text}\""), "serde of {word:?}");
        assert_eq!(serde_json::from_str::<W>(&json).expect("reads back"), word);
    }
    let err = "Not-A-Word".parse::<W>().expect_err("an unknown text");
    assert_eq!(err.found, "Not-A-Word");
    assert!(err.to_string().contains("`Not-A-Word`"), "{err}");
    assert!(err.to_string().contains(as_str(all[0])), "{err}");
    assert!(serde_json::from_str::<W>("\"Not-A-Word\"").is_err());
}

#[test]
fn every_word_round_trips_through_its_text_form() {
    round_trips(&GateVerdict::ALL, GateVerdict::as_str);
    round_trips(&Reason::ALL, Reason::as_str);
    round_trips(&Family::ALL, Family::as_str);
    round_trips(&GoalState::ALL, GoalState::as_str);
    round_trips(&RunKind::ALL, RunKind::as_str);
    round_trips(&DispatchOutcome::ALL, DispatchOutcome::as_str);
}

/// The stored and streamed spellings are a contract (database rows, frames, `--json`): pinned
/// here so a rename is a failing test, not a silent migration.
#[test]
fn the_stored_spellings_are_the_contract() {
    assert_eq!(
        GateVerdict::NAMES,
        ["pass", "fail", "flaky", "timeout", "skip"]
    );
    assert_eq!(Family::NAMES, ["claude", "codex", "command", "openai"]);
    assert_eq!(GoalState::NAMES, ["active", "paused", "done", "cleared"]);
    assert_eq!(RunKind::NAMES, ["verify", "hook"]);
    assert_eq!(
        DispatchOutcome::NAMES,
        ["in-flight", "ok", "null", "error", "interrupted"]
    );
    assert_eq!(Reason::ALL.len(), 29);
    assert_eq!(Reason::PausedByUser.as_str(), "paused-by-user");
    // The workflow scheduler's, resume check's, runtime's and land step's members.
    assert_eq!(
        Reason::ALL[19..]
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>(),
        [
            "join-failed",
            "budget-exhausted",
            "foreign-run-refused",
            "resume-already-completed",
            "stale-input-refused",
            "resume-model-unavailable",
            "budget-extension-exhausted",
            "land-conflict",
            "land-red",
            "land-target-busy"
        ]
    );
}

#[test]
fn a_verdict_has_one_line_word_that_round_trips() {
    #[derive(Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Line {
        #[serde(with = "greenlight_types::gate_verdict_word")]
        verdict: GateVerdict,
    }
    for verdict in GateVerdict::ALL {
        let word = verdict.word();
        assert_eq!(word, verdict.as_str().to_ascii_uppercase());
        assert_eq!(GateVerdict::from_word(word), Some(verdict));
        let json = serde_json::to_string(&Line { verdict }).expect("serialises");
        assert_eq!(json, format!("{{\"verdict\":\"{word}\"}}"));
        assert_eq!(
            serde_json::from_str::<Line>(&json).expect("reads"),
            Line { verdict }
        );
    }
    assert_eq!(GateVerdict::from_word("pass"), None);
    let err = serde_json::from_str::<Line>(r#"{"verdict":"pass"}"#).expect_err("lower case");
    assert!(err.to_string().contains("`pass`"), "{err}");
}

#[test]
fn an_unknown_family_says_which_families_exist() {
    let err = "gemini".parse::<Family>().expect_err("not a family");
    assert_eq!(
        err.to_string(),
        "unknown agent family `gemini`; use claude, codex, command or openai"
    );
}
