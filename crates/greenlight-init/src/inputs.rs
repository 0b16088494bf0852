//! The `inputs:` of a drafted verify.yaml v2 gate: the files it reads, when the command and the
//! repository's layout make them plain.
//!
//! The one rule: a list that is too narrow replays a stale result (a wrong cache hit, the worst
//! outcome), while no list at all hashes the whole workspace, which is always correct. So a
//! gate gets inputs only when every step of its command is understood, and any doubt — a `cd`,
//! an unknown tool, a source that names a parent directory, a symlink — leaves them out.
//!
//! Understood today: `cargo build|check|test|clippy|fmt|doc|nextest` in a workspace whose
//! packages live in their own directories (the selected packages, their path dependencies and
//! the workspace files), `go build|vet` (compile-only: every Go and cgo source, the module
//! files), and Python's static checkers (`ruff`, `mypy`, `flake8`, `pylint`, `pyright`,
//! `black --check`, `isort --check`: every Python source and every file that configures them).
//! Test runners other than cargo's read fixtures, snapshots and data files anywhere, so they
//! get none.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

use greenlight_proc::shell::{program, segments, words};

/// Files a directory walk may look at before it gives up (and the gate gets no inputs).
const MAX_WALK_FILES: usize = 20_000;
/// Bytes of one source file read when looking for references outside its package.
const MAX_SOURCE_BYTES: u64 = 1 << 20;

/// The inputs of `command` run at `root`, with a few words saying what they cover; `None`
/// when they are not plain (the whole workspace is then the input).
pub(crate) fn inputs_of(
    root: &Path,
    command: &str,
    cargo: &Cargo,
) -> Option<(Vec<String>, String)> {
    let segs = segments(command);
    if segs.is_empty() {
        return None;
    }
    let mut globs: Vec<String> = Vec::new();
    let mut what: Vec<String> = Vec::new();
    for seg in &segs {
        // An assignment in front (`RUSTFLAGS=… cargo`) is fine for inputs, but a `cd` is not:
        // the step would read another directory than the one its words name.
        let w = words(seg);
        let (found, about) = match w.first().map(|p| program(p)) {
            Some("cargo") => cargo.inputs(root, &w)?,
            Some("go") => go_inputs(root, &w)?,
            Some(_) => python_inputs(&w)?,
            None => return None,
        };
        for glob in found {
            if !globs.contains(&glob) {
                globs.push(glob);
            }
        }
        if !what.contains(&about) {
            what.push(about);
        }
    }
    Some((globs, what.join("; ")))
}

/// A Cargo workspace as far as inputs are concerned: each package's name, directory
/// (relative to the root, `/`-separated; empty for a package at the root) and the directories
/// of its path dependencies. `None` when there is no `Cargo.toml` or it is not understood.
#[derive(Debug, Default)]
pub(crate) struct Cargo {
    layout: Option<Layout>,
}

#[derive(Debug)]
struct Layout {
    packages: Vec<Package>,
    /// Directories of the packages a bare `cargo test` selects.
    default: Vec<String>,
}

#[derive(Debug)]
struct Package {
    name: String,
    dir: String,
    path_deps: Vec<String>,
}

/// Files at the workspace root that every cargo command reads or may read: the manifest and
/// lockfile, cargo's config, the toolchain pin, clippy's and rustfmt's configuration.
const CARGO_ROOT_FILES: &[&str] = &[
    "Cargo.toml",
    "Cargo.lock",
    ".cargo",
    "rust-toolchain*",
    "clippy.toml",
    ".clippy.toml",
    "rustfmt.toml",
    ".rustfmt.toml",
];

impl Cargo {
    /// Reads the workspace at `root`.
    pub(crate) fn load(root: &Path) -> Cargo {
        Cargo {
            layout: Layout::load(root),
        }
    }

    fn inputs(&self, root: &Path, w: &[String]) -> Option<(Vec<String>, String)> {
        let layout = self.layout.as_ref()?;
        let args: Vec<&str> = w[1..]
            .iter()
            .map(String::as_str)
            .filter(|a| !a.starts_with('+'))
            .collect();
        let sub = *args.first()?;
        let nextest = sub == "nextest";
        if !matches!(
            sub,
            "build" | "b" | "check" | "c" | "test" | "t" | "clippy" | "fmt" | "doc" | "nextest"
        ) {
            return None;
        }
        // Only the words before `--` select packages; after it they go to the tool.
        let own: Vec<&str> = args[1..]
            .iter()
            .copied()
            .take_while(|a| *a != "--")
            .collect();
        let mut named: Vec<&str> = Vec::new();
        let mut all = false;
        let mut i = 0;
        while i < own.len() {
            let a = own[i];
            match a {
                "-p" | "--package" => {
                    named.push(own.get(i + 1)?);
                    i += 1;
                }
                "--workspace" | "--all" => all = true,
                _ if a.starts_with("--manifest-path") || a.starts_with("-Z") => return None,
                _ if a.starts_with("--package=") => named.push(&a["--package=".len()..]),
                _ if a.starts_with("-p") && a.len() > 2 => named.push(&a[2..]),
                _ => {}
            }
            i += 1;
        }
        let mut dirs: Vec<String> = if all {
            layout.packages.iter().map(|p| p.dir.clone()).collect()
        } else if named.is_empty() {
            layout.default.clone()
        } else {
            let mut out = Vec::new();
            for spec in named {
                let name = spec.split(['@', ':']).next().unwrap_or(spec);
                out.push(layout.packages.iter().find(|p| p.name == name)?.dir.clone());
            }
            out
        };
        // Path dependencies are compiled too: follow them to the end.
        let mut seen: BTreeSet<String> = BTreeSet::new();
        while let Some(dir) = dirs.pop() {
            if !seen.insert(dir.clone()) {
                continue;
            }
            // A path dependency outside the workspace's members has dependencies of its own
            // that were not read: give up rather than miss them.
            let package = layout.packages.iter().find(|p| p.dir == dir)?;
            dirs.extend(package.path_deps.iter().cloned());
        }
        // A package at the root is the whole repository: nothing narrower is sure.
        if seen.iter().any(|d| d.is_empty()) {
            return None;
        }
        for dir in &seen {
            if !self_contained(&root.join(dir)) {
                return None;
            }
        }
        let mut globs: Vec<String> = CARGO_ROOT_FILES.iter().map(|s| (*s).to_owned()).collect();
        if nextest {
            globs.push(".config/nextest.toml".to_owned());
        }
        globs.extend(seen.iter().cloned());
        let names: Vec<&str> = layout
            .packages
            .iter()
            .filter(|p| seen.contains(&p.dir))
            .map(|p| p.name.as_str())
            .collect();
        let about = format!(
            "the workspace files and the director{} of {}",
            if names.len() == 1 { "y" } else { "ies" },
            names.join(", ")
        );
        Some((globs, about))
    }
}

impl Layout {
    fn load(root: &Path) -> Option<Layout> {
        let manifest = read_toml(&root.join("Cargo.toml"))?;
        let workspace = manifest.get("workspace").and_then(|w| w.as_table());
        // `[patch]` and `[replace]` pull sources from elsewhere: too much to follow here.
        if manifest.contains_key("patch") || manifest.contains_key("replace") {
            return None;
        }
        let ws_paths: HashMap<String, String> = workspace
            .and_then(|w| w.get("dependencies"))
            .and_then(|d| d.as_table())
            .map(|deps| {
                deps.iter()
                    .filter_map(|(name, spec)| {
                        let path = spec.get("path")?.as_str()?;
                        Some((name.clone(), normalize("", path)?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut member_dirs: Vec<String> = Vec::new();
        if manifest.contains_key("package") {
            member_dirs.push(String::new());
        }
        if let Some(ws) = workspace {
            let excluded: Vec<String> = strings(ws.get("exclude"))?
                .iter()
                .map(|e| normalize("", e))
                .collect::<Option<_>>()?;
            for pattern in strings(ws.get("members"))? {
                for dir in expand_member(root, &pattern)? {
                    if !excluded.contains(&dir) && !member_dirs.contains(&dir) {
                        member_dirs.push(dir);
                    }
                }
            }
        }
        let mut packages = Vec::new();
        for dir in &member_dirs {
            let m = if dir.is_empty() {
                manifest.clone()
            } else {
                read_toml(&root.join(dir).join("Cargo.toml"))?
            };
            let name = m.get("package")?.get("name")?.as_str()?.to_owned();
            let mut path_deps = Vec::new();
            let mut tables: Vec<&toml::Table> = Vec::new();
            for key in ["dependencies", "dev-dependencies", "build-dependencies"] {
                tables.extend(m.get(key).and_then(|d| d.as_table()));
            }
            if let Some(targets) = m.get("target").and_then(|t| t.as_table()) {
                for target in targets.values() {
                    for key in ["dependencies", "dev-dependencies", "build-dependencies"] {
                        tables.extend(target.get(key).and_then(|d| d.as_table()));
                    }
                }
            }
            for deps in tables {
                for (dep, spec) in deps {
                    let renamed = spec.get("package").and_then(|p| p.as_str()).unwrap_or(dep);
                    if let Some(path) = spec.get("path").and_then(|p| p.as_str()) {
                        path_deps.push(normalize(dir, path)?);
                    } else if spec.get("workspace").and_then(toml::Value::as_bool) == Some(true)
                        && let Some(path) = ws_paths.get(dep).or_else(|| ws_paths.get(renamed))
                    {
                        path_deps.push(path.clone());
                    }
                }
            }
            packages.push(Package {
                name,
                dir: dir.clone(),
                path_deps,
            });
        }
        let default = match workspace.and_then(|w| w.get("default-members")) {
            Some(value) => {
                let mut dirs = Vec::new();
                for pattern in strings(Some(value))? {
                    dirs.extend(expand_member(root, &pattern)?);
                }
                dirs
            }
            // A root package is what a bare command builds; a virtual workspace builds all.
            None if manifest.contains_key("package") => vec![String::new()],
            None => packages.iter().map(|p| p.dir.clone()).collect(),
        };
        Some(Layout { packages, default })
    }
}

fn read_toml(path: &Path) -> Option<toml::Table> {
    let text = super::read_source(path).ok()??;
    toml::from_str(&text).ok()
}

/// A list of strings; `Some(empty)` when the key is absent, `None` when it is not a list of
/// strings.
fn strings(value: Option<&toml::Value>) -> Option<Vec<String>> {
    match value {
        None => Some(Vec::new()),
        Some(v) => v
            .as_array()?
            .iter()
            .map(|s| s.as_str().map(str::to_owned))
            .collect(),
    }
}

/// The directories a `members` entry names: a plain path, or `dir/*` (each subdirectory with a
/// `Cargo.toml`). Any other glob is not followed.
fn expand_member(root: &Path, pattern: &str) -> Option<Vec<String>> {
    if let Some(parent) = pattern.strip_suffix("/*") {
        let parent = normalize("", parent)?;
        if parent.contains(['*', '?', '[']) {
            return None;
        }
        let mut dirs: Vec<String> = std::fs::read_dir(root.join(&parent))
            .ok()?
            .flatten()
            .filter(|e| e.path().join("Cargo.toml").is_file())
            .filter_map(|e| e.file_name().to_str().map(|n| format!("{parent}/{n}")))
            .collect();
        dirs.sort();
        return Some(dirs);
    }
    if pattern.contains(['*', '?', '[']) {
        return None;
    }
    normalize("", pattern).map(|d| vec![d])
}

/// `base/path` relative to the root, `/`-separated, without `.` and `..`; `None` when it
/// leaves the root or is absolute.
fn normalize(base: &str, path: &str) -> Option<String> {
    let mut parts: Vec<String> = base
        .split('/')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str()?.to_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

/// True when nothing under `dir` is known to read outside it: no symlink, and no Rust source
/// that names a parent directory in a string (`"../x"`, `".."`) or climbs from
/// `CARGO_MANIFEST_DIR` or the current directory (`.parent()`, `.ancestors()`).
fn self_contained(dir: &Path) -> bool {
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(at) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            return false;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_WALK_FILES {
                return false;
            }
            let Ok(kind) = entry.file_type() else {
                return false;
            };
            let path = entry.path();
            let name = entry.file_name();
            if kind.is_symlink() {
                return false;
            }
            if kind.is_dir() {
                if name != "target" && name != ".git" {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") && reaches_out(&path) {
                return false;
            }
        }
    }
    true
}

fn reaches_out(path: &Path) -> bool {
    use std::io::Read as _;
    let mut text = String::new();
    let read = std::fs::File::open(path)
        .map(|f| f.take(MAX_SOURCE_BYTES))
        .and_then(|mut f| {
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes)?;
            text = String::from_utf8_lossy(&bytes).into_owned();
            Ok(())
        });
    if read.is_err() {
        return true;
    }
    let climbs = (text.contains("CARGO_MANIFEST_DIR") || text.contains("current_dir"))
        && (text.contains(".parent()") || text.contains(".ancestors()"));
    climbs || text.contains("CARGO_WORKSPACE_DIR") || names_parent_dir(&text)
}

/// `..` as a path component inside a string: after `"` or `/`, before `/`, `"` or `\`.
fn names_parent_dir(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.windows(4).any(|w| {
        matches!(w[0], b'"' | b'/')
            && w[1] == b'.'
            && w[2] == b'.'
            && matches!(w[3], b'/' | b'"' | b'\\')
    })
}

/// Go sources and cgo files, the module files, vendored code.
const GO_FILES: &[&str] = &[
    "go.mod",
    "go.sum",
    "go.work",
    "go.work.sum",
    "vendor",
    "**/*.go",
    "**/*.c",
    "**/*.h",
    "**/*.cc",
    "**/*.cpp",
    "**/*.hh",
    "**/*.hpp",
    "**/*.m",
    "**/*.s",
    "**/*.S",
    "**/*.syso",
];

/// `go build` and `go vet` compile and read nothing else, unless a source embeds files
/// (`//go:embed`). `go test` runs tests, which read `testdata` and whatever else they like.
fn go_inputs(root: &Path, w: &[String]) -> Option<(Vec<String>, String)> {
    let sub = w.get(1)?.as_str();
    if !matches!(sub, "build" | "vet") {
        return None;
    }
    if w[2..]
        .iter()
        .any(|a| a.starts_with("-C") || a.starts_with("-modfile") || a.starts_with("-overlay"))
    {
        return None;
    }
    if embeds_files(root) {
        return None;
    }
    Some((
        GO_FILES.iter().map(|s| (*s).to_owned()).collect(),
        "Go and cgo sources and the module files".to_owned(),
    ))
}

/// True when some Go source embeds files, or the tree cannot be read in full.
fn embeds_files(root: &Path) -> bool {
    let mut stack: Vec<PathBuf> = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(at) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            return true;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_WALK_FILES {
                return true;
            }
            let Ok(kind) = entry.file_type() else {
                return true;
            };
            let path = entry.path();
            if kind.is_dir() {
                if entry.file_name() != ".git" && entry.file_name() != "node_modules" {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "go") {
                let text = std::fs::read(&path).unwrap_or_else(|_| b"//go:embed".to_vec());
                if String::from_utf8_lossy(&text).contains("//go:embed") {
                    return true;
                }
            }
        }
    }
    false
}

/// Python sources and every file that configures a Python checker or pins its dependencies.
const PYTHON_FILES: &[&str] = &[
    "**/*.py",
    "**/*.pyi",
    "pyproject.toml",
    "setup.cfg",
    "setup.py",
    "tox.ini",
    "**/requirements*.txt",
    "uv.lock",
    "poetry.lock",
    "pdm.lock",
    "Pipfile.lock",
    "mypy.ini",
    ".mypy.ini",
    "ruff.toml",
    ".ruff.toml",
    ".flake8",
    "pylintrc",
    ".pylintrc",
    "pyrightconfig.json",
    ".isort.cfg",
    ".editorconfig",
];

/// Static Python checkers read Python sources and their configuration; `pytest` and the
/// environment managers (tox, nox) run code that reads anything, so they get none.
fn python_inputs(w: &[String]) -> Option<(Vec<String>, String)> {
    let first = program(w.first()?);
    let rest: Vec<&str> = w[1..].iter().map(String::as_str).collect();
    let tool_words: Vec<&str> = match first {
        "uv" | "poetry" | "pdm" | "hatch" | "pipenv" if rest.first() == Some(&"run") => {
            rest[1..].to_vec()
        }
        "python" | "python3" if rest.first() == Some(&"-m") => rest[1..].to_vec(),
        _ => std::iter::once(first).chain(rest.iter().copied()).collect(),
    };
    let tool = program(tool_words.first()?);
    let checks = tool_words
        .iter()
        .any(|a| matches!(*a, "--check" | "--check-only" | "-c" | "--diff"));
    let static_check = match tool {
        "ruff" => {
            matches!(tool_words.get(1).copied(), Some("check"))
                || (tool_words.get(1) == Some(&"format") && checks)
        }
        "mypy" | "flake8" | "pylint" | "pyright" => true,
        "black" | "isort" => checks,
        _ => false,
    };
    if !static_check
        || tool_words
            .iter()
            .any(|a| a.starts_with("--config") || a.contains(".."))
    {
        return None;
    }
    Some((
        PYTHON_FILES.iter().map(|s| (*s).to_owned()).collect(),
        format!("Python sources and the files that configure {tool}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_directories_in_strings_are_found_and_ellipses_are_not() {
        assert!(names_parent_dir(r#"include_str!("../README.md")"#));
        assert!(names_parent_dir(r#"dir.join("..")"#));
        assert!(names_parent_dir(r#""a/../b""#));
        assert!(!names_parent_dir(r#"format!("{x}...")"#));
        assert!(!names_parent_dir("for i in 0..10 {} // ..."));
    }

    #[test]
    fn normalized_paths_never_leave_the_root() {
        assert_eq!(
            normalize("crates/cli", "../core").as_deref(),
            Some("crates/core")
        );
        assert_eq!(normalize("", "./crates/x/").as_deref(), Some("crates/x"));
        assert_eq!(normalize("a", "../../b"), None);
        assert_eq!(normalize("", "/abs"), None);
    }

    #[test]
    fn only_static_python_checkers_get_inputs() {
        let w = |s: &str| words(s);
        assert!(python_inputs(&w("uv run ruff check .")).is_some());
        assert!(python_inputs(&w("python -m mypy src")).is_some());
        assert!(python_inputs(&w("black --check .")).is_some());
        assert!(python_inputs(&w("black .")).is_none());
        assert!(python_inputs(&w("pytest -q")).is_none());
        assert!(python_inputs(&w("tox -e lint")).is_none());
        assert!(python_inputs(&w("mypy --config-file ../x.ini")).is_none());
    }
}
