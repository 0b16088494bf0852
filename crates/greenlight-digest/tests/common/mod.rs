//! Shared helpers for the fixture tests: find fixtures, read their output and meta.json.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use greenlight_digest::{Digest, DigestOptions, digest};

/// One captured fixture.
pub struct Fixture {
    pub dir: PathBuf,
    /// `<format>/<case>`.
    pub id: String,
    pub output: Vec<u8>,
    pub exit_code: i32,
    pub meta: serde_json::Value,
}

impl Fixture {
    /// The default options, with the command that wrote the output (its scope is part of the
    /// digest) and the directory it ran in, as a gate's digest has them.
    pub fn options(&self) -> DigestOptions {
        DigestOptions {
            command: self.meta["command"].as_str().map(str::to_owned),
            root: self.meta["root"].as_str().map(str::to_owned),
            ..DigestOptions::default()
        }
    }

    /// `path` as the digest gives it: relative to the directory the fixture ran in when it lies
    /// under it (a tool's own report names files absolute).
    pub fn relative<'a>(&self, path: &'a str) -> &'a str {
        self.meta["root"]
            .as_str()
            .and_then(|root| path.strip_prefix(root)?.strip_prefix('/'))
            .unwrap_or(path)
    }

    pub fn digest(&self) -> Digest {
        digest(&self.output, Some(self.exit_code), &self.options())
    }

    pub fn report(&self) -> Option<String> {
        let name = self.meta.get("report")?.as_str()?;
        std::fs::read_to_string(self.dir.join(name)).ok()
    }
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every fixture, sorted by id. Panics (failing the test) on a malformed fixture.
pub fn all() -> Vec<Fixture> {
    let mut out = Vec::new();
    let mut formats: Vec<_> = std::fs::read_dir(root())
        .expect("tests/fixtures exists")
        .flatten()
        .collect();
    formats.sort_by_key(|e| e.file_name());
    for format in formats {
        let mut cases: Vec<_> = std::fs::read_dir(format.path())
            .expect("format dir")
            .flatten()
            .collect();
        cases.sort_by_key(|e| e.file_name());
        for case in cases {
            let dir = case.path();
            let Ok(output) = std::fs::read(dir.join("output.txt")) else {
                continue;
            };
            let meta: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(dir.join("meta.json"))
                    .expect("meta.json beside output.txt"),
            )
            .expect("meta.json is JSON");
            let exit_code = meta["exit_code"].as_i64().expect("meta.json has exit_code") as i32;
            let id = format!(
                "{}/{}",
                format.file_name().to_string_lossy(),
                case.file_name().to_string_lossy()
            );
            out.push(Fixture {
                dir,
                id,
                output,
                exit_code,
                meta,
            });
        }
    }
    assert!(
        out.len() >= 30,
        "expected the full fixture corpus, found {} fixtures",
        out.len()
    );
    out
}
