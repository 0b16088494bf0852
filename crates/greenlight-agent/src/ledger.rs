//! The write-ahead record of the tool calls greenlight runs for a model: the intent before the
//! effect, the result after it.
//!
//! The rule that keeps it simple: nothing touches the worktree unless [`ToolLedger::before`]
//! returned `Ok` first, so after a crash every effect that may have happened has a record, and a
//! record without its `after` is a call whose effect is unknown. The goal loop implements the
//! trait over its state database; a dispatch nobody records uses [`NoLedger`].

use std::sync::Mutex;

/// How a tool call ended, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolStatus {
    /// The tool ran and returned a result of its shape.
    Ok,
    /// The tool ran (or tried to) and failed: a missing file, a hunk that does not apply, a
    /// command's deadline, a result of the wrong shape. The model was told why.
    Error,
    /// The call was refused before any effect: a path outside the worktree, arguments that do
    /// not match the tool's schema, an unknown tool.
    Refused,
    /// The model's output could not be read as a tool call at all (the decoder's violation);
    /// nothing ran, the model was told why.
    Violation,
}

impl ToolStatus {
    /// The kebab-case name, as stored.
    pub const fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ok => "ok",
            ToolStatus::Error => "error",
            ToolStatus::Refused => "refused",
            ToolStatus::Violation => "violation",
        }
    }

    /// Whether the model was sent an error for this call.
    pub const fn failed(self) -> bool {
        !matches!(self, ToolStatus::Ok)
    }
}

/// A tool call about to run (or a violation about to be answered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolIntent {
    /// 1-based position among the dispatch's tool calls (violations included).
    pub seq: u32,
    /// 1-based model request (step) of the dispatch that produced the call.
    pub step: u32,
    /// The model's id for the call (`call_…`), or one greenlight made up when it gave none.
    pub call_id: String,
    /// The tool's name as the model wrote it (empty for a violation without one).
    pub tool: String,
    /// The arguments as JSON text, or the raw text of a violation.
    pub arguments: String,
}

/// What a call came to, recorded after its effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolEnd {
    /// The call's `seq`.
    pub seq: u32,
    /// How it ended.
    pub status: ToolStatus,
    /// What the model was sent, exactly (already bounded).
    pub result: String,
    /// Wall time of the call in milliseconds.
    pub wall_ms: u64,
}

/// Where a dispatch's tool calls are recorded. Called from the dispatch's task: each call
/// should be a small synchronous write (a transaction of its own), never a wait on the network.
pub trait ToolLedger: Send + Sync {
    /// Records the intent; the call runs only when this returns `Ok`. The error says what could
    /// not be written; the dispatch then stops without running the call.
    fn before(&self, intent: &ToolIntent) -> Result<(), String>;
    /// Records how the call ended. An error here is reported as the dispatch's failure after the
    /// effect (which has happened): the intent record already says the call ran.
    fn after(&self, end: &ToolEnd) -> Result<(), String>;
}

/// A ledger that records nothing (a standalone `greenlight agent dispatch`).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLedger;

impl ToolLedger for NoLedger {
    fn before(&self, _: &ToolIntent) -> Result<(), String> {
        Ok(())
    }
    fn after(&self, _: &ToolEnd) -> Result<(), String> {
        Ok(())
    }
}

/// One entry of a [`MemoryLedger`], in the order it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerEntry {
    /// An intent.
    Before(ToolIntent),
    /// A result.
    After(ToolEnd),
}

/// A ledger kept in memory (tests, and any caller that wants the calls after the dispatch).
#[derive(Debug, Default)]
pub struct MemoryLedger {
    entries: Mutex<Vec<LedgerEntry>>,
    refuse_from: Option<u32>,
}

impl MemoryLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// A ledger whose `before` fails from the call with this `seq` on (a full disk, say).
    pub fn failing_from(seq: u32) -> Self {
        Self {
            entries: Mutex::default(),
            refuse_from: Some(seq),
        }
    }

    /// Everything written so far.
    pub fn entries(&self) -> Vec<LedgerEntry> {
        self.entries.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// The results written so far, in order.
    pub fn ends(&self) -> Vec<ToolEnd> {
        self.entries()
            .into_iter()
            .filter_map(|e| match e {
                LedgerEntry::After(end) => Some(end),
                LedgerEntry::Before(_) => None,
            })
            .collect()
    }

    fn push(&self, entry: LedgerEntry) -> Result<(), String> {
        self.entries
            .lock()
            .map(|mut e| e.push(entry))
            .map_err(|_| "the in-memory ledger was poisoned by a panic".to_owned())
    }
}

impl ToolLedger for MemoryLedger {
    fn before(&self, intent: &ToolIntent) -> Result<(), String> {
        if self.refuse_from.is_some_and(|from| intent.seq >= from) {
            return Err(format!(
                "the ledger refused call {} (a test ledger set to fail)",
                intent.seq
            ));
        }
        self.push(LedgerEntry::Before(intent.clone()))
    }
    fn after(&self, end: &ToolEnd) -> Result<(), String> {
        self.push(LedgerEntry::After(end.clone()))
    }
}
