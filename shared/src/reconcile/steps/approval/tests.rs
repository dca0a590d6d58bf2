//! The approval gate's steps on the fakes: waiting, answers verified or
//! void, rejections and timeouts.

use super::super::testing::*;
use super::*;
use crate::fakes::ScriptedCloudFormation;
use crate::preview::ResourceChange;
use crate::reconcile::run::{CaughtError, FinalizeInput, Next};
use crate::spec::Approval;
use crate::stack_status::StackStatus as S;
use crate::status::{Phase, StallReason};

use crate::fakes::queue_change as change;

/// A run whose change set is ready, polled, under `policy`, the change
/// set doing `changes`.
async fn polled(policy: Approval, changes: Vec<ResourceChange>) -> (Test, RunState) {
    let t = Test::with(
        ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]),
        |e| e.spec.approval = policy,
    )
    .await;
    let state = polled_run(&t, changes).await;
    (t, state)
}

/// `t`'s run, its change set doing `changes` polled until ready.
async fn polled_run(t: &Test, changes: Vec<ResourceChange>) -> RunState {
    t.cfn.script().changes = changes;
    let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
    let state = t.steps.template_upload(state).await.unwrap();
    let mut state = t.steps.change_set(state).await.unwrap();
    // Pending, then ready.
    state = t.steps.poll_status(state).await.unwrap();
    t.steps.poll_status(state).await.unwrap()
}

/// A run under `approval: always` whose change set (its name) the
/// approval step recorded with the task token `token-1`.
async fn waiting() -> (Test, RunState, String) {
    let (t, state) = polled(Approval::Always, vec![change("Add", None)]).await;
    let name = state.approval.request.as_ref().unwrap().change_set.clone();
    t.steps
        .approval(ApprovalInput {
            state: state.clone(),
            task_token: "token-1".into(),
        })
        .await
        .unwrap();
    (t, state, name)
}

/// The installation's approval function's record of an approval of
/// `change_set` by `arn:aws:iam::1:user/ops`, answering the wait that
/// asked at `requested_at`.
fn record_verified(t: &Test, state: &RunState, change_set: &str, requested_at: i64) {
    let verified = VerifiedAnswer {
        change_set: change_set.to_owned(),
        approved: true,
        by: "arn:aws:iam::1:user/ops".into(),
        at: 1_800_000_000_000,
        requested_at,
    };
    t.steps.blobs.inner.put(
        &approval_answer_key(&state.entry, &state.execution.name),
        &serde_json::to_vec(&verified).unwrap(),
    );
}

/// Approved through the installation's approval function: its verified
/// record of the approver, then the token's answer.
async fn answered(t: &Test, state: RunState, change_set: &str) -> RunState {
    let asked_at = state.approval.request.as_ref().unwrap().asked_at;
    record_verified(t, &state, change_set, asked_at);
    answered_by_token(t, state, change_set).await
}

/// The token answered, with no verified record (anyone who read the
/// token from the execution's history and may `SendTaskSuccess`): the run
/// as the state machine gives it back after the wait, the answer at
/// `$.approved`, fetched and uploaded again.
async fn answered_by_token(t: &Test, mut state: RunState, change_set: &str) -> RunState {
    state.approval.answer = Some(ApprovalAnswer {
        change_set: change_set.to_owned(),
        by: Some("arn:aws:iam::1:user/whoever-says-so".into()),
        at: 1_800_000_000_000,
    });
    let state = t.steps.artifact_fetch(state).await.unwrap();
    t.steps.template_upload(state).await.unwrap()
}

#[tokio::test]
async fn a_token_answered_around_the_approval_function_is_no_approval() {
    let (t, state) = polled(Approval::Always, vec![change("Add", None)]).await;
    let name = state.approval.request.as_ref().unwrap().change_set.clone();
    let state = answered_by_token(&t, state, &name).await;
    let state = t.steps.change_set(state).await.unwrap();
    assert!(!state.executes(), "not executed");
    assert!(
        !t.cfn.operations().contains(&"ExecuteChangeSet".to_owned()),
        "nothing ran"
    );
    let record = t.entry().status.approval.records.last().cloned().unwrap();
    assert_eq!(record.decision, Decision::Void);
    assert_eq!(record.by, None, "nobody verified");
    assert!(
        record.reason.as_deref().is_some_and(
            |r| r.contains("did not come through the installation's approval function")
        ),
        "{record:?}"
    );
}

#[tokio::test]
async fn a_verified_answer_to_an_earlier_wait_of_the_run_is_no_approval_of_a_later_one() {
    // The run asked, and an approver answered that wait (recorded
    // verified); the run asks again later under the same change set
    // name, and this time the token is answered around the function.
    let (t, earlier) = polled(Approval::Always, vec![change("Add", None)]).await;
    let name = earlier
        .approval
        .request
        .as_ref()
        .unwrap()
        .change_set
        .clone();
    let mut later = earlier.clone();
    answered(&t, earlier, &name).await;
    later.approval.request.as_mut().unwrap().asked_at += 60_000;
    let state = answered_by_token(&t, later, &name).await;
    let state = t.steps.change_set(state).await.unwrap();
    assert!(!state.executes(), "not executed");
    assert!(
        !t.cfn.operations().contains(&"ExecuteChangeSet".to_owned()),
        "nothing ran"
    );
    let record = t.entry().status.approval.records.last().cloned().unwrap();
    assert_eq!((record.decision, record.by), (Decision::Void, None));
}

#[tokio::test]
async fn a_wait_recorded_before_answers_named_their_wait_is_still_approved() {
    // That version recorded the wait's own time (a little after the
    // request's), which the answer function copies into its record.
    let (t, state, name) = waiting().await;
    let mut entry = t.entry();
    let awaiting = entry.status.approval.awaiting.as_mut().unwrap();
    awaiting.requested_at = Timestamp(awaiting.requested_at.0 + 250);
    let shown = awaiting.requested_at.0;
    t.steps.registry.inner.insert(entry);
    record_verified(&t, &state, &name, shown);
    let state = answered_by_token(&t, state, &name).await;
    t.steps.change_set(state).await.unwrap();
    assert!(
        t.cfn.operations().contains(&"ExecuteChangeSet".to_owned()),
        "executed"
    );
    let record = t.entry().status.approval.records.last().cloned().unwrap();
    assert_eq!(
        (record.decision, record.by.as_deref()),
        (Decision::Approved, Some("arn:aws:iam::1:user/ops"))
    );
}

#[tokio::test]
async fn a_replacement_waits_under_on_replace_and_a_plain_modify_does_not() {
    let (_, waits) = polled(Approval::OnReplace, vec![change("Modify", Some("True"))]).await;
    assert_eq!(waits.next, Next::Approval);
    assert!(!waits.executes(), "executed only once approved");
    let request = waits.approval.request.unwrap();
    assert!(request.why.contains("replaces Queue"), "{}", request.why);
    assert_eq!(request.changes.len(), 1);
    assert_eq!(request.timeout_seconds, 7 * 86_400);

    let (_, runs) = polled(Approval::OnReplace, vec![change("Modify", Some("False"))]).await;
    assert_eq!((runs.next, runs.executes()), (Next::ChangeSet, true));
    assert!(runs.approval.request.is_none());
}

#[tokio::test]
async fn the_waiting_change_set_is_recorded_its_token_kept_apart_and_the_lease_kept_for_the_wait() {
    let (t, _, name) = waiting().await;
    let entry = t.entry();
    assert_eq!(entry.status.phase, Phase::AwaitingApproval);
    let awaiting = entry.status.approval.awaiting.clone().unwrap();
    assert_eq!(awaiting.change_set, name);
    // The token is where only the approval function reads it, never in
    // the status (`get`, `status`, the watch index).
    assert_eq!(
        t.blob(&approval_token_key(NAME, &awaiting.run)).as_deref(),
        Some(b"token-1" as &[u8])
    );
    let shown = serde_json::to_string(&entry).unwrap();
    assert!(!shown.contains("token-1"), "{shown}");
    let week = 7 * 86_400 * 1000;
    let lease = entry.lease.unwrap().expires_at.0;
    assert!(lease > now_millis() + week, "held past the wait");
    assert!(
        !t.cfn.operations().contains(&"ExecuteChangeSet".to_owned()),
        "nothing executed"
    );
}

#[tokio::test]
async fn an_approval_that_holds_executes_exactly_the_change_set_and_is_recorded() {
    let (t, state) = polled(Approval::Always, vec![change("Add", None)]).await;
    let name = state.approval.request.as_ref().unwrap().change_set.clone();
    let state = answered(&t, state, &name).await;
    let state = t.steps.change_set(state).await.unwrap();
    assert_eq!(state.next, Next::Wait);
    let executed: Vec<String> = t
        .cfn
        .script()
        .calls
        .iter()
        .filter(|c| c.starts_with("ExecuteChangeSet"))
        .cloned()
        .collect();
    assert_eq!(executed, [format!("ExecuteChangeSet {name}")]);
    assert_eq!(t.cfn.script().requests.len(), 1, "no second change set");
    let record = t.entry().status.approval.records.last().cloned().unwrap();
    assert_eq!(
        (record.change_set, record.decision, record.by.as_deref()),
        (
            name.clone(),
            Decision::Approved,
            Some("arn:aws:iam::1:user/ops")
        )
    );
    // Told: started, approved (the wait was recorded by `answered`'s
    // caller, the state machine, not here).
    let notices = t.notices.all();
    let approved = notices.last().unwrap();
    assert_eq!(approved.detail_type(), "Change Set Approved");
    assert_eq!(approved.change_set.as_deref(), Some(name.as_str()));
    assert_eq!(
        approved.approval.as_ref().unwrap().by.as_deref(),
        Some("arn:aws:iam::1:user/ops")
    );
    assert_eq!(notices[0].detail_type(), "Reconcile Started");
}

#[tokio::test]
async fn an_approval_is_void_once_the_source_moved_and_a_new_change_set_asks_again() {
    let (t, state) = polled(Approval::Always, vec![change("Add", None)]).await;
    let first = state.approval.request.as_ref().unwrap().change_set.clone();
    // A push while it waited.
    t.steps.sources.commit(
        URL,
        "main",
        &"f".repeat(40),
        &[("t.yaml", b"Resources: {X: {Type: AWS::SNS::Topic}}")],
    );
    let state = answered(&t, state, &first).await;
    let state = t.steps.change_set(state).await.unwrap();
    assert_eq!(state.next, Next::Wait, "a new change set, being made");
    let calls = t.cfn.script().calls.clone();
    assert!(
        calls.contains(&format!("DeleteChangeSet {first}")),
        "{calls:?}"
    );
    assert!(
        !calls.iter().any(|c| c.starts_with("ExecuteChangeSet")),
        "{calls:?}"
    );
    assert_eq!(t.cfn.script().requests.len(), 2);
    let record = t.entry().status.approval.records.last().cloned().unwrap();
    assert_eq!(record.decision, Decision::Void);
    assert!(record.reason.unwrap().contains("source moved"));
    // The new one asks again.
    let state = t.steps.poll_status(state).await.unwrap();
    assert_eq!(state.next, Next::Approval);
    assert_ne!(state.approval.request.unwrap().change_set, first);
}

#[tokio::test]
async fn a_rejection_and_a_timeout_fail_the_run_delete_the_change_set_and_are_recorded() {
    for (error, cause, reason, words) in [
        (
            "StackSync.Stalled.Rejected",
            "by arn:aws:iam::1:user/ops: not during the freeze",
            StallReason::Rejected,
            "rejected by arn:aws:iam::1:user/ops: not during the freeze",
        ),
        (
            "States.Timeout",
            "",
            StallReason::ApprovalTimedOut,
            "approval timed out",
        ),
    ] {
        let (t, state, name) = waiting().await;
        let input = FinalizeInput {
            state,
            error: CaughtError {
                error: error.into(),
                cause: cause.into(),
            },
        };
        t.steps.finalize(input).await.unwrap();
        let status = t.entry().status;
        assert_eq!(
            (status.phase, status.stall_reason),
            (Phase::Failed, Some(reason))
        );
        let message = status.message.unwrap();
        assert!(message.contains(words), "{message}");
        assert!(
            message.contains("gave up"),
            "not asked again at this revision: {message}"
        );
        assert_eq!(status.times.next_reconcile_at, None);
        assert_eq!(status.approval.awaiting, None);
        assert_ne!(
            status.approval.records.last().unwrap().decision,
            Decision::Approved
        );
        assert!(
            t.cfn
                .script()
                .calls
                .contains(&format!("DeleteChangeSet {name}"))
        );
        // Told: started, awaiting (with why and until when), then a
        // rejection and the failure, or the failure alone.
        let kinds = t.notices.kinds();
        let told: &[&str] = if reason == StallReason::Rejected {
            &[
                "Reconcile Started",
                "Approval Requested",
                "Change Set Rejected",
                "Reconcile Failed",
            ]
        } else {
            &[
                "Reconcile Started",
                "Approval Requested",
                "Reconcile Failed",
            ]
        };
        assert_eq!(kinds, told);
        let notices = t.notices.all();
        let asked = notices[1].approval.clone().unwrap();
        assert_eq!(asked.why.as_deref(), Some("approval: always"));
        assert_eq!(asked.changes, Some(1));
        assert!(asked.expires_at.is_some());
        let failed = notices.last().unwrap();
        assert_eq!(failed.stall_reason.as_deref(), Some(reason.as_str()));
        assert!(failed.root_cause.as_deref().unwrap().contains(words));
        assert_eq!(failed.revision.as_deref(), Some(HEAD));
        if reason == StallReason::Rejected {
            let rejected = notices[2].approval.clone().unwrap();
            assert_eq!(rejected.by.as_deref(), Some("arn:aws:iam::1:user/ops"));
            assert_eq!(rejected.reason.as_deref(), Some("not during the freeze"));
        }
    }
}

/// `polled`, the entry a target of the fleet `fl`; with `approved`, the
/// fleet's record of `approved`'s rows approved at the revision first.
async fn polled_target(
    changes: Vec<ResourceChange>,
    approved: Option<&[ResourceChange]>,
) -> (Test, RunState) {
    use crate::registry::FleetApprovals as _;
    let t = Test::with(
        ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]),
        |e| {
            e.spec.approval = Approval::Always;
            e.spec.target_of = Some(crate::spec::TargetOf {
                fleet: "fl".into(),
                account: "111122223333".into(),
                region: "us-east-1".into(),
            });
        },
    )
    .await;
    if let Some(rows) = approved {
        let rows = crate::pull_request::rows_hash(rows);
        t.steps
            .registry
            .inner
            .approve_rows("fl", HEAD, &rows, "arn:aws:iam::1:user/ops", 0)
            .await
            .unwrap();
    }
    let state = polled_run(&t, changes).await;
    (t, state)
}

#[tokio::test]
async fn a_fleet_targets_approval_approves_the_same_changes_for_the_fleet_at_its_revision() {
    use crate::registry::FleetApprovals as _;
    let rows = vec![change("Add", None)];
    let (t, state) = polled_target(rows.clone(), None).await;
    let request = state.approval.request.clone().expect("it asks");
    assert_eq!(
        request.rows.as_deref(),
        Some(crate::pull_request::rows_hash(&rows).as_str())
    );
    let name = request.change_set.clone();
    let state = answered(&t, state, &name).await;
    t.steps.change_set(state).await.unwrap();
    let by = t
        .steps
        .registry
        .inner
        .rows_approved("fl", HEAD, request.rows.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(by.as_deref(), Some("arn:aws:iam::1:user/ops"));
}

#[tokio::test]
async fn a_fleet_target_whose_changes_were_approved_runs_without_asking_and_says_by_whom() {
    let rows = vec![change("Add", None)];
    let (_t, state) = polled_target(rows.clone(), Some(&rows)).await;
    assert_eq!(state.approval.request, None, "it does not ask");
    assert_eq!(state.next, Next::ChangeSet);
    assert!(state.change_set.as_ref().is_some_and(|c| c.execute));
    assert_eq!(
        state.execution.note.as_deref(),
        Some(
            "approved for its fleet by arn:aws:iam::1:user/ops (the same changes as a target \
             approved at this revision)"
        )
    );
    // Other changes (a replacement): a person is asked.
    let other = vec![change("Modify", Some("True"))];
    let (_t, state) = polled_target(other, Some(&rows)).await;
    assert!(state.approval.request.is_some(), "other rows ask again");
}
