//! The scheduler against the emulator: registries of up to 10,000 stacks in
//! moto's DynamoDB, Git repositories served by `git daemon` on 127.0.0.1,
//! executions started in moto's Step Functions (and counted there), and the
//! registry's DynamoDB calls counted per run in the test
//! ([`stacksync_testkit::counted`]); private Git repositories listed with
//! their secrets (Secrets Manager, SSM) and S3 sources checked with one
//! `HeadObject`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use stacksync_testkit::private_sources::{
    QUEUE, TWO_QUEUES, archive, entry, private_repo, queue_count, ready, stack_name,
};
use std::collections::BTreeSet;

use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::adapters::s3_source::S3Archives;
use stacksync::asl::Outcome;
use stacksync::clock::now_millis;
use stacksync::fakes::RecordingStarter;
use stacksync::registry::Lease;
use stacksync::registry::{Entries, Schedule};
use stacksync::seen::Change;
use stacksync::status::{Phase, Timestamp};
use stacksync::triggers::scheduler::judge::Reason;
use stacksync::triggers::scheduler::{Config as SchedulerConfig, Scheduler};
use stacksync::wiring::sdk_sources;
use stacksync_testkit::counted::CallCounter;
use stacksync_testkit::counted::count;
use stacksync_testkit::fleet::{Fleet, FleetScheduler, steady_entry};
use stacksync_testkit::harness::Harness;
use stacksync_testkit::http::Config;
use stacksync_testkit::iam::as_function;
use stacksync_testkit::{Emulator, unique_name};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_stacks_checked_every_run_and_only_what_changed_is_started() {
    // Two repositories with 50 followers each move: 100 stacks, 1%.
    let mut sizes = vec![50, 50];
    sizes.extend((0..48).map(|i| 9_900 / 48 + usize::from(i < 9_900 % 48)));
    assert_eq!(sizes.iter().sum::<usize>(), 10_000);
    let fleet = Fleet::new("sched10k", &sizes).await;
    let scheduler = fleet.scheduler(500);
    let idle_queries = an_idle_run_reads_and_writes_nothing(&fleet, &scheduler).await;
    changes_outside_stacksync_start_their_stacks_once(&fleet, &scheduler, idle_queries).await;
    a_push_starts_exactly_the_followers_of_its_sources(&fleet, &scheduler, idle_queries).await;
    stacks_marked_due_start_and_the_reads_follow_them(&fleet, &scheduler, idle_queries).await;
}

/// Idle: nothing due, no source moved, every stack as its run left it.
/// Returns the number of DynamoDB queries of an idle run: what every run reads.
async fn an_idle_run_reads_and_writes_nothing(fleet: &Fleet, scheduler: &FleetScheduler) -> usize {
    let before = fleet.calls.len();
    let idle = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    let idle_calls = fleet.calls.since(before);
    assert_eq!(idle.errors, Vec::<String>::new());
    assert_eq!(
        (idle.due, idle.sources_checked, idle.sources_examined),
        (0, 50, 0)
    );
    assert_eq!(
        (idle.stacks_watched, idle.stacks_fine, idle.listings),
        (10_000, 10_000, 4),
        "every stack checked, against one listing per region (the fleet's four)"
    );
    assert!(idle.started.is_empty());
    assert!(
        idle_calls.iter().all(|c| c == "dynamodb:Query"),
        "an idle run writes nothing: {idle_calls:?}"
    );
    // The four due shards, the sources, and the four shards of the watch
    // index in pages of 1 MB (moto pages by the whole item, AWS by the
    // projected one: more pages here than in AWS, where 10,000 stacks of
    // ~350 bytes are one page a shard; BENCHMARKS.md counts the bytes).
    let idle_queries = idle_calls.len();
    assert!(idle_queries >= 9, "{idle_calls:?}");
    assert_eq!(fleet.cfn_calls.count_of("cloudformation:ListStacks"), 4);
    assert!(fleet.execution_names().await.is_empty());
    idle_queries
}

/// Changed outside stacksync: one stack updated, one deleted.
async fn changes_outside_stacksync_start_their_stacks_once(
    fleet: &Fleet,
    scheduler: &FleetScheduler,
    idle_queries: usize,
) {
    let updated = fleet.followers[5][0].clone();
    let deleted = fleet.followers[6][0].clone();
    fleet
        .cfn_of(&updated)
        .update_stack()
        .stack_name(&updated)
        .template_body(
            r#"{"Resources": {"Opened": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}"#,
        )
        .send()
        .await
        .unwrap();
    fleet
        .cfn_of(&deleted)
        .delete_stack()
        .stack_name(&deleted)
        .send()
        .await
        .unwrap();
    let before = fleet.calls.len();
    let report = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    let calls = fleet.calls.since(before);
    assert_eq!(report.errors, Vec::<String>::new());
    let started: BTreeSet<(String, Reason, Option<Change>)> = report
        .started
        .iter()
        .map(|s| (s.stack.clone(), s.reason, s.change))
        .collect();
    assert_eq!(
        started,
        BTreeSet::from([
            (updated.clone(), Reason::Changed, Some(Change::Updated)),
            (deleted.clone(), Reason::Changed, Some(Change::Deleted)),
        ])
    );
    assert_eq!(report.stacks_fine, 9_998);
    assert_eq!(
        (
            count(&calls, "dynamodb:Query"),
            count(&calls, "dynamodb:UpdateItem")
        ),
        (idle_queries, 2),
        "the reads of any run, and each started stack put in the queue: {calls:?}"
    );
    assert_eq!(fleet.execution_names().await.len(), 2);
    // The next run starts nothing more: both are in the queue until their
    // runs end (or, should they never, until the guard passes).
    let again = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(again.started.is_empty(), "{again:?}");
    assert_eq!(again.stacks_fine, 9_998);
}

/// Push to two repositories.
async fn a_push_starts_exactly_the_followers_of_its_sources(
    fleet: &Fleet,
    scheduler: &FleetScheduler,
    idle_queries: usize,
) {
    let moved: BTreeSet<String> = fleet.followers[0]
        .iter()
        .chain(&fleet.followers[1])
        .cloned()
        .collect();
    let heads: Vec<String> = (0..2)
        .map(|i| fleet.repos[i].commit(&[("stack.yaml", b"Resources: {} # v2\n")], "second"))
        .collect();
    let before = fleet.calls.len();
    let report = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    let calls = fleet.calls.since(before);
    assert_eq!(report.errors, Vec::<String>::new());
    let started: BTreeSet<String> = report.started.iter().map(|s| s.stack.clone()).collect();
    assert_eq!(started, moved, "exactly the followers of the moved sources");
    assert!(report.started.iter().all(|s| s.reason == Reason::Pushed));
    assert_eq!((report.sources_examined, report.heads_recorded), (2, 2));
    assert_eq!(fleet.execution_names().await.len(), 102);
    // Reads proportional to what moved: the queries of every run, one
    // source-index query per moved source, one write per recorded head.
    assert_eq!(
        count(&calls, "dynamodb:Query"),
        idle_queries + 2,
        "{calls:?}"
    );
    assert_eq!(count(&calls, "dynamodb:UpdateItem"), 2, "{calls:?}");
    assert_eq!(calls.len(), idle_queries + 4, "{calls:?}");
    // The executions carry the pushed commit.
    let inputs = fleet.execution_inputs().await;
    for head in &heads {
        assert_eq!(
            inputs.iter().filter(|b| b.contains(head.as_str())).count(),
            50
        );
    }
    // No per-stack CloudFormation call in any run: one listing per region.
    assert_eq!(fleet.cfn_calls.count_of("cloudformation:ListStacks"), 4 * 4);
    assert_eq!(fleet.cfn_calls.count_of("cloudformation:DescribeStacks"), 0);

    // The heads are recorded: the next run is idle again.
    let again = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(again.started.is_empty(), "{again:?}");
    assert_eq!(fleet.execution_names().await.len(), 102);
}

/// 40 stacks come due (a CloudFormation event marked them): 40 starts,
/// and the reads follow the 40 due entries, not the 10,000.
async fn stacks_marked_due_start_and_the_reads_follow_them(
    fleet: &Fleet,
    scheduler: &FleetScheduler,
    idle_queries: usize,
) {
    let now = now_millis();
    let due: Vec<String> = fleet.followers[10].iter().take(40).cloned().collect();
    let head = fleet.repos[10].head();
    let entries: Vec<_> = due
        .iter()
        .map(|name| {
            let mut e = fleet.watched_entry(name, &fleet.urls[10], &head, now);
            e.status.times.next_reconcile_at = Some(Timestamp(now - 1_000));
            e
        })
        .collect();
    fleet.write(&entries).await;
    let before = fleet.calls.len();
    let report = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    let calls = fleet.calls.since(before);
    assert_eq!(report.due, 40);
    assert_eq!(
        report
            .started
            .iter()
            .map(|s| s.stack.clone())
            .collect::<BTreeSet<_>>(),
        due.iter().cloned().collect::<BTreeSet<_>>()
    );
    assert!(report.started.iter().all(|s| s.reason == Reason::Marked));
    // The queries (pages of due items: 40 fit in one per shard) and one
    // conditional write per started entry (its due time moves past the guard).
    assert_eq!(count(&calls, "dynamodb:Query"), idle_queries, "{calls:?}");
    assert_eq!(count(&calls, "dynamodb:UpdateItem"), 40, "{calls:?}");
    assert_eq!(calls.len(), idle_queries + 40, "{calls:?}");
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
        e.status.times.next_reconcile_at = Some(Timestamp(now - 10_000 + i as i64));
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
                    taken_at: None,
                    parked: None,
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
    // due last), then the retry, then the longest-waiting mark.
    assert_eq!(
        first,
        vec![
            (names[0].clone(), Reason::Retry),
            (names[1].clone(), Reason::Marked),
            (names[11].clone(), Reason::SpecChanged),
            (names[2].clone(), Reason::Deleting),
        ]
    );
    assert_eq!(fleet.execution_names().await.len(), 4);
    // 12 due: 2 postponed (suspended, held), 4 started, 6 deferred.
    assert_eq!(a.deferred, 6, "{a:?}");
    // The suspended entry left the queue (resuming puts it back), the held
    // one moved to its lease's end, neither started.
    let suspended = fleet.registry.get(&names[3]).await.unwrap().unwrap();
    assert_eq!(suspended.status.times.next_reconcile_at, None);
    let held = fleet.registry.get(&names[4]).await.unwrap().unwrap();
    assert_eq!(
        held.status.times.next_reconcile_at,
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

/// A stack item written by a later CLI, or edited by hand, never stops the
/// scheduler for the others: one that cannot be read is skipped and named,
/// and one whose spec holds unknown fields is read (and refused by its run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_item_is_skipped_and_named_and_the_others_start() {
    use stacksync::registry::item::to_attr;
    use stacksync::registry::{Specs, entry_item};

    let fleet = Fleet::new("schedbad", &[3]).await;
    let now = now_millis();
    let head = fleet.repos[0].head();
    let names = &fleet.followers[0];
    let mut items = Vec::new();
    for name in names {
        let mut e = steady_entry(name, &fleet.urls[0], &head, now);
        e.status.times.next_reconcile_at = Some(Timestamp(now - 1_000));
        items.push(entry_item(&e));
    }
    // 0: a spec without its source; 1: a spec with a field of a later CLI.
    let mut spec = stacksync::registry::item::from_attr(&items[0]["spec"]).unwrap();
    spec.as_object_mut().unwrap().remove("source");
    items[0].insert("spec".into(), to_attr(&spec));
    let mut spec = stacksync::registry::item::from_attr(&items[1]["spec"]).unwrap();
    spec["canary"] = serde_json::json!("always");
    items[1].insert("spec".into(), to_attr(&spec));
    let dynamodb = Emulator::shared().dynamodb();
    for item in items {
        dynamodb
            .put_item()
            .table_name(fleet.registry.table())
            .set_item(Some(item))
            .send()
            .await
            .unwrap();
    }

    let report = as_function("scheduler", fleet.scheduler(10).run(now))
        .await
        .unwrap();
    assert_eq!(report.unreadable, vec![format!("stack#{}", names[0])]);
    assert_eq!(report.errors, Vec::<String>::new());
    let started: BTreeSet<String> = report.started.iter().map(|s| s.stack.clone()).collect();
    assert_eq!(
        started,
        [names[1].clone(), names[2].clone()].into_iter().collect()
    );

    let (entries, unreadable) = fleet.registry.list_all().await.unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(unreadable.len(), 1);
    assert!(
        unreadable[0].detail.contains("missing field `source`"),
        "{unreadable:?}"
    );
    let newer = fleet.registry.get(&names[1]).await.unwrap().unwrap();
    let why = newer.unsupported.unwrap();
    assert!(why.contains("(canary)"), "{why}");
}

/// The scheduler lists a private repository with its secret and checks an
/// S3 source with one HeadObject; when either moves, it starts exactly its
/// follower, whose run deploys the new revision.
#[tokio::test(flavor = "multi_thread")]
async fn the_scheduler_sees_private_and_s3_sources_move_and_starts_their_followers() {
    let emulator = Emulator::shared();
    let token = unique_name("tok");
    let (repo, server) = private_repo(
        "sched",
        Config {
            accounts: vec![("ci-bot".into(), token.clone())],
            ..Config::default()
        },
    );
    let secret = emulator
        .put_secret(
            "git-token",
            &format!(r#"{{"token": "{token}", "username": "ci-bot", "hosts": ["127.0.0.1"]}}"#),
        )
        .await;
    let bucket = emulator.source_bucket(true).await;
    let key = "app/template.zip";
    emulator
        .put_object(&bucket, key, archive("zip", QUEUE))
        .await;
    let h = Harness::new("sched").await;
    let (git, s3) = (stack_name("git"), stack_name("s3"));
    h.apply(&format!(
        "{}  - name: {s3}\n    source: {{s3: 's3://{bucket}/{key}', path: stacks/t.yaml}}\n",
        entry(&git, &server.url(&repo), &secret)
    ))
    .await;
    let s3_calls = CallCounter::new("s3");
    let workdir = std::env::temp_dir().join(unique_name("sched"));
    let mut sources = sdk_sources(&emulator.sdk_config(), true, &workdir);
    let counted = aws_sdk_s3::config::Builder::from(&emulator.sdk_config())
        .force_path_style(true)
        .interceptor(s3_calls.clone())
        .build();
    sources.s3 = Some(S3Archives::new(
        aws_sdk_s3::Client::from_conf(counted),
        workdir,
    ));
    let scheduler = Scheduler {
        registry: h.steps.registry.clone(),
        starter: RecordingStarter::new(),
        sources,
        cloudformation: SdkCloudFormationFactory::new(emulator.sdk_config()),
        config: SchedulerConfig::default(),
    };
    let first = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert_eq!(first.errors, Vec::<String>::new());
    assert_eq!(first.started.len(), 2, "both new: {first:?}");
    for (_, stack, _) in scheduler.starter.started() {
        assert!(ready(&h.reconcile(&stack).await), "{stack}");
    }

    repo.commit(&[("t.yaml", TWO_QUEUES)], "second queue");
    emulator
        .put_object(&bucket, key, archive("zip", TWO_QUEUES))
        .await;
    let mark = s3_calls.len();
    let moved = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert_eq!(
        s3_calls.since(mark),
        ["s3:HeadObject"],
        "one HeadObject for the S3 source"
    );
    assert_eq!(moved.errors, Vec::<String>::new());
    let mut started: Vec<(String, Reason)> = moved
        .started
        .iter()
        .map(|s| (s.stack.clone(), s.reason))
        .collect();
    started.sort();
    let mut expected = vec![(git.clone(), Reason::Pushed), (s3.clone(), Reason::Pushed)];
    expected.sort();
    assert_eq!(started, expected);
    for stack in [&git, &s3] {
        assert!(ready(&h.reconcile(stack).await), "{stack}");
        assert_eq!(
            queue_count(stack).await,
            2,
            "{stack}: the new revision deployed"
        );
    }
    let idle = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(idle.started.is_empty(), "nothing moved: {idle:?}");
    assert!(
        server.seen().refused == 0,
        "the scheduler lists with the secret"
    );
}

/// The scheduler lists a repository whose password is in SSM, leaves a
/// source pinned to an S3 version alone when newer versions come, and says
/// which source it cannot read without holding up the others.
#[tokio::test(flavor = "multi_thread")]
async fn the_scheduler_reads_ssm_credentials_keeps_pinned_versions_and_names_what_it_cannot_read() {
    let emulator = Emulator::shared();
    let (repo, server) = private_repo(
        "pinned",
        Config {
            accounts: vec![("deploy".into(), "pass-word".into())],
            ..Config::default()
        },
    );
    let parameter = emulator
        .put_parameter(
            "git-password",
            r#"{"username": "deploy", "password": "pass-word", "hosts": ["127.0.0.1"]}"#,
        )
        .await;
    let bucket = emulator.source_bucket(true).await;
    let key = "app/template.tgz";
    let v1 = emulator
        .put_object(&bucket, key, archive("tgz", QUEUE))
        .await
        .unwrap();
    let h = Harness::new("pinned").await;
    let (git, pinned, missing) = (stack_name("git"), stack_name("pin"), stack_name("miss"));
    h.apply(&format!(
        "{}  - name: {pinned}\n    source: {{s3: 's3://{bucket}/{key}', ref: '{v1}', path: stacks/t.yaml}}\n\
         \x20 - name: {missing}\n    source: {{s3: 's3://{bucket}/nothing-here.zip', path: stacks/t.yaml}}\n",
        entry(&git, &server.url(&repo), &parameter)
    ))
    .await;
    let scheduler = Scheduler {
        registry: h.steps.registry.clone(),
        starter: RecordingStarter::new(),
        sources: sdk_sources(
            &emulator.sdk_config(),
            true,
            &std::env::temp_dir().join(unique_name("pin")),
        ),
        cloudformation: SdkCloudFormationFactory::new(emulator.sdk_config()),
        config: SchedulerConfig::default(),
    };
    let cannot_read = |errors: &[String]| {
        errors.len() == 1 && errors[0].contains("nothing-here.zip: there is no such object")
    };
    let first = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(cannot_read(&first.errors), "{:?}", first.errors);
    assert_eq!(first.started.len(), 3, "all new: {first:?}");
    for stack in [&git, &pinned] {
        assert!(ready(&h.reconcile(stack).await), "{stack}");
    }
    assert!(matches!(h.reconcile(&missing).await, Outcome::Failed(_)));

    repo.commit(&[("t.yaml", TWO_QUEUES)], "second queue");
    emulator
        .put_object(&bucket, key, archive("tgz", TWO_QUEUES))
        .await;
    let moved = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(cannot_read(&moved.errors), "{:?}", moved.errors);
    let started: Vec<(String, Reason)> = moved
        .started
        .iter()
        .map(|s| (s.stack.clone(), s.reason))
        .collect();
    assert_eq!(
        started,
        [(git.clone(), Reason::Pushed)],
        "the pinned stack stays"
    );
    assert!(server.seen().refused == 0);
}
