//! A Remote Execution API v2 client: the input tree of a gate, the content-addressed store,
//! the action cache and remote execution, spoken over gRPC to any REAPI server.
//!
//! A gate run is an `Action` whose digest covers the input tree, the command, the declared
//! environment and the platform; that digest is the key of the shared result cache. The crate
//! knows nothing of gates: callers build an [`InputRoot`], [`prepare`] an [`ActionSpec`], and
//! ask a [`Remote`] to look it up, publish a local result, or execute it.

mod blobs;
mod cas;
mod connect;
mod digest;
mod error;

pub use blobs::{Blob, BlobSet};
pub use cas::UploadStats;
pub use connect::{Endpoint, Remote};
pub use digest::{Digest, digest_of, hex};
pub use error::RemoteError;

/// The protocol messages this crate speaks, for callers that need one it does not wrap.
pub use bazel_remote_apis as proto;
