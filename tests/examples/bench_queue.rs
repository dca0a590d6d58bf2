//! The webhook through its queue: how long a signed push waits for its
//! answer (verified, put on SQS, its id recorded) when 1, 500 and 5,000
//! stacks follow the pushed repository, and how long the consumer then
//! takes to start them (32 at a time). DynamoDB, Secrets Manager, SQS and
//! Step Functions are the emulator on loopback; the registry's followers
//! written as they are (`BatchWriteItem`). Run by `scripts/bench webhook`.
//! Prints Markdown.

use std::sync::Arc;
use std::time::Instant;

use stacksync::adapters::secrets::{SecretLocation, Secrets};
use stacksync::adapters::sqs::SqsQueue;
use stacksync::adapters::stepfunctions::Executions;
use stacksync::clock::now_millis;
use stacksync::manifest::parse_manifest;
use stacksync::ports::DeliveryQueue;
use stacksync::registry::StackEntry;
use stacksync::triggers::webhook::Headers;
use stacksync::triggers::webhook::handler::Webhook;
use stacksync_testkit::fleet::write_entries;
use stacksync_testkit::{Emulator, unique_name};

const DELIVERIES: usize = 200;

fn push(i: usize, repo: &str) -> (Headers, Vec<u8>) {
    stacksync_testkit::pushes::github_push(i, repo, "queue")
}

fn at(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() as f64 * q).ceil() as usize).saturating_sub(1)]
}

#[tokio::main]
async fn main() {
    let emulator = Emulator::shared();
    let config = emulator.sdk_config();
    let secret_id = unique_name("bench-queue");
    aws_sdk_secretsmanager::Client::new(&config)
        .create_secret()
        .name(&secret_id)
        .secret_string("bench-secret")
        .send()
        .await
        .expect("secret");
    let sqs = aws_sdk_sqs::Client::new(&config);
    let sfn = aws_sdk_sfn::Client::new(&config);
    let machine = emulator.pass_machine("bench-queue").await;
    println!("## Webhook: answer through the queue, then the consumer's starts");
    println!();
    println!(
        "{DELIVERIES} signed pushes per row (each a new commit and delivery id), the secret cached; the consumer's time for one delivery's message, its executions started in the emulator's Step Functions."
    );
    println!();
    println!(
        "| stacks that follow | answer p50 | answer p99 | answer max | consumer: one delivery's starts |"
    );
    println!("|---|---|---|---|---|");
    for followers in [1usize, 500, 5_000] {
        let registry = emulator
            .new_registry(&format!("bench-queue-{followers}"))
            .await;
        let repo = format!("q{followers}");
        let mut yaml = String::from("stacks:\n");
        for i in 0..followers {
            yaml.push_str(&format!(
                "  - {{name: {repo}-{i}, source: {{git: 'https://github.com/acme/{repo}.git', path: s{i}.yaml}}}}\n"
            ));
        }
        let specs = parse_manifest("stacks.yaml", &yaml).expect("stacks");
        let now = now_millis();
        let entries: Vec<StackEntry> = specs
            .iter()
            .map(|s| StackEntry::registered(&s.name, s, now))
            .collect();
        write_entries(registry.table(), &entries).await;
        let url = sqs
            .create_queue()
            .queue_name(unique_name("deliveries"))
            .send()
            .await
            .expect("queue")
            .queue_url
            .expect("url");
        let webhook = Webhook {
            queue: DeliveryQueue::to(Arc::new(SqsQueue::new(sqs.clone(), &url))),
            registry,
            starter: Executions::new(sfn.clone(), &machine),
            secrets: Secrets::new(SecretLocation::SecretsManager(secret_id.clone()), &config),
            registry_sources: None,
        };
        let mut millis = Vec::with_capacity(DELIVERIES);
        for i in 0..=DELIVERIES {
            let (headers, raw) = push(i, &repo);
            let started = Instant::now();
            let answer = webhook.handle(&headers, &raw, now_millis()).await;
            assert_eq!(answer.status, 202, "{}", answer.body);
            // The first warms the secret's cache.
            if i > 0 {
                millis.push(started.elapsed().as_secs_f64() * 1000.0);
            }
        }
        millis.sort_by(f64::total_cmp);
        // The consumer: one message, every follower started.
        let out = sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(1)
            .send()
            .await
            .expect("received");
        let body = out.messages.unwrap_or_default()[0]
            .body
            .clone()
            .expect("body");
        let started = Instant::now();
        let consumed = webhook
            .consume(&body, now_millis())
            .await
            .expect("consumed");
        let took = started.elapsed().as_secs_f64();
        let count = serde_json::to_value(&consumed).expect("json")["started"]
            .as_u64()
            .unwrap_or(0);
        assert_eq!(count as usize, followers, "{consumed:?}");
        println!(
            "| {followers} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} s ({count} started) |",
            at(&millis, 0.5),
            at(&millis, 0.99),
            millis.last().copied().unwrap_or(0.0),
            took
        );
    }
}
