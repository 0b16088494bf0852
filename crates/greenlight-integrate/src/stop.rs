//! Where a Stop hook finds its gates: the `.commandmate/verify.yaml` of the worktree a
//! directory is in. The hook itself lives in `greenlight-run`; registering the MCP server asks
//! the same question, so the answer stays here where both can reach it.

use std::path::{Path, PathBuf};

/// Finds `.commandmate/verify.yaml` in `cwd` or the nearest directory above it, stopping at the
/// worktree's top (the first directory holding `.git`), so a session started in a subdirectory
/// still finds its worktree's gates.
pub fn find_config(cwd: &Path) -> Option<PathBuf> {
    for dir in cwd.ancestors() {
        let candidate = dir.join(".commandmate").join("verify.yaml");
        // Anything at the path counts, not only a regular file: a FIFO or a device there is a
        // broken config to report, not a missing one to be silent about.
        if std::fs::symlink_metadata(&candidate).is_ok() {
            return Some(candidate);
        }
        if dir.join(".git").exists() {
            return None;
        }
    }
    None
}
