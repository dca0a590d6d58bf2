//! The source port: where templates come from.

use std::future::Future;

use super::PortResult;

/// Where templates come from: a Git repository or an S3 archive.
pub trait SourceFetcher: Send + Sync {
    /// Resolves a ref (branch, tag, commit) to an exact revision.
    fn resolve(
        &self,
        url: &str,
        reference: &str,
    ) -> impl Future<Output = PortResult<String>> + Send;
    /// Every file of the source at `revision`, as (path, bytes).
    fn fetch(
        &self,
        url: &str,
        revision: &str,
    ) -> impl Future<Output = PortResult<Vec<(String, Vec<u8>)>>> + Send;
}
