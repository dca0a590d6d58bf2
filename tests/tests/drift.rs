//! Drift, end to end: the drift function's detections and their findings
//! recorded in the real registry (the emulator's DynamoDB), reverts run by
//! the real state machine, against the scripted CloudFormation (the
//! emulator has no drift detection).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

use stacksync::drift::RevertState;
use stacksync::ports::PortError;
use stacksync::registry::Schedule;
use stacksync::stack_status::StackStatus as S;
use stacksync::status::Phase;
use stacksync_testkit::drift::{Drifting, queue_drift};
use stacksync_testkit::scripted::{pending, ready};

const MINUTES: i64 = 60_000;
const DAY: i64 = 86_400_000;

/// Detected, and its findings read on the next drift run. (Each period
/// lists the stacks twice: the scheduler's health check, then the drift
/// function, each with its own role.)
async fn drifted(t: &mut Drifting) {
    let report = t.later(MINUTES).await;
    assert_eq!(report.started, 1, "never checked: at once");
    assert_eq!(t.calls(), ["ListStacks", "ListStacks", "DetectStackDrift"]);
    let record = t.entry().await.status.findings.drift.unwrap();
    assert!(record.detection.is_some(), "{record:?}");
    t.finds("DRIFTED", vec![queue_drift()]);
    let report = t.later(5 * MINUTES).await;
    assert_eq!((report.polled, report.detected), (1, 1));
    assert_eq!(
        t.calls(),
        [
            "ListStacks",
            "ListStacks",
            "DescribeStackDriftDetectionStatus",
            "DescribeStackResourceDrifts"
        ]
    );
}

/// A revert run: the state machine from the start, as the scheduler would start it.
async fn revert_run(t: &Drifting) {
    {
        let mut s = t.fake.script();
        s.change_set = [pending(), ready()].into_iter().collect();
        s.after_execute = vec![Some(S::UpdateInProgress), Some(S::UpdateComplete)];
    }
    let outcome = t.h.reconcile(&t.name).await;
    assert!(
        matches!(outcome, stacksync::asl::Outcome::Succeeded(_)),
        "{outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drifted_queue_property_is_reported_with_its_values_and_an_ignored_one_is_not() {
    let mut t = Drifting::new("drift-report", "    drift: {ignore: [Queue.Tags]}\n").await;
    drifted(&mut t).await;
    let entry = t.entry().await;
    assert_eq!(entry.display_phase(), Phase::Drifted);
    assert_eq!(
        entry.status.phase,
        Phase::Ready,
        "stored as the run left it"
    );
    let record = entry.status.findings.drift.unwrap();
    assert_eq!(record.ignored, 1, "the tag");
    let queue = &record.resources[0];
    assert_eq!(queue.logical_id, "Queue");
    let found: Vec<_> = queue
        .differences
        .iter()
        .map(|d| (d.path.as_str(), d.expected.as_str(), d.actual.as_str()))
        .collect();
    assert_eq!(found, [("/VisibilityTimeout", "30", "60")]);
    assert_eq!(
        entry.status.times.next_reconcile_at, None,
        "reported, not reverted"
    );
    assert_eq!(t.notices.kinds(), ["Drift Detected"]);
    // The scheduler's index carries what it needs: nothing due until the slot.
    let watched = t.scheduler.registry.watched().await.unwrap();
    let w = watched.iter().find(|w| w.name == t.name).unwrap();
    assert_eq!(
        w.drift.as_ref().unwrap().checked_at,
        record.checked_at.map(|c| c.0)
    );
    let report = t.later(5 * MINUTES).await;
    assert_eq!(
        (
            report.started,
            report.polled,
            report.recorded,
            report.deferred
        ),
        (0, 0, 0, 0),
        "{report:?}"
    );
    assert_eq!(
        t.calls(),
        ["ListStacks", "ListStacks"],
        "nothing asked between detections"
    );
    // A push: its run keeps the record (the stack is still drifted).
    t.repo.commit(
        &[(
            "t.yaml",
            b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties: {DelaySeconds: 5}\n",
        )],
        "delay",
    );
    t.fake.script().change_set = [pending(), ready()].into_iter().collect();
    assert!(matches!(
        t.h.reconcile(&t.name).await,
        stacksync::asl::Outcome::Succeeded(_)
    ));
    let entry = t.entry().await;
    assert_eq!(
        entry
            .status
            .findings
            .drift
            .as_ref()
            .unwrap()
            .resources
            .len(),
        1
    );
    assert_eq!(entry.display_phase(), Phase::Drifted);
    // Its change set changed the stack: the findings may be stale, so the
    // next scheduler run detects again, and the same drift is not news.
    t.calls();
    assert_eq!(t.later(MINUTES).await.started, 1);
    t.later(5 * MINUTES).await;
    assert_eq!(t.notices.kinds().len(), 1);
    assert!(
        t.entry()
            .await
            .status
            .findings
            .drift
            .unwrap()
            .changed_at
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn action_revert_makes_a_revert_drift_change_set_that_clears_the_drift() {
    let mut t = Drifting::new("drift-revert", "    drift: {action: revert}\n").await;
    drifted(&mut t).await;
    let entry = t.entry().await;
    assert!(
        entry.status.times.next_reconcile_at.unwrap().0 <= t.now,
        "due for a run that reverts"
    );
    revert_run(&t).await;
    let requests = t.fake.script().requests.clone();
    let last = requests.last().unwrap();
    assert!(
        last.revert_drift,
        "a drift-aware change set, at the applied hash"
    );
    let entry = t.entry().await;
    let message = entry.status.message.clone().unwrap();
    assert!(message.contains("REVERT_DRIFT"), "{message}");
    let revert = entry.status.findings.drift.unwrap().revert.unwrap();
    assert_eq!(revert.state, RevertState::Applied);
    t.calls();
    // Checked at once, not at the next slot; found in sync.
    let report = t.later(MINUTES).await;
    assert_eq!(report.started, 1);
    t.finds("IN_SYNC", vec![]);
    t.later(5 * MINUTES).await;
    let entry = t.entry().await;
    assert_eq!(entry.display_phase(), Phase::Ready);
    assert!(entry.status.findings.drift.unwrap().revert.is_none());
    assert_eq!(t.notices.kinds(), ["Drift Detected", "Drift Cleared"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revert_that_does_not_clear_the_drift_is_reported_once_and_not_tried_again() {
    let mut t = Drifting::new("drift-stuck", "    drift: {action: revert}\n").await;
    drifted(&mut t).await;
    revert_run(&t).await;
    let change_sets = |t: &Drifting| t.fake.script().requests.len();
    let made = change_sets(&t);
    t.later(MINUTES).await;
    // CloudFormation could not set the property back: the same drift.
    t.later(5 * MINUTES).await;
    let entry = t.entry().await;
    let record = entry.status.findings.drift.clone().unwrap();
    assert_eq!(record.revert.unwrap().state, RevertState::NotCleared);
    assert_eq!(entry.status.times.next_reconcile_at, None, "not retried");
    assert_eq!(entry.display_phase(), Phase::Drifted);
    assert_eq!(t.notices.kinds(), ["Drift Detected", "Drift Not Cleared"]);
    // Found again at the next slots: never said again, never reverted again.
    for _ in 0..2 {
        t.later(2 * DAY).await;
        t.later(5 * MINUTES).await;
    }
    assert_eq!(t.notices.kinds().len(), 2);
    let entry = t.entry().await;
    assert_eq!(entry.status.times.next_reconcile_at, None);
    assert_eq!(change_sets(&t), made, "no change set since");
    assert!(t.scheduler.starter.started().is_empty(), "no run started");
}

#[tokio::test(flavor = "multi_thread")]
async fn where_drift_aware_change_sets_are_refused_the_template_is_applied_and_the_status_says_so()
{
    let mut t = Drifting::new("drift-refused", "    drift: {action: revert}\n").await;
    drifted(&mut t).await;
    t.fake.script().failures.insert(
        "CreateChangeSet",
        [PortError::Unsupported(
            "CreateChangeSet: ValidationError: Unexpected parameter DeploymentMode".into(),
        )]
        .into(),
    );
    revert_run(&t).await;
    let requests = t.fake.script().requests.clone();
    assert!(
        !requests.last().unwrap().revert_drift,
        "made again without DeploymentMode"
    );
    let entry = t.entry().await;
    let message = entry.status.message.clone().unwrap();
    assert!(message.contains("refused here"), "{message}");
    let revert = entry.status.findings.drift.unwrap().revert.unwrap();
    assert!(revert.reapplied && revert.state == RevertState::Applied);
}

/// A detection's end is read on its event (by the events function), not at
/// the next scheduled run, and the revert it makes due is started at once; the event delivered
/// again, or one of a detection stacksync did not start, does nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_detections_event_records_its_findings_at_once_and_starts_the_revert() {
    use stacksync::fakes::{RecordingStarter, stack_id};
    use stacksync::ports::{RunStarter, TriggerKind};
    use stacksync::triggers::drift::DriftEventAnswer;
    use stacksync::triggers::events::{Detail, from_value};
    use stacksync_testkit::iam::as_function;
    use std::sync::Arc;

    let mut t = Drifting::new("drift-event", "    drift: {action: revert}\n").await;
    let starter = Arc::new(RecordingStarter::new());
    t.drift.config.reverts = Some((
        "arn:aws:states:us-east-1:123456789012:stateMachine:reconcile".into(),
        RunStarter::by(Arc::new(stacksync_testkit::parked::RecordedStarts(
            starter.clone(),
        ))),
    ));
    assert_eq!(t.later(MINUTES).await.started, 1);
    let id = t
        .entry()
        .await
        .status
        .findings
        .drift
        .unwrap()
        .detection
        .unwrap()
        .id;
    t.calls();
    t.finds("DRIFTED", vec![queue_drift()]);
    let event = |detection: &str| {
        serde_json::json!({
            "version": "0", "id": "e-1", "account": "123456789012", "region": "us-east-1",
            "time": "2026-11-26T12:00:00Z",
            "detail-type": "CloudFormation Drift Detection Status Change",
            "source": "aws.cloudformation",
            "resources": [stack_id(&t.name, 1)],
            "detail": {
                "stack-id": stack_id(&t.name, 1),
                "stack-drift-detection-id": detection,
                "status-details": {"stack-drift-status": "DRIFTED", "detection-status": "DETECTION_COMPLETE"},
                "drift-detection-details": {"drifted-stack-resource-count": 1}
            }
        })
    };
    let handle = |detection: String| {
        let event = from_value(event(&detection)).unwrap();
        let Detail::DriftDetectionChange(change) = event.detail else {
            panic!("{event:?}")
        };
        let drift = &t.drift;
        let now = t.now + MINUTES;
        async move {
            // The events function's, as deployed (the drift function, whose
            // role reads every resource, starts no execution).
            as_function(
                "events",
                drift.on_detection_event(&change, "us-east-1", now),
            )
            .await
            .unwrap()
        }
    };
    let answer = handle(id.clone()).await;
    let DriftEventAnswer::Read {
        report,
        revert_started,
        ..
    } = &answer
    else {
        panic!("{answer:?}")
    };
    assert_eq!(
        (report.recorded, report.detected, report.reverts),
        (1, 1, 1)
    );
    assert!(revert_started.is_some(), "{answer:?}");
    assert_eq!(
        t.calls(),
        [
            "DescribeStackDriftDetectionStatus",
            "DescribeStackResourceDrifts"
        ],
        "no listing: the event named the stack and the detection"
    );
    let started = starter.started();
    assert_eq!(started.len(), 1);
    assert_eq!(
        (started[0].1.as_str(), started[0].2.kind),
        (t.name.as_str(), TriggerKind::Event)
    );
    let record = t.entry().await.status.findings.drift.unwrap();
    assert!(
        record.detection.is_none() && !record.resources.is_empty(),
        "{record:?}"
    );
    assert_eq!(t.notices.kinds(), ["Drift Detected"]);

    // Again (EventBridge delivers at least once), and someone else's detection.
    for detection in [id, "someone-elses".to_owned()] {
        let answer = handle(detection).await;
        assert!(
            matches!(answer, DriftEventAnswer::Ignored { .. }),
            "{answer:?}"
        );
    }
    assert!(t.calls().is_empty());
    assert_eq!(starter.started().len(), 1, "nothing started twice");
}
