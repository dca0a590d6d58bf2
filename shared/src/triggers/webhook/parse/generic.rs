//! The generic `X-Stacksync-Event` deliveries: `{repository, ref, after}`.

use serde::Deserialize;

use super::*;
use crate::triggers::RefMoved;
use crate::triggers::webhook::{Delivery, Provider, Received, WebhookError};

#[derive(Deserialize)]
struct GenericPush {
    repository: String,
    #[serde(rename = "ref")]
    reference: String,
    after: String,
}

pub(super) fn generic(
    event: &str,
    body: &[u8],
    id: impl Fn() -> String,
) -> Result<Received, WebhookError> {
    if let Some(answer) = not_a_push(event, "generic") {
        return Ok(answer);
    }
    let push: GenericPush = from_json(body, "")?;
    let reference = branch_or_tag("ref", &push.reference)?.ok_or_else(|| {
        WebhookError::Malformed(format!(
            "at ref: expected refs/heads/<branch> or refs/tags/<tag>, got {}",
            quote(&push.reference)
        ))
    })?;
    if is_null_sha(&push.after) {
        return Ok(ignored(format!("{reference} was deleted")));
    }
    let commit = commit_id("after", &push.after)?;
    let repository_urls = require_urls("repository", urls([Some(push.repository.as_str())]))?;
    Ok(Received::Push(Delivery {
        provider: Provider::Generic,
        delivery_id: id(),
        refs: vec![RefMoved {
            repository_urls,
            reference,
            commit,
        }],
    }))
}
