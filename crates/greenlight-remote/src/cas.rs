//! The content-addressed store: upload only what the server lacks, in batches that fit its
//! limit or streamed when a blob is larger, and read blobs back, checked against their digest.
//!
//! Files are read when they are sent, not before, and are streamed in chunks when large, so
//! uploading a big tree never holds more than one batch in memory.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use bazel_remote_apis::build::bazel::remote::execution::v2::{
    self as reapi, batch_update_blobs_request,
};
use bazel_remote_apis::google::bytestream::{ReadRequest, WriteRequest};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::blobs::{Blob, BlobSet};
use crate::connect::Remote;
use crate::digest::{Digest, StreamHasher, digest_of};
use crate::error::{RemoteError, advice_for};

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

/// Room left in every batch call for the request's own fields, and per blob for its digest and
/// framing (a 64-digit hash, a size and the field tags stay well under 128 bytes).
const BATCH_OVERHEAD: usize = 1024;
const PER_BLOB_OVERHEAD: usize = 128;
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
                .find_missing_blobs(request)
                .await
                .map_err(|status| {
                    let target = format!("{} digests", chunk.len());
                    RemoteError::from_status(self.url(), "FindMissingBlobs", target, &status)
                })?;
            missing.extend(
                response
                    .into_inner()
                    .missing_blob_digests
                    .into_iter()
                    .map(Digest::from),
            );
        }
        Ok(missing)
    }

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

    /// True when a blob of this size goes in a batch call rather than a byte stream.
    pub(crate) fn fits_in_batch(&self, size: u64) -> bool {
        usize::try_from(size).is_ok_and(|size| {
            size.saturating_add(PER_BLOB_OVERHEAD + BATCH_OVERHEAD) <= self.max_batch_total_size()
        })
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
        .map_err(|e| {
            self.protocol("BatchUpdateBlobs", "a batch", &format!("reader task: {e}"))
        })??;
        let count = requests.len();
        let bytes: u64 = requests.iter().map(|r| r.data.len() as u64).sum();
        let first = requests
            .first()
            .and_then(|r| r.digest.as_ref())
            .map(Digest::from);
        let response = self
            .cas()
            .batch_update_blobs(reapi::BatchUpdateBlobsRequest {
                instance_name: self.instance().to_string(),
                requests,
                digest_function: sha256(),
            })
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
                .map(Digest::from)
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
        let read = reader
            .await
            .map_err(|e| self.protocol("ByteStream.Write", digest, &format!("reader task: {e}")))?;
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

    async fn read_batch(
        &self,
        digests: &[Digest],
    ) -> Result<HashMap<Digest, Vec<u8>>, RemoteError> {
        let response = self
            .cas()
            .batch_read_blobs(reapi::BatchReadBlobsRequest {
                instance_name: self.instance().to_string(),
                digests: digests.iter().map(Digest::to_proto).collect(),
                acceptable_compressors: Vec::new(),
                digest_function: sha256(),
            })
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
                .map(Digest::from)
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
    ) -> Result<tonic::Streaming<bazel_remote_apis::google::bytestream::ReadResponse>, RemoteError>
    {
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

    fn blob_status_error(
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

    fn check_content(&self, digest: &Digest, got: Digest) -> Result<(), RemoteError> {
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

fn batch_cost(digest: &Digest) -> usize {
    usize::try_from(digest.len())
        .unwrap_or(usize::MAX)
        .saturating_add(PER_BLOB_OVERHEAD)
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
