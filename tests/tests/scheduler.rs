//! The scheduler against the emulator: registries of up to 10,000 stacks in
//! moto's DynamoDB, Git repositories served by `git daemon` on 127.0.0.1,
//! executions started in moto's Step Functions (and counted there), and every
//! API call counted with moto's recorder.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeSet;

use stacksync::clock::now_millis;
use stacksync::registry::Lease;
use stacksync::registry::{Entries, Schedule};
use stacksync::status::{Phase, Timestamp};
use stacksync::triggers::scheduler::judge::Reason;
use stacksync_testkit::Emulator;
use stacksync_testkit::fleet::{Fleet, steady_entry};
use stacksync_testkit::iam::as_function;

/// The DynamoDB operations recorded for `table` (its name is in every body).
fn dynamodb_calls(emulator: &Emulator, table: &str) -> Vec<String> {
    emulator
        .recorded_operations_containing(table)
        .into_iter()
        .filter(|op| op.starts_with("dynamodb:"))
        .collect()
}

fn count(ops: &[String], op: &str) -> usize {
    ops.iter().filter(|o| o.as_str() == op).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_stacks_over_fifty_sources_one_percent_moved_start_exactly_those_hundred() {
    let emulator = Emulator::shared();
    emulator.start_recording();
    // Two repositories with 50 followers each move: 100 stacks, 1%.
    let mut sizes = vec![50, 50];
    sizes.extend((0..48).map(|i| 9_900 / 48 + usize::from(i < 9_900 % 48)));
    assert_eq!(sizes.iter().sum::<usize>(), 10_000);
    let fleet = Fleet::new("sched10k", &sizes).await;
    let table = fleet.registry.table().to_owned();
    let scheduler = fleet.scheduler(500);

    // Idle: nothing due, no source moved.
    let before = dynamodb_calls(emulator, &table).len();
    let idle = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    let idle_calls = &dynamodb_calls(emulator, &table)[before..];
    assert_eq!(idle.errors, Vec::<String>::new());
    assert_eq!(
        (idle.due, idle.sources_checked, idle.sources_examined),
        (0, 50, 0)
    );
    assert!(idle.started.is_empty());
    assert_eq!(
        idle_calls,
        vec!["dynamodb:Query"; 5],
        "an idle run reads the four due shards and the sources, nothing else"
    );
    assert!(fleet.execution_names().await.is_empty());

    // Push to two repositories.
    let moved: BTreeSet<String> = fleet.followers[0]
        .iter()
        .chain(&fleet.followers[1])
        .cloned()
        .collect();
    let heads: Vec<String> = (0..2)
        .map(|i| fleet.repos[i].commit(&[("stack.yaml", b"Resources: {} # v2\n")], "second"))
        .collect();
    let before = dynamodb_calls(emulator, &table).len();
    let report = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    let calls = dynamodb_calls(emulator, &table)[before..].to_vec();
    assert_eq!(report.errors, Vec::<String>::new());
    let started: BTreeSet<String> = report.started.iter().map(|s| s.stack.clone()).collect();
    assert_eq!(started, moved, "exactly the followers of the moved sources");
    assert!(report.started.iter().all(|s| s.reason == Reason::Pushed));
    assert_eq!((report.sources_examined, report.heads_recorded), (2, 2));
    assert_eq!(fleet.execution_names().await.len(), 100);
    // Reads proportional to what moved: the five queries of every run, one
    // source-index query per moved source, one write per recorded head.
    assert_eq!(count(&calls, "dynamodb:Query"), 5 + 2, "{calls:?}");
    assert_eq!(count(&calls, "dynamodb:UpdateItem"), 2, "{calls:?}");
    assert_eq!(calls.len(), 9, "{calls:?}");
    // The executions carry the pushed commit.
    let inputs = emulator.recorded_bodies("StartExecution", &fleet.machine);
    for head in &heads {
        assert_eq!(
            inputs.iter().filter(|b| b.contains(head.as_str())).count(),
            50
        );
    }
    // No CloudFormation call for any of the fleet's stacks.
    let cfn = emulator
        .recorded_operations_containing(&fleet.prefix)
        .into_iter()
        .filter(|op| op.starts_with("cloudformation:"))
        .count();
    assert_eq!(cfn, 0);

    // The heads are recorded: the next run is idle again.
    let again = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(again.started.is_empty(), "{again:?}");
    assert_eq!(fleet.execution_names().await.len(), 100);

    // 40 stacks come due (their interval passed): 40 starts, and the reads
    // follow the 40 due entries, not the 10,000.
    let now = now_millis();
    let due: Vec<String> = fleet.followers[10].iter().take(40).cloned().collect();
    let head = fleet.repos[10].head();
    let entries: Vec<_> = due
        .iter()
        .map(|name| {
            let mut e = steady_entry(name, &fleet.urls[10], &head, now);
            e.status.next_reconcile_at = Some(Timestamp(now - 1_000));
            e
        })
        .collect();
    fleet.write(&entries).await;
    let before = dynamodb_calls(emulator, &table).len();
    let report = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    let calls = dynamodb_calls(emulator, &table)[before..].to_vec();
    assert_eq!(report.due, 40);
    assert_eq!(
        report
            .started
            .iter()
            .map(|s| s.stack.clone())
            .collect::<BTreeSet<_>>(),
        due.iter().cloned().collect::<BTreeSet<_>>()
    );
    assert!(report.started.iter().all(|s| s.reason == Reason::Recheck));
    // Five queries (pages of due items: 40 fit in one per shard) and one
    // conditional write per started entry (its due time moves past the guard).
    assert_eq!(count(&calls, "dynamodb:Query"), 5, "{calls:?}");
    assert_eq!(count(&calls, "dynamodb:UpdateItem"), 40, "{calls:?}");
    assert_eq!(calls.len(), 45, "{calls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn due_entries_start_for_their_reason_and_the_cap_defers_the_rest_without_loss() {
    let fleet = Fleet::new("schedcap", &[12]).await;
    let now = now_millis();
    let head = fleet.repos[0].head();
    let url = fleet.urls[0].clone();
    let names = &fleet.followers[0];
    let mut entries = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let mut e = steady_entry(name, &url, &head, now);
        e.status.next_reconcile_at = Some(Timestamp(now - 10_000 + i as i64));
        match i {
            0 => e.status.phase = Phase::Failed,
            // The newest due time: chosen first all the same.
            11 => e.spec_version = 2,
            2 => e.deletion_requested_at = Some(Timestamp(now - 5_000)),
            3 => e.suspended = true,
            4 => {
                e.lease = Some(Lease {
                    owner: "arn:running".into(),
                    expires_at: Timestamp(now + 600_000),
                });
            }
            _ => {}
        }
        entries.push(e);
    }
    fleet.write(&entries).await;
    let scheduler = fleet.scheduler(4);

    // Two schedulers at once (EventBridge may invoke twice): deterministic
    // names mean no stack is started twice.
    let (a, b) = as_function("scheduler", async {
        tokio::join!(scheduler.run(now), scheduler.run(now))
    })
    .await;
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.errors, Vec::<String>::new());
    let first: Vec<(String, Reason)> = a
        .started
        .iter()
        .chain(&b.started)
        .map(|s| (s.stack.clone(), s.reason))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    // The four most urgent: the deletion and the spec change (though it came
    // due last), then the retry, then the longest-waiting re-check.
    assert_eq!(
        first,
        vec![
            (names[0].clone(), Reason::Retry),
            (names[1].clone(), Reason::Recheck),
            (names[11].clone(), Reason::SpecChanged),
            (names[2].clone(), Reason::Deleting),
        ]
    );
    assert_eq!(fleet.execution_names().await.len(), 4);
    // 12 due: 2 postponed (suspended, held), 4 started, 6 deferred.
    assert_eq!(a.deferred, 6, "{a:?}");
    // The suspended and the held entries moved without a start.
    let suspended = fleet.registry.get(&names[3]).await.unwrap().unwrap();
    assert!(suspended.status.next_reconcile_at.unwrap().0 >= now + 600_000 - 1);
    let held = fleet.registry.get(&names[4]).await.unwrap().unwrap();
    assert_eq!(
        held.status.next_reconcile_at,
        Some(Timestamp(now + 600_000))
    );

    // The rest follow in later runs, four at a time, each exactly once.
    let mut runs = 1;
    while fleet.execution_names().await.len() < 10 {
        let r = as_function("scheduler", scheduler.run(now_millis()))
            .await
            .unwrap();
        assert!(r.started.len() <= 4);
        runs += 1;
        assert!(runs < 10, "the deferred entries never came: {r:?}");
    }
    assert_eq!(runs, 3);
    let r = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(r.started.is_empty(), "{r:?}");
    let executions = fleet.execution_names().await;
    assert_eq!(executions.len(), 10);
    let started: BTreeSet<&str> = executions
        .iter()
        .map(|n| n.split("_schedule_").next().unwrap())
        .collect();
    let expected: BTreeSet<&str> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, n)| n.as_str())
        .collect();
    assert_eq!(started, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_source_no_stack_follows_any_more_is_forgotten_when_it_moves() {
    let fleet = Fleet::new("schedforget", &[1]).await;
    let follower = fleet.followers[0][0].clone();
    // The only follower's entry is gone (its stack was removed from the registry).
    Emulator::shared()
        .dynamodb()
        .delete_item()
        .table_name(fleet.registry.table())
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("stack#{follower}")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(fleet.registry.sources().await.unwrap().len(), 1);
    fleet.repos[0].commit(&[("stack.yaml", b"Resources: {} # v2\n")], "second");
    let scheduler = fleet.scheduler(10);
    let report = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert_eq!(report.errors, Vec::<String>::new());
    assert_eq!((report.sources_examined, report.sources_forgotten), (1, 1));
    assert!(report.started.is_empty());
    assert!(fleet.registry.sources().await.unwrap().is_empty());
    // Nothing is left to look at: the next run lists no source.
    let idle = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert_eq!(idle.sources_checked, 0);
}
