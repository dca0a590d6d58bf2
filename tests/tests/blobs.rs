//! The blob port's contract, held by the in-memory bucket and by S3 (the
//! emulator, versioned as the installation's bucket is): a content-addressed
//! key is stored once, re-used while it holds its bytes, written again when
//! someone replaced them, and the version returned always reads back as
//! exactly those bytes.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use stacksync::adapters::s3::S3Store;
use stacksync::fakes::MemoryBlobs;
use stacksync::ports::Blobs;
use stacksync_testkit::{Emulator, unique_name};

/// What a test does to a bucket beside the port: replace an object (as an
/// intruder would), read one version of it.
trait Versions {
    async fn replace(&self, key: &str, body: &[u8]);
    async fn read_version(&self, key: &str, version: &str) -> Vec<u8>;
}

impl Versions for MemoryBlobs {
    async fn replace(&self, key: &str, body: &[u8]) {
        self.put(key, body);
    }

    async fn read_version(&self, key: &str, version: &str) -> Vec<u8> {
        self.version(key, version).unwrap()
    }
}

impl Versions for S3Store {
    async fn replace(&self, key: &str, body: &[u8]) {
        Emulator::shared()
            .put_object(self.bucket(), key, body.to_vec())
            .await;
    }

    async fn read_version(&self, key: &str, version: &str) -> Vec<u8> {
        let out = Emulator::shared()
            .s3()
            .get_object()
            .bucket(self.bucket())
            .key(key)
            .version_id(version)
            .send()
            .await
            .unwrap();
        out.body.collect().await.unwrap().into_bytes().to_vec()
    }
}

async fn contract(blobs: &(impl Blobs + Versions)) {
    let key = "templates/abc";
    let first = blobs
        .store(key, b"ours".to_vec(), "text/plain")
        .await
        .unwrap();
    assert!(!first.restored, "absent: written, nothing restored");
    let version = first.version.clone().expect("a versioned bucket");
    assert_eq!(blobs.read_version(key, &version).await, b"ours");

    let again = blobs
        .store(key, b"ours".to_vec(), "text/plain")
        .await
        .unwrap();
    assert_eq!(again, first, "the same bytes: re-used, same version");

    // Replaced by someone else, even by bytes of the same length.
    blobs.replace(key, b"evil").await;
    let restored = blobs
        .store(key, b"ours".to_vec(), "text/plain")
        .await
        .unwrap();
    assert!(restored.restored, "other bytes: written again, and said");
    let pinned = restored.version.clone().unwrap();
    assert_ne!(pinned, version);
    assert_eq!(blobs.read_version(key, &pinned).await, b"ours");
    assert_eq!(blobs.get(key, 1024).await.unwrap(), b"ours");

    // A longer object is told apart without reading all of it.
    blobs.replace(key, &[b'x'; 4096]).await;
    let longer = blobs
        .store(key, b"ours".to_vec(), "text/plain")
        .await
        .unwrap();
    assert!(longer.restored);
    assert_eq!(blobs.get(key, 1024).await.unwrap(), b"ours");
}

#[tokio::test]
async fn the_bucket_in_memory_keeps_the_contract() {
    contract(&MemoryBlobs::new()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn s3_keeps_the_contract() {
    let emulator = Emulator::shared();
    let store = S3Store::new(emulator.s3(), unique_name("blobs").to_lowercase());
    store.ensure_bucket().await.unwrap();
    contract(&store).await;
}
