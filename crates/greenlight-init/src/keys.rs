//! What a command runs, as comparable keys (`cargo:test`, `script:lint`, `make:check`), so that
//! a lower source never adds a gate that a higher one already runs.
//!
//! The one rule: a task-runner call (`make test`, `npm run lint`) is expanded into the commands
//! of its recipe (a make target's prerequisites first), so `make test` and a CI step `cargo
//! test` are seen as the same work, and what a task finally runs ([`Context::leaves`]) decides
//! whether it installs. Expansion follows at most [`MAX_DEPTH`] levels, so a recipe that calls
//! itself ends. Coverage wrappers are seen through: `coverage run -m unittest` runs the
//! `unittest` suite, as `python -m unittest` does.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use greenlight_proc::shell::{program, segments, words};

/// How deep task-runner calls are followed (a recipe calling a script calling a target).
const MAX_DEPTH: usize = 3;

/// Most commands one task is followed into: a Makefile whose targets each name dozens of
/// prerequisites would otherwise multiply at every level.
const MAX_LEAVES: usize = 1000;

/// The toolchain a key belongs to; a manifest's defaults are skipped for an ecosystem that an
/// explicit command already exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Ecosystem {
    Rust,
    Go,
    Python,
    Node,
}

/// The ecosystem a key belongs to, if any.
pub(crate) fn ecosystem_of(key: &str) -> Option<Ecosystem> {
    let prefix = key.split(':').next().unwrap_or("");
    match prefix {
        "cargo" => Some(Ecosystem::Rust),
        "go" => Some(Ecosystem::Go),
        "py" | "tox" | "nox" => Some(Ecosystem::Python),
        "script" | "workspace-script" | "tool" => Some(Ecosystem::Node),
        _ => None,
    }
}

/// The keys of one command.
#[derive(Debug, Default)]
pub(crate) struct Keys {
    /// The key of the command itself (its first check segment).
    pub primary: Option<String>,
    /// Every key, task-runner calls and what they expand to.
    pub all: Vec<String>,
    /// Keys that are not task-runner calls: the work actually done.
    pub leaves: Vec<String>,
}

impl Keys {
    /// The ecosystems this command exercises.
    pub(crate) fn ecosystems(&self) -> HashSet<Ecosystem> {
        self.all.iter().filter_map(|k| ecosystem_of(k)).collect()
    }
}

/// One command a task finally runs, and the task-runner calls that lead to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Leaf {
    /// The calls from the outside in (`make check`, `make requirements`); empty when the
    /// command itself runs it.
    pub via: Vec<String>,
    pub command: String,
}

/// The package manager that runs a Node project's scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PackageManager {
    Npm,
    Pnpm,
    Yarn,
    Bun,
}

impl PackageManager {
    pub(crate) fn name(self) -> &'static str {
        match self {
            PackageManager::Npm => "npm",
            PackageManager::Pnpm => "pnpm",
            PackageManager::Yarn => "yarn",
            PackageManager::Bun => "bun",
        }
    }
}

/// Task-runner definitions of the repository, loaded once and shared by every source.
#[derive(Debug, Default)]
pub(crate) struct Context {
    /// Root `package.json` scripts in file order; `None` when there is no readable file.
    pub scripts: Option<Vec<(String, String)>>,
    /// Why `package.json` could not be used, when it exists but is broken.
    pub package_json_error: Option<String>,
    /// The root `package.json` itself (for `workspaces`, `packageManager`).
    pub package_json: Option<serde_json::Value>,
    pub package_manager: Option<PackageManager>,
    /// Makefile targets in file order with their prerequisites and recipe lines, and the
    /// file's name.
    pub make_targets: Vec<super::make::MakeTarget>,
    pub makefile_name: Option<String>,
    /// justfile recipes in file order: name, required-parameter flag, body lines.
    pub just_recipes: Vec<(String, bool, Vec<String>)>,
    pub justfile_name: Option<String>,
    /// Files that exist but could not be read (a FIFO, a device, too large), with the reason.
    pub unreadable: Vec<(String, String)>,
}

impl Context {
    /// Reads `package.json`, the Makefile and the justfile at `root`; what is missing or broken
    /// is left empty (and the reason kept for the report).
    pub(crate) fn load(root: &Path) -> Context {
        let mut ctx = Context::default();
        let mut read = |name: &str| match super::read_source(&root.join(name)) {
            Ok(text) => text,
            Err(reason) => {
                ctx.unreadable.push((name.to_string(), reason));
                None
            }
        };
        let package_json = read("package.json");
        let makefile = ["GNUmakefile", "Makefile", "makefile"]
            .into_iter()
            .find_map(|name| read(name).map(|t| (name, t)));
        let justfile = ["justfile", "Justfile", ".justfile"]
            .into_iter()
            .find_map(|name| read(name).map(|t| (name, t)));
        if let Some(text) = package_json {
            match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(value) => {
                    let scripts = value
                        .get("scripts")
                        .and_then(|s| s.as_object())
                        .map(|m| {
                            m.iter()
                                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                                .collect()
                        })
                        .unwrap_or_default();
                    ctx.scripts = Some(scripts);
                    ctx.package_manager = Some(detect_package_manager(root, &value));
                    ctx.package_json = Some(value);
                }
                Err(e) => {
                    // serde_json's own text repeats the position, with column 0 at the start
                    // of a line; say it once, counting columns from 1.
                    let what = e.to_string();
                    let what = what.split(" at line ").next().unwrap_or_default();
                    ctx.package_json_error = Some(format!(
                        "not valid JSON at line {} column {}: {what}",
                        e.line(),
                        e.column().max(1)
                    ))
                }
            }
        }
        if let Some((name, text)) = makefile {
            ctx.make_targets = super::make::parse_makefile(&text);
            ctx.makefile_name = Some(name.to_string());
        }
        if let Some((name, text)) = justfile {
            ctx.just_recipes = super::make::parse_justfile(&text);
            ctx.justfile_name = Some(name.to_string());
        }
        ctx
    }

    fn script(&self, name: &str) -> Option<&str> {
        self.scripts
            .as_ref()?
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.as_str())
    }

    /// The keys of `command`, expanding task-runner calls through this repository's recipes.
    pub(crate) fn keys_of(&self, command: &str) -> Keys {
        let mut keys = Keys::default();
        self.collect(command, 0, &mut keys);
        keys
    }

    fn collect(&self, command: &str, depth: usize, keys: &mut Keys) {
        for seg in segments(command) {
            let w = words(&seg);
            let Some((key, expansion)) = self.key_of_words(&w) else {
                continue;
            };
            if keys.primary.is_none() && depth == 0 {
                keys.primary = Some(key.clone());
            }
            if keys.all.contains(&key) {
                continue;
            }
            keys.all.push(key.clone());
            match expansion {
                Some(body) if depth < MAX_DEPTH => {
                    let before = keys.leaves.len();
                    self.collect(&body, depth + 1, keys);
                    if keys.leaves.len() == before {
                        keys.leaves.push(key);
                    }
                }
                _ => keys.leaves.push(key),
            }
        }
    }

    /// Every command `command` finally runs, task-runner calls followed into their recipes
    /// (a make target's prerequisites first), each with the calls that led to it.
    pub(crate) fn leaves(&self, command: &str) -> Vec<Leaf> {
        let mut out = Vec::new();
        self.walk(command, &mut Vec::new(), &mut out);
        out
    }

    fn walk(&self, command: &str, via: &mut Vec<String>, out: &mut Vec<Leaf>) {
        for seg in segments(command) {
            if out.len() >= MAX_LEAVES {
                return;
            }
            let expansion = self
                .key_of_words(&words(&seg))
                .and_then(|(_, body)| body)
                .filter(|_| via.len() < MAX_DEPTH && !via.contains(&seg));
            match expansion {
                Some(body) => {
                    via.push(seg);
                    self.walk(&body, via, out);
                    via.pop();
                }
                None => out.push(Leaf {
                    via: via.clone(),
                    command: seg,
                }),
            }
        }
    }

    /// The key of one segment and, for a task-runner call, the recipe it runs.
    fn key_of_words(&self, w: &[String]) -> Option<(String, Option<String>)> {
        let first = program(w.first()?).to_string();
        let rest: Vec<&str> = w[1..]
            .iter()
            .map(String::as_str)
            .filter(|x| !x.starts_with('-') && !x.starts_with('+'))
            .collect();
        let flags: Vec<&str> = w[1..]
            .iter()
            .map(String::as_str)
            .filter(|x| x.starts_with('-'))
            .collect();
        let flag_value = |flag: &str| {
            w.iter()
                .position(|x| x == flag)
                .and_then(|i| w.get(i + 1))
                .cloned()
        };
        match first.as_str() {
            "npm" | "pnpm" | "yarn" | "bun" => {
                let name = match rest.first().copied() {
                    Some("run" | "run-script") => rest.get(1).copied()?,
                    Some("t") => "test",
                    Some("exec") => {
                        return rest.get(1).map(|t| (format!("tool:{}", program(t)), None));
                    }
                    Some(other) => other,
                    None => return None,
                };
                let recursive = flags.iter().any(|f| {
                    matches!(*f, "-r" | "--recursive" | "--workspaces" | "-ws")
                        || f.starts_with("--filter")
                });
                if recursive {
                    Some((format!("workspace-script:{name}"), None))
                } else {
                    // npm runs `preX` before and `postX` after `X` on its own.
                    let body = self.script(name).map(|body| {
                        let hook = |h: &str| {
                            self.script(&format!("{h}{name}"))
                                .filter(|_| first == "npm")
                                .map(str::to_string)
                        };
                        hook("pre")
                            .into_iter()
                            .chain([body.to_string()])
                            .chain(hook("post"))
                            .collect::<Vec<_>>()
                            .join(" && ")
                    });
                    Some((format!("script:{name}"), body))
                }
            }
            "npx" | "pnpx" | "bunx" => rest.first().map(|t| (format!("tool:{}", program(t)), None)),
            "make" | "gmake" => {
                // `make -C docs html` and `make -f other.mk x` run another Makefile's target:
                // its recipe is not this Makefile's.
                let mut other_makefile = false;
                let mut target = None;
                let mut args = w[1..].iter();
                while let Some(arg) = args.next() {
                    if matches!(arg.as_str(), "-C" | "-f" | "--directory" | "--file") {
                        other_makefile = true;
                        args.next();
                    } else if arg.starts_with("-C") || arg.starts_with("--directory=") {
                        other_makefile = true;
                    } else if !arg.starts_with('-') && !arg.contains('=') && target.is_none() {
                        target = Some(arg.as_str());
                    }
                }
                let target = target?;
                let body = self
                    .make_targets
                    .iter()
                    .filter(|_| !other_makefile)
                    .find(|t| t.name == target)
                    .map(|t| {
                        t.prerequisites
                            .iter()
                            .filter(|p| self.make_targets.iter().any(|t| t.name == **p))
                            .map(|p| format!("make {p}"))
                            .chain(t.recipe.iter().cloned())
                            .collect::<Vec<_>>()
                            .join(" && ")
                            .replace("$(MAKE)", "make")
                            .replace("${MAKE}", "make")
                    });
                if other_makefile {
                    return Some((format!("cmd:{}", w.join(" ")), None));
                }
                Some((format!("make:{target}"), body))
            }
            "just" => {
                let recipe = rest.first()?;
                let body = self
                    .just_recipes
                    .iter()
                    .find(|(n, _, _)| n == recipe)
                    .map(|(_, _, lines)| lines.join(" && "));
                Some((format!("just:{recipe}"), body))
            }
            "cargo" => {
                let sub = match *rest.first()? {
                    "nextest" | "t" | "llvm-cov" | "tarpaulin" => "test",
                    "b" => "build",
                    "c" => "check",
                    other => other,
                };
                Some((format!("cargo:{sub}"), None))
            }
            "go" => rest.first().map(|s| (format!("go:{s}"), None)),
            "tox" => Some((
                format!(
                    "tox:{}",
                    flag_value("-e").unwrap_or_else(|| "*".to_string())
                ),
                None,
            )),
            "nox" => Some((
                format!(
                    "nox:{}",
                    flag_value("-s")
                        .or_else(|| flag_value("--session"))
                        .unwrap_or_else(|| "*".to_string())
                ),
                None,
            )),
            "uv" | "poetry" | "pdm" | "hatch" | "pipenv" if rest.first() == Some(&"run") => {
                let inner: Vec<String> = w
                    .iter()
                    .skip_while(|x| x.as_str() != "run")
                    .skip(1)
                    .cloned()
                    .collect();
                self.key_of_words(&inner)
            }
            "python" | "python3" if w.get(1).map(String::as_str) == Some("-m") => {
                if w.get(2).map(String::as_str) == Some("coverage") {
                    return self.key_of_words(&w[2..]);
                }
                w.get(2).map(|m| (format!("py:{m}"), None))
            }
            // `coverage run -m unittest` runs the suite `python -m unittest` runs.
            "coverage" if rest.first() == Some(&"run") => {
                let module = w.iter().position(|x| x == "-m").and_then(|i| w.get(i + 1));
                match module {
                    Some(m) => Some((format!("py:{m}"), None)),
                    None => Some((format!("cmd:{}", w.join(" ")), None)),
                }
            }
            "pytest" | "ruff" | "mypy" | "pyright" | "flake8" | "pylint" | "black" | "isort" => {
                Some((format!("py:{first}"), None))
            }
            "cd" | "export" => None,
            _ => Some((format!("cmd:{}", w.join(" ")), None)),
        }
    }
}

/// A command written the way its twins are, for telling two gates that run the same thing
/// apart from two that do not: words joined by one space, and a package manager's spellings
/// of one script (`npm test`, `npm t`, `npm run-script test`) as `npm run test`. Only a
/// one-segment command is respelled; a chain is compared as written.
pub(crate) fn canonical(command: &str) -> String {
    let segs = segments(command);
    let [only] = segs.as_slice() else {
        return command.split_whitespace().collect::<Vec<_>>().join(" ");
    };
    let w = words(only);
    let respelled = match w.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [
            pm @ ("npm" | "pnpm" | "yarn" | "bun"),
            "test" | "t",
            rest @ ..,
        ] => Some(format!("{pm} run test {}", rest.join(" "))),
        [
            pm @ ("npm" | "pnpm" | "yarn" | "bun"),
            "run-script",
            rest @ ..,
        ] => Some(format!("{pm} run {}", rest.join(" "))),
        _ => None,
    };
    respelled.map_or_else(
        || command.split_whitespace().collect::<Vec<_>>().join(" "),
        |r| r.trim_end().to_string(),
    )
}

/// The package manager a package at `root` uses: its `packageManager` field, else its lockfile,
/// else npm.
pub(crate) fn detect_package_manager(
    root: &Path,
    package_json: &serde_json::Value,
) -> PackageManager {
    if let Some(pm) = package_json.get("packageManager").and_then(|v| v.as_str()) {
        let name = pm.split('@').next().unwrap_or("");
        match name {
            "pnpm" => return PackageManager::Pnpm,
            "yarn" => return PackageManager::Yarn,
            "bun" => return PackageManager::Bun,
            "npm" => return PackageManager::Npm,
            _ => {}
        }
    }
    let lockfiles: BTreeMap<&str, PackageManager> = [
        ("pnpm-lock.yaml", PackageManager::Pnpm),
        ("yarn.lock", PackageManager::Yarn),
        ("bun.lockb", PackageManager::Bun),
        ("bun.lock", PackageManager::Bun),
        ("package-lock.json", PackageManager::Npm),
    ]
    .into_iter()
    .collect();
    lockfiles
        .iter()
        .find(|(file, _)| root.join(file).is_file())
        .map_or(PackageManager::Npm, |(_, pm)| *pm)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn context(makefile: &str) -> Context {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Makefile"), makefile).unwrap();
        Context::load(dir.path())
    }

    /// `check: requirements` runs `requirements` first: its pip line is one of check's leaves,
    /// reached through both targets.
    #[test]
    fn leaves_follow_prerequisites_and_recipes_and_say_the_way_there() {
        let ctx = context(
            "requirements:\n\tpython -m pip install -e .\ncheck: requirements\n\truff check .\n",
        );
        let leaves = ctx.leaves("make check");
        let pip = leaves
            .iter()
            .find(|l| l.command == "python -m pip install -e .")
            .unwrap();
        assert_eq!(pip.via, ["make check", "make requirements"]);
        assert!(
            leaves
                .iter()
                .any(|l| l.command == "ruff check ." && l.via == ["make check"])
        );
        // A target that names itself ends.
        let ctx = context("loop: loop\n\tmake loop\n");
        assert!(!ctx.leaves("make loop").is_empty());
        // Wide prerequisites at every level end too, at a bound.
        let mut mk = String::new();
        for level in 0..4 {
            for i in 0..40 {
                let prereqs: Vec<String> = (0..40).map(|j| format!("t{}-{j}", level + 1)).collect();
                mk.push_str(&format!("t{level}-{i}: {}\n\ttrue\n", prereqs.join(" ")));
            }
        }
        let ctx = context(&mk);
        assert_eq!(ctx.leaves("make t0-0").len(), MAX_LEAVES);
    }

    /// npm runs `pretest` on its own before `test`: an install there is an install of `npm test`.
    #[test]
    fn npm_scripts_run_their_pre_and_post_hooks() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("package.json"),
            r#"{"scripts": {"pretest": "npm ci", "test": "jest", "posttest": "echo done"}}"#,
        )
        .unwrap();
        let ctx = Context::load(dir.path());
        let leaves: Vec<String> = ctx
            .leaves("npm test")
            .into_iter()
            .map(|l| l.command)
            .collect();
        assert_eq!(leaves, ["npm ci", "jest", "echo done"]);
    }

    #[test]
    fn make_in_another_directory_is_not_this_makefiles_target() {
        let ctx = context("html:\n\tpip install sphinx\n");
        assert_eq!(ctx.leaves("make html").len(), 1);
        assert_eq!(ctx.leaves("make html")[0].command, "pip install sphinx");
        for other in [
            "make -C docs html",
            "make -Cdocs html",
            "make -f docs.mk html",
        ] {
            let leaves = ctx.leaves(other);
            assert_eq!(leaves.len(), 1, "{other}");
            assert_eq!(leaves[0].command, other);
            assert_eq!(
                ctx.keys_of(other).primary,
                Some(format!("cmd:{other}")),
                "not the same work as this Makefile's `make html`"
            );
        }
    }

    #[test]
    fn coverage_runs_the_suite_it_wraps() {
        let ctx = Context::default();
        let key = |c: &str| ctx.keys_of(c).primary.unwrap();
        assert_eq!(
            key("coverage run --include=x/*.py -m unittest"),
            "py:unittest"
        );
        assert_eq!(key("python -m coverage run -m pytest"), "py:pytest");
        assert_eq!(key("python -m unittest -v"), "py:unittest");
        assert_eq!(key("cargo llvm-cov"), "cargo:test");
    }

    #[test]
    fn one_script_spelled_three_ways_is_one_command() {
        for spelling in ["npm test", "npm t", "npm run test", "npm run-script test"] {
            assert_eq!(canonical(spelling), "npm run test", "{spelling}");
        }
        assert_eq!(canonical("npm test -- --ci"), "npm run test -- --ci");
        assert_ne!(canonical("FOO=1 cargo test"), canonical("cargo test"));
        assert_eq!(canonical("cargo  test"), "cargo test");
    }
}
