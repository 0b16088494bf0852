//! One module per subcommand; each exposes its clap arguments and `run(args) -> exit code`.

pub mod agent;
pub mod cache;
pub mod config;
pub mod demo;
pub mod demo_workflow;
pub mod digest;
pub mod goal;
pub mod goal_queue;
pub mod history;
pub mod hook;
pub mod init;
pub mod mcp;
pub mod mcp_install;
pub mod serve;
pub mod store;
pub mod verify;
pub mod worker;
pub mod worker_slots;
pub mod workflow;
pub mod workflow_queue;
pub mod workflow_view;
