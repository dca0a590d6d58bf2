//! The drift pass on the fakes: a scripted CloudFormation, the registry in
//! memory, notices kept.

use std::sync::Arc;

use super::{Config, DriftPass, DriftReport};
use crate::clock::EpochMillis;
use crate::drift::{DriftRecord, RevertState};
use crate::fakes::{MemoryNotices, ScriptedCloudFormation, queue_drift, stack_id, summary};
use crate::ports::drift::{DetectionStatus, DriftDetection, ResourceDrift};
use crate::ports::{Notifier, PortError};
use crate::registry::memory::MemoryRegistry;
use crate::registry::sample_entry;
use crate::seen::Seen;
use crate::spec::{DriftAction, DriftSpec};
use crate::stack_status::StackStatus;
use crate::status::{Phase, Status, Timestamp};

const NOW: EpochMillis = 1_800_000_000_000;
const DAY: EpochMillis = 86_400_000;

type DriftScheduler = DriftPass<MemoryRegistry, ScriptedCloudFormation>;

struct Test {
    s: DriftScheduler,
    notices: Arc<MemoryNotices>,
}

/// What an idle run reports of one stack: watched, listed, nothing done.
fn idle() -> DriftReport {
    DriftReport {
        stacks_watched: 1,
        listings: 1,
        ..DriftReport::default()
    }
}

/// `names`, `Ready` and as their last run left them, never checked for
/// drift, with `drift` settings; at most `cap` detections at once.
fn fleet(names: &[String], drift: &DriftSpec, cap: usize) -> Test {
    let registry = MemoryRegistry::new();
    let cfn = ScriptedCloudFormation::default();
    for name in names {
        let mut e = sample_entry(name, Status::default());
        e.spec.drift = drift.clone();
        e.status.phase = Phase::Ready;
        e.status.run.observed_spec_version = 1;
        e.status.applied.seen = Some(Seen {
            region: None,
            assume_role_arn: None,
            stack_id: stack_id(name, 1),
            changed_at: Timestamp(NOW - DAY),
            stack_status: "CREATE_COMPLETE".into(),
            drift: None,
            deployed_hash: "h".into(),
            interval_seconds: 600,
            drift_seconds: Some(drift.interval_seconds()),
        });
        registry.insert(e);
        cfn.script()
            .listing
            .push(summary(name, StackStatus::CreateComplete, NOW - DAY));
    }
    let notices = Arc::new(MemoryNotices::default());
    let s = DriftPass {
        registry,
        cloudformation: cfn,
        config: Config {
            max_detections: cap,
            installation: "test".into(),
            notices: Notifier::to(notices.clone()),
            reverts: None,
        },
    };
    Test { s, notices }
}

fn one(drift: DriftSpec) -> Test {
    fleet(&["orders".to_owned()], &drift, 10)
}

fn complete(stack_drift: &str) -> DriftDetection {
    DriftDetection {
        status: DetectionStatus::Complete,
        stack_drift: Some(stack_drift.into()),
        reason: None,
        drifted_resources: None,
    }
}

impl Test {
    async fn run(&self, at: EpochMillis) -> DriftReport {
        let report = self.s.run(at).await.unwrap();
        assert_eq!(report.errors, Vec::<String>::new());
        report
    }

    fn drift(&self) -> DriftRecord {
        self.s
            .registry
            .entry("orders")
            .unwrap()
            .status
            .findings
            .drift
            .unwrap_or_default()
    }

    fn finds(&self, detection: DriftDetection, drifts: Vec<ResourceDrift>) {
        let mut script = self.s.cloudformation.script();
        script.drift_detections = [detection].into_iter().collect();
        script.resource_drifts = drifts;
    }

    fn drift_calls(&self) -> Vec<String> {
        let calls = self.s.cloudformation.operations();
        self.s.cloudformation.script().calls.clear();
        calls.into_iter().filter(|c| c != "ListStacks").collect()
    }
}

#[tokio::test]
async fn a_drifted_queue_property_is_reported_with_its_expected_and_actual_values() {
    let t = one(DriftSpec::default());
    let report = t.run(NOW).await;
    assert_eq!(report.started, 1, "never checked: at once");
    assert_eq!(t.drift_calls(), ["DetectStackDrift"]);
    assert!(t.drift().detection.is_some());
    t.finds(complete("DRIFTED"), vec![queue_drift()]);
    let report = t.run(NOW + 300_000).await;
    assert_eq!((report.polled, report.detected), (1, 1));
    assert_eq!(
        t.drift_calls(),
        [
            "DescribeStackDriftDetectionStatus",
            "DescribeStackResourceDrifts"
        ]
    );
    let record = t.drift();
    assert_eq!(record.stack_drift.as_deref(), Some("DRIFTED"));
    assert_eq!(
        record.checked_at,
        Some(Timestamp(NOW)),
        "when it was started"
    );
    let queue = &record.resources[0];
    assert_eq!(
        (queue.logical_id.as_str(), queue.status.as_str()),
        ("Queue", "MODIFIED")
    );
    let visibility = &queue.differences[0];
    assert_eq!(
        (
            visibility.path.as_str(),
            visibility.expected.as_str(),
            visibility.actual.as_str()
        ),
        ("/VisibilityTimeout", "30", "60")
    );
    let entry = t.s.registry.entry("orders").unwrap();
    assert_eq!(entry.display_phase(), Phase::Drifted);
    assert_eq!(entry.status.phase, Phase::Ready, "stored as it was");
    assert_eq!(
        entry.status.times.next_reconcile_at, None,
        "action report: no run"
    );
    let notices = t.notices.all();
    assert_eq!(t.notices.kinds(), ["Drift Detected"]);
    let told = notices[0].drift.as_ref().unwrap();
    assert_eq!(
        (told.count, told.resources.as_slice()),
        (1, &["Queue".to_owned()][..])
    );
    assert_eq!(notices[0].phase, Phase::Drifted);
    // Next run, and until its slot a day on: nothing asked, nothing said.
    for at in [NOW + 600_000, NOW + DAY / 3] {
        let report = t.run(at).await;
        assert_eq!(report, idle());
    }
    assert!(t.drift_calls().is_empty());
    assert_eq!(t.notices.kinds().len(), 1, "the same drift is said once");
    // At its slot the detection runs again; the same drift is not news.
    let report = t.run(NOW + 2 * DAY).await;
    assert_eq!(report.started, 1);
    t.run(NOW + 2 * DAY + 300_000).await;
    assert_eq!(t.notices.kinds().len(), 1);
    assert!(t.drift().drifted());
}

#[tokio::test]
async fn an_ignored_property_is_not_reported_and_a_resource_left_with_none_is_in_sync() {
    let t = one(DriftSpec {
        ignore: vec!["Queue.Tags".into()],
        ..DriftSpec::default()
    });
    t.run(NOW).await;
    t.finds(complete("DRIFTED"), vec![queue_drift()]);
    t.run(NOW + 300_000).await;
    let record = t.drift();
    assert_eq!(record.ignored, 1);
    let paths: Vec<&str> = record.resources[0]
        .differences
        .iter()
        .map(|d| d.path.as_str())
        .collect();
    assert_eq!(paths, ["/VisibilityTimeout"], "the tag is ignored");

    let t = one(DriftSpec {
        ignore: vec!["Queue.VisibilityTimeout".into(), "*.Tags.*.Value".into()],
        action: DriftAction::Revert,
        ..DriftSpec::default()
    });
    t.run(NOW).await;
    t.finds(complete("DRIFTED"), vec![queue_drift()]);
    t.run(NOW + 300_000).await;
    let record = t.drift();
    assert!(!record.drifted() && record.ignored == 2, "{record:?}");
    assert_eq!(
        record.stack_drift.as_deref(),
        Some("DRIFTED"),
        "as CloudFormation says"
    );
    let entry = t.s.registry.entry("orders").unwrap();
    assert_eq!(entry.display_phase(), Phase::Ready);
    assert_eq!(
        entry.status.times.next_reconcile_at, None,
        "an ignored property never triggers a revert"
    );
    assert!(t.notices.kinds().is_empty());
}

#[tokio::test]
async fn a_revert_that_does_not_clear_the_drift_is_reported_once_and_not_retried() {
    let t = one(DriftSpec {
        action: DriftAction::Revert,
        ..DriftSpec::default()
    });
    t.run(NOW).await;
    t.finds(complete("DRIFTED"), vec![queue_drift()]);
    let report = t.run(NOW + 300_000).await;
    assert_eq!(report.reverts, 1);
    let entry = t.s.registry.entry("orders").unwrap();
    assert_eq!(
        entry.status.times.next_reconcile_at,
        Some(Timestamp(NOW + 300_000)),
        "due for a run that reverts"
    );
    let print = t.drift().revert_requested().unwrap().to_owned();
    // The run (tested with the steps) applied it and left the stack Ready.
    let mut entry = t.s.registry.entry("orders").unwrap();
    entry.status.findings.drift = crate::drift::after_run(
        entry.status.findings.drift,
        Some(&print),
        false,
        false,
        NOW + 400_000,
    );
    entry.status.times.next_reconcile_at = None;
    t.s.registry.insert(entry);
    t.drift_calls();
    // Detected again at once, not at the next slot.
    let report = t.run(NOW + 500_000).await;
    assert_eq!(report.started, 1);
    // The same drift: CloudFormation could not set it back.
    t.run(NOW + 800_000).await;
    let record = t.drift();
    assert_eq!(
        record.revert.as_ref().unwrap().state,
        RevertState::NotCleared
    );
    assert_eq!(t.notices.kinds(), ["Drift Detected", "Drift Not Cleared"]);
    let entry = t.s.registry.entry("orders").unwrap();
    assert_eq!(entry.status.times.next_reconcile_at, None, "not retried");
    // Found again at the next slots: never due, never said again.
    for day in [2, 4] {
        t.run(NOW + day * DAY).await;
        t.run(NOW + day * DAY + 300_000).await;
    }
    assert_eq!(t.notices.kinds().len(), 2);
    let entry = t.s.registry.entry("orders").unwrap();
    assert_eq!(entry.status.times.next_reconcile_at, None);
    assert_eq!(entry.display_phase(), Phase::Drifted);
}

#[tokio::test]
async fn a_revert_that_clears_the_drift_says_so() {
    let t = one(DriftSpec {
        action: DriftAction::Revert,
        ..DriftSpec::default()
    });
    t.run(NOW).await;
    t.finds(complete("DRIFTED"), vec![queue_drift()]);
    t.run(NOW + 300_000).await;
    let mut entry = t.s.registry.entry("orders").unwrap();
    let print = entry
        .status
        .findings
        .drift
        .as_ref()
        .unwrap()
        .revert_requested()
        .map(str::to_owned);
    entry.status.findings.drift = crate::drift::after_run(
        entry.status.findings.drift,
        print.as_deref(),
        false,
        false,
        NOW + 400_000,
    );
    entry.status.times.next_reconcile_at = None;
    t.s.registry.insert(entry);
    t.run(NOW + 500_000).await;
    t.finds(complete("IN_SYNC"), vec![]);
    t.run(NOW + 800_000).await;
    assert!(!t.drift().drifted() && t.drift().revert.is_none());
    assert_eq!(t.notices.kinds(), ["Drift Detected", "Drift Cleared"]);
    assert_eq!(
        t.s.registry.entry("orders").unwrap().display_phase(),
        Phase::Ready
    );
}

#[tokio::test]
async fn a_thousand_due_stacks_are_detected_a_few_at_a_time_and_none_is_dropped() {
    let names: Vec<String> = (0..1_000).map(|i| format!("s{i:04}")).collect();
    let t = fleet(&names, &DriftSpec::default(), 10);
    t.s.cloudformation.script().drift_detections = [DriftDetection {
        status: DetectionStatus::InProgress,
        stack_drift: None,
        reason: None,
        drifted_resources: None,
    }]
    .into_iter()
    .collect();
    let report = t.run(NOW).await;
    assert_eq!((report.started, report.deferred), (10, 990));
    // Still running: no place for more.
    let report = t.run(NOW + 300_000).await;
    assert_eq!(
        (report.started, report.polled, report.deferred),
        (0, 10, 990)
    );
    let max_running = |calls: &[String]| {
        calls
            .iter()
            .filter(|c| c.as_str() == "DetectStackDrift")
            .count()
    };
    assert_eq!(max_running(&t.drift_calls()), 10);
    // They end; ten more start each run until every stack was checked.
    t.finds(complete("IN_SYNC"), vec![]);
    let mut at = NOW + 600_000;
    let mut runs = 0;
    loop {
        let report = t.run(at).await;
        assert!(report.started <= 10, "{report:?}");
        runs += 1;
        at += 300_000;
        if report.started == 0 && report.polled == 0 {
            break;
        }
    }
    assert_eq!(runs, 101, "100 runs of ten, and one with nothing left");
    let entries = crate::registry::Specs::list(&t.s.registry).await.unwrap();
    assert_eq!(entries.len(), 1_000);
    assert!(
        entries.iter().all(|e| e
            .status
            .findings
            .drift
            .as_ref()
            .is_some_and(|d| d.checked_at.is_some())),
        "every stack checked"
    );
    // A start refused (throttled) stops the others until the next run.
    let names: Vec<String> = (0..30).map(|i| format!("t{i:02}")).collect();
    let t = fleet(&names, &DriftSpec::default(), 10);
    t.s.cloudformation.script().failures.insert(
        "DetectStackDrift",
        [PortError::Transient("Rate exceeded".into())].into(),
    );
    let report = t.s.run(NOW).await.unwrap();
    assert_eq!(report.started, 0, "the first start was refused");
    assert_eq!(report.deferred, 30);
    assert_eq!(report.errors.len(), 1);
    let report = t.s.run(NOW + 300_000).await.unwrap();
    assert_eq!(report.started, 10);
}

#[tokio::test]
async fn a_stack_held_by_a_run_suspended_or_with_detection_off_is_left_alone() {
    let t = one(DriftSpec {
        action: DriftAction::Off,
        ..DriftSpec::default()
    });
    // Not even listed: nothing there to look at.
    let unlisted = DriftReport {
        listings: 0,
        ..idle()
    };
    assert_eq!(t.run(NOW).await, unlisted);
    let t = one(DriftSpec::default());
    let mut entry = t.s.registry.entry("orders").unwrap();
    entry.suspended = true;
    t.s.registry.insert(entry);
    assert_eq!(t.run(NOW).await, unlisted);
    assert!(
        t.s.cloudformation.operations().is_empty(),
        "no call, no listing either"
    );
}

#[tokio::test]
async fn a_detection_that_fails_is_recorded_with_its_reason_and_tried_at_the_next_slot() {
    let t = one(DriftSpec::default());
    t.run(NOW).await;
    t.finds(
        DriftDetection {
            status: DetectionStatus::Failed,
            stack_drift: None,
            reason: Some("Queue: Access Denied".into()),
            drifted_resources: None,
        },
        vec![],
    );
    t.run(NOW + 300_000).await;
    let record = t.drift();
    assert_eq!(record.reason.as_deref(), Some("Queue: Access Denied"));
    assert!(record.detection.is_none() && !record.drifted());
    assert_eq!(t.run(NOW + 600_000).await.started, 0);
    assert!(t.notices.kinds().is_empty());
}

#[tokio::test]
async fn a_stack_under_way_or_due_to_run_gets_no_detection() {
    let t = one(DriftSpec::default());
    t.s.cloudformation.script().listing[0].status = StackStatus::UpdateInProgress;
    assert_eq!(t.run(NOW).await.started, 0, "an operation under way");
    t.s.cloudformation.script().listing[0].status = StackStatus::UpdateRollbackComplete;
    assert_eq!(t.run(NOW).await.started, 1, "a rollback that ended");

    // Due: the scheduler is about to start its run, which will take it.
    let t = one(DriftSpec::default());
    let mut entry = t.s.registry.entry("orders").unwrap();
    entry.status.times.next_reconcile_at = Some(Timestamp(NOW - 1));
    t.s.registry.insert(entry);
    assert_eq!(t.run(NOW).await.started, 0, "its run is about to take it");
}
