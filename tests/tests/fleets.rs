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
