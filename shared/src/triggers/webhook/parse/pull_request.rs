//! Pull-request deliveries: GitHub `pull_request`, GitLab `Merge Request
//! Hook`, Bitbucket Cloud `pullrequest:*`, read into a [`PullRequest`].
//!
//! Shapes, from each host's documentation and published examples
//! (tests/fixtures/webhook/, README there):
//! - GitHub `pull_request`: `action` (`opened`, `synchronize`, `reopened`,
//!   `closed`; others are ignored), `number`, `pull_request.{html_url,
//!   merged, merge_commit_sha, head.{ref, sha, repo.full_name},
//!   base.{ref, repo.full_name}}`, `repository` (the base repository, read
//!   as a push's). A head repository other than the base (or deleted:
//!   `head.repo` null) is a fork.
//! - GitLab `Merge Request Hook`: `object_attributes.{iid, action (open,
//!   reopen, update, close, merge), oldrev (on an update that pushed
//!   commits; an update without it changed no code and is ignored),
//!   source_branch, target_branch, source_project_id, target_project_id,
//!   last_commit.id, merge_commit_sha, url}`, `project` (the target
//!   project, read as a push's). A source project other than the target
//!   is a fork.
//! - Bitbucket Cloud `pullrequest:created|updated|fulfilled|rejected`:
//!   `pullrequest.{id, state, links.html.href, source.{branch.name,
//!   commit.hash, repository.full_name}, destination.{branch.name,
//!   repository.full_name}, merge_commit.hash}`, `repository` (the
//!   destination). Bitbucket sends 12-digit commit prefixes.

use serde::Deserialize;

use super::*;
use crate::pull_request::{Host, PrState, PullRequest};
use crate::triggers::webhook::{Provider, PullRequestDelivery, Received, WebhookError};

/// The shortest commit prefix accepted (Bitbucket sends 12 digits).
const MIN_PREFIX: usize = 7;

/// A commit id or a prefix of one: at least [`MIN_PREFIX`] hex digits.
fn commit_prefix(path: &str, sha: &str) -> Result<String, WebhookError> {
    if sha.len() == 40 {
        return commit_id(path, sha);
    }
    if (MIN_PREFIX..40).contains(&sha.len()) && sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(sha.to_ascii_lowercase());
    }
    Err(WebhookError::Malformed(format!(
        "at {path}: expected a commit id (or a prefix of at least {MIN_PREFIX} hex digits), got {}",
        quote(sha)
    )))
}

/// A branch name as `refs/heads/NAME`, checked as a pushed ref is.
fn branch(path: &str, name: &str) -> Result<String, WebhookError> {
    let reference = if name.starts_with("refs/") {
        name.to_owned()
    } else {
        format!("refs/heads/{name}")
    };
    branch_or_tag(path, &reference)?
        .ok_or_else(|| WebhookError::Malformed(format!("at {path}: not a branch: {}", quote(name))))
}

fn delivery(provider: Provider, id: String, pull_request: PullRequest) -> Received {
    Received::PullRequest(PullRequestDelivery {
        provider,
        delivery_id: id,
        pull_request,
    })
}

// ------------------------------------------------------------------ GitHub

#[derive(Deserialize)]
struct GitHubEvent {
    action: String,
    number: u64,
    pull_request: GitHubPull,
    repository: super::github::GitHubRepository,
}

#[derive(Deserialize)]
struct GitHubPull {
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    merged: Option<bool>,
    #[serde(default)]
    merge_commit_sha: Option<String>,
    head: GitHubSide,
    base: GitHubSide,
}

#[derive(Deserialize)]
struct GitHubSide {
    #[serde(rename = "ref")]
    reference: String,
    sha: String,
    #[serde(default)]
    repo: Option<GitHubSideRepo>,
}

#[derive(Deserialize)]
struct GitHubSideRepo {
    full_name: String,
}

pub(super) fn github_pull_request(body: &[u8], id: String) -> Result<Received, WebhookError> {
    let event: GitHubEvent = from_json(body, "")?;
    let pull = &event.pull_request;
    let state = match event.action.as_str() {
        "opened" | "synchronize" | "reopened" => PrState::Open,
        "closed" if pull.merged == Some(true) => PrState::Merged,
        "closed" => PrState::Closed,
        other => {
            return Ok(ignored(format!(
                "GitHub pull_request action {} changes no commit",
                quote(other)
            )));
        }
    };
    let base_repo = pull.base.repo.as_ref().map(|r| r.full_name.as_str());
    let head_repo = pull.head.repo.as_ref().map(|r| r.full_name.as_str());
    let fork = head_repo.is_none_or(|h| Some(h) != base_repo);
    let merge_commit = match (&state, pull.merge_commit_sha.as_deref()) {
        (PrState::Merged, Some(sha)) if !sha.is_empty() => {
            Some(commit_id("pull_request.merge_commit_sha", sha)?)
        }
        _ => None,
    };
    Ok(delivery(
        Provider::GitHub,
        id,
        PullRequest {
            host: Host::GitHub,
            repository: event.repository.full_name.clone(),
            repository_urls: super::github::repository(&event.repository)?,
            number: event.number,
            base_ref: branch("pull_request.base.ref", &pull.base.reference)?,
            head_ref: branch("pull_request.head.ref", &pull.head.reference)?,
            head_commit: commit_id("pull_request.head.sha", &pull.head.sha)?,
            fork,
            state,
            merge_commit,
            url: pull.html_url.clone(),
        },
    ))
}

// ------------------------------------------------------------------ GitLab

#[derive(Deserialize)]
struct GitLabEvent {
    project: super::gitlab::GitLabRepository,
    object_attributes: GitLabMerge,
}

#[derive(Deserialize)]
struct GitLabMerge {
    iid: u64,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    oldrev: Option<String>,
    source_branch: String,
    target_branch: String,
    #[serde(default)]
    source_project_id: Option<u64>,
    #[serde(default)]
    target_project_id: Option<u64>,
    last_commit: GitLabCommit,
    #[serde(default)]
    merge_commit_sha: Option<String>,
    #[serde(default)]
    url: Option<String>,
}

#[derive(Deserialize)]
struct GitLabCommit {
    id: String,
}

pub(super) fn gitlab_merge_request(body: &[u8], id: String) -> Result<Received, WebhookError> {
    let event: GitLabEvent = from_json(body, "")?;
    let merge = &event.object_attributes;
    let action = merge.action.as_deref().unwrap_or_default();
    let state = match action {
        "open" | "reopen" => PrState::Open,
        "update" if merge.oldrev.as_deref().is_some_and(|r| !r.is_empty()) => PrState::Open,
        "merge" => PrState::Merged,
        "close" => PrState::Closed,
        "update" => {
            return Ok(ignored(
                "GitLab merge request update without new commits (no `oldrev`)",
            ));
        }
        other => {
            return Ok(ignored(format!(
                "GitLab merge request action {} changes no commit",
                quote(other)
            )));
        }
    };
    let _ = &merge.state;
    let (repository, repository_urls) = super::gitlab::project(&event.project, None)?;
    let merge_commit = match (&state, merge.merge_commit_sha.as_deref()) {
        (PrState::Merged, Some(sha)) if !sha.is_empty() => {
            Some(commit_id("object_attributes.merge_commit_sha", sha)?)
        }
        _ => None,
    };
    Ok(delivery(
        Provider::GitLab,
        id,
        PullRequest {
            host: Host::GitLab,
            repository,
            repository_urls,
            number: merge.iid,
            base_ref: branch("object_attributes.target_branch", &merge.target_branch)?,
            head_ref: branch("object_attributes.source_branch", &merge.source_branch)?,
            head_commit: commit_id("object_attributes.last_commit.id", &merge.last_commit.id)?,
            fork: merge.source_project_id != merge.target_project_id,
            state,
            merge_commit,
            url: merge.url.clone(),
        },
    ))
}

// --------------------------------------------------------------- Bitbucket

#[derive(Deserialize)]
struct BitbucketEvent {
    pullrequest: BitbucketPull,
    repository: super::bitbucket::BitbucketRepository,
}

#[derive(Deserialize)]
struct BitbucketPull {
    id: u64,
    source: BitbucketSide,
    destination: BitbucketSide,
    #[serde(default)]
    merge_commit: Option<BitbucketCommit>,
    #[serde(default)]
    links: Option<super::bitbucket::BitbucketLinks>,
}

#[derive(Deserialize)]
struct BitbucketSide {
    branch: BitbucketBranch,
    commit: BitbucketCommit,
    #[serde(default)]
    repository: Option<BitbucketSideRepo>,
}

#[derive(Deserialize)]
struct BitbucketBranch {
    name: String,
}

#[derive(Deserialize)]
struct BitbucketCommit {
    hash: String,
}

#[derive(Deserialize)]
struct BitbucketSideRepo {
    full_name: String,
}

pub(super) fn bitbucket_pull_request(
    event: &str,
    body: &[u8],
    id: String,
) -> Result<Received, WebhookError> {
    let state = match event {
        "pullrequest:created" | "pullrequest:updated" => PrState::Open,
        "pullrequest:fulfilled" => PrState::Merged,
        "pullrequest:rejected" => PrState::Closed,
        other => {
            return Ok(ignored(format!(
                "Bitbucket event {} changes no commit",
                quote(other)
            )));
        }
    };
    let parsed: BitbucketEvent = from_json(body, "")?;
    let pull = &parsed.pullrequest;
    let (repository, repository_urls) = super::bitbucket::repository(&parsed.repository)?;
    let side = |s: &BitbucketSide| {
        s.repository
            .as_ref()
            .map(|r| r.full_name.to_ascii_lowercase())
    };
    let fork = side(&pull.source) != side(&pull.destination);
    let merge_commit = match (&state, &pull.merge_commit) {
        (PrState::Merged, Some(c)) => {
            Some(commit_prefix("pullrequest.merge_commit.hash", &c.hash)?)
        }
        _ => None,
    };
    Ok(delivery(
        Provider::Bitbucket,
        id,
        PullRequest {
            host: Host::Bitbucket,
            repository,
            repository_urls,
            number: pull.id,
            base_ref: branch(
                "pullrequest.destination.branch.name",
                &pull.destination.branch.name,
            )?,
            head_ref: branch("pullrequest.source.branch.name", &pull.source.branch.name)?,
            head_commit: commit_prefix("pullrequest.source.commit.hash", &pull.source.commit.hash)?,
            fork,
            state,
            merge_commit,
            url: pull
                .links
                .as_ref()
                .and_then(|l| l.html.as_ref())
                .map(|h| h.href.clone()),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_prefixes_are_hex_of_seven_digits_or_more() {
        assert_eq!(commit_prefix("p", "ABCDEF123456").unwrap(), "abcdef123456");
        assert!(commit_prefix("p", "abc").is_err());
        assert!(commit_prefix("p", "zzzzzzzzz").is_err());
        assert_eq!(commit_prefix("p", &"a".repeat(40)).unwrap(), "a".repeat(40));
    }

    #[test]
    fn branches_become_full_refs() {
        assert_eq!(branch("b", "main").unwrap(), "refs/heads/main");
        assert_eq!(branch("b", "refs/heads/x").unwrap(), "refs/heads/x");
        assert!(branch("b", "").is_err());
        assert!(branch("b", "a\nb").is_err());
    }
}
