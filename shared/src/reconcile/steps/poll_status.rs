//! `poll-status` (state `PollStatus`): looks at what the run waits for — the
//! stack while someone else works on it, our change set being made, or our
//! change set being executed — and says: wait again, go on, or finish.

use tracing::info;

use super::settings::with_settings;
use super::{Port, Ports, StepResult, Steps, short};
use crate::ports::{ChangeSetCheck, ChangeSets, EventsOf, Stacks, root_cause};
use crate::preview::bounded;
use crate::pull_request::rows_hash;
use crate::reconcile::decide::{
    ChangeSetDecision, ChangeSetObservation, ExecutionOutcome, Waiting, decide_after_execute,
    decide_change_set, decide_waiting,
};
use crate::reconcile::decide::{approval_needed, pull_request_holds};
use crate::reconcile::run::{ApprovalRequest, Next, RunState, StepError, WaitOn};
use crate::registry::StackEntry;
use crate::spec::Approval;
use crate::stack_status::ExecutionStatus;
use crate::status::StallReason;

impl<P: Ports> Steps<P> {
    pub async fn poll_status(&self, state: RunState) -> StepResult {
        let entry = self.resume(&state).await?;
        let cfn = self.port(&entry.spec).await?;
        self.poll(state, &entry, &cfn).await
    }

    /// Polls for `entry`'s run (its lease renewed), through `cfn`.
    pub(super) async fn poll(
        &self,
        mut state: RunState,
        entry: &StackEntry,
        cfn: &Port<P>,
    ) -> StepResult {
        match state.wait.on {
            None | Some(WaitOn::Stack) | Some(WaitOn::Rollback) | Some(WaitOn::Slot) => {
                let stack = cfn
                    .describe_stack(entry.spec.effective_stack_name())
                    .await?;
                match decide_waiting(stack.as_ref().map(|s| &s.status)) {
                    Waiting::Wait => {
                        let on = state.wait.on.unwrap_or(WaitOn::Stack);
                        self.wait(state, on, &entry.spec)
                    }
                    Waiting::Decide => {
                        state.wait.on = None;
                        state.next = Next::ChangeSet;
                        Ok(state)
                    }
                }
            }
            Some(WaitOn::ChangeSet) => self.poll_change_set(state, entry, cfn).await,
            Some(WaitOn::Execution) => self.after_execution(state, entry, cfn).await,
        }
    }

    /// Our change set is being made: decide by its status.
    async fn poll_change_set(
        &self,
        mut state: RunState,
        entry: &StackEntry,
        cfn: &Port<P>,
    ) -> StepResult {
        let stack_name = entry.spec.effective_stack_name();
        let name = state
            .change_set_name()
            .map(str::to_owned)
            .ok_or_else(|| StepError::missing("poll-status", "changeSetName"))?;
        let Some(cs) = cfn.describe_change_set(stack_name, &name).await? else {
            // Gone (deleted by someone, or by a retried step): decide again.
            info!(stack = %state.entry, change_set = %name, "change set gone; deciding again");
            state.wait.on = None;
            state.change_set = None;
            state.next = Next::ChangeSet;
            return Ok(state);
        };
        if let (Some(id), Some(in_hand)) = (&cs.stack_id, state.change_set.as_mut()) {
            in_hand.stack_id = Some(id.clone());
        }
        let decision = decide_change_set(ChangeSetObservation {
            status: cs.status,
            execution: cs.execution,
            reason: cs.reason.as_deref(),
        });
        info!(stack = %state.entry, change_set = %name, ?decision, "change set polled");
        match decision {
            ChangeSetDecision::Wait => self.wait(state, WaitOn::ChangeSet, &entry.spec),
            ChangeSetDecision::Execute => {
                state.next = Next::ChangeSet;
                let checks = self.record_checks(&state, entry, cfn, &name).await?;
                match self
                    .approval_request(&mut state, entry, cfn, &name, checks)
                    .await?
                {
                    // Executed only once approved, and only if it still holds.
                    Some(request) => {
                        info!(stack = %state.entry, change_set = %name, why = %request.why, "the change set waits for approval");
                        state.approval.request = Some(request);
                        state.next = Next::Approval;
                    }
                    None => {
                        if let Some(in_hand) = state.change_set.as_mut() {
                            in_hand.execute = true;
                        }
                    }
                }
                Ok(state)
            }
            ChangeSetDecision::WaitForStack => self.wait(state, WaitOn::Execution, &entry.spec),
            ChangeSetDecision::CheckStack => self.after_execution(state, entry, cfn).await,
            ChangeSetDecision::Empty => self.empty_change_set(state, entry, cfn, &name).await,
            ChangeSetDecision::Failed { reason } => {
                // Its pre-deployment validations, where the endpoint says.
                let cause = cfn
                    .failed_events(stack_name, EventsOf::ChangeSet(&name))
                    .await?
                    .and_then(|events| root_cause(&events));
                cfn.delete_change_set(stack_name, &name).await?;
                let message = match cause {
                    Some(cause) if !reason.contains(&cause) => format!("{reason} ({cause})"),
                    _ => reason,
                };
                Err(StepError::stalled(StallReason::ChangeSetFailed, message))
            }
        }
    }

    /// An empty change set: deleted, the stack's settings applied, and the
    /// entry in sync with what Git has.
    async fn empty_change_set(
        &self,
        state: RunState,
        entry: &StackEntry,
        cfn: &Port<P>,
        name: &str,
    ) -> StepResult {
        let stack_name = entry.spec.effective_stack_name();
        // Every call that can fail comes before the change set is deleted: a
        // retried step finds it again and meets the same call (and, retries
        // spent, ends with that call's error), never a gone change set that
        // makes a new one, round after round, until the poll budget.
        let stack = cfn.describe_stack(stack_name).await?;
        let changed = match &stack {
            Some(stack) => self.apply_settings(cfn, &entry.spec, stack).await?,
            None => Vec::new(),
        };
        let seen = self
            .observe_if_there(cfn, &entry.spec, stack.as_ref())
            .await?;
        let outputs = stack.as_ref().map(|s| s.outputs.clone());
        let outputs = self
            .recordable_outputs(&state, &entry.spec, cfn, outputs)
            .await?;
        cfn.delete_change_set(stack_name, name).await?;
        let message = match state.out_of_band() {
            Some(found) => format!(
                "in sync: {}, but to what Git has (the change set was empty)",
                found.detail
            ),
            None => "in sync: the change set was empty".to_owned(),
        };
        let message = self.with_untaken_tags(message, &state, &entry.spec, stack.as_ref());
        let message = with_settings(message, &changed);
        let status = self
            .ready(&state, entry, cfn, seen, outputs, &message)
            .await;
        self.finish(state, entry, status, "in sync").await
    }

    /// CloudFormation's own checks of the ready change set (validations,
    /// hooks), recorded when there are any (and when they differ from the
    /// last record); one line each. Read as well as the endpoint serves
    /// them: an error is logged, never the run's.
    async fn record_checks(
        &self,
        state: &RunState,
        entry: &StackEntry,
        cfn: &Port<P>,
        name: &str,
    ) -> Result<Vec<String>, StepError> {
        let stack_name = entry.spec.effective_stack_name();
        let checks = match cfn.change_set_checks(stack_name, name).await {
            Ok(checks) => checks.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(stack = %state.entry, change_set = %name, error = %e, "CloudFormation's checks unread");
                Vec::new()
            }
        };
        if checks.is_empty() {
            return Ok(Vec::new());
        }
        let lines = checks.iter().map(ChangeSetCheck::line).collect();
        let record = crate::status::ChecksRecord {
            change_set: name.to_owned(),
            revision: state.revision().map(str::to_owned),
            checks,
        };
        if entry.status.findings.checks.as_ref() != Some(&record) {
            let status = crate::status::transitions::with_checks(&entry.status, record);
            self.record(state, entry, status).await?;
        }
        Ok(lines)
    }

    /// The approval a ready change set must wait for, if the entry's policy
    /// asks for it given what the change set would do; `checks`:
    /// CloudFormation's, one line each, for the approver to read.
    async fn approval_request(
        &self,
        state: &mut RunState,
        entry: &StackEntry,
        cfn: &Port<P>,
        name: &str,
        checks: Vec<String>,
    ) -> Result<Option<ApprovalRequest>, StepError> {
        let spec = &entry.spec;
        if spec.approval == Approval::Never {
            return Ok(None);
        }
        let stack_name = spec.effective_stack_name();
        let changes = cfn.change_set_changes(stack_name, name).await?;
        let needed = if spec.approval == Approval::PullRequest {
            pull_request_holds(entry.reviewed.as_ref(), state.desired_hash(), &changes).err()
        } else {
            approval_needed(spec.approval, &changes)
        };
        let Some(why) = needed else {
            return Ok(None);
        };
        let rows = rows_hash(&changes);
        if spec.approval != Approval::PullRequest
            && let Some(by) = self.approved_for_fleet(state, entry, &rows).await?
        {
            info!(stack = %state.entry, change_set = %name, %by, "approved for the fleet: the same changes as an approved target's");
            state.execution.add_note(format!(
                "approved for its fleet by {by} (the same changes as a target approved at this revision)"
            ));
            return Ok(None);
        }
        let stack = cfn
            .describe_stack(stack_name)
            .await?
            .filter(|s| !s.status.not_created());
        let (changes, more) = bounded(changes);
        Ok(Some(ApprovalRequest {
            change_set: name.to_owned(),
            why,
            changes,
            more,
            revision: state.revision().map(str::to_owned),
            desired_hash: state.desired_hash().map(str::to_owned),
            spec_version: state.execution.spec_version,
            stack: stack.map(|s| (s.stack_id, s.changed_at)),
            timeout_seconds: spec.approval_timeout.as_secs(),
            asked_at: crate::clock::now_millis(),
            checks,
            rows: Some(rows),
        }))
    }

    /// Our change set ran (or runs): wait, or end `Ready` (with the settings
    /// a change set does not carry applied), or fail with the first failed
    /// resource's reason.
    async fn after_execution(
        &self,
        mut state: RunState,
        entry: &StackEntry,
        cfn: &Port<P>,
    ) -> StepResult {
        let spec = &entry.spec;
        let stack_name = spec.effective_stack_name();
        // The change set says how its execution went while it lasts (AWS
        // removes it once executed); the stack is the one it named.
        let change_set = match state.change_set_name() {
            Some(name) => cfn.describe_change_set(stack_name, name).await?,
            None => None,
        };
        let execution_failed = change_set
            .as_ref()
            .filter(|cs| cs.execution == ExecutionStatus::ExecuteFailed);
        let target = state
            .change_set
            .as_ref()
            .and_then(|c| c.stack_id.clone())
            .unwrap_or_else(|| stack_name.to_owned());
        let stack = cfn.describe_stack(&target).await?;
        // The stack's id, for the events about it (a stack of the same name
        // made again is another).
        if let (Some(stack), Some(in_hand)) = (&stack, state.change_set.as_mut()) {
            in_hand
                .stack_id
                .get_or_insert_with(|| stack.stack_id.clone());
        }
        let outcome = decide_after_execute(
            change_set.as_ref().map(|cs| cs.execution),
            stack.as_ref().map(|s| &s.status),
        );
        match outcome {
            ExecutionOutcome::Wait => self.wait(state, WaitOn::Execution, spec),
            ExecutionOutcome::Succeeded => {
                let changed = match &stack {
                    Some(stack) => self.apply_settings(cfn, spec, stack).await?,
                    None => Vec::new(),
                };
                let mut message = with_settings(
                    format!("applied {}", short(state.revision().unwrap_or("?"))),
                    &changed,
                );
                if let Some(found) = state.uploaded.as_mut().and_then(|u| u.out_of_band.as_mut()) {
                    found.undone = true;
                    message = format!("{message}, putting back a change: {}", found.detail);
                }
                let seen = self.observe_if_there(cfn, spec, stack.as_ref()).await?;
                let outputs = stack.as_ref().map(|s| s.outputs.clone());
                let outputs = self.recordable_outputs(&state, spec, cfn, outputs).await?;
                let status = self
                    .ready(&state, entry, cfn, seen, outputs, &message)
                    .await;
                let outcome = if state.out_of_band().is_some() {
                    "put back"
                } else {
                    "applied"
                };
                self.finish(state, entry, status, outcome).await
            }
            ExecutionOutcome::Failed => {
                let status = stack
                    .as_ref()
                    .map(|s| s.status.to_string())
                    .unwrap_or_else(|| "gone".into());
                let reason = self.failure_reason(cfn, &target, &state, stack).await?;
                let message = match execution_failed.and_then(|cs| cs.reason.as_deref()) {
                    Some(why) => format!(
                        "the change set's execution failed ({why}); the stack is {status}: {reason}"
                    ),
                    None => format!("the stack ended in {status}: {reason}"),
                };
                Err(StepError::stalled(StallReason::StackFailed, message))
            }
        }
    }
}

#[cfg(test)]
mod tests;
