//! One row per situation, for every decision of the table.

use super::*;
use ChangeSetKind::{Create, Update};
use StackStatus as S;

fn stack(status: Option<StackStatus>, hash_matches: bool) -> StackDecision {
    decide_stack(StackObservation {
        status: status.as_ref(),
        hash_matches,
        rollback_continues: 0,
        failed_create: FailedCreate::Recreate,
    })
}

fn create(cleanup_review: bool) -> StackDecision {
    StackDecision::CreateChangeSet {
        kind: Create,
        cleanup_review,
    }
}

const UPDATE: StackDecision = StackDecision::CreateChangeSet {
    kind: Update,
    cleanup_review: false,
};

#[test]
fn one_row_per_stack_status() {
    let rows: Vec<(Option<StackStatus>, bool, StackDecision)> = vec![
        (None, false, create(false)),
        (Some(S::ReviewInProgress), false, create(true)),
        (Some(S::DeleteComplete), true, create(false)),
        (Some(S::CreateInProgress), false, StackDecision::Wait),
        (Some(S::UpdateInProgress), false, StackDecision::Wait),
        (
            Some(S::UpdateCompleteCleanupInProgress),
            true,
            StackDecision::Wait,
        ),
        (
            Some(S::UpdateRollbackInProgress),
            false,
            StackDecision::Wait,
        ),
        (
            Some(S::UpdateRollbackCompleteCleanupInProgress),
            false,
            StackDecision::Wait,
        ),
        (Some(S::RollbackInProgress), false, StackDecision::Wait),
        (Some(S::DeleteInProgress), false, StackDecision::Wait),
        (Some(S::ImportInProgress), false, StackDecision::Wait),
        (
            Some(S::ImportRollbackInProgress),
            false,
            StackDecision::Wait,
        ),
        (Some(S::CreateComplete), true, StackDecision::InSync),
        (Some(S::CreateComplete), false, UPDATE),
        (Some(S::UpdateComplete), true, StackDecision::InSync),
        (Some(S::UpdateComplete), false, UPDATE),
        (Some(S::ImportComplete), true, StackDecision::InSync),
        (Some(S::ImportComplete), false, UPDATE),
        (Some(S::UpdateRollbackComplete), false, UPDATE),
        (Some(S::UpdateRollbackComplete), true, StackDecision::InSync),
        (Some(S::UpdateFailed), false, UPDATE),
        (Some(S::ImportRollbackComplete), false, UPDATE),
        (Some(S::ImportRollbackFailed), false, UPDATE),
        (
            Some(S::CreateFailed),
            false,
            StackDecision::DeleteAndRecreate,
        ),
        (
            Some(S::RollbackComplete),
            true,
            StackDecision::DeleteAndRecreate,
        ),
        (
            Some(S::RollbackFailed),
            false,
            StackDecision::DeleteAndRecreate,
        ),
        (
            Some(S::UpdateRollbackFailed),
            false,
            StackDecision::ContinueRollback,
        ),
    ];
    for (status, hash_matches, expected) in rows {
        assert_eq!(
            stack(status.clone(), hash_matches),
            expected,
            "{status:?} hash_matches={hash_matches}"
        );
    }
}

#[test]
fn every_known_stack_status_has_a_decision_that_is_not_a_guess() {
    for status in StackStatus::all() {
        let decision = stack(Some(status.clone()), false);
        if let StackDecision::Stalled { message, .. } = &decision {
            assert_eq!(
                status,
                S::DeleteFailed,
                "only DELETE_FAILED stalls outside a deletion: {message}"
            );
        }
    }
}

#[test]
fn a_failure_without_rollback_at_our_own_hash_is_reported() {
    for status in [S::UpdateFailed, S::ImportRollbackFailed] {
        match stack(Some(status.clone()), true) {
            StackDecision::Stalled { reason, message } => {
                assert_eq!(reason, StallReason::StackFailed);
                assert!(message.contains(status.as_str()), "{message}")
            }
            other => panic!("{status}: {other:?}"),
        }
    }
}

#[test]
fn delete_failed_outside_a_deletion_is_reported_not_touched() {
    match stack(Some(S::DeleteFailed), true) {
        StackDecision::Stalled { reason, message } => {
            assert_eq!(reason, StallReason::StackBlocked);
            assert!(message.contains("DELETE_FAILED"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_failed_rollback_is_continued_once_then_reported() {
    let observed = |rollback_continues| {
        decide_stack(StackObservation {
            status: Some(&S::UpdateRollbackFailed),
            hash_matches: false,
            rollback_continues,
            failed_create: FailedCreate::Recreate,
        })
    };
    assert_eq!(observed(0), StackDecision::ContinueRollback);
    assert_eq!(
        observed(MAX_ROLLBACK_CONTINUES),
        StackDecision::RollbackStuck
    );
}

#[test]
fn a_run_ends_up_to_date_only_at_the_applied_hash_on_a_healthy_stack() {
    assert!(up_to_date(true, Some(&S::UpdateComplete)));
    assert!(up_to_date(true, Some(&S::CreateComplete)));
    assert!(!up_to_date(false, Some(&S::UpdateComplete)));
    assert!(!up_to_date(true, Some(&S::UpdateRollbackComplete)));
    assert!(!up_to_date(true, Some(&S::UpdateInProgress)));
    assert!(!up_to_date(true, None), "a stack deleted behind our back");
}

#[test]
fn waiting_goes_on_while_cloudformation_works_and_no_longer() {
    assert_eq!(decide_waiting(Some(&S::UpdateInProgress)), Waiting::Wait);
    assert_eq!(
        decide_waiting(Some(&S::UpdateRollbackInProgress)),
        Waiting::Wait
    );
    assert_eq!(
        decide_waiting(Some(&S::UpdateRollbackFailed)),
        Waiting::Decide
    );
    assert_eq!(decide_waiting(Some(&S::ReviewInProgress)), Waiting::Decide);
    assert_eq!(decide_waiting(None), Waiting::Decide);
}

#[test]
fn an_unknown_stack_status_is_left_alone_and_named() {
    match stack(Some(S::Other("NEW_STATE".into())), false) {
        StackDecision::Stalled { message, .. } => assert!(message.contains("NEW_STATE")),
        other => panic!("{other:?}"),
    }
}

fn cs(
    status: ChangeSetStatus,
    execution: ExecutionStatus,
    reason: Option<&str>,
) -> ChangeSetDecision {
    decide_change_set(ChangeSetObservation {
        status,
        execution,
        reason,
    })
}

#[test]
fn one_row_per_change_set_situation() {
    use ChangeSetDecision as D;
    use ChangeSetStatus as C;
    use ExecutionStatus as E;
    let no_changes = "The submitted information didn't contain changes. Submit different information to create a change set.";
    type Row<'a> = (C, E, Option<&'a str>, D);
    let rows: Vec<Row> = vec![
        (C::CreatePending, E::Unavailable, None, D::Wait),
        (C::CreateInProgress, E::Unavailable, None, D::Wait),
        (C::CreateComplete, E::Unavailable, None, D::Wait),
        (C::CreateComplete, E::Available, None, D::Execute),
        (C::CreateComplete, E::Available, None, D::Execute),
        (C::CreateComplete, E::Available, None, D::Execute),
        (
            C::CreateComplete,
            E::ExecuteInProgress,
            None,
            D::WaitForStack,
        ),
        (C::CreateComplete, E::ExecuteComplete, None, D::CheckStack),
        (C::Failed, E::Unavailable, Some(no_changes), D::Empty),
        (
            C::Failed,
            E::Unavailable,
            Some("No updates are to be performed."),
            D::Empty,
        ),
        (
            C::Failed,
            E::Unavailable,
            Some("Template error: unresolved resource"),
            D::Failed {
                reason: "the change set failed: Template error: unresolved resource".into(),
            },
        ),
        (
            C::Failed,
            E::Unavailable,
            None,
            D::Failed {
                reason: "the change set failed: no reason given".into(),
            },
        ),
        (
            C::CreateComplete,
            E::ExecuteFailed,
            Some("Resource handler returned message"),
            D::Failed {
                reason: "executing the change set failed: Resource handler returned message".into(),
            },
        ),
    ];
    for (status, execution, reason, expected) in rows {
        assert_eq!(
            cs(status, execution, reason),
            expected,
            "{status:?}/{execution:?}"
        );
    }
    assert!(
        matches!(cs(C::CreateComplete, E::Obsolete, None), D::Failed { reason } if reason.contains("obsolete"))
    );
    for deleted in [
        C::DeletePending,
        C::DeleteInProgress,
        C::DeleteComplete,
        C::DeleteFailed,
    ] {
        assert!(
            matches!(cs(deleted, E::Unavailable, None), D::Failed { reason } if reason.contains("deleted by someone else"))
        );
    }
}

/// A change set CloudFormation made `AVAILABLE` holds something to do,
/// even when it lists no resource change: a change of outputs only, of
/// stack tags on untaggable resources (AWS makes such change sets, to
/// execute; one that holds nothing fails instead, "didn't contain
/// changes"). LocalStack showed it: an output-only change set, `AVAILABLE`
/// with no changes, was taken for "in sync", and what read that output
/// kept the old value.
/// (The decision no longer looks at how many changes it lists; the step
/// test `a_ready_change_set_without_resource_changes_is_executed` runs one
/// that lists none.)
#[test]
fn a_ready_change_set_is_executed_even_when_it_lists_no_changes() {
    let observed = decide_change_set(ChangeSetObservation {
        status: ChangeSetStatus::CreateComplete,
        execution: ExecutionStatus::Available,
        reason: None,
    });
    assert_eq!(observed, ChangeSetDecision::Execute);
}

#[test]
fn every_change_set_status_pair_has_a_decision() {
    for status in ChangeSetStatus::ALL {
        for execution in ExecutionStatus::ALL {
            // Total: no pair panics, and each gives one of the decisions.
            let _ = cs(status, execution, None);
        }
    }
}

#[test]
fn deleting_waits_for_work_repeats_after_failure_and_ends_when_gone() {
    use DeleteDecision as D;
    let rows: Vec<(Option<StackStatus>, u32, D)> = vec![
        (None, 0, D::Gone),
        (Some(S::DeleteComplete), 1, D::Gone),
        (Some(S::DeleteInProgress), 1, D::Wait),
        (Some(S::UpdateInProgress), 0, D::Wait),
        (Some(S::DeleteFailed), 1, D::Delete),
        (Some(S::DeleteFailed), MAX_DELETE_REQUESTS, D::Failed),
        (Some(S::CreateComplete), 0, D::Delete),
        (Some(S::RollbackComplete), 0, D::Delete),
        (Some(S::ReviewInProgress), 0, D::Delete),
    ];
    for (status, requests, expected) in rows {
        assert_eq!(
            decide_delete(status.as_ref(), requests),
            expected,
            "{status:?} after {requests}"
        );
    }
}

#[test]
fn an_execution_ends_in_success_or_failure() {
    assert_eq!(
        decide_after_execute(None, Some(&S::UpdateInProgress)),
        ExecutionOutcome::Wait
    );
    assert_eq!(
        decide_after_execute(None, Some(&S::UpdateRollbackInProgress)),
        ExecutionOutcome::Wait
    );
    // Read just after ExecuteChangeSet of a create: not started yet (seen
    // in CI against the emulator), not a failure.
    assert_eq!(
        decide_after_execute(None, Some(&S::ReviewInProgress)),
        ExecutionOutcome::Wait
    );
    assert_eq!(
        decide_after_execute(None, Some(&S::CreateComplete)),
        ExecutionOutcome::Succeeded
    );
    assert_eq!(
        decide_after_execute(None, Some(&S::UpdateComplete)),
        ExecutionOutcome::Succeeded
    );
    for failed in [
        S::UpdateRollbackComplete,
        S::RollbackComplete,
        S::CreateFailed,
        S::UpdateFailed,
        S::UpdateRollbackFailed,
    ] {
        assert_eq!(
            decide_after_execute(None, Some(&failed)),
            ExecutionOutcome::Failed,
            "{failed}"
        );
    }
    assert_eq!(decide_after_execute(None, None), ExecutionOutcome::Failed);
}

/// The change set says whether its execution is over (AWS documents its
/// ExecutionStatus so); the stack's status says how it ended. Right after
/// ExecuteChangeSet the stack can still show the status an earlier
/// operation left (LocalStack showed it: the change set
/// `EXECUTE_IN_PROGRESS` while the stack still said `UPDATE_COMPLETE` of
/// the update before; taken for this execution's end, a run would say
/// "applied" before anything was, or fail on the last failure's
/// `UPDATE_ROLLBACK_COMPLETE`).
#[test]
fn an_execution_the_change_set_says_is_not_over_is_waited_for_whatever_the_stack_shows() {
    use crate::stack_status::ExecutionStatus as E;
    for before in [
        S::UpdateRollbackComplete,
        S::UpdateComplete,
        S::CreateComplete,
    ] {
        for running in [E::ExecuteInProgress, E::Available, E::Unavailable] {
            assert_eq!(
                decide_after_execute(Some(running), Some(&before)),
                ExecutionOutcome::Wait,
                "{running:?} {before}"
            );
        }
    }
    assert_eq!(
        decide_after_execute(Some(E::ExecuteFailed), Some(&S::UpdateComplete)),
        ExecutionOutcome::Failed
    );
    assert_eq!(
        decide_after_execute(Some(E::ExecuteComplete), Some(&S::UpdateComplete)),
        ExecutionOutcome::Succeeded
    );
    assert_eq!(
        decide_after_execute(Some(E::ExecuteComplete), Some(&S::UpdateRollbackComplete)),
        ExecutionOutcome::Failed
    );
}

fn failures(count: u32, recreated: bool) -> Failures {
    Failures {
        count,
        spec_version: 3,
        revision: Some("abc".into()),
        recreated,
        gave_up: false,
    }
}

const AT: (u64, Option<&str>) = (3, Some("abc"));
const RETRY: (Duration, u32) = (Duration::from_mins(2), 5);

#[test]
fn the_wait_doubles_with_each_failure_at_one_revision_and_gives_up_after_max_attempts() {
    let mut previous: Option<Failures> = None;
    let mut waits = Vec::new();
    for _ in 0..5 {
        let counted = after_failure(previous.as_ref(), AT, StallReason::StackFailed, RETRY);
        waits.push(counted.retry_in.map(|d| d.as_secs()));
        previous = Some(counted.failures);
    }
    assert_eq!(waits, [Some(120), Some(240), Some(480), Some(960), None]);
    let last = previous.unwrap();
    assert_eq!(last.count, 5);
    assert!(last.gave_up);
}

#[test]
fn a_new_revision_or_spec_starts_counting_again() {
    let previous = Failures {
        gave_up: true,
        ..failures(5, true)
    };
    for at in [(3, Some("def")), (4, Some("abc")), (3, None)] {
        let counted = after_failure(Some(&previous), at, StallReason::StackFailed, RETRY);
        assert_eq!(counted.failures.count, 1, "{at:?}");
        assert!(!counted.failures.gave_up && !counted.failures.recreated);
        assert_eq!(counted.retry_in, Some(Duration::from_mins(2)));
    }
    // The same commit, spelt in capitals, is the same revision.
    let counted = after_failure(
        Some(&failures(1, false)),
        (3, Some("ABC")),
        StallReason::StackFailed,
        RETRY,
    );
    assert_eq!(counted.failures.count, 2);
}

#[test]
fn failures_of_the_moment_back_off_to_the_cap_and_never_give_up() {
    let counted = after_failure(
        Some(&failures(40, false)),
        AT,
        StallReason::RetriesExhausted,
        RETRY,
    );
    assert!(!counted.failures.gave_up);
    assert_eq!(counted.retry_in, Some(MAX_RETRY_BACKOFF));
    // A retry interval longer than the cap is kept as it is.
    let counted = after_failure(
        None,
        AT,
        StallReason::TimedOut,
        (Duration::from_secs(86_400), 5),
    );
    assert_eq!(counted.retry_in, Some(Duration::from_secs(86_400)));
}

#[test]
fn a_run_that_gave_up_is_not_retried_whatever_the_count() {
    let counted = after_failure(None, AT, StallReason::FailedCreateStays, RETRY);
    assert!(counted.failures.gave_up);
    assert_eq!(counted.retry_in, None);
    assert_eq!(counted.failures.count, 1);
}

#[test]
fn a_failed_create_is_made_again_once_per_revision_or_kept() {
    use OnFailedCreate::{Delete, Keep};
    let once = failures(1, false);
    let twice = failures(2, true);
    type Row<'a> = (
        OnFailedCreate,
        Option<&'a Failures>,
        (u64, Option<&'a str>),
        bool,
        FailedCreate,
    );
    let rows: Vec<Row<'_>> = vec![
        (Delete, None, AT, false, FailedCreate::Recreate),
        (Delete, Some(&once), AT, false, FailedCreate::Recreate),
        (Delete, Some(&twice), AT, false, FailedCreate::RecreatedOnce),
        (
            Delete,
            Some(&twice),
            (3, Some("def")),
            false,
            FailedCreate::Recreate,
        ),
        (Delete, Some(&twice), AT, true, FailedCreate::Recreate),
        (Keep, None, AT, false, FailedCreate::Recreate),
        (Keep, Some(&once), AT, false, FailedCreate::Keep),
        (
            Keep,
            Some(&once),
            (4, Some("abc")),
            false,
            FailedCreate::Recreate,
        ),
        (Keep, Some(&once), AT, true, FailedCreate::Recreate),
    ];
    for (policy, failures, at, forced, expected) in rows {
        assert_eq!(
            FailedCreate::of(policy, failures, at, forced),
            expected,
            "{policy:?} {failures:?} {at:?} forced={forced}"
        );
    }
    for (status, kept) in [
        (S::RollbackComplete, FailedCreate::Keep),
        (S::CreateFailed, FailedCreate::Keep),
        (S::RollbackFailed, FailedCreate::RecreatedOnce),
    ] {
        let decision = decide_stack(StackObservation {
            status: Some(&status),
            hash_matches: false,
            rollback_continues: 0,
            failed_create: kept,
        });
        match decision {
            StackDecision::Stalled { reason, message } => {
                assert_eq!(reason, StallReason::FailedCreateStays);
                assert!(message.contains(status.as_str()), "{message}");
            }
            other => panic!("{status}: {other:?}"),
        }
    }
}
