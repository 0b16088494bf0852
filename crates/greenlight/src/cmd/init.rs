//! `greenlight init`: draft a verify.yaml (version 1, or 2 with `--v2`) from what the
//! repository already runs, show where each gate came from, and with `--write` write it and
//! run it once.
//!
//! The one rule for that first run: it judges the drafted gates, not the user's work. Nothing
//! was changed yet, so a gate red there is reported as suspect (the gate or its setup is wrong),
//! and a gate whose setup is missing is not run at all; the setup command is named instead.

use std::path::{Path, PathBuf};

use greenlight_init::{self as draft, Draft, DraftGate};
use greenlight_proc::{Observer, Stream, foreground};

/// Exit codes of `greenlight init`: init's own outcome only. The first verify run after
/// `--write` is a trial whose result is printed (`first run: exit N (…)`), never returned: the
/// config was written either way, and a red gate is for the user to read, not a failed init.
pub mod exit {
    /// Drafted (with `--write`: written, and run once whatever that run decided).
    pub const DRAFTED: i32 = 0;
    /// Nothing in the repository looked like a gate.
    pub const NOTHING_FOUND: i32 = 1;
    /// Refused: the directory cannot be read, or verify.yaml exists and `--force` was not given.
    pub const REFUSED: i32 = 2;
}

use greenlight_gate::config::{self, Home};

/// Where init writes: greenlight's own `.greenlight/verify.yaml`, unless the repository already
/// uses CommandMate's `.commandmate/verify.yaml` (and not greenlight's), which is kept.
fn target_home(dir: &Path) -> Home {
    let uses_commandmate = Home::CommandMate.file_in(dir).exists();
    if uses_commandmate && !Home::Greenlight.file_in(dir).exists() {
        Home::CommandMate
    } else {
        Home::Greenlight
    }
}

/// Arguments of `greenlight init`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit codes: 0 drafted (with --write: written and run once; the first \
run's own verdict is printed, not returned), 1 nothing found to gate, 2 refused (unreadable \
directory, verify.yaml exists without --force, or it cannot be written). A gate red on that \
first run is reported as suspect: nothing was changed yet, so the gate or its setup is wrong; \
a gate whose setup is missing is not run, and the setup command is named."
)]
pub struct Args {
    /// Repository to scan [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Write .greenlight/verify.yaml (or the repository's existing .commandmate/verify.yaml),
    /// then run `greenlight verify` once.
    #[arg(long)]
    pub write: bool,
    /// With --write: replace an existing verify.yaml (the old one is kept as
    /// verify.yaml.greenlight.bak).
    #[arg(long, requires = "write")]
    pub force: bool,
    /// Draft verify.yaml version 2: the same gates, run in parallel, with `needs` where a test
    /// plainly needs the build of its toolchain and draft `inputs` (for the result cache) where
    /// the repository's layout makes them plain. Review both before relying on them.
    #[arg(long)]
    pub v2: bool,
}

/// Runs the subcommand and returns the process exit code.
pub fn run(args: Args) -> i32 {
    let dir = args.cwd.clone().unwrap_or_else(|| PathBuf::from("."));
    let home = target_home(&dir);
    let config_path = home.relative();
    let config_path = config_path.display();
    if args.v2 && !home.reads_v2() {
        errln!(
            "greenlight init: this repository uses CommandMate's {config_path}, which is version 1 \
             only (CommandMate refuses version 2); nothing was drafted. Run `{}` to move it to \
             {} first, then `greenlight init --v2` drafts greenlight's version 2 there",
            config::MOVE_COMMAND,
            Home::Greenlight.relative().display()
        );
        return exit::REFUSED;
    }
    let path = crate::environment::get().vars.var("PATH");
    let drafted = match draft::draft(&dir, &draft::Programs::Path(path)) {
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
             go.mod); write {config_path} by hand",
            dir.display()
        );
        return exit::NOTHING_FOUND;
    }
    let options = draft::options_for(&dir);
    let yaml = if args.v2 {
        let plans = draft::plan_v2(&dir, &drafted.gates);
        draft::render_v2(&drafted.gates, &plans, &options)
    } else {
        draft::render_v1_with(&drafted.gates, &options)
    };
    if !args.write {
        outln!("\n{yaml}");
        let v2 = if args.v2 { " --v2" } else { "" };
        outln!(
            "Not written. Review the gates above, then run `greenlight init{v2} --write` to \
             write {config_path} and run it once."
        );
        return exit::DRAFTED;
    }
    let written = match write_config(&home.file_in(&dir), &yaml, args.force) {
        Ok(path) => path,
        Err(code) => return code,
    };
    outln!("\nwrote {}", written.display());
    if let Some((base, _)) = &options.base_ref {
        outln!("options: baseRef {base} (the comment above it in the file says why)");
    }
    if let Some((skip, _)) = &options.skip_in_primary_checkout {
        outln!(
            "options: skipInPrimaryCheckout {skip} (this is the primary checkout; with true every \
             gate would be skipped here)"
        );
    }
    run_once(&dir, &drafted.gates);
    exit::DRAFTED
}

fn print_draft(d: &Draft) {
    if d.gates.is_empty() {
        outln!("no gate drafted");
    } else {
        let plural = if d.gates.len() == 1 { "" } else { "s" };
        outln!("{} gate{plural} drafted:", d.gates.len());
    }
    let width = d.gates.iter().map(|g| g.id.len()).max().unwrap_or(0);
    for g in &d.gates {
        outln!("  {:<width$}  {}", g.id, g.command);
        let timeout = g
            .timeout_sec
            .map(|t| format!(", timeoutSec {t}"))
            .unwrap_or_default();
        outln!("  {:<width$}  from {}{timeout}", "", g.source);
        if let Some(setup) = &g.setup {
            outln!("  {:<width$}  {}", "", draft::setup_note(setup));
        }
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
fn write_config(path: &Path, yaml: &str, force: bool) -> Result<PathBuf, i32> {
    let path = path.to_path_buf();
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
        // Read bounded and without blocking: the old file may be a FIFO or a device.
        let copied =
            greenlight_gate::file::read_bounded(&path, greenlight_gate::file::MAX_CONFIG_BYTES)
                .map_err(|e| e.to_string())
                .and_then(|bytes| std::fs::write(&backup, bytes).map_err(|e| e.to_string()));
        if let Err(e) = copied {
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

/// Runs `greenlight verify --cwd DIR --skip-work-evidence` with this very binary, in the
/// foreground, on the gates whose setup is there, and reports its verdict: a red gate there is
/// suspect, since the tree is as the user left it. Work-evidence is skipped because the run tries
/// the gates, it does not judge work: the config just written is greenlight's own file, never
/// work, so in a clean checkout work-evidence alone would stop the trial before any gate ran.
fn run_once(dir: &Path, gates: &[DraftGate]) {
    let (waiting, ready): (Vec<&DraftGate>, Vec<&DraftGate>) =
        gates.iter().partition(|g| g.setup.is_some());
    if !waiting.is_empty() {
        let mut setups: Vec<&str> = waiting
            .iter()
            .filter_map(|g| g.setup.as_ref().map(|s| s.command.as_str()))
            .collect();
        setups.dedup();
        let ids: Vec<&str> = waiting.iter().map(|g| g.id.as_str()).collect();
        let setups: Vec<String> = setups.iter().map(|s| format!("`{s}`")).collect();
        outln!(
            "not run now, their setup is missing: {}; run {} first, then `greenlight verify`",
            ids.join(", "),
            setups.join(" and ")
        );
    }
    if ready.is_empty() {
        return;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            errln!("greenlight init: wrote the config but cannot find this binary to run it: {e}");
            return;
        }
    };
    let mut args = vec![
        "verify".into(),
        "--cwd".into(),
        dir.as_os_str().to_owned(),
        "--skip-work-evidence".into(),
    ];
    let mut shown = format!(
        "greenlight verify --cwd {} --skip-work-evidence",
        dir.display()
    );
    if !waiting.is_empty() {
        let ids: Vec<&str> = ready.iter().map(|g| g.id.as_str()).collect();
        shown.push_str(&format!(" --gates {}", ids.join(",")));
        args.extend(["--gates".into(), ids.join(",").into()]);
    }
    outln!("running it once: {shown}\n");
    let mut first = FirstRun::default();
    let code = foreground::run_observed(&exe, &args, Path::new("."), &mut first);
    first.finish();
    match code {
        Ok(code) => {
            let red = &first.red;
            let meaning = match code {
                0 if waiting.is_empty() => "passed: the drafted gates are green".to_string(),
                0 => "passed: the gates that ran are green".to_string(),
                2 => "no verdict: verify could not read or run the config".to_string(),
                20 if !red.is_empty() => {
                    let n = red.len();
                    let (gates, fail) = if n == 1 {
                        ("gate is", "fails")
                    } else {
                        ("gates are", "fail")
                    };
                    format!(
                        "written, but {n} {gates} suspect: {} {fail} on the untouched tree",
                        red.join(", ")
                    )
                }
                20 => "failed: a gate is red on the untouched tree, so it is suspect".to_string(),
                21 => "not started: no work found yet (commit or change something)".to_string(),
                22 => {
                    "skipped: nothing was judged (a primary checkout, or a mutex wait)".to_string()
                }
                _ => "see the output above".to_string(),
            };
            outln!("\nfirst run: exit {code} ({meaning})");
            if code == 20 {
                outln!(
                    "suspect: nothing has been changed yet, so a red gate here is not a failure of \
                     your work; fix the gate or the setup it needs (or remove it) before judging \
                     work with it"
                );
            }
        }
        Err(e) => errln!("greenlight init: wrote the config but could not run it: {e}"),
    }
}

/// Shows verify's output line by line as it arrives and keeps the ids of the gates it reports
/// red (`GATE <id> FAIL …`, `GATE <id> TIMEOUT …`).
#[derive(Default)]
struct FirstRun {
    out: Vec<u8>,
    err: Vec<u8>,
    red: Vec<String>,
}

impl FirstRun {
    fn line(&mut self, stream: Stream, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        match stream {
            Stream::Out => {
                // Read the words without colour, should the line carry any.
                let plain = strip_colour(&text);
                let words: Vec<&str> = plain.split_whitespace().collect();
                if let ["GATE", id, verdict, ..] = words.as_slice()
                    && matches!(*verdict, "FAIL" | "TIMEOUT")
                    && !matches!(*id, "work-evidence" | "env-clean" | "scope")
                {
                    self.red.push((*id).to_string());
                }
                outln!("{text}");
            }
            Stream::Err => errln!("{text}"),
        }
    }

    fn buffer(&mut self, stream: Stream) -> &mut Vec<u8> {
        match stream {
            Stream::Out => &mut self.out,
            Stream::Err => &mut self.err,
        }
    }

    /// Shows what is left after the last newline.
    fn finish(&mut self) {
        for stream in [Stream::Out, Stream::Err] {
            let rest = std::mem::take(self.buffer(stream));
            if !rest.is_empty() {
                self.line(stream, &rest);
            }
        }
    }
}

impl Observer for FirstRun {
    fn chunk(&mut self, stream: Stream, bytes: &[u8]) {
        self.buffer(stream).extend_from_slice(bytes);
        while let Some(end) = self.buffer(stream).iter().position(|b| *b == b'\n') {
            let mut line: Vec<u8> = self.buffer(stream).drain(..=end).collect();
            line.pop();
            self.line(stream, &line);
        }
    }
}

/// `text` without ANSI colour sequences (`ESC [ … m`).
fn strip_colour(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for end in chars.by_ref() {
                if end.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn red_gates_are_read_from_verify_lines_split_anywhere_and_coloured_or_not() {
        let mut run = FirstRun::default();
        run.chunk(Stream::Out, b"GATE work-evidence FAIL commits=0\nGATE li");
        run.chunk(
            Stream::Out,
            b"nt FAIL exit=1 duration=0s\nGATE a PASS exit=0\n",
        );
        run.chunk(
            Stream::Out,
            b"GATE \x1b[31mslow\x1b[0m TIMEOUT exit=124\nGATE b SKIP reason=needs",
        );
        run.finish();
        assert_eq!(run.red, ["lint", "slow"]);
    }
}
