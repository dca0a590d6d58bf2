//! `approval` (state `AwaitApproval`): the run's ready change set waits for
//! a person. The state machine calls this step with a task token and then
//! waits for the token's answer (`.waitForTaskToken`: no Lambda runs while
//! it waits); the step keeps the token where only the function that
//! answers approvals reads it ([`crate::naming::approval_token_key`]: never
//! the registry, a status or a log), records what waits and where it is
//! answered, and keeps the stack's lease for as long as the wait may last.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tracing::info;

use super::{Port, Ports, Steps, due};
use crate::approvers::VerifiedAnswer;
use crate::clock::now_millis;
use crate::naming::{approval_answer_key, approval_token_key};
use crate::notice::{NoticeApproval, NoticeKind};
use crate::ports::{Blobs, ChangeSets, Stacks};
use crate::reconcile::decide::{Approved, approval_holds};
use crate::reconcile::run::{
    ApprovalAnswer, ApprovalRequest, ChangeSetInHand, RunState, StepError,
};
use crate::registry::Leases as _;
use crate::registry::{LEASE_TTL, StackEntry};
use crate::stack_status::{ChangeSetStatus, ExecutionStatus};
use crate::status::{ApprovalRecord, AwaitingApproval, Decision, Timestamp, transitions};

/// What the state machine gives the step: the run's state, and the token
/// its answer must bring back (`$$.Task.Token`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalInput {
    pub state: RunState,
    pub task_token: String,
}

impl<P: Ports> Steps<P> {
    /// Records the waiting change set (phase `AwaitingApproval`) and holds
    /// the lease until the wait can end (its timeout, and a step's margin).
    pub async fn approval(&self, input: ApprovalInput) -> Result<RunState, StepError> {
        let ApprovalInput { state, task_token } = input;
        let entry = self.resume(&state).await?;
        let request = state
            .approval
            .request
            .clone()
            .ok_or_else(|| StepError::missing("approval", "approval"))?;
        let now = now_millis();
        let wait = Duration::from_secs(request.timeout_seconds) + LEASE_TTL;
        self.registry
            .renew_lease(&state.entry, &state.execution.name, wait, now)
            .await?;
        let expires_at = Timestamp(due(now, request.timeout_seconds));
        self.blobs
            .put(
                &approval_token_key(&state.entry, &state.execution.name),
                task_token.into_bytes(),
                "text/plain",
            )
            .await?;
        info!(stack = %state.entry, change_set = %request.change_set, why = %request.why, "awaiting approval");
        let status = transitions::awaiting_approval(
            &entry.status,
            AwaitingApproval {
                change_set: request.change_set.clone(),
                why: request.why.clone(),
                changes: request.changes.clone(),
                more: request.more,
                checks: [policy_lines(&entry, &state), request.checks.clone()].concat(),
                run: state.execution.name.clone(),
                answer_url: self.config.answer_url.clone(),
                legacy_token: None,
                // As the run's request says: the verified answer names it.
                requested_at: Timestamp(request.asked_at),
                expires_at,
            },
            format!(
                "change set {} awaits approval ({}): stacksync approve {} --change-set {}",
                request.change_set, request.why, state.entry, request.change_set
            ),
            // Due when the wait ends, should the run die meanwhile.
            Timestamp(due(now, wait.as_secs())),
        );
        self.record(&state, &entry, status.clone()).await?;
        // No run slot held while a person decides: the run takes one again
        // when it is answered (its next step is FetchArtifact).
        self.give_back_slot(&mut state.clone(), Some(&entry.spec))
            .await;
        let approval = NoticeApproval {
            why: Some(request.why.clone()),
            changes: Some(request.changes.len() + request.more),
            expires_at: Some(crate::clock::rfc3339_millis(expires_at.0)),
            ..NoticeApproval::default()
        };
        self.notify(
            NoticeKind::AwaitingApproval,
            &state,
            &entry,
            &status,
            Some(approval),
        )
        .await;
        Ok(state)
    }
}

/// The policy check of the run's revision, as the approval shows it.
fn policy_lines(entry: &crate::registry::StackEntry, state: &RunState) -> Vec<String> {
    let Some(record) = entry.status.findings.policy.as_ref() else {
        return Vec::new();
    };
    if record.revision.as_deref() != state.revision() {
        return Vec::new();
    }
    let mut lines = vec![record.report.summary()];
    lines.extend(record.report.lines());
    lines
}

impl<P: Ports> Steps<P> {
    /// Back from the wait with an approval (the run fetched and uploaded
    /// again, so the desired state is today's): executes the approved
    /// change set if the approval still holds (`execute` set); else deletes
    /// it (the approval is void, recorded so) and the run makes a new one,
    /// which asks again. The wait does not count against the run's
    /// `timeout`.
    pub(super) async fn after_approval(
        &self,
        mut state: RunState,
        entry: &StackEntry,
        cfn: &Port<P>,
    ) -> Result<RunState, StepError> {
        let request = state
            .approval
            .request
            .take()
            .ok_or_else(|| StepError::missing("change-set", "approval"))?;
        let answer = state
            .approval
            .answer
            .take()
            .ok_or_else(|| StepError::missing("change-set", "approved"))?;
        state.execution.started_at += now_millis().saturating_sub(request.asked_at);
        let stack_name = entry.spec.effective_stack_name();
        let (answer, verified) = self.verified(&state, &request, entry, answer).await?;
        let holds = match verified {
            Ok(()) => {
                self.still_holds(&state, &request, &answer, entry, cfn)
                    .await?
            }
            Err(why) => Err(why),
        };
        let (decision, reason) = match holds {
            Ok(()) => {
                info!(stack = %state.entry, change_set = %request.change_set, by = ?answer.by, "approved: executing");
                self.record_fleet_approval(entry, &request, answer.by.as_deref())
                    .await;
                let change_set = state
                    .change_set
                    .get_or_insert_with(|| ChangeSetInHand::named(&request.change_set));
                change_set.name.clone_from(&request.change_set);
                change_set.execute = true;
                (Decision::Approved, None)
            }
            Err(why) => {
                info!(stack = %state.entry, change_set = %request.change_set, %why, "the approval is void: a new change set asks again");
                cfn.delete_change_set(stack_name, &request.change_set)
                    .await?;
                state.change_set = None;
                (Decision::Void, Some(why))
            }
        };
        let record = ApprovalRecord {
            change_set: request.change_set,
            decision,
            by: answer.by,
            at: Timestamp(answer.at),
            reason,
            run: state.execution.name.clone(),
        };
        let approved = (decision == Decision::Approved).then(|| NoticeApproval {
            by: record.by.clone(),
            ..NoticeApproval::default()
        });
        let status = transitions::with_approval(&entry.status, record);
        self.record(&state, entry, status.clone()).await?;
        if let Some(approval) = approved {
            self.notify(NoticeKind::Approved, &state, entry, &status, Some(approval))
                .await;
        }
        Ok(state)
    }

    /// A deployed run's approval holds only if the function that answers
    /// approvals let it through: it records who (as AWS verified the
    /// caller) and which change set before it answers the token
    /// ([`crate::naming::approval_answer_key`], which only it may write), so
    /// a token answered by anyone else (it is in the execution's history)
    /// is no approval. The answer, with the verified approver; or why it
    /// does not hold. The local runner's answers come through the registry,
    /// whose writers it trusts (`stacksync approve --help`).
    ///
    /// The record names the wait it answers (`requestedAt`): the request's
    /// `askedAt`, or, for a wait recorded before the two were one, the
    /// `requestedAt` this run's wait still shows (every wait writes its
    /// own, so an earlier wait's answer matches neither).
    async fn verified(
        &self,
        state: &RunState,
        request: &ApprovalRequest,
        entry: &StackEntry,
        answer: ApprovalAnswer,
    ) -> Result<(ApprovalAnswer, Result<(), String>), StepError> {
        if self.config.local {
            return Ok((answer, Ok(())));
        }
        let key = approval_answer_key(&state.entry, &state.execution.name);
        let recorded = if self.blobs.exists(&key).await? {
            let bytes = self.blobs.get(&key, 64 * 1024).await?;
            serde_json::from_slice::<VerifiedAnswer>(&bytes).ok()
        } else {
            None
        };
        let this_wait = |at: i64| {
            at == request.asked_at
                || entry.status.approval.awaiting.as_ref().is_some_and(|a| {
                    a.run == state.execution.name
                        && a.change_set == request.change_set
                        && a.requested_at.0 == at
                })
        };
        Ok(match recorded {
            Some(v)
                if v.approved && v.change_set == answer.change_set && this_wait(v.requested_at) =>
            {
                (
                    ApprovalAnswer {
                        by: Some(v.by),
                        at: v.at,
                        ..answer
                    },
                    Ok(()),
                )
            }
            _ => (
                ApprovalAnswer { by: None, ..answer },
                Err(
                    "the approval did not come through the installation's approval function \
                     (its verified record of the approver is missing, or answers an earlier \
                     wait): a task token answered some other way is no approval"
                        .to_owned(),
                ),
            ),
        })
    }

    /// Whether the approval holds (else why it is void): it names the
    /// change set that asked, nothing moved since, and the change set is
    /// still ready to run.
    async fn still_holds(
        &self,
        state: &RunState,
        request: &ApprovalRequest,
        answer: &ApprovalAnswer,
        entry: &StackEntry,
        cfn: &Port<P>,
    ) -> Result<Result<(), String>, StepError> {
        let stack_name = entry.spec.effective_stack_name();
        let stack = cfn
            .describe_stack(stack_name)
            .await?
            .filter(|s| !s.status.not_created());
        let ready = cfn
            .describe_change_set(stack_name, &request.change_set)
            .await?
            .is_some_and(|cs| {
                cs.status == ChangeSetStatus::CreateComplete
                    && cs.execution == ExecutionStatus::Available
            });
        Ok(approval_holds(Approved {
            named: &answer.change_set,
            asked: &request.change_set,
            desired_then: (
                request.revision.as_deref(),
                request.desired_hash.as_deref(),
                request.spec_version,
            ),
            desired_now: (
                state.revision(),
                state.desired_hash(),
                state.execution.spec_version,
            ),
            stack_then: request.stack.as_ref().map(|(id, at)| (id.as_str(), *at)),
            stack_now: stack.as_ref().map(|s| (s.stack_id.as_str(), s.changed_at)),
        })
        .and_then(|()| {
            ready
                .then_some(())
                .ok_or_else(|| "the change set is no longer ready to run".to_owned())
        }))
    }
}

#[cfg(test)]
mod tests;
