use super::*;

#[test]
fn notes_are_added_after_each_other_and_each_once() {
    let mut e = Execution::default();
    e.add_note("forced through a closed sync window (x; y)".into());
    e.add_note("approved for its fleet by ana".into());
    e.add_note("forced through a closed sync window (x; y)".into());
    assert_eq!(
        e.note.as_deref(),
        Some("forced through a closed sync window (x; y); approved for its fleet by ana")
    );
}

/// Every field the wire has, each away from its default: read into
/// the records and written back, the same object.
#[test]
fn every_field_of_the_wire_goes_through_the_records_and_back_unchanged() {
    let wire = serde_json::json!({
        "stackId": "orders", "trigger": {"kind": "webhook", "revision": "abc", "force": true},
        "execution": "run-1", "fileTags": {"team": "a"},
        "executionArn": "arn:aws:states:us-east-1:1:execution:m:run-1",
        "next": "approval", "waitSeconds": 30, "specVersion": 7, "revision": "abc",
        "artifactKey": "artifacts/a.tar", "templateKey": "templates/t", "adopting": true,
        "templateVersion": "v1", "parametersKey": "parameters/p", "desiredHash": "d",
        "changeSetName": "cs", "changeSetKind": "Create", "changeSetStackId": "arn:stack",
        "waitOn": "execution", "execute": true, "recreate": true,
        "rollbackContinues": 1, "deleteRequests": 2, "polls": 3, "startedAt": 4,
        "mustApply": true,
        "outOfBand": {"change": "updated", "detail": "d", "foundAt": "1970-01-01T00:00:00.008Z", "undone": true},
        "revertDrift": "print", "revertReapplied": true, "outcome": "applied",
        "approval": {"changeSet": "cs", "why": "w", "changes": [], "more": 0,
                     "specVersion": 7, "timeoutSeconds": 60, "askedAt": 5},
        "approved": {"changeSet": "cs", "by": "me", "at": 6}
    });
    let state: RunState = serde_json::from_value(wire.clone()).unwrap();
    assert_eq!(state.change_set_name(), Some("cs"));
    assert!(state.executes() && state.must_apply());
    assert_eq!(serde_json::to_value(&state).unwrap(), wire);
    // A phase that has not run is absent, not empty.
    let fresh: RunState = serde_json::from_str(r#"{"stackId": "orders"}"#).unwrap();
    assert_eq!(
        (fresh.fetched, fresh.uploaded, fresh.change_set),
        (None, None, None)
    );
}

#[test]
fn a_fresh_input_needs_only_the_stack_id() {
    let state: RunState = serde_json::from_str(r#"{"stackId": "orders"}"#).unwrap();
    assert_eq!(state.entry, "orders");
    assert_eq!(state.next, Next::Upload);
    let text = serde_json::to_string(&state).unwrap();
    assert!(text.contains("\"next\":\"upload\""), "{text}");
}

#[test]
fn stall_reasons_travel_in_error_names() {
    let e = StepError::stalled(StallReason::InvalidTemplate, "bad");
    assert_eq!(e.name(), "StackSync.Stalled.InvalidTemplate");
    for reason in StallReason::ALL {
        let name = StepError::stalled(reason, "x").name();
        assert_eq!(StallReason::of_error_name(&name), reason, "{name}");
    }
    assert_eq!(
        StallReason::of_error_name("StackSync.Transient"),
        StallReason::RetriesExhausted
    );
    assert_eq!(
        StallReason::of_error_name("StackSync.Stalled"),
        StallReason::Unexpected
    );
    assert_eq!(
        StallReason::of_error_name("States.Timeout"),
        StallReason::Unexpected
    );
    assert_eq!(StepError::transient("slow").name(), "StackSync.Transient");
}

#[test]
fn caught_errors_are_read_in_both_shapes() {
    let lambda = CaughtError {
        error: "StackSync.Stalled".into(),
        cause: r#"{"errorMessage": "template q.yaml is not valid YAML", "errorType": "StackSync.Stalled"}"#.into(),
    };
    assert_eq!(lambda.message(), "template q.yaml is not valid YAML");
    let local = CaughtError {
        error: "StackSync.Stalled".into(),
        cause: "plain text".into(),
    };
    assert_eq!(local.message(), "plain text");
    let bare = CaughtError {
        error: "States.Timeout".into(),
        cause: String::new(),
    };
    assert_eq!(bare.message(), "States.Timeout (with no message)");
    // Issue "Every message true": an empty errorMessage is no cause.
    let empty = CaughtError {
        error: "Lambda.Unknown".into(),
        cause: r#"{"errorMessage": "", "errorType": "Lambda.Unknown"}"#.into(),
    };
    assert_eq!(empty.message(), "Lambda.Unknown (with no message)");
}
