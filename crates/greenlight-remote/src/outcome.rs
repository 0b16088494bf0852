//! Reading an `ActionResult` into the seam's `Outcome` (a result from the cache or a remote
//! execution), with stdout and stderr read whether the server sent them inline or by digest.
//! `Outcome` and `LocalResult` themselves are the seam's words, not this crate's.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bazel_remote_apis::build::bazel::remote::execution::v2 as reapi;
use bazel_remote_apis::google::protobuf;

use crate::connect::Remote;
use crate::digest::{Digest, DigestProto};
use crate::error::RemoteError;

pub use greenlight_types::remote::{LocalResult, Outcome};

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
                Some(d) if raw.is_empty() && d.size_bytes > 0 => Some(Digest::from_proto(d)),
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
