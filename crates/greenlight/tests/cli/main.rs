//! The CLI through the real binary: one test binary, a module per subcommand and concern.

mod agent_cli;
mod digest_cli;
mod fuzz_config;
mod fuzz_hook;
mod fuzz_support;
mod goal_crash;
mod goal_judge_dispatch;
mod goal_loop;
mod goal_support;
mod goal_worktrees_demo;
mod hook_install_cli;
mod hook_stop_cli;
mod init_cli;
mod verify;
mod verify_config_rejections;
mod verify_leaks;
mod verify_mutex;
mod verify_reports;
