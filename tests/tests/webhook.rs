//! The webhook handler against the emulator: real-shaped GitHub, GitLab and
//! Bitbucket deliveries (tests/fixtures/webhooks), the secret in Secrets
//! Manager, stacks found through the registry's source index, and executions
//! started in the emulator's Step Functions (listed there to count them).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::sync::Arc;

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

const SECRET: &str = "s3cret-current";
const PREVIOUS: &str = "s3cret-previous";

/// A fixture: its headers and its body as the sender would serialize it.
fn fixture(name: &str) -> (Vec<(String, String)>, Value) {
    let path = format!(
        "{}/fixtures/webhooks/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let headers = file["headers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    (headers, file["body"].clone())
}

/// Headers with the provider's signature (or token) for `body` under `secret`.
fn signed(headers: &[(String, String)], body: &[u8], secret: &str) -> Headers {
    let mut h: Headers = headers.iter().cloned().collect();
    if h.contains("X-GitHub-Event") {
        h.insert("X-Hub-Signature-256", sign(secret.as_bytes(), body));
    } else if h.contains("X-Gitlab-Event") {
        h.insert("X-Gitlab-Token", secret);
    } else if h.contains("X-Event-Key") {
        h.insert("X-Hub-Signature", sign(secret.as_bytes(), body));
    } else {
        h.insert("X-Stacksync-Signature-256", sign(secret.as_bytes(), body));
    }
    h
}

struct Setup {
    webhook: Arc<Webhook<Registry, Executions, Secrets>>,
    sfn: aws_sdk_sfn::Client,
    machine: String,
    secret_id: String,
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
            .secret_string(json!({"current": SECRET, "previous": PREVIOUS}).to_string())
            .send()
            .await
            .unwrap();
        let webhook = Webhook {
            queue: Default::default(),
            registry: Registry::new(emulator.dynamodb(), harness.steps.registry.table()),
            starter: Executions::new(sfn.clone(), &machine),
            // No pause between forced reads: the tests send bad signatures
            // and then one under a rotated secret within a second.
            secrets: Secrets::new(SecretLocation::SecretsManager(secret_id.clone()), &config)
                .with_forced_refresh_every(std::time::Duration::ZERO),
            registry_sources: None,
        };
        Setup {
            webhook: Arc::new(webhook),
            sfn,
            machine,
            secret_id,
            _harness: harness,
        }
    }

    async fn deliver(&self, headers: &Headers, body: &[u8]) -> (u16, Value) {
        let r = as_function("webhook", self.webhook.handle(headers, body, now_millis())).await;
        (r.status, r.body)
    }

    /// Every execution of the machine: (name, input).
    async fn executions(&self) -> Vec<(String, Value)> {
        stacksync_testkit::stepfunctions::executions(&self.sfn, &self.machine).await
    }
}

/// The answer's counts: (started, skipped). It names no stack.
fn counts(body: &Value) -> (u64, u64) {
    assert!(body["started"].is_u64(), "{body}");
    (
        body["started"].as_u64().unwrap_or(0),
        body["skipped"].as_u64().unwrap_or(0),
    )
}

impl Setup {
    /// The stacks with an execution (named `<stack>_webhook_…`), sorted.
    async fn started_stacks(&self) -> Vec<String> {
        let mut stacks: Vec<String> = self
            .executions()
            .await
            .into_iter()
            .map(|(name, _)| name.split("_webhook_").next().unwrap_or("").to_owned())
            .collect();
        stacks.sort();
        stacks.dedup();
        stacks
    }
}

fn stacks(p: &str) -> String {
    format!(
        "stacks:
  - {{name: {p}-https, source: {{git: 'https://github.com/acme/infra.git', path: a.yaml}}}}
  - {{name: {p}-ssh, source: {{git: 'ssh://git@github.com/Acme/infra', path: b.yaml}}}}
  - {{name: {p}-develop, source: {{git: 'https://github.com/acme/infra', ref: develop, path: c.yaml}}}}
  - {{name: {p}-other, source: {{git: 'https://github.com/acme/other.git', path: d.yaml}}}}
  - {{name: {p}-paused, suspend: true, source: {{git: 'https://github.com/acme/infra', path: e.yaml}}}}
  - {{name: {p}-gitlab, source: {{git: 'https://gitlab.com/acme-group/platform/infra.git', path: f.yaml}}}}
  - {{name: {p}-bitbucket, source: {{git: 'git@bitbucket.org:acme/infra.git', path: g.yaml}}}}
"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_github_push_starts_each_following_stack_once_and_replays_start_nothing() {
    let p = unique_name("wh").replace('-', "x");
    let s = Setup::new("webhook-gh", &stacks(&p)).await;
    let (headers, body) = fixture("github-push");
    let commit = body["after"].as_str().unwrap().to_owned();
    let raw = serde_json::to_vec(&body).unwrap();

    let (status, answer) = s.deliver(&signed(&headers, &raw, SECRET), &raw).await;
    assert_eq!(status, 202, "{answer}");
    // The https and the ssh spelling of the repository both follow main; the
    // develop branch, another repository and the suspended entry do not start.
    assert_eq!(counts(&answer), (2, 1), "{answer}");
    assert!(!answer.to_string().contains(&p), "no stack named: {answer}");
    assert_eq!(
        s.started_stacks().await,
        vec![format!("{p}-https"), format!("{p}-ssh")]
    );
    let executions = s.executions().await;
    assert_eq!(executions.len(), 2, "{executions:?}");
    // They follow `main`, a short ref: whether the branch or a tag of that
    // name, only their run can say (git's order: a tag first), so each run
    // resolves it rather than deploy the pushed commit.
    for (name, input) in &executions {
        assert!(name.contains("_webhook_"), "{name}");
        assert_eq!(input["trigger"]["kind"], "webhook");
        assert!(input["trigger"]["revision"].is_null(), "{input}");
    }
    let _ = &commit;

    // The same delivery again: acknowledged, nothing started.
    let (status, answer) = s.deliver(&signed(&headers, &raw, SECRET), &raw).await;
    assert_eq!(
        (status, answer["result"].as_str()),
        (200, Some("duplicate"))
    );
    // Another delivery of the same push (a redelivery with a new id): the
    // executions exist already by name.
    let mut again = headers.clone();
    for (k, v) in again.iter_mut() {
        if k == "X-GitHub-Delivery" {
            *v = "another-delivery-id".into();
        }
    }
    // Step Functions answers a running execution of that name with its ARN
    // (listed as started), a finished one with ExecutionAlreadyExists (listed
    // as skipped, "already started"); either way nothing new runs.
    let (status, answer) = s.deliver(&signed(&again, &raw, SECRET), &raw).await;
    assert_eq!(status, 202, "{answer}");
    let (started, skipped) = counts(&answer);
    assert_eq!(
        started + skipped,
        3,
        "two followers and the suspended one: {answer}"
    );
    assert_eq!(s.executions().await.len(), 2);

    // A push to develop starts only the entry that follows develop.
    let mut develop = body.clone();
    develop["ref"] = json!("refs/heads/develop");
    develop["after"] = json!("1111111111111111111111111111111111111111");
    develop["head_commit"]["id"] = develop["after"].clone();
    let raw = serde_json::to_vec(&develop).unwrap();
    let mut h = headers.clone();
    h.retain(|(k, _)| k != "X-GitHub-Delivery");
    h.push(("X-GitHub-Delivery".into(), "develop-push".into()));
    let (status, answer) = s.deliver(&signed(&h, &raw, SECRET), &raw).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(counts(&answer).0, 1, "{answer}");
    assert_eq!(
        s.started_stacks().await,
        vec![
            format!("{p}-develop"),
            format!("{p}-https"),
            format!("{p}-ssh")
        ]
    );

    // A repository nobody follows: 200, nothing started, the sources named.
    let mut nobody = body.clone();
    nobody["repository"]["full_name"] = json!("acme/nobody");
    for key in ["clone_url", "ssh_url", "git_url", "html_url", "url"] {
        if nobody["repository"].get(key).is_some() {
            nobody["repository"][key] = json!("https://github.com/acme/nobody.git");
        }
    }
    let raw = serde_json::to_vec(&nobody).unwrap();
    h.retain(|(k, _)| k != "X-GitHub-Delivery");
    h.push(("X-GitHub-Delivery".into(), "nobody-push".into()));
    let (status, answer) = s.deliver(&signed(&h, &raw, SECRET), &raw).await;
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["sources"].to_string().contains("acme/nobody"),
        "{answer}"
    );
    assert_eq!(s.executions().await.len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn signatures_are_checked_before_anything_is_read_or_started() {
    let p = unique_name("whs").replace('-', "x");
    let s = Setup::new("webhook-sig", &stacks(&p)).await;
    let (headers, body) = fixture("github-push");
    let raw = serde_json::to_vec(&body).unwrap();
    let unsigned: Headers = headers.iter().cloned().collect();
    let other_body = br#"{"ref": "refs/heads/main"}"#;
    let cases = [
        ("missing", unsigned, 401),
        (
            "wrong secret",
            signed(&headers, &raw, "not-the-secret"),
            401,
        ),
        ("another body", signed(&headers, other_body, SECRET), 401),
    ];
    for (what, h, want) in cases {
        let (status, answer) = s.deliver(&h, &raw).await;
        assert_eq!(status, want, "{what}: {answer}");
        assert!(answer["message"].is_string(), "{what}: {answer}");
        assert!(!answer.to_string().contains(SECRET), "{what}: {answer}");
    }
    assert!(s.executions().await.is_empty(), "nothing started");

    // The previous secret is still accepted during a rotation.
    let (status, answer) = s.deliver(&signed(&headers, &raw, PREVIOUS), &raw).await;
    assert_eq!(status, 202, "{answer}");

    // Malformed (but signed), too large, ping, an event we ignore.
    let junk = b"{not json";
    let (status, _) = s.deliver(&signed(&headers, junk, SECRET), junk).await;
    assert_eq!(status, 400);
    let big = vec![b' '; stacksync::triggers::webhook::MAX_BODY_BYTES + 1];
    let (status, _) = s.deliver(&signed(&headers, &big, SECRET), &big).await;
    assert_eq!(status, 413);
    let (ping_headers, ping) = fixture("github-ping");
    let ping = serde_json::to_vec(&ping).unwrap();
    let (status, answer) = s
        .deliver(&signed(&ping_headers, &ping, SECRET), &ping)
        .await;
    assert_eq!((status, answer["result"].as_str()), (200, Some("pong")));
    let (issue_headers, issue) = fixture("github-issues");
    let issue = serde_json::to_vec(&issue).unwrap();
    let (status, answer) = s
        .deliver(&signed(&issue_headers, &issue, SECRET), &issue)
        .await;
    assert_eq!((status, answer["result"].as_str()), (200, Some("ignored")));

    // A secret rotated in Secrets Manager is picked up without a restart.
    aws_sdk_secretsmanager::Client::new(&Emulator::shared().sdk_config())
        .put_secret_value()
        .secret_id(&s.secret_id)
        .secret_string(json!({"current": "rotated", "previous": SECRET}).to_string())
        .send()
        .await
        .unwrap();
    let mut h = headers.clone();
    h.retain(|(k, _)| k != "X-GitHub-Delivery");
    h.push(("X-GitHub-Delivery".into(), "after-rotation".into()));
    let (status, answer) = s.deliver(&signed(&h, &raw, "rotated"), &raw).await;
    assert_eq!(status, 202, "{answer}");

    // A secret may sign only for the repositories it lists: this push is
    // of acme/infra, the secret allows only acme/other.
    aws_sdk_secretsmanager::Client::new(&Emulator::shared().sdk_config())
        .put_secret_value()
        .secret_id(&s.secret_id)
        .secret_string(
            json!({"current": "limited", "repositories": ["https://github.com/acme/other"]})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    let before = s.executions().await.len();
    h.retain(|(k, _)| k != "X-GitHub-Delivery");
    h.push(("X-GitHub-Delivery".into(), "limited-secret".into()));
    let (status, answer) = s.deliver(&signed(&h, &raw, "limited"), &raw).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["error"], "Forbidden");
    assert_eq!(s.executions().await.len(), before, "nothing started");
}

#[tokio::test(flavor = "multi_thread")]
async fn gitlab_and_bitbucket_pushes_find_their_stacks() {
    let p = unique_name("whg").replace('-', "x");
    let s = Setup::new("webhook-gl", &stacks(&p)).await;
    for (fixture_name, stack) in [("gitlab-push", "gitlab"), ("bitbucket-push", "bitbucket")] {
        let (headers, body) = fixture(fixture_name);
        let raw = serde_json::to_vec(&body).unwrap();
        let (status, answer) = s.deliver(&signed(&headers, &raw, SECRET), &raw).await;
        assert_eq!(status, 202, "{fixture_name}: {answer}");
        assert_eq!(counts(&answer).0, 1, "{fixture_name}: {answer}");
        assert!(
            s.started_stacks().await.contains(&format!("{p}-{stack}")),
            "{fixture_name}"
        );
        // The GitLab token compared against the wrong secret: refused.
        let (status, _) = s.deliver(&signed(&headers, &raw, "wrong"), &raw).await;
        assert_eq!(status, 401, "{fixture_name}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_concurrent_deliveries_of_one_push_start_one_execution_per_stack() {
    let p = unique_name("whc").replace('-', "x");
    let s = Setup::new("webhook-race", &stacks(&p)).await;
    let (headers, body) = fixture("github-push");
    let raw = Arc::new(serde_json::to_vec(&body).unwrap());
    let mut tasks = Vec::new();
    for i in 0..50 {
        let webhook = s.webhook.clone();
        let raw = raw.clone();
        // Half are copies of one delivery, half are redeliveries with new ids.
        let mut h = headers.clone();
        if i % 2 == 1 {
            h.retain(|(k, _)| k != "X-GitHub-Delivery");
            h.push(("X-GitHub-Delivery".into(), format!("redelivery-{i}")));
        }
        let h = signed(&h, &raw, SECRET);
        tasks.push(tokio::spawn(async move {
            as_function("webhook", webhook.handle(&h, &raw, now_millis()))
                .await
                .status
        }));
    }
    for t in tasks {
        let status = t.await.unwrap();
        assert!(status == 202 || status == 200, "{status}");
    }
    let executions = s.executions().await;
    assert_eq!(
        executions.len(),
        2,
        "one per following stack: {executions:?}"
    );
}

/// A secret limited to one repository signs a push of it whose clone URLs
/// name another: the delivery is of the repository its `full_name` names,
/// and only that one's stacks start.
#[tokio::test(flavor = "multi_thread")]
async fn a_secret_for_one_repository_starts_no_other_named_in_a_second_url() {
    let p = unique_name("whl").replace('-', "x");
    let s = Setup::new("webhook-lim", &stacks(&p)).await;
    aws_sdk_secretsmanager::Client::new(&Emulator::shared().sdk_config())
        .put_secret_value()
        .secret_id(&s.secret_id)
        .secret_string(
            json!({"current": SECRET, "repositories": ["https://github.com/acme/infra"]})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    let (headers, mut body) = fixture("github-push");
    body["repository"]["clone_url"] = json!("https://github.com/acme/other.git");
    body["repository"]["git_url"] = json!("git://github.com/acme/other.git");
    let raw = serde_json::to_vec(&body).unwrap();
    let (status, answer) = s.deliver(&signed(&headers, &raw, SECRET), &raw).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(
        s.started_stacks().await,
        vec![format!("{p}-https"), format!("{p}-ssh")],
        "{answer}"
    );
}

/// Two copies of one push a moment apart (two webhooks on one repository,
/// or a redelivery), under two delivery ids: one execution per stack, and
/// the answers count each start once between them.
#[tokio::test(flavor = "multi_thread")]
async fn two_copies_of_a_push_count_each_start_once_between_them() {
    let p = unique_name("whd").replace('-', "x");
    let s = Setup::new("webhook-dup", &stacks(&p)).await;
    let (headers, body) = fixture("github-push");
    let raw = serde_json::to_vec(&body).unwrap();
    let mut copy = headers.clone();
    copy.retain(|(k, _)| k != "X-GitHub-Delivery");
    copy.push(("X-GitHub-Delivery".into(), "second-webhook".into()));
    let (_, first) = s.deliver(&signed(&headers, &raw, SECRET), &raw).await;
    let (_, second) = s.deliver(&signed(&copy, &raw, SECRET), &raw).await;
    let executions = s.executions().await.len() as u64;
    assert_eq!(executions, 2);
    let (a, b) = (counts(&first), counts(&second));
    assert_eq!(a.0 + b.0, executions, "{first} {second}");
    assert_eq!(second["result"], "nothing new to start", "{second}");
}

/// A secret that is missing from Secrets Manager: every delivery is
/// answered as one with a bad signature (a prober learns nothing of the
/// installation), and nothing starts.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_secret_is_answered_as_a_bad_signature() {
    let p = unique_name("whm").replace('-', "x");
    let s = Setup::new("webhook-nosecret", &stacks(&p)).await;
    let config = Emulator::shared().sdk_config();
    let webhook = Webhook {
        queue: Default::default(),
        registry: Registry::new(
            Emulator::shared().dynamodb(),
            s._harness.steps.registry.table(),
        ),
        starter: Executions::new(s.sfn.clone(), &s.machine),
        secrets: Secrets::new(
            SecretLocation::SecretsManager(unique_name("no-such-secret")),
            &config,
        ),
        registry_sources: None,
    };
    let (headers, body) = fixture("github-push");
    let raw = serde_json::to_vec(&body).unwrap();
    let r = as_function(
        "webhook",
        webhook.handle(&signed(&headers, &raw, SECRET), &raw, now_millis()),
    )
    .await;
    assert_eq!(
        (r.status, r.body.clone()),
        (
            401,
            json!({"error": "Unauthorized", "message": "the delivery's signature or token is missing or does not match"})
        )
    );
    assert!(s.executions().await.is_empty());
}

/// Through the queue (SQS in the emulator): the delivery is answered once
/// queued, having started nothing; the consumer (this function, on the
/// queue's messages) starts the stacks; a message given again, and the
/// sender's redelivery, start nothing twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_queued_push_is_answered_at_once_and_its_stacks_started_by_the_consumer() {
    use stacksync::adapters::sqs::SqsQueue;
    use stacksync::ports::DeliveryQueue;
    let p = unique_name("whq").replace('-', "x");
    let mut stacks = stacks(&p);
    // Past one batch of 32 starts.
    for i in 0..40 {
        stacks.push_str(&format!(
            "  - {{name: {p}-many{i}, source: {{git: 'https://github.com/acme/infra', path: m{i}.yaml}}}}\n"
        ));
    }
    let mut s = Setup::new("webhook-queue", &stacks).await;
    let sqs = aws_sdk_sqs::Client::new(&Emulator::shared().sdk_config());
    let url = sqs
        .create_queue()
        .queue_name(unique_name("deliveries"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    Arc::get_mut(&mut s.webhook).unwrap().queue =
        DeliveryQueue::to(Arc::new(SqsQueue::new(sqs.clone(), &url)));
    let webhook = s.webhook.clone();
    let (headers, body) = fixture("github-push");
    let raw = serde_json::to_vec(&body).unwrap();
    let headers = signed(&headers, &raw, SECRET);

    let answer = as_function("webhook", webhook.handle(&headers, &raw, now_millis())).await;
    assert_eq!(
        (answer.status, answer.body["result"].as_str()),
        (202, Some("queued")),
        "{}",
        answer.body
    );
    assert!(
        s.executions().await.is_empty(),
        "nothing started before the answer"
    );
    let replay = as_function("webhook", webhook.handle(&headers, &raw, now_millis())).await;
    assert_eq!(replay.body["result"], "duplicate", "{}", replay.body);

    // The consumer, as Lambda's poller hands it the messages.
    let mut consumed = Vec::new();
    loop {
        let out = sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .send()
            .await
            .unwrap();
        let messages = out.messages.unwrap_or_default();
        if messages.is_empty() {
            break;
        }
        for m in messages {
            let body = m.body.unwrap();
            let answer = as_function("webhook", webhook.consume(&body, now_millis()))
                .await
                .unwrap();
            consumed.push(serde_json::to_value(answer).unwrap());
            // Given again (SQS delivers at least once): nothing new.
            let again = as_function("webhook", webhook.consume(&body, now_millis()))
                .await
                .unwrap();
            assert_eq!(serde_json::to_value(again).unwrap()["started"], 0);
            sqs.delete_message()
                .queue_url(&url)
                .receipt_handle(m.receipt_handle.unwrap())
                .send()
                .await
                .unwrap();
        }
    }
    // Queued twice (the replay too); started once.
    assert_eq!(consumed.len(), 2, "{consumed:?}");
    assert_eq!(consumed[0]["started"], 42, "{consumed:?}");
    assert_eq!(consumed[1]["started"], 0, "{consumed:?}");
    assert_eq!(s.executions().await.len(), 42, "each following stack once");
}
