//! The decision table: from what was observed to what to do next. Pure.
//!
//! Three questions, three functions:
//! - [`decide_stack`]: before changing anything, what does the stack's status call for?
//! - [`decide_change_set`]: our change set exists; what now?
//! - [`decide_delete`]: the stack must go; how far along is that?
//!
//! Every row of DESIGN.md §2 "Decisions by stack status" is one arm here and
//! one row in the tests below.

use super::status::{ChangeSetStatus, ExecutionStatus, StackStatus, is_empty_change_set_reason};

/// The kind of change set to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ChangeSetKind {
    Create,
    Update,
}

/// What to do about a stack whose creation failed (it cannot be updated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailedCreatePolicy {
    /// Delete it and create it again (the default).
    #[default]
    Recreate,
    /// Leave it for a person to look at, and report.
    Stop,
}

/// What the stack's status calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StackDecision {
    /// Create a change set. `cleanup_review`: a leftover stack in
    /// `REVIEW_IN_PROGRESS` has old change sets to delete first.
    CreateChangeSet {
        kind: ChangeSetKind,
        cleanup_review: bool,
    },
    /// CloudFormation is busy with the stack: wait, then look again.
    Wait,
    /// The stack is healthy and already at the desired hash: nothing to do.
    InSync,
    /// `UPDATE_ROLLBACK_FAILED`: continue the rollback, wait, look again.
    ContinueRollback,
    /// A failed create cannot be updated: delete, then create again.
    DeleteAndRecreate,
    /// A person must act; retrying will not help until something changes.
    Stalled { reason: String },
}

/// The inputs of [`decide_stack`].
#[derive(Debug, Clone, Copy)]
pub struct StackObservation<'a> {
    /// `None`: no such stack.
    pub status: Option<&'a StackStatus>,
    /// The desired hash equals the hash last applied.
    pub hash_matches: bool,
    pub on_failed_create: FailedCreatePolicy,
}

/// Decides from the stack's status (the table of DESIGN.md §2).
pub fn decide_stack(observed: StackObservation<'_>) -> StackDecision {
    use StackStatus as S;
    let Some(status) = observed.status else {
        return StackDecision::CreateChangeSet {
            kind: ChangeSetKind::Create,
            cleanup_review: false,
        };
    };
    match status {
        S::ReviewInProgress | S::DeleteComplete => StackDecision::CreateChangeSet {
            kind: ChangeSetKind::Create,
            cleanup_review: *status == S::ReviewInProgress,
        },
        s if s.in_progress() => StackDecision::Wait,
        // An operation failed without rolling back: the stack may be half
        // changed. A new spec or revision is tried as an update; at our own
        // hash there is nothing to try, and the failure is reported.
        S::UpdateFailed | S::ImportRollbackFailed if observed.hash_matches => {
            StackDecision::Stalled {
                reason: format!(
                    "the stack is {status}: its last operation failed without rolling back; \
                 fix it, or push a change to try again"
                ),
            }
        }
        // Healthy, or rolled back to its previous (our applied) state:
        // in sync if it is at our hash, else an update.
        S::CreateComplete
        | S::UpdateComplete
        | S::ImportComplete
        | S::UpdateRollbackComplete
        | S::UpdateFailed
        | S::ImportRollbackComplete
        | S::ImportRollbackFailed => {
            if observed.hash_matches {
                StackDecision::InSync
            } else {
                StackDecision::CreateChangeSet {
                    kind: ChangeSetKind::Update,
                    cleanup_review: false,
                }
            }
        }
        S::CreateFailed | S::RollbackComplete | S::RollbackFailed => {
            match observed.on_failed_create {
                FailedCreatePolicy::Recreate => StackDecision::DeleteAndRecreate,
                FailedCreatePolicy::Stop => StackDecision::Stalled {
                    reason: format!(
                        "the stack's creation failed ({status}); it cannot be updated: \
                     delete it, or let stacksync recreate it"
                    ),
                },
            }
        }
        S::UpdateRollbackFailed => StackDecision::ContinueRollback,
        S::DeleteFailed => StackDecision::Stalled {
            reason: "the stack is DELETE_FAILED: someone tried to delete it; \
                     fix what blocks the deletion, or delete the stack"
                .into(),
        },
        other => StackDecision::Stalled {
            reason: format!("unknown stack status {other}: stacksync does not touch the stack"),
        },
    }
}

/// What our change set's state calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeSetDecision {
    /// Still being created: wait, then look again.
    Wait,
    /// Ready with changes: execute it.
    Execute,
    /// Being executed: wait on the stack.
    WaitForStack,
    /// Executed: look at the stack's final status.
    CheckStack,
    /// It holds no changes: the stack is in sync; delete the change set.
    Empty,
    /// It failed or went stale: record the failure, delete it, retry later.
    Failed { reason: String },
}

/// The inputs of [`decide_change_set`].
#[derive(Debug, Clone, Copy)]
pub struct ChangeSetObservation<'a> {
    pub status: ChangeSetStatus,
    pub execution: ExecutionStatus,
    pub reason: Option<&'a str>,
    /// How many changes it lists (`None`: not described).
    pub changes: Option<usize>,
    /// The stack already has the desired parameters and tags. Consulted only
    /// when a ready change set lists no changes: the emulator lists none for
    /// parameter- or tag-only updates, so "no changes" is trusted only when
    /// the stack's settings agree.
    pub stack_matches: bool,
}

/// Decides from the change set's status and execution status.
pub fn decide_change_set(cs: ChangeSetObservation<'_>) -> ChangeSetDecision {
    use ChangeSetStatus as C;
    use ExecutionStatus as E;
    let reason = cs.reason.unwrap_or("");
    match (cs.status, cs.execution) {
        (C::CreatePending | C::CreateInProgress, _) => ChangeSetDecision::Wait,
        (C::Failed, _) if is_empty_change_set_reason(reason) => ChangeSetDecision::Empty,
        (C::Failed, _) => ChangeSetDecision::Failed {
            reason: format!("the change set failed: {}", or_unknown(reason)),
        },
        (C::CreateComplete, E::Available) if cs.changes == Some(0) && cs.stack_matches => {
            ChangeSetDecision::Empty
        }
        (C::CreateComplete, E::Available) => ChangeSetDecision::Execute,
        (C::CreateComplete, E::Unavailable) => ChangeSetDecision::Wait,
        (C::CreateComplete, E::ExecuteInProgress) => ChangeSetDecision::WaitForStack,
        (C::CreateComplete, E::ExecuteComplete) => ChangeSetDecision::CheckStack,
        (C::CreateComplete, E::ExecuteFailed) => ChangeSetDecision::Failed {
            reason: format!("executing the change set failed: {}", or_unknown(reason)),
        },
        (C::CreateComplete, E::Obsolete) => ChangeSetDecision::Failed {
            reason: "the change set is obsolete: the stack changed after it was made".into(),
        },
        (C::DeletePending | C::DeleteInProgress | C::DeleteComplete | C::DeleteFailed, _) => {
            ChangeSetDecision::Failed {
                reason: format!(
                    "the change set was deleted by someone else ({})",
                    cs.status.as_str()
                ),
            }
        }
    }
}

/// Where a stack deletion stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteDecision {
    /// Ask CloudFormation to delete the stack (again, after `DELETE_FAILED`).
    Delete,
    /// A deletion or another operation is under way: wait, then look again.
    Wait,
    /// The stack is gone.
    Gone,
}

/// Decides how to bring a stack to gone.
pub fn decide_delete(status: Option<&StackStatus>) -> DeleteDecision {
    match status {
        None | Some(StackStatus::DeleteComplete) => DeleteDecision::Gone,
        Some(s) if s.in_progress() => DeleteDecision::Wait,
        Some(_) => DeleteDecision::Delete,
    }
}

/// After our change set was executed: how did it end?
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutionOutcome {
    Wait,
    Succeeded,
    /// The operation failed or was rolled back; the reason comes from the events.
    Failed,
}

/// Reads the stack's status after an execution.
pub fn decide_after_execute(status: Option<&StackStatus>) -> ExecutionOutcome {
    match status {
        // REVIEW_IN_PROGRESS after the execute of a create: it has not begun.
        Some(s) if s.in_progress() || *s == StackStatus::ReviewInProgress => ExecutionOutcome::Wait,
        Some(s) if s.is_success() => ExecutionOutcome::Succeeded,
        _ => ExecutionOutcome::Failed,
    }
}

fn or_unknown(reason: &str) -> &str {
    if reason.is_empty() {
        "no reason given"
    } else {
        reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ChangeSetKind::{Create, Update};
    use StackStatus as S;

    fn stack(status: Option<StackStatus>, hash_matches: bool) -> StackDecision {
        decide_stack(StackObservation {
            status: status.as_ref(),
            hash_matches,
            on_failed_create: FailedCreatePolicy::Recreate,
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
            if let StackDecision::Stalled { reason } = &decision {
                assert_eq!(
                    status,
                    S::DeleteFailed,
                    "only DELETE_FAILED stalls outside a deletion: {reason}"
                );
            }
        }
    }

    #[test]
    fn a_failure_without_rollback_at_our_own_hash_is_reported() {
        for status in [S::UpdateFailed, S::ImportRollbackFailed] {
            match stack(Some(status.clone()), true) {
                StackDecision::Stalled { reason } => {
                    assert!(reason.contains(status.as_str()), "{reason}")
                }
                other => panic!("{status}: {other:?}"),
            }
        }
    }

    #[test]
    fn delete_failed_outside_a_deletion_is_reported_not_touched() {
        match stack(Some(S::DeleteFailed), true) {
            StackDecision::Stalled { reason } => assert!(reason.contains("DELETE_FAILED")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_failed_create_can_be_left_for_a_person() {
        let decision = decide_stack(StackObservation {
            status: Some(&S::RollbackComplete),
            hash_matches: false,
            on_failed_create: FailedCreatePolicy::Stop,
        });
        match decision {
            StackDecision::Stalled { reason } => assert!(reason.contains("ROLLBACK_COMPLETE")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unknown_stack_status_is_left_alone_and_named() {
        match stack(Some(S::Other("NEW_STATE".into())), false) {
            StackDecision::Stalled { reason } => assert!(reason.contains("NEW_STATE")),
            other => panic!("{other:?}"),
        }
    }

    fn cs(
        status: ChangeSetStatus,
        execution: ExecutionStatus,
        reason: Option<&str>,
        changes: Option<usize>,
    ) -> ChangeSetDecision {
        decide_change_set(ChangeSetObservation {
            status,
            execution,
            reason,
            changes,
            stack_matches: true,
        })
    }

    #[test]
    fn one_row_per_change_set_situation() {
        use ChangeSetDecision as D;
        use ChangeSetStatus as C;
        use ExecutionStatus as E;
        let no_changes = "The submitted information didn't contain changes. Submit different information to create a change set.";
        type Row<'a> = (C, E, Option<&'a str>, Option<usize>, D);
        let rows: Vec<Row> = vec![
            (C::CreatePending, E::Unavailable, None, None, D::Wait),
            (C::CreateInProgress, E::Unavailable, None, None, D::Wait),
            (C::CreateComplete, E::Unavailable, None, Some(1), D::Wait),
            (C::CreateComplete, E::Available, None, Some(3), D::Execute),
            (C::CreateComplete, E::Available, None, None, D::Execute),
            (C::CreateComplete, E::Available, None, Some(0), D::Empty),
            (
                C::CreateComplete,
                E::ExecuteInProgress,
                None,
                Some(3),
                D::WaitForStack,
            ),
            (
                C::CreateComplete,
                E::ExecuteComplete,
                None,
                Some(3),
                D::CheckStack,
            ),
            (C::Failed, E::Unavailable, Some(no_changes), None, D::Empty),
            (
                C::Failed,
                E::Unavailable,
                Some("No updates are to be performed."),
                None,
                D::Empty,
            ),
            (
                C::Failed,
                E::Unavailable,
                Some("Template error: unresolved resource"),
                None,
                D::Failed {
                    reason: "the change set failed: Template error: unresolved resource".into(),
                },
            ),
            (
                C::Failed,
                E::Unavailable,
                None,
                None,
                D::Failed {
                    reason: "the change set failed: no reason given".into(),
                },
            ),
            (
                C::CreateComplete,
                E::ExecuteFailed,
                Some("Resource handler returned message"),
                Some(1),
                D::Failed {
                    reason: "executing the change set failed: Resource handler returned message"
                        .into(),
                },
            ),
        ];
        for (status, execution, reason, changes, expected) in rows {
            assert_eq!(
                cs(status, execution, reason, changes),
                expected,
                "{status:?}/{execution:?}"
            );
        }
        assert!(
            matches!(cs(C::CreateComplete, E::Obsolete, None, Some(1)), D::Failed { reason } if reason.contains("obsolete"))
        );
        for deleted in [
            C::DeletePending,
            C::DeleteInProgress,
            C::DeleteComplete,
            C::DeleteFailed,
        ] {
            assert!(
                matches!(cs(deleted, E::Unavailable, None, None), D::Failed { reason } if reason.contains("deleted by someone else"))
            );
        }
    }

    #[test]
    fn a_ready_change_set_without_listed_changes_runs_when_the_stack_settings_differ() {
        let observed = |stack_matches| {
            decide_change_set(ChangeSetObservation {
                status: ChangeSetStatus::CreateComplete,
                execution: ExecutionStatus::Available,
                reason: None,
                changes: Some(0),
                stack_matches,
            })
        };
        assert_eq!(observed(true), ChangeSetDecision::Empty);
        assert_eq!(observed(false), ChangeSetDecision::Execute);
    }

    #[test]
    fn every_change_set_status_pair_has_a_decision() {
        for status in ChangeSetStatus::ALL {
            for execution in ExecutionStatus::ALL {
                // Total: no pair panics, and each gives one of the decisions.
                let _ = cs(status, execution, None, None);
            }
        }
    }

    #[test]
    fn deleting_waits_for_work_repeats_after_failure_and_ends_when_gone() {
        assert_eq!(decide_delete(None), DeleteDecision::Gone);
        assert_eq!(
            decide_delete(Some(&S::DeleteComplete)),
            DeleteDecision::Gone
        );
        assert_eq!(
            decide_delete(Some(&S::DeleteInProgress)),
            DeleteDecision::Wait
        );
        assert_eq!(
            decide_delete(Some(&S::UpdateInProgress)),
            DeleteDecision::Wait
        );
        assert_eq!(
            decide_delete(Some(&S::DeleteFailed)),
            DeleteDecision::Delete
        );
        assert_eq!(
            decide_delete(Some(&S::CreateComplete)),
            DeleteDecision::Delete
        );
        assert_eq!(
            decide_delete(Some(&S::RollbackComplete)),
            DeleteDecision::Delete
        );
        assert_eq!(
            decide_delete(Some(&S::ReviewInProgress)),
            DeleteDecision::Delete
        );
    }

    #[test]
    fn an_execution_ends_in_success_or_failure() {
        assert_eq!(
            decide_after_execute(Some(&S::UpdateInProgress)),
            ExecutionOutcome::Wait
        );
        assert_eq!(
            decide_after_execute(Some(&S::UpdateRollbackInProgress)),
            ExecutionOutcome::Wait
        );
        // Read just after ExecuteChangeSet of a create: not started yet (seen
        // in CI against the emulator), not a failure.
        assert_eq!(
            decide_after_execute(Some(&S::ReviewInProgress)),
            ExecutionOutcome::Wait
        );
        assert_eq!(
            decide_after_execute(Some(&S::CreateComplete)),
            ExecutionOutcome::Succeeded
        );
        assert_eq!(
            decide_after_execute(Some(&S::UpdateComplete)),
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
                decide_after_execute(Some(&failed)),
                ExecutionOutcome::Failed,
                "{failed}"
            );
        }
        assert_eq!(decide_after_execute(None), ExecutionOutcome::Failed);
    }
}
