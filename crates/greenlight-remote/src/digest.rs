//! Content digests: the SHA-256 of a blob in lowercase hex and its size, the key of everything
//! in the content-addressed store.

use std::fmt;
use std::io::Read;
use std::path::Path;

use bazel_remote_apis::build::bazel::remote::execution::v2 as reapi;
use sha2::{Digest as _, Sha256};

/// The key of a blob: its SHA-256 (64 lowercase hex digits) and its size in bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    /// SHA-256 of the content, lowercase hex.
    pub hash: String,
    /// Size of the content in bytes.
    pub size: i64,
}

impl Digest {
    /// The digest of zero bytes (every REAPI server has this blob without being told).
    pub fn empty() -> Digest {
        digest_of(&[])
    }

    /// The size as an unsigned byte count (a negative size, which no server should send,
    /// counts as zero).
    pub fn len(&self) -> u64 {
        u64::try_from(self.size).unwrap_or(0)
    }

    /// True for the digest of zero bytes.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The protocol message for this digest.
    pub fn to_proto(&self) -> reapi::Digest {
        reapi::Digest {
            hash: self.hash.clone(),
            size_bytes: self.size,
        }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.hash, self.size)
    }
}

impl From<reapi::Digest> for Digest {
    fn from(d: reapi::Digest) -> Digest {
        Digest {
            hash: d.hash,
            size: d.size_bytes,
        }
    }
}

impl From<&reapi::Digest> for Digest {
    fn from(d: &reapi::Digest) -> Digest {
        Digest {
            hash: d.hash.clone(),
            size: d.size_bytes,
        }
    }
}

impl From<Digest> for reapi::Digest {
    fn from(d: Digest) -> reapi::Digest {
        reapi::Digest {
            hash: d.hash,
            size_bytes: d.size,
        }
    }
}

impl From<&Digest> for reapi::Digest {
    fn from(d: &Digest) -> reapi::Digest {
        d.to_proto()
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
        let d = Digest::empty();
        assert_eq!(
            d.hash,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(d.size, 0);
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
        let p: reapi::Digest = (&d).into();
        assert_eq!(p.size_bytes, 1);
        assert_eq!(Digest::from(p), d);
    }
}
