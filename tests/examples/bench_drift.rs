//! Drift detection for 1,000 stacks checked daily, counted: the real drift
//! function run every 5 minutes of simulated time (on the scheduler's
//! schedule) against the scripted CloudFormation (the emulator has no
//! drift detection) and the registry in memory, every call counted by
//! operation. Day 1 is the first detection of every stack (none checked
//! yet); day 2 is the steady state. DynamoDB units are computed from the
//! size of the items written and read (the registry's own item encoding).
//! Run by `scripts/bench drift` (and by `scripts/bench`); prints Markdown.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use stacksync::clock::EpochMillis;
use stacksync::fakes::{Failing, ScriptedCloudFormation, stack_id, summary};
use stacksync::ports::drift::{DetectionStatus, DriftDetection};
use stacksync::registry::memory::MemoryRegistry;
use stacksync::registry::{StackEntry, entry_item, item::status_attributes};
use stacksync::seen::Seen;
use stacksync::stack_status::StackStatus;
use stacksync::status::Timestamp;
use stacksync::triggers::drift::{Config, DriftPass};
use stacksync_testkit::fleet::steady_entry;

const STACKS: usize = 1_000;
const RUN_EVERY: EpochMillis = 5 * 60_000;
const DAY: EpochMillis = 86_400_000;
const START: EpochMillis = 1_800_000_000_000;
/// Prices (us-east-1, on-demand): as BENCHMARKS.md's cost table.
const READ_UNIT: f64 = 0.125 / 1e6;
const WRITE_UNIT: f64 = 0.625 / 1e6;
const GB_SECOND: f64 = 0.000_016_666_7;
/// An assumed AWS call latency, for the Lambda time a detection adds.
const CALL_SECONDS: f64 = 0.05;

/// DynamoDB's size of an item: names and values, in bytes (numbers
/// counted as their digits, which overstates them a little).
fn size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) | AttributeValue::N(s) => s.len(),
        AttributeValue::M(m) => m.iter().map(|(k, v)| k.len() + size(v)).sum::<usize>() + 3,
        AttributeValue::L(l) => l.iter().map(size).sum::<usize>() + 3,
        _ => 1,
    }
}

fn item_size(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter().map(|(k, v)| k.len() + size(v)).sum()
}

#[derive(Default, Debug, Clone, Copy)]
struct Day {
    runs_with_starts: usize,
    most_started_in_a_run: usize,
    detections: usize,
    polls: usize,
    reads: usize,
    get_items: usize,
    update_items: usize,
    queries: usize,
}

type Bench = DriftPass<Failing<MemoryRegistry>, ScriptedCloudFormation>;

fn fleet() -> Bench {
    let registry = MemoryRegistry::new();
    let cfn = ScriptedCloudFormation::default();
    for i in 0..STACKS {
        let name = format!("stack-{i:04}");
        let mut entry = steady_entry(&name, "https://git.example/infra.git", "h1", START);
        entry.status.times.next_reconcile_at = None;
        // Never checked: day 1 is every stack's first detection.
        entry.status.findings.drift = None;
        entry.status.applied.seen = Some(Seen {
            region: None,
            assume_role_arn: None,
            stack_id: stack_id(&name, 1),
            changed_at: Timestamp(START - DAY),
            stack_status: "CREATE_COMPLETE".into(),
            drift: None,
            deployed_hash: "h".into(),
            interval_seconds: 600,
            drift_seconds: Some(86_400),
        });
        registry.insert(entry);
        cfn.script()
            .listing
            .push(summary(&name, StackStatus::CreateComplete, START - DAY));
    }
    cfn.script().drift_detections = [DriftDetection {
        status: DetectionStatus::Complete,
        stack_drift: Some("IN_SYNC".into()),
        reason: None,
        drifted_resources: Some(0),
    }]
    .into_iter()
    .collect();
    DriftPass {
        registry: Failing::new(registry),
        cloudformation: cfn,
        config: Config::default(),
    }
}

async fn day(s: &Bench, from: EpochMillis) -> Day {
    let count = |op: &str| s.cloudformation.calls(op);
    let before = (
        count("DetectStackDrift"),
        count("DescribeStackDriftDetectionStatus"),
        count("DescribeStackResourceDrifts"),
        s.registry.calls("GetItem"),
        s.registry.calls("UpdateItem"),
        s.registry.calls("Query"),
    );
    let mut d = Day::default();
    let mut at = from;
    while at < from + DAY {
        let report = s.run(at).await.expect("the registry answers");
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        if report.started > 0 {
            d.runs_with_starts += 1;
        }
        d.most_started_in_a_run = d.most_started_in_a_run.max(report.started);
        at += RUN_EVERY;
    }
    d.detections = count("DetectStackDrift") - before.0;
    d.polls = count("DescribeStackDriftDetectionStatus") - before.1;
    d.reads = count("DescribeStackResourceDrifts") - before.2;
    d.get_items = s.registry.calls("GetItem") - before.3;
    d.update_items = s.registry.calls("UpdateItem") - before.4;
    d.queries = s.registry.calls("Query") - before.5;
    d
}

fn row(what: &str, d: &Day) {
    println!(
        "| {what} | {} | {} | {} | {} | {} | {} | {} | {} |",
        d.detections,
        d.polls,
        d.reads,
        d.get_items,
        d.update_items,
        d.queries,
        d.runs_with_starts,
        d.most_started_in_a_run
    );
}

#[tokio::main]
async fn main() {
    let s = fleet();
    let first = day(&s, START).await;
    let steady = day(&s, START + DAY).await;
    println!(
        "| day ({STACKS} stacks, `drift.interval` 24h, a drift run every 5 min, `MaxDriftDetections` 10) \
         | DetectStackDrift | DescribeStackDriftDetectionStatus | DescribeStackResourceDrifts | \
         DynamoDB GetItem | DynamoDB UpdateItem | DynamoDB Query | runs that started detections | most started in one run |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    row("1: every stack's first detection", &first);
    row("2: steady state", &steady);
    // Sizes: a stack's item and its `watch` copy, without and with a drift record.
    let entries: Vec<StackEntry> = stacksync::registry::Specs::list(&s.registry.inner)
        .await
        .expect("listed");
    let with = entries
        .iter()
        .find(|e| e.status.findings.drift.is_some())
        .expect("checked")
        .clone();
    let mut without = with.clone();
    without.status.findings.drift = None;
    let item = item_size(&entry_item(&with));
    let watch = |e: &StackEntry| size(&status_attributes(&e.status).1);
    let per_detection_reads = steady.get_items as f64 / steady.detections.max(1) as f64;
    let per_detection_writes = steady.update_items as f64 / steady.detections.max(1) as f64;
    let read_units = item.div_ceil(4096) as f64; // GetItem, strongly consistent
    let write_units = item.div_ceil(1024) as f64;
    let month = 730.0 / 24.0;
    let dynamo_month = steady.detections as f64
        * month
        * (per_detection_reads * read_units * READ_UNIT
            + per_detection_writes * write_units * WRITE_UNIT);
    // The drift function reads the whole watch index on every run (its own
    // read: the scheduler's health check reads it too), which carries
    // `watch.drift`; eventually consistent, 4 KB a half unit.
    let index_bytes = watch(&with) * STACKS;
    let index_month = index_bytes as f64 / 4096.0 * 0.5 * (730.0 * 12.0) * READ_UNIT;
    let calls_per_detection =
        (steady.detections + steady.polls + steady.reads) as f64 / steady.detections.max(1) as f64;
    let lambda_month = steady.detections as f64
        * month
        * (calls_per_detection + per_detection_reads + per_detection_writes)
        * CALL_SECONDS
        * 0.25
        * GB_SECOND;
    println!();
    println!(
        "- a stack's item with its drift record: {item} bytes ({} read unit(s) per GetItem, {} write unit(s) per UpdateItem); \
         `watch.drift` adds {} bytes to each stack's entry in the health check's index",
        read_units,
        write_units,
        watch(&with) - watch(&without)
    );
    println!(
        "- per detection (steady state): {calls_per_detection:.2} CloudFormation calls (free), {per_detection_reads:.2} GetItem, {per_detection_writes:.2} UpdateItem"
    );
    println!(
        "- a month of daily detections for {STACKS} stacks: DynamoDB items ${dynamo_month:.4}, the drift function's reads of the watch index ${index_month:.4}, \
         Lambda ${lambda_month:.4} (at an assumed {CALL_SECONDS} s per AWS call); total ${:.4}",
        dynamo_month + index_month + lambda_month
    );
}
