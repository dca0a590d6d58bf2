//! Scheduler cost at 1,000 and 10,000 registered stacks over 50 Git sources
//! (`Fleet`: repositories served by `git daemon` on 127.0.0.1, the registry
//! in the emulator's DynamoDB, executions started in its Step Functions):
//! wall time of `Scheduler::run` (median and max of several runs) and the AWS
//! calls of each run (moto's recorder, reset before every run: this bench
//! owns its emulator), for an idle run, a run where 1% of the stacks' source
//! moved, and a run where 1% of the stacks are due under a cap of 50 starts.
//! Read units are computed from the items the run's queries return (sizes by
//! DynamoDB's item-size rules), since moto does not meter them. Run by
//! `scripts/bench`. Prints Markdown.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use aws_sdk_dynamodb::types::AttributeValue;
use stacksync::adapters::git::GitFetcher;
use stacksync::clock::now_millis;
use stacksync::ports::SourceFetcher;
use stacksync::registry::Schedule;
use stacksync::registry::entry_item;
use stacksync::registry::schema::{
    INDEX_BY_NEXT_RECONCILE, INDEX_BY_SOURCE, SCHED_SHARDS, SOURCES_SHARD, attr,
};
use stacksync::source::source_key;
use stacksync::status::Timestamp;
use stacksync::triggers::scheduler::{Report, Scheduler};
use stacksync_testkit::Emulator;
use stacksync_testkit::fleet::{Fleet, steady_entry};

/// Registered stacks per fleet.
const SIZES: [usize; 2] = [1_000, 10_000];
/// Git repositories (distinct sources) per fleet.
const SOURCES: usize = 50;
/// Measured runs per scenario.
const RUNS: usize = 5;
/// The cap of the "due" scenario (the template's default `MaxStartsPerRun`).
const CAP: usize = 50;
/// Runs per month at the default `rate(5 minutes)`.
const RUNS_PER_MONTH: f64 = 8_640.0;
/// On-demand DynamoDB, us-east-1, since the price cut of November 2024
/// (was 0.25): USD per million read request units.
const USD_PER_MILLION_RRU: f64 = 0.125;
/// Lambda, x86_64, us-east-1 (2025): USD per GB-second; the function has 256 MB.
const USD_PER_GB_SECOND: f64 = 0.000_016_666_7;
const LAMBDA_GB: f64 = 0.25;

/// One measured run.
struct Sample {
    millis: f64,
    /// TCP connections dropped at a full listen queue during the run
    /// (system-wide; `None` off Linux): each is a ref listing that waits
    /// for the SYN to be sent again, 1 s later.
    dropped: Option<u64>,
    report: Report,
    calls: BTreeMap<String, usize>,
    read_units: f64,
}

/// Several runs of one scenario at one size.
struct Row {
    stacks: usize,
    scenario: String,
    samples: Vec<Sample>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let emulator = Emulator::shared();
    let mut rows = Vec::new();
    let mut idle_split = Vec::new();
    for &n in &SIZES {
        // No recording while the fleet is written (10,000 items).
        emulator.moto_api("POST", "/moto-api/recorder/stop-recording", "");
        let started = Instant::now();
        // Repository 0 has 1% of the stacks (the one that moves); the other
        // 49 share the rest evenly.
        let moved = n / 100;
        let rest = n - moved;
        let others = SOURCES - 1;
        let mut sizes = vec![moved];
        sizes.extend((0..others).map(|i| rest / others + usize::from(i < rest % others)));
        let fleet = Fleet::new(&format!("bsched{n}"), &sizes).await;
        eprintln!(
            "bench_scheduler: {n} stacks over {SOURCES} sources set up in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let table = fleet.registry.table().to_owned();
        let dynamodb = emulator.dynamodb();

        // 1. Idle: nothing due, no source moved (after one run not counted:
        // the first connections to the emulator and the Git daemon).
        let scheduler = fleet.scheduler(CAP);
        scheduler.run(now_millis()).await.expect("warm-up run");
        let mut samples = Vec::new();
        for _ in 0..RUNS {
            let units = run_read_units(&dynamodb, &table, &[]).await;
            let sample = measure(emulator, &scheduler, units).await;
            let r = &sample.report;
            assert_eq!(r.errors, Vec::<String>::new());
            assert_eq!((r.due, r.sources_checked, r.started.len()), (0, SOURCES, 0));
            samples.push(sample);
        }
        rows.push(Row {
            stacks: n,
            scenario: "idle".into(),
            samples,
        });

        // Where the idle time goes: the five queries alone, the 50 ref
        // listings alone (8 at once, as the scheduler lists them).
        let mut reads = Vec::new();
        let mut listings = Vec::new();
        for _ in 0..RUNS {
            let t = Instant::now();
            let due = fleet.registry.due(now_millis(), 1000).await.expect("due");
            let sources = fleet.registry.sources().await.expect("sources");
            reads.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!((due.len(), sources.len()), (0, SOURCES));
            let t = Instant::now();
            list_refs(&fleet.urls).await;
            listings.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        idle_split.push((n, spread(&mut reads), spread(&mut listings)));

        // 2. 1% moved: a commit to repository 0 before each run (a cap that
        // does not bind, so every follower starts in this run).
        let scheduler = fleet.scheduler(500);
        let key = source_key(&fleet.urls[0], Some("main"));
        let mut samples = Vec::new();
        for run in 0..RUNS {
            let body = format!("Resources: {{}} # push {run}\n");
            fleet.repos[0].commit(&[("stack.yaml", body.as_bytes())], "push");
            let units = run_read_units(&dynamodb, &table, &[key.as_str()]).await;
            let sample = measure(emulator, &scheduler, units).await;
            let r = &sample.report;
            assert_eq!(r.errors, Vec::<String>::new());
            assert_eq!(
                (r.started.len(), r.sources_examined, r.heads_recorded),
                (moved, 1, 1)
            );
            samples.push(sample);
        }
        rows.push(Row {
            stacks: n,
            scenario: format!("1% moved: a push to the repository {moved} stacks follow"),
            samples,
        });

        // 3. 1% due (their interval passed), spread over the 49 other
        // repositories, under the default cap; a new due time per run, so
        // each run's executions are new.
        let scheduler = fleet.scheduler(CAP);
        let due_names: Vec<(usize, String)> = (0..moved)
            .map(|i| {
                let repo = 1 + i % others;
                (repo, fleet.followers[repo][i / others].clone())
            })
            .collect();
        let mut samples = Vec::new();
        for run in 0..RUNS {
            let now = now_millis();
            let entries: Vec<_> = due_names
                .iter()
                .map(|(repo, name)| {
                    let head = fleet.repos[*repo].head();
                    let mut e = steady_entry(name, &fleet.urls[*repo], &head, now);
                    e.status.next_reconcile_at = Some(Timestamp(now - 1_000 - run as i64));
                    e
                })
                .collect();
            fleet.write(&entries).await;
            let units = run_read_units(&dynamodb, &table, &[]).await;
            let sample = measure(emulator, &scheduler, units).await;
            let r = &sample.report;
            assert_eq!(r.errors, Vec::<String>::new());
            assert_eq!(r.due, moved);
            assert_eq!(
                (r.started.len(), r.deferred),
                (moved.min(CAP), moved - moved.min(CAP))
            );
            samples.push(sample);
        }
        rows.push(Row {
            stacks: n,
            scenario: format!("1% due ({moved}), cap {CAP}"),
            samples,
        });
    }
    print_tables(&rows, &idle_split);
}

/// One recorded, timed run of the scheduler.
async fn measure(
    emulator: &Emulator,
    scheduler: &Scheduler<
        stacksync::registry::Registry,
        stacksync::adapters::stepfunctions::Executions,
        GitFetcher,
    >,
    read_units: f64,
) -> Sample {
    emulator.reset_recording();
    let overflows = listen_overflows();
    let started = Instant::now();
    let report = scheduler.run(now_millis()).await.expect("scheduler run");
    let millis = started.elapsed().as_secs_f64() * 1000.0;
    let dropped = overflows.zip(listen_overflows()).map(|(a, b)| b - a);
    let mut calls = BTreeMap::new();
    for op in emulator.recorded_operations() {
        let op = op.replace("AWSStepFunctions:", "states:");
        *calls.entry(op).or_default() += 1;
    }
    emulator.moto_api("POST", "/moto-api/recorder/stop-recording", "");
    Sample {
        millis,
        dropped,
        report,
        calls,
        read_units,
    }
}

/// The read request units the scheduler's queries will consume: the four
/// due shards and the sources (every run), and the source index for each
/// moved source. Each page costs its items' total size rounded up to 4 KB,
/// half a unit per 4 KB (index reads are eventually consistent), and an
/// empty page one such unit.
async fn run_read_units(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    moved_sources: &[&str],
) -> f64 {
    let now = AttributeValue::N(now_millis().to_string());
    let mut units = 0.0;
    for shard in 0..SCHED_SHARDS {
        units += query_units(
            client,
            table,
            INDEX_BY_NEXT_RECONCILE,
            &format!(
                "#{} = :k AND #{} <= :now",
                attr::SCHED_SHARD,
                attr::NEXT_RECONCILE_AT
            ),
            vec![
                (":k", AttributeValue::S(shard.to_string())),
                (":now", now.clone()),
            ],
        )
        .await;
    }
    units += query_units(
        client,
        table,
        INDEX_BY_NEXT_RECONCILE,
        &format!("#{} = :k", attr::SCHED_SHARD),
        vec![(":k", AttributeValue::S(SOURCES_SHARD.into()))],
    )
    .await;
    for key in moved_sources {
        units += query_units(
            client,
            table,
            INDEX_BY_SOURCE,
            &format!("#{} = :k", attr::SOURCE_KEY),
            vec![(":k", AttributeValue::S((*key).into()))],
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
        let bytes: usize = out.items().iter().map(item_size).sum();
        units += 0.5 * bytes.div_ceil(4096).max(1) as f64;
        match out.last_evaluated_key {
            Some(next) if !next.is_empty() => start = Some(next),
            _ => break,
        }
    }
    units
}

/// An item's size by DynamoDB's rules: names plus values (strings and
/// binaries by length, numbers ~1 byte per 2 digits + 1, 3 bytes per
/// list or map plus 1 per element).
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

/// Linux's count of connections dropped because a listen queue was full
/// (`TcpExt: ListenOverflows`). `git daemon` listens with a queue of 5; the
/// scheduler opens 8 connections at once.
fn listen_overflows() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/netstat").ok()?;
    let mut lines = text.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        if !names.starts_with("TcpExt:") {
            continue;
        }
        let at = names
            .split_whitespace()
            .position(|n| n == "ListenOverflows")?;
        return values.split_whitespace().nth(at)?.parse().ok();
    }
    None
}

/// Lists every source's `main`, 8 at once (the scheduler's default).
async fn list_refs(urls: &[String]) {
    let fetcher = GitFetcher::new(std::env::temp_dir());
    let mut tasks = tokio::task::JoinSet::new();
    let mut pending = urls.iter();
    loop {
        while tasks.len() < 8
            && let Some(url) = pending.next()
        {
            let (fetcher, url) = (fetcher.clone(), url.clone());
            tasks.spawn(async move { fetcher.resolve(&url, "main").await });
        }
        match tasks.join_next().await {
            Some(done) => drop(done.expect("listing task").expect("refs listed")),
            None => break,
        }
    }
}

/// "median (min–max) ms".
fn spread(values: &mut [f64]) -> String {
    let med = median(values);
    format!(
        "{med:.0} ms ({:.0}–{:.0})",
        values[0],
        values[values.len() - 1]
    )
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn calls_of(sample: &Sample, prefix: &str) -> usize {
    sample
        .calls
        .iter()
        .filter(|(op, _)| op.starts_with(prefix))
        .map(|(_, n)| n)
        .sum()
}

fn print_tables(rows: &[Row], idle_split: &[(usize, String, String)]) {
    println!(
        "## Scheduler: one run at 1,000 and 10,000 stacks ({SOURCES} sources, {RUNS} runs each)"
    );
    println!();
    println!(
        "| stacks | run | wall time median / max | runs with a listing retried | DynamoDB calls | read units (est.) | StartExecution | CloudFormation | ref listings | started / deferred |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        let mut millis: Vec<f64> = row.samples.iter().map(|s| s.millis).collect();
        let max = millis.iter().copied().fold(0.0, f64::max);
        let med = median(&mut millis);
        let first = &row.samples[0];
        // Every run of a scenario makes the same calls.
        for s in &row.samples {
            assert_eq!(
                s.calls, first.calls,
                "{}: calls differ between runs",
                row.scenario
            );
        }
        let dynamodb: Vec<String> = first
            .calls
            .iter()
            .filter_map(|(op, n)| op.strip_prefix("dynamodb:").map(|op| format!("{op} ×{n}")))
            .collect();
        let cloudformation = calls_of(first, "cloudformation:");
        assert_eq!(
            cloudformation, 0,
            "the scheduler never calls CloudFormation"
        );
        let retried = if row.samples.iter().all(|s| s.dropped.is_some()) {
            let runs = row
                .samples
                .iter()
                .filter(|s| s.dropped.is_some_and(|d| d > 0))
                .count();
            format!("{runs} of {}", row.samples.len())
        } else {
            "?".to_owned()
        };
        println!(
            "| {} | {} | {med:.0} / {max:.0} ms | {retried} | {} | {:.1} | {} | {cloudformation} | {} | {} / {} |",
            thousands(row.stacks),
            row.scenario,
            dynamodb.join(", "),
            first.read_units,
            calls_of(first, "states:StartExecution"),
            first.report.sources_checked,
            first.report.started.len(),
            first.report.deferred,
        );
    }
    println!();
    println!("Idle run, split (median and range of {RUNS}):");
    println!();
    println!("| stacks | the 5 queries alone | the {SOURCES} ref listings alone (8 at once) |");
    println!("|---|---|---|");
    for (n, reads, listings) in idle_split {
        println!("| {} | {reads} | {listings} |", thousands(*n));
    }
    println!();
    for row in rows.iter().filter(|r| r.scenario == "idle") {
        let units = row.samples[0].read_units;
        let monthly = RUNS_PER_MONTH * units * USD_PER_MILLION_RRU / 1e6;
        println!(
            "Idle installation of {} stacks at rate(5 minutes): {:.0} read units/month, ${monthly:.4}/month in DynamoDB reads (on-demand, ${USD_PER_MILLION_RRU} per million RRU); Lambda at 256 MB: ${:.4}/month per second of run time (${USD_PER_GB_SECOND} per GB-s).",
            thousands(row.stacks),
            RUNS_PER_MONTH * units,
            RUNS_PER_MONTH * LAMBDA_GB * USD_PER_GB_SECOND,
        );
    }
    // The entry size, for read and write estimates.
    let sample = steady_entry(
        "f12345678-49-199",
        "git://127.0.0.1:12345/infra-49.git",
        &"0".repeat(40),
        now_millis(),
    );
    println!();
    let size = item_size(&entry_item(&sample));
    println!(
        "A stack item is ~{size} bytes: ~{} of them per read unit through an index (4 KB, eventually consistent); an UpdateItem of one is a write unit on the table, plus its index entries.",
        8192 / size
    );
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
