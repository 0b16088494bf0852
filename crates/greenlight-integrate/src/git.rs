//! One way to ask git a question about the repository the user named.
//!
//! The one rule: the variables that point git at another repository (`GIT_DIR`,
//! `GIT_WORK_TREE`, `GIT_INDEX_FILE`, `GIT_COMMON_DIR`) are cleared, so the answer is about
//! the directory given, and git runs in its own process group with stdin closed.

use std::path::Path;

/// git's stdout, trimmed, or `None` when git fails or prints nothing.
pub(crate) fn line(dir: &Path, args: &[&str]) -> Option<String> {
    use std::os::unix::process::CommandExt as _;
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_COMMON_DIR")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .output()
        .ok()?;
    let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !line.is_empty()).then_some(line)
}
