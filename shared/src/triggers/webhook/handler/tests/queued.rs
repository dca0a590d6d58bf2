//! Deliveries through the queue, on the fakes: answered at once with
//! nothing started, started by the consumer, each once.

use std::sync::Arc;

use super::*;
use crate::fakes::{FixedSecrets, MemoryNotices, MemoryQueue, RecordingStarter};
use crate::ports::DeliveryQueue;
use crate::registry::memory::MemoryRegistry;
use crate::registry::sample_entry;
use crate::status::Status;
use crate::triggers::webhook::verify::sign;

const SECRET: &str = "whsec-unit";
const NOW: EpochMillis = 1_800_000_000_000;

fn queued(
    followers: usize,
) -> (
    Webhook<MemoryRegistry, RecordingStarter, FixedSecrets>,
    Arc<MemoryQueue>,
) {
    let registry = MemoryRegistry::new();
    for i in 0..followers {
        registry.insert(sample_entry(&format!("s{i:05}"), Status::default()));
    }
    let queue = Arc::new(MemoryQueue::default());
    let w = Webhook {
        queue: DeliveryQueue::to(queue.clone()),
        registry,
        starter: RecordingStarter::new(),
        secrets: FixedSecrets(vec![SECRET.into()]),
        registry_sources: None,
    };
    (w, queue)
}

fn push(id: &str, commit: char) -> (Headers, Vec<u8>) {
    let body = json!({"repository": "https://git.example/infra.git", "ref": "refs/heads/main", "after": commit.to_string().repeat(40)})
        .to_string()
        .into_bytes();
    let headers: Headers = [
        ("X-Stacksync-Event", "push".to_owned()),
        ("X-Stacksync-Delivery", id.to_owned()),
        ("X-Stacksync-Signature-256", sign(SECRET.as_bytes(), &body)),
    ]
    .into_iter()
    .collect();
    (headers, body)
}

#[tokio::test]
async fn five_thousand_followers_are_queued_at_once_then_each_started_once() {
    let (w, queue) = queued(5_000);
    let (headers, body) = push("d-1", 'a');
    let answer = w.handle(&headers, &body, NOW).await;
    assert_eq!(
        (answer.status, answer.body["result"].as_str()),
        (202, Some("queued")),
        "{:?}",
        answer.body
    );
    assert!(
        w.starter.started().is_empty(),
        "nothing started before the answer"
    );
    let messages = queue.take();
    assert_eq!(messages.len(), 1);

    // The consumer starts every follower (past the 1,000 a trigger that
    // answers starts), once.
    let first = w.consume(&messages[0], NOW).await.unwrap();
    assert!(
        matches!(
            first,
            Answer::Started {
                started: 5_000,
                skipped: 0,
                ..
            }
        ),
        "{first:?}"
    );
    assert_eq!(w.starter.started().len(), 5_000);
    // SQS delivers a message at least once: again, nothing new.
    let again = w.consume(&messages[0], NOW).await.unwrap();
    assert!(
        matches!(
            again,
            Answer::NothingNew {
                started: 0,
                skipped: 5_000,
                ..
            }
        ),
        "{again:?}"
    );
    assert_eq!(w.starter.started().len(), 5_000);

    // The sender delivers it again: a duplicate (queued once more, which
    // starts nothing new either).
    let replay = w.handle(&headers, &body, NOW).await;
    assert_eq!(replay.body["result"], "duplicate", "{:?}", replay.body);
    for message in queue.take() {
        w.consume(&message, NOW).await.unwrap();
    }
    assert_eq!(w.starter.started().len(), 5_000);
}

#[tokio::test]
async fn a_queued_pull_request_is_handed_to_the_preview_function_by_the_consumer() {
    let (mut w, queue) = queued(0);
    let mut entry = sample_entry("web", Status::default());
    entry.spec.source = serde_json::from_value(
        json!({"git": "https://git.example/acme/infra.git", "path": "t.yaml"}),
    )
    .unwrap();
    w.registry.insert(entry);
    let notices = Arc::new(MemoryNotices::default());
    w.registry_sources = Some(Relay {
        bus: crate::ports::Notifier::to(notices.clone()),
        installation: "registry".into(),
        preview_forks: false,
    });
    let body = json!({
        "action": "opened", "number": 7,
        "pull_request": {
            "number": 7, "state": "open", "title": "t", "html_url": "https://git.example/infra/pull/7",
            "head": {"sha": "b".repeat(40), "ref": "feature", "repo": {"full_name": "acme/infra", "clone_url": "https://git.example/infra.git"}},
            "base": {"sha": "c".repeat(40), "ref": "main", "repo": {"full_name": "acme/infra", "clone_url": "https://git.example/infra.git"}},
            "user": {"login": "dev"}
        },
        "repository": {"full_name": "acme/infra", "clone_url": "https://git.example/infra.git"}
    })
    .to_string()
    .into_bytes();
    let headers: Headers = [
        ("X-GitHub-Event", "pull_request".to_owned()),
        ("X-GitHub-Delivery", "pr-1".to_owned()),
        ("X-Hub-Signature-256", sign(SECRET.as_bytes(), &body)),
    ]
    .into_iter()
    .collect();
    let answer = w.handle(&headers, &body, NOW).await;
    assert_eq!(answer.body["result"], "queued", "{:?}", answer.body);
    assert!(
        notices.kinds().is_empty(),
        "nothing relayed before the answer"
    );
    let messages = queue.take();
    let handed = w.consume(&messages[0], NOW).await.unwrap();
    assert!(matches!(handed, Answer::Previewing { .. }), "{handed:?}");
    assert_eq!(notices.kinds(), ["Pull Request Changed"]);
}

#[tokio::test]
async fn a_message_that_is_no_queued_delivery_is_an_error_to_keep() {
    let (w, _) = queued(1);
    let err = w.consume("{\"kind\": \"push\"}", NOW).await.unwrap_err();
    assert!(matches!(err, ConsumeError::Malformed(_)), "{err}");
    assert!(err.to_string().contains("missing field"), "{err}");
}
