//! docs/architecture.md agrees with the workspace: its crate graph (the mermaid block) and its
//! crate list (the `### \`crate\`` headings) name every workspace member and nothing else, and
//! the graph's arrows are exactly each crate's normal dependencies on other members, as
//! `cargo metadata` reads them from the manifests. A crate or an edge added, removed or moved
//! without the map fails here, naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> String {
    let path = workspace_root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The workspace as its manifests say: each member and the members it depends on (normal
/// dependencies only: dev-dependencies are not arrows of the map).
fn workspace_graph() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(&cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .unwrap_or_else(|e| panic!("{cargo} metadata could not start: {e}"));
    assert!(
        out.status.success(),
        "{cargo} metadata failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let packages = metadata["packages"].as_array().expect("packages[]");
    let members: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().expect("a package name").to_owned())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies[]")
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|name| members.contains(*name))
                .map(str::to_owned)
                .collect();
            (p["name"].as_str().expect("a package name").to_owned(), deps)
        })
        .collect()
}

/// What the map draws: the crates of the mermaid graph (`id["crate"]`) and its arrows
/// (`a --> b`) by crate name, with the problems of the block itself.
struct Drawn {
    nodes: BTreeSet<String>,
    edges: BTreeMap<String, BTreeSet<String>>,
    problems: Vec<String>,
}

fn drawn_graph(doc: &str) -> Drawn {
    let start = doc
        .find("```mermaid\n")
        .expect("docs/architecture.md has a ```mermaid block (the crate graph)");
    let block = &doc[start + "```mermaid\n".len()..];
    let block = &block[..block.find("```").expect("the mermaid block ends")];
    let node = regex::Regex::new(r#"^\s*([A-Za-z0-9_]+)\["([^"]+)"\]\s*$"#).expect("regex");
    let edge =
        regex::Regex::new(r"^\s*([A-Za-z0-9_]+)\s*-->\s*([A-Za-z0-9_]+)\s*$").expect("regex");
    let mut names = BTreeMap::new();
    let mut arrows = Vec::new();
    let mut problems = Vec::new();
    for (n, line) in block.lines().enumerate() {
        if let Some(c) = node.captures(line) {
            names.insert(c[1].to_owned(), c[2].to_owned());
        } else if let Some(c) = edge.captures(line) {
            arrows.push((n, c[1].to_owned(), c[2].to_owned()));
        } else if !line.trim().is_empty() && line.trim() != "graph TD" {
            problems.push(format!(
                "mermaid line {}: `{line}` is neither `id[\"crate\"]` nor `a --> b`",
                n + 1
            ));
        }
    }
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (n, from, to) in arrows {
        match (names.get(&from), names.get(&to)) {
            (Some(a), Some(b)) => {
                edges.entry(a.clone()).or_default().insert(b.clone());
            }
            _ => problems.push(format!(
                "mermaid line {}: `{from} --> {to}` names a node that is not declared as id[\"crate\"]",
                n + 1
            )),
        }
    }
    Drawn {
        nodes: names.into_values().collect(),
        edges,
        problems,
    }
}

/// The crates the page describes one by one: its `### \`crate\`` headings.
fn listed_crates(doc: &str) -> BTreeSet<String> {
    doc.lines()
        .filter_map(|l| l.strip_prefix("### `"))
        .filter_map(|l| l.strip_suffix('`'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn architecture_doc_names_every_crate_and_every_workspace_edge() {
    let doc = read("docs/architecture.md");
    let actual = workspace_graph();
    let drawn = drawn_graph(&doc);
    let listed = listed_crates(&doc);
    let mut problems = drawn.problems;
    for name in actual.keys() {
        if !drawn.nodes.contains(name) {
            problems.push(format!(
                "crate {name}: a workspace member missing from the graph"
            ));
        }
        if !listed.contains(name) {
            problems.push(format!(
                "crate {name}: a workspace member with no ### `{name}` section"
            ));
        }
    }
    for name in drawn.nodes.iter().chain(&listed) {
        if !actual.contains_key(name) {
            problems.push(format!(
                "crate {name}: in the page, but not a workspace member"
            ));
        }
    }
    let none = BTreeSet::new();
    for (name, deps) in &actual {
        let drawn_deps = drawn.edges.get(name).unwrap_or(&none);
        for dep in deps.difference(drawn_deps) {
            problems.push(format!(
                "crate {name}: missing edge {name} --> {dep} (a dependency in its Cargo.toml)"
            ));
        }
        for dep in drawn_deps.difference(deps) {
            problems.push(format!(
                "crate {name}: extra edge {name} --> {dep} (not a normal dependency in its Cargo.toml)"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/architecture.md disagrees with `cargo metadata`:\n  {}",
        problems.join("\n  ")
    );
}

/// The README's first code block starts with the two commands the fresh-clone check runs in a
/// clone: a newcomer reads them and the suite proves them.
#[test]
fn readme_shows_the_two_commands_the_fresh_clone_check_runs() {
    let readme = read("README.md");
    let check = read("scripts/fresh-clone-check.sh");
    let start = readme.find("```sh\n").expect("README.md has a ```sh block") + "```sh\n".len();
    let block = &readme[start..];
    let block = &block[..block.find("```").expect("the README's first block ends")];
    for (shown, run) in [
        (
            "cargo run -p greenlight --no-default-features -- demo",
            "-p greenlight --no-default-features -- demo",
        ),
        ("scripts/test", "\"$minimal\" scripts/test"),
    ] {
        assert!(
            block
                .lines()
                .any(|line| line.starts_with(&format!("{shown} "))),
            "README.md's first code block does not start a line with `{shown}`:\n{block}"
        );
        assert!(
            check.contains(run),
            "scripts/fresh-clone-check.sh does not run `{shown}`"
        );
    }
}
