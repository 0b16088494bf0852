//! This client behind the remote-execution seam ([`greenlight_types::remote`]): [`ReapiBackend`]
//! is what a front end hands the gate runner.
//!
//! The runner names input roots and actions by digest; a connection keeps what it built for
//! those digests (the root's blobs to upload, the encoded `Command` and `Action`), so only
//! plain data crosses the seam and no rule of the runner lives here. The seam's words are this
//! crate's own ([`Digest`], [`ActionSpec`], [`Outcome`], ...), so nothing is mapped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use greenlight_types::remote::{
    Backend, Cluster, Failure, LocalResult, Outcome, RemoteFuture, SavedDigests,
};

use crate::action::{ActionSpec, PreparedAction, prepare};
use crate::blobs::BlobSet;
use crate::connect::{Endpoint, Remote};
use crate::digest::Digest;
use crate::file_digests::FileDigests;
use crate::tree::InputRoot;

/// Connects gate runs to REAPI clusters.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReapiBackend;

impl Backend for ReapiBackend {
    fn connect<'a>(&'a self, endpoint: &'a Endpoint) -> RemoteFuture<'a, Arc<dyn Cluster>> {
        Box::pin(async move {
            let remote = Remote::connect(endpoint).await.map_err(Failure::from)?;
            let cluster: Arc<dyn Cluster> = Arc::new(Connection {
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
    fn action(&self, digest: &Digest) -> Result<PreparedAction, Failure> {
        let actions = self.actions.lock().unwrap_or_else(|e| e.into_inner());
        actions
            .get(digest)
            .cloned()
            .ok_or_else(|| not_built("action", digest))
    }
}

impl Cluster for Connection {
    fn can_execute(&self) -> bool {
        self.remote.can_execute()
    }

    fn input_root(
        &self,
        top: &Path,
        files: &[PathBuf],
        digests: Option<SavedDigests<'_>>,
    ) -> Result<Digest, Failure> {
        let mut known = match digests {
            Some(saved) => FileDigests::from_saved(saved.path, saved.saved),
            None => FileDigests::new(),
        };
        let root = InputRoot::build(top, files, &mut known)?;
        // Best effort: a digest cache that cannot be written only costs the next run a re-read.
        let _ = known.save();
        let mut roots = self.roots.lock().unwrap_or_else(|e| e.into_inner());
        roots.insert(root.digest.clone(), Arc::new(root.blobs));
        Ok(root.digest)
    }

    fn prepare(&self, spec: &ActionSpec, root: &Digest) -> Digest {
        let action = prepare(spec, root);
        let digest = action.digest.clone();
        let mut actions = self.actions.lock().unwrap_or_else(|e| e.into_inner());
        actions.insert(action.digest.clone(), action);
        digest
    }

    fn lookup<'a>(&'a self, action: &'a Digest) -> RemoteFuture<'a, Option<Outcome>> {
        Box::pin(async move {
            let action = self.action(action)?;
            self.remote.lookup(&action).await.map_err(Failure::from)
        })
    }

    fn upload_root<'a>(&'a self, root: &'a Digest) -> RemoteFuture<'a, ()> {
        Box::pin(async move {
            let blobs = {
                let roots = self.roots.lock().unwrap_or_else(|e| e.into_inner());
                roots.get(root).cloned()
            };
            let blobs = blobs.ok_or_else(|| not_built("input root", root))?;
            self.remote.upload(&blobs).await.map_err(Failure::from)?;
            Ok(())
        })
    }

    fn execute<'a>(
        &'a self,
        action: &'a Digest,
        skip_cache_lookup: bool,
        on_name: &'a mut (dyn FnMut(&str) + Send),
    ) -> RemoteFuture<'a, Outcome> {
        Box::pin(async move {
            let action = self.action(action)?;
            let done = self
                .remote
                .execute(&action, skip_cache_lookup, |name: &str| on_name(name))
                .await;
            done.map_err(Failure::from)
        })
    }

    fn wait<'a>(&'a self, operation: &'a str) -> RemoteFuture<'a, Outcome> {
        Box::pin(async move { self.remote.wait(operation).await.map_err(Failure::from) })
    }

    fn cancel<'a>(&'a self, operation: &'a str) -> RemoteFuture<'a, ()> {
        Box::pin(async move { self.remote.cancel(operation).await.map_err(Failure::from) })
    }

    fn publish<'a>(&'a self, action: &'a Digest, result: &'a LocalResult) -> RemoteFuture<'a, ()> {
        Box::pin(async move {
            let action = self.action(action)?;
            self.remote
                .publish(&action, result)
                .await
                .map_err(Failure::from)
        })
    }
}

/// A digest this connection did not build: a caller's mistake, named.
fn not_built(what: &str, digest: &Digest) -> Failure {
    Failure {
        message: format!(
            "the {what} {digest} was not built on this connection; prepare it on the \
             connection that uses it"
        ),
        unreachable: false,
    }
}
