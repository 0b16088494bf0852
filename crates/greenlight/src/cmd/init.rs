//! `greenlight init`: draft a verify.yaml from what the repository already runs, show where
//! each gate came from, and with `--write` write it and run it once.

use std::path::{Path, PathBuf};

use greenlight_integrate::draft::{self, Draft};
use greenlight_integrate::foreground;

/// Exit codes of `greenlight init` (besides the first verify run's own code after `--write`).
pub mod exit {
    /// Drafted (and, with `--write`, written and run to a pass).
    pub const DRAFTED: i32 = 0;
    /// Nothing in the repository looked like a gate.
    pub const NOTHING_FOUND: i32 = 1;
    /// Refused: the directory cannot be read, or verify.yaml exists and `--force` was not given.
    pub const REFUSED: i32 = 2;
}

/// Where verify.yaml lives, relative to the worktree (CommandMate's default).
const CONFIG_PATH: &str = ".commandmate/verify.yaml";

/// Arguments of `greenlight init`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Repository to scan [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Write .commandmate/verify.yaml, then run `greenlight verify` once.
    #[arg(long)]
    pub write: bool,
    /// With --write: replace an existing .commandmate/verify.yaml (the old one is kept as
    /// verify.yaml.greenlight.bak).
    #[arg(long, requires = "write")]
    pub force: bool,
}

/// Runs the subcommand and returns the process exit code.
pub fn run(args: Args) -> i32 {
    let dir = args.cwd.clone().unwrap_or_else(|| PathBuf::from("."));
    let drafted = match draft::draft(&dir) {
        Ok(d) => d,
        Err(e) => {
            errln!("greenlight init: {e}");
            return exit::REFUSED;
        }
    };
    print_draft(&drafted);
    if drafted.gates.is_empty() {
        errln!(
            "greenlight init: found nothing to gate in {} (no CI run steps, package.json \
             scripts, Makefile or justfile targets, tox/nox, Cargo.toml, pyproject.toml or \
             go.mod); write {CONFIG_PATH} by hand",
            dir.display()
        );
        return exit::NOTHING_FOUND;
    }
    let yaml = draft::render_v1(&drafted.gates);
    if !args.write {
        outln!("\n{yaml}");
        outln!(
            "Not written. Review the gates above, then run `greenlight init --write` to write \
             {CONFIG_PATH} and run it once."
        );
        return exit::DRAFTED;
    }
    match write_config(&dir, &yaml, args.force) {
        Ok(path) => outln!("\nwrote {}", path.display()),
        Err(code) => return code,
    }
    run_once(&dir)
}

fn print_draft(d: &Draft) {
    match d.gates.len() {
        0 => {}
        1 => {
            outln!("1 gate drafted:");
        }
        n => {
            outln!("{n} gates drafted:");
        }
    }
    let width = d.gates.iter().map(|g| g.id.len()).max().unwrap_or(0);
    for g in &d.gates {
        outln!("  {:<width$}  {}", g.id, g.command);
        let timeout = g
            .timeout_sec
            .map(|t| format!(", timeoutSec {t}"))
            .unwrap_or_default();
        outln!("  {:<width$}  from {}{timeout}", "", g.source);
    }
    if !d.skipped.is_empty() {
        let gap = if d.gates.is_empty() { "" } else { "\n" };
        outln!("{gap}not drafted:");
        for s in &d.skipped {
            outln!("  {}: {}", s.source, s.reason);
            if let Some(first) = s.command.lines().next().filter(|l| !l.is_empty()) {
                let more = if s.command.trim_end().lines().count() > 1 {
                    " …"
                } else {
                    ""
                };
                outln!("    $ {first}{more}");
            }
        }
    }
}

/// Writes verify.yaml; refuses to replace one without `--force`. Returns the written path or
/// the exit code to end with.
fn write_config(dir: &Path, yaml: &str, force: bool) -> Result<PathBuf, i32> {
    let path = dir.join(CONFIG_PATH);
    if path.exists() {
        if !force {
            errln!(
                "greenlight init: {} already exists; nothing was written. Pass --force to \
                 replace it (the old file is kept as verify.yaml.greenlight.bak).",
                path.display()
            );
            return Err(exit::REFUSED);
        }
        let backup = path.with_extension("yaml.greenlight.bak");
        if let Err(e) = std::fs::copy(&path, &backup) {
            errln!(
                "greenlight init: cannot back up {} to {}: {e}",
                path.display(),
                backup.display()
            );
            return Err(exit::REFUSED);
        }
    }
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&path, yaml));
    match written {
        Ok(()) => Ok(path),
        Err(e) => {
            errln!("greenlight init: cannot write {}: {e}", path.display());
            Err(exit::REFUSED)
        }
    }
}

/// Runs `greenlight verify --cwd DIR` with this very binary, in the foreground.
fn run_once(dir: &Path) -> i32 {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            errln!("greenlight init: wrote the config but cannot find this binary to run it: {e}");
            return exit::REFUSED;
        }
    };
    outln!(
        "running it once: greenlight verify --cwd {}\n",
        dir.display()
    );
    let args = ["verify".into(), "--cwd".into(), dir.as_os_str().to_owned()];
    match foreground::run(&exe, &args, Path::new(".")) {
        Ok(code) => {
            let meaning = match code {
                0 => "passed: the drafted gates are green",
                2 => "no verdict: verify could not read or run the config",
                20 => "failed: a gate is red; fix the code or the gate",
                21 => "not started: no work found yet (commit or change something)",
                22 => "skipped: nothing was judged (a primary checkout, or a mutex wait)",
                _ => "see the output above",
            };
            outln!("\nfirst run: exit {code} ({meaning})");
            code
        }
        Err(e) => {
            errln!("greenlight init: {e}");
            exit::REFUSED
        }
    }
}
