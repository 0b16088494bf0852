//! Where a verify.yaml lives: greenlight's own home (`.greenlight/verify.yaml`, version 1 or 2)
//! or CommandMate's (`.commandmate/verify.yaml`, version 1 only, exactly CommandMate's contract).
//!
//! The one rule: a file's home is read from its path, never from its text, so the same file
//! means the same thing to `verify`, the hook, the goal loop, the MCP server and a snapshot of
//! it. A file is greenlight's when it sits in a `.greenlight` directory; every other path,
//! `--config` ones included, is read as CommandMate reads it, so greenlight can stand in for
//! CommandMate's runner without accepting a file CommandMate would refuse.

use std::path::{Path, PathBuf};

/// The directory greenlight keeps its own files in, at the top of a worktree.
pub const GREENLIGHT_DIR: &str = ".greenlight";
/// The directory CommandMate keeps its files in.
pub const COMMANDMATE_DIR: &str = ".commandmate";
/// The name of the config file in either home.
pub const FILE_NAME: &str = "verify.yaml";
/// The command that moves CommandMate's file into greenlight's home.
pub const MOVE_COMMAND: &str = "greenlight config move";

/// Which home a verify.yaml belongs to, which decides the versions it may declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// `.greenlight/verify.yaml`: version 1 or 2.
    Greenlight,
    /// `.commandmate/verify.yaml` (and any file outside a `.greenlight` directory): version 1,
    /// as CommandMate's runner reads it.
    CommandMate,
}

impl Home {
    /// The home of the file at `path`: greenlight's when its directory is named `.greenlight`.
    pub fn of(path: &Path) -> Home {
        let dir = path.parent().and_then(Path::file_name);
        if dir.is_some_and(|d| d == GREENLIGHT_DIR) {
            Home::Greenlight
        } else {
            Home::CommandMate
        }
    }

    /// The home's directory name (`.greenlight` or `.commandmate`).
    pub fn dir(self) -> &'static str {
        match self {
            Home::Greenlight => GREENLIGHT_DIR,
            Home::CommandMate => COMMANDMATE_DIR,
        }
    }

    /// The file's path relative to the directory holding the home: `.greenlight/verify.yaml`.
    pub fn relative(self) -> PathBuf {
        Path::new(self.dir()).join(FILE_NAME)
    }

    /// The config file of this home in `dir`.
    pub fn file_in(self, dir: &Path) -> PathBuf {
        dir.join(self.relative())
    }

    /// Whether a file here may declare `version: 2`.
    pub fn reads_v2(self) -> bool {
        self == Home::Greenlight
    }
}

/// A config found by [`locate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The file.
    pub path: PathBuf,
    /// Its home.
    pub home: Home,
    /// CommandMate's file that was also found and is not read, because greenlight's wins.
    pub shadowed: Option<PathBuf>,
}

impl Located {
    /// The directory the config belongs to (the one holding its home directory): where its
    /// gates run.
    pub fn root(&self) -> PathBuf {
        root_of(&self.path)
    }

    /// The warning to show once when both homes hold a file (a user who edits CommandMate's
    /// file would otherwise wonder why nothing changes).
    pub fn shadow_warning(&self) -> Option<String> {
        self.shadowed.as_ref().map(|other| {
            format!(
                "greenlight: warning: both {} and {} exist; greenlight reads {} (its own) and \
                 ignores the other, which CommandMate still reads",
                self.path.display(),
                other.display(),
                self.path.display()
            )
        })
    }
}

/// The directory a config at `path` belongs to: the parent of its home directory.
pub fn root_of(path: &Path) -> PathBuf {
    path.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Finds the config `cwd` is judged by: greenlight's `.greenlight/verify.yaml` in `cwd` or the
/// nearest directory above it, else CommandMate's `.commandmate/verify.yaml` the same way. Each
/// search stops at the worktree's top (the first directory holding `.git`), so a session
/// started in a subdirectory still finds its worktree's gates and never another project's.
pub fn locate(cwd: &Path) -> Option<Located> {
    let greenlight = find_in_worktree(cwd, Home::Greenlight);
    let commandmate = find_in_worktree(cwd, Home::CommandMate);
    match (greenlight, commandmate) {
        (Some(path), shadowed) => Some(Located {
            path,
            home: Home::Greenlight,
            shadowed,
        }),
        (None, Some(path)) => Some(Located {
            path,
            home: Home::CommandMate,
            shadowed: None,
        }),
        (None, None) => None,
    }
}

fn find_in_worktree(cwd: &Path, home: Home) -> Option<PathBuf> {
    for dir in cwd.ancestors() {
        let candidate = home.file_in(dir);
        // Anything at the path counts, not only a regular file: a FIFO or a device there is a
        // broken config to report, not a missing one to be silent about.
        if std::fs::symlink_metadata(&candidate).is_ok() {
            return Some(candidate);
        }
        if dir.join(".git").exists() {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn write(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "version: 1\n").unwrap();
    }

    #[test]
    fn locate_looks_up_to_the_worktree_top_and_no_further() {
        let outer = tempfile::tempdir().unwrap();
        // A verify.yaml above the worktree belongs to another project.
        write(&outer.path().join(".commandmate/verify.yaml"));
        write(&outer.path().join(".greenlight/verify.yaml"));
        let top = outer.path().join("repo");
        let deep = top.join("src/a");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(top.join(".git")).unwrap();
        assert_eq!(locate(&deep), None);

        // Anything at the path is found, from any directory below it, even a dangling symlink.
        std::fs::create_dir_all(top.join(".commandmate")).unwrap();
        let path = top.join(".commandmate/verify.yaml");
        std::os::unix::fs::symlink("/nonexistent/verify.yaml", &path).unwrap();
        let found = locate(&deep).unwrap();
        assert_eq!(
            (found.path.as_path(), found.home),
            (path.as_path(), Home::CommandMate)
        );
        assert_eq!(found.root(), top);
        assert_eq!(found.shadow_warning(), None);
    }

    #[test]
    fn greenlight_s_home_wins_even_above_commandmate_s_and_says_so() {
        let top = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(top.path().join(".git")).unwrap();
        let ours = top.path().join(".greenlight/verify.yaml");
        let theirs = top.path().join("pkg/.commandmate/verify.yaml");
        write(&ours);
        write(&theirs);
        let found = locate(&top.path().join("pkg")).unwrap();
        assert_eq!(found.path, ours);
        assert_eq!(found.home, Home::Greenlight);
        assert_eq!(found.shadowed.as_deref(), Some(theirs.as_path()));
        assert!(
            found
                .shadow_warning()
                .unwrap()
                .contains("ignores the other")
        );
    }

    #[test]
    fn the_home_is_read_from_the_directory_name() {
        assert_eq!(
            Home::of(Path::new("/r/.greenlight/verify.yaml")),
            Home::Greenlight
        );
        assert_eq!(Home::of(Path::new(".greenlight/ci.yaml")), Home::Greenlight);
        assert_eq!(
            Home::of(Path::new("/r/.commandmate/verify.yaml")),
            Home::CommandMate
        );
        assert_eq!(
            Home::of(Path::new("fixtures/bad-version.yaml")),
            Home::CommandMate
        );
        assert_eq!(Home::of(Path::new("verify.yaml")), Home::CommandMate);
    }
}
