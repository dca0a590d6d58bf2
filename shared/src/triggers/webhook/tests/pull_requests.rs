//! Pull-request events, from the payloads the hosts published
//! (tests/fixtures/webhook/README.md), byte for byte: read as the preview
//! function needs them.

use super::*;
use crate::pull_request::{Host, PrState, PullRequest};

fn published_pr(name: &str) -> &'static str {
    match name {
        "github-opened" => {
            include_str!("../../../../../tests/fixtures/webhook/github-pull-request-opened.json")
        }
        "github-synchronize" => include_str!(
            "../../../../../tests/fixtures/webhook/github-pull-request-synchronize.json"
        ),
        "github-closed" => include_str!(
            "../../../../../tests/fixtures/webhook/github-pull-request-closed-unmerged.json"
        ),
        "gitlab" => include_str!("../../../../../tests/fixtures/webhook/gitlab-merge-request.json"),
        "bitbucket-created" => {
            include_str!("../../../../../tests/fixtures/webhook/bitbucket-pullrequest-created.json")
        }
        "bitbucket-fork" => include_str!(
            "../../../../../tests/fixtures/webhook/bitbucket-pullrequest-created-fork.json"
        ),
        "bitbucket-fulfilled" => include_str!(
            "../../../../../tests/fixtures/webhook/bitbucket-pullrequest-fulfilled.json"
        ),
        "bitbucket-rejected" => include_str!(
            "../../../../../tests/fixtures/webhook/bitbucket-pullrequest-rejected.json"
        ),
        other => panic!("no published payload {other}"),
    }
}

/// The pull request `body` is read as, with the headers each host sends.
fn read(provider: Provider, event: &str, body: &str) -> Result<Received, WebhookError> {
    let mut headers = Headers::new();
    headers.insert(provider.event_header(), event);
    if provider == Provider::Bitbucket {
        headers.insert("X-Request-UUID", "d-1");
    }
    parse::parse(provider, &headers, body.as_bytes())
}

fn pull_request(received: Received) -> PullRequest {
    match received {
        Received::PullRequest(d) => d.pull_request,
        other => panic!("expected a pull request, got {other:?}"),
    }
}

#[test]
fn github_pull_requests_opened_and_synchronized_are_open_at_their_head() {
    for name in ["github-opened", "github-synchronize"] {
        let pr = pull_request(read(Provider::GitHub, "pull_request", published_pr(name)).unwrap());
        assert_eq!(pr.host, Host::GitHub);
        assert_eq!(pr.repository, "Codertocat/Hello-World");
        assert!(
            pr.repository_urls
                .contains(&"https://github.com/Codertocat/Hello-World.git".to_owned()),
            "{:?}",
            pr.repository_urls
        );
        assert_eq!(pr.number, 2);
        assert_eq!(pr.base_ref, "refs/heads/master");
        assert_eq!(pr.head_ref, "refs/heads/changes");
        assert_eq!(pr.head_commit, "ec26c3e57ca3a959ca5aad62de7213c562f8c821");
        assert_eq!(pr.state, PrState::Open);
        assert!(!pr.fork);
        assert_eq!(
            pr.url.as_deref(),
            Some("https://github.com/Codertocat/Hello-World/pull/2")
        );
    }
}

/// GitHub's closed payload carries a `merge_commit_sha` though it was not
/// merged: `merged` says, never the sha.
#[test]
fn a_github_pull_request_closed_unmerged_is_closed_and_merged_is_read_from_merged() {
    let body = published_pr("github-closed");
    let pr = pull_request(read(Provider::GitHub, "pull_request", body).unwrap());
    assert_eq!((pr.state, pr.merge_commit), (PrState::Closed, None));

    // No published example of a merge: this one, `merged` set.
    let mut merged: serde_json::Value = serde_json::from_str(body).unwrap();
    merged["pull_request"]["merged"] = true.into();
    let pr = pull_request(read(Provider::GitHub, "pull_request", &merged.to_string()).unwrap());
    assert_eq!(pr.state, PrState::Merged);
    assert_eq!(pr.merge_commit.as_deref().map(str::len), Some(40));

    // A head in another repository (or one deleted) is a fork.
    merged["pull_request"]["head"]["repo"] = serde_json::Value::Null;
    let pr = pull_request(read(Provider::GitHub, "pull_request", &merged.to_string()).unwrap());
    assert!(pr.fork);
}

#[test]
fn other_github_pull_request_actions_are_ignored_and_bad_ones_said_where() {
    let mut labeled: serde_json::Value =
        serde_json::from_str(published_pr("github-opened")).unwrap();
    labeled["action"] = "labeled".into();
    let r = read(Provider::GitHub, "pull_request", &labeled.to_string()).unwrap();
    assert!(
        matches!(&r, Received::Ignored { reason } if reason.contains("\"labeled\"")),
        "{r:?}"
    );

    let mut broken = labeled.clone();
    broken["action"] = "opened".into();
    broken["pull_request"]["head"]["sha"] = "xyz".into();
    let e = read(Provider::GitHub, "pull_request", &broken.to_string()).unwrap_err();
    assert!(e.to_string().contains("at pull_request.head.sha"), "{e}");
    broken["pull_request"]["head"] = serde_json::Value::Null;
    let e = read(Provider::GitHub, "pull_request", &broken.to_string()).unwrap_err();
    assert!(e.to_string().contains("pull_request.head"), "{e}");
}

#[test]
fn a_gitlab_merge_request_is_read_with_its_iid_and_last_commit() {
    let pr = pull_request(
        read(
            Provider::GitLab,
            "Merge Request Hook",
            published_pr("gitlab"),
        )
        .unwrap(),
    );
    assert_eq!(pr.host, Host::GitLab);
    assert_eq!(pr.repository, "gitlabhq/gitlab-test");
    assert_eq!(pr.number, 1);
    assert_eq!(pr.base_ref, "refs/heads/master");
    assert_eq!(pr.head_ref, "refs/heads/ms-viewport");
    assert_eq!(pr.head_commit, "da1560886d4f094c3e6c9ef40349f7d38b5d27d7");
    assert_eq!(pr.state, PrState::Open);
    assert!(!pr.fork);

    // An update that pushed no commit (no `oldrev`) changes nothing to preview.
    let mut update: serde_json::Value = serde_json::from_str(published_pr("gitlab")).unwrap();
    update["object_attributes"]["action"] = "update".into();
    let r = read(Provider::GitLab, "Merge Request Hook", &update.to_string()).unwrap();
    assert!(
        matches!(&r, Received::Ignored { reason } if reason.contains("oldrev")),
        "{r:?}"
    );
    update["object_attributes"]["oldrev"] = "0".repeat(40).into();
    let pr =
        pull_request(read(Provider::GitLab, "Merge Request Hook", &update.to_string()).unwrap());
    assert_eq!(pr.state, PrState::Open);
}

#[test]
fn bitbucket_pull_requests_keep_their_short_commits_and_tell_forks() {
    let pr = pull_request(
        read(
            Provider::Bitbucket,
            "pullrequest:created",
            published_pr("bitbucket-created"),
        )
        .unwrap(),
    );
    assert_eq!(pr.host, Host::Bitbucket);
    assert_eq!(pr.repository, "amuniz/test-repos");
    assert_eq!(pr.number, 735);
    assert_eq!(pr.head_commit, "d31df3425c5b", "Bitbucket sends 12 digits");
    assert_eq!(pr.head_ref, "refs/heads/feature/test");
    assert_eq!(pr.base_ref, "refs/heads/master");
    assert!(!pr.fork);

    let fork = pull_request(
        read(
            Provider::Bitbucket,
            "pullrequest:created",
            published_pr("bitbucket-fork"),
        )
        .unwrap(),
    );
    assert!(fork.fork, "stephenc/temp-fork into cloudbeers/temp");
    assert_eq!(fork.repository, "cloudbeers/temp");

    let merged = pull_request(
        read(
            Provider::Bitbucket,
            "pullrequest:fulfilled",
            published_pr("bitbucket-fulfilled"),
        )
        .unwrap(),
    );
    assert_eq!(merged.state, PrState::Merged);
    assert_eq!(merged.merge_commit.as_deref(), Some("1986c2284946"));

    let declined = pull_request(
        read(
            Provider::Bitbucket,
            "pullrequest:rejected",
            published_pr("bitbucket-rejected"),
        )
        .unwrap(),
    );
    assert_eq!(declined.state, PrState::Closed);

    let comment = read(
        Provider::Bitbucket,
        "pullrequest:comment_created",
        published_pr("bitbucket-created"),
    )
    .unwrap();
    assert!(matches!(comment, Received::Ignored { .. }), "{comment:?}");
}
