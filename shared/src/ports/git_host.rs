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
    /// is created.
    fn upsert_comment(
        &self,
        repository: &HostRepository,
        number: u64,
        marker: &str,
        body: &str,
    ) -> impl Future<Output = PortResult<Posted>> + Send;

    /// Sets the status `status.context` of `commit` (40 hex digits).
    fn set_status(
        &self,
        repository: &HostRepository,
        commit: &str,
        status: &CommitStatus,
    ) -> impl Future<Output = PortResult<()>> + Send;

    /// The longest comment the host takes, in characters.
    fn max_comment(&self, host: Host) -> usize {
        max_comment(host)
    }
}

/// The longest comment each host takes, in characters: GitHub 65,536
/// (its API's documented body limit), GitLab 1,000,000 (a note's
/// limit), Bitbucket Cloud 32,768 (kept well under what it takes).
pub fn max_comment(host: Host) -> usize {
    match host {
        Host::GitHub => 65_536,
        Host::GitLab => 1_000_000,
        Host::Bitbucket => 32_768,
    }
}

impl<T: GitHost> GitHost for std::sync::Arc<T> {
    fn upsert_comment(
        &self,
        repository: &HostRepository,
        number: u64,
        marker: &str,
        body: &str,
    ) -> impl Future<Output = PortResult<Posted>> + Send {
        (**self).upsert_comment(repository, number, marker, body)
    }

    fn set_status(
        &self,
        repository: &HostRepository,
        commit: &str,
        status: &CommitStatus,
    ) -> impl Future<Output = PortResult<()>> + Send {
        (**self).set_status(repository, commit, status)
    }

    fn max_comment(&self, host: Host) -> usize {
        (**self).max_comment(host)
    }
}
