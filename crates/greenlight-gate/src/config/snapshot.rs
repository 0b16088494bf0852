//! A verify.yaml fixed at one moment: its text and the text of every file it names (a v2
//! gate's problem matchers), so that whoever took it (a goal, a hook session) reads the same
//! gates, cache settings and cluster later, whatever has been written to the worktree since.
//!
//! The rule that keeps it honest: a snapshot is read by the same parser as the file, with the
//! named files served from the snapshot and never from disk; a file it does not hold is a
//! problem of the snapshot, not a reason to look at the worktree again.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use greenlight_digest::matchers::MatcherSet;
use serde::{Deserialize, Serialize};

use super::{ConfigErrors, Loaded, MatcherFileError, parse, parse_reading, read_text};

/// A verify.yaml and the files it names, as they were when it was taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Where the file was read from (its directory resolves relative paths, and its home decides
    /// the versions it may declare, as they did then).
    pub path: String,
    /// The file's text.
    pub text: String,
    /// Each matcher file it names, by resolved path, with its text.
    pub files: BTreeMap<String, String>,
}

impl Snapshot {
    /// Reads the verify.yaml at `path` and every file it names, once, and returns both the
    /// snapshot and what it means.
    pub fn take(path: &Utf8Path) -> Result<(Snapshot, Loaded), ConfigErrors> {
        let text = read_text(path)?;
        let loaded = parse(path, &text)?;
        let files = loaded
            .v2
            .iter()
            .flat_map(|v2| &v2.gates)
            .flat_map(|gate| &gate.matchers)
            .map(|(file, text)| (file.to_string(), text.clone()))
            .collect();
        let snapshot = Snapshot {
            path: path.to_string(),
            text,
            files,
        };
        Ok((snapshot, loaded))
    }

    /// What the snapshot means, read without touching the disk.
    pub fn load(&self) -> Result<Loaded, ConfigErrors> {
        let path = Utf8PathBuf::from(&self.path);
        parse_reading(&path, &self.text, &|full: &Utf8Path| {
            let text = self.files.get(full.as_str()).ok_or_else(|| {
                MatcherFileError::Unreadable(
                    "it was not in the snapshot taken when the goal or session began".to_owned(),
                )
            })?;
            let set = MatcherSet::parse(full.as_str(), text).map_err(MatcherFileError::Refused)?;
            Ok((text.clone(), set))
        })
    }

    /// The snapshot as the JSON the state database keeps.
    pub fn to_json(&self) -> String {
        // A struct of strings always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A snapshot from the JSON [`Snapshot::to_json`] wrote; `None` when it is not one.
    pub fn from_json(json: &str) -> Option<Snapshot> {
        serde_json::from_str(json).ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MATCHER: &str = r#"{"problemMatcher":[{"owner":"x","pattern":[{"regexp":"^(.*):(\\d+): (.*)$","file":1,"line":2,"message":3}]}]}"#;

    #[test]
    fn a_snapshot_reads_as_the_file_did_after_the_files_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8PathBuf::from_path_buf(dir.path().join(".greenlight")).unwrap();
        std::fs::create_dir(&root).unwrap();
        let yaml = root.join("verify.yaml");
        std::fs::write(root.join("m.json"), MATCHER).unwrap();
        std::fs::write(
            &yaml,
            "version: 2\ngates:\n  - id: a\n    command: make\n    inputs: [\"src/**\"]\n    matchers: [m.json]\n",
        )
        .unwrap();
        let (snapshot, loaded) = Snapshot::take(&yaml).unwrap();
        // The worktree changes: another file, and the matcher file gone.
        std::fs::write(
            &yaml,
            "version: 2\ngates:\n  - id: a\n    command: make\n    inputs: [\"nothing\"]\n",
        )
        .unwrap();
        std::fs::remove_file(root.join("m.json")).unwrap();
        let again = Snapshot::from_json(&snapshot.to_json())
            .unwrap()
            .load()
            .unwrap();
        let v2 = again.v2.as_ref().unwrap();
        assert_eq!(v2.gates[0].inputs, ["src/**"]);
        assert_eq!(
            v2.gates[0].matchers,
            loaded.v2.as_ref().unwrap().gates[0].matchers
        );
        assert_eq!(again.gates[0].command, "make");
    }

    #[test]
    fn a_file_missing_from_the_snapshot_is_a_problem_not_a_disk_read() {
        let snapshot = Snapshot {
            path: "/nowhere/.greenlight/verify.yaml".into(),
            text: "version: 2\ngates:\n  - id: a\n    command: make\n    matchers: [m.json]\n"
                .into(),
            files: BTreeMap::new(),
        };
        let errors = snapshot.load().unwrap_err();
        assert!(
            errors.to_string().contains("not in the snapshot"),
            "{errors}"
        );
    }
}
