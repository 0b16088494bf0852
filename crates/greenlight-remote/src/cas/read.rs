//! Reads: `BatchReadBlobs` for blobs that fit a batch, `ByteStream.Read` for larger ones
//! (into memory or straight into a file), every blob checked against its digest.

use std::collections::HashMap;
use std::path::Path;

use bazel_remote_apis::build::bazel::remote::execution::v2 as reapi;
use bazel_remote_apis::google::bytestream::{ReadRequest, ReadResponse};
use tokio::io::AsyncWriteExt;

use super::{BATCH_OVERHEAD, batch_cost, sha256};
use crate::connect::{Remote, unary};
use crate::digest::{Digest, DigestProto, StreamHasher, digest_of};
use crate::error::RemoteError;

impl Remote {
    /// One blob's content. Small blobs come through `BatchReadBlobs`, large ones through
    /// `ByteStream.Read`; either way the content is checked against the digest.
    pub async fn read_blob(&self, digest: &Digest) -> Result<Vec<u8>, RemoteError> {
        if digest.is_empty() {
            return Ok(Vec::new());
        }
        if !self.fits_in_batch(digest.len()) {
            return self.read_stream(digest).await;
        }
        let mut read = self.read_batch(std::slice::from_ref(digest)).await?;
        read.remove(digest).ok_or_else(|| {
            self.protocol(
                "BatchReadBlobs",
                digest,
                "the blob asked for was not in the answer",
            )
        })
    }

    /// Several blobs' contents, keyed by digest (duplicates are read once).
    pub async fn read_blobs(
        &self,
        digests: &[Digest],
    ) -> Result<HashMap<Digest, Vec<u8>>, RemoteError> {
        let mut out = HashMap::new();
        let mut batch: Vec<Digest> = Vec::new();
        let mut batch_bytes = BATCH_OVERHEAD;
        let mut wanted: Vec<&Digest> = digests.iter().collect();
        wanted.sort();
        wanted.dedup();
        for digest in wanted {
            if digest.is_empty() {
                out.insert(digest.clone(), Vec::new());
            } else if !self.fits_in_batch(digest.len()) {
                out.insert(digest.clone(), self.read_stream(digest).await?);
            } else {
                let cost = batch_cost(digest);
                if batch_bytes + cost > self.max_batch_total_size() && !batch.is_empty() {
                    out.extend(self.read_batch(&std::mem::take(&mut batch)).await?);
                    batch_bytes = BATCH_OVERHEAD;
                }
                batch_bytes += cost;
                batch.push(digest.clone());
            }
        }
        if !batch.is_empty() {
            out.extend(self.read_batch(&batch).await?);
        }
        if let Some(absent) = digests.iter().find(|d| !out.contains_key(*d)) {
            return Err(self.protocol(
                "BatchReadBlobs",
                absent,
                "the blob asked for was not in the answer",
            ));
        }
        Ok(out)
    }

    /// Writes one blob into a file (created or truncated), streamed, so a large blob is never
    /// held whole. The file is removed again if the content does not match the digest.
    pub async fn read_blob_to_file(&self, digest: &Digest, path: &Path) -> Result<(), RemoteError> {
        let io_err = |source| RemoteError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = tokio::fs::File::create(path).await.map_err(io_err)?;
        if digest.is_empty() {
            return Ok(());
        }
        if self.fits_in_batch(digest.len()) {
            let bytes = self.read_blob(digest).await?;
            file.write_all(&bytes).await.map_err(io_err)?;
            return file.flush().await.map_err(io_err);
        }
        let mut stream = self.open_read_stream(digest).await?;
        let mut hasher = StreamHasher::default();
        let result = async {
            while let Some(chunk) = stream
                .message()
                .await
                .map_err(|status| self.read_error(digest, &status))?
            {
                hasher.update(&chunk.data);
                file.write_all(&chunk.data).await.map_err(io_err)?;
            }
            file.flush().await.map_err(io_err)?;
            self.check_content(digest, hasher.finish())
        }
        .await;
        if result.is_err() {
            drop(file);
            let _ = tokio::fs::remove_file(path).await;
        }
        result
    }

    async fn read_batch(
        &self,
        digests: &[Digest],
    ) -> Result<HashMap<Digest, Vec<u8>>, RemoteError> {
        let response = self
            .cas()
            .batch_read_blobs(unary(reapi::BatchReadBlobsRequest {
                instance_name: self.instance().to_string(),
                digests: digests.iter().map(Digest::to_proto).collect(),
                acceptable_compressors: Vec::new(),
                digest_function: sha256(),
            }))
            .await
            .map_err(|status| {
                let target = match digests {
                    [one] => one.to_string(),
                    [first, ..] => format!("{} blobs from {first}", digests.len()),
                    [] => "no blobs".to_string(),
                };
                RemoteError::from_status(self.url(), "BatchReadBlobs", target, &status)
            })?;
        let mut out = HashMap::new();
        for answer in response.into_inner().responses {
            let digest = answer
                .digest
                .as_ref()
                .map(Digest::from_proto)
                .unwrap_or_else(Digest::empty);
            if let Some(status) = answer.status.filter(|s| s.code != 0) {
                return Err(self.blob_status_error("BatchReadBlobs", &digest, &status));
            }
            self.check_content(&digest, digest_of(&answer.data))?;
            out.insert(digest, answer.data);
        }
        Ok(out)
    }

    async fn read_stream(&self, digest: &Digest) -> Result<Vec<u8>, RemoteError> {
        let mut stream = self.open_read_stream(digest).await?;
        let mut data = Vec::with_capacity(usize::try_from(digest.len()).unwrap_or(0));
        while let Some(chunk) = stream
            .message()
            .await
            .map_err(|status| self.read_error(digest, &status))?
        {
            data.extend_from_slice(&chunk.data);
        }
        self.check_content(digest, digest_of(&data))?;
        Ok(data)
    }

    async fn open_read_stream(
        &self,
        digest: &Digest,
    ) -> Result<tonic::Streaming<ReadResponse>, RemoteError> {
        let resource = self.resource(&format!("blobs/{}/{}", digest.hash, digest.size));
        self.bytestream()
            .read(ReadRequest {
                resource_name: resource,
                read_offset: 0,
                read_limit: 0,
            })
            .await
            .map(tonic::Response::into_inner)
            .map_err(|status| self.read_error(digest, &status))
    }

    fn read_error(&self, digest: &Digest, status: &tonic::Status) -> RemoteError {
        if status.code() == tonic::Code::NotFound {
            RemoteError::BlobMissing {
                url: self.url().to_string(),
                digest: digest.clone(),
            }
        } else {
            RemoteError::from_status(self.url(), "ByteStream.Read", digest, status)
        }
    }
}
