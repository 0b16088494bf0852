//! Live frames and recorded runs: each stream's frames numbered 1, 2, 3, … inside the
//! transaction that persists them, and the `runs` that give `greenlight verify` and `hook stop`
//! a stream of their own.
//!
//! The seq is `MAX(seq) + 1` for the stream, read and written inside one IMMEDIATE
//! transaction: the write lock serialises every writer of the file, so two processes can never
//! take the same number, and a rolled-back transaction leaves no number used. A frame is
//! published only after its transaction commits (persist first, then publish).

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::db::{OptionalExtension, params};
use greenlight_stream::{Frame, FrameBody, RunKind, StreamId};

use crate::Error;
use crate::model::Millis;
use crate::owner::{Liveness, RunOwner};
use crate::read::sealed::Access;
use crate::read::{collect, sql_err};
use crate::tx::Tx;

/// A recorded verify or hook run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(pub i64);

impl RunId {
    /// Its stream.
    pub fn stream(self) -> StreamId {
        StreamId::Run(self.0)
    }
}

/// A recorded `greenlight verify` or `hook stop` run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Its id (`run-<id>` is its stream).
    pub id: RunId,
    /// Verify or hook.
    pub kind: RunKind,
    /// The worktree it ran in.
    pub worktree: PathBuf,
    /// The common git directory of the repository it ran in (version 7); `None` when unknown.
    pub repository: Option<PathBuf>,
    /// How many gates it had.
    pub gates: u32,
    /// `passed`, `failed`, … once ended; `None` while running (a run whose process is gone is
    /// closed as `interrupted` by the next greenlight that notices).
    pub result: Option<String>,
    /// The exit code once ended.
    pub exit_code: Option<i32>,
    /// When it started.
    pub started_at: Millis,
    /// When it ended.
    pub ended_at: Option<Millis>,
}

/// The result a run closed by [`Tx::close_abandoned_runs`] gets: the word verify uses for a run
/// that was stopped before it could decide.
pub const INTERRUPTED: &str = "interrupted";

fn json_err(what: &'static str) -> impl FnOnce(serde_json::Error) -> Error {
    move |source| Error::Json { what, source }
}

impl Tx<'_> {
    /// Appends `body` to `stream` with the next seq; returns the frame as persisted.
    pub fn append_frame(&self, stream: StreamId, body: &FrameBody) -> Result<Frame, Error> {
        let name = stream.to_string();
        let head: u64 = self
            .conn()
            .query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM frames WHERE stream = ?1",
                [&name],
                |r| r.get(0),
            )
            .map_err(|e| sql_err(self, e))?;
        let text = serde_json::to_string(body).map_err(json_err("frame body"))?;
        let seq = head + 1;
        self.exec(
            "INSERT INTO frames (stream, seq, kind, body, at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![name, seq, body.kind(), text, self.now()],
        )?;
        Ok(Frame {
            stream,
            seq,
            at: self.now(),
            body: body.clone(),
        })
    }

    /// Records a verify or hook run starting, with its `run-started` frame (seq 1).
    pub fn begin_run(
        &self,
        kind: RunKind,
        worktree: &Path,
        gates: &[String],
    ) -> Result<RunId, Error> {
        let count = u32::try_from(gates.len()).unwrap_or(u32::MAX);
        let owner = RunOwner::current();
        let run_raw = self.insert_id(
            "INSERT INTO runs (kind, worktree, gates, started_at, owner_pid, owner_start, \
             owner_pidns, owner_host) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id",
            params![
                kind.as_str(),
                worktree.as_os_str().as_bytes(),
                count,
                self.now(),
                owner.as_ref().map(|o| o.pid),
                owner.as_ref().map(|o| o.start),
                owner.as_ref().map(|o| o.pid_ns.as_str()),
                owner.as_ref().map(|o| o.host.as_str()),
            ],
        )?;
        let run = RunId(run_raw);
        self.append_frame(
            run.stream(),
            &FrameBody::RunStarted {
                kind,
                worktree: worktree.to_string_lossy().into_owned(),
                gates: gates.to_vec(),
            },
        )?;
        Ok(run)
    }

    /// Records a run's end (once) with its `run-finished` frame.
    pub fn finish_run(
        &self,
        run: RunId,
        result: &str,
        exit_code: i32,
        duration_ms: u64,
    ) -> Result<Frame, Error> {
        let changed = self.exec(
            "UPDATE runs SET result = ?2, exit_code = ?3, ended_at = ?4 \
             WHERE id = ?1 AND ended_at IS NULL",
            params![run.0, result, exit_code, self.now()],
        )?;
        if changed == 0 {
            return Err(Error::RunNotOpen { run: run.0 });
        }
        self.append_frame(
            run.stream(),
            &FrameBody::RunFinished {
                result: result.to_owned(),
                exit_code: Some(exit_code),
                duration_ms,
            },
        )
    }

    /// Closes every open run whose owner is known to be gone (see [`RunOwner::liveness`]) as
    /// `interrupted`, each with its `run-finished` frame, in this transaction. It ended, as far
    /// as anyone can tell, at its last frame; its exit code is unknown. Returns the runs closed.
    pub fn close_abandoned_runs(&self) -> Result<Vec<RunId>, Error> {
        let mut closed = Vec::new();
        for (run, owner) in open_runs(self)? {
            if owner.liveness() != Liveness::Gone {
                continue;
            }
            let (started, last): (i64, i64) = self
                .conn()
                .query_row(
                    "SELECT started_at, COALESCE((SELECT MAX(at) FROM frames WHERE stream = ?2), \
                     started_at) FROM runs WHERE id = ?1",
                    params![run.0, run.stream().to_string()],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(|e| sql_err(self, e))?;
            let ended = last.max(started);
            let changed = self.exec(
                "UPDATE runs SET result = 'interrupted', exit_code = NULL, ended_at = ?2 \
                 WHERE id = ?1 AND ended_at IS NULL",
                params![run.0, ended],
            )?;
            if changed == 0 {
                continue;
            }
            self.append_frame(
                run.stream(),
                &FrameBody::RunFinished {
                    result: INTERRUPTED.to_owned(),
                    exit_code: None,
                    duration_ms: u64::try_from(ended - started).unwrap_or(0),
                },
            )?;
            closed.push(run);
        }
        Ok(closed)
    }

    /// Forgets runs started before `before`, with their frames and gate rows; returns how many.
    pub fn prune_runs(&self, before: Millis) -> Result<usize, Error> {
        crate::history::prune_rows(self, before)?;
        self.exec(
            "DELETE FROM frames WHERE stream IN \
             (SELECT 'run-' || id FROM runs WHERE started_at < ?1)",
            [before],
        )?;
        self.exec("DELETE FROM runs WHERE started_at < ?1", [before])
    }

    /// Deletes `stream`'s frames up to and including `through`, always keeping its last frame
    /// (so its head, and the numbering after it, survive). A watcher whose cursor falls in the
    /// pruned range gets `SEQUENCE_GAP`.
    pub fn prune_frames(&self, stream: StreamId, through: u64) -> Result<usize, Error> {
        self.exec(
            "DELETE FROM frames WHERE stream = ?1 AND seq <= ?2 \
             AND seq < (SELECT MAX(seq) FROM frames WHERE stream = ?1)",
            params![stream.to_string(), through],
        )
    }
}

type RawFrame = (i64, String, u64, String, i64);

fn decode_frame<A: Access + ?Sized>(a: &A, raw: RawFrame) -> Result<(i64, Frame), Error> {
    let (id, stream, seq, body, at) = raw;
    let corrupt = |what, found: String| Error::Corrupt {
        path: a.db_path().to_path_buf(),
        what,
        found,
    };
    let stream: StreamId = stream
        .parse()
        .map_err(|_| corrupt("frames.stream", stream.clone()))?;
    let body: FrameBody =
        serde_json::from_str(&body).map_err(|_| corrupt("frames.body", body.clone()))?;
    Ok((
        id,
        Frame {
            stream,
            seq,
            at,
            body,
        },
    ))
}

const FRAME_COLUMNS: &str = "id, stream, seq, body, at";

fn raw_frame(r: &crate::db::Row) -> crate::db::DbResult<RawFrame> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `stream`'s frames after `after`, in order, at most `max`.
pub(crate) fn frames_after<A: Access + ?Sized>(
    a: &A,
    stream: StreamId,
    after: u64,
    max: usize,
) -> Result<Vec<Frame>, Error> {
    let sql = format!(
        "SELECT {FRAME_COLUMNS} FROM frames WHERE stream = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"
    );
    let raws = collect(
        a,
        &sql,
        params![stream.to_string(), after, limit(max)],
        raw_frame,
    )?;
    raws.into_iter()
        .map(|raw| decode_frame(a, raw).map(|(_, f)| f))
        .collect()
}

/// `(oldest, head)` of `stream`: its lowest stored seq and its last; `(1, 0)` when empty.
pub(crate) fn frame_bounds<A: Access + ?Sized>(
    a: &A,
    stream: StreamId,
) -> Result<(u64, u64), Error> {
    a.conn()
        .query_row(
            "SELECT COALESCE(MIN(seq), 1), COALESCE(MAX(seq), 0) FROM frames WHERE stream = ?1",
            [stream.to_string()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(|e| sql_err(a, e))
}

/// Frames of every stream committed after the file-wide position `after`, with their
/// positions, at most `max`.
pub(crate) fn frames_since<A: Access + ?Sized>(
    a: &A,
    after: i64,
    max: usize,
) -> Result<Vec<(i64, Frame)>, Error> {
    let sql = format!("SELECT {FRAME_COLUMNS} FROM frames WHERE id > ?1 ORDER BY id LIMIT ?2");
    let raws = collect(a, &sql, params![after, limit(max)], raw_frame)?;
    raws.into_iter().map(|raw| decode_frame(a, raw)).collect()
}

/// The file-wide position of the last frame committed (0 when none). A cached statement: the
/// server asks after every commit it is woken for.
pub(crate) fn last_frame_position<A: Access + ?Sized>(a: &A) -> Result<i64, Error> {
    a.conn()
        .query_row("SELECT COALESCE(MAX(id), 0) FROM frames", (), |r| r.get(0))
        .map_err(|e| sql_err(a, e))
}

const RUN_COLUMNS: &str =
    "id, kind, worktree, gates, result, exit_code, started_at, ended_at, repository";

type RawRun = (
    i64,
    String,
    Vec<u8>,
    u32,
    Option<String>,
    Option<i32>,
    i64,
    Option<i64>,
    Option<Vec<u8>>,
);

fn raw_run(r: &crate::db::Row) -> crate::db::DbResult<RawRun> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
    ))
}

fn decode_run<A: Access + ?Sized>(a: &A, raw: RawRun) -> Result<Run, Error> {
    let (id, kind, worktree, gates, result, exit_code, started_at, ended_at, repository) = raw;
    let Some(kind) = RunKind::from_name(&kind) else {
        return Err(Error::Corrupt {
            path: a.db_path().to_path_buf(),
            what: "runs.kind",
            found: kind,
        });
    };
    Ok(Run {
        id: RunId(id),
        kind,
        worktree: PathBuf::from(OsString::from_vec(worktree)),
        repository: repository.map(|r| PathBuf::from(OsString::from_vec(r))),
        gates,
        result,
        exit_code,
        started_at,
        ended_at,
    })
}

/// The most recent runs, newest first, at most `max`.
pub(crate) fn runs<A: Access + ?Sized>(a: &A, max: usize) -> Result<Vec<Run>, Error> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM runs ORDER BY id DESC LIMIT ?1");
    let raws = collect(a, &sql, [limit(max)], raw_run)?;
    raws.into_iter().map(|raw| decode_run(a, raw)).collect()
}

/// The open runs that name an owner, oldest first (through the `runs_open` index: a handful).
pub(crate) fn open_runs<A: Access + ?Sized>(a: &A) -> Result<Vec<(RunId, RunOwner)>, Error> {
    collect(
        a,
        "SELECT id, owner_pid, owner_start, owner_pidns, owner_host FROM runs \
         WHERE ended_at IS NULL AND owner_pid IS NOT NULL AND owner_start IS NOT NULL \
         AND owner_pidns IS NOT NULL AND owner_host IS NOT NULL ORDER BY id",
        (),
        |r| Ok((RunId(r.get(0)?), RunOwner::from_row(r, 1)?)),
    )
}

/// The run with this id.
pub(crate) fn run<A: Access + ?Sized>(a: &A, id: RunId) -> Result<Option<Run>, Error> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1");
    let raw = a
        .conn()
        .query_row(&sql, [id.0], raw_run)
        .optional()
        .map_err(|e| sql_err(a, e))?;
    raw.map(|raw| decode_run(a, raw)).transpose()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use greenlight_stream::{GateVerdict, RunKind, StreamId};

    use super::*;
    use crate::{Reads, StepClock, Store};

    fn started(n: u32) -> FrameBody {
        FrameBody::GateStarted {
            gate: n,
            of: 9,
            command: format!("gate {n}"),
            turn: None,
        }
    }

    fn open(path: &Path) -> Store {
        Store::open_with_clock(path, Arc::new(StepClock::new(1_000, 1))).expect("open")
    }

    #[test]
    fn seqs_are_contiguous_per_stream_across_writers_and_a_rollback_leaves_no_hole() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("s.db");
        let a = StreamId::Goal(1);
        let b = StreamId::Run(1);
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut store = open(&path);
                    for i in 0..25 {
                        let stream = if (w + i) % 2 == 0 { a } else { b };
                        store
                            .write(|tx| tx.append_frame(stream, &started(i)))
                            .expect("append");
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().expect("writer");
        }
        let mut store = open(&path);
        // A transaction that appends and then fails takes no number.
        let failed: Result<(), Error> = store.write(|tx| {
            tx.append_frame(a, &started(99))?;
            Err(Error::RunNotOpen { run: 0 })
        });
        assert!(failed.is_err());
        let next = store
            .write(|tx| tx.append_frame(a, &started(100)))
            .expect("append");
        let seqs: Vec<u64> = store
            .frames_after(a, 0, 1000)
            .expect("read")
            .iter()
            .map(|f| f.seq)
            .collect();
        assert_eq!(seqs, (1..=51).collect::<Vec<_>>());
        assert_eq!(next.seq, 51);
        assert_eq!(store.frame_bounds(b).expect("bounds"), (1, 50));
        assert_eq!(store.frames_since(0, 1000).expect("all").len(), 101);
    }

    #[test]
    fn a_run_is_a_stream_from_started_to_finished_and_pruning_keeps_the_head() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = open(&dir.path().join("s.db"));
        let run = store
            .write(|tx| tx.begin_run(RunKind::Verify, Path::new("/w"), &["true".into()]))
            .expect("begin");
        store
            .write(|tx| {
                tx.append_frame(
                    run.stream(),
                    &FrameBody::GateFinished {
                        gate: 1,
                        command: "true".into(),
                        verdict: GateVerdict::Pass,
                        exit_code: Some(0),
                        duration_ms: Some(3),
                        digest: None,
                        replayed: false,
                        turn: None,
                    },
                )?;
                tx.finish_run(run, "passed", 0, 5)
            })
            .expect("finish");
        assert!(matches!(
            store.write(|tx| tx.finish_run(run, "passed", 0, 5)),
            Err(Error::RunNotOpen { .. })
        ));
        let kinds: Vec<&str> = store
            .frames_after(run.stream(), 0, 10)
            .expect("frames")
            .iter()
            .map(|f| f.body.kind())
            .collect();
        assert_eq!(kinds, ["run-started", "gate-finished", "run-finished"]);
        let stored = store.run(run).expect("run").expect("exists");
        assert_eq!(
            (stored.result.as_deref(), stored.exit_code),
            (Some("passed"), Some(0))
        );
        assert_eq!(
            store
                .write(|tx| tx.prune_frames(run.stream(), 99))
                .expect("prune"),
            2
        );
        assert_eq!(store.frame_bounds(run.stream()).expect("bounds"), (3, 3));
        assert_eq!(
            store
                .write(|tx| tx.prune_runs(i64::MAX))
                .expect("prune runs"),
            1
        );
        assert!(store.runs(10).expect("runs").is_empty());
        assert_eq!(store.frame_bounds(run.stream()).expect("bounds"), (1, 0));
    }

    #[test]
    fn a_frame_with_an_unknown_key_is_refused_when_read_back() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("s.db");
        let store = open(&path);
        drop(store);
        let conn = rusqlite::Connection::open(&path).expect("raw");
        conn.execute(
            "INSERT INTO frames (stream, seq, kind, body, at) VALUES ('1', 1, 'error', \
             '{\"type\":\"error\",\"code\":\"X\",\"message\":\"m\",\"extra\":1}', 1)",
            (),
        )
        .expect("raw insert");
        let store = open(&path);
        let err = store
            .frames_after(StreamId::Goal(1), 0, 10)
            .expect_err("refused");
        assert!(err.to_string().contains("frames.body"), "{err}");
    }
}
