//! The gate runner's remote-execution seam ([`greenlight_gate::remote`]) spoken over this
//! client: [`GateBackend`] is what a front end puts in a run's options.
//!
//! The runner names input roots and actions by digest; a connection keeps what it built for
//! those digests (the root's blobs to upload, the encoded `Command` and `Action`), so only
//! plain data crosses the seam and no rule of the runner lives here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use greenlight_gate::remote::{self as seam, RemoteFuture};

use crate::action::{ActionSpec, PreparedAction, prepare};
use crate::blobs::BlobSet;
use crate::connect::{Endpoint, Remote};
use crate::digest::{Digest, digest_of};
use crate::error::RemoteError;
use crate::file_digests::FileDigests;
use crate::outcome::{LocalResult, Outcome};
use crate::tree::InputRoot;

/// The platform property that carries a gate's `keys` outputs (a toolchain's version, a
/// lockfile's hash): part of the action's digest, never used to pick a worker.
pub const KEYS_PROPERTY: &str = "greenlight.keys";

/// Connects the gate runner to REAPI clusters.
#[derive(Clone, Copy, Debug, Default)]
pub struct GateBackend;

impl seam::Backend for GateBackend {
    fn connect<'a>(
        &'a self,
        endpoint: &'a seam::Endpoint,
    ) -> RemoteFuture<'a, Arc<dyn seam::Cluster>> {
        Box::pin(async move {
            let endpoint = Endpoint {
                url: endpoint.url.clone(),
                instance: endpoint.instance.clone(),
                ca_file: endpoint.ca_file.clone(),
                token_file: endpoint.token_file.clone(),
            };
            let remote = Remote::connect(&endpoint).await.map_err(failure)?;
            let cluster: Arc<dyn seam::Cluster> = Arc::new(Connection {
                remote,
                roots: Mutex::default(),
                actions: Mutex::default(),
            });
            Ok(cluster)
        })
    }
}

/// One run's connection and what it built.
struct Connection {
    remote: Remote,
    roots: Mutex<HashMap<Digest, Arc<BlobSet>>>,
    actions: Mutex<HashMap<Digest, PreparedAction>>,
}

impl Connection {
    fn action(&self, digest: &seam::Digest) -> Result<PreparedAction, seam::Failure> {
        let digest = from_seam(digest);
        let actions = self.actions.lock().unwrap_or_else(|e| e.into_inner());
        actions
            .get(&digest)
            .cloned()
            .ok_or_else(|| not_built("action", &digest))
    }
}

impl seam::Cluster for Connection {
    fn can_execute(&self) -> bool {
        self.remote.can_execute()
    }

    fn input_root(
        &self,
        top: &Path,
        files: &[PathBuf],
        digests: Option<seam::SavedDigests<'_>>,
    ) -> Result<seam::Digest, seam::Failure> {
        let mut known = match digests {
            Some(saved) => FileDigests::from_saved(saved.path, saved.saved),
            None => FileDigests::new(),
        };
        let root = InputRoot::build(top, files, &mut known).map_err(failure)?;
        // Best effort: a digest cache that cannot be written only costs the next run a re-read.
        let _ = known.save();
        let digest = to_seam(&root.digest);
        let mut roots = self.roots.lock().unwrap_or_else(|e| e.into_inner());
        roots.insert(root.digest, Arc::new(root.blobs));
        Ok(digest)
    }

    fn prepare(&self, spec: &seam::ActionSpec, root: &seam::Digest) -> seam::Digest {
        let mut platform = spec.platform.clone();
        if !spec.keys.is_empty() {
            let hash = digest_of(spec.keys.join("\n").as_bytes()).hash;
            platform.insert(KEYS_PROPERTY.to_owned(), hash[..32].to_owned());
        }
        let spec = ActionSpec {
            argv: spec.argv.clone(),
            env: spec.env.clone(),
            platform,
            working_directory: spec.working_directory.clone(),
            timeout: spec.timeout,
            do_not_cache: spec.do_not_cache,
        };
        let action = prepare(&spec, &from_seam(root));
        let digest = to_seam(&action.digest);
        let mut actions = self.actions.lock().unwrap_or_else(|e| e.into_inner());
        actions.insert(action.digest.clone(), action);
        digest
    }

    fn lookup<'a>(&'a self, action: &'a seam::Digest) -> RemoteFuture<'a, Option<seam::Outcome>> {
        Box::pin(async move {
            let action = self.action(action)?;
            let found = self.remote.lookup(&action).await.map_err(failure)?;
            Ok(found.map(outcome))
        })
    }

    fn upload_root<'a>(&'a self, root: &'a seam::Digest) -> RemoteFuture<'a, ()> {
        Box::pin(async move {
            let digest = from_seam(root);
            let blobs = {
                let roots = self.roots.lock().unwrap_or_else(|e| e.into_inner());
                roots.get(&digest).cloned()
            };
            let blobs = blobs.ok_or_else(|| not_built("input root", &digest))?;
            self.remote.upload(&blobs).await.map_err(failure)?;
            Ok(())
        })
    }

    fn execute<'a>(
        &'a self,
        action: &'a seam::Digest,
        skip_cache_lookup: bool,
        on_name: &'a mut (dyn FnMut(&str) + Send),
    ) -> RemoteFuture<'a, seam::Outcome> {
        Box::pin(async move {
            let action = self.action(action)?;
            let done = self
                .remote
                .execute(&action, skip_cache_lookup, |name: &str| on_name(name))
                .await;
            done.map(outcome).map_err(failure)
        })
    }

    fn wait<'a>(&'a self, operation: &'a str) -> RemoteFuture<'a, seam::Outcome> {
        Box::pin(async move {
            let done = self.remote.wait(operation).await;
            done.map(outcome).map_err(failure)
        })
    }

    fn cancel<'a>(&'a self, operation: &'a str) -> RemoteFuture<'a, ()> {
        Box::pin(async move { self.remote.cancel(operation).await.map_err(failure) })
    }

    fn publish<'a>(
        &'a self,
        action: &'a seam::Digest,
        result: &'a seam::LocalResult,
    ) -> RemoteFuture<'a, ()> {
        Box::pin(async move {
            let action = self.action(action)?;
            let local = LocalResult {
                exit_code: result.exit_code,
                stdout: result.stdout.clone(),
                stderr: result.stderr.clone(),
                started: result.started,
                finished: result.finished,
            };
            self.remote.publish(&action, &local).await.map_err(failure)
        })
    }
}

fn failure(error: RemoteError) -> seam::Failure {
    seam::Failure {
        unreachable: error.is_unreachable(),
        message: error.to_string(),
    }
}

/// A digest this connection did not build: a caller's mistake, named.
fn not_built(what: &str, digest: &Digest) -> seam::Failure {
    seam::Failure {
        message: format!(
            "the {what} {digest} was not built on this connection; prepare it on the \
             connection that uses it"
        ),
        unreachable: false,
    }
}

fn outcome(outcome: Outcome) -> seam::Outcome {
    seam::Outcome {
        exit_code: outcome.exit_code,
        stdout: outcome.stdout,
        stderr: outcome.stderr,
        cached: outcome.cached,
        worker: outcome.worker,
        duration: outcome.duration,
        timed_out: outcome.timed_out,
        operation: outcome.operation,
    }
}

fn to_seam(digest: &Digest) -> seam::Digest {
    seam::Digest {
        hash: digest.hash.clone(),
        size: digest.size,
    }
}

fn from_seam(digest: &seam::Digest) -> Digest {
    Digest {
        hash: digest.hash.clone(),
        size: digest.size,
    }
}
