//! Content digests: the SHA-256 of a blob in lowercase hex and its size, the key of everything
//! in the content-addressed store.

use std::io::Read;
use std::path::Path;

use bazel_remote_apis::build::bazel::remote::execution::v2 as reapi;
use sha2::{Digest as _, Sha256};

pub use greenlight_types::remote::Digest;

/// A digest as the protocol's message, and back: the seam's [`Digest`] is plain data, and only
/// this crate speaks the protocol.
pub trait DigestProto {
    /// The protocol message for this digest.
    fn to_proto(&self) -> reapi::Digest;
    /// The digest a protocol message names.
    fn from_proto(message: &reapi::Digest) -> Self;
}

impl DigestProto for Digest {
    fn to_proto(&self) -> reapi::Digest {
        reapi::Digest {
            hash: self.hash.clone(),
            size_bytes: self.size,
        }
    }

    fn from_proto(message: &reapi::Digest) -> Digest {
        Digest {
            hash: message.hash.clone(),
            size: message.size_bytes,
        }
    }
}

/// The digest of a byte string.
pub fn digest_of(bytes: &[u8]) -> Digest {
    Digest {
        hash: hex(&Sha256::digest(bytes)),
        size: byte_count(bytes.len() as u64),
    }
}

/// Lowercase hex of a byte string.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// A protocol message encoded as the server will hash it, with its digest.
pub(crate) fn encode_message<M: prost::Message>(message: &M) -> (Digest, Vec<u8>) {
    let bytes = message.encode_to_vec();
    (digest_of(&bytes), bytes)
}

/// Streams a file through SHA-256 in fixed-size pieces, so a large file is never held whole.
pub(crate) fn digest_file(path: &Path) -> std::io::Result<Digest> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = StreamHasher::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finish())
}

/// A digest computed piece by piece.
#[derive(Default)]
pub(crate) struct StreamHasher {
    sha: Sha256,
    len: u64,
}

impl StreamHasher {
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.sha.update(bytes);
        self.len += bytes.len() as u64;
    }

    pub(crate) fn finish(self) -> Digest {
        Digest {
            hash: hex(&self.sha.finalize()),
            size: byte_count(self.len),
        }
    }
}

/// Sizes travel as i64 in the protocol; no file reaches 2^63 bytes.
fn byte_count(len: u64) -> i64 {
    i64::try_from(len).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_digest_is_the_sha256_of_nothing() {
        assert_eq!(Digest::empty(), digest_of(&[]));
        assert_eq!(
            Digest::empty().hash,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn digest_of_known_bytes() {
        // `printf abc | sha256sum`
        let d = digest_of(b"abc");
        assert_eq!(
            d.to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad/3"
        );
    }

    #[test]
    fn streamed_file_digest_matches_the_whole_buffer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let content: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &content).expect("write");
        assert_eq!(digest_file(&path).expect("digest"), digest_of(&content));
    }

    #[test]
    fn proto_round_trip() {
        let d = digest_of(b"x");
        let p = d.to_proto();
        assert_eq!(p.size_bytes, 1);
        assert_eq!(Digest::from_proto(&p), d);
    }
}
