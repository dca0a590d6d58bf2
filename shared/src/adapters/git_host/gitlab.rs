//! GitLab's REST API v4, the calls made and their shapes (a project is
//! named by its URL-encoded path, `group%2Fproject`:
//! <https://docs.gitlab.com/api/rest/#namespaced-paths>):
//! - list a merge request's notes: `GET /projects/:id/merge_requests/:iid/notes?per_page=100&page=N&sort=asc&order_by=created_at`
//!   → `[{id, body}]` (<https://docs.gitlab.com/api/notes/#list-all-merge-request-notes>);
//! - create one: `POST /projects/:id/merge_requests/:iid/notes` `{body}` → 201 `{id}`
//!   (<https://docs.gitlab.com/api/notes/#create-new-merge-request-note>);
//! - update one: `PUT /projects/:id/merge_requests/:iid/notes/:note_id` `{body}` → 200
//!   (<https://docs.gitlab.com/api/notes/#modify-existing-merge-request-note>);
//! - a commit status: `POST /projects/:id/statuses/:sha` `{state: pending|running|success|failed|canceled,
//!   name, target_url, description}` → 201
//!   (<https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit>).

use reqwest::Method;
use serde_json::json;

use super::{Api, Comment, CommentsAt, encode_segment, find_in_pages, write_comment};
use crate::ports::{CommitStatus, PortResult, Posted};
use crate::pull_request::CommitState;

const PER_PAGE: usize = 100;

pub(super) async fn upsert_comment(
    api: &Api<'_>,
    repository: &str,
    comment: Comment<'_>,
) -> PortResult<Option<Posted>> {
    let project = encode_segment(repository);
    let notes = format!(
        "/projects/{project}/merge_requests/{}/notes",
        comment.number
    );
    let found = find(api, &notes, comment.marker).await?;
    let edit = |id: &str| (Method::PUT, format!("{notes}/{id}"));
    let at = CommentsAt {
        create: notes.clone(),
        edit: &edit,
        payload: |body| json!({ "body": body }),
    };
    write_comment(api, comment, found, at).await
}

/// The id and body of the first note that holds `marker`.
async fn find(api: &Api<'_>, notes: &str, marker: &str) -> PortResult<Option<(String, String)>> {
    let page =
        |n: usize| format!("{notes}?per_page={PER_PAGE}&page={n}&sort=asc&order_by=created_at");
    find_in_pages(api, page, PER_PAGE, marker).await
}

pub(super) async fn set_status(
    api: &Api<'_>,
    repository: &str,
    commit: &str,
    status: &CommitStatus,
) -> PortResult<()> {
    let state = match status.state {
        CommitState::Pending => "pending",
        CommitState::Success => "success",
        CommitState::Failure => "failed",
    };
    let mut body = json!({
        "state": state,
        "name": status.context,
        "description": crate::pull_request::shorten(&status.description, 255),
    });
    if let Some(url) = &status.url {
        body["target_url"] = json!(url);
    }
    let path = format!("/projects/{}/statuses/{commit}", encode_segment(repository));
    api.call(Method::POST, &path, Some(&body)).await.map(drop)
}
