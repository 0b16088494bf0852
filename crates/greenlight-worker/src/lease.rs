//! One lease, from its payload to the `ActionResult` the grid stores: the Action and Command
//! read from the CAS, the input tree written into a fresh directory under the cache dir, the
//! command run (see `run`), its output uploaded as stdout, the directory removed.
//!
//! Every way a lease can go wrong ends as a lease status the grid understands: the action's
//! own fault (a bad payload, tree or command) is `INVALID_ARGUMENT` or `FAILED_PRECONDITION`
//! (a blob the CAS lacks) and goes back to the client; this machine's fault (its disk, a
//! shutdown) is `INTERNAL` or `UNAVAILABLE`, which BuildGrid retries on another worker.

use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

use bazel_remote_apis::build::bazel::remote::execution::v2 as reapi;
use bazel_remote_apis::google::protobuf::{Any, Timestamp};
use bazel_remote_apis::google::rpc::Status;
use greenlight_proc::InterruptWatch;
use greenlight_remote::{Blob, BlobSet, Digest, DigestProto, Remote, RemoteError};
use prost::Message as _;
use tonic::Code;

use crate::caches::Caches;
use crate::inputs::{self, InputError};
use crate::run::{self, CommandSpec, RunError};
use crate::sweep::{Scope, remove_tree};

/// The `Any` type of an `Action` payload (how BuildGrid sends a lease's work) and of an
/// `ActionResult` (how it expects the result back: it unpacks exactly this type).
const ACTION_TYPE: &str = "type.googleapis.com/build.bazel.remote.execution.v2.Action";
const DIGEST_TYPE: &str = "type.googleapis.com/build.bazel.remote.execution.v2.Digest";
const RESULT_TYPE: &str = "type.googleapis.com/build.bazel.remote.execution.v2.ActionResult";

/// The platform property that picks a lease's cache directories.
const TOOLCHAIN_PROPERTY: &str = "toolchain";

/// What every lease of a worker shares.
#[derive(Clone)]
pub(crate) struct Context {
    /// The grid's CAS.
    pub(crate) remote: Remote,
    /// The bot id, written into each result's metadata.
    pub(crate) worker: String,
    /// The per-toolchain cache directories.
    pub(crate) caches: Caches,
    /// Where lease directories go and which workers may sweep a lease's orphans.
    pub(crate) scope: Scope,
}

/// How a lease ended, as the grid is told.
#[derive(Debug, Clone)]
pub(crate) struct Completion {
    /// The lease status (`OK` whenever the command ran, whatever its exit code).
    pub(crate) status: Status,
    /// The result, packed for the lease.
    pub(crate) result: Option<Any>,
    /// How it ended, in words, for the worker's log.
    pub(crate) summary: String,
}

/// Why a lease produced no result.
#[derive(Debug, thiserror::Error)]
enum LeaseError {
    #[error("the lease's payload is `{0}`, not an Action or an Action digest")]
    Payload(String),
    #[error("the lease's {what} blob {digest} cannot be decoded: {source}")]
    Decode {
        what: &'static str,
        digest: Digest,
        source: prost::DecodeError,
    },
    #[error("the Action names no {0} digest")]
    NoDigest(&'static str),
    #[error("{0}")]
    Remote(#[from] RemoteError),
    #[error("{0}")]
    Inputs(#[from] InputError),
    #[error("the Command's working directory `{0}` is not a relative path inside the input root")]
    WorkingDirectory(String),
    #[error("cannot make the lease directory under {}: {source}", path.display())]
    LeaseDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot make the toolchain cache directories: {0}")]
    Caches(std::io::Error),
    #[error("{0}")]
    Run(#[from] RunError),
}

impl LeaseError {
    /// The status the grid is given: whose fault it is decides whether it retries.
    fn code(&self) -> Code {
        match self {
            LeaseError::Payload(_)
            | LeaseError::Decode { .. }
            | LeaseError::NoDigest(_)
            | LeaseError::WorkingDirectory(_)
            | LeaseError::Run(RunError::NoProgram | RunError::Start(_))
            | LeaseError::Inputs(
                InputError::BadName { .. }
                | InputError::BadDirectory { .. }
                | InputError::NoDigest { .. },
            ) => Code::InvalidArgument,
            LeaseError::Remote(e) | LeaseError::Inputs(InputError::Fetch(e)) => remote_code(e),
            LeaseError::Inputs(InputError::Missing { .. }) => Code::FailedPrecondition,
            LeaseError::LeaseDir { .. }
            | LeaseError::Caches(_)
            | LeaseError::Inputs(InputError::Write { .. })
            | LeaseError::Run(RunError::Output { .. }) => Code::Internal,
        }
    }
}

fn remote_code(e: &RemoteError) -> Code {
    match e {
        RemoteError::BlobMissing { .. } => Code::FailedPrecondition,
        e if e.is_unreachable() => Code::Unavailable,
        _ => Code::Internal,
    }
}

/// Runs one lease to its end; `stop` ends its command early, and the lease is then handed back
/// (`UNAVAILABLE`, which the grid retries elsewhere).
pub(crate) async fn execute(
    ctx: &Context,
    payload: Option<&Any>,
    mut stop: InterruptWatch,
) -> Completion {
    let mut metadata = reapi::ExecutedActionMetadata {
        worker: ctx.worker.clone(),
        worker_start_timestamp: Some(timestamp(SystemTime::now())),
        ..Default::default()
    };
    let dir = match lease_dir(&ctx.scope) {
        Ok(dir) => dir,
        Err(e) => return failed(&e),
    };
    let outcome = prepare_and_run(ctx, payload, dir.path(), &mut metadata, &mut stop).await;
    let path = dir.keep();
    let _ = tokio::task::spawn_blocking(move || remove_tree(&path)).await;
    let (ran, output) = match outcome {
        Ok(done) => done,
        Err(e) => return failed(&e),
    };
    if ran.stopped {
        return Completion {
            status: Status {
                code: Code::Unavailable as i32,
                message: format!("worker {} stopped before the action finished", ctx.worker),
                details: Vec::new(),
            },
            result: None,
            summary: "stopped, handed back to the grid".to_owned(),
        };
    }
    let result = reapi::ActionResult {
        exit_code: ran.exit_code,
        stdout_digest: output.map(|d| d.to_proto()),
        execution_metadata: Some(reapi::ExecutedActionMetadata {
            execution_start_timestamp: Some(timestamp(ran.started)),
            execution_completed_timestamp: Some(timestamp(ran.finished)),
            worker_completed_timestamp: Some(timestamp(SystemTime::now())),
            ..metadata
        }),
        ..Default::default()
    };
    let (status, summary) = if ran.timed_out {
        (
            Status {
                code: Code::DeadlineExceeded as i32,
                message: "the action ran past its timeout and was ended".to_owned(),
                details: Vec::new(),
            },
            "timed out".to_owned(),
        )
    } else {
        (Status::default(), format!("exit {}", ran.exit_code))
    };
    let leftovers = if ran.leftovers.is_empty() {
        String::new()
    } else {
        format!(", {} leftover processes killed", ran.leftovers.len())
    };
    Completion {
        status,
        result: Some(Any {
            type_url: RESULT_TYPE.to_owned(),
            value: result.encode_to_vec(),
        }),
        summary: format!("{summary}{leftovers}"),
    }
}

fn failed(e: &LeaseError) -> Completion {
    Completion {
        status: Status {
            code: e.code() as i32,
            message: e.to_string(),
            details: Vec::new(),
        },
        result: None,
        summary: format!("failed: {e}"),
    }
}

/// A fresh directory `<cache dir>/leases/<worker pid>-…`, so a later worker can tell whose it
/// was when this one dies before removing it.
fn lease_dir(scope: &Scope) -> Result<tempfile::TempDir, LeaseError> {
    let error = |source| LeaseError::LeaseDir {
        path: scope.leases_dir.clone(),
        source,
    };
    std::fs::create_dir_all(&scope.leases_dir).map_err(error)?;
    tempfile::Builder::new()
        .prefix(&format!("{}-", std::process::id()))
        .tempdir_in(&scope.leases_dir)
        .map_err(error)
}

/// Reads the action, writes its inputs into `dir/root`, runs it, and uploads its output
/// (`None` when it printed nothing).
async fn prepare_and_run(
    ctx: &Context,
    payload: Option<&Any>,
    dir: &Path,
    metadata: &mut reapi::ExecutedActionMetadata,
    stop: &mut InterruptWatch,
) -> Result<(run::Ran, Option<Digest>), LeaseError> {
    metadata.input_fetch_start_timestamp = Some(timestamp(SystemTime::now()));
    let action = read_action(&ctx.remote, payload).await?;
    let command_digest = action
        .command_digest
        .as_ref()
        .map(Digest::from_proto)
        .ok_or(LeaseError::NoDigest("command"))?;
    let command: reapi::Command = decode(
        "Command",
        &command_digest,
        &ctx.remote.read_blob(&command_digest).await?,
    )?;
    let root_digest = action
        .input_root_digest
        .as_ref()
        .map(Digest::from_proto)
        .ok_or(LeaseError::NoDigest("input root"))?;
    let root = dir.join("root");
    std::fs::create_dir(&root).map_err(|source| LeaseError::LeaseDir {
        path: root.clone(),
        source,
    })?;
    inputs::materialise(&ctx.remote, &root_digest, &root).await?;
    let cwd = working_directory(&root, &command.working_directory)?;
    metadata.input_fetch_completed_timestamp = Some(timestamp(SystemTime::now()));

    // The Action's platform is what the scheduler matched on (Command.platform is deprecated).
    let toolchain = property(&action.platform, TOOLCHAIN_PROPERTY);
    let caches = ctx.caches.env_for(toolchain).map_err(LeaseError::Caches)?;
    let declared: Vec<(String, String)> = command
        .environment_variables
        .iter()
        .map(|v| (v.name.clone(), v.value.clone()))
        .collect();
    let output = dir.join("output");
    let ran = run::run(
        CommandSpec {
            argv: &command.arguments,
            cwd: &cwd,
            env: run::environment(caches, &declared),
            timeout: action.timeout.as_ref().and_then(duration),
            scope: &ctx.scope.token_scope,
            output: &output,
        },
        stop,
    )
    .await?;

    if ran.stopped || ran.output_size == 0 {
        return Ok((ran, None));
    }
    metadata.output_upload_start_timestamp = Some(timestamp(SystemTime::now()));
    let digest = Digest {
        hash: ran.output_hash.clone(),
        size: i64::try_from(ran.output_size).unwrap_or(i64::MAX),
    };
    let mut blobs = BlobSet::new();
    blobs.insert(digest.clone(), Blob::File(output));
    ctx.remote.upload(&blobs).await?;
    metadata.output_upload_completed_timestamp = Some(timestamp(SystemTime::now()));
    Ok((ran, Some(digest)))
}

/// The Action a payload carries, or the one its digest names.
async fn read_action(remote: &Remote, payload: Option<&Any>) -> Result<reapi::Action, LeaseError> {
    let Some(payload) = payload else {
        return Err(LeaseError::Payload("nothing".to_owned()));
    };
    match payload.type_url.as_str() {
        ACTION_TYPE => {
            reapi::Action::decode(payload.value.as_slice()).map_err(|source| LeaseError::Decode {
                what: "Action",
                digest: greenlight_remote::digest_of(&payload.value),
                source,
            })
        }
        DIGEST_TYPE => {
            let digest = reapi::Digest::decode(payload.value.as_slice())
                .map(|d| Digest::from_proto(&d))
                .map_err(|source| LeaseError::Decode {
                    what: "Action digest",
                    digest: greenlight_remote::digest_of(&payload.value),
                    source,
                })?;
            let bytes = remote.read_blob(&digest).await?;
            decode("Action", &digest, &bytes)
        }
        other => Err(LeaseError::Payload(other.to_owned())),
    }
}

fn decode<M: prost::Message + Default>(
    what: &'static str,
    digest: &Digest,
    bytes: &[u8],
) -> Result<M, LeaseError> {
    M::decode(bytes).map_err(|source| LeaseError::Decode {
        what,
        digest: digest.clone(),
        source,
    })
}

/// The command's directory inside the input root, made if the tree did not hold it.
fn working_directory(root: &Path, relative: &str) -> Result<PathBuf, LeaseError> {
    let path = Path::new(relative);
    let plain = path
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !plain {
        return Err(LeaseError::WorkingDirectory(relative.to_owned()));
    }
    let dir = root.join(path);
    // Creating it cannot leave the root: every component is a plain name, and one that is a
    // symlink from the tree makes this fail rather than follow it out.
    let mut at = root.to_path_buf();
    for component in path.components() {
        if let Component::Normal(name) = component {
            at.push(name);
            match std::fs::symlink_metadata(&at) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => return Err(LeaseError::WorkingDirectory(relative.to_owned())),
                Err(_) => std::fs::create_dir(&at).map_err(|source| LeaseError::LeaseDir {
                    path: at.clone(),
                    source,
                })?,
            }
        }
    }
    Ok(dir)
}

fn property<'a>(platform: &'a Option<reapi::Platform>, name: &str) -> Option<&'a str> {
    platform
        .as_ref()?
        .properties
        .iter()
        .find(|p| p.name == name)
        .map(|p| p.value.as_str())
}

/// The Action's timeout, when it sets a positive one.
fn duration(d: &bazel_remote_apis::google::protobuf::Duration) -> Option<Duration> {
    let seconds = u64::try_from(d.seconds).ok()?;
    let nanos = u32::try_from(d.nanos).ok()?;
    let total = Duration::new(seconds, nanos);
    (!total.is_zero()).then_some(total)
}

fn timestamp(at: SystemTime) -> Timestamp {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp {
        seconds: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(since.subsec_nanos()).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_working_directory_stays_inside_the_root() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        assert_eq!(working_directory(root, "").ok(), Some(root.to_path_buf()));
        assert_eq!(working_directory(root, "a/b").ok(), Some(root.join("a/b")));
        assert!(root.join("a/b").is_dir());
        for bad in ["/etc", "../x", "a/../../x"] {
            assert!(working_directory(root, bad).is_err(), "{bad}");
        }
        std::os::unix::fs::symlink("/tmp", root.join("out")).expect("symlink");
        assert!(working_directory(root, "out/x").is_err());
    }

    #[test]
    fn only_a_positive_timeout_is_a_deadline() {
        use bazel_remote_apis::google::protobuf::Duration as Pd;
        assert_eq!(
            duration(&Pd {
                seconds: 0,
                nanos: 0
            }),
            None
        );
        assert_eq!(
            duration(&Pd {
                seconds: -1,
                nanos: 0
            }),
            None
        );
        assert_eq!(
            duration(&Pd {
                seconds: 2,
                nanos: 5
            }),
            Some(Duration::new(2, 5))
        );
    }
}
