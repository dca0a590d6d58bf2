//! Bitbucket Cloud's REST API 2.0, the calls made and their shapes:
//! - list a pull request's comments: `GET /repositories/{workspace}/{repo_slug}/pullrequests/{id}/comments?pagelen=100`
//!   → `{values: [{id, content: {raw}}], next}`
//!   (<https://developer.atlassian.com/cloud/bitbucket/rest/api-group-pullrequests/#api-repositories-workspace-repo-slug-pullrequests-pull-request-id-comments-get>);
//! - create one: `POST …/pullrequests/{id}/comments` `{content: {raw}}` → 201 `{id}`;
//! - update one: `PUT …/pullrequests/{id}/comments/{comment_id}` `{content: {raw}}` → 200;
//! - a commit status: `POST /repositories/{workspace}/{repo_slug}/commit/{commit}/statuses/build`
//!   `{key, state: INPROGRESS|SUCCESSFUL|FAILED|STOPPED, name, url, description}` → 201; `url` is
//!   required (<https://developer.atlassian.com/cloud/bitbucket/rest/api-group-commit-statuses/#api-repositories-workspace-repo-slug-commit-commit-statuses-build-post>).

use reqwest::Method;
use serde_json::{Value, json};

use super::{Api, Comment, CommentsAt, MAX_PAGES, id_of, repository_path, write_comment};
use crate::ports::{CommitStatus, HostRepository, PortError, PortResult, Posted};
use crate::pull_request::CommitState;

pub(super) async fn upsert_comment(
    api: &Api<'_>,
    repository: &str,
    comment: Comment<'_>,
) -> PortResult<Option<Posted>> {
    let comments = format!(
        "/repositories/{}/pullrequests/{}/comments",
        repository_path(repository),
        comment.number
    );
    let found = find(api, &comments, comment.marker).await?;
    let edit = |id: &str| (Method::PUT, format!("{comments}/{id}"));
    let at = CommentsAt {
        create: comments.clone(),
        edit: &edit,
        payload: |body| json!({ "content": { "raw": body } }),
    };
    write_comment(api, comment, found, at).await
}

/// Follows `next` (a full URL on the API's host) page by page.
async fn find(api: &Api<'_>, comments: &str, marker: &str) -> PortResult<Option<(String, String)>> {
    let mut path = format!("{comments}?pagelen=100");
    for _ in 0..MAX_PAGES {
        let page = api.call(Method::GET, &path, None).await?;
        let values = page
            .get("values")
            .and_then(Value::as_array)
            .ok_or_else(|| PortError::Refused(format!("GET {path}: no `values`")))?;
        let found = values.iter().find_map(|c| {
            let body = c.pointer("/content/raw").and_then(Value::as_str)?;
            body.contains(marker).then_some((c, body))
        });
        if let Some((comment, body)) = found {
            return Ok(Some((id_of(comment, &path)?, body.to_owned())));
        }
        // `next` is absolute; only its path and query are followed, on
        // the API the credentials were checked for.
        match page.get("next").and_then(Value::as_str) {
            Some(next) => match next.find(comments) {
                Some(at) => path = next[at..].to_owned(),
                None => break,
            },
            None => break,
        }
    }
    Ok(None)
}

pub(super) async fn set_status(
    api: &Api<'_>,
    repository: &HostRepository,
    commit: &str,
    status: &CommitStatus,
) -> PortResult<()> {
    let state = match status.state {
        CommitState::Pending => "INPROGRESS",
        CommitState::Success => "SUCCESSFUL",
        CommitState::Failure => "FAILED",
    };
    // `key` is the status's identity; kept short and plain.
    let key: String = crate::hash::sha256_hex(status.context.as_bytes())
        .chars()
        .take(32)
        .collect();
    let url = status
        .url
        .clone()
        .unwrap_or_else(|| format!("https://bitbucket.org/{}", repository.repository));
    let body = json!({
        "key": format!("stacksync-{key}"),
        "state": state,
        "name": status.context,
        "url": url,
        "description": crate::pull_request::shorten(&status.description, 255),
    });
    let path = format!(
        "/repositories/{}/commit/{commit}/statuses/build",
        repository_path(&repository.repository)
    );
    api.call(Method::POST, &path, Some(&body)).await.map(drop)
}
