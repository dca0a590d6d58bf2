//! The review on the fakes: which stacks, one comment updated in place,
//! the head's status, a head that moved, a host that is down.

use std::time::Duration;

use super::*;
use crate::fakes::{
    MemoryBlobs, MemoryGitHost, MemorySources, ScriptedCloudFormation, TEST_INSTALLATION,
};
use crate::pull_request::{Host, PrState, PullRequest};
use crate::registry::memory::MemoryRegistry;
use crate::stack_status::StackStatus as S;

const URL: &str = "https://git.example/acme/infra.git";
const BASE: &str = "1111111111111111111111111111111111111111";
const HEAD: &str = "2222222222222222222222222222222222222222";
const NEWER: &str = "3333333333333333333333333333333333333333";
const QUEUE: &[u8] = b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";
const QUEUE_2: &[u8] =
    b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      DelaySeconds: 5\n";
const QUEUE_3: &[u8] =
    b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      DelaySeconds: 9\n";
const TOPIC: &[u8] = b"Resources:\n  Topic:\n    Type: AWS::SNS::Topic\n";

fn entry(name: &str, path: &str) -> crate::registry::StackEntry {
    let mut e = crate::registry::sample_entry(name, Default::default());
    e.spec = serde_json::from_value(serde_json::json!({
        "name": name,
        "source": {"git": URL, "path": path, "credentialsSecret": "arn:aws:secretsmanager:us-east-1:111111111111:secret:git"}
    }))
    .unwrap();
    e
}

fn pr(head: &str) -> PullRequest {
    PullRequest {
        host: Host::GitHub,
        repository: "acme/infra".into(),
        repository_urls: vec![URL.into()],
        number: 7,
        base_ref: "refs/heads/main".into(),
        head_ref: "refs/heads/feature".into(),
        head_commit: head.into(),
        fork: false,
        state: PrState::Open,
        merge_commit: None,
        url: Some("https://git.example/acme/infra/pull/7".into()),
    }
}

struct World {
    reviewer: Reviewer<
        MemoryRegistry,
        MemorySources,
        ScriptedCloudFormation,
        MemoryBlobs,
        std::sync::Arc<MemoryGitHost>,
    >,
    host: std::sync::Arc<MemoryGitHost>,
}

/// Two stacks on `main`: orders (orders.yaml) and alerts (alerts.yaml);
/// the pull request's head changes `head_orders` into orders.yaml.
fn world(head_orders: &[u8]) -> World {
    let sources = MemorySources::new();
    let base_files: &[(&str, &[u8])] = &[("orders.yaml", QUEUE), ("alerts.yaml", TOPIC)];
    sources.commit(URL, "refs/heads/main", BASE, base_files);
    sources.commit(
        URL,
        "refs/pull/7/head",
        HEAD,
        &[("orders.yaml", head_orders), ("alerts.yaml", TOPIC)],
    );
    let registry = MemoryRegistry::new();
    registry.insert(entry("orders", "orders.yaml"));
    registry.insert(entry("alerts", "alerts.yaml"));
    let cfn = ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]);
    cfn.script().changes = vec![crate::fakes::queue_change("Modify", Some("False"))];
    let host = std::sync::Arc::new(MemoryGitHost::new());
    World {
        reviewer: Reviewer {
            registry,
            sources,
            cloudformation: cfn,
            blobs: MemoryBlobs::default(),
            hosts: host.clone(),
            config: ReviewConfig {
                installation: TEST_INSTALLATION.into(),
                template_url_base: "https://b.s3.amazonaws.com".into(),
                bucket: "b".into(),
                waiting: Waiting {
                    poll: Duration::from_millis(1),
                    deadline: Duration::from_secs(5),
                },
                per_account: 4,
                rules: None,
            },
            stacks_files: None,
        },
        host,
    }
}

#[tokio::test]
async fn a_pull_request_that_changes_one_template_previews_that_stack_only() {
    let w = world(QUEUE_2);
    let reviewed = w.reviewer.review(&pr(HEAD)).await.unwrap();
    let Reviewed::Posted {
        stacks,
        comment,
        status,
    } = reviewed
    else {
        panic!("{reviewed:?}")
    };
    assert_eq!(stacks, vec![("orders".to_owned(), "update")]);
    assert!(comment.unwrap().unwrap().created);
    status.unwrap();
    let comments = w.host.comments("acme/infra", 7);
    assert_eq!(comments.len(), 1);
    let body = &comments[0].1;
    assert!(body.contains(&comment::marker(TEST_INSTALLATION)), "{body}");
    assert!(
        body.contains("| `orders` | update |") && !body.contains("`alerts`"),
        "{body}"
    );
    assert!(
        body.contains("| Modify | `Queue` | `AWS::SQS::Queue` | False |"),
        "{body}"
    );
    let statuses = w.host.statuses("acme/infra", HEAD);
    assert_eq!(statuses.len(), 1);
    assert_eq!(statuses[0].state, CommitState::Success);
    assert_eq!(
        statuses[0].context,
        format!("stacksync/preview ({TEST_INSTALLATION})")
    );
    // Never executed: made, described, deleted.
    let ops = w.reviewer.cloudformation.operations();
    assert!(!ops.iter().any(|o| o == "ExecuteChangeSet"), "{ops:?}");
    assert!(ops.iter().any(|o| o == "DeleteChangeSet"), "{ops:?}");
}

#[tokio::test]
async fn a_second_push_updates_the_same_comment() {
    let w = world(QUEUE_2);
    w.reviewer.review(&pr(HEAD)).await.unwrap();
    w.reviewer.sources.commit(
        URL,
        "refs/pull/7/head",
        NEWER,
        &[("orders.yaml", QUEUE_3), ("alerts.yaml", TOPIC)],
    );
    // The scripted change set answers once per script: set it again.
    w.reviewer.cloudformation.script().change_set =
        [crate::fakes::pending(), crate::fakes::ready()]
            .into_iter()
            .collect();
    let reviewed = w.reviewer.review(&pr(NEWER)).await.unwrap();
    let Reviewed::Posted {
        stacks, comment, ..
    } = reviewed
    else {
        panic!("{reviewed:?}")
    };
    assert_eq!(stacks, vec![("orders".to_owned(), "update")]);
    assert!(!comment.unwrap().unwrap().created);
    let comments = w.host.comments("acme/infra", 7);
    assert_eq!(comments.len(), 1, "one comment, updated in place");
    assert!(comments[0].1.contains("`orders`") && comments[0].1.contains("3333333333"));
}

#[tokio::test]
async fn a_head_that_moved_on_posts_nothing() {
    let w = world(QUEUE_2);
    // The event says HEAD; the repository already has NEWER.
    w.reviewer
        .sources
        .commit(URL, "refs/pull/7/head", NEWER, &[("orders.yaml", QUEUE_2)]);
    let reviewed = w.reviewer.review(&pr(HEAD)).await.unwrap();
    assert_eq!(reviewed, Reviewed::Superseded { head: HEAD.into() });
    assert!(w.host.calls().is_empty());
}

#[tokio::test]
async fn a_template_the_head_lacks_fails_the_status_naming_the_stack() {
    let sources_world = world(QUEUE_2);
    sources_world
        .reviewer
        .sources
        .commit(URL, "refs/pull/7/head", HEAD, &[("alerts.yaml", TOPIC)]);
    let reviewed = sources_world.reviewer.review(&pr(HEAD)).await.unwrap();
    let Reviewed::Posted { stacks, .. } = reviewed else {
        panic!("{reviewed:?}")
    };
    assert_eq!(stacks, vec![("orders".to_owned(), "failed")]);
    let status = &sources_world.host.statuses("acme/infra", HEAD)[0];
    assert_eq!(status.state, CommitState::Failure);
    assert!(status.description.contains("orders"), "{status:?}");
    let body = &sources_world.host.comments("acme/infra", 7)[0].1;
    assert!(
        body.contains("The preview failed") && body.contains("orders.yaml"),
        "{body}"
    );
}

#[tokio::test]
async fn a_host_that_is_down_is_said_not_raised() {
    let w = world(QUEUE_2);
    w.host.fail(true);
    let reviewed = w.reviewer.review(&pr(HEAD)).await.unwrap();
    let Reviewed::Posted {
        comment, status, ..
    } = reviewed
    else {
        panic!("{reviewed:?}")
    };
    assert!(comment.unwrap_err().contains("502"));
    assert!(status.is_err());
}

#[tokio::test]
async fn a_pull_request_that_touches_nothing_gets_no_comment_unless_one_is_there_to_correct() {
    let w = world(QUEUE);
    let reviewed = w.reviewer.review(&pr(HEAD)).await.unwrap();
    let Reviewed::Posted {
        stacks,
        comment,
        status,
    } = reviewed
    else {
        panic!("{reviewed:?}")
    };
    assert!(stacks.is_empty());
    assert_eq!(
        comment,
        Ok(None),
        "no comment on a pull request that touches no stack"
    );
    status.unwrap();
    assert!(w.host.comments("acme/infra", 7).is_empty());
    assert_eq!(w.reviewer.cloudformation.operations(), Vec::<String>::new());

    // A push that touches a stack, then one that takes the change back:
    // the comment says so.
    w.reviewer.sources.commit(
        URL,
        "refs/pull/7/head",
        NEWER,
        &[("orders.yaml", QUEUE_2), ("alerts.yaml", TOPIC)],
    );
    w.reviewer.review(&pr(NEWER)).await.unwrap();
    let back = "4444444444444444444444444444444444444444";
    w.reviewer.sources.commit(
        URL,
        "refs/pull/7/head",
        back,
        &[("orders.yaml", QUEUE), ("alerts.yaml", TOPIC)],
    );
    w.reviewer.review(&pr(back)).await.unwrap();
    let comments = w.host.comments("acme/infra", 7);
    assert_eq!(comments.len(), 1);
    assert!(
        comments[0].1.contains("no stack changes"),
        "{}",
        comments[0].1
    );

    let mut closed = pr(HEAD);
    closed.state = PrState::Closed;
    assert_eq!(w.reviewer.review(&closed).await.unwrap(), Reviewed::NotOpen);
}

/// `approval: pullRequest`: the preview is recorded on the entry, and the
/// merge marks it, only if the pull request merged the head previewed.
#[tokio::test]
async fn a_bound_entrys_preview_is_recorded_and_its_merge_marks_it() {
    use crate::registry::Entries;
    let w = world(QUEUE_2);
    let mut bound = entry("orders", "orders.yaml");
    bound.spec.approval = crate::spec::Approval::PullRequest;
    w.reviewer.registry.insert(bound);
    w.reviewer.review(&pr(HEAD)).await.unwrap();
    let reviewed = w
        .reviewer
        .registry
        .get("orders")
        .await
        .unwrap()
        .unwrap()
        .reviewed
        .unwrap();
    assert_eq!(reviewed.pull_request, "github acme/infra#7");
    assert_eq!((reviewed.head.as_str(), reviewed.merged), (HEAD, false));
    assert_eq!(
        reviewed.rows_hash,
        crate::pull_request::rows_hash(&[crate::fakes::queue_change("Modify", Some("False"))])
    );
    assert_eq!(reviewed.desired_hash.len(), 64);
    let body = &w.host.comments("acme/infra", 7)[0].1;
    assert!(body.contains("`approval: pullRequest`"), "{body}");

    // Merged at another head (a push after the last preview): not marked.
    let mut merged = pr(NEWER);
    merged.state = PrState::Merged;
    assert_eq!(
        w.reviewer.review(&merged).await.unwrap(),
        Reviewed::Merged { marked: vec![] }
    );
    merged.head_commit = HEAD.into();
    assert_eq!(
        w.reviewer.review(&merged).await.unwrap(),
        Reviewed::Merged {
            marked: vec!["orders".into()]
        }
    );
    assert!(
        w.reviewer
            .registry
            .get("orders")
            .await
            .unwrap()
            .unwrap()
            .reviewed
            .unwrap()
            .merged
    );
    // The unbound entry records nothing.
    assert!(
        w.reviewer
            .registry
            .get("alerts")
            .await
            .unwrap()
            .unwrap()
            .reviewed
            .is_none()
    );
}
