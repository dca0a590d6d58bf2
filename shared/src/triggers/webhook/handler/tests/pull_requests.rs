//! Pull-request deliveries on the fakes: handed to the preview function
//! (a `Pull Request Changed` event), forks kept out by default, nothing
//! handed over when no stack follows the base branch.

use std::sync::Arc;

use super::*;
use crate::fakes::{FixedSecrets, MemoryNotices, RecordingStarter};
use crate::registry::memory::MemoryRegistry;
use crate::registry::sample_entry;
use crate::status::Status;
use crate::triggers::webhook::verify::sign;

const SECRET: &str = "whsec-unit";
const NOW: EpochMillis = 1_800_000_000_000;
/// GitHub's published `pull_request` `opened` (Codertocat/Hello-World#2).
const OPENED: &str =
    include_str!("../../../../../../tests/fixtures/webhook/github-pull-request-opened.json");

fn webhook(
    follows: &str,
    preview_forks: bool,
) -> (
    Webhook<MemoryRegistry, RecordingStarter, FixedSecrets>,
    Arc<MemoryNotices>,
) {
    let registry = MemoryRegistry::new();
    let mut entry = sample_entry("hello", Status::default());
    entry.spec = serde_json::from_value(json!({
        "name": "hello",
        "source": {"git": "https://github.com/Codertocat/Hello-World.git", "ref": follows, "path": "t.yaml"}
    }))
    .unwrap();
    registry.insert(entry);
    let bus = Arc::new(MemoryNotices::default());
    let w = Webhook {
        queue: Default::default(),
        registry,
        starter: RecordingStarter::new(),
        secrets: FixedSecrets(vec![SECRET.into()]),
        registry_sources: Some(Relay {
            bus: crate::ports::Notifier::to(bus.clone()),
            installation: "stacksync".into(),
            preview_forks,
        }),
    };
    (w, bus)
}

fn signed(body: &str) -> (Headers, Vec<u8>) {
    let body = body.as_bytes().to_vec();
    let headers: Headers = [
        ("X-GitHub-Event", "pull_request".to_owned()),
        ("X-GitHub-Delivery", "pr-1".to_owned()),
        ("X-Hub-Signature-256", sign(SECRET.as_bytes(), &body)),
    ]
    .into_iter()
    .collect();
    (headers, body)
}

fn forked() -> String {
    let mut body: Value = serde_json::from_str(OPENED).unwrap();
    body["pull_request"]["head"]["repo"]["full_name"] = "someone/Hello-World".into();
    body.to_string()
}

#[tokio::test]
async fn a_pull_request_into_a_followed_branch_is_handed_to_the_preview() {
    let (w, bus) = webhook("master", false);
    let (headers, body) = signed(OPENED);
    let answer = w.handle(&headers, &body, NOW).await;
    assert_eq!(
        (answer.status, answer.body["result"].as_str()),
        (202, Some("relayed to the preview")),
        "{:?}",
        answer.body
    );
    let notices = bus.all();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].detail_type(), "Pull Request Changed");
    let pr = notices[0].pull_request.as_ref().unwrap();
    assert_eq!(
        (pr.number, pr.head_commit.as_str()),
        (2, "ec26c3e57ca3a959ca5aad62de7213c562f8c821")
    );
    assert!(
        w.starter.started().is_empty(),
        "a pull request starts no run"
    );
}

#[tokio::test]
async fn a_fork_is_not_previewed_unless_the_installation_allows_it() {
    let (w, bus) = webhook("master", false);
    let (headers, body) = signed(&forked());
    let answer = w.handle(&headers, &body, NOW).await;
    assert_eq!(answer.status, 200);
    assert!(
        answer.body["reason"]
            .as_str()
            .unwrap()
            .contains("PreviewForks"),
        "{:?}",
        answer.body
    );
    assert!(bus.all().is_empty());

    let (w, bus) = webhook("master", true);
    let answer = w.handle(&headers, &body, NOW).await;
    assert_eq!(answer.status, 202, "{:?}", answer.body);
    assert!(bus.all()[0].pull_request.as_ref().unwrap().fork);
}

#[tokio::test]
async fn a_pull_request_into_a_branch_nobody_follows_hands_nothing_over() {
    let (w, bus) = webhook("main", false);
    let (headers, body) = signed(OPENED);
    let answer = w.handle(&headers, &body, NOW).await;
    assert_eq!(
        (answer.status, answer.body["result"].as_str()),
        (200, Some("no stack follows this repository and ref"))
    );
    assert!(bus.all().is_empty());
}

/// A secret that may sign only for github.com/acme/infra.
struct AcmeOnly;

impl SecretStore for AcmeOnly {
    async fn get(&self, _fresh: bool) -> Result<(crate::ports::Accepted, bool), String> {
        let accepted = crate::ports::Accepted {
            secrets: vec![SECRET.into()],
            repositories: Some(vec![crate::source::normalize_url(
                "https://github.com/acme/infra.git",
            )]),
        };
        Ok((accepted, false))
    }
}

#[tokio::test]
async fn a_pull_request_of_a_repository_the_secret_does_not_allow_is_refused() {
    let (w, bus) = webhook("master", false);
    let w = Webhook {
        queue: Default::default(),
        registry: w.registry,
        starter: w.starter,
        secrets: AcmeOnly,
        registry_sources: w.registry_sources,
    };
    let (headers, body) = signed(OPENED);
    let answer = w.handle(&headers, &body, NOW).await;
    assert_eq!(answer.status, 403, "{:?}", answer.body);
    assert!(bus.all().is_empty());
}
