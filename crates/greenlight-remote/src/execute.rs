//! Remote execution: `Execute` and the operation stream it returns, followed to the end.
//!
//! A stream that drops (a restarted proxy, a server that closes long streams) is picked up
//! again with `WaitExecution` on the operation's name, so a ten-minute gate survives it; the
//! name is handed to the caller as soon as it is known, so a restarted client can `wait` on it.

use std::time::Duration;

use bazel_remote_apis::build::bazel::remote::execution::v2::{self as reapi, execution_stage};
use bazel_remote_apis::google::longrunning::{CancelOperationRequest, Operation, operation};
use prost::Message;

use crate::action::PreparedAction;
use crate::cas::sha256;
use crate::connect::{Remote, unary};
use crate::digest::DigestProto;
use crate::error::{RemoteError, advice_for};
use crate::outcome::Outcome;

/// Consecutive failed attempts to (re)open an operation stream before giving up. With the
/// back-off below that is a little over two minutes of a server that does not answer: long
/// enough for a server restart, short enough to report a dead one.
const MAX_RECONNECTS: u32 = 30;
const BACKOFF_START: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// How an operation stream is (re)opened.
enum Attach {
    /// No name yet: `Execute` (again; the server merges it with an identical one in flight).
    Execute(reapi::ExecuteRequest),
    /// `WaitExecution` on the operation's name.
    Wait(String),
}

impl Remote {
    /// Executes an action and waits for its result. The action's `Command` and `Action` are
    /// uploaded first; its input root must already be in the CAS (`upload` the
    /// [`InputRoot`](crate::InputRoot)'s blobs). `on_name` is called once, with the operation
    /// name, as soon as the server names it. With `skip_cache_lookup` the server runs the
    /// action even when its result is cached (a retry of a suspected flake).
    pub async fn execute(
        &self,
        action: &PreparedAction,
        skip_cache_lookup: bool,
        mut on_name: impl FnMut(&str),
    ) -> Result<Outcome, RemoteError> {
        if !self.can_execute() {
            return Err(RemoteError::ExecutionDisabled {
                url: self.url().to_string(),
                instance: self.instance().to_string(),
            });
        }
        self.upload(&action.blobs).await?;
        let request = reapi::ExecuteRequest {
            instance_name: self.instance().to_string(),
            skip_cache_lookup,
            action_digest: Some(action.digest.to_proto()),
            digest_function: sha256(),
            ..Default::default()
        };
        self.follow(Attach::Execute(request), &mut on_name).await
    }

    /// Waits for an execution started earlier (perhaps by another process) to finish, by its
    /// operation name.
    pub async fn wait(&self, operation: &str) -> Result<Outcome, RemoteError> {
        self.follow(Attach::Wait(operation.to_string()), &mut |_: &str| {})
            .await
    }

    /// Asks the server to cancel an execution. Whoever waits on it then sees it end.
    pub async fn cancel(&self, operation: &str) -> Result<(), RemoteError> {
        self.operations()
            .cancel_operation(unary(CancelOperationRequest {
                name: operation.to_string(),
            }))
            .await
            .map_err(|status| {
                RemoteError::from_status(self.url(), "CancelOperation", operation, &status)
            })?;
        Ok(())
    }

    /// Generic over the callback (not `dyn`) so the future is `Send` whenever it is.
    async fn follow<F: FnMut(&str)>(
        &self,
        mut attach: Attach,
        on_name: &mut F,
    ) -> Result<Outcome, RemoteError> {
        let mut failures: u32 = 0;
        let mut last_error: Option<RemoteError> = None;
        // The last stage the server reported, for the message when it stops answering.
        let mut stage = execution_stage::Value::Unknown;
        loop {
            if failures > 0 {
                if failures > MAX_RECONNECTS {
                    return Err(last_error.unwrap_or_else(|| RemoteError::Unreachable {
                        url: self.url().to_string(),
                        detail: format!(
                            "the operation stream kept ending without a result (last stage {})",
                            stage.as_str_name()
                        ),
                    }));
                }
                let factor = 1u32 << (failures - 1).min(5);
                tokio::time::sleep((BACKOFF_START * factor).min(BACKOFF_MAX)).await;
            }
            let (call, target, opened) = match &attach {
                Attach::Execute(request) => (
                    "Execute",
                    request
                        .action_digest
                        .as_ref()
                        .map(|d| <crate::Digest as DigestProto>::from_proto(d).to_string())
                        .unwrap_or_default(),
                    self.execution().execute(request.clone()).await,
                ),
                Attach::Wait(name) => (
                    "WaitExecution",
                    name.clone(),
                    self.execution()
                        .wait_execution(reapi::WaitExecutionRequest { name: name.clone() })
                        .await,
                ),
            };
            let mut stream = match opened {
                Ok(response) => response.into_inner(),
                Err(status) if reconnectable(&status, &attach) => {
                    failures += 1;
                    last_error = Some(RemoteError::from_status(self.url(), call, &target, &status));
                    continue;
                }
                Err(status) => {
                    return Err(RemoteError::from_status(self.url(), call, &target, &status));
                }
            };
            loop {
                match stream.message().await {
                    Ok(Some(op)) => {
                        failures = 0;
                        if let Some(reported) = stage_of(&op) {
                            stage = reported;
                        }
                        if !op.name.is_empty() && matches!(attach, Attach::Execute(_)) {
                            on_name(&op.name);
                            attach = Attach::Wait(op.name.clone());
                        }
                        if op.done {
                            return self.finish(op).await;
                        }
                    }
                    // The server closed the stream before the operation was done.
                    Ok(None) => break,
                    Err(status) if reconnectable(&status, &attach) => {
                        last_error =
                            Some(RemoteError::from_status(self.url(), call, &target, &status));
                        break;
                    }
                    Err(status) => {
                        return Err(RemoteError::from_status(self.url(), call, &target, &status));
                    }
                }
            }
            failures += 1;
        }
    }

    /// The outcome a finished operation carries. A `DEADLINE_EXCEEDED` status is a timed-out
    /// run (with whatever output the worker kept), not an error.
    async fn finish(&self, op: Operation) -> Result<Outcome, RemoteError> {
        let name = op.name;
        let failed = |code: tonic::Code, message: String| RemoteError::ExecutionFailed {
            url: self.url().to_string(),
            operation: name.clone(),
            code,
            message,
            advice: advice_for(code),
        };
        let response = match op.result {
            Some(operation::Result::Response(any)) => {
                reapi::ExecuteResponse::decode(any.value.as_slice()).map_err(|e| {
                    self.protocol(
                        "Execute",
                        &name,
                        &format!("undecodable ExecuteResponse: {e}"),
                    )
                })?
            }
            Some(operation::Result::Error(status)) => {
                let code = tonic::Code::from_i32(status.code);
                if code == tonic::Code::DeadlineExceeded {
                    return self.timed_out(name, None).await;
                }
                return Err(failed(code, status.message));
            }
            None => {
                return Err(self.protocol("Execute", &name, "a done operation without a result"));
            }
        };
        let status = response.status.unwrap_or_default();
        let code = tonic::Code::from_i32(status.code);
        if code == tonic::Code::DeadlineExceeded {
            return self.timed_out(name, response.result.as_ref()).await;
        }
        if code != tonic::Code::Ok {
            return Err(failed(code, status.message));
        }
        let Some(result) = response.result else {
            return Err(self.protocol("Execute", &name, "a successful execution without a result"));
        };
        self.outcome_of(&result, response.cached_result, Some(name))
            .await
    }

    async fn timed_out(
        &self,
        name: String,
        partial: Option<&reapi::ActionResult>,
    ) -> Result<Outcome, RemoteError> {
        let mut outcome = match partial {
            Some(result) => match self.outcome_of(result, false, None).await {
                Ok(outcome) => outcome,
                // The output of a killed run is a courtesy; its absence is no failure.
                Err(RemoteError::BlobMissing { .. }) => Outcome::default(),
                Err(e) => return Err(e),
            },
            None => Outcome::default(),
        };
        outcome.timed_out = true;
        outcome.cached = false;
        outcome.operation = Some(name);
        Ok(outcome)
    }
}

/// The execution stage an operation's `ExecuteOperationMetadata` reports, if it carries one.
fn stage_of(op: &Operation) -> Option<execution_stage::Value> {
    let any = op.metadata.as_ref()?;
    if !any.type_url.ends_with("ExecuteOperationMetadata") {
        return None;
    }
    let metadata = reapi::ExecuteOperationMetadata::decode(any.value.as_slice()).ok()?;
    execution_stage::Value::try_from(metadata.stage).ok()
}

/// Statuses after which the stream is opened again rather than the execution given up: the
/// connection or the server's stream went away, the execution itself did not fail. Before the
/// operation has a name only an unavailable server is retried: any other refusal of `Execute`
/// is about the request and would be refused again.
fn reconnectable(status: &tonic::Status, attach: &Attach) -> bool {
    if matches!(attach, Attach::Execute(_)) {
        return status.code() == tonic::Code::Unavailable;
    }
    matches!(
        status.code(),
        tonic::Code::Unavailable
            | tonic::Code::Unknown
            | tonic::Code::Internal
            | tonic::Code::Cancelled
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Aborted
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bazel_remote_apis::google::protobuf::Any;

    fn operation_with(type_url: &str, stage: execution_stage::Value) -> Operation {
        let metadata = reapi::ExecuteOperationMetadata {
            stage: stage as i32,
            ..Default::default()
        };
        Operation {
            name: "op".into(),
            metadata: Some(Any {
                type_url: type_url.into(),
                value: metadata.encode_to_vec(),
            }),
            done: false,
            result: None,
        }
    }

    #[test]
    fn the_stage_is_read_from_execute_metadata_only() {
        let url = "type.googleapis.com/build.bazel.remote.execution.v2.ExecuteOperationMetadata";
        let op = operation_with(url, execution_stage::Value::Executing);
        assert_eq!(stage_of(&op), Some(execution_stage::Value::Executing));
        let other = operation_with(
            "type.googleapis.com/google.protobuf.Empty",
            execution_stage::Value::Queued,
        );
        assert_eq!(stage_of(&other), None);
    }
}
