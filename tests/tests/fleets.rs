//! Fleets through the scheduler, against the emulator (moto's
//! Organizations, CloudFormation in the accounts it makes through
//! `assumeRoleArn`): a fleet applied as `stacksync apply` applies it, its
//! targets started by the scheduler and run by the real state machine; an
//! account that joins the unit (or a unit under it) gets its stacks at the scheduler's next read
//! of the units, started in the same run. The scheduler's calls are
//! recorded for the IAM conformance test (its Organizations reads, the
//! fleet's record, the new targets' entries).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::sync::Arc;

use serde_json::json;
use stacksync::asl::Outcome;
use stacksync::clock::now_millis;
use stacksync::manifest::parse_manifest;
use stacksync::registry::plan::Writer;
use stacksync::registry::targets::plan_with_fleets;
use stacksync::registry::{Specs, apply_plan};
use stacksync::triggers::fleets::{Reread, read_units, record_fleets};
use stacksync::triggers::scheduler::Report;
use stacksync_testkit::Emulator;
use stacksync_testkit::iam::as_function;
use stacksync_testkit::organizations::{Organization, stack_in};
use stacksync_testkit::registry_world::{QUEUE, TestScheduler, World};

/// Runs the scheduler at `at`, then every execution it started.
async fn schedule(w: &World, scheduler: &TestScheduler, at: i64, ran: &mut Vec<String>) -> Report {
    let report = as_function("scheduler", scheduler.run(at)).await.unwrap();
    for (execution, stack, trigger) in scheduler.starter.started() {
        if ran.contains(&execution) {
            continue;
        }
        ran.push(execution);
        let input = json!({"stackId": stack, "trigger": trigger});
        let outcome = w.h.reconcile_with(&stack, input).await;
        assert!(
            matches!(outcome, Outcome::Succeeded(_)),
            "{stack}: {outcome:?}"
        );
    }
    report
}

/// Applies a stacks file whose fleets list their accounts (no unit to
/// read), as `stacksync apply` applies it.
async fn apply_listed(w: &World, text: &str) {
    let desired = parse_manifest("stacks.yaml", text).unwrap();
    let registry = &w.h.steps.registry;
    let now = now_millis();
    let units = Default::default();
    let current = registry.list().await.unwrap();
    let plan = plan_with_fleets(&desired, &units, &current, false, None, Writer::Cli).unwrap();
    apply_plan(registry, &plan, now, |_| {}).await.unwrap();
    record_fleets(registry, &desired, &units, false, now)
        .await
        .unwrap();
}

async fn stack_status(account: &str, region: &str, name: &str) -> Option<String> {
    let stack = stack_in(account, region, name).await?;
    Some(stack.stack_status()?.as_str().to_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_account_gets_its_stacks_at_the_schedulers_next_read_of_its_units() {
    let w = World::new("fleet-sched").await;
    w.repo.commit(&[("b.yaml", QUEUE.as_bytes())], "b");
    let org = Organization::shared().await;
    let unit = org.unit(None).await;
    let first = org.account(&unit).await;
    let name = w.name("fleet");
    let text = format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: b.yaml, insecure: true}}\n    \
         assumeRoleArn: 'arn:aws:iam::{{account}}:role/stacksync-target'\n    \
         targets: {{organizationalUnits: [{unit}], recursive: true, regions: [us-east-1, eu-west-1]}}\n",
        w.url
    );
    // Applied as `stacksync apply` applies it.
    let desired = parse_manifest("stacks.yaml", &text).unwrap();
    let config = Emulator::shared().sdk_config();
    let organizations = Arc::new(stacksync::wiring::organizations(&config, None).await);
    let units = read_units(Some(organizations.as_ref()), &[&desired[0]])
        .await
        .unwrap();
    let registry = &w.h.steps.registry;
    let now = now_millis();
    let current = registry.list().await.unwrap();
    let home = registry.region();
    let plan = plan_with_fleets(
        &desired,
        &units,
        &current,
        false,
        home.as_deref(),
        Writer::Cli,
    )
    .unwrap();
    apply_plan(registry, &plan, now, |_| {}).await.unwrap();
    record_fleets(registry, &desired, &units, false, now)
        .await
        .unwrap();

    let mut scheduler = w.scheduler();
    scheduler.config.organizations = Some(organizations);
    let mut ran = Vec::new();
    let report = schedule(&w, &scheduler, now, &mut ran).await;
    assert!(
        report.fleets_read.is_empty(),
        "read at the apply: {report:?}"
    );
    assert_eq!(ran.len(), 2, "{report:?}");
    for region in ["us-east-1", "eu-west-1"] {
        assert_eq!(
            stack_status(&first, region, &name).await.as_deref(),
            Some("CREATE_COMPLETE")
        );
    }

    // An account in a unit under the fleet's (`recursive`).
    let below = org.unit(Some(&unit)).await;
    let joined = org.account(&below).await;
    let report = schedule(&w, &scheduler, now + 3_600_000, &mut ran).await;
    let created = vec![
        format!("{name}-{joined}-eu-west-1"),
        format!("{name}-{joined}-us-east-1"),
    ];
    assert_eq!(
        report.fleets_read,
        [(
            name.clone(),
            Reread::Applied {
                created: created.clone(),
                pruned: vec![]
            }
        )],
        "{report:?}"
    );
    let started: Vec<&str> = report.started.iter().map(|s| s.stack.as_str()).collect();
    assert_eq!(started, created, "started in the run that wrote them");
    for region in ["us-east-1", "eu-west-1"] {
        assert_eq!(
            stack_status(&joined, region, &name).await.as_deref(),
            Some("CREATE_COMPLETE"),
            "{joined}/{region}"
        );
    }
    // Read once an interval: the next run reads nothing.
    let report = schedule(&w, &scheduler, now + 3_600_000 + 60_000, &mut ran).await;
    assert!(report.fleets_read.is_empty(), "{report:?}");
}

/// A fleet in a registry source (the list of stacks in Git): the
/// scheduler applies the commit (the fleet recorded as the source's, its
/// unit not read yet), reads the unit in the same run, and starts the
/// targets it makes; they are the source's entries, and a pushed commit
/// without the fleet (applied by the events function) prunes them.
#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_in_a_registry_source_is_applied_read_and_started_by_one_scheduler_run() {
    let w = World::new("fleet-source").await;
    let org = Organization::shared().await;
    let unit = org.unit(None).await;
    let account = org.account(&unit).await;
    let name = w.name("base");
    // Another entry beside the fleet: a commit that prunes every entry of
    // its source is held (the prune guard).
    let keep = w.name("keep");
    let kept = format!("stacks:\n  - name: {keep}\n    source: {{path: ./b.yaml}}\n");
    let stacks = format!(
        "{kept}  - name: {name}\n    source: {{path: ./b.yaml}}\n    \
         assumeRoleArn: 'arn:aws:iam::{{account}}:role/stacksync-target'\n    \
         destroyOnDelete: true\n    targets: {{organizationalUnits: [{unit}], regions: [eu-west-1]}}\n"
    );
    w.repo.commit(
        &[
            ("stacks.yaml", stacks.as_bytes()),
            ("b.yaml", QUEUE.as_bytes()),
        ],
        "a fleet",
    );
    w.add_source("platform", "stacks.yaml").await;
    let mut scheduler = w.scheduler();
    scheduler.config.organizations = Some(Arc::new(
        stacksync::wiring::organizations(&Emulator::shared().sdk_config(), None).await,
    ));
    let mut ran = Vec::new();
    let report = schedule(&w, &scheduler, now_millis(), &mut ran).await;
    let target = format!("{name}-{account}-eu-west-1");
    assert_eq!(report.fleets_read.len(), 1, "{report:?}");
    let started: Vec<&str> = report.started.iter().map(|s| s.stack.as_str()).collect();
    assert_eq!(started, [target.as_str(), keep.as_str()], "{report:?}");
    assert_eq!(
        stack_status(&account, "eu-west-1", &name).await.as_deref(),
        Some("CREATE_COMPLETE")
    );
    let entry = w.h.entry(&target).await;
    assert_eq!(entry.owner.map(|o| o.source), Some("platform".to_owned()));

    // Pushed: the events function applies the commit and starts the
    // pruned target.
    w.commit_and_push(&[("stacks.yaml", kept.as_bytes())], "no fleet")
        .await;
    // (The push also starts the entries that follow the repository.)
    let ran = w.run_started().await;
    assert!(ran.contains(&target), "{ran:?}");
    assert_eq!(
        stack_status(&account, "eu-west-1", &name).await,
        None,
        "deleted (destroyOnDelete)"
    );
}

/// A fleet rolled out in waves (`rollout:`), each target's run by the real
/// state machine with its function's identity (the calls recorded for the
/// IAM conformance test): a target whose wave's turn has not come ends
/// `Pending (Rollout)` at its start, its stack untouched; the run that
/// ends the wave before starts it, whichever step ends that run (a stack
/// created or updated: poll-status; found in sync: template-upload; failed
/// within the failure tolerance: finalize; a change set refused as empty at
/// once, change-set: `scripted.rs`).
#[tokio::test(flavor = "multi_thread")]
async fn a_rollout_goes_wave_by_wave_each_started_by_the_end_of_the_one_before() {
    use stacksync::ports::RunStarter;
    use stacksync_testkit::parked::ChannelStarter;
    const FAILS_EAST: &str = "Conditions:\n  East: !Equals [!Ref 'AWS::Region', us-east-1]\nResources:\n  Queue:\n    Type: AWS::SQS::Queue\n  Bad:\n    Type: AWS::SQS::Queue\n    Condition: East\n    Properties: {QueueName: not-a-fifo-name, FifoQueue: true}\n";
    let mut w = World::new("fleet-rollout").await;
    let (starter, mut starts) = ChannelStarter::new();
    w.h.steps.starter = RunStarter::by(Arc::new(starter));
    w.repo.commit(&[("b.yaml", QUEUE.as_bytes())], "b");
    let org = Organization::shared().await;
    let account = org.account(&org.root).await;
    let name = w.name("wave");
    let text = format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: b.yaml, insecure: true}}\n    \
         assumeRoleArn: 'arn:aws:iam::{{account}}:role/stacksync-target'\n    \
         targets: {{accounts: ['{account}'], regions: [eu-west-1, us-east-1]}}\n    \
         rollout: {{maxConcurrent: 1, failureTolerance: 1, order: [us-east-1]}}\n",
        w.url
    );
    apply_listed(&w, &text).await;
    let (east, west) = (
        format!("{name}-{account}-us-east-1"),
        format!("{name}-{account}-eu-west-1"),
    );
    let first = w.repo.commit(&[("b.yaml", QUEUE.as_bytes())], "again");
    one_wave(&w, &mut starts, [&east, &west], &first, true).await;
    for region in ["us-east-1", "eu-west-1"] {
        assert_eq!(
            stack_status(&account, region, &name).await.as_deref(),
            Some("CREATE_COMPLETE"),
            "{region}"
        );
    }
    // The template changed, not its resources: CloudFormation's change
    // set is empty (the run that finds it so ends the first wave).
    let comment = format!("# the same queue\n{QUEUE}");
    let same = w
        .repo
        .commit(&[("b.yaml", comment.as_bytes())], "a comment");
    one_wave(&w, &mut starts, [&east, &west], &same, true).await;
    // A failure within the tolerance (1) ends its wave as a success would.
    let bad = w
        .repo
        .commit(&[("b.yaml", FAILS_EAST.as_bytes())], "fails in us-east-1");
    one_wave(&w, &mut starts, [&east, &west], &bad, false).await;
    assert_eq!(
        w.h.entry(&east).await.status.phase,
        stacksync::status::Phase::Failed
    );
}

/// Runs a rollout of `revision` over `[east, west]`, one target a wave:
/// `west` first (held), then `east` (ending as `east_succeeds` says),
/// whose end starts `west`, which then ends `Ready` at `revision`.
async fn one_wave(
    w: &World,
    starts: &mut tokio::sync::mpsc::UnboundedReceiver<(String, stacksync::ports::Trigger)>,
    [east, west]: [&String; 2],
    revision: &str,
    east_succeeds: bool,
) {
    let scheduled = |stack: &str| json!({"stackId": stack, "trigger": {"kind": "schedule"}});
    // eu-west-1 is the second wave: held before it reads its source.
    let outcome = w.h.reconcile_with(west, scheduled(west)).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    let held = w.h.entry(west).await.status;
    let hold = held.inputs.held_by_rollout.clone().expect("held");
    assert_eq!(hold.revision, revision, "{:?}", held.message);
    // The first wave's run ends, and starts the second.
    let outcome = w.h.reconcile_with(east, scheduled(east)).await;
    assert_eq!(
        matches!(outcome, Outcome::Succeeded(_)),
        east_succeeds,
        "{outcome:?}"
    );
    let (started, trigger) = starts.try_recv().expect("the next wave started");
    assert_eq!(
        (started.as_str(), trigger.kind),
        (west.as_str(), stacksync::ports::TriggerKind::Rollout)
    );
    if east_succeeds {
        // Run again before the second wave's start is taken (as if it were
        // lost): found in sync (template-upload ends the run), it starts
        // the second wave again (the same execution name: one run).
        w.h.take_states();
        let outcome = w.h.reconcile_with(east, scheduled(east)).await;
        assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
        let states = w.h.take_states();
        assert!(!states.contains(&"ChangeSet".to_owned()), "{states:?}");
        assert!(starts.try_recv().is_err(), "the same start, made once");
    }
    let input = json!({"stackId": west, "trigger": trigger});
    let outcome = w.h.reconcile_with(west, input).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    let ended = w.h.entry(west).await.status;
    assert_eq!(
        ended.phase,
        stacksync::status::Phase::Ready,
        "{:?}",
        ended.message
    );
    assert_eq!(ended.run.last_attempted_revision.as_deref(), Some(revision));
}

/// `approval:` on a fleet, by the real state machine with each function's
/// identity (the calls recorded for the IAM test): the first wave's target
/// asks, a person approves, and the change-set step records its changes
/// as approved for the fleet; the next wave's target, with the same
/// changes, runs them without asking (poll-status reads the record).
#[tokio::test(flavor = "multi_thread")]
async fn a_change_approved_for_a_fleets_first_wave_runs_in_the_next_without_asking() {
    let w = World::new("fleet-approved").await;
    w.repo.commit(&[("b.yaml", QUEUE.as_bytes())], "b");
    let org = Organization::shared().await;
    let account = org.account(&org.root).await;
    let name = w.name("appr");
    let text = format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: b.yaml, insecure: true}}\n    \
         assumeRoleArn: 'arn:aws:iam::{{account}}:role/stacksync-target'\n    \
         approval: always\n    \
         targets: {{accounts: ['{account}'], regions: [eu-west-1, us-east-1]}}\n    \
         rollout: {{maxConcurrent: 1, order: [us-east-1]}}\n",
        w.url
    );
    apply_listed(&w, &text).await;
    let (east, west) = (
        format!("{name}-{account}-us-east-1"),
        format!("{name}-{account}-eu-west-1"),
    );
    let (outcome, ()) = tokio::join!(w.h.reconcile(&east), async {
        let awaiting = w.h.awaiting(&east).await;
        w.h.approve(&east, &awaiting).await;
    });
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    let outcome = w.h.reconcile(&west).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    let status = w.h.entry(&west).await.status;
    assert!(status.approval.records.is_empty(), "it did not ask");
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("approved for its fleet by tester"),
        "{message}"
    );
    assert_eq!(
        stack_status(&account, "eu-west-1", &name).await.as_deref(),
        Some("CREATE_COMPLETE")
    );
}
