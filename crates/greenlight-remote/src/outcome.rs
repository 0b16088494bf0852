//! What a run produced, on either side of the wire: `LocalResult` (a run here, to publish) and
//! `Outcome` (a result from the cache or a remote execution), with stdout and stderr read
//! whether the server sent them inline or by digest.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bazel_remote_apis::build::bazel::remote::execution::v2 as reapi;
use bazel_remote_apis::google::protobuf;

use crate::connect::Remote;
use crate::digest::Digest;
use crate::error::RemoteError;

/// A command's run on this machine, as published to the action cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalResult {
    /// The exit code.
    pub exit_code: i32,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything it wrote to stderr.
    pub stderr: Vec<u8>,
    /// When it started.
    pub started: SystemTime,
    /// When it ended.
    pub finished: SystemTime,
}

/// The result of an action from the server: a cache hit or a remote execution.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The exit code (meaningless when `timed_out`).
    pub exit_code: i32,
    /// The command's stdout.
    pub stdout: Vec<u8>,
    /// The command's stderr.
    pub stderr: Vec<u8>,
    /// True when the result came from the action cache rather than a run just now.
    pub cached: bool,
    /// The worker that ran it, when the server says.
    pub worker: Option<String>,
    /// How long the command ran on the worker, when the server says.
    pub duration: Option<Duration>,
    /// True when the command hit the action's timeout.
    pub timed_out: bool,
    /// The execution's operation name (remote executions only).
    pub operation: Option<String>,
}

impl Remote {
    /// The outcome an `ActionResult` describes, its streams read from the CAS when they are
    /// not inline.
    pub(crate) async fn outcome_of(
        &self,
        result: &reapi::ActionResult,
        cached: bool,
        operation: Option<String>,
    ) -> Result<Outcome, RemoteError> {
        let by_digest = |raw: &Vec<u8>, digest: &Option<reapi::Digest>| -> Option<Digest> {
            match digest {
                Some(d) if raw.is_empty() && d.size_bytes > 0 => Some(Digest::from(d)),
                _ => None,
            }
        };
        let stdout_digest = by_digest(&result.stdout_raw, &result.stdout_digest);
        let stderr_digest = by_digest(&result.stderr_raw, &result.stderr_digest);
        let wanted: Vec<Digest> = stdout_digest
            .iter()
            .chain(&stderr_digest)
            .cloned()
            .collect();
        let read = if wanted.is_empty() {
            Default::default()
        } else {
            self.read_blobs(&wanted).await?
        };
        // Equal stdout and stderr are one blob: look it up for each, do not move it out.
        let stream = |raw: &Vec<u8>, digest: &Option<Digest>| match digest {
            Some(d) => read.get(d).cloned().unwrap_or_default(),
            None => raw.clone(),
        };
        let stdout = stream(&result.stdout_raw, &stdout_digest);
        let stderr = stream(&result.stderr_raw, &stderr_digest);
        let metadata = result.execution_metadata.as_ref();
        Ok(Outcome {
            exit_code: result.exit_code,
            stdout,
            stderr,
            cached,
            worker: metadata.map(|m| m.worker.clone()).filter(|w| !w.is_empty()),
            duration: metadata.and_then(run_time),
            timed_out: false,
            operation,
        })
    }
}

/// How long the command itself ran: execution start to end, else the worker's whole span.
fn run_time(m: &reapi::ExecutedActionMetadata) -> Option<Duration> {
    let span = |a: &Option<protobuf::Timestamp>, b: &Option<protobuf::Timestamp>| {
        let (a, b) = (system_time(a.as_ref()?)?, system_time(b.as_ref()?)?);
        b.duration_since(a).ok()
    };
    span(
        &m.execution_start_timestamp,
        &m.execution_completed_timestamp,
    )
    .or_else(|| span(&m.worker_start_timestamp, &m.worker_completed_timestamp))
}

pub(crate) fn timestamp(t: SystemTime) -> protobuf::Timestamp {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    protobuf::Timestamp {
        seconds: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(since.subsec_nanos()).unwrap_or(0),
    }
}

fn system_time(t: &protobuf::Timestamp) -> Option<SystemTime> {
    let seconds = u64::try_from(t.seconds).ok()?;
    let nanos = u32::try_from(t.nanos).ok()?;
    UNIX_EPOCH.checked_add(Duration::new(seconds, nanos))
}
