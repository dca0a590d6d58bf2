//! Reliability, measured (BENCHMARKS.md "Reliability"): 100 reconciles
//! (25 stacks created, updated, left alone and deleted) with no faults and
//! with 30% of AWS calls failing through the fault proxy; 50 runs killed at
//! random points; 50 concurrent triggers of one stack; 200 stacks reconciled
//! at once. Run by `scripts/bench reliability`, on its own emulator. Prints
//! Markdown. Every property is checked, and a broken one ends the run with
//! an error: the figures are only worth printing when they hold.

use std::collections::BTreeMap;
use std::time::Duration;

use stacksync::registry::Registry;
use stacksync_testkit::Emulator;
use stacksync_testkit::crash::{Kill, crash_rounds};
use stacksync_testkit::faults::{Fault, FaultPlan, FaultProxy};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::reliability::{
    Life, LifeReport, executed_change_sets, queue_template, register, replayed_calls, stack_names,
    storm, through_proxy,
};

/// The client's attempt timeout in these runs, and how late a slow answer comes.
const ATTEMPT: Duration = Duration::from_secs(2);
const SLOW: Duration = Duration::from_millis(2_500);

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let stacks = if quick { 5 } else { 25 };
    // `--only faults|crashes|concurrency`: one part.
    let only = std::env::args().skip_while(|a| a != "--only").nth(1);
    let part = |p: &str| only.as_deref().is_none_or(|o| o == p);
    println!("## Reliability (faults, crashes, concurrency)\n");
    if part("faults") {
        faults(stacks).await;
    }
    if part("crashes") {
        crashes(if quick { 10 } else { 50 }).await;
    }
    if part("concurrency") {
        concurrency(if quick { 10 } else { 50 }, if quick { 20 } else { 200 }).await;
    }
}

struct Measured {
    report: LifeReport,
    calls: usize,
    faults: BTreeMap<Fault, usize>,
    executed: usize,
    repeated: usize,
}

async fn life(prefix: &str, stacks: usize, plan: FaultPlan) -> Measured {
    let emulator = Emulator::shared();
    let proxy = FaultProxy::start(emulator.endpoint(), FaultPlan::none()).await;
    let harness = Harness::through(prefix, &through_proxy(&proxy, ATTEMPT)).await;
    let direct = Registry::new(emulator.dynamodb(), harness.steps.registry.table());
    let names = stack_names(prefix, stacks);
    let mark = proxy.len();
    proxy.set_plan(plan);
    let life = Life {
        harness: &harness,
        direct,
        repo: GitRepo::new(prefix),
        names: names.clone(),
        parallel: 10,
        max_runs: 10,
    };
    let report = life.run().await;
    let log = proxy.since(mark);
    let mut faults = BTreeMap::new();
    for fault in log.iter().filter_map(|e| e.fault) {
        *faults.entry(fault).or_insert(0) += 1;
    }
    let executed = executed_change_sets(&log);
    for name in &names {
        let sets = executed.get(name).map_or(0, |s| s.len());
        assert_eq!(sets, 2, "{prefix}: {name} ran {sets} change sets, not 2");
    }
    assert!(
        report.stuck.is_empty(),
        "{prefix}: stuck: {:?}",
        report.stuck
    );
    Measured {
        calls: log.len(),
        faults,
        executed: executed.values().map(|s| s.len()).sum(),
        repeated: replayed_calls(&log),
        report,
    }
}

async fn faults(stacks: usize) {
    let clean = life("clean", stacks, FaultPlan::none()).await;
    let faulty = life(
        "faulty",
        stacks,
        FaultPlan {
            rate: 0.3,
            kinds: Fault::ALL.to_vec(),
            slow: SLOW,
            seed: 30,
        },
    )
    .await;
    println!(
        "### {} reconciles with 30% of AWS calls failing\n\n{stacks} stacks on one repository, each created, updated, left alone (no-op) and deleted: {} reconciles, 10 stacks at a time, through the fault proxy (`tests/src/faults.rs`) in front of the emulator. The faults, chosen evenly: throttling, a 500, the connection dropped before the call reaches the service, dropped after it did (the answer lost), an answer {} s late (the client's attempt timeout is {} s here). The local runner's interpreter runs the real state machine; a reconcile that ends short of its goal is run again, as the scheduler would.\n",
        stacks * 4,
        stacks * 4,
        SLOW.as_secs_f64(),
        ATTEMPT.as_secs()
    );
    println!("| | no faults | 30% of calls failing |\n|---|---|---|");
    let row = |label: &str, a: String, b: String| println!("| {label} | {a} | {b} |");
    row(
        "AWS calls (attempts)",
        clean.calls.to_string(),
        format!(
            "{} ({:+.0}%)",
            faulty.calls,
            (faulty.calls as f64 / clean.calls as f64 - 1.0) * 100.0
        ),
    );
    let injected: usize = faulty.faults.values().sum();
    row(
        "faults injected",
        "0".into(),
        format!(
            "{injected}: {}",
            faulty
                .faults
                .iter()
                .map(|(k, v)| format!("{k:?} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    let runs = |m: &Measured| m.report.moments.values().map(|r| r.runs).sum::<usize>();
    let failed = |m: &Measured| {
        m.report
            .moments
            .values()
            .map(|r| r.failed_runs)
            .sum::<usize>()
    };
    row(
        "executions for the reconciles",
        runs(&clean).to_string(),
        format!("{} ({} ended short)", runs(&faulty), failed(&faulty)),
    );
    row(
        "state-machine retries (a Task's Retry)",
        clean.report.machine_retries.to_string(),
        faulty.report.machine_retries.to_string(),
    );
    row(
        "change sets executed",
        clean.executed.to_string(),
        format!(
            "{} (2 per stack; {} calls sent again after a lost answer were answered from their idempotency token)",
            faulty.executed, faulty.repeated
        ),
    );
    row("leases left, stacks stuck", "0, 0".into(), "0, 0".into());
    let time = |m: &Measured| {
        m.report
            .moments
            .iter()
            .map(|(k, r)| format!("{k:?} {:.1} s", r.elapsed.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    row("wall time", time(&clean), time(&faulty));
    if !faulty.report.failures.is_empty() {
        println!(
            "\nWhy the executions that ended short did: {}.",
            faulty
                .report
                .failures
                .iter()
                .map(|(k, v)| format!("{k} × {v}"))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    println!();
}

async fn crashes(rounds: usize) {
    let emulator = Emulator::shared();
    let proxy = FaultProxy::start(emulator.endpoint(), FaultPlan::none()).await;
    let harness = Harness::through("crash", &through_proxy(&proxy, Duration::from_secs(20))).await;
    let direct = Registry::new(emulator.dynamodb(), harness.steps.registry.table());
    let repo = GitRepo::new("crash");
    let names = stack_names("crash", 5);
    register(&direct, &repo, &names).await;
    // Deterministic "random" kills: a step, a moment in it, and whether the
    // finalizer dies too.
    let kill = |round: usize| {
        let x = (round as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        Kill {
            task: (x % 6) as usize,
            after: (!x.is_multiple_of(3)).then(|| Duration::from_millis((x >> 8) % 150)),
            finalizer: x % 3 == 2,
        }
    };
    let report = crash_rounds(&harness, &direct, &proxy, &repo, &names, kill, rounds).await;
    assert!(report.stuck.is_empty(), "{report:#?}");
    assert!(report.twice.is_empty(), "{report:#?}");
    assert!(report.unapplied.is_empty(), "{report:#?}");
    println!(
        "### {rounds} runs killed\n\nEach round commits a new template for one of 5 stacks and starts a run whose process is killed at a step: at its end (the work done, the answer lost) or inside it (cut wherever it was, 0–150 ms in), and for a third of the rounds its finalizer too (the execution then fails, and the `ExecutionEnded` rule's handler ends the hold). Then normal runs until the stack is Ready at the new revision.\n"
    );
    println!("| | |\n|---|---|");
    println!(
        "| kills at a step's end / inside it | {} / {} |",
        report.at_boundary, report.in_middle
    );
    println!(
        "| kills by step | {} |",
        report
            .by_step
            .iter()
            .map(|(k, v)| format!("{} {v}", k.trim_start_matches("local:")))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "| finalizers killed, holds ended by the rule | {} |",
        report.holds_ended
    );
    println!(
        "| runs needed after the kill, at most | {} |",
        report.most_recovery_runs
    );
    println!("| revisions applied twice, or recorded applied and not | 0, 0 |");
    println!("| wall time | {:.1} s |\n", report.elapsed.as_secs_f64());
}

async fn concurrency(triggers: usize, stacks: usize) {
    let emulator = Emulator::shared();
    let proxy = FaultProxy::start(emulator.endpoint(), FaultPlan::none()).await;
    let harness = Harness::through("storm", &through_proxy(&proxy, Duration::from_secs(30))).await;
    let direct = Registry::new(emulator.dynamodb(), harness.steps.registry.table());
    let repo = GitRepo::new("storm");
    let names = stack_names("storm", stacks);
    register(&direct, &repo, &names).await;
    let many = storm(&harness, &direct, &repo, &names, 1).await;
    assert!(many.wrong.is_empty(), "{many:#?}");
    let one = &names[..1];
    repo.commit(&[(&format!("{}.yaml", one[0]), &queue_template(90))], "v2");
    let before = executed_change_sets(&proxy.log())
        .get(&one[0])
        .map_or(0, |s| s.len());
    let crowd = storm(&harness, &direct, &repo, one, triggers).await;
    assert!(crowd.wrong.is_empty(), "{crowd:#?}");
    let after = executed_change_sets(&proxy.log())
        .get(&one[0])
        .map_or(0, |s| s.len());
    assert_eq!(after - before, 1, "one change set for one revision");
    println!("### Concurrency\n\nOne registry table, the emulator on 2 cores.\n");
    println!(
        "| | runs | ended succeeded / failed | change sets executed | stacks not Ready at head, or holding a lease | wall time |\n|---|---|---|---|---|---|"
    );
    println!(
        "| {stacks} stacks created at once | {} | {} / {} | {stacks} | 0 | {:.1} s |",
        many.runs,
        many.succeeded,
        many.failed,
        many.elapsed.as_secs_f64()
    );
    println!(
        "| {triggers} triggers of one stack at once, after a commit | {} | {} / {} | 1 | 0 | {:.1} s |\n",
        crowd.runs,
        crowd.succeeded,
        crowd.failed,
        crowd.elapsed.as_secs_f64()
    );
}
