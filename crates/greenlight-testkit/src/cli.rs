//! A command run to its end from a test: the real binary from any directory, or any prepared
//! `Command` (such as [`crate::TempRepo::command`]), with stdin fed from bytes and an optional
//! time limit, finished as a [`Run`].

use std::ffi::OsStr;
use std::io::{ErrorKind, Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::run::{Run, greenlight_bin};

/// What the child reads on stdin.
enum Stdin {
    /// Nothing: stdin is /dev/null, as `Command::output` gives it.
    Null,
    /// These bytes, then end of file. `may_go_unread` accepts a child that exits first.
    Bytes { bytes: Vec<u8>, may_go_unread: bool },
}

/// A command to run once, to its end, with its output captured.
pub struct Cli {
    cmd: Command,
    stdin: Stdin,
    limit: Option<Duration>,
    paths: Vec<(PathBuf, String)>,
}

impl Cli {
    /// The real `greenlight` binary with `args`, in the test's own directory and environment.
    pub fn new<I, S>(args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(greenlight_bin());
        cmd.args(args);
        Self::from_command(cmd)
    }

    /// Any prepared command, run the same way.
    pub fn from_command(cmd: Command) -> Self {
        Self {
            cmd,
            stdin: Stdin::Null,
            limit: None,
            paths: Vec::new(),
        }
    }

    /// Runs it in `dir`.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    /// Sets one environment variable.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    /// Removes one environment variable, so the caller's own setting cannot leak in.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.cmd.env_remove(key);
        self
    }

    /// Feeds `bytes` on stdin; the child must read them all (a broken pipe fails the test).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Stdin::Bytes {
            bytes: bytes.into(),
            may_go_unread: false,
        };
        self
    }

    /// Feeds `bytes` on stdin to a child that may exit before reading them (a usage error
    /// does), so the broken pipe that follows is not a failure.
    pub fn offer_stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Stdin::Bytes {
            bytes: bytes.into(),
            may_go_unread: true,
        };
        self
    }

    /// Kills the child and fails the test if it is still running after `limit`: for commands
    /// whose bug would be to hang.
    pub fn within(mut self, limit: Duration) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Replaces `path` with `name` in [`Run::render`].
    pub fn filter_path(mut self, path: &Path, name: &str) -> Self {
        self.paths.push((path.to_path_buf(), name.to_owned()));
        self
    }

    /// Runs the command to its end.
    pub fn run(mut self) -> Run {
        let piped = matches!(self.stdin, Stdin::Bytes { .. });
        let mut child = self
            .cmd
            .stdin(if piped { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{:?} cannot start: {e}", self.cmd.get_program()));
        // Stdin is written and the output read on threads, so neither side can fill a pipe
        // while the other waits.
        let writer = match (
            std::mem::replace(&mut self.stdin, Stdin::Null),
            child.stdin.take(),
        ) {
            (
                Stdin::Bytes {
                    bytes,
                    may_go_unread,
                },
                Some(mut pipe),
            ) => Some(std::thread::spawn(move || match pipe.write_all(&bytes) {
                Err(e) if !(may_go_unread && e.kind() == ErrorKind::BrokenPipe) => Err(e),
                _ => Ok(()),
            })),
            _ => None,
        };
        let stdout = read_all(child.stdout.take());
        let stderr = read_all(child.stderr.take());
        let status = match self.limit {
            None => child.wait().unwrap(),
            Some(limit) => {
                let started = Instant::now();
                loop {
                    if let Some(status) = child.try_wait().unwrap() {
                        break status;
                    }
                    if started.elapsed() > limit {
                        let _ = child.kill();
                        let _ = child.wait();
                        panic!(
                            "{:?} still running after {limit:?}: it hung",
                            self.cmd.get_program()
                        );
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        };
        if let Some(writer) = writer {
            writer
                .join()
                .unwrap()
                .unwrap_or_else(|e| panic!("stdin was not accepted: {e}"));
        }
        let out = Output {
            status,
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        };
        let paths: Vec<(&Path, &str)> = self
            .paths
            .iter()
            .map(|(p, n)| (p.as_path(), n.as_str()))
            .collect();
        Run::from_output(out, &paths)
    }
}

/// Sends `signal` (as `kill` spells it) to a spawned child, waits for it to end, and asserts it
/// ended within `limit`: how a test checks that greenlight stops promptly when interrupted.
pub fn signal_and_wait(child: Child, signal: &str, limit: Duration) -> Run {
    crate::procs::signal(signal, child.id());
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < limit,
        "it took {:?} to stop after {signal}",
        started.elapsed()
    );
    Run::from_output(out, &[])
}

fn read_all(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            pipe.read_to_end(&mut bytes).unwrap();
        }
        bytes
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Cli {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        Cli::from_command(cmd)
    }

    #[test]
    fn stdin_reaches_the_child_and_both_outputs_come_back() {
        let run = sh("cat; echo err >&2; exit 3").stdin("hello\n").run();
        assert_eq!((run.code, run.stdout.as_str()), (3, "hello\n"));
        assert_eq!(run.stderr, "err\n");
    }

    #[test]
    fn without_stdin_the_child_reads_end_of_file() {
        let run = sh("cat; echo done").run();
        assert_eq!(run.stdout, "done\n");
    }

    #[test]
    fn offered_stdin_may_go_unread_but_required_stdin_may_not() {
        let big = vec![b'x'; 1 << 20];
        assert_eq!(sh("exit 0").offer_stdin(big.clone()).run().code, 0);
        assert!(std::panic::catch_unwind(|| sh("exit 0").stdin(big).run()).is_err());
    }

    #[test]
    fn env_and_dir_are_passed_and_a_hang_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let run = sh("echo \"$X\"; pwd")
            .env("X", "set")
            .current_dir(dir.path())
            .filter_path(&dir.path().canonicalize().unwrap(), "[DIR]")
            .run();
        assert!(run.render().contains("set\n[DIR]\n"), "{}", run.render());
        let hung = std::panic::catch_unwind(|| {
            sh("exec sleep 30").within(Duration::from_millis(200)).run()
        });
        assert!(hung.is_err());
    }

    #[test]
    fn a_signalled_child_is_waited_for_and_its_output_kept() {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!(
                "trap 'echo bye; exit 7' HUP; echo ready; touch '{}'; while :; do sleep 0.05; done",
                ready.display()
            ))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = cmd.spawn().unwrap();
        // The trap is set before the marker is made, so the signal cannot come too early.
        crate::procs::wait_until(Duration::from_secs(10), "the script never started", || {
            ready.exists().then_some(())
        });
        let run = signal_and_wait(child, "-HUP", Duration::from_secs(5));
        assert_eq!((run.code, run.stdout.as_str()), (7, "ready\nbye\n"));
    }

    #[test]
    fn the_output_holds_much_more_than_a_pipe_buffer() {
        let run = sh("head -c 1000000 /dev/zero | tr '\\0' y")
            .within(Duration::from_secs(20))
            .run();
        assert_eq!(run.stdout.len(), 1_000_000);
    }
}
