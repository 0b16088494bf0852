//! A full disk under the state database, through the real binary, on a small tmpfs (root):
//! filled while a run is recorded, and full when the next run opens the file. Both say the
//! disk is full; before, the open said "disk I/O error … check the file is a greenlight state
//! database you can write".

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::path::{Path, PathBuf};
use std::process::Command;

use greenlight_testkit::TempRepo;

/// A tmpfs of `size` mounted on a fresh directory, unmounted when dropped.
struct SmallDisk {
    dir: PathBuf,
    _parent: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> Self {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("disk");
        std::fs::create_dir(&dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .expect("mount runs");
        assert!(
            out.status.success(),
            "this test needs root to mount a tmpfs: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self {
            dir,
            _parent: parent,
        }
    }

    fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
    }
}

#[test]
#[ignore = "needs root to mount a small tmpfs: run scripts/test"]
fn a_full_disk_is_named_when_the_state_file_is_written_and_when_it_is_opened() {
    let disk = SmallDisk::mount("1m");
    let repo = TempRepo::worktree_with_commit();
    // The gate fills the disk (when asked to) once the run is recorded as started: the recorder
    // opens the database on a thread of its own while the gates start, so the gate waits for the
    // run's first commit (the write-ahead log of a database closed cleanly is empty until then).
    // Without the wait a fast gate can fill the disk before the open, which is the open's case.
    let fill = |d: &Path| {
        format!(
            "dd if=/dev/zero of={}/fill bs=4k 2>/dev/null; true",
            d.display()
        )
    };
    let state = disk.path().join("state.db");
    let state_arg = state.to_str().unwrap();
    repo.verify_yaml(&format!(
        "version: 1\ngates:\n  - id: fill\n    command: if [ -f {0}/fill-now ]; then \
         for i in $(seq 1000); do [ -s {2}-wal ] && break; sleep 0.01; done; {1}; fi\n",
        disk.path().display(),
        fill(disk.path()),
        state.display()
    ));
    // A first run makes the database, so the next one's open finds it migrated.
    let first = repo.greenlight(["verify", "--state", state_arg]);
    assert_eq!(first.code, 0, "{}", first.render());
    assert!(
        !disk.path().join("state.db-wal").exists(),
        "a clean close leaves no write-ahead log: {}",
        first.render()
    );
    std::fs::write(disk.path().join("fill-now"), "").unwrap();
    let mid_run = repo.greenlight(["verify", "--state", state_arg]);
    assert_eq!(mid_run.code, 0, "{}", mid_run.render());
    assert!(
        mid_run.stderr.contains("database or disk is full")
            && mid_run.stderr.contains("the disk is full (SQLITE_FULL"),
        "{}",
        mid_run.render()
    );

    // Room again: a run records and closes the file cleanly; then the disk fills before the
    // next run opens it.
    std::fs::remove_file(disk.path().join("fill")).unwrap();
    std::fs::remove_file(disk.path().join("fill-now")).unwrap();
    let clean = repo.greenlight(["verify", "--state", state_arg]);
    // Nothing on stderr but verify's own summary line: no warning about the disk.
    assert_eq!(clean.code, 0, "{}", clean.render());
    assert!(
        clean.stderr.lines().count() == 1 && clean.stderr.starts_with("1 gate: 1 green in "),
        "{}",
        clean.render()
    );
    let filled = Command::new("sh")
        .args(["-c", &fill(disk.path())])
        .status()
        .unwrap();
    assert!(filled.success());
    let at_open = repo.greenlight(["verify", "--state", state_arg]);
    assert_eq!(at_open.code, 0, "{}", at_open.render());
    assert!(
        at_open.stderr.contains(&format!(
            "the disk holding it is full (ENOSPC: nothing more can be written in {})",
            disk.path().display()
        )),
        "{}",
        at_open.render()
    );
    assert!(
        !at_open
            .stderr
            .contains("check the file is a greenlight state database"),
        "{}",
        at_open.render()
    );
    let history = repo.greenlight(["history", "--state", state_arg]);
    assert_eq!(history.code, 1, "{}", history.render());
    assert!(history.stderr.contains("(ENOSPC"), "{}", history.render());
    let left: Vec<_> = std::fs::read_dir(disk.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("space-probe"))
        .collect();
    assert!(left.is_empty(), "the space check left {left:?}");
}
