//! GitHub (and GitHub Enterprise Server) `push` and `pull_request` deliveries, JSON or
//! form-encoded.

use serde::Deserialize;

use super::*;
use crate::triggers::RefMoved;
use crate::triggers::webhook::{Delivery, Headers, Provider, Received, WebhookError};

#[derive(Deserialize)]
struct GitHubPush {
    #[serde(rename = "ref")]
    reference: String,
    after: String,
    #[serde(default)]
    deleted: bool,
    repository: GitHubRepository,
    #[serde(default)]
    head_commit: Option<CommitRef>,
}

#[derive(Deserialize)]
pub(super) struct GitHubRepository {
    /// `owner/name`: the repository, as GitHub names it.
    pub(super) full_name: String,
    #[serde(default)]
    clone_url: Option<String>,
    #[serde(default)]
    ssh_url: Option<String>,
    #[serde(default)]
    git_url: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    url: Option<String>,
}

#[derive(Deserialize)]
struct CommitRef {
    id: String,
}

pub(super) fn github(
    event: &str,
    headers: &Headers,
    body: &[u8],
    id: impl Fn() -> String,
) -> Result<Received, WebhookError> {
    if event != "pull_request"
        && let Some(answer) = not_a_push(event, "GitHub")
    {
        return Ok(answer);
    }
    let form = headers
        .get("content-type")
        .and_then(|t| t.split(';').next())
        .is_some_and(|t| {
            t.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    let payload = if form {
        Some(form_field(body, "payload").ok_or_else(|| {
            WebhookError::Malformed("a form-encoded delivery without a `payload` field".to_owned())
        })?)
    } else {
        None
    };
    if event == "pull_request" {
        return super::pull_request::github_pull_request(payload.as_deref().unwrap_or(body), id());
    }
    let push: GitHubPush = match &payload {
        Some(payload) => from_json(payload, "in the form field `payload`, ")?,
        None => from_json(body, "")?,
    };

    let Some(reference) = branch_or_tag("ref", &push.reference)? else {
        return Ok(ignored(format!(
            "{} is neither a branch nor a tag",
            quote(&push.reference)
        )));
    };
    if push.deleted || is_null_sha(&push.after) {
        return Ok(ignored(format!("{reference} was deleted")));
    }
    // An annotated tag's `after` is the tag object; `head_commit` is the commit.
    let commit = match &push.head_commit {
        Some(head) if reference.starts_with("refs/tags/") => commit_id("head_commit.id", &head.id)?,
        _ => commit_id("after", &push.after)?,
    };
    let repository_urls = repository(&push.repository)?;
    Ok(Received::Push(Delivery {
        provider: Provider::GitHub,
        delivery_id: id(),
        refs: vec![RefMoved {
            repository_urls,
            reference,
            commit,
        }],
    }))
}

/// The URLs of the repository `full_name` names, on the host of its pages
/// (`html_url`'s): the payload's URLs are taken only as spellings of it.
pub(super) fn repository(r: &GitHubRepository) -> Result<Vec<String>, WebhookError> {
    let host = first_host([
        r.html_url.as_deref(),
        r.clone_url.as_deref(),
        r.url.as_deref(),
        r.ssh_url.as_deref(),
        r.git_url.as_deref(),
    ])
    .ok_or_else(|| {
        WebhookError::Malformed("at repository: the repository has no URL".to_owned())
    })?;
    repository_urls(
        "repository.full_name",
        host,
        &r.full_name,
        [
            r.clone_url.as_deref(),
            r.ssh_url.as_deref(),
            r.git_url.as_deref(),
            r.html_url.as_deref(),
            r.url.as_deref(),
        ],
    )
}
