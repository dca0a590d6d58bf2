//! GitLab `Push Hook`, `Tag Push Hook` and `Merge Request Hook` deliveries (and system
//! hooks that carry a push or a merge request).

use serde::Deserialize;

use super::*;
use crate::triggers::RefMoved;
use crate::triggers::webhook::{Delivery, Provider, Received, WebhookError};

#[derive(Deserialize)]
struct GitLabKind {
    #[serde(default)]
    object_kind: Option<String>,
    #[serde(default)]
    event_name: Option<String>,
}

#[derive(Deserialize)]
struct GitLabPush {
    #[serde(rename = "ref")]
    reference: String,
    after: String,
    #[serde(default)]
    checkout_sha: Option<String>,
    #[serde(default)]
    project: Option<GitLabRepository>,
    #[serde(default)]
    repository: Option<GitLabRepository>,
}

#[derive(Deserialize)]
pub(super) struct GitLabRepository {
    /// `group/…/project`: the project, as GitLab names it (in `project`
    /// only; the older `repository` has no such field).
    #[serde(default)]
    path_with_namespace: Option<String>,
    #[serde(default)]
    git_http_url: Option<String>,
    #[serde(default)]
    git_ssh_url: Option<String>,
    #[serde(default)]
    http_url: Option<String>,
    #[serde(default)]
    ssh_url: Option<String>,
    #[serde(default)]
    web_url: Option<String>,
    #[serde(default)]
    homepage: Option<String>,
    #[serde(default)]
    url: Option<String>,
}

impl GitLabRepository {
    fn urls(&self) -> [Option<&str>; 7] {
        [
            self.git_http_url.as_deref(),
            self.git_ssh_url.as_deref(),
            self.http_url.as_deref(),
            self.ssh_url.as_deref(),
            self.web_url.as_deref(),
            self.homepage.as_deref(),
            self.url.as_deref(),
        ]
    }
}

pub(super) fn gitlab(
    event: &str,
    body: &[u8],
    id: impl Fn() -> String,
) -> Result<Received, WebhookError> {
    if !matches!(
        event,
        "Push Hook" | "Tag Push Hook" | "System Hook" | "Merge Request Hook"
    ) {
        return Ok(ignored(format!(
            "GitLab event {} is not a push",
            quote(event)
        )));
    }
    let kind: GitLabKind = from_json(body, "")?;
    let kind = kind.object_kind.or(kind.event_name).unwrap_or_default();
    if kind == "merge_request" {
        return super::pull_request::gitlab_merge_request(body, id());
    }
    if !matches!(kind.as_str(), "push" | "tag_push") {
        return Ok(ignored(format!("GitLab {} is not a push", quote(&kind))));
    }
    let push: GitLabPush = from_json(body, "")?;
    let Some(reference) = branch_or_tag("ref", &push.reference)? else {
        return Ok(ignored(format!(
            "{} is neither a branch nor a tag",
            quote(&push.reference)
        )));
    };
    if is_null_sha(&push.after) {
        return Ok(ignored(format!("{reference} was deleted")));
    }
    // `checkout_sha` is the commit even for an annotated tag, whose `after`
    // is the tag object.
    let commit = match push.checkout_sha.as_deref().filter(|s| !s.is_empty()) {
        Some(sha) => commit_id("checkout_sha", sha)?,
        None => commit_id("after", &push.after)?,
    };
    let project = push
        .project
        .as_ref()
        .ok_or_else(|| WebhookError::Malformed("missing field `project`".to_owned()))?;
    let (_, repository_urls) = self::project(project, push.repository.as_ref())?;
    Ok(Received::Push(Delivery {
        provider: Provider::GitLab,
        delivery_id: id(),
        refs: vec![RefMoved {
            repository_urls,
            reference,
            commit,
        }],
    }))
}

/// The project `project.path_with_namespace` names, on the host of its
/// pages, and its URLs: the payload's (and the older `repository`'s) are
/// taken only as spellings of it.
pub(super) fn project(
    project: &GitLabRepository,
    older: Option<&GitLabRepository>,
) -> Result<(String, Vec<String>), WebhookError> {
    let path = project.path_with_namespace.as_deref().ok_or_else(|| {
        WebhookError::Malformed("at project: missing field `path_with_namespace`".to_owned())
    })?;
    let host = first_host([
        project.web_url.as_deref(),
        project.homepage.as_deref(),
        project.git_http_url.as_deref(),
        project.http_url.as_deref(),
        project.git_ssh_url.as_deref(),
        project.ssh_url.as_deref(),
        project.url.as_deref(),
    ])
    .ok_or_else(|| WebhookError::Malformed("at project: the project has no URL".to_owned()))?;
    let candidates = project
        .urls()
        .into_iter()
        .chain(older.into_iter().flat_map(GitLabRepository::urls));
    let urls = repository_urls("project.path_with_namespace", host, path, candidates)?;
    Ok((path.trim().trim_matches('/').to_owned(), urls))
}
