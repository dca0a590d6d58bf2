//! Git sources, fetched in-process with gix: Lambda has no `git` binary.
//!
//! Resolving a ref lists the remote's refs only (no objects). Fetching takes
//! one commit (depth 1) into a fresh bare repository in scratch space and
//! reads only the files a run wants from it (`tree.rs`): on a server that
//! allows partial clone, the first pack holds the commit and its trees but
//! no file content (`filter blob:none`), and a second asks for exactly the
//! wanted blobs; elsewhere the pack streams to disk and only the wanted
//! blobs are read out of it. Memory stays flat in the repository's size.
//!
//! Transports (`transport.rs`): smart HTTP(S), with credentials; `git://`;
//! SSH in-process (`ssh.rs`: Lambda has no `ssh` program); `file://` (runs
//! `git-upload-pack`: tests and the local runner). Every network transport
//! has connect and read timeouts well under a function's timeout.

mod fetch;
mod pages;
mod signed;
mod ssh;
mod transport;
mod tree;

pub use transport::Timeouts;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gix::error::Class;

use crate::adapters::credentials::{Credentials, GitAuth};
use crate::content::{ContentError, Wanted};
use crate::ports::source::{FetchError, Files, SourceFetcher, SourceLocation, rejected, transient};

/// Why a Git operation failed, before it is told to the steps.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("{0}")]
    Git(#[from] gix::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("reference {0:?} not found on the remote")]
    RefNotFound(String),
    #[error("{reference:?} is {object}, which is not a commit")]
    NotACommit { reference: String, object: String },
    #[error(transparent)]
    Content(#[from] ContentError),
    #[error("{0}")]
    Refused(String),
    /// The server turned down what was presented: said with what that was
    /// (`Presented`) when the error is told to the steps.
    #[error("{0}")]
    Unauthorized(Refusal),
    #[error("{0}")]
    TimedOut(String),
    #[error("{0}")]
    Transient(String),
}

/// How a server turned down what a fetch presented.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// An HTTP status: 401 (credentials wanted, or those sent refused) or
    /// 403 (access refused).
    Http(u16),
    /// A redirect to another host or port, where no credentials are sent,
    /// and the server there asked for them (401).
    Redirected { to: String },
    /// The SSH server refused the deploy key.
    SshKey { host: String, user: String },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Http(status) => write!(f, "the server answered HTTP {status}"),
            Refusal::Redirected { to } => {
                write!(
                    f,
                    "redirected to {to}, which asks for credentials (HTTP 401)"
                )
            }
            Refusal::SshKey { host, user } => {
                write!(f, "{host} refused the deploy key (user {user})")
            }
        }
    }
}

/// What a fetch presented to the server, for what a refusal says: where
/// the credentials came from, never what they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Presented {
    /// Nothing: the entry has no `source.credentialsSecret`.
    Nothing,
    /// What the secret at this ARN holds (or a GitHub App token made with it).
    Secret(String),
    /// CodeCommit's Git credentials, signed with the AWS credentials in use.
    Signed,
}

impl Presented {
    fn of(source: &SourceLocation, auth: &GitAuth) -> Self {
        match (&source.credentials, auth) {
            (Some(arn), _) => Presented::Secret(arn.clone()),
            (None, GitAuth::Anonymous) => Presented::Nothing,
            (None, _) => Presented::Signed,
        }
    }
}

impl Error {
    /// What the steps act on: final (another try gets the same answer),
    /// transient, a refused credential, or content refused.
    fn into_fetch(self, url: &str, presented: &Presented) -> FetchError {
        match self {
            Error::Content(e) => FetchError::Content(e),
            Error::RefNotFound(_) | Error::NotACommit { .. } | Error::Refused(_) => {
                rejected(format!("{url}: {self}"))
            }
            Error::Unauthorized(refusal) => refused(url, presented, refusal),
            Error::TimedOut(detail) => FetchError::TimedOut {
                url: url.to_owned(),
                detail,
            },
            Error::Transient(m) => transient(format!("{url}: {m}")),
            Error::Io(e) => classify_io(url, &e),
            Error::Git(e) => classify_git(url, &e, presented),
        }
    }
}

/// A refusal said as it happened: whose credentials were refused (never
/// their value), or that none were configured; and the HTTP status.
fn refused(url: &str, presented: &Presented, refusal: Refusal) -> FetchError {
    let authentication = |detail: String| FetchError::Authentication {
        url: url.to_owned(),
        detail,
    };
    match (refusal, presented) {
        // No credential was refused: none went there.
        (Refusal::Redirected { to }, _) => rejected(format!(
            "{url}: redirected to {to}, which asks for credentials (HTTP 401); credentials go \
             to no other host or port than the source's: point the entry at the repository's \
             own URL"
        )),
        (Refusal::SshKey { host, user }, Presented::Secret(arn)) => authentication(format!(
            "{host} refused the deploy key from {arn} (user {user})"
        )),
        (Refusal::SshKey { host, user }, _) => {
            authentication(format!("{host} refused the deploy key (user {user})"))
        }
        (Refusal::Http(status), Presented::Secret(arn)) => authentication(format!(
            "the server refused the credentials from {arn} (HTTP {status})"
        )),
        (Refusal::Http(status), Presented::Signed) => authentication(format!(
            "the server refused the Git credentials signed with the AWS credentials in use \
             (HTTP {status}): they need codecommit:GitPull on the repository"
        )),
        (Refusal::Http(401), Presented::Nothing) => authentication(
            "the server asks for credentials (HTTP 401), and the entry has none: set \
             source.credentialsSecret (README: Private repositories)"
                .into(),
        ),
        (Refusal::Http(status), Presented::Nothing) => authentication(format!(
            "the server refused access (HTTP {status}), and the entry has no credentials: set \
             source.credentialsSecret if the repository is private"
        )),
    }
}

/// A gix error by its typed classification (never by its text): refused
/// credentials, an answer that another try will not change (the server's
/// `ERR` line, not found, invalid, unsupported), or worth retrying.
fn classify_git(url: &str, e: &gix::Error, presented: &Presented) -> FetchError {
    let text = describe(e);
    if is_sha256(&text) {
        return rejected(format!("{url}: {}", crate::source::SHA256_REFUSED));
    }
    if let Some(refusal) = server_refusal(e) {
        return rejected(format!("{url}: the server refused: {refusal}"));
    }
    if let Some(failed) = e.downcast_any_ref::<ssh::UploadPackFailed>() {
        return rejected(format!("{url}: {failed}"));
    }
    if e.iter_errors().any(is_timeout) {
        return FetchError::TimedOut {
            url: url.to_owned(),
            detail: text,
        };
    }
    if let Some(status) = unauthorized(e) {
        return refused(url, presented, Refusal::Http(status));
    }
    match gix::error::classify(e).dominant_class() {
        Some(Class::Unauthenticated | Class::PermissionDenied) => FetchError::Authentication {
            url: url.to_owned(),
            detail: text,
        },
        Some(Class::NotFound | Class::Validation | Class::Unsupported | Class::Cancelled) => {
            rejected(format!("{url}: {text}"))
        }
        _ if http_status(e).is_some_and(|s| (400..500).contains(&s) && s != 408 && s != 429) => {
            rejected(format!("{url}: {text}"))
        }
        _ => transient(format!("{url}: {text}")),
    }
}

/// Whether a fetch failed on the remote's object ids being SHA-256 ones:
/// gix refuses a 64-digit id (`A hash sized 64 hexadecimal characters is
/// invalid`), which is no network trouble and fails the same way again.
fn is_sha256(text: &str) -> bool {
    text.contains("hash sized 64 hexadecimal")
}

fn classify_io(url: &str, e: &std::io::Error) -> FetchError {
    use std::io::ErrorKind::*;
    if is_timeout(e) {
        return FetchError::TimedOut {
            url: url.to_owned(),
            detail: e.to_string(),
        };
    }
    match e.kind() {
        // The operating system's refusal (the scratch folder, a socket),
        // not the server's: no credential was refused.
        NotFound | InvalidInput | Unsupported | PermissionDenied => rejected(format!("{url}: {e}")),
        _ => transient(format!("{url}: {e}")),
    }
}

/// The HTTP status of a server's refusal anywhere in the chain: 401 (a
/// challenge for credentials, or those sent refused) or 403.
fn unauthorized(e: &gix::Error) -> Option<u16> {
    let challenged = e
        .downcast_any_ref::<gix::protocol::transport::client::AuthenticationRequired>()
        .is_some();
    if challenged {
        return Some(401);
    }
    http_status(e).filter(|s| matches!(s, 401 | 403))
}

/// Whether an error is a transport's timeout: reqwest's, or a socket's read
/// or write timeout (`WouldBlock` on Unix, `TimedOut` elsewhere and SSH's).
fn is_timeout(cause: &(dyn std::error::Error + 'static)) -> bool {
    if let Some(e) = cause.downcast_ref::<reqwest::Error>() {
        return e.is_timeout();
    }
    cause.downcast_ref::<std::io::Error>().is_some_and(|e| {
        matches!(
            e.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
        )
    })
}

/// The text of a server's `ERR` packet line anywhere in the chain (a
/// daemon's "repository not exported", a forge's "access denied").
fn server_refusal(e: &gix::Error) -> Option<String> {
    e.iter_errors().find_map(|cause| {
        let packet = cause
            .downcast_ref::<gix::protocol::transport::packetline::read::Error>()
            .or_else(|| {
                cause
                    .downcast_ref::<std::io::Error>()
                    .and_then(|io| io.get_ref())
                    .and_then(|inner| inner.downcast_ref())
            })?;
        Some(packet.message.to_string())
    })
}

/// The HTTP status of a failed request anywhere in the chain.
fn http_status(e: &gix::Error) -> Option<u16> {
    e.iter_errors().find_map(|cause| {
        cause
            .downcast_ref::<reqwest::Error>()
            .and_then(reqwest::Error::status)
            .map(|s| s.as_u16())
    })
}

/// gix's message with its causes, innermost last, on one line.
fn describe(e: &gix::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.iter_errors() {
        let text = cause.to_string();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

/// The Git [`SourceFetcher`].
#[derive(Debug, Clone)]
pub struct GitFetcher {
    workdir: PathBuf,
    credentials: Option<Arc<Credentials>>,
    timeouts: Timeouts,
}

impl GitFetcher {
    /// `workdir`: where temporary bare repositories go (`/tmp` in Lambda).
    /// Sources with a secret are refused until [`Self::with_credentials`].
    pub fn new(workdir: impl Into<PathBuf>) -> Self {
        Self {
            workdir: workdir.into(),
            credentials: None,
            timeouts: Timeouts::default(),
        }
    }

    /// Other transport timeouts than the defaults (tests).
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Reads sources' secrets (and signs CodeCommit requests) with these.
    pub fn with_credentials(mut self, credentials: Arc<Credentials>) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// The URL to fetch from (CodeCommit's spellings become its HTTPS
    /// URL) and what to present there.
    async fn access(&self, source: &SourceLocation) -> Result<(String, GitAuth), FetchError> {
        match &self.credentials {
            Some(credentials) => credentials.git_access(source).await,
            None if source.credentials.is_some() => Err(rejected(format!(
                "{}: this runner reads no source credentials",
                source.url
            ))),
            None => Ok((source.url.clone(), GitAuth::Anonymous)),
        }
    }

    /// A refused credential is read again next time (it may have been
    /// rotated since it was cached).
    fn forget_refused<T>(
        &self,
        source: &SourceLocation,
        result: Result<T, FetchError>,
    ) -> Result<T, FetchError> {
        if let (Err(FetchError::Authentication { .. }), Some(credentials), Some(arn)) =
            (&result, &self.credentials, &source.credentials)
        {
            credentials.forget(arn);
        }
        result
    }

    /// A fresh scratch folder for one fetch, removed when dropped.
    fn scratch(&self) -> Scratch {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        Scratch(self.workdir.join(format!(
            "fetch-{}-{}-{}",
            std::process::id(),
            crate::clock::now_millis(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        )))
    }
}

/// A scratch folder, removed on drop (on every way out of a fetch).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs blocking Git work off the async runtime; a panic in it is an error.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, FetchError> + Send + 'static,
) -> Result<T, FetchError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| transient(format!("git: the fetch stopped: {e}")))?
}

impl SourceFetcher for GitFetcher {
    async fn resolve(
        &self,
        source: &SourceLocation,
        reference: &str,
    ) -> Result<String, FetchError> {
        if fetch::is_full_sha(reference) {
            return Ok(reference.to_ascii_lowercase());
        }
        missing_local_repository(&source.url)?;
        let (url, auth) = self.access(source).await?;
        let presented = Presented::of(source, &auth);
        let (reference, timeouts) = (reference.to_owned(), self.timeouts);
        let result = blocking(move || {
            fetch::resolve(&url, &auth, &reference, &timeouts)
                .map_err(|e| e.into_fetch(&url, &presented))
        })
        .await;
        self.forget_refused(source, result)
    }

    async fn fetch(
        &self,
        source: &SourceLocation,
        revision: &str,
        wanted: &Wanted,
    ) -> Result<Files, FetchError> {
        missing_local_repository(&source.url)?;
        let (url, auth) = self.access(source).await?;
        let presented = Presented::of(source, &auth);
        let scratch = self.scratch();
        let (revision, wanted, timeouts) = (revision.to_owned(), wanted.clone(), self.timeouts);
        let result = blocking(move || {
            let result = fetch::fetch(&url, &auth, &revision, &wanted, &scratch.0, &timeouts);
            drop(scratch);
            result.map_err(|e| e.into_fetch(&url, &presented))
        })
        .await;
        self.forget_refused(source, result)
    }
}

/// A local repository that is not there will not appear on a retry (the
/// transport would only report a broken pipe).
fn missing_local_repository(url: &str) -> Result<(), FetchError> {
    match url.strip_prefix("file://") {
        Some(path) if !Path::new(path).exists() => {
            Err(rejected(format!("{url}: there is no repository at {path}")))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run's own scratch folder (or a socket) refused by the operating
    /// system is no refused credential: it was told "authentication failed".
    #[test]
    fn a_local_permission_error_is_not_a_refused_credential() {
        let url = "https://git.example/r.git";
        let denied = std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "Permission denied (os error 13)",
        );
        let e = Error::Io(denied).into_fetch(url, &Presented::Nothing);
        assert!(!matches!(e, FetchError::Authentication { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("{url}: Permission denied (os error 13)")
        );
    }
}
