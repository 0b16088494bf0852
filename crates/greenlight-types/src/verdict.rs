//! A gate's verdict: lower case where it is stored and streamed (`pass`), upper case on the
//! line contract and in verify's reports (`PASS`).

crate::word::word!(
    /// A gate's verdict, as the line contract names it (lower case here).
    GateVerdict ("gate verdict") {
        /// Exit code 0.
        Pass = "pass",
        /// Non-zero exit.
        Fail = "fail",
        /// Failed, then passed on a retry.
        Flaky = "flaky",
        /// Killed at its time limit.
        Timeout = "timeout",
        /// Not run.
        Skip = "skip",
    }
);

impl GateVerdict {
    /// The word on a gate's `GATE` line and in verify's JSON, the result cache and the MCP
    /// tools: `PASS`, `FAIL`, `FLAKY`, `TIMEOUT`, `SKIP`.
    pub const fn word(self) -> &'static str {
        match self {
            GateVerdict::Pass => "PASS",
            GateVerdict::Fail => "FAIL",
            GateVerdict::Flaky => "FLAKY",
            GateVerdict::Timeout => "TIMEOUT",
            GateVerdict::Skip => "SKIP",
        }
    }

    /// The verdict whose line word is `word`; `None` for anything else.
    pub fn from_word(word: &str) -> Option<GateVerdict> {
        GateVerdict::ALL.into_iter().find(|v| v.word() == word)
    }
}

/// Serde in the line contract's upper case, for `#[serde(with = "gate_verdict_word")]` on the
/// fields of verify's reports and result cache entries.
pub mod word {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::GateVerdict;

    /// Writes the verdict's line word (`PASS`).
    pub fn serialize<S: Serializer>(verdict: &GateVerdict, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(verdict.word())
    }

    /// Reads a line word (`PASS`); any other text is an error that names it.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<GateVerdict, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        GateVerdict::from_word(&text).ok_or_else(|| {
            serde::de::Error::unknown_variant(&text, &["PASS", "FAIL", "FLAKY", "TIMEOUT", "SKIP"])
        })
    }
}
