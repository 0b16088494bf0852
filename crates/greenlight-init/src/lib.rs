//! The drafter behind `greenlight init`: scan a repository and draft the verify.yaml gates it
//! already believes in, each saying where it came from.
//!
//! Sources are read in a fixed order of authority: CI workflow `run:` steps, `package.json`
//! scripts, Makefile targets, justfile recipes, tox/nox environments, and last the defaults of
//! a language manifest (`Cargo.toml`, `pyproject.toml`, `go.mod`). A lower source adds a gate
//! only when nothing above already runs the same thing, and a manifest's defaults are used
//! only for an ecosystem no explicit command covers: the repository's own words beat guesses.
//!
//! The one rule that keeps it simple: nothing that might change the outside world, install or
//! fetch becomes a gate ([`classify`], followed through recipes and prerequisites), no gate
//! repeats what another runs, and every gate says where it came from; what is left out says
//! why.

mod classify;
mod error;
mod inputs;
mod keys;
mod make;
mod manifest;
mod node;
mod options;
mod plan;
mod python;
mod render;
mod runnable;
mod setup;
mod workflow;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use classify::{CommandClass, Kind};
use greenlight_proc::shell;

pub use error::Error;
pub use options::{DraftOptions, options_for};
pub use plan::{GatePlan, plan_v2};
pub use render::{render_v1, render_v1_with, render_v2, setup_note, validate_id};

/// One drafted gate, ready to be written into a verify.yaml.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftGate {
    /// Unique gate id matching `^[a-z0-9][a-z0-9-]{0,31}$`, never a reserved id.
    pub id: String,
    /// One-line shell command, free of double quotes and backslashes so that it round-trips
    /// through verify.yaml v1's one-line double-quoted scalar in every runner.
    pub command: String,
    /// `timeoutSec` to write, when the source said how long the step may take.
    pub timeout_sec: Option<u32>,
    /// Where the gate came from, e.g. `.github/workflows/ci.yml job test step 3`.
    pub source: String,
    /// The setup the gate needs before it can pass here, when it is missing.
    pub setup: Option<Setup>,
}

/// A setup step a gate needs first, because what it prepares is missing here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// The command that prepares it (`npm ci`, `make requirements`).
    pub command: String,
    /// What is missing (`node_modules is absent here`).
    pub why: String,
}

/// A command the scan found but did not turn into a gate, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Where the command was found.
    pub source: String,
    /// The command (possibly multi-line, as found), or empty when a whole file was skipped.
    pub command: String,
    /// Why it is not a gate.
    pub reason: String,
}

/// The result of a scan: gates in run order, and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Draft {
    /// Gates in the order they should run (quick checks first).
    pub gates: Vec<DraftGate>,
    /// Commands found but not proposed.
    pub skipped: Vec<Skipped>,
}

/// A command some source proposes, before ordering, de-duplication and ids.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    /// Preferred id before sanitising (`lint`, `test-py312`).
    pub hint: String,
    pub command: String,
    pub timeout_sec: Option<u32>,
    pub source: String,
    /// True for a manifest default: used only when its ecosystem is otherwise uncovered.
    pub fallback: bool,
    /// Authority of the source: 0 for CI workflows, then package.json, Makefile, justfile,
    /// tox/nox, manifests. A candidate is redundant only against a gate of a stronger tier:
    /// two CI steps that both run `cargo test` (a matrix, say) are both kept.
    pub tier: u8,
}

/// Collects candidates and skips while sources are scanned.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub candidates: Vec<Candidate>,
    pub skipped: Vec<Skipped>,
}

impl Found {
    pub(crate) fn skip(
        &mut self,
        source: impl Into<String>,
        command: impl Into<String>,
        reason: impl Into<String>,
    ) {
        self.skipped.push(Skipped {
            source: source.into(),
            command: command.into(),
            reason: reason.into(),
        });
    }
}

/// Reads one source file (manifest, workflow, task file) the way every config file is read:
/// non-blocking, regular files only, at most 1 MiB. `Ok(None)` when it does not exist; `Err`
/// says why it cannot be used (a FIFO, a symlink to a device, too large, unreadable).
pub(crate) fn read_source(path: &Path) -> Result<Option<String>, String> {
    match greenlight_gate::file::read_config_file(path) {
        Ok(Some(bytes)) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Ok(None) => Ok(None),
        Err(e) => Err(format!("not read: {}", e.reason())),
    }
}

/// Longest timeout verify.yaml v1 accepts (`timeoutSec` 1..7200).
const MAX_TIMEOUT_SEC: u32 = 7200;

/// Which programs a gate may call where `init` runs: a drafted gate whose program is missing
/// could never pass, so it is listed as not drafted instead.
#[derive(Debug, Clone)]
pub enum Programs {
    /// Look each name up in this `PATH` (as the front end read the process environment).
    Path(Option<std::ffi::OsString>),
    /// Every program exists (for drafting on behalf of another machine, and for tests).
    All,
}

impl Programs {
    /// True when `name` (no slash) is an executable file on the path.
    pub fn has(&self, name: &str) -> bool {
        match self {
            Programs::All => true,
            Programs::Path(path) => path.as_ref().is_some_and(|paths| {
                std::env::split_paths(paths).any(|dir| {
                    use std::os::unix::fs::PermissionsExt as _;
                    std::fs::metadata(dir.join(name))
                        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                })
            }),
        }
    }
}

/// Scans the repository at `root` and drafts its gates; `programs` answers "is this program
/// installed?".
///
/// Files that cannot be parsed are reported in [`Draft::skipped`] rather than failing the
/// scan; only an unreadable `root` is an error.
pub fn draft(root: &Path, programs: &Programs) -> Result<Draft, Error> {
    std::fs::read_dir(root).map_err(|source| Error::Read {
        path: root.to_path_buf(),
        source,
    })?;
    let ctx = keys::Context::load(root);
    let mut found = Found::default();
    for (file, reason) in &ctx.unreadable {
        found.skip(file, "", reason);
    }
    workflow::scan(root, &mut found);
    node::scan(root, &ctx, &mut found);
    make::scan(root, &ctx, &mut found);
    python::scan_task_runners(root, &mut found);
    python::scan_manifest(root, programs, &mut found);
    manifest::scan(root, &mut found);
    Ok(assemble(found, &ctx, root, programs))
}

/// Drops what is redundant or unsafe to write, orders by kind, and assigns unique ids.
fn assemble(found: Found, ctx: &keys::Context, root: &Path, programs: &Programs) -> Draft {
    let setups = setup::Setups::find(root, ctx, &found);
    let Found {
        candidates,
        skipped,
    } = found;
    let mut chosen = Selection {
        skipped,
        ..Selection::default()
    };
    let (explicit, fallbacks): (Vec<_>, Vec<_>) = candidates.into_iter().partition(|c| !c.fallback);
    for c in explicit {
        match judge(c, ctx, root, programs, &setups) {
            Ok(gate) => chosen.offer(gate),
            Err(skip) => chosen.skipped.push(skip),
        }
    }
    // Snapshot before any default is taken, so two defaults of one manifest both stay.
    let explicit_ecosystems: HashSet<keys::Ecosystem> = chosen
        .covered
        .keys()
        .filter_map(|k| keys::ecosystem_of(k))
        .collect();
    for c in fallbacks {
        let eco = ctx.keys_of(&c.command).ecosystems();
        if !eco.iter().any(|e| explicit_ecosystems.contains(e)) {
            match judge(c, ctx, root, programs, &setups) {
                Ok(gate) => chosen.offer(gate),
                Err(skip) => chosen.skipped.push(skip),
            }
        }
    }
    let Selection {
        mut accepted,
        mut skipped,
        ..
    } = chosen;
    drop_aggregates(&mut accepted, &mut skipped);
    // Cheap kinds first; within a kind, the order found (CI's own order first).
    accepted.sort_by_key(|a| a.kind);

    let mut ids: HashSet<String> = HashSet::new();
    let gates = accepted
        .into_iter()
        .map(|a| {
            let c = a.candidate;
            let id = render::unique_id(&c.hint, &ids);
            ids.insert(id.clone());
            DraftGate {
                id,
                command: c.command,
                timeout_sec: c.timeout_sec.map(|t| t.clamp(1, MAX_TIMEOUT_SEC)),
                source: c.source,
                setup: a.setup,
            }
        })
        .collect();
    // One line per finding: the same file or step can be met by several sources (a pyproject
    // read for tox and for its tools, a command expanded per matrix value).
    let mut seen: HashSet<(String, String, String)> = HashSet::new();
    skipped.retain(|s| seen.insert((s.source.clone(), s.command.clone(), s.reason.clone())));
    Draft { gates, skipped }
}

/// Whether one candidate can be a gate at all, on its own: writable in verify.yaml, judged by
/// its own exit code, safe to repeat (through everything it runs), and runnable here (or with
/// its setup named). `Err` is the line for "not drafted".
fn judge(
    c: Candidate,
    ctx: &keys::Context,
    root: &Path,
    programs: &Programs,
    setups: &setup::Setups,
) -> Result<Accepted, Skipped> {
    let command = match render::one_line_safe(&c.command) {
        Ok(command) => command,
        Err(reason) => return Err(c.skipped(c.command.clone(), reason)),
    };
    if classify::has_pipe(&command) {
        let reason = "pipes its output into another command, so the exit code judged would be \
                      the last command's, not the check's";
        return Err(c.skipped(command, reason.to_string()));
    }
    let kind = match deep_class(ctx, &command) {
        Ok(kind) => kind,
        Err(reason) => return Err(c.skipped(command, reason)),
    };
    let setup = setups.needed(ctx, &command, programs);
    let provided = |name: &str| setup.is_some() && setups.provides(name);
    if let Some(reason) = runnable::cannot_run(&command, root, programs, &provided) {
        return Err(c.skipped(command, reason));
    }
    Ok(Accepted {
        kind,
        keys: ctx.keys_of(&command),
        setup,
        candidate: Candidate { command, ..c },
    })
}

impl Candidate {
    fn skipped(&self, command: String, reason: String) -> Skipped {
        Skipped {
            source: self.source.clone(),
            command,
            reason,
        }
    }
}

/// The gates taken so far and what they run, so that a later candidate that repeats them is
/// dropped with the name of the gate that is kept.
#[derive(Default)]
struct Selection {
    accepted: Vec<Accepted>,
    skipped: Vec<Skipped>,
    /// Each key with the strongest tier that runs it, and the command of that gate.
    covered: HashMap<String, (u8, String)>,
    /// Each gate's [`keys::canonical`] command, and the command as kept.
    commands: HashMap<String, String>,
}

impl Selection {
    fn offer(&mut self, gate: Accepted) {
        let c = &gate.candidate;
        let canonical = keys::canonical(&c.command);
        if let Some(same) = self.commands.get(&canonical) {
            let reason = format!("runs the same as the gate `{same}`, which is kept");
            self.skipped.push(c.skipped(c.command.clone(), reason));
            return;
        }
        let by = self.already_run_by(&gate.keys, c.tier);
        if !by.is_empty() {
            let by: Vec<String> = by.iter().map(|b| format!("`{b}`")).collect();
            let reason = format!(
                "already run by {}, from a source that says more (CI, then package.json, then \
                 Makefile)",
                by.join(", ")
            );
            self.skipped.push(c.skipped(c.command.clone(), reason));
            return;
        }
        self.commands.insert(canonical, c.command.clone());
        for key in &gate.keys.all {
            let entry = self
                .covered
                .entry(key.clone())
                .or_insert((c.tier, c.command.clone()));
            if c.tier < entry.0 {
                *entry = (c.tier, c.command.clone());
            }
        }
        self.accepted.push(gate);
    }

    /// The gates of a stronger tier that already run what `keys` runs: the one running the
    /// command itself, else those that together run every leaf; empty when something is new.
    fn already_run_by(&self, keys: &keys::Keys, tier: u8) -> Vec<String> {
        let stronger = |key: &String| {
            self.covered
                .get(key)
                .filter(|(t, _)| *t < tier)
                .map(|(_, by)| by.clone())
        };
        if let Some(by) = keys.primary.as_ref().and_then(stronger) {
            return vec![by];
        }
        let leaves: Vec<Option<String>> = keys.leaves.iter().map(stronger).collect();
        if leaves.is_empty() || leaves.iter().any(Option::is_none) {
            return Vec::new();
        }
        let mut by: Vec<String> = leaves.into_iter().flatten().collect();
        by.dedup();
        by
    }
}

/// A candidate taken as a gate, with what it runs.
struct Accepted {
    kind: Kind,
    keys: keys::Keys,
    setup: Option<Setup>,
    candidate: Candidate,
}

/// The kind of check `command` is, judged by everything it finally runs (a make target's
/// recipe and prerequisites, a script's body); `Err` says why it is no gate: a line it runs
/// installs, fetches, rewrites files or reaches outside the worktree.
fn deep_class(ctx: &keys::Context, command: &str) -> Result<Kind, String> {
    let mut kind = match classify::classify(command) {
        CommandClass::Check(kind) => kind,
        CommandClass::Setup(r) | CommandClass::Installs(r) | CommandClass::Writes(r) => {
            return Err(r.to_string());
        }
        CommandClass::Refused(r) => return Err(r),
    };
    for leaf in ctx.leaves(command).iter().filter(|l| !l.via.is_empty()) {
        let through = || format!("runs `{}` (through {})", leaf.command, leaf.via.join(" → "));
        match classify::classify(&leaf.command) {
            CommandClass::Check(k) => kind = kind.max(k),
            CommandClass::Setup(_) => {}
            CommandClass::Installs(r) | CommandClass::Writes(r) => {
                return Err(format!("{}, which {r}", through()));
            }
            CommandClass::Refused(r) => return Err(format!("{}: {r}", through())),
        }
    }
    Ok(kind)
}

/// Drops a task that only runs other drafted gates (`check: lint typecheck`, a `ci` script
/// running `npm run lint && npm test`): the gates it calls say more, one verdict each.
fn drop_aggregates(accepted: &mut Vec<Accepted>, skipped: &mut Vec<Skipped>) {
    loop {
        let found = (0..accepted.len()).find_map(|i| {
            let me = &accepted[i];
            let others: Vec<&Accepted> = accepted
                .iter()
                .enumerate()
                .filter(|(j, other)| {
                    *j != i
                        && other.keys.primary.as_ref().is_some_and(|p| {
                            me.keys.all.contains(p) && me.keys.primary.as_ref() != Some(p)
                        })
                })
                .map(|(_, other)| other)
                .collect();
            let covered = !others.is_empty()
                && me
                    .keys
                    .leaves
                    .iter()
                    .all(|leaf| others.iter().any(|o| o.keys.all.contains(leaf)));
            covered.then(|| {
                let names: Vec<String> = others
                    .iter()
                    .map(|o| format!("`{}`", o.candidate.command))
                    .collect();
                (i, names.join(", "))
            })
        });
        let Some((i, names)) = found else {
            return;
        };
        let me = accepted.remove(i);
        skipped.push(Skipped {
            source: me.candidate.source,
            command: me.candidate.command,
            reason: format!("it only runs what the gates {names} run, one verdict each"),
        });
    }
}

/// A short id hint for a command: the script, target or subcommand of the segment that does
/// the checking (`pytest || exit 1` is `pytest`, never `exit`); `check` when nothing says more.
pub(crate) fn hint_from_command(command: &str) -> String {
    let segs = shell::segments(command);
    let is_check = |s: &String| matches!(classify::classify(s), classify::CommandClass::Check(_));
    let plumbing = |s: &String| {
        matches!(
            shell::words(s).first().map(|p| shell::program(p)),
            Some(
                "cd" | "export"
                    | "exit"
                    | "set"
                    | "true"
                    | "false"
                    | "echo"
                    | "printf"
                    | ":"
                    | "source"
                    | "."
                    | "unset"
                    | "sleep"
                    | "return"
            ) | None
        )
    };
    let chosen = segs
        .iter()
        .rev()
        .find(|s| is_check(s) && !plumbing(s))
        .or_else(|| segs.iter().find(|s| !plumbing(s)));
    let Some(segment) = chosen else {
        return "check".to_string();
    };
    hint_from_words(&shell::words(segment))
}

fn hint_from_words(w: &[String]) -> String {
    let w: Vec<String> = w.iter().skip_while(|x| *x == "!").cloned().collect();
    // `[ -s diff.txt ]` and `test -f x` check a file: the file names the gate.
    if matches!(w.first().map(String::as_str), Some("[" | "[[" | "test"))
        && let Some(file) = w
            .iter()
            .skip(1)
            .rev()
            .find(|x| !x.starts_with('-') && !x.starts_with(']'))
    {
        let name = shell::program(file);
        return name.split('.').next().unwrap_or(name).to_string();
    }
    let w = w.as_slice();
    let non_flags: Vec<&str> = w
        .iter()
        .map(String::as_str)
        .filter(|x| !x.starts_with('-') && !x.starts_with('+'))
        .collect();
    let first = non_flags
        .first()
        .map(|p| shell::program(p))
        .unwrap_or("check");
    let second = non_flags.get(1).copied();
    let flag_value = |flag: &str| {
        w.iter()
            .position(|x| x == flag)
            .and_then(|i| w.get(i + 1))
            .cloned()
    };
    match first {
        "npm" | "pnpm" | "yarn" | "bun" => match second {
            Some("run" | "run-script") => non_flags
                .get(2)
                .map_or("run".to_string(), |s| (*s).to_string()),
            Some("t") => "test".to_string(),
            Some("exec") => non_flags
                .get(2)
                .map_or("exec".to_string(), |s| shell::program(s).to_string()),
            Some(s) => s.to_string(),
            None => first.to_string(),
        },
        "npx" | "pnpx" | "bunx" => {
            second.map_or(first.to_string(), |s| shell::program(s).to_string())
        }
        "make" | "just" | "cargo" | "go" => second.map_or(first.to_string(), str::to_string),
        "uv" | "poetry" | "pdm" | "hatch" | "pipenv" if second == Some("run") => hint_from_words(
            &w.iter()
                .skip_while(|x| x.as_str() != "run")
                .skip(1)
                .cloned()
                .collect::<Vec<_>>(),
        ),
        "python" | "python3"
            if second == Some("-m") || w.get(1).map(String::as_str) == Some("-m") =>
        {
            w.get(2).cloned().unwrap_or_else(|| "python".to_string())
        }
        "tox" => flag_value("-e").unwrap_or_else(|| "tox".to_string()),
        "nox" => flag_value("-s")
            .or_else(|| flag_value("--session"))
            .unwrap_or_else(|| "nox".to_string()),
        "ruff" | "mypy" | "pytest" | "eslint" | "tsc" => first.to_string(),
        // An interpreter running a script: the script says what the step does.
        "sh" | "bash" | "zsh" | "dash" | "python" | "python3" | "node" | "deno" | "ruby"
        | "perl"
            if second.is_some() =>
        {
            let script = shell::program(second.unwrap_or_default());
            script
                .rsplit_once('.')
                .map_or(script, |(stem, _)| stem)
                .to_string()
        }
        other => other
            .rsplit_once('.')
            .map_or(other, |(stem, _)| stem)
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn draft_of(files: &[(&str, &str)]) -> Draft {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, text).unwrap();
        }
        draft(dir.path(), &Programs::All).unwrap()
    }

    /// `check: lint typecheck` ran both again after their own gates.
    #[test]
    fn a_target_that_only_runs_other_gates_is_dropped_for_them() {
        let d = draft_of(&[(
            "Makefile",
            "check: lint typecheck\nlint:\n\truff check .\ntypecheck:\n\tmypy src\n",
        )]);
        let commands: Vec<&str> = d.gates.iter().map(|g| g.command.as_str()).collect();
        assert_eq!(commands, ["make lint", "make typecheck"]);
        let dropped = d
            .skipped
            .iter()
            .find(|s| s.command == "make check")
            .unwrap();
        assert_eq!(
            dropped.reason,
            "it only runs what the gates `make lint`, `make typecheck` run, one verdict each"
        );
        // With a line of its own, it checks more than they do, and stays.
        let d = draft_of(&[("Makefile", "check: lint\n\tpytest\nlint:\n\truff check .\n")]);
        assert!(d.gates.iter().any(|g| g.command == "make check"), "{d:?}");
    }

    /// A make prerequisite that installs leaves the target out, whatever source proposed it;
    /// a target that only `cd`s and `echo`s around its check stays a gate.
    #[test]
    fn installing_through_a_prerequisite_leaves_the_target_out() {
        let d = draft_of(&[(
            "Makefile",
            "deps:\n\tpip install -r requirements.txt\ntest: deps\n\tpytest\nlint:\n\techo linting\n\tcd src && ruff check .\n",
        )]);
        let commands: Vec<&str> = d.gates.iter().map(|g| g.command.as_str()).collect();
        assert_eq!(commands, ["make lint"]);
        let test = d.skipped.iter().find(|s| s.command == "make test").unwrap();
        assert_eq!(
            test.reason,
            "runs `pip install -r requirements.txt` (through make test → make deps), which installs packages"
        );
    }

    #[test]
    fn hints_name_the_script_target_or_subcommand() {
        assert_eq!(hint_from_command("pnpm run test:unit"), "test:unit");
        assert_eq!(hint_from_command("cd web && npm test"), "test");
        assert_eq!(
            hint_from_command("cargo +nightly clippy --workspace"),
            "clippy"
        );
        assert_eq!(hint_from_command("uv run pytest -q"), "pytest");
        assert_eq!(hint_from_command("tox -e lint"), "lint");
        assert_eq!(hint_from_command("./scripts/check-links.sh"), "check-links");
        assert_eq!(hint_from_command("python -m mypy src"), "mypy");
        assert_eq!(hint_from_command("pytest -q || exit 1"), "pytest");
        assert_eq!(hint_from_command("sh ci/check.sh"), "check");
        assert_eq!(
            hint_from_command("python scripts/lint_docs.py"),
            "lint_docs"
        );
        assert_eq!(hint_from_command("exit 0"), "check");
        assert_eq!(
            hint_from_command("cat diff.txt && ! [ -s diff.txt ]"),
            "diff"
        );
    }
}
