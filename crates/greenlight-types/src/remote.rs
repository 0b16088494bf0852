//! The remote-execution seam: what a gate run asks of a Remote Execution API cluster, as the
//! traits a backend implements and the plain data that crosses them.
//!
//! It lives on the ground floor so both sides can name it without an arrow between them: the
//! gate runner calls [`Backend`] and [`Cluster`] and never speaks the protocol; the REAPI client
//! implements them and knows nothing of gates; the binary hands one to the other. Input roots
//! and actions cross as their content digests, so nothing but plain data does. **Pure**: no
//! I/O here, only the words.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What a backend's calls return: a `Send` future, so a run may await it on any runtime thread.
pub type RemoteFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, Failure>> + Send + 'a>>;

/// Something that connects to clusters: what a front end hands the runner.
pub trait Backend: Send + Sync {
    /// Connects to `endpoint` and checks what the cluster offers (a wrong URL, a refused
    /// token or a cluster without the digest function is a [`Failure`] here, once).
    fn connect<'a>(&'a self, endpoint: &'a Endpoint) -> RemoteFuture<'a, Arc<dyn Cluster>>;
}

/// One connection to a cluster, for one run. Input roots and actions are named by the digests
/// [`Cluster::input_root`] and [`Cluster::prepare`] returned on this same connection.
pub trait Cluster: Send + Sync {
    /// Whether the cluster executes actions (else it is an action cache only).
    fn can_execute(&self) -> bool;

    /// The input root of `files` (relative to `top`): its digest. It reads and hashes files,
    /// so call it off the async runtime's threads. `digests`: where file digests are kept
    /// between runs, and what this run read there (`None`: in memory only).
    fn input_root(
        &self,
        top: &Path,
        files: &[PathBuf],
        digests: Option<SavedDigests<'_>>,
    ) -> Result<Digest, Failure>;

    /// The action of `spec` over the input root `root`: its digest (the key of the shared
    /// result cache).
    fn prepare(&self, spec: &ActionSpec, root: &Digest) -> Digest;

    /// The action's cached result; `None` on a miss.
    fn lookup<'a>(&'a self, action: &'a Digest) -> RemoteFuture<'a, Option<Outcome>>;

    /// Puts the input root's files and directories on the cluster (what it has is skipped).
    fn upload_root<'a>(&'a self, root: &'a Digest) -> RemoteFuture<'a, ()>;

    /// Executes the action and waits for its result; `on_name` hears the operation's name as
    /// soon as the cluster names it. `skip_cache_lookup`: run it even when a result is cached.
    fn execute<'a>(
        &'a self,
        action: &'a Digest,
        skip_cache_lookup: bool,
        on_name: &'a mut (dyn FnMut(&str) + Send),
    ) -> RemoteFuture<'a, Outcome>;

    /// Waits for an execution started earlier (perhaps by another process), by its name.
    fn wait<'a>(&'a self, operation: &'a str) -> RemoteFuture<'a, Outcome>;

    /// Asks the cluster to cancel an execution.
    fn cancel<'a>(&'a self, operation: &'a str) -> RemoteFuture<'a, ()>;

    /// Publishes a result measured here as the action's (nothing is sent for an action whose
    /// spec said `do_not_cache`).
    fn publish<'a>(&'a self, action: &'a Digest, result: &'a LocalResult) -> RemoteFuture<'a, ()>;
}

/// Where a cluster is and how to authenticate to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// `http://host:port` or `https://host:port` (`grpc://` and `grpcs://` read the same).
    pub url: String,
    /// The instance name; empty for the cluster's default instance.
    pub instance: String,
    /// A PEM file of CA certificates to trust for `https`, instead of the system roots.
    pub ca_file: Option<PathBuf>,
    /// A file whose content (one line) is sent as a bearer token.
    pub token_file: Option<PathBuf>,
}

impl Endpoint {
    /// An endpoint for the default instance, without TLS settings or token.
    pub fn new(url: impl Into<String>) -> Endpoint {
        Endpoint {
            url: url.into(),
            ..Endpoint::default()
        }
    }
}

/// A content digest as the cluster names a blob: its SHA-256 in lowercase hex and its size.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    /// SHA-256 of the content, lowercase hex.
    pub hash: String,
    /// Size of the content in bytes.
    pub size: i64,
}

/// The SHA-256 of zero bytes (`printf '' | sha256sum`).
const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

impl Digest {
    /// The digest of zero bytes (every REAPI server has this blob without being told).
    pub fn empty() -> Digest {
        Digest {
            hash: EMPTY_SHA256.to_owned(),
            size: 0,
        }
    }

    /// The size as an unsigned byte count (a negative size, which no server should send,
    /// counts as zero).
    pub fn len(&self) -> u64 {
        u64::try_from(self.size).unwrap_or(0)
    }

    /// True for the digest of zero bytes.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.hash, self.size)
    }
}

/// Where a backend keeps the file digests of one worktree between runs, and the bytes this
/// run read there (read by the runner, without blocking on a FIFO; `None`: nothing usable).
#[derive(Clone, Copy, Debug)]
pub struct SavedDigests<'a> {
    /// The file they are saved to.
    pub path: &'a Path,
    /// What it held when this run started.
    pub saved: Option<&'a [u8]>,
}

/// What one gate's action is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActionSpec {
    /// The command line.
    pub argv: Vec<String>,
    /// The environment the command gets (and nothing else of this machine's).
    pub env: BTreeMap<String, String>,
    /// The platform properties a worker must offer.
    pub platform: BTreeMap<String, String>,
    /// The outputs of the gate's `keys` commands, in order: part of the action's digest (one
    /// more platform property), never used to pick a worker.
    pub keys: Vec<String>,
    /// The directory, relative to the input root, the command runs in (empty: the root).
    pub working_directory: String,
    /// The time limit the cluster enforces.
    pub timeout: Option<Duration>,
    /// The result must be neither cached nor merged with another execution's.
    pub do_not_cache: bool,
}

/// A result from the cluster: a cache hit or an execution.
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
    /// The worker that ran it, when the cluster says.
    pub worker: Option<String>,
    /// How long the command ran on the worker, when the cluster says.
    pub duration: Option<Duration>,
    /// True when the command hit the action's time limit.
    pub timed_out: bool,
    /// The execution's operation name (executions only).
    pub operation: Option<String>,
}

/// A run on this machine, as published to the action cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalResult {
    /// The exit code.
    pub exit_code: i32,
    /// What it wrote to stdout.
    pub stdout: Vec<u8>,
    /// What it wrote to stderr.
    pub stderr: Vec<u8>,
    /// When it started.
    pub started: SystemTime,
    /// When it ended.
    pub finished: SystemTime,
}

/// Why a call to the cluster failed, in words that name the cluster and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The whole message.
    pub message: String,
    /// The cluster could not be reached (or stopped answering): later calls would fail too.
    pub unreachable: bool,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}
