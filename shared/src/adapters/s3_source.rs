//! S3 sources: `s3://bucket/key` of a `.zip` or `.tar.gz`, read with the
//! function's own role. The revision is the object's version id (its ETag,
//! as `etag-…`, in a bucket without versioning), so "did it move?" is one
//! `HeadObject`; a `ref` pins a version. The archive streams to a scratch
//! file (bounded) and only the wanted entries are read out of it
//! (`archive.rs`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_s3::Client;
use tokio::io::AsyncWriteExt;

use super::{archive, port_error};
use crate::content::{ContentError, MAX_ARCHIVE_BYTES, Wanted};
use crate::ports::PortError;
use crate::ports::source::{FetchError, Files, SourceLocation, rejected, transient};

/// The revision of an object in a bucket without versioning: its ETag.
const ETAG_PREFIX: &str = "etag-";

/// S3 archives as sources.
#[derive(Debug, Clone)]
pub struct S3Archives {
    client: Client,
    workdir: PathBuf,
}

/// `s3://bucket/key` → (bucket, key).
fn parse(url: &str) -> Result<(&str, &str), FetchError> {
    url.strip_prefix("s3://")
        .and_then(|rest| rest.split_once('/'))
        .filter(|(bucket, key)| !bucket.is_empty() && !key.is_empty())
        .ok_or_else(|| rejected(format!("{url} is not an S3 URL (s3://bucket/key)")))
}

/// A missing object or version is final, like any refusal; throttling is not.
fn s3_error(url: &str, e: PortError) -> FetchError {
    match e {
        PortError::Transient(m) => transient(format!("{url}: {m}")),
        other => rejected(format!("{url}: {}", other.message())),
    }
}

impl S3Archives {
    /// `workdir`: where archives are downloaded to (`/tmp` in Lambda).
    pub fn new(client: Client, workdir: impl Into<PathBuf>) -> Self {
        Self {
            client,
            workdir: workdir.into(),
        }
    }

    /// The object's version (or ETag), or the pinned version after checking
    /// it exists: one `HeadObject`.
    pub async fn resolve(
        &self,
        source: &SourceLocation,
        reference: &str,
    ) -> Result<String, FetchError> {
        let url = &source.url;
        let (bucket, key) = parse(url)?;
        let pinned = (!reference.is_empty()).then_some(reference);
        let head = self
            .client
            .head_object()
            .bucket(bucket)
            .key(key)
            .set_version_id(pinned.map(str::to_owned))
            .send()
            .await
            .map_err(|e| match e.raw_response().map(|r| r.status().as_u16()) {
                Some(404) => rejected(match pinned {
                    Some(v) => format!("{url}: there is no version {v} of this object"),
                    None => format!("{url}: there is no such object"),
                }),
                // A HEAD answer has no body to say why: the status does.
                Some(403) => rejected(format!(
                    "{url}: HeadObject: S3 refused access (HTTP 403 Forbidden): the functions' \
                     role may read only the buckets in SourceBucketNames (a local run: your AWS \
                     credentials)"
                )),
                _ => s3_error(url, port_error("HeadObject", &e)),
            })?;
        if let Some(pinned) = pinned {
            return Ok(pinned.to_owned());
        }
        match (head.version_id.filter(|v| v != "null"), head.e_tag) {
            (Some(version), _) => Ok(version),
            (None, Some(etag)) => Ok(format!("{ETAG_PREFIX}{}", etag.trim_matches('"'))),
            (None, None) => Err(rejected(format!(
                "{url}: S3 gave neither a version id nor an ETag"
            ))),
        }
    }

    /// The wanted files of the archive at `revision`.
    pub async fn fetch(
        &self,
        source: &SourceLocation,
        revision: &str,
        wanted: &Wanted,
    ) -> Result<Files, FetchError> {
        let url = &source.url;
        let (bucket, key) = parse(url)?;
        let request = self.client.get_object().bucket(bucket).key(key);
        let request = match revision.strip_prefix(ETAG_PREFIX) {
            Some(etag) => request.if_match(format!("\"{etag}\"")),
            None => request.version_id(revision),
        };
        let object = request.send().await.map_err(|e| {
            match e.raw_response().map(|r| r.status().as_u16()) {
                Some(404) => rejected(format!("{url}: version {revision} is gone")),
                // The object was replaced since it was resolved: the next run sees the new one.
                Some(412) => transient(format!("{url}: the object changed since {revision}")),
                _ => s3_error(url, port_error("GetObject", &e)),
            }
        })?;
        let size = object.content_length.unwrap_or_default().max(0) as u64;
        if size > MAX_ARCHIVE_BYTES {
            return Err(ContentError::ArchiveTooLarge {
                size,
                limit: MAX_ARCHIVE_BYTES,
            }
            .into());
        }
        let scratch = Scratch(self.scratch_file());
        let written = download(object.body, &scratch.0, url).await?;
        let wanted = wanted.clone();
        tokio::task::spawn_blocking(move || {
            let files = archive::take(&scratch.0, written, &wanted);
            drop(scratch);
            files.map_err(FetchError::from)
        })
        .await
        .map_err(|e| transient(format!("{url}: reading the archive stopped: {e}")))?
    }

    fn scratch_file(&self) -> PathBuf {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        self.workdir.join(format!(
            "archive-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ))
    }
}

/// A scratch file, removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Streams an object's body to `path`, at most [`MAX_ARCHIVE_BYTES`]
/// (whatever its length header said). Returns the bytes written.
async fn download(
    mut body: aws_sdk_s3::primitives::ByteStream,
    path: &Path,
    url: &str,
) -> Result<u64, FetchError> {
    let io =
        |e: std::io::Error| transient(format!("{url}: writing scratch {}: {e}", path.display()));
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(io)?;
    }
    let mut file = tokio::fs::File::create(path).await.map_err(io)?;
    let mut written: u64 = 0;
    while let Some(chunk) = body
        .try_next()
        .await
        .map_err(|e| transient(format!("{url}: download interrupted: {e}")))?
    {
        written += chunk.len() as u64;
        if written > MAX_ARCHIVE_BYTES {
            return Err(ContentError::ArchiveTooLarge {
                size: written,
                limit: MAX_ARCHIVE_BYTES,
            }
            .into());
        }
        file.write_all(&chunk).await.map_err(io)?;
    }
    file.flush().await.map_err(io)?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_urls_name_a_bucket_and_a_key() {
        assert_eq!(parse("s3://b/a/k.zip").unwrap(), ("b", "a/k.zip"));
        for bad in ["s3://b", "s3:///k", "https://b/k"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
