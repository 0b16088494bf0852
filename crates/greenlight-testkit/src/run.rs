//! One finished run of the real binary, rendered for snapshots: exit code, stdout and stderr in
//! one block, with temp paths, pids and sub-second timings filtered out.

use std::path::{Path, PathBuf};
use std::process::Output;

/// The `greenlight` binary next to the running test executable (`target/<profile>/greenlight`).
pub fn greenlight_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_greenlight") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    let mut dir = exe.parent().unwrap().to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join("greenlight");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p greenlight`",
        bin.display()
    );
    bin
}

/// What a run of the binary produced.
#[derive(Debug)]
pub struct Run {
    /// The exit code (-1 when killed by a signal).
    pub code: i32,
    /// stdout, decoded with replacement.
    pub stdout: String,
    /// stderr, decoded with replacement.
    pub stderr: String,
    /// stdout as written, for parsers that must see the bytes themselves.
    raw_stdout: Vec<u8>,
    filters: Vec<(String, String)>,
}

impl Run {
    /// Wraps an `Output`, replacing each given path with its placeholder in [`Run::render`].
    pub fn from_output(out: Output, paths: &[(&Path, &str)]) -> Self {
        let filters = paths
            .iter()
            .map(|(p, name)| (p.display().to_string(), (*name).to_owned()))
            .collect();
        Self {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            raw_stdout: out.stdout,
            filters,
        }
    }

    /// The stdout lines.
    pub fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }

    /// stdout parsed as one JSON value (from the bytes, so invalid UTF-8 is an error, not a
    /// replacement character); panics with stdout when it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.raw_stdout)
            .unwrap_or_else(|err| panic!("stdout is not JSON ({err}): {}", self.stdout))
    }

    /// Exit code, stdout and stderr in one block, filtered for stable snapshots.
    pub fn render(&self) -> String {
        let mut text = format!(
            "exit: {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        );
        for (path, name) in &self.filters {
            text = text.replace(path.as_str(), name);
        }
        let pid = regex::Regex::new(r"pid \d+").unwrap();
        let text = pid.replace_all(&text, "pid [PID]");
        without_durations(&text)
    }
}

/// `text` with every duration in seconds (`0.1s`, `12.04s`) written `[S]s`: two runs of the
/// same gates compare equal however long each took.
pub fn without_durations(text: &str) -> String {
    let secs = regex::Regex::new(r"\b\d+\.\d+s\b").unwrap();
    secs.replace_all(text, "[S]s").into_owned()
}
