use super::*;
use crate::drift::found::PropertyDifference;

fn resource(id: &str, paths: &[(&str, &str)]) -> DriftedResource {
    DriftedResource {
        logical_id: id.into(),
        resource_type: "AWS::SQS::Queue".into(),
        physical_id: None,
        status: "MODIFIED".into(),
        differences: paths
            .iter()
            .map(|(p, actual)| Difference {
                path: (*p).into(),
                expected: "30".into(),
                actual: (*actual).into(),
                kind: "NOT_EQUAL".into(),
            })
            .collect(),
    }
}

fn findings(resources: Vec<DriftedResource>) -> Findings {
    Findings {
        checked_at: 1_000,
        stack_drift: Some(
            if resources.is_empty() {
                "IN_SYNC"
            } else {
                "DRIFTED"
            }
            .into(),
        ),
        resources,
        ignored: 0,
        omitted: 0,
        reason: None,
    }
}

#[test]
fn a_fingerprint_names_what_drifted_not_the_values() {
    let a = fingerprint(&[resource("Queue", &[("/VisibilityTimeout", "60")])]);
    let b = fingerprint(&[resource("Queue", &[("/VisibilityTimeout", "90")])]);
    let c = fingerprint(&[resource("Queue", &[("/DelaySeconds", "60")])]);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn a_drift_is_reported_once_then_quiet_then_cleared() {
    let drifted = vec![resource("Queue", &[("/VisibilityTimeout", "60")])];
    let (first, outcome, due) =
        apply_findings(&DriftRecord::default(), findings(drifted.clone()), false, 5);
    assert_eq!((outcome, due), (Outcome::Detected, false));
    assert!(first.drifted() && first.revert.is_none());
    assert_eq!(first.rev, 1);
    let (again, outcome, _) = apply_findings(&first, findings(drifted), false, 6);
    assert_eq!(outcome, Outcome::Quiet, "the same drift is not news");
    let (gone, outcome, _) = apply_findings(&again, findings(vec![]), false, 7);
    assert_eq!(outcome, Outcome::Cleared);
    assert!(!gone.drifted());
    let (_, outcome, _) = apply_findings(&gone, findings(vec![]), false, 8);
    assert_eq!(outcome, Outcome::Quiet);
}

#[test]
fn a_revert_is_asked_once_and_a_drift_it_did_not_clear_is_reported_once_and_left() {
    let drifted = vec![resource("Queue", &[("/VisibilityTimeout", "60")])];
    let (found, outcome, due) =
        apply_findings(&DriftRecord::default(), findings(drifted.clone()), true, 5);
    assert_eq!((outcome, due), (Outcome::Detected, true));
    assert!(found.revert_requested().is_some());
    // A run applied it; the detection after finds the same drift.
    let print = found.revert_requested().map(str::to_owned);
    let applied = after_run(Some(found.clone()), print.as_deref(), false, false, 2_000).unwrap();
    assert_eq!(applied.revert.as_ref().unwrap().state, RevertState::Applied);
    assert!(applied.watch().verify, "detect again at once");
    assert_eq!(
        after_run(
            Some(found.clone()),
            Some("another drift"),
            false,
            false,
            2_000
        ),
        Some(found.clone()),
        "a drift that changed meanwhile is left as it is"
    );
    let (stuck, outcome, due) = apply_findings(&applied, findings(drifted.clone()), true, 6);
    assert_eq!((outcome, due), (Outcome::NotCleared, false));
    assert_eq!(
        stuck.revert.as_ref().unwrap().state,
        RevertState::NotCleared
    );
    // Found again and again: never due, never said again.
    let (later, outcome, due) = apply_findings(&stuck, findings(drifted), true, 7);
    assert_eq!((outcome, due), (Outcome::Quiet, false));
    // A new drift is reverted.
    let other = vec![resource("Queue", &[("/DelaySeconds", "9")])];
    let (_, outcome, due) = apply_findings(&later, findings(other), true, 8);
    assert_eq!((outcome, due), (Outcome::Detected, true));
    // Cleared by the revert: nothing left to revert.
    let (clear, outcome, due) = apply_findings(&applied, findings(vec![]), true, 9);
    assert_eq!((outcome, due), (Outcome::Cleared, false));
    assert!(clear.revert.is_none() && !clear.watch().verify);
}

#[test]
fn detections_are_spread_over_the_interval_and_about_one_an_interval() {
    let day = 86_400_000;
    assert_eq!(next_detection("a", None, day), 0, "never checked: at once");
    let mut slots = [0usize; 24];
    for i in 0..2_400 {
        let name = format!("stack-{i}");
        let last = 10 * day + 12_345;
        let next = next_detection(&name, Some(last), day);
        assert!(
            next >= last + day / 2 && next < last + day / 2 + day,
            "{name}"
        );
        // The slot is the stack's own: checked again from there, a day on.
        assert_eq!(next_detection(&name, Some(next), day), next + day);
        slots[usize::try_from((next % day) / (day / 24)).unwrap()] += 1;
    }
    assert!(
        slots.iter().all(|n| (50..150).contains(n)),
        "spread over the day: {slots:?}"
    );
}

#[test]
fn records_are_bounded_and_a_secret_reading_stack_keeps_no_values() {
    let big = |i: usize| ResourceDrift {
        logical_id: format!("R{i}"),
        resource_type: "AWS::SQS::Queue".into(),
        physical_id: None,
        status: "MODIFIED".into(),
        differences: (0..30)
            .map(|j| PropertyDifference {
                path: format!("/P{j}"),
                expected: "x".repeat(1_000),
                actual: "hunter2".into(),
                kind: "NOT_EQUAL".into(),
            })
            .collect(),
    };
    let (kept, omitted) = recorded((0..60).map(big).collect(), false);
    assert_eq!(kept[0].differences.len(), MAX_DIFFERENCES);
    assert_eq!(
        kept[0].differences[0].expected.chars().count(),
        MAX_VALUE_CHARS
    );
    let bytes = serde_json::to_vec(&kept).unwrap().len();
    assert!(
        bytes <= MAX_RECORD_BYTES,
        "{bytes} bytes: an item holds 400 KB"
    );
    let dropped = MAX_RESOURCES - kept.len();
    assert!(
        dropped > 0,
        "60 resources of 20 long differences do not fit"
    );
    assert_eq!(
        omitted as usize,
        10 + 50 * 10 + dropped * (1 + MAX_DIFFERENCES),
        "every difference left out is counted"
    );
    let (small, omitted) = recorded((0..3).map(big).collect(), false);
    assert_eq!((small.len(), omitted), (3, 30));
    let (masked, _) = recorded(vec![big(0)], true);
    assert!(
        masked[0]
            .differences
            .iter()
            .all(|d| d.actual == MASKED && d.expected == MASKED)
    );
}

#[test]
fn a_change_set_run_on_a_drifted_stack_asks_for_a_detection_at_once() {
    let drifted = vec![resource("Queue", &[("/VisibilityTimeout", "60")])];
    let (found, _, _) = apply_findings(&DriftRecord::default(), findings(drifted), false, 5);
    assert!(!found.watch().verify);
    let changed = after_run(Some(found.clone()), None, false, true, 2_000).unwrap();
    assert!(changed.watch().verify, "the findings may be stale");
    assert_eq!(
        after_run(Some(found.clone()), None, false, false, 2_000),
        Some(found)
    );
    let (clean, _, _) = apply_findings(&DriftRecord::default(), findings(vec![]), false, 5);
    let after = after_run(Some(clean), None, false, true, 2_000).unwrap();
    assert!(
        !after.watch().verify,
        "nothing reported: nothing to check again"
    );
    assert_eq!(after_run(None, None, false, true, 2_000), None);
}

#[test]
fn a_long_reason_is_cut() {
    let long = "Queue: Access Denied; ".repeat(500);
    let kept = reason_kept(Some(long)).unwrap();
    assert_eq!(kept.chars().count(), crate::status::MAX_MESSAGE_CHARS);
    assert_eq!(reason_kept(Some("short".into())).as_deref(), Some("short"));
}
