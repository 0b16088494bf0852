//! `greenlight serve`: the HTTP API, every goal's and run's frames over SSE with Last-Event-ID
//! resume, and the dashboard.
//!
//! [`start`] binds and serves on a thread of its own (so `greenlight goal run --serve` can run
//! one beside the loop); the binary waits for SIGINT/SIGTERM and calls [`Server::stop`].

mod api;
mod config;
pub mod dashboard;
mod error;
mod front;
mod guard;
mod hub;
mod live;
pub mod model;
mod serve;
mod stream;
mod summary;
mod sweep;
pub mod wake;
mod workflow;

pub use config::{Config, DEFAULT_LISTEN, Limits, read_token_file};
pub use error::{ApiError, Error};
pub use guard::COOKIE;
pub use hub::{Held, POLL_INTERVAL};
pub use live::LIVE_CAPACITY;
pub use serve::{Server, router, start};
pub use stream::{PING_INTERVAL, RETRY_MS};
