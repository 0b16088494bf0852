//! What dead earlier workers of the same cache directory left behind: lease processes still
//! running after their worker was killed with SIGKILL, and their lease directories.
//!
//! Workers that share a cache directory share a sweep scope (a hash of its path), and every
//! lease process carries a run token naming its worker's pid and that scope; a process whose
//! worker pid is gone is an orphan, and any live worker of the scope ends it. Lease directories
//! are named `<worker pid>-…` for the same reason. A live worker's leases are never touched.

use std::path::{Path, PathBuf};

use crate::caches::fnv1a;

/// Where the sweeps look.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    /// The sweep scope of every lease process this worker starts.
    pub(crate) token_scope: String,
    /// The parent of the lease directories.
    pub(crate) leases_dir: PathBuf,
}

/// What one sweep removed.
#[derive(Debug, Default)]
pub(crate) struct Swept {
    /// Pid and command line of each process ended.
    pub(crate) processes: Vec<String>,
    /// How many lease directories were removed.
    pub(crate) directories: usize,
}

impl Scope {
    /// The scope of workers using `cache_dir` (best made absolute by the caller, so two
    /// spellings of one directory agree).
    pub(crate) fn new(cache_dir: &Path) -> Self {
        Self {
            token_scope: format!("{:016x}", fnv1a(cache_dir.as_os_str().as_encoded_bytes())),
            leases_dir: cache_dir.join("leases"),
        }
    }

    /// Ends orphaned lease processes and removes dead workers' lease directories. Blocking
    /// (a `/proc` scan): run it off the async thread.
    pub(crate) fn sweep(&self) -> Swept {
        let processes = greenlight_proc::sweep_orphaned(&self.token_scope)
            .into_iter()
            .map(|p| format!("{} {}", p.pid, p.command))
            .collect();
        Swept {
            processes,
            directories: self.sweep_directories(),
        }
    }

    fn sweep_directories(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.leases_dir) else {
            return 0;
        };
        let me = std::process::id() as i32;
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let owner = name
                .to_str()
                .and_then(|n| n.split_once('-'))
                .and_then(|(pid, _)| pid.parse::<i32>().ok());
            let Some(owner) = owner else { continue };
            if owner != me
                && greenlight_proc::procs::is_dead(owner)
                && remove_tree(&entry.path()).is_ok()
            {
                removed += 1;
            }
        }
        removed
    }
}

/// Removes a directory tree, first giving back the write and search permission a command may
/// have taken from its own directories (a read-only tree cannot otherwise be emptied).
pub(crate) fn remove_tree(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            make_writable(path);
            std::fs::remove_dir_all(path)
        }
    }
}

fn make_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let mode = meta.permissions().mode();
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o700));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            make_writable(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_read_only_tree_is_removed_whole() {
        let dir = tempfile::tempdir().expect("temp dir");
        let tree = dir.path().join("t");
        std::fs::create_dir_all(tree.join("a/b")).expect("dirs");
        std::fs::write(tree.join("a/b/f"), "x").expect("file");
        for d in ["a/b", "a", ""] {
            let p = tree.join(d);
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o500)).expect("chmod");
        }
        remove_tree(&tree).expect("removed");
        assert!(!tree.exists());
    }

    #[test]
    fn only_dead_workers_lease_directories_are_swept() {
        let dir = tempfile::tempdir().expect("temp dir");
        let scope = Scope::new(dir.path());
        let mine = scope.leases_dir.join(format!("{}-abc", std::process::id()));
        // A pid far above the kernel's limit belongs to nobody.
        let dead = scope.leases_dir.join("2147483600-abc");
        let stranger = scope.leases_dir.join("not-a-lease");
        for d in [&mine, &dead, &stranger] {
            std::fs::create_dir_all(d.join("src")).expect("dirs");
        }
        assert_eq!(scope.sweep_directories(), 1);
        assert!(mine.exists() && stranger.exists() && !dead.exists());
    }

    #[test]
    fn one_cache_directory_is_one_scope() {
        let a = Scope::new(Path::new("/var/cache/w"));
        assert_eq!(
            a.token_scope,
            Scope::new(Path::new("/var/cache/w")).token_scope
        );
        assert_ne!(
            a.token_scope,
            Scope::new(Path::new("/var/cache/x")).token_scope
        );
        assert!(!a.token_scope.contains('-'), "the token splits on '-'");
    }
}
