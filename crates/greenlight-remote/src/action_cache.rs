//! The shared result cache: look an action up by its digest, and publish a result run here so
//! the next machine with the same key replays it.

use bazel_remote_apis::build::bazel::remote::execution::v2 as reapi;

use crate::action::PreparedAction;
use crate::blobs::BlobSet;
use crate::cas::sha256;
use crate::connect::{Remote, unary};
use crate::digest::DigestProto;
use crate::error::RemoteError;
use crate::outcome::{LocalResult, Outcome, timestamp};

impl Remote {
    /// The cached result of an action, its stdout and stderr read in full; `None` on a miss.
    /// An entry whose stdout or stderr blob has left the CAS counts as a miss, as the protocol
    /// asks of clients.
    pub async fn lookup(&self, action: &PreparedAction) -> Result<Option<Outcome>, RemoteError> {
        let request = reapi::GetActionResultRequest {
            instance_name: self.instance().to_string(),
            action_digest: Some(action.digest.to_proto()),
            inline_stdout: true,
            inline_stderr: true,
            inline_output_files: Vec::new(),
            digest_function: sha256(),
        };
        let result = match self.action_cache().get_action_result(unary(request)).await {
            Ok(response) => response.into_inner(),
            Err(status) if status.code() == tonic::Code::NotFound => return Ok(None),
            Err(status) => {
                return Err(RemoteError::from_status(
                    self.url(),
                    "GetActionResult",
                    &action.digest,
                    &status,
                ));
            }
        };
        match self.outcome_of(&result, true, None).await {
            Ok(outcome) => Ok(Some(outcome)),
            Err(RemoteError::BlobMissing { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Publishes a local run as the action's result: uploads the `Command`, the `Action`,
    /// stdout and stderr, then `UpdateActionResult`. An action marked `do_not_cache` is not
    /// published (nothing is sent). Results with any exit code are published; whether a failed
    /// one is kept is the server's choice (BuildGrid's `cache-failed-actions`).
    pub async fn publish(
        &self,
        action: &PreparedAction,
        local: &LocalResult,
    ) -> Result<(), RemoteError> {
        if action.do_not_cache {
            return Ok(());
        }
        let mut blobs = BlobSet::new();
        blobs.merge(action.blobs.clone());
        let stdout = blobs.insert_bytes(local.stdout.clone());
        let stderr = blobs.insert_bytes(local.stderr.clone());
        self.upload(&blobs).await?;
        let (started, finished) = (timestamp(local.started), timestamp(local.finished));
        let result = reapi::ActionResult {
            exit_code: local.exit_code,
            stdout_digest: Some(stdout.to_proto()),
            stderr_digest: Some(stderr.to_proto()),
            execution_metadata: Some(reapi::ExecutedActionMetadata {
                worker: host_name(),
                worker_start_timestamp: Some(started),
                execution_start_timestamp: Some(started),
                execution_completed_timestamp: Some(finished),
                worker_completed_timestamp: Some(finished),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.action_cache()
            .update_action_result(unary(reapi::UpdateActionResultRequest {
                instance_name: self.instance().to_string(),
                action_digest: Some(action.digest.to_proto()),
                action_result: Some(result),
                results_cache_policy: None,
                digest_function: sha256(),
            }))
            .await
            .map_err(|status| {
                RemoteError::from_status(self.url(), "UpdateActionResult", &action.digest, &status)
            })?;
        Ok(())
    }
}

/// This machine's name, recorded as the "worker" of a published local run (empty when the
/// kernel does not say).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_default()
}
