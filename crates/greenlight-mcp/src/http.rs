//! Streamable HTTP at `/mcp`: the same server as over stdio, as a tower service that
//! `greenlight serve` mounts behind its Host, Origin and token checks.

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::McpServer;

/// The `/mcp` service: one session per client, each talking to a clone of `server`. Host and
/// Origin are checked by the server it is mounted on, which knows the addresses it allows.
pub fn service(server: McpServer) -> StreamableHttpService<McpServer, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}
