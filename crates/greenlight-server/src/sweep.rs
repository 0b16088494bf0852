//! Closing the runs (and marking the workflow runs) whose process is gone while the server runs, so a verify killed with
//! SIGKILL is shown interrupted on every page and in the API without waiting for another
//! greenlight to notice.
//!
//! Once a second the server looks at the open runs (a partial index of a handful of rows) and
//! writes only when an owner is gone; the closing transaction appends the run's
//! `run-finished` frame, which the poller publishes like any other commit.

use std::sync::Arc;
use std::time::Duration;

use crate::hub::Hub;

/// How often the open runs are looked at: a killed run reads interrupted within a second,
/// and a look that finds every owner alive writes nothing.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Closes abandoned runs every [`SWEEP_INTERVAL`] until the server stops. A failed look (the
/// file busy or unwritable) is tried again at the next tick; the runs stay as they are.
pub async fn close_abandoned_runs(hub: Arc<Hub>) {
    let mut shutdown = hub.shutdown_signal();
    let mut tick = tokio::time::interval(SWEEP_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => {
                let _ = hub.with_store(|s| Ok(s.close_abandoned_runs()?)).await;
                // A workflow run whose driver died reads interrupted the same way.
                let _ = hub
                    .with_store(|s| Ok(s.interrupt_abandoned_workflow_runs()?))
                    .await;
            }
        }
    }
}
