//! Every kind of source behind one [`SourceFetcher`]: `s3://` archives, and
//! Git (with credentials, CodeCommit and SSH) for everything else.

use crate::adapters::git::GitFetcher;
use crate::adapters::s3_source::S3Archives;
use crate::content::Wanted;
use crate::ports::source::{FetchError, Files, SourceFetcher, SourceLocation, rejected};

/// Sources by kind.
#[derive(Debug, Clone)]
pub struct Sources {
    pub git: GitFetcher,
    /// `None`: S3 sources are refused (a runner without S3 access).
    pub s3: Option<S3Archives>,
}

impl Sources {
    /// The S3 archive reader for an S3 source; an S3 source with a secret
    /// is refused (buckets are read with stacksync's own role).
    fn s3(&self, source: &SourceLocation) -> Result<&S3Archives, FetchError> {
        if source.credentials.is_some() {
            return Err(rejected(format!(
                "{}: S3 sources are read with stacksync's own role; source.credentialsSecret is for Git",
                source.url
            )));
        }
        self.s3
            .as_ref()
            .ok_or_else(|| rejected(format!("{}: this runner reads no S3 sources", source.url)))
    }
}

fn is_s3(source: &SourceLocation) -> bool {
    source.url.starts_with("s3://")
}

impl SourceFetcher for Sources {
    async fn resolve(
        &self,
        source: &SourceLocation,
        reference: &str,
    ) -> Result<String, FetchError> {
        if is_s3(source) {
            return self.s3(source)?.resolve(source, reference).await;
        }
        self.git.resolve(source, reference).await
    }

    async fn fetch(
        &self,
        source: &SourceLocation,
        revision: &str,
        wanted: &Wanted,
    ) -> Result<Files, FetchError> {
        if is_s3(source) {
            return self.s3(source)?.fetch(source, revision, wanted).await;
        }
        self.git.fetch(source, revision, wanted).await
    }
}
