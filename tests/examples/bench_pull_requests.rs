//! A pull request's preview, end to end on the emulator: a signed GitHub
//! `pull_request` delivery through the webhook, the event on the
//! emulator's bus to a queue (as EventBridge delivers it to the preview
//! function's rule), the review (each touched stack's change set made,
//! described and deleted), and the comment and status posted to a fake of
//! GitHub's API on 127.0.0.1. For 1, 10 and 50 touched stacks: the time
//! from the delivery to the comment, by part, and the Git host API calls
//! of a first push and of the next. `scripts/bench prs`.
#![allow(clippy::unwrap_used, clippy::print_stdout)] // a bench: a failed unwrap is a failed bench

use std::time::{Duration, Instant};

use serde_json::json;
use stacksync::clock::now_millis;
use stacksync::fakes::RecordingStarter;
use stacksync::reconcile::review::{Reviewed, pull_request_event};
use stacksync::triggers::webhook::handler::{Relay, Webhook};
use stacksync_testkit::bus::{queue_for, received};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::git_hosts::{GitHostApi, github_pull_request, signed_github_pull_request};
use stacksync_testkit::harness::Harness;
use stacksync_testkit::http::{Config, GitHttpServer};
use stacksync_testkit::{Emulator, unique_name};

const SECRET: &str = "bench-pull-requests";
const QUEUE: &[u8] = b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";

fn queue(delay: u32) -> Vec<u8> {
    format!(
        "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      DelaySeconds: {delay}\n"
    )
    .into_bytes()
}

fn git(repo: &GitRepo, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(&repo.dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// One measured push: (delivery → answer, answer → event received,
/// review, total) and the API calls it made.
struct Push {
    webhook: Duration,
    bus: Duration,
    review: Duration,
    total: Duration,
    calls: Vec<String>,
}

#[tokio::main]
async fn main() {
    println!("## Pull requests (scripts/bench prs)");
    println!();
    println!(
        "| touched stacks | delivery → answer | → event received | review (previews, comment, status) | delivery → comment | API calls, first push | API calls, next push |"
    );
    println!("|---|---|---|---|---|---|---|");
    for n in [1usize, 10, 50] {
        let (first, next) = bench(n).await;
        println!(
            "| {n} | {:.2} s | {:.2} s | {:.2} s | **{:.2} s** | {} ({}) | {} ({}) |",
            first.webhook.as_secs_f64(),
            first.bus.as_secs_f64(),
            first.review.as_secs_f64(),
            first.total.as_secs_f64(),
            first.calls.len(),
            kinds(&first.calls),
            next.calls.len(),
            kinds(&next.calls),
        );
    }
}

/// `GET comments 1, POST status 1`: the calls by kind.
fn kinds(calls: &[String]) -> String {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for call in calls {
        let (method, path) = call.split_once(' ').unwrap_or((call, ""));
        let what = if path.contains("/comments") {
            "comments"
        } else if path.contains("/statuses") {
            "status"
        } else {
            "other"
        };
        *counts.entry(format!("{method} {what}")).or_default() += 1;
    }
    counts
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn bench(n: usize) -> (Push, Push) {
    let token = unique_name("tok");
    let base = std::env::temp_dir().join(unique_name("bench-prs"));
    let repo = GitRepo::new_in(&base.join("acme"), "infra");
    let files: Vec<(String, Vec<u8>)> = (0..n)
        .map(|i| (format!("t{i}.yaml"), QUEUE.to_vec()))
        .collect();
    let borrowed: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    repo.commit(&borrowed, "stacks");
    let server = GitHttpServer::serve(
        &base,
        Config {
            accounts: vec![("x-access-token".into(), token.clone())],
            ..Config::default()
        },
    );
    let url = server.url(&repo);
    let api = GitHostApi::serve(&token);
    let emulator = Emulator::shared();
    let secret = emulator
        .put_secret(
            &unique_name("gh"),
            &json!({"token": token, "username": "x-access-token", "hosts": ["127.0.0.1"], "apiUrl": api.api_url("github")}).to_string(),
        )
        .await;
    let h = Harness::new("bench-prs").await;
    let prefix = unique_name("b").replace('-', "x");
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}x{i}")).collect();
    let mut yaml = String::from("stacks:\n");
    for (i, name) in names.iter().enumerate() {
        yaml.push_str(&format!(
            "  - name: {name}\n    source: {{git: '{url}', path: t{i}.yaml, credentialsSecret: '{secret}'}}\n"
        ));
    }
    h.apply(&yaml).await;
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    h.run_due(&refs).await;

    let (webhook, reviewer, relayed) = wired(&h).await;
    let table = h.steps.registry.table().to_owned();
    git(&repo, &["checkout", "-q", "-b", "feature"]);
    let mut pushes = Vec::new();
    for (round, action) in [(5u32, "opened"), (9, "synchronize")] {
        let changed: Vec<(String, Vec<u8>)> = (0..n)
            .map(|i| (format!("t{i}.yaml"), queue(round)))
            .collect();
        let borrowed: Vec<(&str, &[u8])> = changed
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_slice()))
            .collect();
        let head = repo.commit(&borrowed, action);
        git(&repo, &["update-ref", "refs/pull/7/head", &head]);
        let body = github_pull_request(&url, action, &head, false);
        let headers = signed_github_pull_request(&body, SECRET);
        let before = api.calls().len();
        let started = Instant::now();
        let answer = webhook.handle(&headers, &body, now_millis()).await;
        assert_eq!(
            answer.body["result"], "relayed to the preview",
            "{answer:?}"
        );
        let answered = started.elapsed();
        let events = received(&relayed, 1, Duration::from_secs(30)).await;
        let got = started.elapsed();
        let pr = pull_request_event(&events[0], &table).unwrap();
        let reviewed = reviewer.review(&pr).await.unwrap();
        let total = started.elapsed();
        let Reviewed::Posted {
            stacks,
            comment,
            status,
        } = reviewed
        else {
            panic!("{reviewed:?}")
        };
        assert_eq!(stacks.len(), n);
        assert!(stacks.iter().all(|(_, a)| *a == "update"), "{stacks:?}");
        comment.unwrap();
        status.unwrap();
        pushes.push(Push {
            webhook: answered,
            bus: got - answered,
            review: total - got,
            total,
            calls: api.calls()[before..].to_vec(),
        });
    }
    assert_eq!(api.comments("github", "acme/infra", 7).len(), 1);
    let next = pushes.pop().unwrap();
    (pushes.pop().unwrap(), next)
}

type Bench = (
    Webhook<stacksync::registry::Registry, RecordingStarter, stacksync::adapters::secrets::Secrets>,
    stacksync::wiring::SdkReviewer,
    String,
);

/// The webhook (relaying to the emulator's bus), the preview's reviewer,
/// and the queue the relayed events reach.
async fn wired(
    h: &Harness<stacksync::adapters::cloudformation::SdkCloudFormationFactory>,
) -> Bench {
    let emulator = Emulator::shared();
    let config = emulator.sdk_config();
    let table = h.steps.registry.table().to_owned();
    let relayed = queue_for(json!({
        "source": ["stacksync"], "detail-type": ["Pull Request Changed"],
        "detail": {"installation": [table]}
    }))
    .await;
    let webhook = Webhook {
        queue: Default::default(),
        registry: h.steps.registry.clone(),
        starter: RecordingStarter::new(),
        secrets: stacksync::adapters::secrets::Secrets::new(
            stacksync::adapters::secrets::SecretLocation::Fixed(vec![SECRET.into()]),
            &config,
        ),
        registry_sources: Some(Relay {
            bus: stacksync::wiring::event_bus(&config, "default"),
            installation: table.clone(),
            preview_forks: false,
        }),
    };
    let reviewer = stacksync::wiring::sdk_reviewer(
        &config,
        h.steps.registry.clone(),
        h.steps.blobs.bucket(),
        Some(emulator.endpoint()),
        Default::default(),
    );
    (webhook, reviewer, relayed)
}
