//! A set of blobs to upload, each kept where it already is: bytes in memory or a file on disk
//! (read only when the server says it is missing).

use std::collections::HashMap;
use std::path::PathBuf;

use crate::digest::{Digest, digest_of, encode_message};

/// Where a blob's content lives until it is uploaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blob {
    /// The content, in memory.
    Bytes(Vec<u8>),
    /// A file whose content had this digest when it was hashed.
    File(PathBuf),
}

/// Blobs keyed by digest, in no particular order. Inserting a digest that is already present
/// keeps the first source: equal digests mean equal content. (A hash map, not a sorted one: a
/// 20,000-file tree's inserts into a sorted map cost more than stating the files.)
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlobSet {
    blobs: HashMap<Digest, Blob>,
}

impl BlobSet {
    /// An empty set.
    pub fn new() -> BlobSet {
        BlobSet::default()
    }

    /// Adds a blob under a digest the caller computed.
    pub fn insert(&mut self, digest: Digest, blob: Blob) {
        self.blobs.entry(digest).or_insert(blob);
    }

    /// Adds bytes and returns their digest.
    pub fn insert_bytes(&mut self, bytes: Vec<u8>) -> Digest {
        let digest = digest_of(&bytes);
        self.insert(digest.clone(), Blob::Bytes(bytes));
        digest
    }

    /// Adds a protocol message, encoded, and returns its digest.
    pub fn insert_message<M: prost::Message>(&mut self, message: &M) -> Digest {
        let (digest, bytes) = encode_message(message);
        self.insert(digest.clone(), Blob::Bytes(bytes));
        digest
    }

    /// Moves every blob of `other` into this set.
    pub fn merge(&mut self, other: BlobSet) {
        for (digest, blob) in other.blobs {
            self.insert(digest, blob);
        }
    }

    /// The blob stored under a digest.
    pub fn get(&self, digest: &Digest) -> Option<&Blob> {
        self.blobs.get(digest)
    }

    /// True when the set holds this digest.
    pub fn contains(&self, digest: &Digest) -> bool {
        self.blobs.contains_key(digest)
    }

    /// The digests.
    pub fn digests(&self) -> impl Iterator<Item = &Digest> {
        self.blobs.keys()
    }

    /// Digests and blobs.
    pub fn iter(&self) -> impl Iterator<Item = (&Digest, &Blob)> {
        self.blobs.iter()
    }

    /// How many blobs.
    pub fn len(&self) -> usize {
        self.blobs.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.blobs.is_empty()
    }

    /// The sum of the blobs' sizes.
    pub fn total_bytes(&self) -> u64 {
        self.blobs.keys().map(Digest::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_content_is_one_blob_and_merge_unions() {
        let mut a = BlobSet::new();
        let d1 = a.insert_bytes(b"one".to_vec());
        assert_eq!(a.insert_bytes(b"one".to_vec()), d1);
        assert_eq!(a.len(), 1);

        let mut b = BlobSet::new();
        b.insert_bytes(b"two".to_vec());
        b.insert_bytes(b"one".to_vec());
        a.merge(b);
        assert_eq!(a.len(), 2);
        assert_eq!(a.total_bytes(), 6);
        assert_eq!(a.get(&d1), Some(&Blob::Bytes(b"one".to_vec())));
    }
}
