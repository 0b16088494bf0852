//! What can go wrong talking to a remote execution server, each failure naming the endpoint,
//! digest or operation at fault and what to do about it.
//!
//! `is_unreachable` is the one question a caller asks to decide between "run it locally
//! instead" and "report the failure".

use std::path::PathBuf;

use crate::Digest;

/// A failure of the remote client. Every message says what failed, where, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The endpoint URL could not be used.
    #[error("remote endpoint `{url}`: {reason}; use http://host:port or https://host:port")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// Why it was refused.
        reason: String,
    },

    /// The bearer token file could not be read or holds no usable token.
    #[error("remote endpoint {url}: token file {}: {reason}; write the token (one line) into that file or drop token_file", path.display())]
    TokenFile {
        /// The endpoint the token is for.
        url: String,
        /// The token file.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },

    /// The CA certificate file could not be read.
    #[error("remote endpoint {url}: CA file {}: {source}; point ca_file at a readable PEM file", path.display())]
    CaFile {
        /// The endpoint the certificate is for.
        url: String,
        /// The CA file.
        path: PathBuf,
        /// The read error.
        source: std::io::Error,
    },

    /// The server could not be reached (refused, timed out, TLS failure, connection lost).
    #[error(
        "remote endpoint {url} cannot be reached ({detail}); check that the server runs and the URL is right, or run without the remote"
    )]
    Unreachable {
        /// The endpoint.
        url: String,
        /// The transport's own words.
        detail: String,
    },

    /// The server refused the credentials.
    #[error(
        "remote endpoint {url} refused the credentials during {call} ({detail}); check token_file"
    )]
    Unauthenticated {
        /// The endpoint.
        url: String,
        /// The RPC that was refused.
        call: &'static str,
        /// The server's message.
        detail: String,
    },

    /// The server does not offer SHA-256 digests, the only function this client speaks.
    #[error(
        "remote endpoint {url} (instance `{instance}`) does not offer SHA-256 digests (it offers: {offered}); configure the server's CAS for SHA256"
    )]
    NoSha256 {
        /// The endpoint.
        url: String,
        /// The instance name asked about.
        instance: String,
        /// The digest functions the server named.
        offered: String,
    },

    /// The server has no content-addressed store for this instance.
    #[error(
        "remote endpoint {url} (instance `{instance}`) offers no cache capabilities; check the instance name and that the server runs a CAS and an action cache"
    )]
    NoCache {
        /// The endpoint.
        url: String,
        /// The instance name asked about.
        instance: String,
    },

    /// Execution was asked of a server that does not offer it.
    #[error(
        "remote endpoint {url} (instance `{instance}`) does not offer remote execution; use it as a cache only, or enable the execution service"
    )]
    ExecutionDisabled {
        /// The endpoint.
        url: String,
        /// The instance name.
        instance: String,
    },

    /// An RPC failed with a status the client does not handle on its own.
    #[error("remote endpoint {url}: {call} of {target} failed: {code:?}: {message}; {advice}")]
    Rpc {
        /// The endpoint.
        url: String,
        /// The RPC.
        call: &'static str,
        /// What the call was about: a digest, an operation name, a resource name.
        target: String,
        /// The gRPC status code.
        code: tonic::Code,
        /// The server's message.
        message: String,
        /// What to do.
        advice: &'static str,
    },

    /// A blob asked for is not in the content-addressed store.
    #[error(
        "remote endpoint {url}: blob {digest} is not in the CAS (evicted, or never uploaded); upload it again"
    )]
    BlobMissing {
        /// The endpoint.
        url: String,
        /// The missing blob.
        digest: Digest,
    },

    /// A blob read back did not hash to its digest.
    #[error(
        "remote endpoint {url}: blob {digest} came back as {got}; the server's CAS is corrupt, report it to its operator"
    )]
    BlobCorrupt {
        /// The endpoint.
        url: String,
        /// The blob asked for.
        digest: Digest,
        /// The digest of what came back.
        got: Digest,
    },

    /// A local file changed between hashing it and uploading it.
    #[error("{} changed after it was hashed as {digest} and before it was uploaded; build the input root again", path.display())]
    ChangedWhileUploading {
        /// The file.
        path: PathBuf,
        /// The digest it had when hashed.
        digest: Digest,
    },

    /// A local file could not be read or written.
    #[error("{}: {source}; check that the file exists and is readable", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },

    /// An input path the REAPI cannot carry or that leaves the input root.
    #[error("input {}: {reason}", path.display())]
    BadInput {
        /// The path as listed (relative to the root).
        path: PathBuf,
        /// Why it cannot be part of the input root, and what to do.
        reason: String,
    },

    /// The server answered with something the protocol does not allow.
    #[error(
        "remote endpoint {url}: {call} of {target}: {detail}; the server does not follow the Remote Execution API, report it to its operator"
    )]
    Protocol {
        /// The endpoint.
        url: String,
        /// The RPC.
        call: &'static str,
        /// The digest or operation concerned.
        target: String,
        /// What was wrong.
        detail: String,
    },

    /// A remote execution ended without a result.
    #[error("remote endpoint {url}: operation {operation} failed: {code:?}: {message}; {advice}")]
    ExecutionFailed {
        /// The endpoint.
        url: String,
        /// The operation name.
        operation: String,
        /// The status code the execution ended with.
        code: tonic::Code,
        /// The server's message.
        message: String,
        /// What to do.
        advice: &'static str,
    },
}

/// The seam's failure: the whole message, and whether later calls would fail too.
impl From<RemoteError> for greenlight_types::remote::Failure {
    fn from(error: RemoteError) -> Self {
        greenlight_types::remote::Failure {
            unreachable: error.is_unreachable(),
            message: error.to_string(),
        }
    }
}

impl RemoteError {
    /// True when the server could not be reached at all, the case in which a caller may fall
    /// back to running locally instead of failing.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, RemoteError::Unreachable { .. })
    }

    /// The error for a failed RPC: unreachable for transport failures, unauthenticated for
    /// refused credentials, a plain RPC failure otherwise.
    pub(crate) fn from_status(
        url: &str,
        call: &'static str,
        target: impl std::fmt::Display,
        status: &tonic::Status,
    ) -> RemoteError {
        match status.code() {
            // A server that does not answer in time is as good as gone: the caller's way out
            // is the same (run locally).
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded => RemoteError::Unreachable {
                url: url.to_string(),
                detail: format!("{call} of {target}: {}", status.message()),
            },
            tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => {
                RemoteError::Unauthenticated {
                    url: url.to_string(),
                    call,
                    detail: status.message().to_string(),
                }
            }
            code => RemoteError::Rpc {
                url: url.to_string(),
                call,
                target: target.to_string(),
                code,
                message: status.message().to_string(),
                advice: advice_for(code),
            },
        }
    }
}

/// What a user can do about a status code the client does not handle itself.
pub(crate) fn advice_for(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::NotFound => "the server no longer knows it; run the action again",
        Code::InvalidArgument => "the server rejected the request; check the instance name",
        Code::FailedPrecondition => {
            "an input is missing from the CAS; upload the input root again and retry"
        }
        Code::ResourceExhausted => "the server is out of space or quota; retry later",
        Code::DeadlineExceeded => "the server did not answer in time; retry later",
        Code::Unimplemented => "the server does not implement this call; use another server",
        _ => "retry, and if it persists look at the server's log",
    }
}
