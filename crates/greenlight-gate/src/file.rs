//! Reading a small file a repository or user controls (verify.yaml, manifests, CI workflows,
//! agent settings) without blocking and without reading without end.
//!
//! The one rule: open with `O_NONBLOCK`, then look at what was opened (not at the path, which
//! may change between a check and the open) and read only a regular file, at most
//! [`MAX_CONFIG_BYTES`]. A FIFO would block an ordinary `open` or `read` forever, and a symlink
//! to `/dev/zero` would read until memory runs out; a cloned repository can carry either.

use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// The largest config file read: 1 MiB. Real verify.yaml files, manifests and hook settings
/// are a few KiB; verify.yaml's own largest option (`maxLogTailBytes`) is also 1 MiB.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Nothing at the path.
    #[error("{}: no such file", path.display())]
    NotFound {
        /// The path asked for.
        path: PathBuf,
    },
    /// The path names something other than a regular file.
    #[error(
        "{}: is {kind}, not a regular file; greenlight reads only regular files here (replace it \
         with a regular file)",
        path.display()
    )]
    NotRegular {
        /// The path asked for.
        path: PathBuf,
        /// What it is: `a FIFO`, `a directory`, `a character device`, …
        kind: &'static str,
    },
    /// The file is larger than the limit.
    #[error(
        "{}: larger than {limit} bytes, which no config file needs; check that it is the \
         right file",
        path.display()
    )]
    TooLarge {
        /// The path asked for.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// Opening or reading failed.
    #[error("{}: cannot read it ({source})", path.display())]
    Io {
        /// The path asked for.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

impl FileError {
    /// True when nothing exists at the path (callers often treat that as "absent", not as an
    /// error).
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::NotFound { .. })
    }

    /// The message without the leading `path: `, for callers that print the path themselves.
    pub fn reason(&self) -> String {
        match self {
            FileError::NotFound { .. } => "no such file".to_owned(),
            FileError::NotRegular { kind, .. } => format!("it is {kind}, not a regular file"),
            FileError::TooLarge { limit, .. } => format!("it is larger than {limit} bytes"),
            FileError::Io { source, .. } => source.to_string(),
        }
    }
}

/// Opens the regular file at `path` for reading (a symlink is followed to what it names) and
/// returns it with its metadata, refusing anything else, without ever blocking on a FIFO or
/// device. For a caller that checks more than the type (an owner, a mode) before reading.
pub fn open_regular(path: &Path) -> Result<(std::fs::File, std::fs::Metadata), FileError> {
    let io = |source: std::io::Error| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => FileError::NotFound {
                path: path.to_path_buf(),
            },
            // A socket cannot be opened at all (ENXIO); `stat` names it without opening it.
            _ => match std::fs::metadata(path).ok().and_then(|m| not_regular(&m)) {
                Some(kind) => FileError::NotRegular {
                    path: path.to_path_buf(),
                    kind,
                },
                None => io(e),
            },
        })?;
    let meta = file.metadata().map_err(io)?;
    if let Some(kind) = not_regular(&meta) {
        return Err(FileError::NotRegular {
            path: path.to_path_buf(),
            kind,
        });
    }
    Ok((file, meta))
}

/// What `meta` describes when it is not a regular file: `a FIFO (named pipe)`, `a directory`, …
fn not_regular(meta: &std::fs::Metadata) -> Option<&'static str> {
    let kind = meta.file_type();
    if kind.is_file() {
        return None;
    }
    Some(if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a file"
    })
}

/// Reads the regular file at `path` (a symlink is followed to what it names), refusing
/// anything else and anything over `limit` bytes, without ever blocking on a FIFO or device.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let (file, meta) = open_regular(path)?;
    read_opened(path, file, &meta, limit)
}

/// Reads a file [`open_regular`] opened, at most `limit` bytes.
pub fn read_opened(
    path: &Path,
    file: std::fs::File,
    meta: &std::fs::Metadata,
    limit: u64,
) -> Result<Vec<u8>, FileError> {
    if meta.len() > limit {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    // The size can change after fstat: read one byte past the limit to notice a file that grew.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| FileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(bytes)
}

/// [`read_bounded`] with [`MAX_CONFIG_BYTES`], mapping "no such file" to `None`.
pub fn read_config_file(path: &Path) -> Result<Option<Vec<u8>>, FileError> {
    match read_bounded(path, MAX_CONFIG_BYTES) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn regular_files_are_read_and_everything_else_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok");
        std::fs::write(&ok, b"version: 1\n").unwrap();
        assert_eq!(read_bounded(&ok, 100).unwrap(), b"version: 1\n");

        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let started = std::time::Instant::now();
        let e = read_bounded(&fifo, 100).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert!(e.to_string().contains("a FIFO"), "{e}");

        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let e = read_bounded(&zero, 100).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");

        let e = read_bounded(dir.path(), 100).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");

        let socket = dir.path().join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let e = read_bounded(&socket, 100).unwrap_err();
        assert!(e.to_string().contains("a socket"), "{e}");

        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; 101]).unwrap();
        let e = read_bounded(&big, 100).unwrap_err();
        assert!(matches!(e, FileError::TooLarge { limit: 100, .. }), "{e}");

        assert!(
            read_config_file(&dir.path().join("absent"))
                .unwrap()
                .is_none()
        );
    }
}
