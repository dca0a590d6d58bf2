//! A registry source of 1,000 entries, against the emulator's DynamoDB and
//! a Git repository served by `git daemon` on 127.0.0.1: the first apply,
//! a one-entry change and a one-entry removal (wall time, DynamoDB calls by
//! operation, fetches), then an idle scheduler run (the ref unmoved) next
//! to one with no registry source. `scripts/bench sources`.
#![allow(clippy::unwrap_used, clippy::print_stdout)] // a bench: a failed unwrap is a failed bench

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::clock::now_millis;
use stacksync::fakes::RecordingStarter;
use stacksync::ports::Notifier;
use stacksync::registry::{Registry, RegistrySources};
use stacksync::registry_source::SourceSpec;
use stacksync::triggers::registry_source::{Installation, Outcome, sync_source};
use stacksync::triggers::scheduler::{Config, Scheduler};
use stacksync_testkit::counted::CallCounter;
use stacksync_testkit::git::{GitDaemon, GitRepo};
use stacksync_testkit::harness::Counting;
use stacksync_testkit::{Emulator, unique_name};

const ENTRIES: usize = 1_000;

/// The sources, with their resolves and fetches counted.
type Counted = Counting<stacksync::adapters::sources::Sources>;

fn stacks_file(prefix: &str, tagged: Option<usize>, without: Option<usize>) -> String {
    let mut text = String::from("stacks:\n");
    for i in 0..ENTRIES {
        if Some(i) == without {
            continue;
        }
        text.push_str(&format!(
            "  - name: {prefix}-{i:04}\n    source: {{ path: ./t.yaml }}\n"
        ));
        if Some(i) == tagged {
            text.push_str("    tags: { team: payments }\n");
        }
    }
    text
}

fn by_operation(calls: &[String]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for call in calls {
        *counts
            .entry(call.trim_start_matches("dynamodb:"))
            .or_default() += 1;
    }
    counts
        .iter()
        .map(|(op, n)| format!("{op} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn writes(calls: &[String]) -> usize {
    calls
        .iter()
        .filter(|c| {
            [
                "dynamodb:TransactWriteItems",
                "dynamodb:UpdateItem",
                "dynamodb:PutItem",
                "dynamodb:DeleteItem",
            ]
            .contains(&c.as_str())
        })
        .count()
}

#[tokio::main]
async fn main() {
    let emulator = Emulator::shared();
    let calls = CallCounter::new("dynamodb");
    let registry: Registry = emulator
        .new_registry_with(emulator.dynamodb_counted(&calls), "bench-regsrc")
        .await;
    let repo = GitRepo::new("bench-regsrc");
    let daemon = GitDaemon::serve(&repo);
    let url = daemon.url(&repo);
    let prefix = unique_name("b").replace('-', "");
    let template = b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";
    repo.commit(
        &[
            ("stacks.yaml", stacks_file(&prefix, None, None).as_bytes()),
            ("t.yaml", template),
        ],
        "1,000 stacks",
    );
    let spec = SourceSpec {
        name: "bench".into(),
        url: url.clone(),
        reference: "main".into(),
        path: "stacks.yaml".into(),
        credentials_secret: None,
        signed_by: vec![],
        insecure: true,
    };
    registry.add_registry_source(&spec).await.unwrap();
    let sources = Counting::new(stacksync::wiring::sdk_sources(
        &emulator.sdk_config(),
        true,
        &std::env::temp_dir().join(unique_name("bench-regsrc")),
    ));
    let installation = Installation {
        name: registry.table().to_owned(),
        home: registry.region(),
        policy: Default::default(),
    };

    println!(
        "## A registry source of {ENTRIES} entries (one stacks file, git daemon on 127.0.0.1)"
    );
    println!();
    println!(
        "| step | outcome | wall time | DynamoDB calls | of which writes | by operation | fetches |"
    );
    println!("|---|---|---|---|---|---|---|");
    let steps: [(&str, Option<String>); 4] = [
        ("first apply", None),
        (
            "one entry changed (a tag)",
            Some(stacks_file(&prefix, Some(7), None)),
        ),
        (
            "one entry removed",
            Some(stacks_file(&prefix, Some(7), Some(8))),
        ),
        ("the same commit read again", None),
    ];
    for (i, (step, text)) in steps.into_iter().enumerate() {
        if let Some(text) = text {
            repo.commit(&[("stacks.yaml", text.as_bytes())], step);
        }
        let source = registry.registry_source("bench").await.unwrap().unwrap();
        let (mark, fetched) = (calls.len(), sources.fetches.load(Ordering::SeqCst));
        let started = Instant::now();
        let outcome = sync_source(
            &registry,
            &sources,
            &Notifier::none(),
            &installation,
            &source,
            None,
            now_millis(),
        )
        .await
        .unwrap();
        let took = started.elapsed();
        let made = calls.since(mark);
        let said = match &outcome {
            Outcome::Applied {
                created,
                updated,
                pruned,
                unchanged,
                ..
            } => format!(
                "{} created, {} updated, {} pruned, {unchanged} unchanged",
                created.len(),
                updated.len(),
                pruned.len()
            ),
            other => format!("{other:?}"),
        };
        assert!(
            i == 3 || matches!(outcome, Outcome::Applied { .. }),
            "{outcome:?}"
        );
        println!(
            "| {step} | {said} | {} ms | {} | {} | {} | {} |",
            took.as_millis(),
            made.len(),
            writes(&made),
            by_operation(&made),
            sources.fetches.load(Ordering::SeqCst) - fetched
        );
    }

    idle_runs(&registry, &calls, &sources).await;
}

/// Idle scheduler runs: `registry` (one source, its ref unmoved) next to an
/// empty one (no registry source).
async fn idle_runs(registry: &Registry, calls: &CallCounter, sources: &Counted) {
    let emulator = Emulator::shared();
    // Idle scheduler runs: this registry (one source, its ref unmoved) next
    // to an empty one (no registry source).
    println!();
    println!("### An idle scheduler run (the source's ref unmoved)");
    println!();
    println!("| registry | DynamoDB queries | DynamoDB writes | ref listings | fetches | time |");
    println!("|---|---|---|---|---|---|");
    let empty_calls = CallCounter::new("dynamodb");
    let empty = emulator
        .new_registry_with(emulator.dynamodb_counted(&empty_calls), "bench-empty")
        .await;
    let cfn = || SdkCloudFormationFactory::new(emulator.sdk_config()).for_installation("bench");
    let with_source = Scheduler {
        registry: registry.clone(),
        starter: RecordingStarter::new(),
        sources: sources.clone(),
        cloudformation: cfn(),
        config: Config::default(),
    };
    // Settle: the entries were made due by the apply; the first run starts
    // (records) them and moves them out of the queue.
    for _ in 0..30 {
        let report = with_source.run(now_millis()).await.unwrap();
        if report.started.is_empty() && report.due == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for (label, counter, is_empty) in [
        ("one registry source of 1,000 entries", calls, false),
        ("no registry source, no entry", &empty_calls, true),
    ] {
        let (mark, fetched, listed) = (
            counter.len(),
            sources.fetches.load(Ordering::SeqCst),
            sources.resolves.load(Ordering::SeqCst),
        );
        let started = Instant::now();
        if is_empty {
            let s = Scheduler {
                registry: empty.clone(),
                starter: RecordingStarter::new(),
                sources: sources.clone(),
                cloudformation: cfn(),
                config: Config::default(),
            };
            s.run(now_millis()).await.unwrap();
        } else {
            let report = with_source.run(now_millis()).await.unwrap();
            assert!(report.registry_source_outcomes.is_empty(), "{report:?}");
        }
        let took = started.elapsed();
        let made = counter.since(mark);
        let queries = made
            .iter()
            .filter(|c| c.as_str() == "dynamodb:Query")
            .count();
        println!(
            "| {label} | {queries} | {} | {} | {} | {} ms |",
            writes(&made),
            sources.resolves.load(Ordering::SeqCst) - listed,
            sources.fetches.load(Ordering::SeqCst) - fetched,
            took.as_millis()
        );
    }
}
