use super::super::testing::*;
use super::*;
use crate::fakes::{ScriptedCloudFormation, failed, failure_event, pending, ready};
use crate::ports::{ChangeSetInfo, PortError};
use crate::reconcile::steps::StepName;
use crate::stack_status::{ChangeSetKind, StackStatus as S};
use crate::status::Phase;

/// A run whose change set was just created.
async fn created(statuses: &[Option<S>], extra: impl FnOnce(&mut StackEntry)) -> (Test, RunState) {
    let t = Test::with(ScriptedCloudFormation::with_stack(statuses), extra).await;
    let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
    let state = t.steps.template_upload(state).await.unwrap();
    let state = t.steps.change_set(state).await.unwrap();
    (t, state)
}

#[tokio::test]
async fn a_change_set_being_made_is_polled_with_growing_waits_then_executed() {
    let (t, state) = created(&[Some(S::UpdateComplete)], |_| {}).await;
    t.cfn.script().change_set = [pending(), pending(), ready()].into_iter().collect();
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!((state.next, state.wait.seconds), (Next::Wait, 8));
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!(state.wait.seconds, 12);
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!((state.next, state.executes()), (Next::ChangeSet, true));
    assert_eq!(state.wait.polls, 3);
}

/// A ready change set that lists no resource change (outputs only, stack
/// tags only) is executed, not taken for "in sync": AWS fails one that
/// holds nothing, and makes this one to run.
#[tokio::test]
async fn a_ready_change_set_without_resource_changes_is_executed() {
    let (t, state) = created(&[Some(S::UpdateComplete)], |_| {}).await;
    t.cfn.script().change_set = [ready()].into_iter().collect();
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!((state.next, state.executes()), (Next::ChangeSet, true));
    assert!(
        !t.cfn.operations().contains(&"DeleteChangeSet".to_owned()),
        "kept, to execute"
    );
}

#[tokio::test]
async fn a_final_poll_retried_after_its_answer_was_lost_ends_the_run_as_the_first_did() {
    let (t, mut state) = created(&[Some(S::UpdateComplete)], |_| {}).await;
    state.change_set.as_mut().unwrap().execute = true;
    let state = t.steps.change_set(state).await.unwrap();
    t.stack_answers(&[Some(S::UpdateComplete), Some(S::UpdateComplete)]);
    let last = serde_json::to_value(&state).unwrap();
    let ended = t
        .steps
        .run(StepName::PollStatus, last.clone())
        .await
        .unwrap();
    assert_eq!(ended["next"], "done");
    let written = t.entry();
    assert_eq!(
        (written.status.phase, written.lease.is_none()),
        (Phase::Ready, true)
    );
    // The same step, retried (its answer lost, its process killed):
    // the run is over, and nothing is written twice.
    let again = t.steps.run(StepName::PollStatus, last).await.unwrap();
    assert_eq!(again["next"], "done");
    assert!(
        again["outcome"]
            .as_str()
            .is_some_and(|o| o.contains("earlier attempt")),
        "{again}"
    );
    assert_eq!(t.entry().status, written.status);
}

#[tokio::test]
async fn a_successful_execution_is_ready_with_protection_and_policy_applied() {
    let (t, state) = created(&[Some(S::UpdateComplete)], |e| {
        e.spec.termination_protection = true;
        e.spec.stack_policy = Some(serde_json::json!({"Statement": []}));
    })
    .await;
    let mut state = state;
    state.change_set.as_mut().unwrap().execute = true;
    let state = t.steps.change_set(state).await.unwrap();
    t.stack_answers(&[Some(S::UpdateInProgress), Some(S::UpdateComplete)]);
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!(state.wait.on, Some(WaitOn::Execution));
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!(state.next, Next::Done);
    let entry = t.entry();
    assert_eq!(entry.status.phase, Phase::Ready);
    assert_eq!(
        entry.status.applied.applied_hash.as_deref(),
        state.desired_hash()
    );
    assert!(entry.lease.is_none());
    let calls = t.cfn.script().calls.clone();
    assert!(
        calls.contains(&format!("UpdateTerminationProtection {NAME} true")),
        "{calls:?}"
    );
    assert!(
        calls.iter().any(|c| c.starts_with("SetStackPolicy")),
        "{calls:?}"
    );
}

#[tokio::test]
async fn a_change_made_outside_stacksync_is_put_back_and_the_status_says_so() {
    let t = Test::with(ScriptedCloudFormation::with_stack(&[None]), |_| {}).await;
    let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
    let desired = t
        .steps
        .template_upload(state)
        .await
        .unwrap()
        .desired_hash()
        .map(str::to_owned);
    t.release("run-1").await;
    t.applied(desired.as_deref().unwrap(), S::UpdateComplete);
    t.stack_answers(&[Some(S::UpdateComplete)]);
    t.cfn.script().changed_at += 60_000;

    let state = t.steps.artifact_fetch(t.input("run-2")).await.unwrap();
    let state = t.steps.template_upload(state).await.unwrap();
    let state = t.steps.change_set(state).await.unwrap();
    assert_eq!(
        state.wait.on,
        Some(WaitOn::ChangeSet),
        "a change set, at the applied hash"
    );
    let kinds: Vec<_> = t.cfn.script().requests.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [ChangeSetKind::Update]);
    t.cfn.script().change_set = [ready()].into_iter().collect();
    let state = t.steps.poll_status(state).await.unwrap();
    let state = t.steps.change_set(state).await.unwrap();
    let state = t.steps.poll_status(state).await.unwrap();
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!(
        (state.next, state.execution.outcome.as_deref()),
        (Next::Done, Some("put back"))
    );
    let status = t.entry().status;
    let message = status.message.unwrap();
    assert!(
        message.contains("putting back a change: the stack was updated outside stacksync"),
        "{message}"
    );
    let found = status.findings.out_of_band.unwrap();
    assert!(found.undone && found.change == crate::seen::Change::Updated);
    assert_eq!(
        status.applied.seen,
        Some(t.seen(S::UpdateComplete)),
        "the stack as this run left it"
    );
}

/// Right after ExecuteChangeSet the stack may still show what an earlier
/// operation left (here the rollback of the last failure): the change set
/// says the execution runs, so the run waits, and ends by the stack's
/// status once the change set says it is over.
#[tokio::test]
async fn an_execution_still_running_is_waited_for_whatever_status_the_stack_still_shows() {
    use crate::stack_status::ExecutionStatus as E;
    let (t, mut state) = created(&[Some(S::UpdateRollbackComplete)], |_| {}).await;
    state.wait.on = Some(WaitOn::Execution);
    let running = |execution| ChangeSetInfo {
        execution,
        ..ready()
    };
    t.cfn.script().change_set = [running(E::ExecuteInProgress), running(E::ExecuteComplete)]
        .into_iter()
        .collect();
    t.stack_answers(&[Some(S::UpdateRollbackComplete), Some(S::UpdateComplete)]);
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!(
        (state.next, state.wait.on),
        (Next::Wait, Some(WaitOn::Execution))
    );
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!(state.next, Next::Done);
    assert_eq!(t.entry().status.phase, Phase::Ready);
}

#[tokio::test]
async fn a_rolled_back_update_fails_with_the_first_failed_resource() {
    let (t, mut state) = created(&[Some(S::UpdateComplete)], |_| {}).await;
    t.cfn.script().events = vec![failure_event("Bucket", "UPDATE_FAILED", "name taken")];
    state.wait.on = Some(WaitOn::Execution);
    // Its execution over, as the change set says.
    t.cfn.script().change_set = [ChangeSetInfo {
        execution: crate::stack_status::ExecutionStatus::ExecuteComplete,
        ..ready()
    }]
    .into_iter()
    .collect();
    t.stack_answers(&[Some(S::UpdateRollbackComplete)]);
    match t.steps.poll_status(state).await.unwrap_err() {
        StepError::Stalled { reason, message } => {
            assert_eq!(reason, StallReason::StackFailed);
            assert!(
                message.contains("UPDATE_ROLLBACK_COMPLETE") && message.contains("name taken"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// CloudFormation found the change set empty, yet the stack's tags are not
/// the entry's (LocalStack answers a change of tags alone so): the run
/// ends in sync, and says which tags CloudFormation left as they were.
#[tokio::test]
async fn an_empty_change_set_that_leaves_the_tags_different_says_so() {
    let (t, state) = created(&[Some(S::UpdateComplete)], |e| {
        e.spec.tags = std::collections::BTreeMap::from([("team".into(), "b".into())]);
    })
    .await;
    t.cfn.script().tags = Some(std::collections::BTreeMap::from([
        ("stacksync:entry".into(), NAME.into()),
        (
            "stacksync:installation".into(),
            crate::fakes::TEST_INSTALLATION.into(),
        ),
        ("team".into(), "a".into()),
    ]));
    t.cfn.script().change_set = [failed("The submitted information didn't contain changes.")]
        .into_iter()
        .collect();
    let done = t.steps.poll_status(state).await.unwrap();
    assert_eq!(done.next, Next::Done);
    assert_eq!(
        t.entry().status.message.as_deref(),
        Some(
            "in sync: the change set was empty; the stack's tags are not the entry's (team: a → b), and CloudFormation's empty change set leaves them so"
        )
    );
}

#[tokio::test]
async fn an_empty_or_failed_change_set_is_deleted() {
    let (t, state) = created(&[Some(S::UpdateComplete)], |_| {}).await;
    t.cfn.script().change_set = [failed("The submitted information didn't contain changes.")]
        .into_iter()
        .collect();
    let done = t.steps.poll_status(state.clone()).await.unwrap();
    assert_eq!(done.next, Next::Done);
    assert_eq!(
        t.entry().status.message.as_deref(),
        Some("in sync: the change set was empty")
    );
    let (t, state) = created(&[Some(S::UpdateComplete)], |_| {}).await;
    t.cfn.script().change_set = [failed("Template error")].into_iter().collect();
    let err = t.steps.poll_status(state).await.unwrap_err();
    assert!(
        matches!(
            err,
            StepError::Stalled {
                reason: StallReason::ChangeSetFailed,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(t.cfn.operations().contains(&"DeleteChangeSet".to_owned()));
}

/// Issue "Nothing stuck": a spec that only adds termination protection
/// and a stack policy makes an empty change set; the run must still
/// apply both, and say so, not end "in sync" with neither applied.
#[tokio::test]
async fn settings_a_change_set_does_not_carry_are_applied_when_it_is_empty() {
    let (t, state) = created(&[Some(S::UpdateComplete)], |e| {
        e.spec.termination_protection = true;
        e.spec.stack_policy = Some(serde_json::json!({"Statement": []}));
    })
    .await;
    t.cfn.script().change_set = [failed("The submitted information didn't contain changes.")]
        .into_iter()
        .collect();
    let done = t.steps.poll_status(state).await.unwrap();
    assert_eq!(done.next, Next::Done);
    let calls = t.cfn.script().calls.clone();
    assert!(
        calls.contains(&format!("UpdateTerminationProtection {NAME} true")),
        "{calls:?}"
    );
    assert!(
        calls.iter().any(|c| c.starts_with("SetStackPolicy")),
        "{calls:?}"
    );
    let message = t.entry().status.message.unwrap_or_default();
    assert!(
        message.contains("termination protection") && message.contains("stack policy"),
        "{message}"
    );
}

/// Issue "Every message true": a settings call that keeps failing on an
/// empty change set looped through the poll budget (the change set was
/// deleted first, so each retry found it gone and made a new one) and
/// was then blamed on the wait. The change set stays until the settings
/// are applied: the step's retries meet the same call and its error.
#[tokio::test]
async fn a_settings_call_that_fails_leaves_the_empty_change_set_for_the_retry() {
    let (t, state) = created(&[Some(S::UpdateComplete)], |e| {
        e.spec.termination_protection = true;
    })
    .await;
    t.cfn.script().change_set = [failed("The submitted information didn't contain changes.")]
        .into_iter()
        .collect();
    let refused = || PortError::Transient("UpdateTerminationProtection: HTTP 500".into());
    t.steps
        .cloudformation
        .fail("UpdateTerminationProtection", 1, refused())
        .fail("UpdateTerminationProtection", 2, refused());
    for attempt in 1..=2 {
        let error = t.steps.poll_status(state.clone()).await.unwrap_err();
        assert!(
            error.is_transient() && error.message().contains("UpdateTerminationProtection"),
            "attempt {attempt}: {error:?}"
        );
        assert_eq!(
            t.steps.cloudformation.calls("DeleteChangeSet"),
            0,
            "attempt {attempt}: the empty change set was deleted before its settings were applied"
        );
    }
    let done = t.steps.poll_status(state).await.unwrap();
    assert_eq!(done.next, Next::Done);
    assert_eq!(t.steps.cloudformation.calls("DeleteChangeSet"), 1);
}

/// While a step is retried, the status says which and why; a run that
/// fails the same way round after round ends with that failure as its
/// cause; and the record goes with the run.
#[tokio::test]
async fn a_retried_failure_is_in_the_status_and_the_same_one_too_often_ends_the_run() {
    use crate::reconcile::steps::retrying::MAX_SAME_FAILURES;
    let (t, state) = created(&[Some(S::UpdateComplete)], |_| {}).await;
    t.cfn.script().change_set = [pending()].into_iter().collect();
    let refused = || PortError::Transient("DescribeChangeSet: HTTP 500".into());
    for n in 1..=MAX_SAME_FAILURES as usize {
        t.steps
            .cloudformation
            .fail("DescribeChangeSet", n, refused());
    }
    let input = serde_json::to_value(&state).unwrap();
    for attempt in 1..MAX_SAME_FAILURES {
        let error = t
            .steps
            .run(StepName::PollStatus, input.clone())
            .await
            .unwrap_err();
        assert!(error.is_transient(), "{error:?}");
        let retrying = t.entry().status.run.retrying.expect("recorded");
        assert_eq!(
            (
                retrying.step.as_str(),
                retrying.cause.as_str(),
                retrying.attempts
            ),
            ("PollStatus", "DescribeChangeSet: HTTP 500", attempt)
        );
    }
    let ended = t
        .steps
        .run(StepName::PollStatus, input.clone())
        .await
        .unwrap_err();
    assert_eq!(ended.name(), "StackSync.Stalled.RetriesExhausted");
    assert!(
        ended
            .message()
            .starts_with("DescribeChangeSet: HTTP 500 (PollStatus failed 12 times in this run"),
        "{ended:?}"
    );
    // The run's end (the state machine's catch) takes the record away.
    let caught = crate::reconcile::run::CaughtError {
        error: ended.name(),
        cause: serde_json::json!({"errorMessage": ended.message()}).to_string(),
    };
    t.steps
        .finalize(crate::reconcile::run::FinalizeInput {
            state,
            error: caught,
        })
        .await
        .unwrap();
    let status = t.entry().status;
    assert_eq!(status.run.retrying, None);
    assert_eq!(
        status.stall_reason,
        Some(crate::status::StallReason::RetriesExhausted)
    );
}

#[tokio::test]
async fn someone_elses_operation_is_polled_until_it_settles() {
    let (t, mut state) = created(&[Some(S::UpdateComplete)], |_| {}).await;
    state.wait.on = Some(WaitOn::Stack);
    t.stack_answers(&[Some(S::UpdateInProgress), Some(S::UpdateComplete)]);
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!(
        (state.next, state.wait.on),
        (Next::Wait, Some(WaitOn::Stack))
    );
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!((state.next, state.wait.on), (Next::ChangeSet, None));
}

/// Whatever CloudFormation answers, a run ends: past `maxPolls` waits
/// or past its `timeout`, `Failed (TimedOut)`, saying what it waited for.
#[tokio::test]
async fn a_run_that_would_wait_forever_ends_at_its_poll_budget_or_deadline() {
    let (t, state) = created(&[Some(S::UpdateComplete)], |e| e.spec.max_polls = 3).await;
    t.cfn.script().change_set = [pending()].into_iter().collect();
    let state = t.steps.poll_status(state).await.unwrap();
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!(
        state.wait.polls, 3,
        "the change set's creation and two polls"
    );
    let err = t.steps.poll_status(state).await.unwrap_err();
    match err {
        StepError::Stalled { reason, message } => {
            assert_eq!(reason, StallReason::TimedOut);
            assert!(
                message.contains("gave up after 3 polls")
                    && message.contains("maxPolls 3")
                    && message.contains("to be made"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }

    let (t, mut state) = created(&[Some(S::UpdateComplete)], |_| {}).await;
    state.execution.started_at -= 3 * 3600 * 1000;
    t.cfn.script().change_set = [pending()].into_iter().collect();
    let err = t.steps.poll_status(state).await.unwrap_err();
    assert!(
        matches!(&err, StepError::Stalled { reason: StallReason::TimedOut, message }
            if message.contains("deadline (timeout 2h)")),
        "{err:?}"
    );
}

/// An execution the change set reports failed ends the run, whatever
/// the stack's status (a create that never began stays in review).
#[tokio::test]
async fn an_execution_the_change_set_reports_failed_ends_the_run() {
    let (t, mut state) = created(&[Some(S::ReviewInProgress)], |_| {}).await;
    state.wait.on = Some(WaitOn::Execution);
    t.cfn.script().change_set = [ChangeSetInfo {
        execution: crate::stack_status::ExecutionStatus::ExecuteFailed,
        reason: Some("Parameters: [Size] must have values".into()),
        ..ready()
    }]
    .into_iter()
    .collect();
    let err = t.steps.poll_status(state).await.unwrap_err();
    assert!(
        matches!(&err, StepError::Stalled { reason: StallReason::StackFailed, message }
            if message.contains("must have values") && message.contains("REVIEW_IN_PROGRESS")),
        "{err:?}"
    );
}

/// CloudFormation's own checks of a ready change set (a `WARN` validation,
/// a hook's result) are recorded once, one line each, and put before the
/// approver; a run that needs no approval goes on to execute.
#[tokio::test]
async fn cloudformation_checks_of_a_ready_change_set_are_recorded_and_shown_to_the_approver() {
    let warned = crate::ports::ChangeSetCheck {
        kind: "validation".into(),
        name: "S3_BUCKET_EMPTINESS".into(),
        status: Some("FAILED".into()),
        mode: Some("WARN".into()),
        target: Some("/Resources/Logs".into()),
        reason: Some("the bucket holds objects".into()),
    };
    let hook = crate::ports::ChangeSetCheck {
        kind: "hook".into(),
        name: "Acme::Guard::Hook".into(),
        status: Some("HOOK_COMPLETE_SUCCEEDED".into()),
        mode: Some("FAIL".into()),
        target: None,
        reason: None,
    };
    let (t, state) = created(&[Some(S::UpdateComplete)], |e| {
        e.spec.approval = crate::spec::Approval::Always;
    })
    .await;
    t.cfn.script().change_set = [ready()].into_iter().collect();
    t.cfn.script().checks = Some(vec![warned.clone(), hook.clone()]);
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!(state.next, Next::Approval);
    let request = state.approval.request.clone().unwrap();
    assert_eq!(
        request.checks,
        [
            "validation S3_BUCKET_EMPTINESS (WARN) on /Resources/Logs: FAILED: the bucket holds objects",
            "hook Acme::Guard::Hook (FAIL): HOOK_COMPLETE_SUCCEEDED",
        ]
    );
    let record = t.entry().status.findings.checks.unwrap();
    assert_eq!(record.checks, [warned, hook]);
    assert_eq!(record.revision.as_deref(), Some(HEAD));

    // Not served (the emulators): nothing recorded, the run goes on.
    let (t, state) = created(&[Some(S::UpdateComplete)], |_| {}).await;
    t.cfn.script().change_set = [ready()].into_iter().collect();
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!((state.next, state.executes()), (Next::ChangeSet, true));
    assert!(t.entry().status.findings.checks.is_none());
}
