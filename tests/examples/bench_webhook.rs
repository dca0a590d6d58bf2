//! Webhook handler time, from a signed GitHub push to started executions:
//! p50/p99 over 1,000 deliveries (each a new commit, so each starts its
//! executions), and the AWS calls one delivery makes. The handler runs
//! in-process; DynamoDB, Secrets Manager and Step Functions are the emulator
//! on loopback. Run by `scripts/bench`. Prints Markdown.

use std::collections::BTreeMap;
use std::time::Instant;

use stacksync::adapters::secrets::{SecretLocation, Secrets};
use stacksync::adapters::stepfunctions::Executions;
use stacksync::clock::now_millis;
use stacksync::registry::Registry;
use stacksync::triggers::webhook::Headers;
use stacksync::triggers::webhook::handler::Webhook;
use stacksync_testkit::faults::{Fault, FaultPlan, FaultProxy};
use stacksync_testkit::harness::Harness;
use stacksync_testkit::reliability::through_proxy;
use stacksync_testkit::{Emulator, unique_name};

const REQUESTS: usize = 1000;
/// Stacks that follow the pushed repository and branch (each push starts this many).
const FOLLOWING: usize = 3;

/// A signed GitHub push of commit `i` to `acme/REPO`'s main branch.
fn push_to(i: usize, repo: &str) -> (Headers, Vec<u8>) {
    stacksync_testkit::pushes::github_push(i, repo, "bench")
}

#[tokio::main]
async fn main() {
    let emulator = Emulator::shared();
    let config = emulator.sdk_config();
    let h = Harness::new("bench-webhook").await;
    let p = unique_name("bw").replace('-', "x");
    let mut stacks = String::from("stacks:\n");
    for i in 0..FOLLOWING {
        stacks.push_str(&format!(
            "  - {{name: {p}-{i}, source: {{git: 'https://github.com/acme/infra.git', path: s{i}.yaml}}}}\n"
        ));
    }
    // Others in the registry that a push must not touch.
    for i in 0..20 {
        stacks.push_str(&format!(
            "  - {{name: {p}-other{i}, source: {{git: 'https://github.com/acme/other{i}.git', path: s.yaml}}}}\n"
        ));
    }
    h.apply(&stacks).await;
    let sfn = aws_sdk_sfn::Client::new(&config);
    let machine = emulator.pass_machine("bench-webhook").await;
    let secret_id = unique_name("bench-webhook");
    aws_sdk_secretsmanager::Client::new(&config)
        .create_secret()
        .name(&secret_id)
        .secret_string("bench-secret")
        .send()
        .await
        .expect("secret");
    let webhook = Webhook {
        queue: Default::default(),
        registry: Registry::new(emulator.dynamodb(), h.steps.registry.table()),
        starter: Executions::new(sfn, &machine),
        secrets: Secrets::new(SecretLocation::SecretsManager(secret_id.clone()), &config),
        registry_sources: None,
    };
    let delivery = |i: usize| push_to(i, "infra");

    // One delivery, recorded: the AWS calls it makes (secret cached after the first).
    let (headers, raw) = delivery(usize::MAX / 2);
    let warm = webhook.handle(&headers, &raw, now_millis()).await;
    assert_eq!(warm.status, 202, "{}", warm.body);
    emulator.reset_recording();
    let (headers, raw) = delivery(usize::MAX / 2 - 1);
    let one = webhook.handle(&headers, &raw, now_millis()).await;
    assert_eq!(one.status, 202, "{}", one.body);
    let mut calls: BTreeMap<String, usize> = BTreeMap::new();
    for op in emulator.recorded_operations() {
        *calls.entry(op).or_default() += 1;
    }

    let mut millis = Vec::with_capacity(REQUESTS);
    for i in 0..REQUESTS {
        let (headers, raw) = delivery(i);
        let started = Instant::now();
        let answer = webhook.handle(&headers, &raw, now_millis()).await;
        millis.push(started.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(answer.status, 202, "{}", answer.body);
        let count = answer.body["started"].as_u64().unwrap_or(0) as usize;
        assert_eq!(count, FOLLOWING, "{}", answer.body);
    }
    millis.sort_by(f64::total_cmp);
    let at = |q: f64| millis[((millis.len() as f64 * q).ceil() as usize).saturating_sub(1)];
    println!(
        "## Webhook: signed push → started executions ({REQUESTS} deliveries, {FOLLOWING} stacks follow the repo, 23 registered)"
    );
    println!();
    println!("| p50 | p99 | max |");
    println!("|---|---|---|");
    println!(
        "| {:.1} ms | {:.1} ms | {:.1} ms |",
        at(0.50),
        at(0.99),
        millis.last().copied().unwrap_or(0.0)
    );
    println!();
    let list: Vec<String> = calls.iter().map(|(op, n)| format!("{op} ×{n}")).collect();
    let total: usize = calls.values().sum();
    println!(
        "AWS calls per delivery ({total}): {} (the secret is cached for 5 minutes).",
        list.join(", ")
    );
    println!();
    wide(&h, &webhook, &p, &push_to).await;
    // The same, with every Step Functions call 30 ms slower: the emulator
    // answers in a few ms, on this machine's CPU; AWS answers over a network.
    let proxy = FaultProxy::start(
        emulator.endpoint(),
        FaultPlan {
            rate: 1.0,
            kinds: vec![Fault::Slow],
            slow: std::time::Duration::from_millis(LATENCY_MS),
            seed: 1,
        },
    )
    .await;
    let far = through_proxy(&proxy, std::time::Duration::from_secs(30));
    let slow = Webhook {
        queue: Default::default(),
        registry: Registry::new(emulator.dynamodb(), h.steps.registry.table()),
        starter: Executions::new(aws_sdk_sfn::Client::new(&far), &machine),
        secrets: Secrets::new(SecretLocation::SecretsManager(secret_id), &config),
        registry_sources: None,
    };
    println!();
    println!(
        "With {LATENCY_MS} ms added to every Step Functions call (the fault proxy, `tests/src/faults.rs`, delaying each answer):\n"
    );
    wide_table(&slow, 3_000_000, &push_to).await;
}

/// What the latency-added run adds to each Step Functions call.
const LATENCY_MS: u64 = 30;

/// Stacks that follow the repository of the wide benchmark.
const WIDE: usize = 500;
/// Deliveries measured through the handler (starts 32 at a time), and
/// with the starts one after the other, as before.
const WIDE_DELIVERIES: usize = 10;
const WIDE_SEQUENTIAL: usize = 3;

/// A push to a repository that 500 stacks follow: the handler's time
/// (starts 32 at a time), and the same starts made one after the other.
async fn wide(
    h: &Harness<stacksync::adapters::cloudformation::SdkCloudFormationFactory>,
    webhook: &Webhook<Registry, Executions, Secrets>,
    p: &str,
    sign_push: &impl Fn(usize, &str) -> (Headers, Vec<u8>),
) {
    let mut stacks = String::from("stacks:\n");
    for i in 0..WIDE {
        stacks.push_str(&format!(
            "  - {{name: {p}-w{i}, source: {{git: 'https://github.com/acme/wide.git', path: s{i}.yaml}}}}\n"
        ));
    }
    h.apply(&stacks).await;
    println!(
        "### A push that {WIDE} stacks follow ({WIDE_DELIVERIES} deliveries; {WIDE_SEQUENTIAL} with the starts one at a time)"
    );
    println!();
    wide_table(webhook, 1_000_000, sign_push).await;
}

/// One table of the wide benchmark: deliveries through the handler, and
/// the same starts one after the other; commits numbered from `first`.
async fn wide_table(
    webhook: &Webhook<Registry, Executions, Secrets>,
    first: usize,
    sign_push: &impl Fn(usize, &str) -> (Headers, Vec<u8>),
) {
    let mut millis = Vec::new();
    for i in 0..WIDE_DELIVERIES {
        let (headers, raw) = sign_push(first + i, "wide");
        let started = Instant::now();
        let answer = webhook.handle(&headers, &raw, now_millis()).await;
        millis.push(started.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(answer.status, 202, "{}", answer.body);
        let count = answer.body["started"].as_u64().unwrap_or(0) as usize;
        assert_eq!(count, WIDE, "every follower started");
    }
    let keys = [stacksync::source::source_key(
        "https://github.com/acme/wide.git",
        Some("main"),
    )];
    let mut sequential = Vec::new();
    for i in 0..WIDE_SEQUENTIAL {
        let mut starts = stacksync::triggers::Starts::default();
        let started = Instant::now();
        stacksync::triggers::start_followers_at(
            1,
            &webhook.registry,
            &webhook.starter,
            &keys,
            (
                stacksync::ports::TriggerKind::Webhook,
                &format!("{:040x}", first + 500_000 + i),
            ),
            &mut starts,
        )
        .await
        .expect("started");
        sequential.push(started.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(starts.started.len(), WIDE);
    }
    millis.sort_by(f64::total_cmp);
    sequential.sort_by(f64::total_cmp);
    let at = |v: &[f64], q: f64| v[((v.len() as f64 * q).ceil() as usize).saturating_sub(1)];
    println!("| starts | p50 | p99 | max |");
    println!("|---|---|---|---|");
    println!(
        "| {} at a time (the handler) | {:.0} ms | {:.0} ms | {:.0} ms |",
        stacksync::triggers::START_CONCURRENCY,
        at(&millis, 0.5),
        at(&millis, 0.99),
        millis.last().copied().unwrap_or(0.0)
    );
    println!(
        "| one after the other (before) | {:.0} ms | {:.0} ms | {:.0} ms |",
        at(&sequential, 0.5),
        at(&sequential, 0.99),
        sequential.last().copied().unwrap_or(0.0)
    );
}
