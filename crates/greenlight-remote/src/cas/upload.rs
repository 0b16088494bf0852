//! Uploads: `FindMissingBlobs`, then `BatchUpdateBlobs` in batches within the server's limit,
//! and `ByteStream.Write` in chunks for a blob larger than a batch. A file is hashed again as
//! it is sent, and one that changed since it was listed is refused, never stored.

use std::io::Read;
use std::path::PathBuf;

use bazel_remote_apis::build::bazel::remote::execution::v2::{
    self as reapi, batch_update_blobs_request,
};
use bazel_remote_apis::google::bytestream::WriteRequest;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::{BATCH_OVERHEAD, batch_cost, sha256};
use crate::blobs::{Blob, BlobSet};
use crate::connect::{Remote, unary};
use crate::digest::{Digest, DigestProto, StreamHasher, digest_of};
use crate::error::RemoteError;

/// What an upload did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UploadStats {
    /// Blobs in the set.
    pub blobs: usize,
    /// Blobs the server lacked (and that were uploaded).
    pub missing: usize,
    /// Of those, how many went in `BatchUpdateBlobs` calls.
    pub batched: usize,
    /// Of those, how many were streamed through `ByteStream.Write`.
    pub streamed: usize,
    /// Bytes uploaded (blob content, not counting protocol framing).
    pub bytes: u64,
    /// `BatchUpdateBlobs` calls made.
    pub batch_calls: usize,
}

/// Digests per `FindMissingBlobs` call: about 80 bytes each, so a call stays near 800 KB.
const FIND_MISSING_CHUNK: usize = 10_000;
/// Bytes per `ByteStream.Write` message.
const STREAM_CHUNK: usize = 1024 * 1024;

impl Remote {
    /// Uploads the blobs the server does not have: `FindMissingBlobs`, then `BatchUpdateBlobs`
    /// in batches within the server's limit, and `ByteStream.Write` for a blob larger than a
    /// batch. A file that no longer hashes to its digest is refused, not uploaded.
    pub async fn upload(&self, blobs: &BlobSet) -> Result<UploadStats, RemoteError> {
        let digests: Vec<Digest> = blobs.digests().cloned().collect();
        let missing = self.find_missing(&digests).await?;
        let mut stats = UploadStats {
            blobs: blobs.len(),
            missing: missing.len(),
            ..UploadStats::default()
        };
        let mut batch: Vec<(Digest, Blob)> = Vec::new();
        let mut batch_bytes = BATCH_OVERHEAD;
        for digest in missing {
            let Some(blob) = blobs.get(&digest) else {
                return Err(self.protocol(
                    "FindMissingBlobs",
                    &digest,
                    "the server reported a digest that was not asked about",
                ));
            };
            if !self.fits_in_batch(digest.len()) {
                self.write_stream(&digest, blob).await?;
                stats.streamed += 1;
                stats.bytes += digest.len();
                continue;
            }
            let cost = batch_cost(&digest);
            if batch_bytes + cost > self.max_batch_total_size() && !batch.is_empty() {
                self.send_batch(std::mem::take(&mut batch), &mut stats)
                    .await?;
                batch_bytes = BATCH_OVERHEAD;
            }
            batch_bytes += cost;
            batch.push((digest, blob.clone()));
        }
        if !batch.is_empty() {
            self.send_batch(batch, &mut stats).await?;
        }
        Ok(stats)
    }

    /// The digests among `digests` that the server does not hold.
    pub async fn find_missing(&self, digests: &[Digest]) -> Result<Vec<Digest>, RemoteError> {
        let mut missing = Vec::new();
        for chunk in digests.chunks(FIND_MISSING_CHUNK) {
            let request = reapi::FindMissingBlobsRequest {
                instance_name: self.instance().to_string(),
                blob_digests: chunk.iter().map(Digest::to_proto).collect(),
                digest_function: sha256(),
            };
            let response = self
                .cas()
                .find_missing_blobs(unary(request))
                .await
                .map_err(|status| {
                    let target = format!("{} digests", chunk.len());
                    RemoteError::from_status(self.url(), "FindMissingBlobs", target, &status)
                })?;
            missing.extend(
                response
                    .into_inner()
                    .missing_blob_digests
                    .iter()
                    .map(Digest::from_proto),
            );
        }
        Ok(missing)
    }

    async fn send_batch(
        &self,
        batch: Vec<(Digest, Blob)>,
        stats: &mut UploadStats,
    ) -> Result<(), RemoteError> {
        // Reading the files is blocking work; keep it off the runtime's threads.
        let requests = tokio::task::spawn_blocking(move || {
            batch
                .into_iter()
                .map(|(digest, blob)| {
                    let data = match blob {
                        Blob::Bytes(bytes) => bytes,
                        Blob::File(path) => read_checked(&path, &digest)?,
                    };
                    Ok(batch_update_blobs_request::Request {
                        digest: Some(digest.to_proto()),
                        data,
                        compressor: 0,
                    })
                })
                .collect::<Result<Vec<_>, RemoteError>>()
        })
        .await
        .map_err(reader_failed)??;
        let count = requests.len();
        let bytes: u64 = requests.iter().map(|r| r.data.len() as u64).sum();
        let first = requests
            .first()
            .and_then(|r| r.digest.as_ref())
            .map(Digest::from_proto);
        let response = self
            .cas()
            .batch_update_blobs(unary(reapi::BatchUpdateBlobsRequest {
                instance_name: self.instance().to_string(),
                requests,
                digest_function: sha256(),
            }))
            .await
            .map_err(|status| {
                let target = match &first {
                    Some(d) => format!("{count} blobs from {d}"),
                    None => "an empty batch".to_string(),
                };
                RemoteError::from_status(self.url(), "BatchUpdateBlobs", target, &status)
            })?;
        for answer in response.into_inner().responses {
            let digest = answer
                .digest
                .as_ref()
                .map(Digest::from_proto)
                .unwrap_or_else(Digest::empty);
            if let Some(status) = answer.status.filter(|s| s.code != 0) {
                return Err(self.blob_status_error("BatchUpdateBlobs", &digest, &status));
            }
        }
        stats.batched += count;
        stats.bytes += bytes;
        stats.batch_calls += 1;
        Ok(())
    }

    async fn write_stream(&self, digest: &Digest, blob: &Blob) -> Result<(), RemoteError> {
        let resource = self.resource(&format!(
            "uploads/{}/blobs/{}/{}",
            uuid::Uuid::new_v4(),
            digest.hash,
            digest.size
        ));
        let (tx, rx) = mpsc::channel::<WriteRequest>(2);
        let reader = {
            let (digest, blob, resource) = (digest.clone(), blob.clone(), resource.clone());
            tokio::task::spawn_blocking(move || send_chunks(&digest, &blob, &resource, &tx))
        };
        let rpc = self.bytestream().write(ReceiverStream::new(rx)).await;
        let read = reader.await.map_err(reader_failed)?;
        // A local read failure or a changed file explains a failed write better than the
        // server's view of a stream that stopped early.
        read?;
        let committed = rpc
            .map_err(|status| {
                RemoteError::from_status(self.url(), "ByteStream.Write", &resource, &status)
            })?
            .into_inner()
            .committed_size;
        if committed != digest.size {
            return Err(self.protocol(
                "ByteStream.Write",
                digest,
                &format!("the server committed {committed} bytes"),
            ));
        }
        Ok(())
    }
}

/// The thread reading files for an upload ended without an answer (it panicked, or the
/// runtime is shutting down).
fn reader_failed(e: tokio::task::JoinError) -> RemoteError {
    RemoteError::Io {
        path: PathBuf::from("<upload reader>"),
        source: std::io::Error::other(e.to_string()),
    }
}

/// A file's content, refused if it no longer hashes to the digest it was listed under.
fn read_checked(path: &PathBuf, digest: &Digest) -> Result<Vec<u8>, RemoteError> {
    let data = std::fs::read(path).map_err(|source| RemoteError::Io {
        path: path.clone(),
        source,
    })?;
    if &digest_of(&data) != digest {
        return Err(RemoteError::ChangedWhileUploading {
            path: path.clone(),
            digest: digest.clone(),
        });
    }
    Ok(data)
}

/// Feeds a blob to a `ByteStream.Write` in chunks. The last chunk, the one that says
/// `finish_write`, is held back until the whole content has hashed to the digest: a file that
/// changed is never committed under the old digest. Runs on a blocking thread.
fn send_chunks(
    digest: &Digest,
    blob: &Blob,
    resource: &str,
    tx: &mpsc::Sender<WriteRequest>,
) -> Result<(), RemoteError> {
    let path = match blob {
        Blob::File(path) => path.clone(),
        Blob::Bytes(_) => PathBuf::from("<in-memory blob>"),
    };
    let io_err = |source| RemoteError::Io {
        path: path.clone(),
        source,
    };
    let mut source: Box<dyn Read> = match blob {
        Blob::Bytes(bytes) => Box::new(std::io::Cursor::new(bytes.as_slice())),
        Blob::File(path) => Box::new(std::fs::File::open(path).map_err(io_err)?),
    };
    let mut hasher = StreamHasher::default();
    let mut offset: i64 = 0;
    let mut pending = read_chunk(&mut *source).map_err(io_err)?;
    hasher.update(&pending);
    loop {
        let next = read_chunk(&mut *source).map_err(io_err)?;
        if next.is_empty() {
            break;
        }
        hasher.update(&next);
        let data = std::mem::replace(&mut pending, next);
        let len = data.len() as i64;
        let request = WriteRequest {
            resource_name: if offset == 0 {
                resource.to_string()
            } else {
                String::new()
            },
            write_offset: offset,
            finish_write: false,
            data,
        };
        // A closed channel means the call ended early: the server already had the blob, or
        // it failed and says why in the call's own result.
        if tx.blocking_send(request).is_err() {
            return Ok(());
        }
        offset += len;
    }
    if &hasher.finish() != digest {
        return Err(RemoteError::ChangedWhileUploading {
            path,
            digest: digest.clone(),
        });
    }
    let last = WriteRequest {
        resource_name: if offset == 0 {
            resource.to_string()
        } else {
            String::new()
        },
        write_offset: offset,
        finish_write: true,
        data: pending,
    };
    let _ = tx.blocking_send(last);
    Ok(())
}

/// Up to one chunk, short only at the end of the content.
fn read_chunk(source: &mut dyn Read) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; STREAM_CHUNK];
    let mut filled = 0;
    while filled < buf.len() {
        match source.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}
