//! Defaults implied by a language manifest: `Cargo.toml` and `go.mod`.
//!
//! The one rule: these are guesses, so they are drafted only for an ecosystem that no CI step,
//! script or target already exercises (see `assemble`).

use std::path::Path;

use super::{Candidate, Found};

/// How long a first `cargo` run may take: it compiles the dependency graph from nothing, which
/// for a mid-sized workspace on two cores takes well over verify.yaml's default 600 s.
const CARGO_TIMEOUT_SEC: u32 = 1800;

/// Proposes `cargo clippy` + `cargo test` for a Rust crate or workspace, `go vet` + `go test`
/// for a Go module.
pub(crate) fn scan(root: &Path, found: &mut Found) {
    if let Some(text) = read(root, "Cargo.toml", found) {
        match toml::from_str::<toml::Table>(&text) {
            Ok(value) => {
                let workspace = value.contains_key("workspace");
                let (scope, what) = if workspace {
                    (" --workspace", "Rust workspace")
                } else {
                    ("", "Rust crate")
                };
                // Clippy's warnings fail the gate only when the repository's own CI makes them
                // fail; a gate stricter than the project would be red on code CI accepts.
                let deny = if ci_denies_warnings(root) {
                    " -- -D warnings"
                } else {
                    ""
                };
                found.candidates.push(Candidate {
                    hint: "clippy".to_string(),
                    command: format!("cargo clippy{scope} --all-targets{deny}"),
                    timeout_sec: Some(CARGO_TIMEOUT_SEC),
                    source: format!("Cargo.toml ({what})"),
                    fallback: true,
                    tier: 5,
                });
                found.candidates.push(Candidate {
                    hint: "test".to_string(),
                    command: format!("cargo test{scope}"),
                    timeout_sec: Some(CARGO_TIMEOUT_SEC),
                    source: format!("Cargo.toml ({what})"),
                    fallback: true,
                    tier: 5,
                });
            }
            Err(e) => found.skip("Cargo.toml", "", format!("not valid TOML: {}", e.message())),
        }
    }
    if let Some(text) = read(root, "go.mod", found) {
        let module = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("module "))
            .map(|m| m.trim().to_string())
            .unwrap_or_else(|| "Go module".to_string());
        for (hint, command) in [("vet", "go vet ./..."), ("test", "go test ./...")] {
            found.candidates.push(Candidate {
                hint: hint.to_string(),
                command: command.to_string(),
                timeout_sec: None,
                source: format!("go.mod (module {module})"),
                fallback: true,
                tier: 5,
            });
        }
    }
}

/// A manifest's text; a manifest that exists but cannot be read is reported in `found`.
fn read(root: &Path, name: &str, found: &mut Found) -> Option<String> {
    match super::read_source(&root.join(name)) {
        Ok(text) => text,
        Err(reason) => {
            found.skip(name, "", reason);
            None
        }
    }
}

/// True when the repository's CI workflows, Makefile or justfile deny warnings for clippy or
/// rustc (`-D warnings`, `-Dwarnings`, `--deny warnings`, on a clippy line or in `RUSTFLAGS`).
fn ci_denies_warnings(root: &Path) -> bool {
    let mut texts: Vec<String> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(root.join(".github").join("workflows")) {
        for entry in entries.flatten() {
            if let Ok(Some(text)) = super::read_source(&entry.path()) {
                texts.push(text);
            }
        }
    }
    for name in [
        "Makefile",
        "GNUmakefile",
        "makefile",
        "justfile",
        "Justfile",
        ".cargo/config.toml",
    ] {
        if let Ok(Some(text)) = super::read_source(&root.join(name)) {
            texts.push(text);
        }
    }
    let denies = |line: &str| {
        let compact: String = line.split_whitespace().collect::<Vec<_>>().join(" ");
        compact.contains("-D warnings")
            || compact.contains("-Dwarnings")
            || compact.contains("--deny warnings")
            || compact.contains("-D clippy::all")
    };
    texts.iter().flat_map(|t| t.lines()).any(|line| {
        (line.contains("clippy") || line.contains("RUSTFLAGS") || line.contains("rustflags"))
            && denies(line)
    })
}
