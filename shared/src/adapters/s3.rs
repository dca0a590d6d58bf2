//! The artifact and template bucket.
//!
//! Keys are derived from content (templates) or from source + revision
//! (artifacts), so writing the same key twice is harmless and a second
//! writer is skipped with a conditional put (`If-None-Match: *`).

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use super::port_error;
use crate::ports::{Blobs, PortError, PortResult, Stored};

/// One S3 bucket holding artifacts and templates.
#[derive(Debug, Clone)]
pub struct S3Store {
    client: Client,
    bucket: String,
}

impl S3Store {
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }

    /// Deletes an object (every version is kept by the bucket's
    /// versioning; this removes the current one). A missing one is fine.
    pub async fn delete(&self, key: &str) -> PortResult<()> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map(drop)
            .map_err(|e| super::port_error("DeleteObject", &e))
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Creates the bucket if it is missing, versioned like the deployed one
    /// (local runs and tests; a deployment gets it from the template).
    pub async fn ensure_bucket(&self) -> PortResult<()> {
        self.create_bucket().await?;
        self.client
            .put_bucket_versioning()
            .bucket(&self.bucket)
            .versioning_configuration(
                aws_sdk_s3::types::VersioningConfiguration::builder()
                    .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                    .build(),
            )
            .send()
            .await
            .map_err(|e| port_error("PutBucketVersioning", &e))?;
        Ok(())
    }

    async fn create_bucket(&self) -> PortResult<()> {
        match self
            .client
            .create_bucket()
            .bucket(&self.bucket)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.code(),
                    Some("BucketAlreadyOwnedByYou" | "BucketAlreadyExists")
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(port_error("CreateBucket", &e)),
        }
    }
}

/// What a content-addressed key holds, against the bytes it should.
enum Held {
    Absent,
    /// These bytes, in this version.
    Same(Option<String>),
    /// Other bytes.
    Other,
}

/// An S3 version id, or `None` where the bucket keeps no versions (S3 says
/// `null`).
fn version_of(id: Option<&str>) -> Option<String> {
    id.filter(|v| !v.is_empty() && *v != "null")
        .map(str::to_owned)
}

impl S3Store {
    /// Whether the object at `key` is exactly `body`, reading at most one
    /// byte more than `body` holds.
    async fn held(&self, key: &str, body: &[u8]) -> PortResult<Held> {
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
                return Ok(Held::Absent);
            }
            Err(e) => return Err(port_error("GetObject", &e)),
        };
        let version = version_of(out.version_id());
        if out.content_length().is_some_and(|n| n != body.len() as i64) {
            return Ok(Held::Other);
        }
        let mut stream = out.body;
        let mut data = Vec::with_capacity(body.len());
        while let Some(chunk) = stream.try_next().await.map_err(|e| {
            PortError::Transient(format!("GetObject s3://{}/{key}: {e}", self.bucket))
        })? {
            data.extend_from_slice(&chunk);
            if data.len() > body.len() {
                return Ok(Held::Other);
            }
        }
        Ok(if data == body {
            Held::Same(version)
        } else {
            Held::Other
        })
    }

    /// Writes an object (only if absent, with `if_absent`). Returns
    /// `Some(version written)`, or `None` when another writer got there
    /// first.
    async fn write(
        &self,
        key: &str,
        body: Vec<u8>,
        content_type: &str,
        if_absent: bool,
    ) -> PortResult<Option<Option<String>>> {
        let mut put = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .body(ByteStream::from(body));
        if if_absent {
            put = put.if_none_match("*");
        }
        match put.send().await {
            Ok(out) => Ok(Some(version_of(out.version_id()))),
            Err(e)
                if matches!(
                    e.code(),
                    Some("PreconditionFailed" | "ConditionalRequestConflict")
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(port_error("PutObject", &e)),
        }
    }
}

impl Blobs for S3Store {
    /// Whether an object exists.
    async fn exists(&self, key: &str) -> PortResult<bool> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(false),
            Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) => Ok(false),
            Err(e) => Err(port_error("HeadObject", &e)),
        }
    }

    /// Writes an object unless one is already there. Returns whether it wrote.
    async fn put_if_absent(
        &self,
        key: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> PortResult<bool> {
        Ok(self.write(key, body, content_type, true).await?.is_some())
    }

    async fn put(&self, key: &str, body: Vec<u8>, content_type: &str) -> PortResult<()> {
        self.write(key, body, content_type, false).await.map(drop)
    }

    /// Makes a content-addressed key hold exactly `body` (see the port).
    async fn store(&self, key: &str, body: Vec<u8>, content_type: &str) -> PortResult<Stored> {
        // Twice at most: a concurrent first write makes ours a no-op, and
        // the second look reads what it wrote.
        for _ in 0..2 {
            match self.held(key, &body).await? {
                Held::Same(version) => {
                    return Ok(Stored {
                        version,
                        restored: false,
                    });
                }
                Held::Other => {
                    let version = self.write(key, body, content_type, false).await?;
                    return Ok(Stored {
                        version: version.flatten(),
                        restored: true,
                    });
                }
                Held::Absent => {
                    if let Some(version) = self.write(key, body.clone(), content_type, true).await?
                    {
                        return Ok(Stored {
                            version,
                            restored: false,
                        });
                    }
                }
            }
        }
        Err(PortError::Transient(format!(
            "s3://{}/{key} changed while it was being stored",
            self.bucket
        )))
    }

    /// Reads an object, refusing more than `max_bytes`.
    async fn get(&self, key: &str, max_bytes: u64) -> PortResult<Vec<u8>> {
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| port_error("GetObject", &e))?;
        let declared = out
            .content_length()
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or(0);
        if declared > max_bytes {
            return Err(PortError::Refused(format!(
                "s3://{}/{key} is {declared} bytes; the limit is {max_bytes}",
                self.bucket
            )));
        }
        let mut body = out.body;
        let mut data = Vec::new();
        while let Some(chunk) = body.try_next().await.map_err(|e| {
            PortError::Transient(format!("GetObject s3://{}/{key}: {e}", self.bucket))
        })? {
            data.extend_from_slice(&chunk);
            if data.len() as u64 > max_bytes {
                return Err(PortError::Refused(format!(
                    "s3://{}/{key} is over the limit of {max_bytes} bytes",
                    self.bucket
                )));
            }
        }
        Ok(data)
    }
}
