//! Faults, crashes and concurrency, against the emulator: every reconcile
//! converges, no change set runs twice, no lease is left behind. The
//! benchmark (`scripts/bench reliability`) runs the same at full size and
//! reports the figures; these are the same properties, smaller.

use std::time::Duration;

use stacksync::registry::Registry;
use stacksync_testkit::Emulator;
use stacksync_testkit::crash::{Kill, crash_rounds};
use stacksync_testkit::faults::{Fault, FaultPlan, FaultProxy};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::reliability::{
    Life, executed_change_sets, queue_template, register, replayed_calls, stack_names, storm,
    through_proxy,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_30_percent_of_calls_failing_every_reconcile_converges_and_no_change_set_runs_twice() {
    let emulator = Emulator::shared();
    let proxy = FaultProxy::start(emulator.endpoint(), FaultPlan::none()).await;
    let config = through_proxy(&proxy, Duration::from_secs(2));
    let harness = Harness::through("faults", &config).await;
    let direct =
        stacksync::registry::Registry::new(emulator.dynamodb(), harness.steps.registry.table());
    let names = stack_names("f", 4);
    proxy.set_plan(FaultPlan {
        rate: 0.3,
        kinds: Fault::ALL.to_vec(),
        slow: Duration::from_millis(2_500),
        seed: 7,
    });
    let life = Life {
        harness: &harness,
        direct,
        repo: GitRepo::new("faults"),
        names: names.clone(),
        parallel: 4,
        max_runs: 10,
    };
    let report = life.run().await;
    let log = proxy.log();
    let faults = log.iter().filter(|e| e.fault.is_some()).count();
    eprintln!(
        "{report:#?}\n{} calls, {faults} faults, {} calls answered from their idempotency token",
        log.len(),
        replayed_calls(&log)
    );
    assert!(report.stuck.is_empty(), "{report:#?}");
    assert!(
        faults * 5 > log.len(),
        "about 30% of calls failed: {faults} of {}",
        log.len()
    );

    // Each stack's create and update ran one change set each, never two.
    let executed = executed_change_sets(&log);
    for name in &names {
        let sets = executed.get(name).cloned().unwrap_or_default();
        assert_eq!(sets.len(), 2, "{name}: {sets:?}");
    }
}

/// Stacks registered on one repository (a template each), through a proxy
/// that only logs: the harness, the registry read directly, the proxy.
async fn created(
    prefix: &str,
    count: usize,
) -> (
    Harness<stacksync::adapters::cloudformation::SdkCloudFormationFactory>,
    Registry,
    FaultProxy,
    GitRepo,
    Vec<String>,
) {
    let emulator = Emulator::shared();
    let proxy = FaultProxy::start(emulator.endpoint(), FaultPlan::none()).await;
    let harness = Harness::through(prefix, &through_proxy(&proxy, Duration::from_secs(20))).await;
    let direct = Registry::new(emulator.dynamodb(), harness.steps.registry.table());
    let repo = GitRepo::new(prefix);
    let names = stack_names(prefix, count);
    register(&direct, &repo, &names).await;
    (harness, direct, proxy, repo, names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_killed_at_any_step_boundary_or_inside_any_step_is_recovered_by_the_next_and_no_revision_runs_twice()
 {
    let (harness, direct, proxy, repo, names) = created("crash", 2).await;
    for name in &names {
        harness.reconcile(name).await;
    }
    // An update run has six Tasks (fetch, upload, change set, three polls):
    // each killed at its end, inside, and inside with the finalizer too.
    let report = crash_rounds(
        &harness,
        &direct,
        &proxy,
        &repo,
        &names,
        |round| Kill {
            task: round / 3,
            after: (!round.is_multiple_of(3)).then(|| Duration::from_millis(15)),
            finalizer: round % 3 == 2,
        },
        18,
    )
    .await;
    eprintln!("{report:#?}");
    assert!(report.stuck.is_empty(), "{report:#?}");
    assert!(report.twice.is_empty(), "{report:#?}");
    assert!(report.unapplied.is_empty(), "{report:#?}");
    assert!(
        report.by_step.len() >= 4,
        "kills fell in every step: {report:#?}"
    );
    assert!(report.holds_ended >= 4, "killed finalizers: {report:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_triggers_of_one_stack_run_one_change_set_and_many_stacks_at_once_lose_nothing()
{
    let (harness, direct, proxy, repo, names) = created("storm", 8).await;
    // Eight stacks created at once, one run each.
    let many = storm(&harness, &direct, &repo, &names, 1).await;
    eprintln!("{many:#?}");
    assert!(many.wrong.is_empty(), "{many:#?}");
    // Then 20 triggers of one stack at once, after a commit.
    let one = &names[..1];
    repo.commit(&[(&format!("{}.yaml", one[0]), &queue_template(90))], "v2");
    let before = executed_change_sets(&proxy.log());
    let crowd = storm(&harness, &direct, &repo, one, 20).await;
    eprintln!("{crowd:#?}");
    assert!(crowd.wrong.is_empty(), "{crowd:#?}");
    let after = executed_change_sets(&proxy.log());
    let count =
        |m: &std::collections::BTreeMap<String, Vec<String>>| m.get(&one[0]).map_or(0, |s| s.len());
    assert_eq!(
        count(&after) - count(&before),
        1,
        "one change set for one revision"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_30_percent_of_step_functions_calls_failing_each_trigger_starts_one_execution() {
    use stacksync::adapters::stepfunctions::Executions;
    use stacksync::ports::{Starter, Trigger, TriggerKind};

    let emulator = Emulator::shared();
    let machine = emulator.pass_machine("faults-sfn").await;
    let proxy = FaultProxy::start(
        emulator.endpoint(),
        FaultPlan {
            rate: 0.3,
            kinds: Fault::ALL.to_vec(),
            slow: Duration::from_millis(1_500),
            seed: 11,
        },
    )
    .await;
    let config = through_proxy(&proxy, Duration::from_secs(1));
    let executions = Executions::new(aws_sdk_sfn::Client::new(&config), machine.clone());
    // Ten pushes, each announced four times at once (a webhook redelivered,
    // the scheduler seeing the same head): a caller that gets an error
    // tries again, as a webhook sender does.
    let trigger = Trigger {
        kind: TriggerKind::Webhook,
        revision: None,
        force: false,
    };
    let mut errors_seen = 0;
    let results = futures_util::future::join_all((0..40).map(|i| {
        let (executions, trigger) = (&executions, &trigger);
        async move {
            let mut errors = 0;
            for _ in 0..5 {
                match executions
                    .start("app", trigger, &format!("push{}", i % 10))
                    .await
                {
                    Ok(_) => return (true, errors),
                    Err(_) => errors += 1,
                }
            }
            (false, errors)
        }
    }))
    .await;
    for (started, errors) in &results {
        assert!(started, "{results:?}");
        errors_seen += errors;
    }
    let listed = aws_sdk_sfn::Client::new(&emulator.sdk_config())
        .list_executions()
        .state_machine_arn(&machine)
        .send()
        .await
        .unwrap();
    let faults = proxy.log().iter().filter(|e| e.fault.is_some()).count();
    eprintln!(
        "{} calls, {faults} faults, {errors_seen} errors seen by callers",
        proxy.len()
    );
    assert_eq!(listed.executions().len(), 10, "one execution per push");
    assert!(faults > 0);
}
