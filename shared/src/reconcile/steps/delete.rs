//! `delete` (state `DeleteStack`): deletes the stack — for a removed entry
//! with `destroyOnDelete`, or to create a failed create again — polling
//! (through the state machine) until it is gone; then drops the entry, or
//! goes on to create.

use super::{Ports, StepResult, Steps};
use crate::notice::NoticeKind;
use crate::ownership::Owner;
use crate::ports::Stacks;
use crate::reconcile::decide::{DeleteDecision, decide_delete};
use crate::reconcile::run::{Next, RunState, StepError};
use crate::registry::Leases as _;
use crate::registry::StackEntry;
use crate::spec::StackSpec;
use crate::status::{StallReason, transitions};

impl<P: Ports> Steps<P> {
    pub async fn delete(&self, mut state: RunState) -> StepResult {
        let entry = self.resume(&state).await?;
        let spec = &entry.spec;
        let stack_name = spec.effective_stack_name();
        if !state.budgets.recreate && !spec.destroy_on_delete {
            return self
                .drop_entry(
                    state,
                    &entry,
                    format!(
                        "entry removed from the registry; stack {stack_name} left in place (destroyOnDelete is false)"
                    ),
                )
                .await;
        }
        let cfn = self.port(spec).await?;
        let stack = cfn.describe_stack(stack_name).await?;
        match decide_delete(
            stack.as_ref().map(|s| &s.status),
            state.budgets.delete_requests,
        ) {
            DeleteDecision::Gone if state.budgets.recreate => {
                state.budgets.recreate = false;
                state.wait.on = None;
                state.next = Next::ChangeSet;
                Ok(state)
            }
            DeleteDecision::Gone => {
                // Deleted by this run, or not there when it looked.
                let outcome = if state.budgets.delete_requests > 0 {
                    format!("stack {stack_name} deleted; entry removed from the registry")
                } else {
                    format!("stack {stack_name} was not there; entry removed from the registry")
                };
                self.drop_deleted(state, &entry, &cfn, outcome).await
            }
            DeleteDecision::Wait => wait_delete(state, spec),
            DeleteDecision::Failed => {
                let reason = self.failure_reason(&cfn, stack_name, &state, stack).await?;
                Err(StepError::stalled(
                    StallReason::DeleteFailed,
                    format!("deleting stack {stack_name} failed (DELETE_FAILED): {reason}"),
                ))
            }
            DeleteDecision::Delete
                if !state.budgets.recreate
                    && state.budgets.delete_requests == 0
                    && let Some(found) = stack.as_ref()
                    && let Owner::Foreign(_) = self.owner_of(&entry, found) =>
            {
                // Not this entry's stack (made by someone else, or made anew
                // since): the entry goes, the stack stays.
                let outcome = format!(
                    "entry removed from the registry; stack {stack_name} ({}) not deleted: it \
                     is not this entry's (stacksync did not make it, or it was made anew since)",
                    found.stack_id
                );
                self.drop_entry(state, &entry, outcome).await
            }
            DeleteDecision::Delete => {
                if let Some(found) = stack.as_ref() {
                    // DeleteStack without RoleARN runs under the stack's role.
                    self.role_allowed(&entry, found)?;
                }
                if spec.termination_protection && state.budgets.delete_requests == 0 {
                    // stacksync turned it on; the entry's removal turns it off.
                    cfn.set_termination_protection(stack_name, false).await?;
                }
                // Named by the run and the attempt: a second request after
                // DELETE_FAILED is a new request, not taken for a retry.
                let attempt = format!("{}/{}", state.execution.name, state.budgets.delete_requests);
                cfn.delete_stack(stack_name, spec.role_arn.as_deref(), &attempt)
                    .await?;
                state.budgets.delete_requests += 1;
                wait_delete(state, spec)
            }
        }
    }

    /// Removes the entry of a deleted stack, and what the stack published
    /// (`publish:`) with it.
    async fn drop_deleted(
        &self,
        state: RunState,
        entry: &StackEntry,
        cfn: &super::Port<P>,
        outcome: String,
    ) -> StepResult {
        let outcome = match self.unpublish(entry, cfn).await {
            Some(left) => format!("{outcome}; {left}"),
            None => outcome,
        };
        self.drop_entry(state, entry, outcome).await
    }

    /// Removes the entry (the lease holder's last write); the run is done.
    async fn drop_entry(
        &self,
        mut state: RunState,
        entry: &StackEntry,
        outcome: String,
    ) -> StepResult {
        self.registry
            .remove(&entry.name, &state.execution.name)
            .await?;
        // The entry is gone: its last status says how it went.
        let status = transitions::removed(&entry.status, outcome.clone());
        self.notify(NoticeKind::Removed, &state, entry, &status, None)
            .await;
        state.next = Next::Done;
        state.execution.outcome = Some(outcome);
        Ok(state)
    }
}

/// `next` = wait, then delete again: the first poll interval, then longer;
/// unless the run is past its deadline or poll budget.
fn wait_delete(mut state: RunState, spec: &StackSpec) -> Result<RunState, StepError> {
    super::within_budget(&state, spec, "the stack to be deleted")?;
    state.wait.polls += 1;
    let first = spec.poll_interval.as_secs();
    state.wait.seconds = if state.next == Next::WaitDelete {
        super::next_poll_seconds(state.wait.seconds, first)
    } else {
        first
    };
    state.next = Next::WaitDelete;
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::fakes::{ScriptedCloudFormation, failure_event};
    use crate::stack_status::StackStatus as S;
    use crate::status::Timestamp;

    async fn deleting(
        statuses: &[Option<S>],
        extra: impl FnOnce(&mut StackEntry),
    ) -> (Test, RunState) {
        let t = Test::with(ScriptedCloudFormation::with_stack(statuses), |e| {
            e.deletion_requested_at = Some(Timestamp(1));
            extra(e);
        })
        .await;
        let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        assert_eq!(state.next, Next::Delete);
        (t, state)
    }

    #[tokio::test]
    async fn without_destroy_on_delete_the_entry_goes_and_the_stack_stays() {
        let (t, state) = deleting(&[Some(S::CreateComplete)], |_| {}).await;
        let state = t.steps.delete(state).await.unwrap();
        assert_eq!(state.next, Next::Done);
        assert!(t.steps.registry.inner.entry(NAME).is_none());
        assert!(t.cfn.operations().is_empty(), "the stack is not touched");
    }

    #[tokio::test]
    async fn a_protected_stack_is_unprotected_deleted_and_the_entry_removed() {
        let (t, state) = deleting(&[Some(S::CreateComplete)], |e| {
            e.spec.destroy_on_delete = true;
            e.spec.termination_protection = true;
        })
        .await;
        let state = t.steps.delete(state).await.unwrap();
        assert_eq!((state.next, state.wait.seconds), (Next::WaitDelete, 5));
        let state = t.steps.delete(state).await.unwrap();
        assert_eq!(state.wait.seconds, 8, "DELETE_IN_PROGRESS: waits longer");
        let state = t.steps.delete(state).await.unwrap();
        assert_eq!(state.next, Next::Done);
        assert!(t.steps.registry.inner.entry(NAME).is_none());
        let calls = t.cfn.script().calls.clone();
        assert_eq!(
            calls
                .iter()
                .filter(|c| c.starts_with("DeleteStack"))
                .count(),
            1
        );
        assert!(
            calls.contains(&format!("UpdateTerminationProtection {NAME} false")),
            "{calls:?}"
        );
    }

    #[tokio::test]
    async fn a_stack_under_a_role_the_entry_does_not_name_is_not_deleted_under_it() {
        let (t, state) = deleting(&[Some(S::CreateComplete)], |e| {
            e.spec.destroy_on_delete = true;
        })
        .await;
        t.cfn.script().role_arn = Some("arn:aws:iam::1:role/cdk-exec".into());
        let err = t.steps.delete(state).await.unwrap_err();
        assert_eq!(err.name(), "StackSync.Stalled.ServiceRoleNotNamed");
        let calls = t.cfn.script().calls.clone();
        assert!(
            !calls.iter().any(|c| c.starts_with("DeleteStack")),
            "{calls:?}"
        );
    }

    #[tokio::test]
    async fn delete_failed_is_asked_again_once_then_reported_with_the_resource() {
        let (t, mut state) = deleting(&[Some(S::CreateComplete)], |e| {
            e.spec.destroy_on_delete = true
        })
        .await;
        {
            let mut s = t.cfn.script();
            s.after_delete = vec![Some(S::DeleteFailed)];
            s.events = vec![failure_event("Bucket", "DELETE_FAILED", "not empty")];
        }
        for _ in 0..2 {
            state = t.steps.delete(state).await.unwrap();
        }
        // The second request is a new one (its own token), not the
        // first one's retry, which CloudFormation would not act on again.
        let requests: Vec<String> = t
            .cfn
            .script()
            .calls
            .iter()
            .filter(|c| c.starts_with("DeleteStack"))
            .cloned()
            .collect();
        assert_eq!(
            requests,
            [
                format!("DeleteStack {NAME} {}/0", state.execution.name),
                format!("DeleteStack {NAME} {}/1", state.execution.name)
            ]
        );
        match t.steps.delete(state).await.unwrap_err() {
            StepError::Stalled { reason, message } => {
                assert_eq!(reason, StallReason::DeleteFailed);
                assert!(
                    message.contains("Bucket") && message.contains("not empty"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(
            t.steps.registry.inner.entry(NAME).is_some(),
            "the entry stays until the stack is gone"
        );
    }

    #[tokio::test]
    async fn a_recreate_goes_on_to_the_change_set_once_the_stack_is_gone() {
        let t = Test::with(
            ScriptedCloudFormation::with_stack(&[Some(S::RollbackComplete)]),
            |_| {},
        )
        .await;
        let mut state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        state.budgets.recreate = true;
        let state = t.steps.delete(state).await.unwrap();
        let state = t.steps.delete(state).await.unwrap();
        let state = t.steps.delete(state).await.unwrap();
        assert_eq!(
            (state.next, state.budgets.recreate),
            (Next::ChangeSet, false)
        );
        assert!(t.steps.registry.inner.entry(NAME).is_some());
    }
}
