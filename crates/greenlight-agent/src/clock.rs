//! The monotonic clock every wall time in this crate is read from.
//!
//! Injected, never reached for: a test can step time by hand and assert an exact `wall_ms`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A monotonic time source. Only differences between two readings mean anything.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Time elapsed since an arbitrary fixed origin.
    fn now(&self) -> Duration;
}

/// The real clock: [`Instant`], measured from when the clock was made.
#[derive(Debug, Clone)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock that moves only by a fixed step each time it is read: deterministic wall times for
/// tests (two readings around one dispatch give exactly one step).
#[derive(Debug, Clone)]
pub struct SteppingClock {
    step_ms: u64,
    ticks: Arc<AtomicU64>,
}

impl SteppingClock {
    /// Each reading returns `step` more than the previous one; the first reading is zero.
    pub fn new(step: Duration) -> Self {
        Self {
            step_ms: u64::try_from(step.as_millis()).unwrap_or(u64::MAX),
            ticks: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Clock for SteppingClock {
    fn now(&self) -> Duration {
        let n = self.ticks.fetch_add(1, Ordering::SeqCst);
        Duration::from_millis(n.saturating_mul(self.step_ms))
    }
}

/// Milliseconds between two readings, saturating at zero.
pub fn elapsed_ms(clock: &dyn Clock, start: Duration) -> u64 {
    u64::try_from(clock.now().saturating_sub(start).as_millis()).unwrap_or(u64::MAX)
}
