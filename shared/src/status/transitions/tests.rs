use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::*;

const T0: EpochMillis = 1_800_000_000_000;

/// A status with every field set, as stored (the flat object every version
/// wrote): what each transition starts from. Its phase is one no
/// transition makes (`Drifted` is shown, never stored), so that each that
/// sets a phase shows it.
fn stored() -> Value {
    json!({
        "phase": "Drifted",
        "observedSpecVersion": 3,
        "lastAttemptedRevision": "a".repeat(40),
        "lastAppliedRevision": "b".repeat(40),
        "appliedHash": "hash-before",
        "stackStatus": "UPDATE_ROLLBACK_COMPLETE",
        "stackStatusAt": "2027-01-15T07:00:00.000Z",
        "stackStatusReason": "a reason before",
        "changeSetName": "stacksync-v3-before",
        "message": "before",
        "stallReason": "stackFailed",
        "lastTransitionAt": "2027-01-15T08:00:01.000Z",
        "lastReconcileAt": "2027-01-15T08:00:02.000Z",
        "run": "run-before",
        "nextReconcileAt": "2027-01-15T08:00:03.000Z",
        "seen": {
            "stackId": "arn:aws:cloudformation:us-east-1:1:stack/s/before",
            "changedAt": "2027-01-15T07:00:00.000Z",
            "stackStatus": "UPDATE_ROLLBACK_COMPLETE",
            "deployedHash": "deployed-before",
            "intervalSeconds": 600
        },
        "outOfBand": {
            "change": "updated",
            "detail": "updated before",
            "foundAt": "2027-01-15T07:30:00.000Z",
            "undone": false
        },
        "failures": {"count": 2, "specVersion": 3, "revision": "a".repeat(40)},
        "adoption": {
            "stackId": "arn:aws:cloudformation:us-east-1:1:stack/s/before",
            "changeSet": "stacksync-v1-adopt",
            "run": "run-adopt",
            "at": "2027-01-01T00:00:00.000Z",
            "changes": []
        },
        "awaiting": {
            "changeSet": "stacksync-v3-before",
            "why": "approval: always",
            "changes": [],
            "run": "run-before",
            "requestedAt": "2027-01-15T07:59:00.000Z",
            "expiresAt": "2027-01-16T07:59:00.000Z"
        },
        "approvals": [{
            "changeSet": "stacksync-v2-old",
            "decision": "approved",
            "by": "arn:aws:iam::1:user/ana",
            "at": "2027-01-10T00:00:00.000Z",
            "run": "run-old"
        }],
        "outputs": {"QueueUrl": "https://queue/before"},
        "provenance": [{"kind": "parameter", "name": "Size", "from": "stacks.yaml", "value": "1"}],
        "waitingFor": ["network"],
        "readOutputs": {"network": {"VpcId": "vpc-before"}},
        "packaged": [{"at": "t.yaml: resource Fn property Code", "path": "old", "key": "templates/packages/00"}],
        "drift": {"checkedAt": "2027-01-15T06:00:00.000Z", "stackDrift": "IN_SYNC", "rev": 4},
        "placeholder": "arn:aws:cloudformation:us-east-1:1:stack/s/placeholder",
        "retrying": {
            "run": "run-before",
            "step": "PollStatus",
            "cause": "HTTP 500",
            "attempts": 2,
            "since": "2027-01-15T07:58:00.000Z",
            "at": "2027-01-15T07:59:00.000Z"
        }
    })
}

fn before() -> Status {
    serde_json::from_value(stored()).unwrap()
}

fn at(ms: EpochMillis) -> Timestamp {
    Timestamp(ms)
}

fn seen(stack_id: &str) -> Seen {
    Seen {
        region: None,
        assume_role_arn: None,
        stack_id: stack_id.into(),
        changed_at: at(T0),
        stack_status: "UPDATE_COMPLETE".into(),
        drift: None,
        deployed_hash: "deployed-after".into(),
        interval_seconds: 600,
        drift_seconds: None,
    }
}

fn success(stack_id: &str) -> Success {
    Success {
        spec_version: 4,
        revision: Some("c".repeat(40)),
        desired_hash: Some("hash-after".into()),
        change_set: None,
        seen: Some(seen(stack_id)),
        outputs: Some(BTreeMap::from([(
            "QueueUrl".into(),
            "https://queue/after".into(),
        )])),
        message: "applied".into(),
        next_reconcile_at: None,
        out_of_band: None,
        revert: None,
        now: T0,
    }
}

fn found() -> OutOfBand {
    OutOfBand {
        change: crate::seen::Change::Deleted,
        detail: "deleted meanwhile".into(),
        found_at: at(T0),
        undone: false,
    }
}

fn retry() -> Retrying {
    Retrying {
        run: "run-now".into(),
        step: "ChangeSet".into(),
        cause: "throttled".into(),
        attempts: 1,
        since: at(T0),
        at: at(T0),
    }
}

fn decided() -> ApprovalRecord {
    ApprovalRecord {
        change_set: "stacksync-v3-before".into(),
        decision: super::super::Decision::Rejected,
        by: Some("arn:aws:iam::1:user/bo".into()),
        at: at(T0),
        reason: Some("not now".into()),
        run: "run-before".into(),
    }
}

/// Each transition from [`before`], by name.
fn transitions() -> Vec<(&'static str, Status)> {
    let b = before();
    let same_stack = "arn:aws:cloudformation:us-east-1:1:stack/s/before";
    let awaiting: AwaitingApproval = serde_json::from_value(json!({
        "changeSet": "stacksync-v4-now", "why": "replacements", "changes": [], "run": "run-now",
        "requestedAt": "2027-01-15T09:00:00.000Z", "expiresAt": "2027-01-16T09:00:00.000Z"
    }))
    .unwrap();
    let adoption = Adoption {
        stack_id: "arn:aws:cloudformation:us-east-1:1:stack/s/other".into(),
        previous_tags: BTreeMap::new(),
        change_set: "stacksync-v4-adopt".into(),
        run: "run-now".into(),
        at: at(T0),
        changes: Vec::new(),
        more: 0,
    };
    vec![
        (
            "waiting",
            waiting(&b, vec!["db".into()], "waiting for db".into(), at(T0)),
        ),
        (
            "reconciling",
            reconciling(&b, &"c".repeat(40), "reconciling".into(), at(T0)),
        ),
        ("suspended", suspended(&b)),
        ("out_of_queue", out_of_queue(&b)),
        (
            "awaiting_approval",
            awaiting_approval(&b, awaiting, "awaits".into(), at(T0)),
        ),
        ("with_approval", with_approval(&b, decided())),
        (
            "with_inputs",
            with_inputs(
                &b,
                Vec::new(),
                BTreeMap::from([("db".into(), BTreeMap::new())]),
                vec![crate::package::Artifact {
                    at: "t.yaml: resource Fn property Code".into(),
                    path: "src".into(),
                    key: "templates/packages/ab".into(),
                }],
            ),
        ),
        (
            "with_placeholder",
            with_placeholder(&b, "arn:placeholder-now".into()),
        ),
        ("adopting", adopting(&b, adoption)),
        ("retrying", retrying(&b, retry())),
        ("described", described(&b, None, at(T0))),
        ("ready (the same stack)", ready(&b, success(same_stack))),
        ("ready (another stack)", ready(&b, success("arn:another"))),
        (
            "ready (a change found outside)",
            ready(
                &b,
                Success {
                    out_of_band: Some(found()),
                    next_reconcile_at: Some(at(T0 + 600_000)),
                    ..success(same_stack)
                },
            ),
        ),
        (
            "failed",
            failed(
                &b,
                Failure {
                    spec_version: 4,
                    revision: Some("c".repeat(40)),
                    reason: StallReason::InvalidTemplate,
                    message: "refused".into(),
                    change_set: None,
                    failures: Failures {
                        count: 1,
                        spec_version: 4,
                        revision: Some("c".repeat(40)),
                        recreated: false,
                        gave_up: false,
                    },
                    next_reconcile_at: Some(at(T0 + 60_000)),
                    out_of_band: None,
                    now: T0,
                },
            ),
        ),
        ("interrupted", interrupted(&b, "run-now", "unlocked", T0)),
        ("removed", removed(&b, "deleted".into())),
        ("recorded (another phase)", recorded(&b, suspended(&b), T0)),
        (
            "recorded (the same phase)",
            recorded(&b, out_of_queue(&b), T0),
        ),
        ("ended", ended(&b, out_of_queue(&b), "run-now", T0)),
        (
            "ended (still waiting)",
            ended(
                &b,
                waiting(&b, vec!["db".into()], "w".into(), at(T0)),
                "run-now",
                T0,
            ),
        ),
        ("due_now", due_now(b.clone(), T0)),
    ]
}

/// What each transition does to the stored fields of the status before
/// (every other field is kept as it was).
const TABLE: &[(&str, &str, &str)] = &[
    // (transition, replaced, dropped)
    ("waiting", "phase message nextReconcileAt waitingFor", ""),
    (
        "reconciling",
        "phase message lastAttemptedRevision nextReconcileAt",
        "retrying",
    ),
    ("suspended", "phase message", "nextReconcileAt"),
    ("out_of_queue", "", "nextReconcileAt"),
    (
        "awaiting_approval",
        "phase message changeSetName awaiting nextReconcileAt",
        "",
    ),
    ("with_approval", "approvals", "awaiting"),
    ("with_inputs", "readOutputs packaged", "provenance"),
    ("with_placeholder", "placeholder", ""),
    ("adopting", "adoption", ""),
    ("retrying", "retrying", ""),
    ("described", "stackStatusAt", "stackStatus"),
    (
        "ready (the same stack)",
        "phase message lastReconcileAt observedSpecVersion lastAttemptedRevision \
         lastAppliedRevision appliedHash stackStatus stackStatusAt seen outputs",
        "stallReason nextReconcileAt run changeSetName failures placeholder retrying \
         stackStatusReason awaiting waitingFor",
    ),
    (
        "ready (another stack)",
        "phase message lastReconcileAt observedSpecVersion lastAttemptedRevision \
         lastAppliedRevision appliedHash stackStatus stackStatusAt seen outputs",
        "stallReason nextReconcileAt run changeSetName failures placeholder retrying \
         stackStatusReason awaiting waitingFor drift",
    ),
    (
        "ready (a change found outside)",
        "phase message lastReconcileAt nextReconcileAt observedSpecVersion \
         lastAttemptedRevision lastAppliedRevision appliedHash stackStatus stackStatusAt \
         seen outputs outOfBand",
        "stallReason run changeSetName failures placeholder retrying stackStatusReason \
         awaiting waitingFor",
    ),
    (
        "failed",
        "phase message stallReason lastReconcileAt nextReconcileAt observedSpecVersion \
         lastAttemptedRevision failures",
        "changeSetName",
    ),
    (
        "interrupted",
        "phase message stallReason lastTransitionAt lastReconcileAt nextReconcileAt run",
        "retrying",
    ),
    ("removed", "phase message", ""),
    (
        "recorded (another phase)",
        "phase message lastTransitionAt",
        "nextReconcileAt",
    ),
    ("recorded (the same phase)", "", "nextReconcileAt"),
    ("ended", "run", "nextReconcileAt retrying waitingFor"),
    (
        "ended (still waiting)",
        "phase message run nextReconcileAt waitingFor lastTransitionAt",
        "retrying",
    ),
    ("due_now", "nextReconcileAt", ""),
];

fn words(s: &str) -> BTreeSet<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn each_transition_keeps_replaces_and_drops_what_its_row_says() {
    let before = stored();
    let before = before.as_object().unwrap();
    let table: BTreeMap<&str, (BTreeSet<String>, BTreeSet<String>)> = TABLE
        .iter()
        .map(|(name, replaced, dropped)| (*name, (words(replaced), words(dropped))))
        .collect();
    let mut wrong = Vec::new();
    let made = transitions();
    for (name, after) in &made {
        let after = serde_json::to_value(after).unwrap();
        let after = after.as_object().unwrap();
        let (mut replaced, mut dropped) = (BTreeSet::new(), BTreeSet::new());
        for (key, was) in before {
            match after.get(key) {
                None => {
                    dropped.insert(key.clone());
                }
                Some(now) if now != was => {
                    replaced.insert(key.clone());
                }
                Some(_) => {}
            }
        }
        assert!(
            after.keys().all(|k| before.contains_key(k)),
            "{name}: a field the status before did not have"
        );
        match table.get(name) {
            None => wrong.push(format!("{name}: no row in TABLE")),
            Some(row) if *row != (replaced.clone(), dropped.clone()) => wrong.push(format!(
                "{name}: replaced {replaced:?}, dropped {dropped:?}; the table says {row:?}"
            )),
            Some(_) => {}
        }
    }
    assert_eq!(made.len(), TABLE.len(), "a row for each transition");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_new_entry_is_pending_and_due_at_once_and_nothing_else() {
    let status = serde_json::to_value(registered(T0)).unwrap();
    assert_eq!(
        status,
        json!({
            "phase": "Pending",
            "observedSpecVersion": 0,
            "lastTransitionAt": "2027-01-15T08:00:00.000Z",
            "nextReconcileAt": "2027-01-15T08:00:00.000Z"
        })
    );
}

#[test]
fn the_status_is_stored_as_the_flat_object_every_version_wrote() {
    // Read from the stored form and written back, field for field.
    assert_eq!(serde_json::to_value(before()).unwrap(), stored());
    // Each stored field lands in its record.
    let b = before();
    assert_eq!(b.run.execution.as_deref(), Some("run-before"));
    assert_eq!(b.stack.reason.as_deref(), Some("a reason before"));
    assert_eq!(b.applied.applied_hash.as_deref(), Some("hash-before"));
    assert_eq!(b.approval.records.len(), 1);
    assert_eq!(b.inputs.waiting_for, ["network"]);
    assert_eq!(b.findings.drift.as_ref().map(|d| d.rev), Some(4));
    assert_eq!(b.times.next_reconcile_at, Some(at(T0 + 3_000)));
    // An empty record stores nothing of it.
    assert_eq!(
        serde_json::to_value(Status::default()).unwrap(),
        json!({"phase": "Pending", "observedSpecVersion": 0})
    );
}

#[test]
fn a_waiting_message_says_it_or_they() {
    assert_eq!(
        waiting_message(&["db".into()]),
        "waiting for db: this stack runs once it is Ready"
    );
    assert_eq!(
        waiting_message(&["db".into(), "net (Failed)".into()]),
        "waiting for db, net (Failed): this stack runs once they are Ready"
    );
}
