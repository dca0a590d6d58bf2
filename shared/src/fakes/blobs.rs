//! The bucket in memory.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::ports::{Blobs, PortError, PortResult};

/// Objects by key.
#[derive(Debug, Default)]
pub struct MemoryBlobs {
    objects: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl MemoryBlobs {
    pub fn new() -> Self {
        Self::default()
    }

    /// An object's bytes, for assertions.
    pub fn object(&self, key: &str) -> Option<Vec<u8>> {
        self.objects().get(key).cloned()
    }

    /// Every key, in order.
    pub fn keys(&self) -> Vec<String> {
        self.objects().keys().cloned().collect()
    }

    /// Puts (or replaces) an object, as a test's set-up (or an intruder) does.
    pub fn put(&self, key: &str, body: &[u8]) {
        self.objects().insert(key.to_owned(), body.to_vec());
    }

    fn objects(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.objects.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Blobs for MemoryBlobs {
    async fn exists(&self, key: &str) -> PortResult<bool> {
        Ok(self.objects().contains_key(key))
    }

    async fn get(&self, key: &str, max_bytes: u64) -> PortResult<Vec<u8>> {
        let body = self
            .object(key)
            .ok_or_else(|| PortError::Rejected(format!("GetObject: NoSuchKey: {key}")))?;
        if body.len() as u64 > max_bytes {
            return Err(PortError::Rejected(format!(
                "{key} is {} bytes; the limit is {max_bytes}",
                body.len()
            )));
        }
        Ok(body)
    }

    async fn put_if_absent(
        &self,
        key: &str,
        body: Vec<u8>,
        _content_type: &str,
    ) -> PortResult<bool> {
        let mut objects = self.objects();
        if objects.contains_key(key) {
            return Ok(false);
        }
        objects.insert(key.to_owned(), body);
        Ok(true)
    }
}
