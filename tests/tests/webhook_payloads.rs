//! The hosts' own published payloads (tests/fixtures/webhook/, sources and
//! licences in its README.md), sent byte for byte through the webhook
//! handler, signed as each host signs, against the emulator: which stacks
//! each starts, at which commit; and a ping or a deleted tag starts none.
//! One Bitbucket Cloud payload keeps the signature Bitbucket gave it.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use serde_json::{Value, json};
use stacksync::adapters::secrets::{SecretLocation, Secrets};
use stacksync::adapters::stepfunctions::Executions;
use stacksync::clock::now_millis;
use stacksync::registry::Registry;
use stacksync::triggers::webhook::Headers;
use stacksync::triggers::webhook::handler::Webhook;
use stacksync::triggers::webhook::verify::sign;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::iam::as_function;
use stacksync_testkit::{Emulator, unique_name};

const SECRET: &str = "s3cret-payloads";
/// The secret of the Bitbucket webhook that signed `bitbucket-push-signed`
/// (`X-Hub-Signature` below), as its source publishes it.
const BITBUCKET_SECRET: &str = "Gkvl$k$wyNpQAF42";
const BITBUCKET_SIGNATURE: &str =
    "sha256=f205c729821c6954aff2afe72b965c34015b4baf96ea8ddc2cc44999c014a035";

/// A published payload, as its bytes.
fn payload(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/fixtures/webhook/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(path).unwrap()
}

/// The headers each host sends with `body`, signed as it signs.
fn sent_by(host: &str, event: &str, id: &str, body: &[u8]) -> Headers {
    let mut h = Headers::new();
    h.insert("Content-Type", "application/json");
    match host {
        "github" => {
            h.insert("X-GitHub-Event", event);
            h.insert("X-GitHub-Delivery", id);
            h.insert("X-Hub-Signature-256", sign(SECRET.as_bytes(), body));
        }
        "gitlab" => {
            h.insert("X-Gitlab-Event", event);
            h.insert("X-Gitlab-Event-UUID", id);
            h.insert("X-Gitlab-Token", SECRET);
        }
        _ => {
            h.insert("X-Event-Key", event);
            h.insert("X-Hook-UUID", "5b6e2f3a-8c41-4d0e-9a7b-3f1c2d4e5a6b");
            h.insert("X-Request-UUID", id);
            h.insert("X-Hub-Signature", sign(SECRET.as_bytes(), body));
        }
    }
    h
}

fn stacks(p: &str) -> String {
    format!(
        "stacks:
  - {{name: {p}-gh-branch, source: {{git: 'https://github.com/Codertocat/Hello-World.git', ref: refs/heads/master, path: a.yaml}}}}
  - {{name: {p}-gh-develop, source: {{git: 'https://github.com/Codertocat/Hello-World', ref: develop, path: a.yaml}}}}
  - {{name: {p}-gh-tag, source: {{git: 'git@octocoders.github.io:Codertocat/Hello-World.git', ref: refs/tags/simple-tag, path: b.yaml}}}}
  - {{name: {p}-gl-push, source: {{git: 'https://example.com/mike/diaspora.git', ref: refs/heads/master, path: c.yaml}}}}
  - {{name: {p}-gl-tag, source: {{git: 'ssh://git@example.com/jsmith/example.git', ref: refs/tags/v1.0.0, path: d.yaml}}}}
  - {{name: {p}-bb-branch, source: {{git: 'https://bitbucket.org/nfalco79/test-repos', ref: refs/heads/feature/webhook, path: e.yaml}}}}
  - {{name: {p}-bb-tag, source: {{git: 'git@bitbucket.org:amuniz/test-repos.git', ref: refs/tags/simple-tag, path: f.yaml}}}}
"
    )
}

struct Setup {
    webhook: Webhook<Registry, Executions, Secrets>,
    sfn: aws_sdk_sfn::Client,
    machine: String,
    _harness: Harness<stacksync::adapters::cloudformation::SdkCloudFormationFactory>,
}

impl Setup {
    async fn new(prefix: &str, stacks: &str) -> Setup {
        let emulator = Emulator::shared();
        let harness = Harness::new(prefix).await;
        harness.apply(stacks).await;
        let config = emulator.sdk_config();
        let sfn = aws_sdk_sfn::Client::new(&config);
        let machine = emulator.pass_machine(prefix).await;
        let secret_id = unique_name(prefix);
        aws_sdk_secretsmanager::Client::new(&config)
            .create_secret()
            .name(&secret_id)
            .secret_string(json!({"current": SECRET, "previous": BITBUCKET_SECRET}).to_string())
            .send()
            .await
            .unwrap();
        let webhook = Webhook {
            queue: Default::default(),
            registry: Registry::new(emulator.dynamodb(), harness.steps.registry.table()),
            starter: Executions::new(sfn.clone(), &machine),
            secrets: Secrets::new(SecretLocation::SecretsManager(secret_id), &config),
            registry_sources: None,
        };
        Setup {
            webhook,
            sfn,
            machine,
            _harness: harness,
        }
    }

    async fn deliver(&self, headers: &Headers, body: &[u8]) -> (u16, Value) {
        let r = as_function("webhook", self.webhook.handle(headers, body, now_millis())).await;
        (r.status, r.body)
    }

    /// Every execution: (stack, revision), sorted.
    async fn started(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> =
            stacksync_testkit::stepfunctions::executions(&self.sfn, &self.machine)
                .await
                .into_iter()
                .map(|(_, input)| {
                    let at = |v: &Value| v.as_str().unwrap_or("").to_owned();
                    (at(&input["stackId"]), at(&input["trigger"]["revision"]))
                })
                .collect();
        out.sort();
        out
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_published_push_starts_the_stack_following_its_repository_and_ref() {
    let p = unique_name("whp").replace('-', "x");
    let s = Setup::new("webhook-payloads", &stacks(&p)).await;
    // (payload, host, event, stack started, commit)
    let pushes = [
        (
            "github-push-branch",
            "github",
            "push",
            "gh-branch",
            "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
        ),
        (
            "github-push-tag",
            "github",
            "push",
            "gh-tag",
            "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
        ),
        (
            "gitlab-push",
            "gitlab",
            "Push Hook",
            "gl-push",
            "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
        ),
        (
            "gitlab-tag-push",
            "gitlab",
            "Tag Push Hook",
            "gl-tag",
            "82b3d5ae55f7080f1e6022629cdb57bfae7cccc7",
        ),
        (
            "bitbucket-push-tag",
            "bitbucket",
            "repo:push",
            "bb-tag",
            "7ef5981d59145c3ed300b1ab77b93907d33abe59",
        ),
    ];
    let mut expected = Vec::new();
    for (name, host, event, stack, commit) in pushes {
        let body = payload(name);
        let (status, answer) = s.deliver(&sent_by(host, event, name, &body), &body).await;
        assert_eq!(status, 202, "{name}: {answer}");
        assert_eq!(
            (answer["started"].as_u64(), answer["skipped"].as_u64()),
            (Some(1), Some(0)),
            "{name}: {answer}"
        );
        expected.push((format!("{p}-{stack}"), commit.to_owned()));
        expected.sort();
        assert_eq!(s.started().await, expected, "{name}");
    }
}

/// Bitbucket Cloud's own signature of its delivery, under the secret its
/// webhook had: verified as it was sent, the push starts its stack.
#[tokio::test(flavor = "multi_thread")]
async fn a_push_signed_by_bitbucket_itself_is_verified_and_starts_its_stack() {
    let p = unique_name("whb").replace('-', "x");
    let s = Setup::new("webhook-bbsig", &stacks(&p)).await;
    let body = payload("bitbucket-push-signed");
    let headers: Headers = [
        ("Content-Type", "application/json"),
        ("X-Event-Key", "repo:push"),
        ("X-Hook-UUID", "5b6e2f3a-8c41-4d0e-9a7b-3f1c2d4e5a6b"),
        ("X-Request-UUID", "bb-signed"),
        ("X-Hub-Signature", BITBUCKET_SIGNATURE),
    ]
    .into_iter()
    .collect();
    let (status, answer) = s.deliver(&headers, &body).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(
        s.started().await,
        [(
            format!("{p}-bb-branch"),
            "d7f300a32270053bdfd97a6d64113f58202c33e7".to_owned()
        )]
    );
    // One byte more and the signature no longer matches.
    let mut tampered = body.clone();
    tampered.push(b'\n');
    let (status, _) = s.deliver(&headers, &tampered).await;
    assert_eq!(status, 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_published_ping_and_a_deleted_tag_start_nothing() {
    let p = unique_name("whn").replace('-', "x");
    let s = Setup::new("webhook-nothing", &stacks(&p)).await;
    let ping = payload("github-ping");
    let (status, answer) = s
        .deliver(&sent_by("github", "ping", "ping", &ping), &ping)
        .await;
    assert_eq!((status, answer), (200, json!({"result": "pong"})));
    let deleted = payload("github-push-tag-deleted");
    let (status, answer) = s
        .deliver(&sent_by("github", "push", "deleted", &deleted), &deleted)
        .await;
    assert_eq!(
        (status, answer),
        (
            200,
            json!({"result": "ignored", "reason": "refs/tags/simple-tag was deleted"})
        )
    );
    assert!(s.started().await.is_empty());
}
