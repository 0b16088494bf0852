//! The input root: a workspace's listed files as a Merkle tree of REAPI `Directory` messages,
//! every file and directory addressed by its SHA-256, entries sorted by name as the protocol
//! requires.
//!
//! The caller lists the files (the same listing its own workspace key uses); this module
//! never walks directories, never takes anything under `.git`, and skips a listed path that is
//! gone by the time it is read, since the tree may change while it is keyed.

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use bazel_remote_apis::build::bazel::remote::execution::v2 as reapi;

use crate::blobs::{Blob, BlobSet};
use crate::digest::{Digest, DigestProto};
use crate::error::RemoteError;
use crate::file_digests::FileDigests;

/// A built input root: its digest, every blob it names (the `Directory` messages in memory,
/// the files by path), and what it holds.
#[derive(Clone, Debug)]
pub struct InputRoot {
    /// The digest of the root `Directory`; an `Action`'s `input_root_digest`.
    pub digest: Digest,
    /// The directories and files to upload for it.
    pub blobs: BlobSet,
    /// Regular files in the tree.
    pub files: usize,
    /// Their total size.
    pub bytes: u64,
    /// Listed paths left out: gone when read, under `.git`, or neither a file nor a symlink.
    pub skipped: usize,
}

#[derive(Default)]
struct Dir {
    files: BTreeMap<String, reapi::FileNode>,
    symlinks: BTreeMap<String, reapi::SymlinkNode>,
    dirs: BTreeMap<String, Dir>,
}

impl InputRoot {
    /// Builds the tree of `files` (paths relative to `root`; `cache` supplies and remembers
    /// each file's digest, keyed by its absolute path). A regular file keeps its
    /// executable bit, a symlink stays a symlink (its target as written); a listed directory
    /// (a submodule, say) is skipped. A path that is absolute, climbs out of the root, passes
    /// through a symlinked directory or is not UTF-8 is an error naming it.
    pub fn build(
        root: &Path,
        files: &[PathBuf],
        cache: &mut FileDigests,
    ) -> Result<InputRoot, RemoteError> {
        // Absolute, so the digest cache's keys and the blobs' paths do not depend on the
        // current directory.
        let root = &std::path::absolute(root).map_err(|source| RemoteError::Io {
            path: root.to_path_buf(),
            source,
        })?;
        let mut tree = Dir::default();
        let mut blobs = BlobSet::new();
        let mut built = InputRoot {
            digest: Digest::empty(),
            blobs: BlobSet::new(),
            files: 0,
            bytes: 0,
            skipped: 0,
        };
        // Whether each parent directory is a real directory (true), missing or not a
        // directory (false); a symlinked one is an error.
        let mut parents: HashMap<PathBuf, bool> = HashMap::new();
        // A listing is usually sorted, so a file's parents are mostly the previous file's:
        // those were checked already.
        let mut checked_dirs: Vec<String> = Vec::new();
        for listed in files {
            let Some(names) = components(listed)? else {
                built.skipped += 1;
                continue;
            };
            let Some((leaf, dirs)) = names.split_last() else {
                built.skipped += 1;
                continue;
            };
            if dirs != checked_dirs.as_slice() {
                if !parents_are_directories(root, listed, dirs, &mut parents)? {
                    built.skipped += 1;
                    continue;
                }
                checked_dirs = dirs.to_vec();
            }
            let mut path = root.to_path_buf();
            path.extend(&names);
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                Err(e) if gone(&e) => {
                    built.skipped += 1;
                    continue;
                }
                Err(source) => return Err(RemoteError::Io { path, source }),
            };
            let kind = meta.file_type();
            let dir = dirs
                .iter()
                .fold(&mut tree, |d, name| d.dirs.entry(name.clone()).or_default());
            if dir.dirs.contains_key(leaf) {
                return Err(changed_under_us(listed));
            }
            if kind.is_file() {
                let digest = match cache.digest(&path, &meta) {
                    Ok(digest) => digest,
                    Err(e) if gone(&e) => {
                        built.skipped += 1;
                        continue;
                    }
                    Err(source) => return Err(RemoteError::Io { path, source }),
                };
                built.files += 1;
                built.bytes += digest.len();
                let executable =
                    std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0;
                dir.files.insert(
                    leaf.clone(),
                    reapi::FileNode {
                        name: leaf.clone(),
                        digest: Some(digest.to_proto()),
                        is_executable: executable,
                        node_properties: None,
                    },
                );
                blobs.insert(digest, Blob::File(path));
            } else if kind.is_symlink() {
                let target = match std::fs::read_link(&path) {
                    Ok(target) => target,
                    Err(e) if gone(&e) => {
                        built.skipped += 1;
                        continue;
                    }
                    Err(source) => return Err(RemoteError::Io { path, source }),
                };
                let Some(target) = target.to_str() else {
                    return Err(not_utf8(listed, "its symlink target"));
                };
                dir.symlinks.insert(
                    leaf.clone(),
                    reapi::SymlinkNode {
                        name: leaf.clone(),
                        target: target.to_string(),
                        node_properties: None,
                    },
                );
            } else {
                built.skipped += 1;
            }
        }
        built.digest = seal(tree, &mut blobs, Path::new(""))?;
        built.blobs = blobs;
        Ok(built)
    }
}

/// The directory's message, with its subdirectories sealed first; returns its digest.
fn seal(dir: Dir, blobs: &mut BlobSet, at: &Path) -> Result<Digest, RemoteError> {
    let mut directories = Vec::with_capacity(dir.dirs.len());
    for (name, child) in dir.dirs {
        if dir.files.contains_key(&name) || dir.symlinks.contains_key(&name) {
            return Err(changed_under_us(&at.join(&name)));
        }
        let digest = seal(child, blobs, &at.join(&name))?;
        directories.push(reapi::DirectoryNode {
            name,
            digest: Some(digest.to_proto()),
        });
    }
    let message = reapi::Directory {
        files: dir.files.into_values().collect(),
        directories,
        symlinks: dir.symlinks.into_values().collect(),
        node_properties: None,
    };
    Ok(blobs.insert_message(&message))
}

/// The path's names, `None` when it must be left out (`.git`, or the root itself); an error
/// when it is absolute, leaves the root or is not UTF-8.
fn components(listed: &Path) -> Result<Option<Vec<String>>, RemoteError> {
    let mut names: Vec<String> = Vec::new();
    for component in listed.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => {
                return Err(RemoteError::BadInput {
                    path: listed.to_path_buf(),
                    reason: "is absolute; list input paths relative to the workspace root"
                        .to_string(),
                });
            }
            Component::CurDir => {}
            Component::ParentDir => {
                if names.pop().is_none() {
                    return Err(RemoteError::BadInput {
                        path: listed.to_path_buf(),
                        reason: "leaves the workspace root; list only paths inside it".to_string(),
                    });
                }
            }
            Component::Normal(name) => {
                if name == ".git" {
                    return Ok(None);
                }
                let Some(name) = name.to_str() else {
                    return Err(not_utf8(listed, "its name"));
                };
                names.push(name.to_string());
            }
        }
    }
    Ok((!names.is_empty()).then_some(names))
}

/// True when every parent of the path is a directory; false when one is gone or is a file
/// (the path is then gone too). A symlinked parent is an error: it could lead anywhere.
fn parents_are_directories(
    root: &Path,
    listed: &Path,
    dirs: &[String],
    seen: &mut HashMap<PathBuf, bool>,
) -> Result<bool, RemoteError> {
    let mut path = root.to_path_buf();
    for name in dirs {
        path.push(name);
        let is_dir = match seen.get(&path) {
            Some(known) => *known,
            None => {
                let known = match std::fs::symlink_metadata(&path) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        return Err(RemoteError::BadInput {
                            path: listed.to_path_buf(),
                            reason: format!(
                                "passes through the symlink {}; list the symlink itself, \
                                 not paths beneath it",
                                path.strip_prefix(root).unwrap_or(&path).display()
                            ),
                        });
                    }
                    Ok(meta) => meta.is_dir(),
                    Err(e) if gone(&e) => false,
                    Err(source) => return Err(RemoteError::Io { path, source }),
                };
                seen.insert(path.clone(), known);
                known
            }
        };
        if !is_dir {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Errors that mean "the path is not there (any more)".
fn gone(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

fn not_utf8(listed: &Path, what: &str) -> RemoteError {
    RemoteError::BadInput {
        path: listed.to_path_buf(),
        reason: format!(
            "{what} is not UTF-8, which the Remote Execution API cannot carry; rename it or \
             leave it out of the inputs"
        ),
    }
}

fn changed_under_us(listed: &Path) -> RemoteError {
    RemoteError::BadInput {
        path: listed.to_path_buf(),
        reason: "is both a file and a directory: the tree changed while it was read; build \
                 it again"
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use std::os::unix::fs::PermissionsExt;

    fn write(root: &Path, rel: &str, content: &str) {
        let path = root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(path, content).expect("write");
    }

    fn chmod(root: &Path, rel: &str, mode: u32) {
        std::fs::set_permissions(root.join(rel), std::fs::Permissions::from_mode(mode))
            .expect("chmod");
    }

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    fn build(root: &Path, list: &[&str]) -> Result<InputRoot, RemoteError> {
        InputRoot::build(root, &paths(list), &mut FileDigests::new())
    }

    fn directory(tree: &InputRoot, digest: &Digest) -> reapi::Directory {
        match tree.blobs.get(digest) {
            Some(Blob::Bytes(bytes)) => reapi::Directory::decode(bytes.as_slice()).expect("decode"),
            other => panic!("{digest} is not a directory message: {other:?}"),
        }
    }

    fn names(dir: &reapi::Directory) -> (Vec<&str>, Vec<&str>, Vec<&str>) {
        (
            dir.files.iter().map(|f| f.name.as_str()).collect(),
            dir.directories.iter().map(|d| d.name.as_str()).collect(),
            dir.symlinks.iter().map(|s| s.name.as_str()).collect(),
        )
    }

    /// The three-entry tree whose digests were computed with BuildGrid's own Python protos
    /// (`remote_execution_pb2`, deterministic serialisation, hashlib.sha256): the same tree
    /// built by another REAPI implementation has the same digest.
    fn known_tree(root: &Path) {
        write(root, "a.txt", "a\n");
        write(root, "bin/run.sh", "#!/bin/sh\necho hi\n");
        chmod(root, "bin/run.sh", 0o755);
        std::os::unix::fs::symlink("a.txt", root.join("link")).expect("symlink");
    }

    #[test]
    fn an_empty_listing_is_the_empty_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tree = build(dir.path(), &[]).expect("build");
        assert_eq!(
            tree.digest.to_string(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855/0"
        );
        assert_eq!((tree.files, tree.bytes, tree.blobs.len()), (0, 0, 1));
    }

    #[test]
    fn a_known_tree_has_the_digest_another_implementation_computes() {
        let dir = tempfile::tempdir().expect("tempdir");
        known_tree(dir.path());
        let tree = build(dir.path(), &["link", "bin/run.sh", "a.txt"]).expect("build");
        assert_eq!(
            tree.digest.to_string(),
            "8e089f520a8e33d64d74937c5fe7de35897b621fbb4e30dd2a66cec730d8b985/171"
        );
        let bin = Digest {
            hash: "0e7879d7b625dc7a1d8e088a4dc3f78fd9d3120c26b59d940692491b8bc6b876".into(),
            size: 82,
        };
        assert!(tree.blobs.contains(&bin), "bin/ directory message");
        assert_eq!((tree.files, tree.bytes), (2, 2 + 18));
        // Root + bin/ messages, and the two files by path.
        assert_eq!(tree.blobs.len(), 4);
        let run = crate::digest_of(b"#!/bin/sh\necho hi\n");
        assert_eq!(
            tree.blobs.get(&run),
            Some(&Blob::File(dir.path().join("bin/run.sh")))
        );
    }

    #[test]
    fn entries_are_sorted_by_name_whatever_the_listing_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        for rel in [
            "b.txt",
            "a.txt",
            "B",
            "sub/z",
            "sub/a",
            "sub/deeper/x",
            "_",
            "a.txt",
        ] {
            write(dir.path(), rel, rel);
        }
        let list = [
            "b.txt",
            "sub/z",
            "a.txt",
            "B",
            "sub/deeper/x",
            "_",
            "sub/a",
            "a.txt",
        ];
        let tree = build(dir.path(), &list).expect("build");
        let root = directory(&tree, &tree.digest);
        assert_eq!(
            names(&root),
            (vec!["B", "_", "a.txt", "b.txt"], vec!["sub"], vec![])
        );
        let sub_digest = Digest::from_proto(root.directories[0].digest.as_ref().expect("digest"));
        let sub = directory(&tree, &sub_digest);
        assert_eq!(names(&sub), (vec!["a", "z"], vec!["deeper"], vec![]));

        let mut reversed = list;
        reversed.reverse();
        assert_eq!(
            build(dir.path(), &reversed).expect("build").digest,
            tree.digest
        );
    }

    #[test]
    fn the_executable_bit_is_kept_and_changes_the_digest() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "tool", "#!/bin/sh\n");
        chmod(dir.path(), "tool", 0o644);
        let plain = build(dir.path(), &["tool"]).expect("build");
        assert!(!directory(&plain, &plain.digest).files[0].is_executable);
        chmod(dir.path(), "tool", 0o744);
        let exec = build(dir.path(), &["tool"]).expect("build");
        assert!(directory(&exec, &exec.digest).files[0].is_executable);
        assert_ne!(plain.digest, exec.digest);
    }

    #[test]
    fn a_symlink_stays_a_symlink_with_its_target_as_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "real/file", "x");
        std::os::unix::fs::symlink("real", dir.path().join("dirlink")).expect("symlink");
        std::os::unix::fs::symlink("../../outside", dir.path().join("real/up")).expect("symlink");
        let tree = build(dir.path(), &["dirlink", "real/file", "real/up"]).expect("build");
        let root = directory(&tree, &tree.digest);
        assert_eq!(root.symlinks.len(), 1);
        assert_eq!(root.symlinks[0].target, "real");
        let real = directory(
            &tree,
            &Digest::from_proto(root.directories[0].digest.as_ref().expect("d")),
        );
        assert_eq!(real.symlinks[0].target, "../../outside");
        assert_eq!(tree.files, 1);
    }

    #[test]
    fn git_metadata_is_never_part_of_the_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "src/lib.rs", "fn main() {}");
        write(dir.path(), ".git/HEAD", "ref: refs/heads/main\n");
        write(
            dir.path(),
            "vendor/dep/.git",
            "gitdir: ../../.git/modules/dep\n",
        );
        write(dir.path(), ".gitignore", "target\n");
        let tree = build(
            dir.path(),
            &[
                "src/lib.rs",
                ".git/HEAD",
                "vendor/dep/.git",
                ".gitignore",
                ".git",
            ],
        )
        .expect("build");
        let root = directory(&tree, &tree.digest);
        assert_eq!(names(&root), (vec![".gitignore"], vec!["src"], vec![]));
        assert_eq!((tree.files, tree.skipped), (2, 3));
    }

    #[test]
    fn a_path_gone_when_read_is_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "kept", "k");
        write(dir.path(), "file", "f");
        let tree = build(
            dir.path(),
            &["kept", "deleted", "gone/dir/x", "file/under-a-file"],
        )
        .expect("build");
        assert_eq!((tree.files, tree.skipped), (1, 3));
        assert_eq!(
            tree.digest,
            build(dir.path(), &["kept"]).expect("build").digest
        );
    }

    #[test]
    fn a_path_leaving_the_root_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "a/b", "b");
        for bad in ["../etc/passwd", "a/../../x", "/etc/passwd"] {
            let err = build(dir.path(), &[bad]).expect_err(bad);
            assert!(err.to_string().contains(bad), "{bad}: {err}");
        }
        // Climbing back inside is fine.
        assert_eq!(build(dir.path(), &["a/../a/b"]).expect("inside").files, 1);
    }

    #[test]
    fn a_path_through_a_symlinked_directory_is_an_error() {
        let outside = tempfile::tempdir().expect("tempdir");
        write(outside.path(), "secret", "s");
        let dir = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).expect("symlink");
        let err = build(dir.path(), &["out/secret"]).expect_err("through a symlink");
        let text = err.to_string();
        assert!(
            text.contains("out/secret") && text.contains("symlink out"),
            "{text}"
        );
    }

    #[test]
    fn a_non_utf8_name_is_an_error_not_a_mangled_name() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let name = std::ffi::OsStr::from_bytes(b"caf\xe9");
        std::fs::write(dir.path().join(name), "x").expect("write");
        let err = InputRoot::build(dir.path(), &[PathBuf::from(name)], &mut FileDigests::new())
            .expect_err("not UTF-8");
        assert!(err.to_string().contains("not UTF-8"), "{err}");
    }
}
