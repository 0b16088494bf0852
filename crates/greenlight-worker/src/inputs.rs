//! An action's input root, fetched from the CAS and written into a fresh directory: every
//! `Directory` level in one batch read, then the files in batches of bounded size, each file
//! with its executable bit, symlinks as symlinks, empty directories kept.
//!
//! The tree comes from a client, so every name is checked before it touches the disk: one path
//! component, never `.` or `..`, never empty; files are created exclusively, so a name that
//! repeats, or a file placed behind a symlink of the same name, is an error and never a write
//! outside the directory.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use bazel_remote_apis::build::bazel::remote::execution::v2 as reapi;
use greenlight_remote::{Digest, DigestProto, Remote, RemoteError};
use prost::Message as _;

/// Bytes of file content asked for in one read (and held in memory at once), so a large tree
/// never sits in memory whole. A single larger file is read alone.
const FETCH_BATCH: u64 = 16 * 1024 * 1024;

/// What was written.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Written {
    /// Regular files.
    pub(crate) files: usize,
    /// Their bytes.
    pub(crate) bytes: u64,
}

/// Why the input root could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    /// A blob could not be read from the CAS.
    #[error("{0}")]
    Fetch(#[from] RemoteError),
    /// The CAS answered without a blob the tree names.
    #[error("the CAS has no blob {digest} (named by the input tree at `{path}`)")]
    Missing {
        /// The blob.
        digest: Digest,
        /// Where the tree names it.
        path: String,
    },
    /// A `Directory` blob is not a Directory.
    #[error("the input tree's directory `{path}` (blob {digest}) cannot be decoded: {source}")]
    BadDirectory {
        /// The blob.
        digest: Digest,
        /// Its place in the tree.
        path: String,
        /// The decoder's words.
        source: prost::DecodeError,
    },
    /// A name that is not one plain path component.
    #[error(
        "the input tree's directory `{path}` holds an entry named {name:?}, which is not a file name"
    )]
    BadName {
        /// The directory holding it.
        path: String,
        /// The name as sent.
        name: String,
    },
    /// A digest that is not one.
    #[error("the input tree's entry `{path}` has no digest")]
    NoDigest {
        /// The entry.
        path: String,
    },
    /// The disk refused.
    #[error("cannot write the input `{}`: {source}", path.display())]
    Write {
        /// The path.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
}

/// A file to write: where, and whether it is executable.
type Placement = (PathBuf, bool);

/// Fetches the tree under `root` and writes it into `into` (an existing, empty directory).
pub(crate) async fn materialise(
    remote: &Remote,
    root: &Digest,
    into: &Path,
) -> Result<Written, InputError> {
    let directories = fetch_directories(remote, root).await?;
    let mut files: BTreeMap<Digest, Vec<Placement>> = BTreeMap::new();
    lay_out(&directories, root, into, &mut files)?;
    write_files(remote, files).await
}

/// Every `Directory` of the tree, read level by level (one batch read per level).
async fn fetch_directories(
    remote: &Remote,
    root: &Digest,
) -> Result<HashMap<Digest, reapi::Directory>, InputError> {
    let mut directories: HashMap<Digest, reapi::Directory> = HashMap::new();
    let mut level: Vec<(Digest, String)> = vec![(root.clone(), ".".to_owned())];
    while !level.is_empty() {
        let mut wanted: Vec<Digest> = level.iter().map(|(d, _)| d.clone()).collect();
        wanted.sort();
        wanted.dedup();
        wanted.retain(|d| !directories.contains_key(d));
        let mut blobs = read_all(remote, &wanted).await?;
        let mut next = Vec::new();
        for (digest, path) in level {
            if directories.contains_key(&digest) {
                continue;
            }
            let bytes = blobs.remove(&digest).ok_or_else(|| InputError::Missing {
                digest: digest.clone(),
                path: path.clone(),
            })?;
            let directory = reapi::Directory::decode(bytes.as_slice()).map_err(|source| {
                InputError::BadDirectory {
                    digest: digest.clone(),
                    path: path.clone(),
                    source,
                }
            })?;
            for child in &directory.directories {
                let child_path = join_shown(&path, &child.name);
                let digest = child.digest.as_ref().ok_or_else(|| InputError::NoDigest {
                    path: child_path.clone(),
                })?;
                next.push((Digest::from_proto(digest), child_path));
            }
            directories.insert(digest, directory);
        }
        level = next;
    }
    Ok(directories)
}

/// Makes the directories and symlinks of the tree under `into` and lists where each file goes.
fn lay_out(
    directories: &HashMap<Digest, reapi::Directory>,
    root: &Digest,
    into: &Path,
    files: &mut BTreeMap<Digest, Vec<Placement>>,
) -> Result<(), InputError> {
    let mut stack: Vec<(Digest, PathBuf, String)> =
        vec![(root.clone(), into.to_path_buf(), ".".to_owned())];
    while let Some((digest, dir, shown)) = stack.pop() {
        let Some(directory) = directories.get(&digest) else {
            return Err(InputError::Missing {
                digest,
                path: shown,
            });
        };
        for file in &directory.files {
            let name = checked(&shown, &file.name)?;
            let shown_file = join_shown(&shown, name);
            let digest = file
                .digest
                .as_ref()
                .ok_or(InputError::NoDigest { path: shown_file })?;
            files
                .entry(Digest::from_proto(digest))
                .or_default()
                .push((dir.join(name), file.is_executable));
        }
        for link in &directory.symlinks {
            let name = checked(&shown, &link.name)?;
            let path = dir.join(name);
            std::os::unix::fs::symlink(&link.target, &path)
                .map_err(|source| InputError::Write { path, source })?;
        }
        for child in &directory.directories {
            let name = checked(&shown, &child.name)?;
            let path = dir.join(name);
            std::fs::create_dir(&path).map_err(|source| InputError::Write {
                path: path.clone(),
                source,
            })?;
            let digest = child.digest.as_ref().ok_or_else(|| InputError::NoDigest {
                path: join_shown(&shown, name),
            })?;
            stack.push((Digest::from_proto(digest), path, join_shown(&shown, name)));
        }
    }
    Ok(())
}

/// Reads the files' contents in bounded batches and writes every copy of each.
async fn write_files(
    remote: &Remote,
    files: BTreeMap<Digest, Vec<Placement>>,
) -> Result<Written, InputError> {
    let mut written = Written::default();
    let mut batch: Vec<(Digest, Vec<Placement>)> = Vec::new();
    let mut batch_bytes = 0u64;
    let mut entries = files.into_iter().peekable();
    while let Some((digest, places)) = entries.next() {
        if digest.len() > FETCH_BATCH {
            let done = write_large(remote, &digest, places).await?;
            written.files += done.files;
            written.bytes += done.bytes;
            continue;
        }
        batch_bytes += digest.len();
        batch.push((digest, places));
        let next_fits = entries
            .peek()
            .is_some_and(|(d, _)| batch_bytes + d.len() <= FETCH_BATCH);
        if next_fits {
            continue;
        }
        let wanted: Vec<Digest> = batch.iter().map(|(d, _)| d.clone()).collect();
        let blobs = read_all(remote, &wanted).await?;
        let work = std::mem::take(&mut batch);
        batch_bytes = 0;
        let done = tokio::task::spawn_blocking(move || write_batch(work, blobs))
            .await
            .map_err(|e| InputError::Write {
                path: PathBuf::from("."),
                source: std::io::Error::other(e.to_string()),
            })??;
        written.files += done.files;
        written.bytes += done.bytes;
    }
    Ok(written)
}

/// A file larger than a batch: streamed from the store into its first place (never held in
/// memory), then copied to the others.
async fn write_large(
    remote: &Remote,
    digest: &Digest,
    places: Vec<Placement>,
) -> Result<Written, InputError> {
    let mut written = Written::default();
    let Some((first, first_exec)) = places.first().cloned() else {
        return Ok(written);
    };
    // Created exclusively first, so the streamed write below opens this regular file and never
    // a symlink of the same name.
    write_file(&first, &[], first_exec)?;
    remote.read_blob_to_file(digest, &first).await?;
    written.files += 1;
    written.bytes += digest.len();
    for (path, executable) in places.into_iter().skip(1) {
        write_file(&path, &[], executable)?;
        std::fs::copy(&first, &path).map_err(|source| InputError::Write {
            path: path.clone(),
            source,
        })?;
        // `copy` gives the copy the first file's mode.
        set_mode(&path, executable)?;
        written.files += 1;
        written.bytes += digest.len();
    }
    Ok(written)
}

fn set_mode(path: &Path, executable: bool) -> Result<(), InputError> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = if executable { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|source| {
        InputError::Write {
            path: path.to_path_buf(),
            source,
        }
    })
}

fn write_batch(
    work: Vec<(Digest, Vec<Placement>)>,
    mut blobs: HashMap<Digest, Vec<u8>>,
) -> Result<Written, InputError> {
    let mut written = Written::default();
    for (digest, places) in work {
        let bytes = blobs.remove(&digest).ok_or_else(|| InputError::Missing {
            digest: digest.clone(),
            path: places
                .first()
                .map(|(p, _)| p.display().to_string())
                .unwrap_or_default(),
        })?;
        for (path, executable) in places {
            write_file(&path, &bytes, executable)?;
            written.files += 1;
            written.bytes += bytes.len() as u64;
        }
    }
    Ok(written)
}

fn write_file(path: &Path, bytes: &[u8], executable: bool) -> Result<(), InputError> {
    let error = |source| InputError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if executable { 0o755 } else { 0o644 })
        .open(path)
        .map_err(error)?;
    file.write_all(bytes).map_err(error)
}

/// Reads blobs (the store's client answers the empty one itself).
async fn read_all(
    remote: &Remote,
    digests: &[Digest],
) -> Result<HashMap<Digest, Vec<u8>>, InputError> {
    Ok(remote.read_blobs(digests).await?)
}

/// The name when it is one plain path component.
fn checked<'a>(dir: &str, name: &'a str) -> Result<&'a str, InputError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(InputError::BadName {
            path: dir.to_owned(),
            name: name.to_owned(),
        });
    }
    Ok(name)
}

fn join_shown(dir: &str, name: &str) -> String {
    if dir == "." {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_pass() {
        for bad in ["", ".", "..", "a/b", "/etc", "x\0"] {
            assert!(checked(".", bad).is_err(), "{bad:?}");
        }
        for good in ["a", ".hidden", "..x", "with space"] {
            assert_eq!(checked(".", good).ok(), Some(good));
        }
    }

    #[test]
    fn a_file_behind_a_symlink_of_its_name_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let outside = tempfile::tempdir().expect("temp dir");
        let link = dir.path().join("f");
        std::os::unix::fs::symlink(outside.path().join("target"), &link).expect("symlink");
        assert!(write_file(&link, b"x", false).is_err());
        assert!(!outside.path().join("target").exists());
    }
}
