//! The source port: where templates come from.

use std::future::Future;

use super::{PortError, PortResult};
use crate::content::{ContentError, Wanted};
use crate::spec::Source;

/// Files taken from a source: (normal path, bytes), sorted by path.
pub type Files = Vec<(String, Vec<u8>)>;

/// A source as the adapters reach it: where it is, and where the secret
/// that opens it is kept (an ARN: never the secret itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLocation {
    /// A Git URL or `s3://bucket/key`.
    pub url: String,
    /// A Secrets Manager secret or SSM parameter ARN.
    pub credentials: Option<String>,
}

impl SourceLocation {
    /// The location of a spec's source.
    pub fn of(source: &Source) -> Self {
        Self {
            url: source.url().to_owned(),
            credentials: source.credentials_secret.clone(),
        }
    }

    /// A source reached without credentials.
    pub fn public(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            credentials: None,
        }
    }
}

/// Why files could not be taken from a source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The source could not be read (transient, or refused: no access,
    /// no such repository or object).
    #[error(transparent)]
    Port(#[from] PortError),
    /// The source was read, and what it holds is refused.
    #[error(transparent)]
    Content(#[from] ContentError),
    /// The credentials were refused (wrong, expired or without access), or
    /// the server asks for some and the entry has none. `detail` says
    /// which, whose (the secret's ARN, never its value) and the server's
    /// answer (an HTTP status, SSH's refusal of the key).
    #[error("authentication failed for {url}: {detail}")]
    Authentication { url: String, detail: String },
    /// The source is not among the places its credentials secret may be
    /// sent (the secret's `hosts` and `repositories`), or the secret names
    /// none: nothing was sent, no connection made.
    #[error("{detail}")]
    CredentialNotForHost { secret: String, detail: String },
    /// The source did not answer within the transport's timeouts.
    #[error("{url} did not answer in time: {detail}")]
    TimedOut { url: String, detail: String },
}

/// Where templates come from: a Git repository or an S3 archive.
pub trait SourceFetcher: Send + Sync {
    /// Resolves a ref (branch, tag, commit; for S3 a version id, or `""`
    /// for the latest) to an exact revision.
    fn resolve(
        &self,
        source: &SourceLocation,
        reference: &str,
    ) -> impl Future<Output = Result<String, FetchError>> + Send;
    /// The wanted files of the source at `revision`, and nothing else.
    fn fetch(
        &self,
        source: &SourceLocation,
        revision: &str,
        wanted: &Wanted,
    ) -> impl Future<Output = Result<Files, FetchError>> + Send;
}

impl FetchError {
    /// Whether another try could succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, FetchError::Port(PortError::Transient(_)))
    }
}

/// A port error from a plain message: for adapters that reach a source.
pub fn rejected(message: impl Into<String>) -> FetchError {
    FetchError::Port(PortError::Refused(message.into()))
}

/// A transient port error from a plain message.
pub fn transient(message: impl Into<String>) -> FetchError {
    FetchError::Port(PortError::Transient(message.into()))
}

/// `PortResult` of a fetch, for callers that only tell transient apart.
pub fn into_port<T>(result: Result<T, FetchError>) -> PortResult<T> {
    result.map_err(|e| match e {
        FetchError::Port(p) => p,
        other => PortError::Refused(other.to_string()),
    })
}
