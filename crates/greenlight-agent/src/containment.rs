//! Declared reads and writes: containment under a root, and the landed barrier for writes.
//!
//! A declared path is relative, plain and inside the root after every symlink on the way is
//! resolved. The rule that keeps it simple: resolve the nearest ancestor that exists with the
//! operating system's own `realpath`, and compare against the root's realpath. The same check runs
//! at preflight and again just before each dispatch, because a symlink can be planted in between.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::reason::Reason;

/// Why a declared path was refused, or why a declared write did not land.
#[derive(Debug, thiserror::Error)]
pub enum ContainmentError {
    /// The root itself cannot be resolved.
    #[error("root `{root}` cannot be resolved: {source}; pass an existing directory as the root")]
    RootUnresolvable {
        /// The root as given.
        root: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The path is empty.
    #[error("a declared path is empty; name a file relative to the root")]
    Empty,
    /// The path is absolute.
    #[error("declared path `{path}` is absolute; declare it relative to the root")]
    Absolute {
        /// The path as declared.
        path: String,
    },
    /// The path has a `..` component.
    #[error("declared path `{path}` contains `..`; declare it without parent references")]
    ParentReference {
        /// The path as declared.
        path: String,
    },
    /// The path has a control character.
    #[error("declared path {path:?} contains a control character; rename it")]
    ControlCharacter {
        /// The path as declared.
        path: String,
    },
    /// The path resolves outside the root through a symlink.
    #[error(
        "declared path `{path}` resolves to `{resolved}`, outside the root `{root}`; remove the symlink or declare a path inside the root"
    )]
    Escapes {
        /// The path as declared.
        path: String,
        /// Where its nearest existing ancestor resolves to.
        resolved: PathBuf,
        /// The root's realpath.
        root: PathBuf,
    },
    /// An ancestor of the path cannot be resolved (a dangling symlink, a permission error).
    #[error(
        "declared path `{path}` cannot be resolved at `{at}`: {source}; fix or remove that entry"
    )]
    Unresolvable {
        /// The path as declared.
        path: String,
        /// The entry that could not be resolved.
        at: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A declared write is missing or unchanged after an ok dispatch.
    #[error("declared write `{path}` {what} after the dispatch; the agent did not deliver it")]
    NotLanded {
        /// The path as declared.
        path: String,
        /// `does not exist` or `is unchanged`.
        what: &'static str,
    },
    /// A declared write could not be read to fingerprint it.
    #[error("declared write `{path}` cannot be read: {source}; check its permissions")]
    Unreadable {
        /// The path as declared.
        path: String,
        /// The OS error.
        source: io::Error,
    },
}

impl ContainmentError {
    /// The product-wide reason this error is recorded under.
    pub fn reason(&self) -> Reason {
        match self {
            ContainmentError::NotLanded { .. } | ContainmentError::Unreadable { .. } => {
                Reason::DeliverableNotLanded
            }
            _ => Reason::PathEscapesRoot,
        }
    }
}

/// Checks a declared path's shape, which needs no file system: non-empty, relative, without `..`
/// or a control character. A plan's paths are held to it when the plan is read; the walk over
/// symlinks ([`check_contained`]) comes later, against a real root.
pub fn check_shape(path: &str) -> Result<&Path, ContainmentError> {
    if path.is_empty() {
        return Err(ContainmentError::Empty);
    }
    if path.chars().any(char::is_control) {
        return Err(ContainmentError::ControlCharacter { path: path.into() });
    }
    let rel = Path::new(path);
    if rel.is_absolute() || rel.has_root() {
        return Err(ContainmentError::Absolute { path: path.into() });
    }
    if rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(ContainmentError::ParentReference { path: path.into() });
    }
    Ok(rel)
}

/// Checks one declared path against `root` and returns `root/path` (unresolved) when contained.
pub fn check_contained(root: &Path, path: &str) -> Result<PathBuf, ContainmentError> {
    let rel = check_shape(path)?;
    let real_root =
        fs::canonicalize(root).map_err(|source| ContainmentError::RootUnresolvable {
            root: root.to_path_buf(),
            source,
        })?;
    let joined = root.join(rel);
    // Walk up to the nearest entry that exists (a dangling symlink counts as existing: it is the
    // entry an agent would write through).
    let mut probe = joined.as_path();
    loop {
        if fs::symlink_metadata(probe).is_ok() {
            break;
        }
        match probe.parent() {
            Some(parent) => probe = parent,
            None => break,
        }
    }
    let resolved = fs::canonicalize(probe).map_err(|source| ContainmentError::Unresolvable {
        path: path.into(),
        at: probe.to_path_buf(),
        source,
    })?;
    if !resolved.starts_with(&real_root) {
        return Err(ContainmentError::Escapes {
            path: path.into(),
            resolved,
            root: real_root,
        });
    }
    Ok(joined)
}

/// Checks every declared read and write; the first failure wins (reads first, then writes).
pub fn check_all(root: &Path, reads: &[String], writes: &[String]) -> Result<(), ContainmentError> {
    for path in reads.iter().chain(writes) {
        check_contained(root, path)?;
    }
    Ok(())
}

/// The state of the declared writes before a dispatch, for the landed barrier.
#[derive(Debug, Clone)]
pub struct WriteBaseline {
    root: PathBuf,
    entries: Vec<(String, Option<blake3::Hash>)>,
}

impl WriteBaseline {
    /// Fingerprints each declared write under `root` (content hash, or absent). Containment is
    /// checked first, so a baseline is never taken through an escaping symlink.
    pub fn take(root: &Path, writes: &[String]) -> Result<Self, ContainmentError> {
        let mut entries = Vec::with_capacity(writes.len());
        for path in writes {
            let full = check_contained(root, path)?;
            entries.push((path.clone(), fingerprint(&full, path)?));
        }
        Ok(Self {
            root: root.to_path_buf(),
            entries,
        })
    }

    /// After an ok dispatch: every declared write must exist, be contained, and have changed.
    pub fn check_landed(&self) -> Result<(), ContainmentError> {
        for (path, before) in &self.entries {
            let full = check_contained(&self.root, path)?;
            match fingerprint(&full, path)? {
                None => {
                    return Err(ContainmentError::NotLanded {
                        path: path.clone(),
                        what: "does not exist",
                    });
                }
                Some(after) if Some(after) == *before => {
                    return Err(ContainmentError::NotLanded {
                        path: path.clone(),
                        what: "is unchanged",
                    });
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

fn fingerprint(full: &Path, declared: &str) -> Result<Option<blake3::Hash>, ContainmentError> {
    match fs::read(full) {
        Ok(bytes) => Ok(Some(blake3::hash(&bytes))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ContainmentError::Unreadable {
            path: declared.into(),
            source,
        }),
    }
}
