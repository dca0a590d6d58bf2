//! Cost of a reconcile, measured: AWS API calls by operation, Lambda
//! invocations and state transitions per scenario (create, update, no-op),
//! and the wall time of each local run. Run by `scripts/bench`, which owns its
//! emulator (the recording is reset between scenarios). Prints Markdown.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::json;
use stacksync::asl::{Outcome, Progress, RunOptions};
use stacksync_testkit::git::{GitDaemon, GitRepo};
use stacksync_testkit::harness::Harness;
use stacksync_testkit::{Emulator, unique_name};

const V1: &[u8] = b"Parameters:\n  Retention: {Type: Number, Default: 345600}\nResources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      MessageRetentionPeriod: !Ref Retention\n";
const V2: &[u8] = b"Parameters:\n  Retention: {Type: Number, Default: 345600}\nResources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      MessageRetentionPeriod: !Ref Retention\n  DeadLetters:\n    Type: AWS::SQS::Queue\n";

struct Measured {
    scenario: &'static str,
    millis: u128,
    operations: BTreeMap<String, usize>,
    lambdas: usize,
    transitions: usize,
}

#[tokio::main]
async fn main() {
    let emulator = Emulator::shared();
    let h = Harness::new("bench").await;
    let repo = GitRepo::new("bench");
    let daemon = GitDaemon::serve(&repo);
    repo.commit(&[("queue.yaml", V1)], "v1");
    let name = unique_name("bench").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: queue.yaml}}\n    pollInterval: 1s\n",
        daemon.url(&repo)
    ))
    .await;

    let mut results = Vec::new();
    for scenario in ["create", "update", "no-op"] {
        match scenario {
            "update" => drop(repo.commit(&[("queue.yaml", V2)], "v2")),
            "no-op" => drop(repo.commit(&[("README.md", b"docs")], "docs")),
            _ => {}
        }
        emulator.reset_recording();
        let mut lambdas = 0;
        let mut transitions = 0;
        let started = Instant::now();
        let options = RunOptions {
            speedup: 1.0,
            ..RunOptions::default()
        };
        let outcome = h
            .machine
            .execute(
                &h.steps,
                &unique_name(scenario),
                json!({"stackId": name, "trigger": {"kind": "manual"}}),
                &options,
                &mut |event, _| match event {
                    Progress::StateEntered { kind, .. } => {
                        transitions += 1;
                        if kind == "Task" {
                            lambdas += 1;
                        }
                    }
                    Progress::TaskFailed {
                        retry_in: Some(_), ..
                    } => lambdas += 1,
                    _ => {}
                },
            )
            .await;
        let millis = started.elapsed().as_millis();
        assert!(
            matches!(outcome, Outcome::Succeeded(_)),
            "{scenario}: {outcome:?}"
        );
        let mut operations = BTreeMap::new();
        for op in emulator.recorded_operations() {
            *operations.entry(op).or_insert(0) += 1;
        }
        results.push(Measured {
            scenario,
            millis,
            operations,
            lambdas,
            transitions,
        });
    }

    println!(
        "| scenario | wall time (local runner, real waits) | Lambda invocations | state transitions | AWS API calls | CloudFormation calls |"
    );
    println!("|---|---|---|---|---|---|");
    for r in &results {
        let total: usize = r.operations.values().sum();
        let cfn: usize = r
            .operations
            .iter()
            .filter(|(k, _)| k.starts_with("cloudformation:"))
            .map(|(_, v)| v)
            .sum();
        println!(
            "| {} | {:.2} s | {} | {} | {} | {} |",
            r.scenario,
            r.millis as f64 / 1000.0,
            r.lambdas,
            r.transitions,
            total,
            cfn
        );
    }
    println!();
    let all: std::collections::BTreeSet<&String> =
        results.iter().flat_map(|r| r.operations.keys()).collect();
    println!(
        "| operation | {} |",
        results
            .iter()
            .map(|r| r.scenario)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|{}", "---|".repeat(results.len()));
    for op in all {
        let counts: Vec<String> = results
            .iter()
            .map(|r| r.operations.get(op).copied().unwrap_or(0).to_string())
            .collect();
        println!("| `{op}` | {} |", counts.join(" | "));
    }
}
