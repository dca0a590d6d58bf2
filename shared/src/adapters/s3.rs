//! The artifact and template bucket.
//!
//! Keys are derived from content (templates) or from source + revision
//! (artifacts), so writing the same key twice is harmless and a second
//! writer is skipped with a conditional put (`If-None-Match: *`).

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use super::port_error;
use crate::ports::{Blobs, PortError, PortResult};

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

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Creates the bucket if it is missing (local runs and tests; a deployment
    /// gets it from the template).
    pub async fn ensure_bucket(&self) -> PortResult<()> {
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
        let result = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .if_none_match("*")
            .content_type(content_type)
            .body(ByteStream::from(body))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e)
                if matches!(
                    e.code(),
                    Some("PreconditionFailed" | "ConditionalRequestConflict")
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(port_error("PutObject", &e)),
        }
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
            return Err(PortError::Rejected(format!(
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
                return Err(PortError::Rejected(format!(
                    "s3://{}/{key} is over the limit of {max_bytes} bytes",
                    self.bucket
                )));
            }
        }
        Ok(data)
    }
}
