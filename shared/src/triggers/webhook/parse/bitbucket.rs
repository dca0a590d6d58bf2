//! Bitbucket Cloud `repo:push` deliveries: one ref per change.

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
struct BitbucketRepository {
    full_name: String,
    #[serde(default)]
    links: Option<BitbucketLinks>,
}

#[derive(Deserialize)]
struct BitbucketLinks {
    #[serde(default)]
    html: Option<Href>,
}

#[derive(Deserialize)]
struct Href {
    href: String,
}

/// Bitbucket Cloud's Git host: the payload names the repository, not its
/// clone URLs.
const BITBUCKET_HOST: &str = "bitbucket.org";

pub(super) fn bitbucket(
    event: &str,
    body: &[u8],
    id: impl Fn() -> String,
) -> Result<Received, WebhookError> {
    if event != "repo:push" {
        return Ok(ignored(format!(
            "Bitbucket event {} is not a push",
            quote(event)
        )));
    }
    let push: BitbucketPush = from_json(body, "")?;
    // The repository is the one `full_name` names, on Bitbucket Cloud; its
    // page's URL is taken only as a spelling of it.
    let html = push
        .repository
        .links
        .as_ref()
        .and_then(|l| l.html.as_ref())
        .map(|h| h.href.as_str());
    let repository_urls = repository_urls(
        "repository.full_name",
        BITBUCKET_HOST,
        &push.repository.full_name,
        [html],
    )?;

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
