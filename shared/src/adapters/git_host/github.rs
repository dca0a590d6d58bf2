//! GitHub's REST API (2022-11-28), the calls made and their shapes:
//! - list a pull request's comments: `GET /repos/{owner}/{repo}/issues/{number}/comments?per_page=100&page=N`
//!   → `[{id, body}]` (a pull request's conversation comments are issue
//!   comments: <https://docs.github.com/en/rest/issues/comments#list-issue-comments>);
//! - create one: `POST /repos/{owner}/{repo}/issues/{number}/comments` `{body}` → 201 `{id}`
//!   (<https://docs.github.com/en/rest/issues/comments#create-an-issue-comment>);
//! - update one: `PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}` `{body}` → 200
//!   (<https://docs.github.com/en/rest/issues/comments#update-an-issue-comment>);
//! - a commit status: `POST /repos/{owner}/{repo}/statuses/{sha}` `{state: pending|success|failure|error,
//!   target_url, description, context}` → 201
//!   (<https://docs.github.com/en/rest/commits/statuses#create-a-commit-status>);
//! - a check run (GitHub Apps only, permission `checks:write`):
//!   `POST /repos/{owner}/{repo}/check-runs` `{name, head_sha, status, conclusion, details_url,
//!   output: {title, summary}}` → 201
//!   (<https://docs.github.com/en/rest/checks/runs#create-a-check-run>). An app without the
//!   permission is answered 403: the status is set instead.

use reqwest::Method;
use serde_json::json;

use super::{Api, Comment, CommentsAt, find_in_pages, repository_path, write_comment};
use crate::ports::{CommitStatus, PortError, PortResult, Posted};
use crate::pull_request::{CommitState, MAX_STATUS_DESCRIPTION, shorten};

const PER_PAGE: usize = 100;
/// A check run's `output.summary` limit (65,535 characters).
const MAX_SUMMARY: usize = 65_000;

pub(super) async fn upsert_comment(
    api: &Api<'_>,
    repository: &str,
    comment: Comment<'_>,
) -> PortResult<Option<Posted>> {
    let repo = repository_path(repository);
    let number = comment.number;
    let found = find(api, &repo, number, comment.marker).await?;
    let edit = |id: &str| (Method::PATCH, format!("/repos/{repo}/issues/comments/{id}"));
    let at = CommentsAt {
        create: format!("/repos/{repo}/issues/{number}/comments"),
        edit: &edit,
        payload: |body| json!({ "body": body }),
    };
    write_comment(api, comment, found, at).await
}

/// The id and body of the first comment that holds `marker`.
async fn find(
    api: &Api<'_>,
    repo: &str,
    number: u64,
    marker: &str,
) -> PortResult<Option<(String, String)>> {
    let page =
        |n: usize| format!("/repos/{repo}/issues/{number}/comments?per_page={PER_PAGE}&page={n}");
    find_in_pages(api, page, PER_PAGE, marker).await
}

pub(super) async fn set_status(
    api: &Api<'_>,
    repository: &str,
    commit: &str,
    status: &CommitStatus,
) -> PortResult<()> {
    let repo = repository_path(repository);
    if api.is_app() {
        match check_run(api, &repo, commit, status).await {
            Err(PortError::Refused(why)) if why.contains("HTTP 403") => {
                tracing::info!(
                    "no check run (the app lacks checks:write): a commit status instead"
                );
            }
            other => return other,
        }
    }
    let state = match status.state {
        CommitState::Pending => "pending",
        CommitState::Success => "success",
        CommitState::Failure => "failure",
    };
    let mut body = json!({
        "state": state,
        "context": status.context,
        "description": shorten(&status.description, MAX_STATUS_DESCRIPTION),
    });
    if let Some(url) = &status.url {
        body["target_url"] = json!(url);
    }
    api.call(
        Method::POST,
        &format!("/repos/{repo}/statuses/{commit}"),
        Some(&body),
    )
    .await
    .map(drop)
}

async fn check_run(
    api: &Api<'_>,
    repo: &str,
    commit: &str,
    status: &CommitStatus,
) -> PortResult<()> {
    let mut body = json!({
        "name": status.context,
        "head_sha": commit,
        "output": {
            "title": shorten(&status.description, 255),
            "summary": shorten(status.summary.as_deref().unwrap_or(&status.description), MAX_SUMMARY),
        },
    });
    match status.state {
        CommitState::Pending => body["status"] = json!("in_progress"),
        CommitState::Success | CommitState::Failure => {
            body["status"] = json!("completed");
            let conclusion = if status.state == CommitState::Success {
                "success"
            } else {
                "failure"
            };
            body["conclusion"] = json!(conclusion);
        }
    }
    if let Some(url) = &status.url {
        body["details_url"] = json!(url);
    }
    api.call(
        Method::POST,
        &format!("/repos/{repo}/check-runs"),
        Some(&body),
    )
    .await
    .map(drop)
}
