//! The blob port: the installation's bucket of artifacts, templates and
//! parameter files. Keys are derived from content or from source and
//! revision, so a second write of a key is skipped, never an overwrite.

use std::future::Future;

use super::PortResult;

/// The object [`Blobs::store`] left at a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The version that holds exactly the stored bytes (a versioned bucket),
    /// for a reader to pin; `None` where the bucket keeps no versions.
    pub version: Option<String>,
    /// The key held other bytes (replaced outside stacksync) and was
    /// written again.
    pub restored: bool,
}

/// Objects by key.
pub trait Blobs: Send + Sync {
    /// Whether an object exists.
    fn exists(&self, key: &str) -> impl Future<Output = PortResult<bool>> + Send;
    /// An object's bytes; more than `max_bytes` is refused (a `Refused`
    /// error), so a replaced or corrupted object cannot exhaust memory.
    fn get(&self, key: &str, max_bytes: u64) -> impl Future<Output = PortResult<Vec<u8>>> + Send;
    /// Writes an object unless one is already there; returns whether it wrote.
    fn put_if_absent(
        &self,
        key: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> impl Future<Output = PortResult<bool>> + Send;
    /// Writes an object, over whatever is there (a key that is not
    /// content-addressed, written by one writer: an approval's token).
    fn put(
        &self,
        key: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> impl Future<Output = PortResult<()>> + Send;
    /// Makes the object at a content-addressed key hold exactly `body`:
    /// reads what is there and compares it byte for byte; absent, it is
    /// written; different (an overwrite by someone else), it is written again
    /// as a new version. Returns the version that holds `body`.
    fn store(
        &self,
        key: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> impl Future<Output = PortResult<Stored>> + Send;
}
