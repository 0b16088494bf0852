//! A Remote Execution API v2 client: the input tree of a gate, the content-addressed store,
//! the action cache and remote execution, spoken over gRPC to any REAPI server.
//!
//! A gate run is an `Action` whose digest covers the input tree, the command, the declared
//! environment and the platform; that digest is the key of the shared result cache. The crate
//! knows nothing of gates: callers build an [`InputRoot`], [`prepare`] an [`ActionSpec`], and
//! ask a [`Remote`] to look it up, publish a local result, or execute it. [`ReapiBackend`] is
//! the same client behind the remote-execution seam of `greenlight_types::remote`, whose words
//! ([`Digest`], [`Endpoint`], [`ActionSpec`], [`Outcome`], [`LocalResult`]) this crate speaks.
//!
//! ```no_run
//! # async fn gate(root: &std::path::Path, files: &[std::path::PathBuf]) -> Result<(), greenlight_remote::RemoteError> {
//! use greenlight_remote::*;
//! let remote = Remote::connect(&Endpoint::new("http://127.0.0.1:50051")).await?;
//! let mut cache = FileDigests::load(&root.join(".cache/file-digests"));
//! let tree = InputRoot::build(root, files, &mut cache)?;
//! cache.save()?;
//! let spec = ActionSpec { argv: vec!["/bin/sh".into(), "-c".into(), "cargo test".into()], ..ActionSpec::default() };
//! let action = prepare(&spec, &tree.digest);
//! if let Some(hit) = remote.lookup(&action).await? {
//!     assert!(hit.cached);
//! } else {
//!     remote.upload(&tree.blobs).await?;
//!     let outcome = remote.execute(&action, false, |name| { let _ = name; }).await?;
//!     let _ = outcome.exit_code;
//! }
//! # Ok(()) }
//! ```

mod action;
mod action_cache;
mod backend;
mod blobs;
mod cas;
mod connect;
mod digest;
mod error;
mod execute;
mod file_digests;
mod outcome;
mod tree;

pub use action::{ActionSpec, KEYS_PROPERTY, PreparedAction, prepare};
pub use backend::ReapiBackend;
pub use blobs::{Blob, BlobSet};
pub use cas::UploadStats;
pub use connect::{Endpoint, Remote};
pub use digest::{Digest, DigestProto, digest_of, hex};
pub use error::RemoteError;
pub use file_digests::FileDigests;
pub use outcome::{LocalResult, Outcome};
pub use tree::InputRoot;

/// The protocol messages and stubs this crate speaks, for callers that need one it does not
/// wrap.
pub use bazel_remote_apis as proto;

#[cfg(test)]
mod tests {
    use super::*;

    /// Callers run these on multi-threaded runtimes and in spawned tasks: their futures must
    /// be `Send`. (Compiled, never called.)
    #[allow(dead_code)]
    fn remote_futures_are_send(remote: &Remote, action: &PreparedAction, local: &LocalResult) {
        fn send<T: Send>(_: T) {}
        send(Remote::connect(&Endpoint::default()));
        send(remote.upload(&BlobSet::new()));
        send(remote.read_blob(&Digest::empty()));
        send(remote.read_blobs(&[]));
        send(remote.lookup(action));
        send(remote.publish(action, local));
        send(remote.execute(action, false, |_| {}));
        send(remote.wait("operation"));
        send(remote.cancel("operation"));
    }
}
