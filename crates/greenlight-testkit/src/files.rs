//! Fixture files: temp dirs and files written or read with a panic that names the path, since a
//! fixture that cannot be made should stop the test loudly.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

/// A fresh temp dir, removed on drop.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

/// Writes `contents` to `path`, creating its parent directories.
pub fn write_file(path: &Path, contents: impl AsRef<[u8]>) {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    }
    fs::write(path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Writes an executable script (mode 0755) to `path`, creating its parent directories.
pub fn write_executable(path: &Path, script: &str) {
    write_file(path, script);
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// Reads `path` as text.
pub fn read_file(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The lines of a log that processes append to (`>>`), or none while nothing has written it.
pub fn log_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Makes a named pipe at `path` (creating its parent directories): a file whose open blocks
/// until a writer comes, which no reader of untrusted files may wait on.
pub fn mkfifo(path: &Path) {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    }
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(ok.success(), "mkfifo {}", path.display());
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileTypeExt as _;

    use super::*;

    #[test]
    fn files_are_written_under_new_directories_and_read_back() {
        let dir = temp_dir();
        let path = dir.path().join("a/b/c.txt");
        write_file(&path, "text\n");
        assert_eq!(read_file(&path), "text\n");
        let script = dir.path().join("bin/tool");
        write_executable(&script, "#!/bin/sh\nexit 0\n");
        let mode = fs::metadata(&script).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        let fifo = dir.path().join("p/fifo");
        mkfifo(&fifo);
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn a_missing_file_names_its_path() {
        let err = std::panic::catch_unwind(|| read_file(Path::new("/nonexistent/x"))).unwrap_err();
        let text = err.downcast_ref::<String>().unwrap();
        assert!(text.contains("read /nonexistent/x"), "{text}");
    }
}
