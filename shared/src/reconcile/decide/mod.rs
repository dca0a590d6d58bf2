//! The decision table: from what was observed to what to do next. Pure:
//! every policy of the reconcile lives here, budgets included (they are
//! inputs), and each row is a test below.
//!
//! - [`decide_stack`]: before changing anything, what does the stack's status call for?
//! - [`up_to_date`]: may the run end without a change set?
//! - [`decide_waiting`]: waiting on someone's operation (or a rollback): look again, or decide?
//! - [`decide_change_set`]: our change set exists; what now?
//! - [`decide_after_execute`]: our change set ran; how did it end?
//! - [`decide_delete`]: the stack must go; how far along is that?
//! - [`approval_needed`], [`approval_holds`]: does a ready change set wait
//!   for a person, and does an approval still hold?

mod approval;
mod end;
pub mod sync;

pub use approval::{Approved, approval_holds, approval_needed, pull_request_holds};
pub use end::{Effect, MAX_DEPENDENT_STARTS, effects_of_end, start_dependent};
pub use sync::{AtAppliedHash, hash_matches, tags_differing};

use crate::duration::Duration;
use crate::spec::{MAX_RETRY_BACKOFF, OnFailedCreate};
pub use crate::stack_status::ChangeSetKind;
use crate::stack_status::{
    ChangeSetStatus, ExecutionStatus, StackStatus, is_empty_change_set_reason,
};
use crate::status::{Failures, StallReason};

/// How often a run continues a failed rollback before reporting it.
pub const MAX_ROLLBACK_CONTINUES: u32 = 1;
/// How often a run asks CloudFormation to delete a stack before reporting
/// `DELETE_FAILED` (a second try clears the transient causes).
pub const MAX_DELETE_REQUESTS: u32 = 2;

/// Counts a failed attempt at `spec_version` and `revision`, and says
/// when to try again ([`AfterFailure`]).
///
/// The wait is `retryInterval`, doubled with each failure in a row at the
/// same spec and revision, at most [`MAX_RETRY_BACKOFF`]. A failure that
/// trying again cannot mend by itself (a failed stack, a refused template,
/// a refused credential…) counts towards `maxAttempts`; after the last, no
/// more tries until the revision or the spec changes (or a forced
/// reconcile). Failures of the moment (AWS throttling or out of reach, a
/// run interrupted) back off the same way and never give up. A failed
/// create that stays ([`StallReason::FailedCreateStays`]), and a change set
/// a person rejected or nobody approved in time, give up at once: trying
/// again at the same revision would only ask the same question again.
pub fn after_failure(
    previous: Option<&Failures>,
    at: (u64, Option<&str>),
    reason: StallReason,
    retry: (Duration, u32),
) -> AfterFailure {
    let give_up = matches!(
        reason,
        StallReason::FailedCreateStays | StallReason::Rejected | StallReason::ApprovalTimedOut
    );
    let (spec_version, revision) = at;
    let (retry_interval, max_attempts) = retry;
    let mut failures = previous
        .filter(|f| f.at(spec_version, revision))
        .cloned()
        .unwrap_or_else(|| Failures {
            spec_version,
            revision: revision.map(str::to_owned),
            ..Failures::default()
        });
    failures.count = failures.count.saturating_add(1);
    failures.gave_up = give_up || (reason.is_lasting() && failures.count >= max_attempts);
    let retry_in = (!failures.gave_up).then(|| {
        let doublings = failures.count.saturating_sub(1).min(20);
        let secs = retry_interval
            .as_secs()
            .saturating_mul(1u64 << doublings)
            .min(MAX_RETRY_BACKOFF.as_secs().max(retry_interval.as_secs()));
        Duration::from_secs(secs)
    });
    AfterFailure { failures, retry_in }
}

/// A failure counted: the failures in a row, and the wait before the next
/// try (`None`: no more tries at this spec and revision).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfterFailure {
    pub failures: Failures,
    pub retry_in: Option<Duration>,
}

/// What to do with a stack whose create failed (`CREATE_FAILED`,
/// `ROLLBACK_COMPLETE`, `ROLLBACK_FAILED`): it cannot be updated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedCreate {
    /// Delete it and create it again (`onFailedCreate: delete`, not done
    /// yet at this revision; or a new revision or spec; or forced).
    Recreate,
    /// Leave it for a person to inspect (`onFailedCreate: keep`, and it
    /// failed at this revision and spec).
    Keep,
    /// It was made anew once at this revision and failed again: leave it.
    RecreatedOnce,
}

impl FailedCreate {
    /// The policy for a failed create found by a run at `at` (spec
    /// version, revision).
    pub fn of(
        policy: OnFailedCreate,
        failures: Option<&Failures>,
        at: (u64, Option<&str>),
        forced: bool,
    ) -> Self {
        let here = failures.filter(|f| f.at(at.0, at.1));
        match (forced, policy, here) {
            (true, _, _) | (false, _, None) => Self::Recreate,
            (false, OnFailedCreate::Keep, Some(_)) => Self::Keep,
            (false, OnFailedCreate::Delete, Some(f)) if f.recreated => Self::RecreatedOnce,
            (false, OnFailedCreate::Delete, Some(_)) => Self::Recreate,
        }
    }
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
    /// Still `UPDATE_ROLLBACK_FAILED` after the run's continues: report it
    /// with the failed resource (a person must skip or fix it).
    RollbackStuck,
    /// A failed create cannot be updated: delete, then create again.
    DeleteAndRecreate,
    /// A person must act; retrying will not help until something changes.
    Stalled {
        reason: StallReason,
        message: String,
    },
}

/// The inputs of [`decide_stack`].
#[derive(Debug, Clone, Copy)]
pub struct StackObservation<'a> {
    /// `None`: no such stack.
    pub status: Option<&'a StackStatus>,
    /// The desired hash equals the hash last applied.
    pub hash_matches: bool,
    /// `ContinueUpdateRollback` calls this run made so far.
    pub rollback_continues: u32,
    /// What a failed create calls for.
    pub failed_create: FailedCreate,
}

fn stalled(reason: StallReason, message: String) -> StackDecision {
    StackDecision::Stalled { reason, message }
}

/// Decides from the stack's status.
pub fn decide_stack(observed: StackObservation<'_>) -> StackDecision {
    use StackStatus as S;
    let update = |hash_matches: bool| {
        if hash_matches {
            StackDecision::InSync
        } else {
            StackDecision::CreateChangeSet {
                kind: ChangeSetKind::Update,
                cleanup_review: false,
            }
        }
    };
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
        S::UpdateFailed | S::ImportRollbackFailed if observed.hash_matches => stalled(
            StallReason::StackFailed,
            format!(
                "the stack is {status}: its last operation failed without rolling back; \
                 fix it, or push a change to try again"
            ),
        ),
        // Healthy, or rolled back to its previous (our applied) state:
        // in sync if it is at our hash, else an update.
        S::CreateComplete
        | S::UpdateComplete
        | S::ImportComplete
        | S::UpdateRollbackComplete
        | S::UpdateFailed
        | S::ImportRollbackComplete
        | S::ImportRollbackFailed => update(observed.hash_matches),
        S::CreateFailed | S::RollbackComplete | S::RollbackFailed => match observed.failed_create {
            FailedCreate::Recreate => StackDecision::DeleteAndRecreate,
            FailedCreate::Keep => stalled(
                StallReason::FailedCreateStays,
                format!(
                    "the stack's create failed ({status}); it is kept for inspection \
                     (onFailedCreate: keep): a new revision, a spec change or \
                     `stacksync reconcile --force` deletes it and creates it again"
                ),
            ),
            FailedCreate::RecreatedOnce => stalled(
                StallReason::FailedCreateStays,
                format!(
                    "the stack's create failed again ({status}) after it was deleted and \
                     created anew at this revision; it is left as it is: push a fix, \
                     change the spec, or run `stacksync reconcile --force`"
                ),
            ),
        },
        S::UpdateRollbackFailed if observed.rollback_continues >= MAX_ROLLBACK_CONTINUES => {
            StackDecision::RollbackStuck
        }
        S::UpdateRollbackFailed => StackDecision::ContinueRollback,
        S::DeleteFailed => stalled(
            StallReason::StackBlocked,
            "the stack is DELETE_FAILED: someone tried to delete it; \
             fix what blocks the deletion, or delete the stack"
                .into(),
        ),
        other => stalled(
            StallReason::StackBlocked,
            format!("unknown stack status {other}: stacksync does not touch the stack"),
        ),
    }
}

/// Whether a run may end in sync without a change set: the desired state is
/// the one last applied, and the stack is healthy.
pub fn up_to_date(hash_matches: bool, stack: Option<&StackStatus>) -> bool {
    hash_matches && stack.is_some_and(StackStatus::is_success)
}

/// While waiting on someone's operation, or on a continued rollback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Still at work: wait again (longer).
    Wait,
    /// Settled: decide again from the new status.
    Decide,
}

/// Waits while CloudFormation works on the stack.
pub fn decide_waiting(status: Option<&StackStatus>) -> Waiting {
    if status.is_some_and(StackStatus::in_progress) {
        Waiting::Wait
    } else {
        Waiting::Decide
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
    // Not how many changes it lists: a ready change set that lists none
    // still holds what it changes beyond resources (outputs, stack tags),
    // and AWS makes one only then (one that holds nothing fails, "didn't
    // contain changes").
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
    /// Still `DELETE_FAILED` after the run's requests: report it with the
    /// resources that failed.
    Failed,
}

/// Decides how to bring a stack to gone, after `requests` delete requests.
pub fn decide_delete(status: Option<&StackStatus>, requests: u32) -> DeleteDecision {
    match status {
        None | Some(StackStatus::DeleteComplete) => DeleteDecision::Gone,
        Some(s) if s.in_progress() => DeleteDecision::Wait,
        Some(StackStatus::DeleteFailed) if requests >= MAX_DELETE_REQUESTS => {
            DeleteDecision::Failed
        }
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

/// How our execution stands: `execution`, the change set's
/// ExecutionStatus (`None`: the change set is gone, as AWS removes it once
/// executed), says whether it is over; the stack's `status` says how it
/// ended. While the change set says it runs (or has not begun), the
/// stack's status may still be the one an earlier operation left.
pub fn decide_after_execute(
    execution: Option<ExecutionStatus>,
    status: Option<&StackStatus>,
) -> ExecutionOutcome {
    use ExecutionStatus as E;
    match execution {
        Some(E::ExecuteFailed) => return ExecutionOutcome::Failed,
        Some(E::ExecuteInProgress | E::Available | E::Unavailable) => {
            return ExecutionOutcome::Wait;
        }
        Some(E::ExecuteComplete | E::Obsolete) | None => {}
    }
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
mod tests;
