//! Where the real `claude` and `codex` CLIs are for the tests that run them (marked
//! `#[ignore = "needs … : run scripts/test"]`): the directory in `GREENLIGHT_AGENT_CLI_BIN`,
//! else `.tools/npm/node_modules/.bin` under the workspace root, where the tools phase of
//! scripts/test installs them (scripts/ci/install-agent-clis.sh).

use std::path::{Path, PathBuf};

/// The real agent CLI `name`; panics, saying how to install it, when it is not there.
pub fn real_agent_cli(name: &str) -> PathBuf {
    let dir = match std::env::var_os("GREENLIGHT_AGENT_CLI_BIN") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/npm/node_modules/.bin"),
    };
    let bin = dir.join(name);
    assert!(
        bin.exists(),
        "the real `{name}` CLI is not installed at {}: run scripts/ci/install-agent-clis.sh \
         (or set GREENLIGHT_AGENT_CLI_BIN to the directory holding it)",
        bin.display()
    );
    bin
}
