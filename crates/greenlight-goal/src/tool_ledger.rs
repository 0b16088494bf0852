//! The write-ahead record of an openai turn's tool calls, in the goal's state database.
//!
//! The dispatch runs concurrently with the turn's own frame writes, so the ledger has a
//! connection of its own to the same file (SQLite's locking and `busy_timeout` order the two);
//! each record is one small IMMEDIATE transaction committed before `before` returns, so the
//! intent is on disk before the tool has any effect.

use std::path::Path;
use std::sync::Mutex;

use greenlight_agent::ledger::{ToolEnd, ToolIntent, ToolLedger, ToolStatus};
use greenlight_store::{DispatchId, NewToolCall, Store, ToolCallStatus};

/// The tool calls of one dispatch, recorded in the store.
pub(crate) struct StoreToolLedger {
    store: Mutex<Store>,
    dispatch: DispatchId,
}

impl StoreToolLedger {
    /// A ledger for `dispatch` over its own connection to the database at `path`.
    pub(crate) fn open(path: &Path, dispatch: DispatchId) -> Result<Self, greenlight_store::Error> {
        Ok(Self {
            store: Mutex::new(Store::open(path)?),
            dispatch,
        })
    }

    fn write(
        &self,
        f: impl FnOnce(&greenlight_store::Tx<'_>) -> Result<(), greenlight_store::Error>,
    ) -> Result<(), String> {
        let mut store = self
            .store
            .lock()
            .map_err(|_| "the tool ledger's connection was poisoned by a panic".to_owned())?;
        store.write(f).map_err(|e| e.to_string())
    }
}

fn status(status: ToolStatus) -> ToolCallStatus {
    match status {
        ToolStatus::Ok => ToolCallStatus::Ok,
        ToolStatus::Error => ToolCallStatus::Error,
        ToolStatus::Refused => ToolCallStatus::Refused,
        ToolStatus::Violation => ToolCallStatus::Violation,
    }
}

impl ToolLedger for StoreToolLedger {
    fn before(&self, intent: &ToolIntent) -> Result<(), String> {
        let call = NewToolCall {
            dispatch: self.dispatch,
            seq: intent.seq,
            step: intent.step,
            call_id: intent.call_id.clone(),
            tool: intent.tool.clone(),
            arguments: intent.arguments.clone(),
        };
        self.write(|tx| tx.begin_tool_call(&call))
    }

    fn after(&self, end: &ToolEnd) -> Result<(), String> {
        self.write(|tx| {
            tx.finish_tool_call(
                self.dispatch,
                end.seq,
                status(end.status),
                &end.result,
                end.wall_ms,
            )
        })
    }
}
