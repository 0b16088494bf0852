//! `greenlight mcp`: verify, digest, evidence and the goal tools as an MCP server, over stdio
//! (`stdio`) or streamable HTTP mounted on `greenlight serve` (`http`).

mod digest;
pub mod evidence;
mod goals;
mod handler;
pub mod http;
mod progress;
pub mod stdin;
pub mod stdio;
mod verify;
mod workflows;

pub use handler::{EvidenceArgs, EvidencePage, McpServer, Options, TOOL_NAMES};
