//! An agent's settings file, changed the careful way: where it is (the project root, the user's
//! agent directories), its text read bounded, and a [`Plan`] — the text before and after —
//! that is shown as a diff or applied.
//!
//! The one rule: a file greenlight changes is never lost or half-written. Before the first
//! change the old bytes go to `<file>.greenlight.bak` (created exclusively, never through a
//! symlink, never replaced), the new text replaces the old atomically with the old permissions,
//! a read-only file or one that changed since it was read is refused, and a project file that
//! leads (through a symlink) outside the project is refused. Both installers — the hooks
//! (`install`) and the MCP server entry (`mcp_install`) — plan their edits as text and leave
//! the writing to this module.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::Error;

/// The suffix of the backup written before a settings file is changed.
pub const BACKUP_SUFFIX: &str = ".greenlight.bak";

/// Where user-level settings live, read from the environment once by the caller.
#[derive(Debug, Clone, Default)]
pub struct Locations {
    /// `HOME`.
    pub home: Option<PathBuf>,
    /// `CLAUDE_CONFIG_DIR`: replaces `~/.claude` when set.
    pub claude_config_dir: Option<PathBuf>,
    /// `CODEX_HOME`: replaces `~/.codex` when set.
    pub codex_home: Option<PathBuf>,
}

impl Locations {
    /// `HOME`, `CLAUDE_CONFIG_DIR` and `CODEX_HOME` as `env` looks them up (the environment
    /// the front end read; empty values count as unset).
    pub fn from_env(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Locations {
        let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        Locations {
            home: var("HOME"),
            claude_config_dir: var("CLAUDE_CONFIG_DIR"),
            codex_home: var("CODEX_HOME"),
        }
    }
}

/// The directory whose `.claude`/`.codex` holds project settings: the top of the git worktree
/// containing `dir` (agents read project settings from there), or `dir` itself outside git.
pub fn project_root(dir: &Path) -> PathBuf {
    let mut cmd = greenlight_proc::git::command(dir);
    cmd.args(["rev-parse", "--show-toplevel"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let output = greenlight_proc::git::run(&mut cmd, None);
    match output {
        Ok(out) if out.status.success() => {
            use std::os::unix::ffi::OsStrExt as _;
            // Bytes, not text: a worktree path need not be UTF-8.
            let mut top: &[u8] = &out.stdout;
            while let [rest @ .., b'\n' | b'\r'] = top {
                top = rest;
            }
            if top.is_empty() {
                dir.to_path_buf()
            } else {
                PathBuf::from(std::ffi::OsStr::from_bytes(top))
            }
        }
        _ => dir.to_path_buf(),
    }
}

/// Refuses a project settings path that leads outside the project: a cloned repository can
/// ship `.claude/settings.json` (or `.claude` itself) as a symlink to a file of the user's, and
/// greenlight would edit that file. A user-scope file may be a symlink anywhere (dotfiles).
pub fn check_inside_project(path: &Path, project: &Path) -> Result<(), Error> {
    let Ok(root) = std::fs::canonicalize(project) else {
        return Ok(());
    };
    let real = if std::fs::symlink_metadata(path).is_ok() {
        std::fs::canonicalize(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?
    } else {
        match path
            .parent()
            .and_then(|dir| std::fs::canonicalize(dir).ok())
        {
            Some(dir) => dir.join(path.file_name().unwrap_or_default()),
            None => return Ok(()),
        }
    };
    if real.starts_with(&root) {
        Ok(())
    } else {
        Err(Error::OutsideProject {
            path: path.to_path_buf(),
            target: real,
        })
    }
}

/// The language a settings file is written in, for the message about a file that is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    Json,
    Toml,
}

impl Syntax {
    /// The error for text that is not valid in this syntax at `line`:`column`.
    pub(crate) fn invalid(self, path: &Path, line: usize, column: usize, message: String) -> Error {
        let path = path.to_path_buf();
        match self {
            Syntax::Json => Error::InvalidJson {
                path,
                line,
                column,
                message,
            },
            Syntax::Toml => Error::InvalidToml {
                path,
                line,
                column,
                message,
            },
        }
    }
}

/// How one settings file is read, created and removed.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    pub syntax: Syntax,
    /// The largest file read, in bytes.
    pub limit: u64,
    /// The permissions of the file when greenlight creates it.
    pub new_mode: u32,
    /// Whether the file's directory is the agent's own (`.claude`, `.codex`), which goes with
    /// the file when greenlight removes a file it created and nothing else is left in it. A
    /// project root or a home directory never goes.
    pub own_dir: bool,
}

/// The file as it is now: where it really is, and its text.
#[derive(Debug, Clone)]
pub(crate) struct Loaded {
    pub path: PathBuf,
    pub target: PathBuf,
    pub before: Option<String>,
    pub rules: Rules,
}

impl Loaded {
    /// The text, unless the file is absent or holds only whitespace.
    pub(crate) fn text(&self) -> Option<&str> {
        self.before.as_deref().filter(|t| !t.trim().is_empty())
    }

    /// True when a backup sits beside the file: the file existed before greenlight first
    /// changed it.
    pub(crate) fn has_backup(&self) -> bool {
        std::fs::symlink_metadata(backup_path(&self.target)).is_ok()
    }

    /// The text of the backup (the file before greenlight first changed it), when there is a
    /// readable one.
    pub(crate) fn backup_text(&self) -> Option<String> {
        read_text(&backup_path(&self.target), &self.rules)
            .ok()
            .flatten()
    }

    /// The plan that turns the file into `after` (`None`: the file goes).
    pub(crate) fn plan(self, after: Option<String>) -> Plan {
        Plan {
            path: self.path,
            target: self.target,
            before: self.before,
            after,
            rules: self.rules,
        }
    }

    /// The plan that leaves the file as it is.
    pub(crate) fn unchanged(self) -> Plan {
        let after = self.before.clone();
        self.plan(after)
    }
}

/// Reads the file behind `path` (following a symlink), as text; `before` is `None` when absent.
pub(crate) fn load(path: &Path, rules: Rules) -> Result<Loaded, Error> {
    let target = if path.is_symlink() {
        std::fs::canonicalize(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?
    } else {
        path.to_path_buf()
    };
    let before = read_text(&target, &rules)?;
    Ok(Loaded {
        path: path.to_path_buf(),
        target,
        before,
        rules,
    })
}

/// The settings file's text, read bounded and without blocking (a FIFO or a device at the
/// path is refused, not waited on); `None` when absent.
fn read_text(path: &Path, rules: &Rules) -> Result<Option<String>, Error> {
    let bytes = match greenlight_gate::file::read_bounded(path, rules.limit) {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => {
            return Err(Error::Unusable {
                path: path.to_path_buf(),
                reason: e.reason(),
            });
        }
    };
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Some(text)),
        Err(e) => {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let text = String::from_utf8_lossy(valid);
            let (line, column) = line_col(&text, text.len());
            Err(rules
                .syntax
                .invalid(path, line, column, "bytes that are not UTF-8".to_string()))
        }
    }
}

/// The 1-based line and column (in characters) of byte `at` of `text`.
pub(crate) fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn backup_path(target: &Path) -> PathBuf {
    let mut name = target.as_os_str().to_owned();
    name.push(BACKUP_SUFFIX);
    PathBuf::from(name)
}

/// A change to one settings file, computed but not yet made.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The file as named (project or user settings path).
    pub path: PathBuf,
    /// The file actually written: `path`, or the file a symlink at `path` points to, so a
    /// settings file kept in a dotfiles repository stays a symlink.
    pub target: PathBuf,
    /// The file's current text; `None` when it does not exist.
    pub before: Option<String>,
    /// The file's new text; `None` when the file does not exist afterwards (an uninstall that
    /// leaves nothing in a file greenlight created).
    pub after: Option<String>,
    rules: Rules,
}

/// What [`Plan::apply`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The file already said what was asked; nothing was written.
    Unchanged,
    /// The file was written.
    Written {
        /// Where the file's bytes before greenlight first changed it are kept, when there were
        /// any.
        backup: Option<Backup>,
    },
    /// The file held nothing but greenlight's entries, and no earlier file was backed up, so
    /// greenlight created it: it was removed.
    Removed,
}

/// The backup beside a settings file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backup {
    /// Written now, with the bytes the file had before this change.
    Made(PathBuf),
    /// An earlier backup was there already and is kept as it is: it holds the file as it was
    /// before greenlight first changed it, which is the copy worth keeping.
    Kept(PathBuf),
}

impl Plan {
    /// True when applying the plan would change the file.
    pub fn changes(&self) -> bool {
        self.before != self.after
    }

    /// A unified diff of the change (empty when there is none), for `--dry-run`.
    pub fn diff(&self) -> String {
        if !self.changes() {
            return String::new();
        }
        let name = self.path.display().to_string();
        let old_header = if self.before.is_some() {
            name.clone()
        } else {
            "/dev/null".to_string()
        };
        let new_header = if self.after.is_some() {
            name
        } else {
            "/dev/null".to_string()
        };
        let before = self.before.as_deref().unwrap_or("");
        let after = self.after.as_deref().unwrap_or("");
        similar::TextDiff::from_lines(before, after)
            .unified_diff()
            .context_radius(3)
            .header(&old_header, &new_header)
            .to_string()
    }

    /// Makes the change: backup first, then an atomic replace (or removal). Refuses when the
    /// file changed since the plan was made, when it is read-only, or when the backup path
    /// holds something other than a regular file.
    pub fn apply(&self) -> Result<Applied, Error> {
        if !self.changes() {
            return Ok(Applied::Unchanged);
        }
        let now = read_text(&self.target, &self.rules)?;
        if now != self.before {
            return Err(Error::ChangedUnderfoot {
                path: self.path.clone(),
            });
        }
        let mode = match std::fs::metadata(&self.target) {
            Ok(meta) => {
                use std::os::unix::fs::PermissionsExt as _;
                let mode = meta.permissions().mode() & 0o7777;
                if mode & 0o200 == 0 {
                    return Err(Error::ReadOnly {
                        path: self.path.clone(),
                    });
                }
                Some(mode)
            }
            Err(_) => None,
        };
        // A file that goes is one greenlight created holding only its own entries: nothing of
        // the user's to back up.
        let backup = match (&self.before, mode, &self.after) {
            (Some(old), Some(mode), Some(_)) => {
                Some(make_backup(&backup_path(&self.target), old, mode)?)
            }
            _ => None,
        };
        match &self.after {
            Some(text) => {
                write_atomically(&self.target, text.as_bytes(), self.rules.new_mode)?;
                Ok(Applied::Written { backup })
            }
            None => {
                std::fs::remove_file(&self.target).map_err(|source| Error::Write {
                    path: self.target.clone(),
                    source,
                })?;
                // The agent directory install made goes too, if nothing else is in it
                // (remove_dir refuses a directory that is not empty).
                if self.rules.own_dir
                    && let Some(dir) = self.target.parent()
                {
                    let _ = std::fs::remove_dir(dir);
                }
                Ok(Applied::Removed)
            }
        }
    }
}

/// Writes the backup with `O_CREAT | O_EXCL | O_NOFOLLOW` and the original's mode, so nothing
/// already at the path (a symlink a cloned repository ships, an earlier backup) is written
/// through or replaced. An earlier regular backup is kept; anything else there is refused.
fn make_backup(path: &Path, bytes: &str, mode: u32) -> Result<Backup, Error> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode & 0o777)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path);
    match created {
        Ok(mut file) => {
            let written = file
                .write_all(bytes.as_bytes())
                .and_then(|()| file.sync_all());
            if let Err(source) = written {
                let _ = std::fs::remove_file(path);
                return Err(Error::Write {
                    path: path.to_path_buf(),
                    source,
                });
            }
            Ok(Backup::Made(path.to_path_buf()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.file_type().is_file() => Ok(Backup::Kept(path.to_path_buf())),
                _ => Err(Error::BackupNotRegular {
                    path: path.to_path_buf(),
                }),
            }
        }
        Err(source) => Err(Error::Write {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes `bytes` to a temporary file beside `path` and renames it over `path`, keeping the
/// old file's permissions (`new_mode` for a new file), so a crash never leaves a half-written
/// settings file.
fn write_atomically(path: &Path, bytes: &[u8], new_mode: u32) -> Result<(), Error> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|source| Error::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let err = |source| Error::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".greenlight-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(err)?;
    tmp.write_all(bytes).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    let permissions = match std::fs::metadata(path) {
        Ok(meta) => meta.permissions(),
        Err(_) => {
            use std::os::unix::fs::PermissionsExt as _;
            // Not the temporary file's 0600: the mode the agent gives such a file.
            std::fs::Permissions::from_mode(new_mode)
        }
    };
    std::fs::set_permissions(tmp.path(), permissions).map_err(err)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_count_characters_from_one() {
        assert_eq!(line_col("ab\ncdé", 0), (1, 1));
        assert_eq!(line_col("ab\ncdé", 3), (2, 1));
        assert_eq!(line_col("ab\ncdé", "ab\ncdé".len()), (2, 4));
    }
}
