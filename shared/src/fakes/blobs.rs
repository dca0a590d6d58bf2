//! The bucket in memory, versioned like the installation's bucket.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::ports::{Blobs, PortError, PortResult, Stored};

/// Objects by key, each with every version it had (its clones share them).
#[derive(Debug, Default, Clone)]
pub struct MemoryBlobs {
    objects: std::sync::Arc<Mutex<Objects>>,
}

#[derive(Debug, Default)]
struct Objects {
    /// Key → versions, oldest first: (version id, bytes).
    by_key: BTreeMap<String, Vec<(String, Vec<u8>)>>,
    next_version: u64,
}

impl Objects {
    fn current(&self, key: &str) -> Option<&(String, Vec<u8>)> {
        self.by_key.get(key).and_then(|versions| versions.last())
    }

    fn write(&mut self, key: &str, body: Vec<u8>) -> String {
        self.next_version += 1;
        let version = format!("v{}", self.next_version);
        self.by_key
            .entry(key.to_owned())
            .or_default()
            .push((version.clone(), body));
        version
    }
}

impl MemoryBlobs {
    pub fn new() -> Self {
        Self::default()
    }

    /// An object's bytes (its current version), for assertions.
    pub fn object(&self, key: &str) -> Option<Vec<u8>> {
        self.objects().current(key).map(|(_, body)| body.clone())
    }

    /// The bytes of one version of an object, as a reader pinning it gets.
    pub fn version(&self, key: &str, version: &str) -> Option<Vec<u8>> {
        self.objects().by_key.get(key).and_then(|versions| {
            versions
                .iter()
                .find(|(v, _)| v == version)
                .map(|(_, body)| body.clone())
        })
    }

    /// Every key, in order.
    pub fn keys(&self) -> Vec<String> {
        self.objects().by_key.keys().cloned().collect()
    }

    /// Puts (or replaces) an object, as a test's set-up (or an intruder)
    /// does: a new version.
    pub fn put(&self, key: &str, body: &[u8]) {
        self.objects().write(key, body.to_vec());
    }

    /// Removes an object and its versions.
    pub fn delete(&self, key: &str) {
        self.objects().by_key.remove(key);
    }

    fn objects(&self) -> std::sync::MutexGuard<'_, Objects> {
        self.objects.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Blobs for MemoryBlobs {
    async fn exists(&self, key: &str) -> PortResult<bool> {
        Ok(self.objects().current(key).is_some())
    }

    async fn get(&self, key: &str, max_bytes: u64) -> PortResult<Vec<u8>> {
        let body = self
            .object(key)
            .ok_or_else(|| PortError::Refused(format!("GetObject: NoSuchKey: {key}")))?;
        if body.len() as u64 > max_bytes {
            return Err(PortError::Refused(format!(
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
        if objects.current(key).is_some() {
            return Ok(false);
        }
        objects.write(key, body);
        Ok(true)
    }

    async fn put(&self, key: &str, body: Vec<u8>, _content_type: &str) -> PortResult<()> {
        self.objects().write(key, body);
        Ok(())
    }

    async fn store(&self, key: &str, body: Vec<u8>, _content_type: &str) -> PortResult<Stored> {
        let mut objects = self.objects();
        let found = objects.current(key).cloned();
        match found {
            Some((version, held)) if held == body => Ok(Stored {
                version: Some(version),
                restored: false,
            }),
            found => Ok(Stored {
                restored: found.is_some(),
                version: Some(objects.write(key, body)),
            }),
        }
    }
}
