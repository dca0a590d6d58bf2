//! The scheduler on the fakes: the queue, the sources and the health check.

use super::*;
use crate::fakes::{
    Failing, MemorySources, RecordingStarter, ScriptedCloudFormation, stack_id, summary,
};
use crate::ports::{PortError, StackSummary};
use crate::registry::memory::MemoryRegistry;
use crate::registry::sample_entry;
use crate::seen::Seen;
use crate::stack_status::StackStatus;
use crate::status::{Phase, Status, Timestamp};

const NOW: EpochMillis = 1_800_000_000_000;
const URL: &str = "https://git.example/infra.git";
/// When the scripted stacks were last changed.
const CHANGED: EpochMillis = NOW - 86_400_000;

type TestScheduler =
    Scheduler<MemoryRegistry, Failing<RecordingStarter>, MemorySources, ScriptedCloudFormation>;

/// What a run recorded of stack `name` left at `CREATE_COMPLETE`.
fn seen(name: &str) -> Seen {
    Seen {
        region: None,
        assume_role_arn: None,
        stack_id: stack_id(name, 1),
        changed_at: Timestamp(CHANGED),
        stack_status: "CREATE_COMPLETE".into(),
        drift: None,
        deployed_hash: "h".into(),
        interval_seconds: 600,
        drift_seconds: None,
    }
}

/// `names` follow URL's `main`, `Ready` at `head`, in no queue, and their
/// stacks are listed as their last run left them; the source is recorded
/// at `head`.
async fn scheduler(names: &[&str], head: &str) -> TestScheduler {
    let registry = MemoryRegistry::new();
    let cfn = ScriptedCloudFormation::default();
    for name in names {
        let mut e = sample_entry(name, Status::default());
        e.status.run.observed_spec_version = 1;
        e.status.run.last_attempted_revision = Some(head.to_owned());
        e.status.applied.seen = Some(seen(name));
        // Drift checked an hour ago, in sync: not due for a day.
        e.status.findings.drift = Some(crate::drift::DriftRecord {
            checked_at: Some(Timestamp(NOW - 3_600_000)),
            stack_drift: Some("IN_SYNC".into()),
            ..Default::default()
        });
        registry.insert(e);
        cfn.script().listing.push(StackSummary {
            drift: Some("IN_SYNC".into()),
            drift_checked_at: Some(NOW - 3_600_000),
            ..summary(name, StackStatus::CreateComplete, CHANGED)
        });
    }
    let key = source_key(URL, Some("main"));
    registry.add_source(&key, URL, "main", None).await.unwrap();
    registry
        .record_source_head(&key, None, head, NOW - 1)
        .await
        .unwrap();
    let sources = MemorySources::new();
    sources.commit(URL, "main", head, &[]);
    Scheduler {
        registry,
        starter: Failing::new(RecordingStarter::new()),
        sources,
        cloudformation: cfn,
        config: Config {
            max_starts: 2,
            ..Config::default()
        },
    }
}

impl TestScheduler {
    fn cfn(&self) -> std::sync::MutexGuard<'_, crate::fakes::Script> {
        self.cloudformation.script()
    }
}

fn started(report: &Report) -> Vec<(&str, Reason, Option<Change>)> {
    report
        .started
        .iter()
        .map(|r| (r.stack.as_str(), r.reason, r.change))
        .collect()
}

#[tokio::test]
async fn an_idle_run_starts_nothing_and_writes_nothing() {
    let s = scheduler(&["a", "b"], "h1").await;
    let before = s.registry.entry("a");
    let report = s.run(NOW).await.unwrap();
    assert_eq!(
        (report.due, report.sources_checked, report.sources_examined),
        (0, 1, 0)
    );
    assert!(
        report.started.is_empty() && report.errors.is_empty(),
        "{report:?}"
    );
    assert_eq!(
        (report.stacks_watched, report.stacks_fine, report.listings),
        (2, 2, 1),
        "every stack checked, one listing"
    );
    assert_eq!(s.registry.entry("a"), before);
    assert_eq!(
        s.cloudformation.operations(),
        ["ListStacks"],
        "no per-stack call"
    );
}

#[tokio::test]
async fn a_stack_changed_outside_stacksync_starts_only_its_reconcile_once() {
    let s = scheduler(&["a", "b", "c"], "h1").await;
    {
        let mut cfn = s.cfn();
        cfn.listing[0].changed_at += 60_000; // a: updated
        cfn.listing[1].stack_id = stack_id("b", 2); // b: replaced
        cfn.listing.remove(2); // c: deleted
    }
    let b_before = s.registry.entry("b");
    let report = s.run(NOW).await.unwrap();
    assert_eq!(
        started(&report),
        [
            ("a", Reason::Changed, Some(Change::Updated)),
            ("b", Reason::Changed, Some(Change::Replaced))
        ],
        "{report:?}"
    );
    assert_eq!(report.deferred, 1, "c waits: the cap is 2");
    let a = s.registry.entry("a").unwrap();
    assert_eq!(
        a.status.times.next_reconcile_at,
        Some(Timestamp(judge::after(NOW, LEASE_TTL.as_secs()))),
        "in the queue until the run ends it: a run that never starts is started again"
    );
    assert_ne!(s.registry.entry("b"), b_before);

    let next = s.run(NOW + 1).await.unwrap();
    assert_eq!(
        started(&next),
        [("c", Reason::Changed, Some(Change::Deleted))],
        "a and b are in the queue (their runs started): c's turn. {next:?}"
    );

    // Two schedulers seeing one change start one run.
    let twice = scheduler(&["a"], "h1").await;
    twice.cfn().listing[0].changed_at += 1;
    let mut first = twice.registry.entry("a").unwrap();
    twice.run(NOW).await.unwrap();
    first.status.times.next_reconcile_at = None;
    twice.registry.insert(first); // as the second scheduler read it
    let second = twice.run(NOW).await.unwrap();
    assert_eq!((second.started.len(), second.already_started), (0, 1));
}

#[tokio::test]
async fn fine_stacks_take_no_start_from_real_work() {
    let s = scheduler(&["a", "b", "c", "d"], "h1").await;
    let mut failed = s.registry.entry("d").unwrap();
    failed.status.phase = Phase::Failed;
    failed.status.times.next_reconcile_at = Some(Timestamp(NOW - 10));
    s.registry.insert(failed);
    s.cfn().listing[0].changed_at += 1;
    s.cfn().listing[1].changed_at += 1;
    let report = s.run(NOW).await.unwrap();
    assert_eq!(
        started(&report),
        [
            ("d", Reason::Retry, None),
            ("a", Reason::Changed, Some(Change::Updated))
        ],
        "the retry first; c (fine) is no candidate"
    );
    assert_eq!((report.deferred, report.stacks_fine), (1, 1));
}

#[tokio::test]
async fn an_account_or_region_that_cannot_be_listed_is_not_taken_for_deleted_stacks() {
    let s = scheduler(&["a", "b"], "h1").await;
    s.cloudformation
        .fail("ListStacks", 1, PortError::Transient("throttled".into()));
    let before = s.registry.entry("a");
    let report = s.run(NOW).await.unwrap();
    assert!(report.started.is_empty(), "{report:?}");
    assert_eq!((report.stacks_unchecked, report.listings), (2, 0));
    assert!(report.errors[0].contains("listing the stacks of region us-east-1"));
    assert_eq!(s.registry.entry("a"), before, "nothing written");
}

#[tokio::test]
async fn stacks_elsewhere_are_listed_once_per_account_and_region() {
    let s = scheduler(&["a", "b", "c", "d"], "h1").await;
    let elsewhere = |name: &str, region: Option<&str>, role: Option<&str>| {
        let mut e = s.registry.entry(name).unwrap();
        let seen = e.status.applied.seen.as_mut().unwrap();
        seen.region = region.map(str::to_owned);
        seen.assume_role_arn = role.map(str::to_owned);
        s.registry.insert(e);
    };
    let role = "arn:aws:iam::210987654321:role/stacksync";
    elsewhere("a", Some("us-east-1"), None); // the home region, named
    elsewhere("b", Some("eu-west-1"), None);
    elsewhere("c", Some("eu-west-1"), Some(role));
    elsewhere("d", Some("eu-west-1"), Some(role));
    let report = s.run(NOW).await.unwrap();
    assert_eq!((report.listings, report.stacks_fine), (3, 4), "{report:?}");
    let mut connections = s.cfn().connections.clone();
    connections.sort();
    let o = |v: &str| Some(v.to_owned());
    assert_eq!(
        connections,
        [
            (o("eu-west-1"), None),
            (o("eu-west-1"), o(role)),
            (o("us-east-1"), None)
        ]
    );
}

#[tokio::test]
async fn stacks_recorded_before_watching_are_looked_at_once_and_intervals_are_checked() {
    let mut s = scheduler(&["a", "b"], "h1").await;
    let mut old = s.registry.entry("a").unwrap();
    old.status.applied.seen = None;
    s.registry.insert(old);
    s.config.period = Some(Duration::from_secs(900));
    let report = s.run(NOW).await.unwrap();
    assert_eq!(started(&report), [("a", Reason::Changed, None)]);
    assert_eq!(
        report.interval_shorter_than_period, 1,
        "b asks for 10m, the scheduler runs every 15m"
    );
}

#[tokio::test]
async fn a_moved_source_starts_its_followers_and_records_its_head() {
    let s = scheduler(&["a", "b"], "h1").await;
    s.sources.commit(URL, "main", "h2", &[]);
    let report = s.run(NOW).await.unwrap();
    assert_eq!(
        started(&report),
        [("a", Reason::Pushed, None), ("b", Reason::Pushed, None)]
    );
    assert_eq!(report.heads_recorded, 1);
    let source = s.registry.source(&source_key(URL, Some("main"))).unwrap();
    assert_eq!(source.head.as_deref(), Some("h2"));
    assert!(
        s.run(NOW + 1).await.unwrap().started.is_empty(),
        "the next run is idle"
    );
}

#[tokio::test]
async fn the_cap_and_a_refused_start_leave_the_rest_due_and_nothing_is_lost() {
    let s = scheduler(&["a", "b", "c"], "h1").await;
    for name in ["a", "b", "c"] {
        let mut e = s.registry.entry(name).unwrap();
        e.status.phase = Phase::Failed;
        e.status.times.next_reconcile_at = Some(Timestamp(NOW - 10));
        s.registry.insert(e);
    }
    s.starter.fail(
        "StartExecution",
        2,
        PortError::Transient("throttled".into()),
    );
    let first = s.run(NOW).await.unwrap();
    assert_eq!(first.started.len(), 1, "{first:?}");
    assert_eq!(first.deferred, 2, "one over the cap, one refused");
    assert_eq!(first.errors.len(), 1);
    let mut all = s.starter.inner.stacks();
    for later in 1..5 {
        s.run(NOW + later).await.unwrap();
        all = s.starter.inner.stacks();
    }
    all.sort();
    assert_eq!(all, ["a", "b", "c"], "each started once in the end");
}

#[tokio::test]
async fn a_registry_that_cannot_be_read_fails_the_run() {
    let s = scheduler(&["a"], "h1").await;
    let failing = Scheduler {
        registry: Failing::new(s.registry),
        starter: s.starter,
        sources: s.sources,
        cloudformation: s.cloudformation,
        config: s.config,
    };
    failing
        .registry
        .fail("Query", 1, PortError::Transient("throttled".into()));
    assert!(failing.run(NOW).await.is_err());
}

#[tokio::test]
async fn a_fleets_new_account_is_written_and_started_in_the_same_run() {
    use crate::fakes::MemoryOrganizations;
    use crate::registry::Fleets;
    let mut s = scheduler(&[], "h1").await;
    let org = MemoryOrganizations::default();
    org.put_unit("r-ab12", "ou-ab12-cd34ef56");
    let text = format!(
        "stacks:\n  - name: fleet\n    source: {{ git: '{URL}', path: f.yaml }}\n    assumeRoleArn: \
         'arn:aws:iam::{{account}}:role/deploy'\n    targets: {{ organizationalUnits: \
         [ou-ab12-cd34ef56], regions: [us-east-1] }}\n"
    );
    let desired = crate::manifest::parse_manifest("stacks.yaml", &text).unwrap();
    let units = crate::registry::targets::Units::from([("ou-ab12-cd34ef56".to_owned(), vec![])]);
    crate::triggers::fleets::record_fleets(&s.registry, &desired, &units, false, NOW - 7_200_000)
        .await
        .unwrap();
    // Without a reader: said, and the fleet waits for its next interval.
    let report = s.run(NOW).await.unwrap();
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.contains("no AWS Organizations reader")),
        "{report:?}"
    );
    assert!(s.registry.due_fleets(NOW).await.unwrap().is_empty());

    org.put_account("ou-ab12-cd34ef56", "111122223333");
    s.config.organizations = Some(std::sync::Arc::new(org));
    let later = NOW + 3_600_000;
    let report = s.run(later).await.unwrap();
    assert_eq!(report.fleets_read.len(), 1, "{report:?}");
    assert_eq!(
        started(&report).first().map(|s| (s.0, s.1)),
        Some(("fleet-111122223333-us-east-1", Reason::New)),
        "{report:?}"
    );
    // Read once per interval: the next run reads nothing.
    assert!(s.run(later + 60_000).await.unwrap().fleets_read.is_empty());
}
