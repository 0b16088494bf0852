//! The content-addressed store: upload only what the server lacks, in batches that fit its
//! limit or streamed when a blob is larger (`upload`), and read blobs back, checked against
//! their digest (`read`).
//!
//! Files are read when they are sent, not before, and are streamed in chunks when large, so
//! uploading a big tree never holds more than one batch in memory.

mod read;
mod upload;

use bazel_remote_apis::build::bazel::remote::execution::v2 as reapi;

pub use upload::UploadStats;

use crate::connect::Remote;
use crate::digest::Digest;
use crate::error::{RemoteError, advice_for};

/// Room left in every batch call for the request's own fields, and per blob for its digest and
/// framing (a 64-digit hash, a size and the field tags stay well under 128 bytes).
const BATCH_OVERHEAD: usize = 1024;
const PER_BLOB_OVERHEAD: usize = 128;

impl Remote {
    /// True when a blob of this size goes in a batch call rather than a byte stream.
    pub(crate) fn fits_in_batch(&self, size: u64) -> bool {
        usize::try_from(size).is_ok_and(|size| {
            size.saturating_add(PER_BLOB_OVERHEAD + BATCH_OVERHEAD) <= self.max_batch_total_size()
        })
    }

    pub(crate) fn blob_status_error(
        &self,
        call: &'static str,
        digest: &Digest,
        status: &bazel_remote_apis::google::rpc::Status,
    ) -> RemoteError {
        let code = tonic::Code::from_i32(status.code);
        if code == tonic::Code::NotFound {
            return RemoteError::BlobMissing {
                url: self.url().to_string(),
                digest: digest.clone(),
            };
        }
        RemoteError::Rpc {
            url: self.url().to_string(),
            call,
            target: digest.to_string(),
            code,
            message: status.message.clone(),
            advice: advice_for(code),
        }
    }

    pub(crate) fn check_content(&self, digest: &Digest, got: Digest) -> Result<(), RemoteError> {
        if &got == digest {
            Ok(())
        } else {
            Err(RemoteError::BlobCorrupt {
                url: self.url().to_string(),
                digest: digest.clone(),
                got,
            })
        }
    }

    pub(crate) fn protocol(
        &self,
        call: &'static str,
        target: impl std::fmt::Display,
        detail: &str,
    ) -> RemoteError {
        RemoteError::Protocol {
            url: self.url().to_string(),
            call,
            target: target.to_string(),
            detail: detail.to_string(),
        }
    }
}

/// The digest function every request names.
pub(crate) fn sha256() -> i32 {
    reapi::digest_function::Value::Sha256 as i32
}

pub(crate) fn batch_cost(digest: &Digest) -> usize {
    usize::try_from(digest.len())
        .unwrap_or(usize::MAX)
        .saturating_add(PER_BLOB_OVERHEAD)
}
