//! One fleet entry over 500 targets (250 accounts × 2 regions), against the
//! emulator's DynamoDB and CloudFormation (each account reached through
//! `assumeRoleArn`): the apply (time, DynamoDB calls), the registry's items
//! and their sizes (DynamoDB's rule: names plus values), and idle scheduler
//! runs over the 500 targets in their steady state (time by phase,
//! DynamoDB calls, `ListStacks` calls). `scripts/bench fleet`.
#![allow(clippy::unwrap_used, clippy::print_stdout)] // a bench: a failed unwrap is a failed bench

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use aws_sdk_dynamodb::types::AttributeValue;
use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::clock::now_millis;
use stacksync::fakes::RecordingStarter;
use stacksync::manifest::parse_manifest;
use stacksync::registry::plan::Writer;
use stacksync::registry::targets::{Units, plan_with_fleets};
use stacksync::registry::{Schedule, Specs, StackEntry, apply_plan};
use stacksync::seen::Seen;
use stacksync::source::source_key;
use stacksync::status::{Phase, Timestamp};
use stacksync::triggers::fleets::record_fleets;
use stacksync::triggers::scheduler::{Config, Scheduler};
use stacksync_testkit::counted::CallCounter;
use stacksync_testkit::fleet::write_entries;
use stacksync_testkit::git::{GitDaemon, GitRepo};
use stacksync_testkit::{Emulator, unique_name};

const ACCOUNTS: u64 = 250;
const REGIONS: [&str; 2] = ["eu-central-1", "sa-east-1"];
const TEMPLATE: &str =
    r#"{"Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}"#;

fn by_operation(calls: &[String]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for call in calls {
        *counts
            .entry(call.split(':').nth(1).unwrap_or(call))
            .or_default() += 1;
    }
    counts
        .iter()
        .map(|(op, n)| format!("{op} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// DynamoDB's size of a value: strings and numbers by their bytes, maps and
/// lists by their elements plus 3 bytes, each map key by its bytes.
fn value_size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => n.len().div_ceil(2) + 1,
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, v)| k.len() + value_size(v) + 1)
                .sum::<usize>()
        }
        AttributeValue::L(l) => 3 + l.iter().map(|v| value_size(v) + 1).sum::<usize>(),
        AttributeValue::Ss(v) => v.iter().map(String::len).sum(),
        _ => 0,
    }
}

fn item_size(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

async fn item_sizes(table: &str) -> BTreeMap<String, Vec<usize>> {
    let client = Emulator::shared().dynamodb();
    let mut sizes: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut start = None;
    loop {
        let out = client
            .scan()
            .table_name(table)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        for item in out.items() {
            let pk = item["pk"].as_s().unwrap();
            let kind = pk.split('#').next().unwrap_or_default().to_owned();
            sizes.entry(kind).or_default().push(item_size(item));
        }
        start = out.last_evaluated_key().cloned();
        if start.is_none() {
            break;
        }
    }
    sizes
}

/// Each target's stack, created in its account and region: what its last
/// run would have recorded of it.
async fn create_stacks(entries: &[StackEntry], name: &str) -> BTreeMap<String, Seen> {
    let mut tasks = tokio::task::JoinSet::new();
    let mut seen = BTreeMap::new();
    for entry in entries {
        let target = entry.spec.target_of.clone().unwrap();
        let role = entry.spec.assume_role_arn.clone().unwrap();
        let (entry_name, name) = (entry.name.clone(), name.to_owned());
        tasks.spawn(async move {
            let config = Emulator::shared().assumed_config(&role).await;
            let config = config
                .to_builder()
                .region(aws_config::Region::new(target.region.clone()))
                .build();
            let cfn = aws_sdk_cloudformation::Client::new(&config);
            let id = cfn
                .create_stack()
                .stack_name(&name)
                .template_body(TEMPLATE)
                .send()
                .await
                .unwrap()
                .stack_id()
                .unwrap()
                .to_owned();
            let described = cfn.describe_stacks().stack_name(&id).send().await.unwrap();
            let at = described.stacks()[0]
                .creation_time()
                .unwrap()
                .to_millis()
                .unwrap();
            let seen = Seen {
                region: Some(target.region),
                assume_role_arn: Some(role),
                stack_id: id,
                changed_at: Timestamp(at),
                stack_status: "CREATE_COMPLETE".into(),
                drift: None,
                deployed_hash: String::new(),
                interval_seconds: 600,
                drift_seconds: None,
            };
            (entry_name, seen)
        });
        while tasks.len() >= 16 {
            let (n, s) = tasks.join_next().await.unwrap().unwrap();
            seen.insert(n, s);
        }
    }
    while let Some(done) = tasks.join_next().await {
        let (n, s) = done.unwrap();
        seen.insert(n, s);
    }
    seen
}

#[tokio::main]
async fn main() {
    let emulator = Emulator::shared();
    let calls = CallCounter::new("dynamodb");
    let registry = emulator
        .new_registry_with(emulator.dynamodb_counted(&calls), "bench-fleet")
        .await;
    let repo = GitRepo::new("bench-fleet");
    repo.commit(&[("t.json", TEMPLATE.as_bytes())], "first");
    let daemon = GitDaemon::serve(&repo);
    let url = daemon.url(&repo);
    let name = unique_name("fleet").replace('-', "x");
    let accounts: Vec<String> = (0..ACCOUNTS)
        .map(|i| format!("'{}'", 300_000_000_000 + i * 7919))
        .collect();
    let text = format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{url}', path: t.json, insecure: true}}\n    \
         assumeRoleArn: 'arn:aws:iam::{{account}}:role/stacksync-target'\n    targets: {{accounts: \
         [{}], regions: [{}]}}\n",
        accounts.join(", "),
        REGIONS.join(", ")
    );
    let desired = parse_manifest("fleet.yaml", &text).unwrap();

    // The apply, as `stacksync apply` makes it.
    let at = Instant::now();
    let mark = calls.len();
    let now = now_millis();
    let current = registry.list().await.unwrap();
    let plan =
        plan_with_fleets(&desired, &Units::new(), &current, false, None, Writer::Cli).unwrap();
    apply_plan(&registry, &plan, now, |_| {}).await.unwrap();
    record_fleets(&registry, &desired, &Units::new(), false, now)
        .await
        .unwrap();
    let applied = calls.since(mark);
    println!(
        "apply: {} targets, {} ms, DynamoDB calls: {} ({})",
        plan.writes().count(),
        at.elapsed().as_millis(),
        applied.len(),
        by_operation(&applied)
    );
    for (kind, sizes) in item_sizes(registry.table()).await {
        let mut sorted = sizes.clone();
        sorted.sort_unstable();
        println!(
            "items {kind}#: {} items, {} bytes in all, each min {} / median {} / max {} bytes",
            sorted.len(),
            sorted.iter().sum::<usize>(),
            sorted[0],
            sorted[sorted.len() / 2],
            sorted[sorted.len() - 1]
        );
    }

    // The steady state: every target's stack made, its entry as its run left it.
    let at = Instant::now();
    let entries: Vec<StackEntry> = registry.list().await.unwrap();
    let seen = create_stacks(&entries, &name).await;
    println!(
        "{} stacks created in {} ms",
        seen.len(),
        at.elapsed().as_millis()
    );
    let head = repo.head();
    let steady: Vec<StackEntry> = entries
        .into_iter()
        .map(|mut e| {
            e.status.phase = Phase::Ready;
            e.status.run.observed_spec_version = e.spec_version;
            e.status.run.last_attempted_revision = Some(head.clone());
            e.status.applied.last_applied_revision = Some(head.clone());
            e.status.times.last_reconcile_at = Some(Timestamp(now - 60_000));
            e.status.times.next_reconcile_at = None;
            e.status.stack.status = Some("CREATE_COMPLETE".into());
            e.status.findings.drift = Some(stacksync::drift::DriftRecord {
                checked_at: Some(Timestamp(now - 3_600_000)),
                ..Default::default()
            });
            e.status.applied.seen = seen.get(&e.name).cloned();
            e
        })
        .collect();
    write_entries(registry.table(), &steady).await;
    let key = source_key(&url, Some("main"));
    registry.add_source(&key, &url, "main", None).await.unwrap();
    registry
        .record_source_head(&key, None, &head, now)
        .await
        .unwrap();

    idle_runs(&registry, &calls).await;
}

/// Three idle scheduler runs over the fleet's targets, each counted.
async fn idle_runs(registry: &stacksync::registry::Registry, calls: &CallCounter) {
    let emulator = Emulator::shared();
    let cfn_calls = CallCounter::new("cloudformation");
    let scheduler = Scheduler {
        registry: registry.clone(),
        starter: RecordingStarter::new(),
        sources: stacksync::adapters::git::GitFetcher::new(std::env::temp_dir()),
        cloudformation: SdkCloudFormationFactory::new(emulator.sdk_config_counted(&cfn_calls))
            .for_installation(registry.table()),
        config: Config::default(),
    };
    for run in 1..=3 {
        let (mark, cfn_mark) = (calls.len(), cfn_calls.len());
        let report = scheduler.run(now_millis()).await.unwrap();
        let made = calls.since(mark);
        let listed = cfn_calls.since(cfn_mark);
        let t = report.timing;
        println!(
            "idle run {run}: {} ms (queue {} ms, sources {} ms, watch read {} ms, listing {} ms, own \
             work {} ms); started {}; stacks watched {}, fine {}; DynamoDB calls {} ({}); \
             CloudFormation calls {} ({}); errors {:?}",
            t.total.as_millis(),
            t.queue.as_millis(),
            t.sources.as_millis(),
            t.watch_read.as_millis(),
            t.listing.as_millis(),
            t.own_work().as_millis(),
            report.started.len(),
            report.stacks_watched,
            report.stacks_fine,
            made.len(),
            by_operation(&made),
            listed.len(),
            by_operation(&listed),
            report.errors.iter().take(3).collect::<Vec<_>>()
        );
    }
}
