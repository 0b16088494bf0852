//! The process environment is read in one place: the binary reads it once
//! (`crates/greenlight/src/environment.rs`) and passes what it read down; no library asks the
//! process again. A library source line that reads a variable (`env::var`, `var_os`, `vars`,
//! `vars_os`) fails here, named by file and line, with the way out.

use std::path::{Path, PathBuf};

/// Crates that may read their own process environment: the binary (its one read point), the
/// worker (a lease's base environment is the worker process's own), the test kit and the proto
/// generator (build tools, not part of a run).
const OWN_PROCESS: &[&str] = &[
    "greenlight",
    "greenlight-worker",
    "greenlight-testkit",
    "greenlight-protogen",
];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The lines (1-based) of `text` that read the process environment, comments left out.
fn reads_in(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let code = line.trim_start();
            !code.starts_with("//") && code.contains("env::var")
        })
        .map(|(index, _)| index + 1)
        .collect()
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn no_library_reads_the_process_environment() {
    let mut reads = Vec::new();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(crates_dir())
        .expect("crates/")
        .map(|entry| entry.expect("crate").path())
        .collect();
    crates.sort();
    let mut libraries = 0;
    for dir in crates {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if OWN_PROCESS.contains(&name) {
            continue;
        }
        libraries += 1;
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("source file");
            for line in reads_in(&text) {
                let shown = file.strip_prefix(crates_dir()).unwrap_or(&file);
                reads.push(format!("crates/{}:{line}", shown.display()));
            }
        }
    }
    assert!(
        libraries >= 10,
        "only {libraries} library crates were scanned"
    );
    assert!(
        reads.is_empty(),
        "these library lines read the process environment:\n  {}\ntake the value from the \
         options the caller passes (the binary reads the environment once, in \
         crates/greenlight/src/environment.rs)",
        reads.join("\n  ")
    );
}

#[test]
fn a_read_is_found_and_a_comment_is_not() {
    let text = "//! reads `std::env::var_os` nowhere\nlet a = 1;\n    let h = std::env::var_os(\"HOME\");\nuse std::env;\nlet p = env::vars_os();\n";
    assert_eq!(reads_in(text), [3, 5]);
}
