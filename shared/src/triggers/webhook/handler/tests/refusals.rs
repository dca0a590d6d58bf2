//! On the fakes, with the hosts' published payloads: what one delivery may
//! start, what a refusal says and logs, and what a copy counts.

use super::capture::capture;
use super::*;
use crate::fakes::{FixedSecrets, RecordingStarter};
use crate::ports::{Accepted, PortResult, SecretStore, Started, Starter, Trigger};
use crate::registry::memory::MemoryRegistry;
use crate::registry::sample_entry;
use crate::status::Status;
use crate::triggers::webhook::MAX_BODY_BYTES;
use crate::triggers::webhook::verify::sign;

const SECRET: &str = "whsec-unit-refusals";
const NOW: EpochMillis = 1_800_000_000_000;
/// octokit/webhooks' push of a new branch (refs/heads/master of
/// Codertocat/Hello-World): tests/fixtures/webhook/README.md.
const GITHUB_PUSH: &str =
    include_str!("../../../../../../tests/fixtures/webhook/github-push-branch.json");
/// A Bitbucket Cloud push of feature/webhook to nfalco79/test-repos.
const BITBUCKET_PUSH: &str =
    include_str!("../../../../../../tests/fixtures/webhook/bitbucket-push-signed.json");
/// The answer to a delivery that is not signed by an accepted secret.
const NOT_SIGNED: &str = "the delivery's signature or token is missing or does not match";

/// A stack that follows `url` at `branch`.
fn following(name: &str, url: &str, branch: &str) -> crate::registry::StackEntry {
    let mut entry = sample_entry(name, Status::default());
    entry.spec = serde_json::from_value(json!({
        "name": name,
        "source": {"git": url, "ref": branch, "path": "t.yaml"}
    }))
    .unwrap();
    entry
}

fn github(id: &str, body: &[u8]) -> Headers {
    [
        ("X-GitHub-Event", "push".to_owned()),
        ("X-GitHub-Delivery", id.to_owned()),
        ("Content-Type", "application/json".to_owned()),
        ("X-Hub-Signature-256", sign(SECRET.as_bytes(), body)),
    ]
    .into_iter()
    .collect()
}

fn bitbucket(id: &str, body: &[u8]) -> Headers {
    [
        ("X-Event-Key", "repo:push".to_owned()),
        (
            "X-Hook-UUID",
            "0e1f5ac4-0b43-4bc4-9d2b-1d0a4e6f8d2a".to_owned(),
        ),
        ("X-Request-UUID", id.to_owned()),
        ("X-Hub-Signature", sign(SECRET.as_bytes(), body)),
    ]
    .into_iter()
    .collect()
}

/// A secret that may sign only for `repositories`; or, with none, one
/// that cannot be read at all.
struct Secret(Option<Vec<&'static str>>);

impl SecretStore for Secret {
    async fn get(&self, _fresh: bool) -> Result<(Accepted, bool), String> {
        let allowed = self.0.as_ref().ok_or_else(|| {
            "ResourceNotFoundException: Secrets Manager can't find the specified secret".to_owned()
        })?;
        let accepted = Accepted {
            secrets: vec![SECRET.into()],
            repositories: Some(
                allowed
                    .iter()
                    .map(|u| crate::source::normalize_url(u))
                    .collect(),
            ),
        };
        Ok((accepted, false))
    }
}

/// What is sent, and what the refusal's line says: (case, headers, body,
/// status, sender, delivery).
type Case<'a> = (&'a str, Headers, &'a [u8], u16, &'a str, &'a str);

fn counts(answer: &Response) -> (u64, u64) {
    (
        answer.body["started"].as_u64().unwrap_or(0),
        answer.body["skipped"].as_u64().unwrap_or(0),
    )
}

// ------------------------------------------- one delivery, one repository

#[tokio::test]
async fn a_limited_secret_starts_no_other_repository_named_in_another_github_url() {
    let registry = MemoryRegistry::new();
    registry.insert(following(
        "hello",
        "https://github.com/Codertocat/Hello-World.git",
        "master",
    ));
    registry.insert(following(
        "private",
        "https://github.com/acme/private-infra.git",
        "master",
    ));
    let w = Webhook {
        queue: Default::default(),
        registry,
        starter: RecordingStarter::new(),
        secrets: Secret(Some(vec!["https://github.com/Codertocat/Hello-World"])),
        registry_sources: None,
    };
    // `html_url` names the allowed repository, the clone URLs another.
    let mut body: Value = serde_json::from_str(GITHUB_PUSH).unwrap();
    body["repository"]["clone_url"] = json!("https://github.com/acme/private-infra.git");
    body["repository"]["ssh_url"] = json!("git@github.com:acme/private-infra.git");
    let raw = serde_json::to_vec(&body).unwrap();
    let answer = w.handle(&github("mixed-urls", &raw), &raw, NOW).await;
    assert_eq!(w.starter.stacks(), ["hello"], "{:?}", answer.body);
    assert_eq!((answer.status, counts(&answer)), (202, (1, 0)));

    // `full_name` is the repository: another one is refused, whatever the URLs say.
    let mut body: Value = serde_json::from_str(GITHUB_PUSH).unwrap();
    body["repository"]["full_name"] = json!("acme/private-infra");
    body["after"] = json!("1".repeat(40));
    body["head_commit"]["id"] = body["after"].clone();
    let raw = serde_json::to_vec(&body).unwrap();
    let answer = w.handle(&github("other-name", &raw), &raw, NOW).await;
    assert_eq!(answer.status, 403, "{:?}", answer.body);
    assert_eq!(w.starter.stacks(), ["hello"]);
}

#[tokio::test]
async fn a_limited_secret_starts_no_other_repository_named_in_bitbucket_links() {
    let registry = MemoryRegistry::new();
    registry.insert(following(
        "tests",
        "git@bitbucket.org:nfalco79/test-repos.git",
        "feature/webhook",
    ));
    registry.insert(following(
        "private",
        "https://bitbucket.org/acme/private-infra",
        "feature/webhook",
    ));
    let w = Webhook {
        queue: Default::default(),
        registry,
        starter: RecordingStarter::new(),
        secrets: Secret(Some(vec!["https://bitbucket.org/nfalco79/test-repos"])),
        registry_sources: None,
    };
    let mut body: Value = serde_json::from_str(BITBUCKET_PUSH).unwrap();
    body["repository"]["links"]["html"]["href"] = json!("https://bitbucket.org/acme/private-infra");
    let raw = serde_json::to_vec(&body).unwrap();
    let answer = w.handle(&bitbucket("bb-mixed", &raw), &raw, NOW).await;
    assert_eq!(w.starter.stacks(), ["tests"], "{:?}", answer.body);
    assert_eq!((answer.status, counts(&answer)), (202, (1, 0)));
}

// -------------------------------------------------------------- refusals

#[tokio::test]
async fn every_refusal_logs_one_line_with_its_status_reason_sender_and_delivery() {
    let (lines, _guard) = capture();
    let registry = MemoryRegistry::new();
    registry.insert(following(
        "hello",
        "https://github.com/Codertocat/Hello-World",
        "master",
    ));
    let w = Webhook {
        queue: Default::default(),
        registry,
        starter: RecordingStarter::new(),
        secrets: Secret(Some(vec!["https://github.com/acme/other"])),
        registry_sources: None,
    };
    let push = GITHUB_PUSH.as_bytes();
    let unknown: Headers = [("X-Delivery", "x")].into_iter().collect();
    let big = vec![b' '; MAX_BODY_BYTES + 1];
    let unsigned = {
        let mut h = Headers::new();
        h.insert("X-GitHub-Event", "push");
        h.insert("X-GitHub-Delivery", "unsigned");
        h.insert("X-Hub-Signature-256", sign(b"guessed", push));
        h
    };
    let junk = b"{\"ref\": 5, \"marker\": \"BODY-MARKER\"}";
    let cases: [Case<'_>; 5] = [
        ("unknown sender", unknown, push, 400, "unknown", "none"),
        ("too large", github("big", &big), &big, 413, "github", "big"),
        ("bad signature", unsigned, push, 401, "github", "unsigned"),
        (
            "malformed",
            github("junk", junk),
            junk,
            400,
            "github",
            "junk",
        ),
        (
            "not allowed",
            github("limited", push),
            push,
            403,
            "github",
            "limited",
        ),
    ];
    for (what, headers, body, status, sender, delivery) in cases {
        lines.clear();
        let answer = w.handle(&headers, body, NOW).await;
        assert_eq!(answer.status, status, "{what}: {:?}", answer.body);
        let refused = lines.with_message("webhook delivery refused");
        assert_eq!(refused.len(), 1, "{what}: {:?}", lines.all());
        let line = &refused[0];
        for field in [
            format!("status={status}"),
            format!("sender={sender:?}"),
            format!("delivery={delivery:?}"),
            "reason=".to_owned(),
        ] {
            assert!(line.contains(&field), "{what}: {field} in {line}");
        }
        assert!(
            !line.contains(SECRET) && !line.contains("BODY-MARKER"),
            "{what}: {line}"
        );
    }
    // A method other than POST, refused before the handler.
    lines.clear();
    let get = json!({
        "headers": {"x-github-event": "push", "x-github-delivery": "by-get"},
        "requestContext": {"http": {"method": "GET"}}
    });
    assert_eq!(function_url_request(&get).unwrap_err().status, 405);
    let refused = lines.with_message("webhook delivery refused");
    assert_eq!(refused.len(), 1, "405: {:?}", lines.all());
    assert!(
        refused[0].contains("status=405") && refused[0].contains("delivery=\"by-get\""),
        "{}",
        refused[0]
    );
    // The answer function's IAM-authorised URL reads its requests alike:
    // its refusals are logged, as no webhook delivery's.
    lines.clear();
    let signed_get = json!({
        "requestContext": {"http": {"method": "GET"}, "authorizer": {"iam": {"userArn": "arn:aws:iam::111122223333:user/a"}}}
    });
    assert_eq!(function_url_request(&signed_get).unwrap_err().status, 405);
    assert!(lines.with_message("webhook delivery refused").is_empty());
    assert_eq!(lines.with_message("function URL request refused").len(), 1);
}

#[tokio::test]
async fn before_the_signature_is_checked_an_answer_tells_nothing_of_what_is_accepted() {
    let w = Webhook {
        queue: Default::default(),
        registry: MemoryRegistry::new(),
        starter: RecordingStarter::new(),
        secrets: FixedSecrets(vec![SECRET.into()]),
        registry_sources: None,
    };
    let push = GITHUB_PUSH.as_bytes();
    let unknown: Headers = [("X-Event", "push")].into_iter().collect();
    let answer = w.handle(&unknown, push, NOW).await;
    assert_eq!(answer.status, 400);
    let text = answer.body.to_string();
    for detail in [
        "X-GitHub-Event",
        "Gitlab",
        "X-Event-Key",
        "Stacksync",
        "header",
    ] {
        assert!(!text.contains(detail), "{detail} in {text}");
    }
    let big = vec![b' '; MAX_BODY_BYTES + 1];
    let answer = w.handle(&github("big", &big), &big, NOW).await;
    assert_eq!(answer.status, 413);
    let text = answer.body.to_string();
    assert!(!text.contains(&MAX_BODY_BYTES.to_string()), "{text}");
    assert!(!text.contains(&big.len().to_string()), "{text}");
    let get = json!({"requestContext": {"http": {"method": "DELETE"}}});
    let text = function_url_request(&get).unwrap_err().body.to_string();
    assert!(
        !text.contains("DELETE") && !text.contains("webhook"),
        "{text}"
    );
    // Once signed, a malformed body is explained to its sender.
    let junk = br#"{"ref": 5}"#;
    let answer = w.handle(&github("junk", junk), junk, NOW).await;
    assert_eq!(answer.status, 400);
    assert!(
        answer.body["message"].to_string().contains("at ref"),
        "{:?}",
        answer.body
    );
}

#[tokio::test]
async fn a_secret_that_cannot_be_read_is_answered_as_a_bad_signature_and_logged_as_an_error() {
    let (lines, _guard) = capture();
    let w = Webhook {
        queue: Default::default(),
        registry: MemoryRegistry::new(),
        starter: RecordingStarter::new(),
        secrets: Secret(None),
        registry_sources: None,
    };
    let push = GITHUB_PUSH.as_bytes();
    let answer = w.handle(&github("no-secret", push), push, NOW).await;
    assert_eq!(
        (answer.status, &answer.body),
        (
            401,
            &json!({"error": "Unauthorized", "message": NOT_SIGNED})
        )
    );
    let refused = lines.with_message("webhook delivery refused");
    assert_eq!(refused.len(), 1, "{:?}", lines.all());
    assert!(refused[0].starts_with("ERROR"), "{}", refused[0]);
    assert!(
        refused[0].contains("ResourceNotFoundException"),
        "{}",
        refused[0]
    );
}

// ---------------------------------------------------------------- counts

/// Step Functions as the adapter sees it within its clock-skew second: a
/// start of a running execution (same name, same input) is answered with
/// that execution, and taken for new.
#[derive(Default)]
struct Idempotent(RecordingStarter);

impl Starter for Idempotent {
    async fn start(&self, stack: &str, trigger: &Trigger, key: &str) -> PortResult<Started> {
        let started = self.0.start(stack, trigger, key).await?;
        Ok(Started {
            new: true,
            ..started
        })
    }
}

#[tokio::test]
async fn two_copies_of_one_push_count_the_one_start_between_them() {
    let registry = MemoryRegistry::new();
    registry.insert(following(
        "hello",
        "https://github.com/Codertocat/Hello-World",
        "master",
    ));
    let w = Webhook {
        queue: Default::default(),
        registry,
        starter: Idempotent::default(),
        secrets: FixedSecrets(vec![SECRET.into()]),
        registry_sources: None,
    };
    let push = GITHUB_PUSH.as_bytes();
    // Two webhooks of one repository (or a redelivery): two ids, one push.
    let first = w.handle(&github("copy-1", push), push, NOW).await;
    let second = w.handle(&github("copy-2", push), push, NOW).await;
    assert_eq!(w.starter.0.started().len(), 1);
    let (a, b) = (counts(&first), counts(&second));
    assert_eq!(
        (a.0 + b.0, a.1 + b.1),
        (1, 1),
        "one started, one skipped: {:?} {:?}",
        first.body,
        second.body
    );
    assert_eq!(second.body["result"], "nothing new to start");
}
