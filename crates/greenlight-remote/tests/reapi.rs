//! The client against a real REAPI server (BuildGrid on loopback). The server comes from
//! `scripts/ci/remote-services.sh start DIR`, whose `DIR/env` names it in
//! `GREENLIGHT_TEST_REAPI`; `scripts/test` starts it and runs these.

use std::collections::BTreeMap;

use greenlight_remote::{Blob, BlobSet, Digest, Endpoint, Remote, RemoteError, digest_of};

fn grid_url() -> String {
    match std::env::var("GREENLIGHT_TEST_REAPI") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!(
            "GREENLIGHT_TEST_REAPI is unset: start the services with \
             `scripts/ci/remote-services.sh start DIR` and `source DIR/env` \
             (scripts/test does both), then run these tests again"
        ),
    }
}

async fn connect() -> Remote {
    let url = grid_url();
    match Remote::connect(&Endpoint::new(&url)).await {
        Ok(remote) => remote,
        Err(e) => panic!("connecting to {url}: {e}"),
    }
}

/// Bytes no earlier run can have uploaded, so "missing" means missing.
fn unique(label: &str) -> Vec<u8> {
    format!("{label} {}", uuid::Uuid::new_v4()).into_bytes()
}

/// `len` bytes that do not compress and differ from run to run.
fn noise(len: usize) -> Vec<u8> {
    let seed = uuid::Uuid::new_v4().as_u128();
    let mut state = (seed as u64) | 1;
    (0..len)
        .map(|_| {
            // xorshift64: cheap bytes that defeat any dedup or compression on the way.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn capabilities_offer_sha256_execution_and_a_batch_limit() {
    let remote = connect().await;
    assert_eq!(remote.instance(), "");
    assert!(
        remote.can_execute(),
        "the test grid runs the execution service"
    );
    // BuildGrid states 4,193,280 bytes; any server must state something usable.
    assert!(
        remote.max_batch_total_size() >= 1024 * 1024,
        "{}",
        remote.max_batch_total_size()
    );
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn upload_sends_only_what_is_missing_and_reads_back_the_same_bytes() {
    let remote = connect().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut blobs = BlobSet::new();
    let mut contents = BTreeMap::new();
    for i in 0..50 {
        let bytes = unique(&format!("blob {i}"));
        let digest = blobs.insert_bytes(bytes.clone());
        contents.insert(digest, bytes);
    }
    let file = dir.path().join("small.txt");
    let file_bytes = unique("a small file");
    std::fs::write(&file, &file_bytes).expect("write");
    let file_digest = digest_of(&file_bytes);
    blobs.insert(file_digest.clone(), Blob::File(file.clone()));
    contents.insert(file_digest, file_bytes);

    let first = remote.upload(&blobs).await.expect("first upload");
    assert_eq!((first.blobs, first.missing, first.batched), (51, 51, 51));
    assert_eq!(first.streamed, 0);
    assert_eq!(first.batch_calls, 1);

    let second = remote.upload(&blobs).await.expect("second upload");
    assert_eq!((second.blobs, second.missing, second.bytes), (51, 0, 0));

    let digests: Vec<Digest> = contents.keys().cloned().collect();
    let read = remote.read_blobs(&digests).await.expect("read back");
    assert_eq!(read.len(), contents.len());
    for (digest, bytes) in &contents {
        assert_eq!(read.get(digest), Some(bytes), "{digest}");
    }
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn a_blob_larger_than_a_batch_round_trips_through_bytestream() {
    let remote = connect().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let big = noise(6 * 1024 * 1024 + 17);
    let path = dir.path().join("big.bin");
    std::fs::write(&path, &big).expect("write");
    let digest = digest_of(&big);
    let mut blobs = BlobSet::new();
    blobs.insert(digest.clone(), Blob::File(path));

    let stats = remote.upload(&blobs).await.expect("upload");
    assert_eq!((stats.missing, stats.streamed, stats.batched), (1, 1, 0));
    assert_eq!(stats.bytes, big.len() as u64);
    assert_eq!(remote.upload(&blobs).await.expect("again").missing, 0);

    let back = remote.read_blob(&digest).await.expect("read");
    assert!(back == big, "6 MiB blob came back different");
    let copy = dir.path().join("copy.bin");
    remote
        .read_blob_to_file(&digest, &copy)
        .await
        .expect("read to file");
    assert!(std::fs::read(&copy).expect("copy") == big);

    // An in-memory blob above the limit takes the same path.
    let mut memory = BlobSet::new();
    let bytes = noise(5 * 1024 * 1024);
    let d = memory.insert_bytes(bytes.clone());
    assert_eq!(remote.upload(&memory).await.expect("upload").streamed, 1);
    let read = remote
        .read_blobs(std::slice::from_ref(&d))
        .await
        .expect("read");
    assert!(read.get(&d) == Some(&bytes));
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn a_file_that_changed_after_hashing_is_refused_not_uploaded() {
    let remote = connect().await;
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, len) in [("small", 1000), ("large", 5 * 1024 * 1024)] {
        let path = dir.path().join(name);
        let before = noise(len);
        std::fs::write(&path, &before).expect("write");
        let digest = digest_of(&before);
        std::fs::write(&path, noise(len)).expect("rewrite");
        let mut blobs = BlobSet::new();
        blobs.insert(digest.clone(), Blob::File(path.clone()));
        let err = remote.upload(&blobs).await.expect_err("changed file");
        assert!(
            matches!(&err, RemoteError::ChangedWhileUploading { path: p, .. } if p == &path),
            "{name}: {err}"
        );
        let missing = remote.find_missing(std::slice::from_ref(&digest)).await;
        assert_eq!(
            missing.expect("find"),
            vec![digest],
            "{name} must not be stored"
        );
    }
}

#[tokio::test]
#[ignore = "needs BuildGrid: run scripts/test"]
async fn reading_a_blob_the_server_lacks_names_it() {
    let remote = connect().await;
    for bytes in [unique("never uploaded"), noise(5 * 1024 * 1024)] {
        let digest = digest_of(&bytes);
        let err = remote.read_blob(&digest).await.expect_err("missing");
        assert!(
            matches!(&err, RemoteError::BlobMissing { digest: d, .. } if d == &digest),
            "{err}"
        );
        assert!(err.to_string().contains(&digest.hash), "{err}");
    }
    assert_eq!(
        remote.read_blob(&Digest::empty()).await.expect("empty"),
        b""
    );
}
