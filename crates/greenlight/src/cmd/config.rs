//! `greenlight config move`: CommandMate's verify.yaml into greenlight's own home, and the git
//! commands that record the move.

use std::path::{Path, PathBuf};

use greenlight_gate::config::{self, Home};

/// Exit codes of `greenlight config move`.
pub mod exit {
    /// Moved.
    pub const MOVED: i32 = 0;
    /// Nothing moved (no file, a file already there, a version 1 file, or one that would read
    /// differently at its new place).
    pub const REFUSED: i32 = 2;
}

/// The `config` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Move .commandmate/verify.yaml (version 2, greenlight's format, which CommandMate
    /// refuses) to .greenlight/verify.yaml, byte for byte.
    #[command(after_help = "Exit codes: 0 moved, 2 nothing moved (no file, \
.greenlight/verify.yaml exists, a version 1 file without --any-version, or a file whose \
relative paths would no longer resolve).")]
    Move {
        /// The directory holding .commandmate/ [default: the current directory].
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Move a version 1 file too (CommandMate's format; CommandMate then no longer sees it).
        #[arg(long)]
        any_version: bool,
    },
}

/// Runs the subcommand and returns the process exit code.
pub fn run(command: Command) -> i32 {
    let Command::Move { cwd, any_version } = command;
    let dir = cwd.unwrap_or_else(|| PathBuf::from("."));
    match config::move_to_greenlight_home(&dir, any_version) {
        Ok(moved) => {
            // From the current directory, the paths read as the user would type them.
            let shown = |p: &Path| p.strip_prefix(".").unwrap_or(p).display().to_string();
            outln!(
                "moved {} to {} ({} bytes, unchanged)",
                shown(&moved.from),
                shown(&moved.to),
                moved.bytes
            );
            outln!("to record the move in git, run in {}:", dir.display());
            outln!("  git add {}", Home::Greenlight.relative().display());
            if tracked(&dir, &Home::CommandMate.relative()) {
                outln!(
                    "  git rm --cached --quiet {}",
                    Home::CommandMate.relative().display()
                );
            }
            exit::MOVED
        }
        Err(e) => {
            errln!("greenlight config move: {e}");
            exit::REFUSED
        }
    }
}

/// Whether git tracks `path` in `dir` (its removal is then a change to commit).
fn tracked(dir: &Path, path: &Path) -> bool {
    let mut cmd = greenlight_proc::git::command(dir);
    cmd.arg("ls-files")
        .arg("--error-unmatch")
        .arg("--")
        .arg(path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    greenlight_proc::git::run(&mut cmd, None).is_ok_and(|out| out.status.success())
}
