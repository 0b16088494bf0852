//! The whole output of every gate a `verify` tool call ran, kept on disk beside the state
//! database so the `evidence` tool can page through it: a 50 MB log never has to fit in one
//! answer, and the answer to `verify` stays a few lines.
//!
//! Layout: `<state dir>/evidence/<run id>/<gate number>.<attempt>.log` plus `gates.json` (the
//! gate ids in order). A run's directory is written under a pending name and renamed to its
//! run id (`run-7`, the recorded run's stream) when the run ends, so a reader never sees half a
//! run under a final name. The newest [`KEEP_RUNS`] runs are kept; each gate attempt keeps at
//! most [`MAX_SPOOL_BYTES`] (what is past that is counted, not kept).

use std::fs::{self, File};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// How many runs' evidence is kept; older directories are removed when a run starts.
pub const KEEP_RUNS: usize = 20;

/// The most kept of one gate attempt's output.
pub const MAX_SPOOL_BYTES: u64 = 512 << 20;

/// The default page of the `evidence` tool.
pub const DEFAULT_PAGE: u64 = 64 << 10;

/// The largest page the `evidence` tool returns.
pub const MAX_PAGE: u64 = 1 << 20;

/// What is kept of a run: the gates in order, and per attempt how much was written.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Manifest {
    gates: Vec<ManifestGate>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ManifestGate {
    id: String,
    /// Bytes the gate printed per attempt (kept or not).
    attempts: Vec<u64>,
}

/// The evidence directory of one running verify.
pub struct Spool {
    root: PathBuf,
    pending: PathBuf,
    manifest: Manifest,
    current: Option<Current>,
    /// The first write error, reported once in the answer; the verdicts do not depend on it.
    error: Option<String>,
}

struct Current {
    gate: usize,
    attempt: u8,
    file: BufWriter<File>,
    written: u64,
    printed: u64,
}

impl Spool {
    /// Starts a run's evidence under `root` (`<state dir>/evidence`), pruning old runs.
    pub fn start(root: &Path, gate_ids: &[String]) -> Result<Spool, String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
        prune(root, KEEP_RUNS.saturating_sub(1));
        let pending = root.join(format!(
            ".pending-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&pending).map_err(|e| format!("{}: {e}", pending.display()))?;
        let manifest = Manifest {
            gates: gate_ids
                .iter()
                .map(|id| ManifestGate {
                    id: id.clone(),
                    attempts: Vec::new(),
                })
                .collect(),
        };
        Ok(Spool {
            root: root.to_path_buf(),
            pending,
            manifest,
            current: None,
            error: None,
        })
    }

    /// Appends a chunk of gate `id`'s attempt `attempt`.
    pub fn chunk(&mut self, id: &str, attempt: u8, bytes: &[u8]) {
        let same = self
            .current
            .as_ref()
            .is_some_and(|c| self.manifest.gates[c.gate].id == id && c.attempt == attempt);
        if !same {
            self.close_current();
            let Some(gate) = self.manifest.gates.iter().position(|g| g.id == id) else {
                return;
            };
            let path = self.pending.join(file_name(gate, attempt));
            match File::create(&path) {
                Ok(file) => {
                    self.current = Some(Current {
                        gate,
                        attempt,
                        file: BufWriter::with_capacity(256 << 10, file),
                        written: 0,
                        printed: 0,
                    });
                }
                Err(e) => {
                    self.fail(format!("{}: {e}", path.display()));
                    return;
                }
            }
        }
        let Some(current) = self.current.as_mut() else {
            return;
        };
        current.printed += bytes.len() as u64;
        let room = MAX_SPOOL_BYTES.saturating_sub(current.written);
        let keep = &bytes[..bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX))];
        if keep.is_empty() {
            return;
        }
        match current.file.write_all(keep) {
            Ok(()) => current.written += keep.len() as u64,
            Err(e) => {
                let message = format!("{}: {e}", self.pending.display());
                self.current = None;
                self.fail(message);
            }
        }
    }

    fn fail(&mut self, message: String) {
        if self.error.is_none() {
            self.error = Some(message);
        }
    }

    fn close_current(&mut self) {
        if let Some(mut current) = self.current.take() {
            if let Err(e) = current.file.flush() {
                self.fail(format!("{}: {e}", self.pending.display()));
            }
            let attempts = &mut self.manifest.gates[current.gate].attempts;
            let index = usize::from(current.attempt.saturating_sub(1));
            if attempts.len() <= index {
                attempts.resize(index + 1, 0);
            }
            attempts[index] = current.printed;
        }
    }

    /// Ends the run: its directory takes the name `run_id`. Returns the write error, if any.
    pub fn finish(mut self, run_id: &str) -> Option<String> {
        self.close_current();
        let manifest = serde_json::to_vec(&self.manifest).unwrap_or_default();
        if let Err(e) = fs::write(self.pending.join("gates.json"), manifest) {
            self.fail(format!("{}: {e}", self.pending.display()));
        }
        let target = self.root.join(run_id);
        // A run id seen before (a state database that was deleted) replaces the old evidence.
        let _ = fs::remove_dir_all(&target);
        if let Err(e) = fs::rename(&self.pending, &target) {
            self.fail(format!("{}: {e}", target.display()));
            let _ = fs::remove_dir_all(&self.pending);
        }
        self.error.take()
    }
}

impl Drop for Spool {
    /// A run that ends without `finish` (the call was cancelled) leaves no pending directory.
    fn drop(&mut self) {
        self.current = None;
        if self.pending.exists() {
            let _ = fs::remove_dir_all(&self.pending);
        }
    }
}

fn file_name(gate: usize, attempt: u8) -> String {
    format!("{}.{attempt}.log", gate + 1)
}

/// Keeps the newest `keep` run directories (by modification time) and removes pending
/// directories whose process is gone.
fn prune(root: &Path, keep: usize) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    let mut runs = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(rest) = name.strip_prefix(".pending-") {
            let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
            let alive = pid.is_some_and(|p| Path::new(&format!("/proc/{p}")).exists());
            if !alive {
                let _ = fs::remove_dir_all(entry.path());
            }
            continue;
        }
        let modified = entry
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(std::time::SystemTime::UNIX_EPOCH);
        runs.push((modified, entry.path()));
    }
    runs.sort_by_key(|run| std::cmp::Reverse(run.0));
    for (_, path) in runs.into_iter().skip(keep) {
        let _ = fs::remove_dir_all(path);
    }
}

/// One page of a gate's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The attempt read (1 or 2).
    pub attempt: u8,
    /// How many attempts the gate had.
    pub attempts: u8,
    /// The byte offset the page starts at (moved back to a character boundary if needed).
    pub offset: u64,
    /// Where the next page starts; `None` at the end.
    pub next_offset: Option<u64>,
    /// Bytes kept of the attempt's output.
    pub kept_bytes: u64,
    /// Bytes the gate printed (more than `kept_bytes` past [`MAX_SPOOL_BYTES`]).
    pub printed_bytes: u64,
    /// The page's text (invalid UTF-8 replaced, never dropped).
    pub text: String,
}

/// Why a page cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// No such run kept.
    #[error(
        "no evidence is kept for run `{0}`: evidence is kept for the newest {KEEP_RUNS} runs of the `verify` tool; call `verify` again"
    )]
    NoRun(String),
    /// The run had no such gate.
    #[error("run `{run}` has no gate `{gate}`; its gates: {known}")]
    NoGate {
        /// The run id.
        run: String,
        /// The gate asked for.
        gate: String,
        /// The gates it had.
        known: String,
    },
    /// The gate never ran in that run.
    #[error("gate `{gate}` printed nothing in run `{run}` (it did not run, or was skipped)")]
    NotRun {
        /// The run id.
        run: String,
        /// The gate.
        gate: String,
    },
    /// The attempt asked for does not exist.
    #[error(
        "gate `{gate}` ran {attempts} attempt(s) in run `{run}`; ask for attempt 1..={attempts}"
    )]
    NoAttempt {
        /// The run id.
        run: String,
        /// The gate.
        gate: String,
        /// How many it had.
        attempts: u8,
    },
    /// A run id that is not a directory name.
    #[error("`{0}` is not a run id: use the `run_id` a `verify` answer gave (e.g. `run-7`)")]
    BadRunId(String),
    /// The files could not be read.
    #[error("{0}")]
    Io(String),
}

/// Reads `limit` bytes from `offset` of gate `gate`'s attempt `attempt` (default: the last) of
/// run `run`.
pub fn page(
    root: &Path,
    run: &str,
    gate: &str,
    attempt: Option<u8>,
    offset: u64,
    limit: u64,
) -> Result<Page, PageError> {
    if run.is_empty() || run.starts_with('.') || run.contains(['/', '\\']) || run == ".." {
        return Err(PageError::BadRunId(run.to_owned()));
    }
    let dir = root.join(run);
    let manifest = fs::read(dir.join("gates.json")).map_err(|_| PageError::NoRun(run.into()))?;
    let manifest: Manifest = serde_json::from_slice(&manifest)
        .map_err(|e| PageError::Io(format!("{}: {e}", dir.join("gates.json").display())))?;
    let Some(index) = manifest.gates.iter().position(|g| g.id == gate) else {
        let known: Vec<&str> = manifest.gates.iter().map(|g| g.id.as_str()).collect();
        return Err(PageError::NoGate {
            run: run.into(),
            gate: gate.into(),
            known: known.join(", "),
        });
    };
    let printed = &manifest.gates[index].attempts;
    let attempts = u8::try_from(printed.len()).unwrap_or(u8::MAX);
    if attempts == 0 {
        return Err(PageError::NotRun {
            run: run.into(),
            gate: gate.into(),
        });
    }
    let attempt = attempt.unwrap_or(attempts);
    if attempt == 0 || attempt > attempts {
        return Err(PageError::NoAttempt {
            run: run.into(),
            gate: gate.into(),
            attempts,
        });
    }
    let path = dir.join(file_name(index, attempt));
    let io = |e: std::io::Error| PageError::Io(format!("{}: {e}", path.display()));
    let mut file = File::open(&path).map_err(io)?;
    let kept = file.metadata().map_err(io)?.len();
    let limit = limit.clamp(1, MAX_PAGE);
    let mut start = offset.min(kept);
    // Three bytes before the start show whether it cuts a character; the page then starts at
    // that character, so pages joined in order give the text of the whole output.
    let back = start.min(3);
    file.seek(SeekFrom::Start(start - back)).map_err(io)?;
    let want = usize::try_from(back + limit + 3).unwrap_or(usize::MAX);
    let mut buf = Vec::with_capacity(want);
    Read::by_ref(&mut file)
        .take(want as u64)
        .read_to_end(&mut buf)
        .map_err(io)?;
    let lead = char_start(&buf, usize::try_from(back).unwrap_or(0));
    start = start - back + lead as u64;
    let body = &buf[lead..];
    let mut end = body.len().min(usize::try_from(limit).unwrap_or(usize::MAX));
    let at_eof = start + body.len() as u64 >= kept;
    if !(at_eof && end == body.len()) {
        end = char_start(body, end);
        if end == 0 {
            // One character longer than the page: take it whole rather than return nothing.
            end = body
                .len()
                .min(char_width(body.first().copied().unwrap_or(0)));
        }
    }
    let next = start + end as u64;
    Ok(Page {
        attempt,
        attempts,
        offset: start,
        next_offset: (next < kept).then_some(next),
        kept_bytes: kept,
        printed_bytes: printed[usize::from(attempt - 1)].max(kept),
        text: String::from_utf8_lossy(&body[..end]).into_owned(),
    })
}

/// The bytes of the UTF-8 character starting with `lead` (1 for a byte that starts none).
fn char_width(lead: u8) -> usize {
    match lead {
        0xF0..=0xF7 => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// The start of the UTF-8 character holding byte `at` of `bytes` (`at` itself when it starts
/// one, or when the bytes there are not UTF-8 anyway: then replacement decides).
fn char_start(bytes: &[u8], at: usize) -> usize {
    let at = at.min(bytes.len());
    let is_continuation = |i: usize| bytes.get(i).is_some_and(|b| b & 0xC0 == 0x80);
    let mut i = at;
    while i > 0 && at - i < 3 && is_continuation(i) {
        i -= 1;
    }
    // Only a real lead byte before the continuations makes it a cut character.
    if i < at && bytes.get(i).is_some_and(|b| *b >= 0xC0) {
        i
    } else {
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spool_with(root: &Path, text: &[u8]) -> String {
        let mut spool = Spool::start(root, &["g".into()]).expect("spool");
        for chunk in text.chunks(7) {
            spool.chunk("g", 1, chunk);
        }
        assert_eq!(spool.finish("run-1"), None);
        "run-1".into()
    }

    fn read_all(root: &Path, run: &str, limit: u64) -> String {
        let mut out = String::new();
        let mut offset = 0;
        loop {
            let page = page(root, run, "g", None, offset, limit).expect("page");
            out.push_str(&page.text);
            match page.next_offset {
                Some(next) => {
                    assert!(next > offset, "pages move forward");
                    offset = next;
                }
                None => return out,
            }
        }
    }

    #[test]
    fn pages_joined_give_the_whole_text_even_when_pages_cut_characters() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = "ok ✓ 日本語 🚀 end\n".repeat(50);
        let run = spool_with(dir.path(), text.as_bytes());
        for limit in [1, 2, 3, 5, 8, 13, 64, 4096] {
            assert_eq!(read_all(dir.path(), &run, limit), text, "limit {limit}");
        }
    }

    #[test]
    fn invalid_utf8_is_replaced_not_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = spool_with(dir.path(), b"a\xffb\xfe\xfdc");
        assert_eq!(read_all(dir.path(), &run, 2), "a\u{fffd}b\u{fffd}\u{fffd}c");
    }

    #[test]
    fn unknown_runs_gates_and_attempts_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = spool_with(dir.path(), b"x");
        let err = |r: &str, g: &str, a| {
            page(dir.path(), r, g, a, 0, 10)
                .expect_err("err")
                .to_string()
        };
        assert!(err("run-9", "g", None).contains("no evidence is kept for run `run-9`"));
        assert!(err(&run, "nope", None).contains("its gates: g"));
        assert!(err(&run, "g", Some(2)).contains("ask for attempt 1..=1"));
        assert!(err("../x", "g", None).contains("is not a run id"));
    }

    #[test]
    fn a_dropped_spool_leaves_nothing_and_old_runs_are_pruned() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let mut spool = Spool::start(dir.path(), &["g".into()]).expect("spool");
            spool.chunk("g", 1, b"partial");
        }
        assert_eq!(fs::read_dir(dir.path()).expect("dir").count(), 0);
        for n in 0..KEEP_RUNS + 3 {
            let spool = Spool::start(dir.path(), &["g".into()]).expect("spool");
            assert_eq!(spool.finish(&format!("run-{n}")), None);
        }
        assert_eq!(fs::read_dir(dir.path()).expect("dir").count(), KEEP_RUNS);
    }
}
