//! Bitbucket Cloud `repo:push` deliveries (one ref per change), and `pullrequest:*`.

use serde::Deserialize;

use super::*;
use crate::triggers::RefMoved;
use crate::triggers::webhook::{Delivery, Provider, Received, WebhookError};

#[derive(Deserialize)]
struct BitbucketPush {
    push: BitbucketChanges,
    repository: BitbucketRepository,
}

#[derive(Deserialize)]
struct BitbucketChanges {
    changes: Vec<BitbucketChange>,
}

#[derive(Deserialize)]
struct BitbucketChange {
    /// Null when the branch or tag was deleted.
    #[serde(default)]
    new: Option<BitbucketRef>,
}

#[derive(Deserialize)]
struct BitbucketRef {
    #[serde(rename = "type")]
    kind: String,
    name: String,
    target: BitbucketTarget,
}

#[derive(Deserialize)]
struct BitbucketTarget {
    hash: String,
}

#[derive(Deserialize)]
pub(super) struct BitbucketRepository {
    full_name: String,
    #[serde(default)]
    links: Option<BitbucketLinks>,
}

#[derive(Deserialize)]
pub(super) struct BitbucketLinks {
    #[serde(default)]
    pub(super) html: Option<Href>,
}

#[derive(Deserialize)]
pub(super) struct Href {
    pub(super) href: String,
}

/// Bitbucket Cloud's Git host: the payload names the repository, not its
/// clone URLs.
const BITBUCKET_HOST: &str = "bitbucket.org";

pub(super) fn bitbucket(
    event: &str,
    body: &[u8],
    id: impl Fn() -> String,
) -> Result<Received, WebhookError> {
    if event.starts_with("pullrequest:") {
        return super::pull_request::bitbucket_pull_request(event, body, id());
    }
    if event != "repo:push" {
        return Ok(ignored(format!(
            "Bitbucket event {} is not a push",
            quote(event)
        )));
    }
    let push: BitbucketPush = from_json(body, "")?;
    let (_, repository_urls) = repository(&push.repository)?;

    let delivery_id = id();
    let mut pushes = Vec::new();
    let mut skipped = Vec::new();
    for (i, change) in push.push.changes.iter().enumerate() {
        let Some(new) = &change.new else {
            skipped.push(format!("change {i} deletes a branch or tag"));
            continue;
        };
        let prefix = match new.kind.as_str() {
            "branch" => "refs/heads/",
            "tag" => "refs/tags/",
            other => {
                skipped.push(format!("change {i} moves a {}", quote(other)));
                continue;
            }
        };
        let path = format!("push.changes[{i}].new");
        let Some(reference) =
            branch_or_tag(&format!("{path}.name"), &format!("{prefix}{}", new.name))?
        else {
            skipped.push(format!("change {i} has an empty name"));
            continue;
        };
        pushes.push(RefMoved {
            repository_urls: repository_urls.clone(),
            reference,
            commit: commit_id(&format!("{path}.target.hash"), &new.target.hash)?,
        });
    }
    if pushes.is_empty() {
        let reason = if skipped.is_empty() {
            "a push without changes".to_owned()
        } else {
            skipped.join("; ")
        };
        return Ok(ignored(reason));
    }
    Ok(Received::Push(Delivery {
        provider: Provider::Bitbucket,
        delivery_id,
        refs: pushes,
    }))
}

/// The repository `full_name` names, on Bitbucket Cloud, and its URLs: its
/// page's URL is taken only as a spelling of it.
pub(super) fn repository(
    repository: &BitbucketRepository,
) -> Result<(String, Vec<String>), WebhookError> {
    let html = repository
        .links
        .as_ref()
        .and_then(|l| l.html.as_ref())
        .map(|h| h.href.as_str());
    let urls = repository_urls(
        "repository.full_name",
        BITBUCKET_HOST,
        &repository.full_name,
        [html],
    )?;
    Ok((repository.full_name.trim().to_owned(), urls))
}
