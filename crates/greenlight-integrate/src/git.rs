//! One way to ask git a question about the repository the user named.
//!
//! The one rule: git runs through [`greenlight_proc::git::command`], which removes every
//! variable that would point it at another repository, so the answer is about the directory
//! given; stdin is closed and stderr dropped.

use std::path::Path;
use std::process::Stdio;

/// git's stdout, trimmed, or `None` when git fails or prints nothing.
pub(crate) fn line(dir: &Path, args: &[&str]) -> Option<String> {
    let mut cmd = greenlight_proc::git::command(dir);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let out = greenlight_proc::git::run(&mut cmd, None).ok()?;
    let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !line.is_empty()).then_some(line)
}
