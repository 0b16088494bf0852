//! `greenlight config move`: CommandMate's `.commandmate/verify.yaml` moved into greenlight's own
//! home, `.greenlight/verify.yaml`, byte for byte.
//!
//! The rule: the move never changes what the file means. Paths a file names (a v2 gate's
//! `matchers:`, `options.remote`'s `tokenFile` and `caFile`) are relative to the file's
//! directory, so the text is read as it will be read at its new place before anything is
//! written, and a file that would read differently there is left where it is.

use std::path::{Path, PathBuf};

use camino::{Utf8Path, Utf8PathBuf};

use super::{ConfigErrors, Home, is_v2, parse_reading, read_matcher_file};

/// What a move did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The file that is gone.
    pub from: PathBuf,
    /// The file written.
    pub to: PathBuf,
    /// How many bytes were moved (the same bytes).
    pub bytes: usize,
}

/// Why nothing was moved. Each says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    /// There is no CommandMate file to move.
    #[error(
        "{0}: not found; there is nothing to move (run in the directory holding .commandmate/, or pass --cwd)"
    )]
    NoSource(PathBuf),
    /// greenlight's home already holds a file.
    #[error(
        "{0} already exists; nothing was moved. Remove or rename it first if the other file should replace it"
    )]
    TargetExists(PathBuf),
    /// A version 1 file is CommandMate's and CommandMate reads it.
    #[error(
        "{0} is version 1, CommandMate's own format, which CommandMate reads there and greenlight reads too; nothing was moved. Pass --any-version to move it anyway (CommandMate then no longer sees it)"
    )]
    VersionOne(PathBuf),
    /// The file cannot be read.
    #[error("{path}: cannot read it ({reason}); nothing was moved")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The path is not UTF-8, which the config reader needs.
    #[error("{0}: the path is not valid UTF-8; nothing was moved")]
    NotUtf8Path(PathBuf),
    /// At its new place the file would not read as it does now.
    #[error(
        "{target}: the file would not read correctly there, so nothing was moved:\n{errors}\nPaths in it (matchers:, tokenFile, caFile) are relative to the file's directory: move the files it names into .greenlight/ too, or write their paths from there (../)"
    )]
    WouldBreak {
        /// Where it would go.
        target: PathBuf,
        /// What reading it there says.
        errors: ConfigErrors,
    },
    /// A file named by `tokenFile` or `caFile` is beside the old file, not the new one.
    #[error(
        "{file}: named by the config relative to its directory, it would be looked for at {moved} after the move; nothing was moved. Move it into .greenlight/ too, or write its path from there (../)"
    )]
    NamedFileLeftBehind {
        /// Where the file is now.
        file: PathBuf,
        /// Where the moved config would look for it.
        moved: PathBuf,
    },
    /// Writing or removing failed.
    #[error("{path}: {reason}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
}

/// Moves `<dir>/.commandmate/verify.yaml` to `<dir>/.greenlight/verify.yaml`: only a `version:
/// 2` file unless `any_version`, never over an existing file, never a file that would read
/// differently at its new place.
pub fn move_to_greenlight_home(dir: &Path, any_version: bool) -> Result<Moved, MoveError> {
    let from = Home::CommandMate.file_in(dir);
    let to = Home::Greenlight.file_in(dir);
    if std::fs::symlink_metadata(&to).is_ok() {
        return Err(MoveError::TargetExists(to));
    }
    let bytes = match crate::file::read_bounded(&from, crate::file::MAX_CONFIG_BYTES) {
        Ok(bytes) => bytes,
        Err(error) if error.is_not_found() => return Err(MoveError::NoSource(from)),
        Err(error) => {
            return Err(MoveError::Unreadable {
                path: from,
                reason: error.reason(),
            });
        }
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return Err(MoveError::Unreadable {
            path: from,
            reason: "it is not UTF-8".into(),
        });
    };
    if !any_version && !is_v2(text) {
        return Err(MoveError::VersionOne(from));
    }
    let target = Utf8PathBuf::from_path_buf(to.clone()).map_err(MoveError::NotUtf8Path)?;
    // `.greenlight/` may not exist yet, and the kernel resolves `.greenlight/../x` only through
    // a directory that does: the named files are read by their paths with `..` taken lexically,
    // as they will resolve once the directory is there.
    let read_lexically = |full: &Utf8Path| {
        let resolved = lexical(full.as_std_path());
        read_matcher_file(&resolved, full.as_str())
    };
    let loaded =
        parse_reading(&target, text, &read_lexically).map_err(|errors| MoveError::WouldBreak {
            target: to.clone(),
            errors,
        })?;
    let old_dir = Home::CommandMate.file_in(dir);
    let old_dir = old_dir.parent().unwrap_or(dir);
    let named = loaded
        .v2
        .iter()
        .filter_map(|v2| v2.options.remote.as_ref())
        .flat_map(|remote| [&remote.token_file, &remote.ca_file])
        .flatten();
    for moved in named {
        let moved = &lexical(moved.as_std_path());
        let relative = moved.strip_prefix(lexical(to.parent().unwrap_or(dir))).ok();
        let left_behind = relative.map(|r| lexical(old_dir).join(r));
        if let Some(file) = left_behind.filter(|file| !moved.exists() && file.exists()) {
            return Err(MoveError::NamedFileLeftBehind {
                file,
                moved: moved.to_path_buf(),
            });
        }
    }
    write_new(&to, &bytes)?;
    std::fs::remove_file(&from).map_err(|e| MoveError::Io {
        path: from.clone(),
        reason: format!(
            "written to {} but cannot remove the old file ({e}); remove it by hand",
            to.display()
        ),
    })?;
    // An empty .commandmate/ is left by nothing else; a non-empty one holds CommandMate's other files.
    let _ = std::fs::remove_dir(old_dir);
    Ok(Moved {
        from,
        to,
        bytes: bytes.len(),
    })
}

/// `path` with each `..` taking away the component before it, without asking the file system.
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Writes `bytes` to a file that must not exist yet (created exclusively, never through a
/// symlink someone placed there meanwhile).
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), MoveError> {
    use std::io::Write as _;
    let io = |e: std::io::Error| MoveError::Io {
        path: path.to_path_buf(),
        reason: format!("cannot write it ({e}); nothing was moved"),
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| {
            let _ = std::fs::remove_file(path);
            io(e)
        })
}
