//! The Git host port: what stacksync tells a Git host about a pull request
//! and a commit. One comment per pull request, found by its marker and
//! updated in place; a commit status (a check run on GitHub where the
//! credentials allow one). Implemented for GitHub, GitLab and Bitbucket
//! Cloud by `adapters::git_host`, in memory by `fakes::MemoryGitHost`.
//!
//! Best effort by design: what cannot be posted is logged by the caller,
//! never a reason to fail a run or a preview.

use std::future::Future;

use super::PortResult;
use crate::pull_request::{CommitState, Host};

/// The repository a comment or status goes to, and the secret that opens
/// it (its ARN; the adapter reads it and checks its host binding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRepository {
    pub host: Host,
    /// As the host names it: `owner/name`, `group/…/project`, `workspace/slug`.
    pub repository: String,
    /// The repository's URL as an entry names it: the secret's `hosts`
    /// and `repositories` are checked against it.
    pub url: String,
    /// The secret (`source.credentialsSecret` of the entries in the
    /// repository): a token, or a GitHub App.
    pub credentials: Option<String>,
}

/// A commit status: one per installation and purpose (`context`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStatus {
    pub state: CommitState,
    /// What the status is for: `stacksync/preview (INSTALLATION)`, or a
    /// run's `stacksync/STACK (INSTALLATION)`.
    pub context: String,
    /// One line (cut to the host's limit by the adapter).
    pub description: String,
    /// A link (the pull request's comment, the run's execution).
    pub url: Option<String>,
    /// A longer text, where the host shows one (a GitHub check run's
    /// summary); markdown.
    pub summary: Option<String>,
}

/// What posting a comment did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    /// The host's id of the comment.
    pub id: String,
    /// A new comment (none with the marker was found).
    pub created: bool,
}

/// Posting to a Git host.
pub trait GitHost: Send + Sync {
    /// Writes `body` as the one comment of pull request `number` that
    /// holds `marker`: the first such comment is updated in place, else one
    /// is created if `create` (`None`: there was none, and none was made).
    fn upsert_comment(
        &self,
        repository: &HostRepository,
        number: u64,
        marker: &str,
        body: &str,
        create: bool,
    ) -> impl Future<Output = PortResult<Option<Posted>>> + Send;

    /// Edits the comment of pull request `number` that holds `marker`
    /// (its body through `edit`); `None`: there is none, and none is made.
    fn edit_comment(
        &self,
        repository: &HostRepository,
        number: u64,
        marker: &str,
        edit: &(dyn Fn(&str) -> String + Send + Sync),
    ) -> impl Future<Output = PortResult<Option<Posted>>> + Send;

    /// Sets the status `status.context` of `commit` (40 hex digits).
    fn set_status(
        &self,
        repository: &HostRepository,
        commit: &str,
        status: &CommitStatus,
    ) -> impl Future<Output = PortResult<()>> + Send;

    /// The host and repository of the Git URL `url` (an entry's source),
    /// opened with `credentials`: `None` for a repository on no host this
    /// port knows (told by the URL's host, else by the secret's `apiUrl`).
    fn repository_of(
        &self,
        url: &str,
        credentials: Option<&str>,
    ) -> impl Future<Output = Option<HostRepository>> + Send;

    /// The longest comment the host takes, in characters.
    fn max_comment(&self, host: Host) -> usize {
        max_comment(host)
    }
}

/// The host a Git URL's server name says (github.com, gitlab.com,
/// bitbucket.org, and servers named `github.*`/`gitlab.*`), or the one an
/// API root says (`…/api/v3`: GitHub Enterprise Server, `…/api/v4`: GitLab,
/// `…/2.0`: Bitbucket Cloud).
pub fn host_by_name(url: &str, api_url: Option<&str>) -> Option<Host> {
    let server = crate::source::host_of(url).to_ascii_lowercase();
    let named = match server.as_str() {
        "github.com" => Some(Host::GitHub),
        "bitbucket.org" => Some(Host::Bitbucket),
        "gitlab.com" => Some(Host::GitLab),
        s if s.starts_with("github.") => Some(Host::GitHub),
        s if s.starts_with("gitlab.") => Some(Host::GitLab),
        _ => None,
    };
    named.or_else(|| {
        let api = api_url?.trim_end_matches('/');
        if api.ends_with("/api/v3") {
            Some(Host::GitHub)
        } else if api.ends_with("/api/v4") {
            Some(Host::GitLab)
        } else if api.ends_with("/2.0") {
            Some(Host::Bitbucket)
        } else {
            None
        }
    })
}

/// The repository's path on its host, from its Git URL: `owner/name`
/// (`group/…/project`), without `.git`.
pub fn repository_path(url: &str) -> Option<String> {
    let normal = crate::source::normalize_url(url);
    let (_, path) = normal.split_once('/')?;
    (path.contains('/')).then(|| path.to_owned())
}

/// The longest comment each host takes, in characters: GitHub 65,536
/// (the limit its API's refusals state: "body is too long (maximum is
/// 65536 characters)"), GitLab 1,000,000 (a note's documented limit),
/// Bitbucket Cloud 31,000 (no documented limit: kept under the 32,768 of
/// Bitbucket Server, as other tools do, since Bitbucket Cloud refuses very
/// large comments with a 400).
pub fn max_comment(host: Host) -> usize {
    match host {
        Host::GitHub => 65_536,
        Host::GitLab => 1_000_000,
        Host::Bitbucket => 31_000,
    }
}

impl<T: GitHost> GitHost for std::sync::Arc<T> {
    fn upsert_comment(
        &self,
        repository: &HostRepository,
        number: u64,
        marker: &str,
        body: &str,
        create: bool,
    ) -> impl Future<Output = PortResult<Option<Posted>>> + Send {
        (**self).upsert_comment(repository, number, marker, body, create)
    }

    fn edit_comment(
        &self,
        repository: &HostRepository,
        number: u64,
        marker: &str,
        edit: &(dyn Fn(&str) -> String + Send + Sync),
    ) -> impl Future<Output = PortResult<Option<Posted>>> + Send {
        (**self).edit_comment(repository, number, marker, edit)
    }

    fn set_status(
        &self,
        repository: &HostRepository,
        commit: &str,
        status: &CommitStatus,
    ) -> impl Future<Output = PortResult<()>> + Send {
        (**self).set_status(repository, commit, status)
    }

    fn repository_of(
        &self,
        url: &str,
        credentials: Option<&str>,
    ) -> impl Future<Output = Option<HostRepository>> + Send {
        (**self).repository_of(url, credentials)
    }

    fn max_comment(&self, host: Host) -> usize {
        (**self).max_comment(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_told_by_its_server_or_its_api() {
        assert_eq!(
            host_by_name("https://github.com/a/b.git", None),
            Some(Host::GitHub)
        );
        assert_eq!(
            host_by_name("git@gitlab.com:g/p.git", None),
            Some(Host::GitLab)
        );
        assert_eq!(
            host_by_name("https://bitbucket.org/w/r.git", None),
            Some(Host::Bitbucket)
        );
        assert_eq!(
            host_by_name("https://gitlab.acme.example/g/p.git", None),
            Some(Host::GitLab)
        );
        let own = "https://git.acme.example/a/b.git";
        assert_eq!(host_by_name(own, None), None);
        assert_eq!(
            host_by_name(own, Some("https://git.acme.example/api/v3")),
            Some(Host::GitHub)
        );
        assert_eq!(
            host_by_name(own, Some("https://git.acme.example/api/v4/")),
            Some(Host::GitLab)
        );
        assert_eq!(
            repository_path("https://github.com/Acme/Infra.git").as_deref(),
            Some("acme/infra")
        );
        assert_eq!(
            repository_path("git@gitlab.com:g/sub/p.git").as_deref(),
            Some("g/sub/p")
        );
        assert_eq!(repository_path("https://host/only"), None);
    }
}
