//! The setup a drafted gate needs before it can pass here: a Node project whose dependencies
//! are not installed (`node_modules` absent), a Python tool the project installs not on PATH.
//!
//! The one rule: a gate whose setup is missing is still drafted (it is the project's own
//! check), with the one command that prepares it — the install step CI runs where CI has one,
//! else the one the lockfile names — so the user runs that once instead of reading exit 127
//! from every gate.

use std::path::{Path, PathBuf};

use super::classify::{self, CommandClass};
use super::keys::{Context, PackageManager, detect_package_manager};
use super::{Found, Programs, Setup};
use greenlight_proc::shell::{program, segments, words};

/// Programs a Python project's own setup (requirements, an editable install, `uv sync`)
/// puts on PATH; the usual gate tools.
const PYTHON_TOOLS: &[&str] = &[
    "pytest",
    "ruff",
    "mypy",
    "flake8",
    "black",
    "isort",
    "pylint",
    "pyright",
    "coverage",
    "sphinx-build",
    "tox",
    "nox",
    "stubtest",
    "pre-commit",
];

/// Names of a task that prepares a Python environment (`make requirements`).
const PYTHON_SETUP_TASKS: &[&str] = &[
    "requirements",
    "install",
    "deps",
    "dependencies",
    "setup",
    "venv",
    "dev",
    "bootstrap",
];

/// The setup commands this repository offers, found once per draft.
#[derive(Debug, Default)]
pub(crate) struct Setups {
    root: PathBuf,
    /// CI's own install steps, in file order (`npm ci`, `cd web && pnpm install`).
    ci_installs: Vec<String>,
    /// Installs the Python project and its tools, when the repository says how.
    python: Option<String>,
}

impl Setups {
    /// Reads the repository at `root`: its CI's install steps (already in `found`), its
    /// Makefile, its lockfiles.
    pub(crate) fn find(root: &Path, ctx: &Context, found: &Found) -> Setups {
        // CI's own install steps, in file order: skipped setup lines and `make requirements`
        // style steps (candidates whose recipe installs).
        let ci_installs: Vec<&str> = found
            .skipped
            .iter()
            .filter(|s| s.source.starts_with(".github/"))
            .map(|s| s.command.as_str())
            .chain(
                found
                    .candidates
                    .iter()
                    .filter(|c| c.tier == 0)
                    .map(|c| c.command.as_str()),
            )
            .filter(|c| !c.contains('\n'))
            .filter(|c| installs(ctx, c))
            .collect();
        let python_installers = [
            "pip", "pip3", "python", "python3", "uv", "poetry", "pdm", "hatch", "pipenv",
        ];
        let python = ci_installs
            .iter()
            .find(|c| {
                ctx.leaves(c)
                    .iter()
                    .any(|l| runs_program(&l.command, &python_installers))
            })
            .map(|c| (*c).to_string())
            .or_else(|| {
                ctx.make_targets
                    .iter()
                    .filter(|t| PYTHON_SETUP_TASKS.contains(&t.name.as_str()))
                    .find(|t| {
                        t.recipe.iter().any(|line| {
                            matches!(classify::classify(line), CommandClass::Installs(_))
                                && runs_program(line, &python_installers)
                        })
                    })
                    .map(|t| format!("make {}", t.name))
            })
            .or_else(|| python_lockfile_install(root));
        Setups {
            root: root.to_path_buf(),
            ci_installs: ci_installs.into_iter().map(str::to_string).collect(),
            python,
        }
    }

    /// True when a missing program `name` is one this repository's setup installs.
    pub(crate) fn provides(&self, name: &str) -> bool {
        self.python.is_some() && PYTHON_TOOLS.contains(&name)
    }

    /// The setup `command` needs before it can pass here, if it needs one.
    pub(crate) fn needed(
        &self,
        ctx: &Context,
        command: &str,
        programs: &Programs,
    ) -> Option<Setup> {
        let leaves = ctx.leaves(command);
        let runs_node = leaves
            .iter()
            .map(|l| l.command.as_str())
            .chain([command])
            .any(|c| runs_program(c, NODE_RUNNERS));
        if runs_node && let Some(node) = self.node_install(leading_cd(command).as_deref()) {
            return Some(Setup {
                command: node,
                why: "node_modules is absent here".to_string(),
            });
        }
        let python = self.python.as_ref()?;
        let missing = leaves.iter().find_map(|l| {
            let w: Vec<String> = words(&l.command)
                .into_iter()
                .skip_while(|x| x == "!")
                .collect();
            let name = program(w.first()?).to_string();
            (PYTHON_TOOLS.contains(&name.as_str()) && !programs.has(&name)).then_some(name)
        })?;
        Some(Setup {
            command: python.clone(),
            why: format!("`{missing}` is not on PATH here"),
        })
    }
}

/// Programs that run a Node package's scripts or its installed binaries.
const NODE_RUNNERS: &[&str] = &["npm", "pnpm", "yarn", "bun", "npx", "pnpx", "bunx"];

impl Setups {
    /// The install a Node package in `dir` (the root when `None`) needs, when it has
    /// dependencies and no `node_modules` (its own or the workspace root's): CI's own install
    /// step for that directory, else the one its lockfile names.
    fn node_install(&self, dir: Option<&str>) -> Option<String> {
        let here = dir.map_or_else(|| self.root.clone(), |d| self.root.join(d));
        let text = super::read_source(&here.join("package.json")).ok()??;
        let package: serde_json::Value = serde_json::from_str(&text).ok()?;
        // A workspace's packages have dependencies of their own even when the root has none.
        let has_dependencies = here.join("pnpm-workspace.yaml").is_file()
            || package.get("workspaces").is_some()
            || ["dependencies", "devDependencies"].iter().any(|k| {
                package
                    .get(k)
                    .and_then(|d| d.as_object())
                    .is_some_and(|d| !d.is_empty())
            });
        if !has_dependencies
            || here.join("node_modules").exists()
            || self.root.join("node_modules").exists()
        {
            return None;
        }
        let from_ci = self.ci_installs.iter().find(|c| {
            runs_program(c, &["npm", "pnpm", "yarn", "bun"]) && leading_cd(c).as_deref() == dir
        });
        if let Some(c) = from_ci {
            return Some(c.clone());
        }
        let install = lockfile_install(&here, detect_package_manager(&here, &package));
        Some(match dir {
            Some(d) => format!("cd {d} && {install}"),
            None => install,
        })
    }
}

/// The directory of a leading `cd DIR &&`, if the command starts with one.
fn leading_cd(command: &str) -> Option<String> {
    let first = segments(command).into_iter().next()?;
    match words(&first).as_slice() {
        [cd, dir] if cd == "cd" => Some(dir.clone()),
        _ => None,
    }
}

/// True when `command` installs or fetches, itself or through the tasks it runs.
pub(crate) fn installs(ctx: &Context, command: &str) -> bool {
    matches!(classify::classify(command), CommandClass::Installs(_))
        || ctx
            .leaves(command)
            .iter()
            .any(|l| matches!(classify::classify(&l.command), CommandClass::Installs(_)))
}

/// True when a segment of `command` runs one of `programs` (after `cd …&&`).
fn runs_program(command: &str, programs: &[&str]) -> bool {
    segments(command).iter().any(|s| {
        words(s)
            .first()
            .is_some_and(|p| programs.contains(&program(p)))
    })
}

/// The install command a Node lockfile asks for.
fn lockfile_install(root: &Path, pm: PackageManager) -> String {
    let has = |f: &str| root.join(f).is_file();
    match pm {
        PackageManager::Pnpm => "pnpm install --frozen-lockfile".to_string(),
        PackageManager::Yarn => "yarn install --frozen-lockfile".to_string(),
        PackageManager::Bun => "bun install --frozen-lockfile".to_string(),
        PackageManager::Npm if has("package-lock.json") || has("npm-shrinkwrap.json") => {
            "npm ci".to_string()
        }
        PackageManager::Npm => "npm install".to_string(),
    }
}

/// The install command a Python project's files ask for, if it has any.
fn python_lockfile_install(root: &Path) -> Option<String> {
    let has = |f: &str| root.join(f).is_file();
    let command = if has("uv.lock") {
        "uv sync"
    } else if has("poetry.lock") {
        "poetry install"
    } else if has("requirements-dev.txt") {
        "pip install -r requirements-dev.txt"
    } else if has("requirements.txt") {
        "pip install -r requirements.txt"
    } else if has("pyproject.toml") || has("setup.py") {
        "pip install -e ."
    } else {
        return None;
    };
    Some(command.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{Candidate, Skipped};

    fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, text).unwrap();
        }
        dir
    }

    const PACKAGE: &str =
        r#"{"scripts": {"lint": "eslint ."}, "devDependencies": {"eslint": "9"}}"#;

    #[test]
    fn node_setup_is_the_lockfiles_install_unless_ci_runs_its_own() {
        let none = Programs::All;
        for (lock, install) in [
            ("package-lock.json", "npm ci"),
            ("pnpm-lock.yaml", "pnpm install --frozen-lockfile"),
            ("yarn.lock", "yarn install --frozen-lockfile"),
        ] {
            let dir = repo(&[("package.json", PACKAGE), (lock, "")]);
            let ctx = Context::load(dir.path());
            let setups = Setups::find(dir.path(), &ctx, &Found::default());
            let setup = setups.needed(&ctx, "npm run lint", &none).unwrap();
            assert_eq!(setup.command, install, "{lock}");
            assert_eq!(setup.why, "node_modules is absent here");
        }
        let dir = repo(&[("package.json", PACKAGE), ("package-lock.json", "")]);
        let ctx = Context::load(dir.path());
        let mut found = Found::default();
        found.skipped.push(Skipped {
            source: ".github/workflows/ci.yml job test step 2".to_string(),
            command: "npm ci --ignore-scripts".to_string(),
            reason: "installs dependencies".to_string(),
        });
        let setups = Setups::find(dir.path(), &ctx, &found);
        let setup = setups.needed(&ctx, "npm run lint", &none).unwrap();
        assert_eq!(setup.command, "npm ci --ignore-scripts");
        // Installed: nothing to name.
        std::fs::create_dir(dir.path().join("node_modules")).unwrap();
        let setups = Setups::find(dir.path(), &ctx, &found);
        assert_eq!(setups.needed(&ctx, "npm run lint", &none), None);
    }

    /// A CI step with `working-directory: web` runs `cd web && pnpm test`: web's own
    /// dependencies, web's own lockfile.
    #[test]
    fn a_package_in_a_subdirectory_names_its_own_install() {
        let dir = repo(&[("web/package.json", PACKAGE), ("web/pnpm-lock.yaml", "")]);
        let ctx = Context::load(dir.path());
        let setups = Setups::find(dir.path(), &ctx, &Found::default());
        let setup = setups
            .needed(&ctx, "cd web && pnpm test", &Programs::All)
            .unwrap();
        assert_eq!(setup.command, "cd web && pnpm install --frozen-lockfile");
        assert_eq!(
            setups.needed(&ctx, "cd web && make test", &Programs::All),
            None
        );
        std::fs::create_dir(dir.path().join("web/node_modules")).unwrap();
        assert_eq!(
            setups.needed(&ctx, "cd web && pnpm test", &Programs::All),
            None
        );
    }

    #[test]
    fn a_python_tool_not_on_path_names_the_projects_install() {
        let dir = repo(&[
            (
                "Makefile",
                "requirements:\n\tpython -m pip install -e .\nlint:\n\truff check .\n",
            ),
            ("pyproject.toml", "[project]\nname = \"x\"\n"),
        ]);
        let ctx = Context::load(dir.path());
        let nothing = Programs::Path(Some(dir.path().join("no-bin").into_os_string()));
        let setups = Setups::find(dir.path(), &ctx, &Found::default());
        let setup = setups.needed(&ctx, "make lint", &nothing).unwrap();
        assert_eq!(setup.command, "make requirements");
        assert_eq!(setup.why, "`ruff` is not on PATH here");
        assert!(setups.provides("ruff") && !setups.provides("uv"));
        // CI's own install step wins over the Makefile's.
        let mut found = Found::default();
        found.candidates.push(Candidate {
            hint: "install".to_string(),
            command: "pip install -r requirements/dev.txt".to_string(),
            timeout_sec: None,
            source: ".github/workflows/ci.yml job test step 2".to_string(),
            fallback: false,
            tier: 0,
        });
        let setups = Setups::find(dir.path(), &ctx, &found);
        let setup = setups.needed(&ctx, "make lint", &nothing).unwrap();
        assert_eq!(setup.command, "pip install -r requirements/dev.txt");
        assert_eq!(setups.needed(&ctx, "make lint", &Programs::All), None);
    }
}
