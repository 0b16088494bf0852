//! `greenlight serve`: the HTTP API, every goal's and run's frames over SSE with Last-Event-ID
//! resume, and the dashboard.

pub mod dashboard;
pub mod model;
