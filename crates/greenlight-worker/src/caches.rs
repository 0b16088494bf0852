//! Persistent per-toolchain cache directories: `<cache dir>/toolchains/<toolchain>/{cargo,npm}`,
//! exported to every lease as `CARGO_HOME` and `npm_config_cache`.
//!
//! A lease's toolchain is its `toolchain` platform property (`default` without one), so leases
//! built with one toolchain share downloads and registries without seeing another's. Leases
//! of one toolchain share the directories at the same time; cargo and npm lock their own caches.
//! Without these, every remote run of a cargo gate starts from an empty registry.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// The toolchain of leases that name none.
pub(crate) const DEFAULT_TOOLCHAIN: &str = "default";

/// The root of the per-toolchain directories.
#[derive(Debug, Clone)]
pub(crate) struct Caches {
    root: PathBuf,
}

impl Caches {
    /// Caches under `<cache_dir>/toolchains`.
    pub(crate) fn new(cache_dir: &Path) -> Self {
        Self {
            root: cache_dir.join("toolchains"),
        }
    }

    /// The variables that point a lease of `toolchain` at its cache directories, which are
    /// made when missing.
    pub(crate) fn env_for(&self, toolchain: Option<&str>) -> io::Result<Vec<(OsString, OsString)>> {
        let dir = self
            .root
            .join(dir_name(toolchain.unwrap_or(DEFAULT_TOOLCHAIN)));
        let cargo = dir.join("cargo");
        let npm = dir.join("npm");
        std::fs::create_dir_all(&cargo)?;
        std::fs::create_dir_all(&npm)?;
        Ok(vec![
            ("CARGO_HOME".into(), cargo.into_os_string()),
            ("npm_config_cache".into(), npm.into_os_string()),
        ])
    }
}

/// A directory name for a toolchain label: the label itself when it is a plain name, else its
/// plain characters and a hash of the whole label, so `a/b` and `a_b` never share a directory
/// and no label can name `..` or a path.
fn dir_name(toolchain: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+');
    if !toolchain.is_empty()
        && toolchain.len() <= 100
        && toolchain.chars().all(plain)
        && !toolchain.starts_with('.')
    {
        return toolchain.to_owned();
    }
    let kept: String = toolchain
        .chars()
        .map(|c| if plain(c) { c } else { '_' })
        .take(60)
        .collect();
    format!(
        "{}-{:016x}",
        kept.trim_start_matches('.'),
        fnv1a(toolchain.as_bytes())
    )
}

/// FNV-1a, 64 bits: a stable name for a label across runs and builds (not a security hash).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_label_is_its_own_directory_and_others_are_hashed_apart() {
        assert_eq!(dir_name("rust-1.95"), "rust-1.95");
        assert_ne!(dir_name("a/b"), dir_name("a_b"));
        for hostile in ["..", ".", "", "../x", "a/../../b", "x\0y"] {
            let name = dir_name(hostile);
            assert!(
                !name.contains('/') && !name.starts_with('.') && !name.is_empty(),
                "{name}"
            );
        }
    }

    #[test]
    fn leases_of_one_toolchain_share_directories_and_others_do_not() {
        let dir = tempfile::tempdir().expect("temp dir");
        let caches = Caches::new(dir.path());
        let a = caches.env_for(Some("rust-1.95")).expect("made");
        let b = caches.env_for(Some("rust-1.95")).expect("made");
        let c = caches.env_for(None).expect("made");
        assert_eq!(a, b);
        assert_ne!(a, c);
        for (name, path) in a.iter().chain(&c) {
            assert!(Path::new(path).is_dir(), "{name:?} = {path:?}");
        }
        assert!(Path::new(&c[0].1).ends_with("toolchains/default/cargo"));
    }
}
