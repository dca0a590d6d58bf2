//! The blob port: the installation's bucket of artifacts, templates and
//! parameter files. Keys are derived from content or from source and
//! revision, so a second write of a key is skipped, never an overwrite.

use std::future::Future;

use super::PortResult;

/// Objects by key.
pub trait Blobs: Send + Sync {
    /// Whether an object exists.
    fn exists(&self, key: &str) -> impl Future<Output = PortResult<bool>> + Send;
    /// An object's bytes; more than `max_bytes` is refused (a `Rejected`
    /// error), so a replaced or corrupted object cannot exhaust memory.
    fn get(&self, key: &str, max_bytes: u64) -> impl Future<Output = PortResult<Vec<u8>>> + Send;
    /// Writes an object unless one is already there; returns whether it wrote.
    fn put_if_absent(
        &self,
        key: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> impl Future<Output = PortResult<bool>> + Send;
}
