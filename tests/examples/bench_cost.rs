//! What an installation costs per month, in dollars, at 10, 1,000 and
//! 10,000 registered stacks, at the template's defaults (`rate(5 minutes)`,
//! `MaxStartsPerRun` 50, 256 MB functions).
//!
//! Counted, not assumed: every scheduler run is a real run against the
//! emulator (a [`Fleet`]: stacks created in moto's CloudFormation across four
//! regions, the registry in its DynamoDB, 50 Git repositories served by `git
//! daemon` on 127.0.0.1, executions started in its Step Functions); its
//! DynamoDB calls counted by the registry client's interceptor, its
//! CloudFormation calls by the port, its time split by phase
//! ([`stacksync::triggers::scheduler::Timing`]). Each kind of execution
//! (an update after a push; a put-back after an out-of-band update) is run
//! once through the reconcile state machine (the local runner) and its calls
//! counted with moto's recorder (this bench owns its emulator). Read and
//! write units are computed from the items read and written, by DynamoDB's
//! size rules (moto meters none). Then multiplied by list prices (below).
//! Run by `scripts/bench`; prints Markdown.
#![recursion_limit = "256"]

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::json;
use stacksync::asl::{Outcome, Progress};
use stacksync::clock::now_millis;
use stacksync::registry::schema::{
    INDEX_BY_NEXT_RECONCILE, INDEX_BY_SHARD, INDEX_BY_SOURCE, INDEXES, PK, SCHED_SHARDS,
    SOURCES_SHARD, attr,
};
use stacksync::source::source_key;
use stacksync::triggers::scheduler::Report;
use stacksync_testkit::counted::count;
use stacksync_testkit::fleet::{Fleet, FleetScheduler};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::{Emulator, unique_name};

/// Registered stacks per installation.
const SIZES: [usize; 3] = [10, 1_000, 10_000];
/// Git repositories (distinct sources), at most one per stack.
const SOURCES: usize = 50;
/// The template's default `MaxStartsPerRun`.
const CAP: usize = 50;
/// Scheduler runs per month at `rate(5 minutes)` (730 hours, as AWS bills).
const RUNS_PER_MONTH: f64 = 8_760.0;
/// Measured idle runs per size (the median is used).
const IDLE_RUNS: usize = 3;

// List prices, us-east-1, on-demand, x86_64, without free tiers (November 2026).
/// Step Functions Standard: per state transition.
const USD_PER_TRANSITION: f64 = 0.025 / 1_000.0;
/// Lambda: per request, and per GB-second.
const USD_PER_REQUEST: f64 = 0.20 / 1_000_000.0;
const USD_PER_GB_SECOND: f64 = 0.000_016_666_7;
/// The functions' memory (template.yaml, Globals).
const LAMBDA_GB: f64 = 0.25;
/// DynamoDB on-demand: per read request unit and write request unit; per
/// GB-month stored.
const USD_PER_RRU: f64 = 0.125 / 1_000_000.0;
const USD_PER_WRU: f64 = 0.625 / 1_000_000.0;
const USD_PER_DDB_GB_MONTH: f64 = 0.25;
/// S3 Standard: PUT/COPY/POST/LIST and GET/HEAD, per request.
const USD_PER_S3_PUT: f64 = 0.005 / 1_000.0;
const USD_PER_S3_GET: f64 = 0.0004 / 1_000.0;
/// CloudWatch Logs ingestion, per GB; the bytes per invocation are an
/// estimate (START, END and REPORT lines, and the function's own JSON lines).
const USD_PER_LOG_GB: f64 = 0.50;
const LOG_BYTES_PER_INVOCATION: f64 = 1_000.0;

/// What one thing costs, counted.
#[derive(Debug, Default, Clone)]
struct Bill {
    transitions: f64,
    invocations: f64,
    gb_seconds: f64,
    rru: f64,
    wru: f64,
    s3_puts: f64,
    s3_gets: f64,
    cloudformation_calls: f64,
}

impl Bill {
    fn dollars(&self) -> f64 {
        self.transitions * USD_PER_TRANSITION
            + self.invocations * (USD_PER_REQUEST + LOG_BYTES_PER_INVOCATION / 1e9 * USD_PER_LOG_GB)
            + self.gb_seconds * USD_PER_GB_SECOND
            + self.rru * USD_PER_RRU
            + self.wru * USD_PER_WRU
            + self.s3_puts * USD_PER_S3_PUT
            + self.s3_gets * USD_PER_S3_GET
    }

    fn times(&self, k: f64) -> Bill {
        Bill {
            transitions: self.transitions * k,
            invocations: self.invocations * k,
            gb_seconds: self.gb_seconds * k,
            rru: self.rru * k,
            wru: self.wru * k,
            s3_puts: self.s3_puts * k,
            s3_gets: self.s3_gets * k,
            cloudformation_calls: self.cloudformation_calls * k,
        }
    }

    fn plus(&self, o: &Bill) -> Bill {
        Bill {
            transitions: self.transitions + o.transitions,
            invocations: self.invocations + o.invocations,
            gb_seconds: self.gb_seconds + o.gb_seconds,
            rru: self.rru + o.rru,
            wru: self.wru + o.wru,
            s3_puts: self.s3_puts + o.s3_puts,
            s3_gets: self.s3_gets + o.s3_gets,
            cloudformation_calls: self.cloudformation_calls + o.cloudformation_calls,
        }
    }
}

/// Scheduler runs for one event at one size.
#[derive(Debug, Default)]
struct Runs {
    runs: usize,
    bill: Bill,
    queries: usize,
    writes: usize,
    started: usize,
    listings: usize,
    reports: Vec<Report>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let emulator = Emulator::shared();
    let update = execution_bill("update").await;
    let put_back = execution_bill("put back").await;
    emulator.moto_api("POST", "/moto-api/recorder/stop-recording", "");
    let mut rows = Vec::new();
    for &n in &SIZES {
        let started = Instant::now();
        let moved = (n / 100).max(1);
        let others = SOURCES.min(n) - 1;
        let mut sizes = vec![moved];
        let rest = n - moved;
        sizes.extend((0..others).map(|i| rest / others + usize::from(i < rest % others)));
        let fleet = Fleet::new(&format!("bcost{n}"), &sizes).await;
        eprintln!(
            "bench_cost: {n} stacks set up in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let scheduler = fleet.scheduler(CAP);
        scheduler.run(now_millis()).await.expect("warm-up run");

        let mut idle = Vec::new();
        for _ in 0..IDLE_RUNS {
            let runs = until_started(&fleet, &scheduler, 0, &[], None).await;
            assert_eq!(runs.started, 0, "idle: {:?}", runs.reports);
            idle.push(runs);
        }
        idle.sort_by_key(|r| r.reports[0].timing.total);
        let idle = idle.swap_remove(IDLE_RUNS / 2);

        // One push: repository 0, which `moved` stacks follow.
        fleet.repos[0].commit(&[("stack.yaml", b"Resources: {} # pushed\n")], "push");
        let key = source_key(&fleet.urls[0], Some("main"));
        let head = fleet.repos[0].head();
        let settle = Some((fleet.urls[0].as_str(), head.as_str()));
        let push = until_started(&fleet, &scheduler, moved, &[key.as_str()], settle).await;

        // 1% changed out of band (spread over the other repositories).
        let changed: Vec<String> = (0..moved)
            .map(|i| fleet.followers[1 + i % others][i / others].clone())
            .collect();
        for name in &changed {
            fleet
                .cfn_of(name)
                .update_stack()
                .stack_name(name)
                .template_body(r#"{"Resources": {"Edited": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}"#)
                .send()
                .await
                .expect("updated out of band");
        }
        // (Each started stack is in the queue until its run ends: no settling.)
        let out_of_band = until_started(&fleet, &scheduler, moved, &[], None).await;
        let storage_gb = table_gb(&fleet).await;
        rows.push(Row {
            stacks: n,
            moved,
            idle,
            push,
            out_of_band,
            storage_gb,
        });
    }
    print(&rows, &update, &put_back);
}

/// One size's figures.
struct Row {
    stacks: usize,
    moved: usize,
    idle: Runs,
    push: Runs,
    out_of_band: Runs,
    storage_gb: f64,
}

/// Scheduler runs until `expected` executions are started (one run when
/// none is expected), each counted. With `settle` (a source's URL and new
/// head), the started followers are then written as their runs would leave
/// them, tried at that head: the fleet's state machine is a Pass state, and
/// a real run takes its stack's lease within seconds of its start, long
/// before the next scheduler run (writes not counted: they are the runs').
async fn until_started(
    fleet: &Fleet,
    scheduler: &FleetScheduler,
    expected: usize,
    moved_sources: &[&str],
    settle: Option<(&str, &str)>,
) -> Runs {
    let mut runs = Runs::default();
    let client = Emulator::shared().dynamodb();
    loop {
        let rru = read_units(&client, fleet.registry.table(), moved_sources).await;
        let (mark, listings) = (
            fleet.calls.len(),
            fleet.cfn_calls.count_of("cloudformation:ListStacks"),
        );
        let report = scheduler.run(now_millis()).await.expect("scheduler run");
        assert_eq!(report.errors, Vec::<String>::new());
        let calls = fleet.calls.since(mark);
        let writes = count(&calls, "dynamodb:UpdateItem") + count(&calls, "dynamodb:DeleteItem");
        let listed = fleet.cfn_calls.count_of("cloudformation:ListStacks") - listings;
        runs.runs += 1;
        runs.queries += count(&calls, "dynamodb:Query");
        runs.writes += writes;
        runs.started += report.started.len();
        runs.listings += listed;
        runs.bill = runs.bill.plus(&Bill {
            invocations: 1.0,
            gb_seconds: report.timing.total.as_secs_f64() * LAMBDA_GB,
            rru,
            // A scheduler write touches a small item: 1 unit, and 1 per index
            // it is in (an upper bound: the by-next-reconcile key moves).
            wru: writes as f64 * 2.0,
            cloudformation_calls: listed as f64,
            ..Bill::default()
        });
        if let Some((url, head)) = settle {
            let now = now_millis();
            let entries: Vec<_> = report
                .started
                .iter()
                .map(|r| fleet.watched_entry(&r.stack, url, head, now))
                .collect();
            fleet.write(&entries).await;
        }
        runs.reports.push(report);
        if runs.started >= expected || runs.runs >= 10 {
            break;
        }
    }
    assert_eq!(runs.started, expected, "{:?}", runs.reports);
    runs
}

/// The read units of one run's queries: the due shards, the sources, the
/// source index of each moved source, and the watch index's shards. Each
/// page costs its items' total size rounded up to 4 KB, half a unit per 4 KB
/// (eventually consistent reads); an empty page half a unit.
async fn read_units(client: &aws_sdk_dynamodb::Client, table: &str, moved: &[&str]) -> f64 {
    let now = AttributeValue::N(now_millis().to_string());
    let mut units = 0.0;
    let s = |v: &str| AttributeValue::S(v.to_owned());
    for shard in 0..SCHED_SHARDS {
        let shard = shard.to_string();
        units += query_units(
            client,
            table,
            INDEX_BY_NEXT_RECONCILE,
            &format!(
                "#{} = :k AND #{} <= :now",
                attr::SCHED_SHARD,
                attr::NEXT_RECONCILE_AT
            ),
            vec![(":k", s(&shard)), (":now", now.clone())],
        )
        .await;
        units += query_units(
            client,
            table,
            INDEX_BY_SHARD,
            &format!("#{} = :k", attr::SCHED_SHARD),
            vec![(":k", s(&shard))],
        )
        .await;
    }
    units += query_units(
        client,
        table,
        INDEX_BY_NEXT_RECONCILE,
        &format!("#{} = :k", attr::SCHED_SHARD),
        vec![(":k", s(SOURCES_SHARD))],
    )
    .await;
    for key in moved {
        units += query_units(
            client,
            table,
            INDEX_BY_SOURCE,
            &format!("#{} = :k", attr::SOURCE_KEY),
            vec![(":k", s(key))],
        )
        .await;
    }
    units
}

async fn query_units(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    index: &str,
    condition: &str,
    values: Vec<(&str, AttributeValue)>,
) -> f64 {
    let names: HashMap<String, String> =
        [attr::SCHED_SHARD, attr::NEXT_RECONCILE_AT, attr::SOURCE_KEY]
            .iter()
            .filter(|a| condition.contains(&format!("#{a} ")))
            .map(|a| (format!("#{a}"), (*a).to_owned()))
            .collect();
    let values: HashMap<String, AttributeValue> =
        values.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    let mut units = 0.0;
    let mut start = None;
    loop {
        let out = client
            .query()
            .table_name(table)
            .index_name(index)
            .key_condition_expression(condition)
            .set_expression_attribute_names(Some(names.clone()))
            .set_expression_attribute_values(Some(values.clone()))
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .expect("query for read units");
        // AWS pages at 1 MB of the index's (projected) items; moto pages
        // by whole items, so more pages here: the units count the bytes.
        let bytes: usize = out.items().iter().map(item_size).sum();
        units += 0.5 * bytes.div_ceil(4096).max(1) as f64;
        match out.last_evaluated_key {
            Some(next) if !next.is_empty() => start = Some(next),
            _ => break,
        }
    }
    units
}

/// The table's size as DynamoDB bills it: each item, plus 100 bytes, in the
/// table and in every index whose keys it has (projected).
async fn table_gb(fleet: &Fleet) -> f64 {
    let client = Emulator::shared().dynamodb();
    let mut bytes = 0usize;
    let mut start = None;
    loop {
        let out = client
            .scan()
            .table_name(fleet.registry.table())
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .expect("scanned");
        for item in out.items() {
            bytes += item_size(item) + 100;
            for index in INDEXES {
                let keys = [index.partition.name, index.sort.name];
                if keys.iter().all(|k| item.contains_key(*k)) {
                    let projected: HashMap<String, AttributeValue> = match index.include {
                        None => item.clone(),
                        Some(include) => item
                            .iter()
                            .filter(|(k, _)| {
                                include.contains(&k.as_str())
                                    || keys.contains(&k.as_str())
                                    || k.as_str() == PK
                            })
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                    };
                    bytes += item_size(&projected) + 100;
                }
            }
        }
        match out.last_evaluated_key {
            Some(next) if !next.is_empty() => start = Some(next),
            _ => break,
        }
    }
    bytes as f64 / 1e9
}

/// One execution of `kind` through the reconcile state machine (the local
/// runner, waits sped up), counted: states entered, Task states, AWS calls
/// (moto's recorder), and the write units of its registry writes.
async fn execution_bill(kind: &str) -> Bill {
    let emulator = Emulator::shared();
    let h = Harness::new("bcostrun").await;
    let repo = GitRepo::new("bcostrun");
    repo.commit(
        &[(
            "stack.yaml",
            b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\n",
        )],
        "v1",
    );
    let name = unique_name("bcost").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: stack.yaml}}\n",
        repo.file_url()
    ))
    .await;
    let run = |trigger: &'static str| {
        let (h, name) = (&h, name.clone());
        async move {
            let outcome = h
                .reconcile_with(
                    &name,
                    json!({"stackId": name, "trigger": {"kind": trigger}}),
                )
                .await;
            assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
        }
    };
    run("manual").await;
    if kind == "update" {
        repo.commit(
            &[(
                "stack.yaml",
                b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\n  Topic: {Type: AWS::SNS::Topic}\n",
            )],
            "v2",
        );
    } else {
        emulator
            .cloudformation()
            .update_stack()
            .stack_name(&name)
            .template_body(r#"{"Resources": {"Edited": {"Type": "AWS::SNS::Topic"}}}"#)
            .send()
            .await
            .expect("updated out of band");
    }
    h.events.lock().expect("events").clear();
    emulator.reset_recording();
    let started = Instant::now();
    run(if kind == "update" {
        "schedule"
    } else {
        "event"
    })
    .await;
    let elapsed = started.elapsed();
    let ops: BTreeMap<String, usize> =
        emulator
            .recorded_operations()
            .into_iter()
            .fold(BTreeMap::new(), |mut m, op| {
                *m.entry(op).or_default() += 1;
                m
            });
    let events = h.events.lock().expect("events").clone();
    let transitions = events
        .iter()
        .filter(|e| matches!(e, Progress::StateEntered { .. }))
        .count();
    let tasks = events
        .iter()
        .filter(|e| matches!(e, Progress::StateEntered { kind, .. } if kind == "Task"))
        .count();
    let op = |name: &str| ops.get(name).copied().unwrap_or(0) as f64;
    let writes = op("dynamodb:UpdateItem") + op("dynamodb:PutItem") + op("dynamodb:DeleteItem");
    let entry_item = Emulator::shared()
        .dynamodb()
        .get_item()
        .table_name(h.steps.registry.table())
        .key(PK, AttributeValue::S(format!("stack#{name}")))
        .send()
        .await
        .expect("entry read");
    let item_kb = entry_item.item().map_or(1, |i| item_size(i).div_ceil(1024)) as f64;
    let indexes_of_entry = INDEXES.len() as f64;
    let reads = op("dynamodb:GetItem") + op("dynamodb:Query");
    eprintln!(
        "bench_cost: one {kind} execution: {ops:?}, {transitions} transitions, {tasks} tasks, {elapsed:?}"
    );
    let cloudformation: usize = ops
        .iter()
        .filter(|(k, _)| k.starts_with("cloudformation:"))
        .map(|(_, v)| v)
        .sum();
    Bill {
        transitions: transitions as f64,
        invocations: tasks as f64,
        // The run's wall time, waits sped up 1000 times: the steps' own
        // time, an upper bound of the Lambda time billed.
        gb_seconds: elapsed.as_secs_f64() * LAMBDA_GB,
        // Strongly consistent reads of the entry: 1 unit per 4 KB.
        rru: reads * (item_kb / 4.0).ceil(),
        // The item and, as an upper bound, every index it is in.
        wru: writes * item_kb * (1.0 + indexes_of_entry),
        s3_puts: op("s3:PutObject") + op("s3:CopyObject") + op("s3:ListObjectsV2"),
        s3_gets: op("s3:GetObject") + op("s3:HeadObject"),
        cloudformation_calls: cloudformation as f64,
    }
}

/// An item's size by DynamoDB's rules.
fn item_size(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

fn value_size(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => n.trim_start_matches('-').len().div_ceil(2) + 1,
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Ss(l) => l.iter().map(String::len).sum(),
        AttributeValue::Ns(l) => l.iter().map(|n| n.len().div_ceil(2) + 1).sum(),
        AttributeValue::L(l) => 3 + l.iter().map(|e| 1 + value_size(e)).sum::<usize>(),
        AttributeValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, e)| 1 + k.len() + value_size(e))
                .sum::<usize>()
        }
        _ => 1,
    }
}

fn usd(x: f64) -> String {
    if x < 0.01 {
        format!("${x:.4}")
    } else {
        format!("${x:.2}")
    }
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn print(rows: &[Row], update: &Bill, put_back: &Bill) {
    println!("## What an installation costs per month");
    println!();
    println!(
        "| stacks | idle month | of which Lambda | of which DynamoDB (reads, storage) | one push, 1% of the stacks follow | one 1% out-of-band change | month with one of each |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in rows {
        let idle_month = r.idle.bill.times(RUNS_PER_MONTH);
        let storage = r.storage_gb * USD_PER_DDB_GB_MONTH;
        let idle_total = idle_month.dollars() + storage;
        let lambda = idle_month.invocations
            * (USD_PER_REQUEST + LOG_BYTES_PER_INVOCATION / 1e9 * USD_PER_LOG_GB)
            + idle_month.gb_seconds * USD_PER_GB_SECOND;
        let dynamodb = idle_month.rru * USD_PER_RRU + storage;
        // An event: its scheduler runs beyond an idle run's, and its executions.
        let event = |runs: &Runs, execution: &Bill| {
            runs.bill
                .plus(&r.idle.bill.times(-(runs.runs as f64)))
                .plus(&execution.times(r.moved as f64))
                .dollars()
                .max(0.0)
        };
        let push = event(&r.push, update);
        let oob = event(&r.out_of_band, put_back);
        println!(
            "| {} | **{}** | {} | {} | +{} | +{} | {} |",
            thousands(r.stacks),
            usd(idle_total),
            usd(lambda),
            usd(dynamodb),
            usd(push),
            usd(oob),
            usd(idle_total + push + oob)
        );
    }
    println!();
    println!("### One scheduler run, counted");
    println!();
    println!(
        "| stacks | run | runs | DynamoDB queries | DynamoDB writes | read units | ListStacks | executions started | time (first run; idle: median of 3) | DynamoDB reads | Git (50 ls-remote) | ListStacks time | starts | own work |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        for (label, runs) in [
            ("idle", &r.idle),
            ("push (1% follow)", &r.push),
            ("1% out of band", &r.out_of_band),
        ] {
            let t = runs.reports[0].timing;
            println!(
                "| {} | {label} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} |",
                thousands(r.stacks),
                runs.runs,
                runs.queries,
                runs.writes,
                runs.bill.rru,
                runs.listings,
                runs.started,
                ms(t.total),
                ms(t.queue + t.watch_read),
                ms(t.sources),
                ms(t.listing),
                ms(t.starting),
                ms(t.own_work()),
            );
        }
    }
    println!();
    println!("### One execution, counted");
    println!();
    println!(
        "| execution | state transitions | Lambda invocations | GB-s (upper bound) | read units | write units (upper bound) | S3 PUT/LIST | S3 GET/HEAD | CloudFormation calls | cost |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (label, b) in [
        ("update (after a push)", update),
        ("put back (after an out-of-band update)", put_back),
    ] {
        println!(
            "| {label} | {} | {} | {:.2} | {} | {} | {} | {} | {} | {} |",
            b.transitions,
            b.invocations,
            b.gb_seconds,
            b.rru,
            b.wru,
            b.s3_puts,
            b.s3_gets,
            b.cloudformation_calls,
            usd(b.dollars())
        );
    }
}

fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
