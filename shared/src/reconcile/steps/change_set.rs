//! `change-set` (state `ChangeSet`): acts on the stack's status by the
//! decision table — creates a CREATE or UPDATE change set, waits for someone
//! else's operation, continues a failed rollback, or deletes a failed create
//! to make it again — or executes the change set poll-status found ready.

use tracing::{info, warn};

use super::{Port, Ports, StepResult, Steps, short};
use crate::naming::change_set_name;
use crate::ownership::Owner;
use crate::ports::{Blobs as _, ChangeSetRequest, ChangeSets, Created, StackInfo, Stacks};
use crate::preview::bounded;
use crate::reconcile::decide::{
    ChangeSetKind, FailedCreate, StackDecision, StackObservation, decide_stack,
};
use crate::reconcile::run::{ChangeSetInHand, Next, RunState, StepError, WaitOn};
use crate::registry::StackEntry;
use crate::spec::StackSpec;
use crate::stack_status::{ExecutionStatus, StackStatus};
use crate::status::{Adoption, Failures, StallReason, Timestamp, transitions};

impl<P: Ports> Steps<P> {
    pub async fn change_set(&self, mut state: RunState) -> StepResult {
        let entry = self.resume(&state).await?;
        let cfn = self.port(&entry.spec).await?;
        if state.approval.answer.is_some() {
            state = self.after_approval(state, &entry, &cfn).await?;
        }
        if state.executes() {
            return self.execute(state, &entry, &cfn).await;
        }
        let stack_name = entry.spec.effective_stack_name();
        let stack = cfn.describe_stack(stack_name).await?;
        let adopting = self.ours_to_touch(&state, &entry, stack.as_ref())? == Owner::Adopted;
        // At the applied hash, unless the stack was changed outside
        // stacksync (or the run is forced): then Git wins.
        let hash_matches = crate::reconcile::decide::hash_matches(
            entry.status.applied.applied_hash.as_deref(),
            state.desired_hash(),
            state.must_apply(),
        );
        let at = (state.execution.spec_version, state.revision());
        let decision = decide_stack(StackObservation {
            status: stack.as_ref().map(|s| &s.status),
            hash_matches,
            rollback_continues: state.budgets.rollback_continues,
            failed_create: FailedCreate::of(
                entry.spec.failed_create(),
                entry.status.run.failures.as_ref(),
                at,
                state.trigger.force,
            ),
        });
        info!(stack = %state.entry, status = ?stack.as_ref().map(|s| s.status.to_string()), ?decision, "decided");
        match decision {
            StackDecision::CreateChangeSet {
                kind,
                cleanup_review,
            } => {
                self.create(state, &entry, &cfn, (kind, adopting), cleanup_review)
                    .await
            }
            StackDecision::Wait => self.wait(state, WaitOn::Stack, &entry.spec),
            StackDecision::InSync => {
                let seen = self
                    .observe_if_there(&cfn, &entry.spec, stack.as_ref())
                    .await?;
                let outputs = stack.as_ref().map(|s| s.outputs.clone());
                self.in_sync(
                    state,
                    &entry,
                    &cfn,
                    seen,
                    outputs,
                    "in sync: nothing to change",
                )
                .await
            }
            StackDecision::RollbackStuck => {
                // Continuing did not help: a resource needs skipping or fixing by hand.
                let reason = self.failure_reason(&cfn, stack_name, &state, stack).await?;
                Err(StepError::stalled(
                    StallReason::RollbackFailed,
                    format!(
                        "the stack is still UPDATE_ROLLBACK_FAILED after ContinueUpdateRollback: {reason}"
                    ),
                ))
            }
            StackDecision::ContinueRollback => {
                cfn.continue_update_rollback(stack_name, entry.spec.role_arn.as_deref())
                    .await?;
                let mut state = state;
                state.budgets.rollback_continues += 1;
                self.wait(state, WaitOn::Rollback, &entry.spec)
            }
            StackDecision::DeleteAndRecreate => self.delete_and_recreate(state, &entry).await,
            StackDecision::Stalled { reason, message } => Err(StepError::stalled(reason, message)),
        }
    }

    /// A failed create is deleted to be made again: recorded before the
    /// delete, so a create that fails again at this revision is not made a
    /// third time.
    async fn delete_and_recreate(&self, mut state: RunState, entry: &StackEntry) -> StepResult {
        let at = (state.execution.spec_version, state.revision());
        let mut status = entry.status.clone();
        let failures = status.run.failures.get_or_insert_with(Default::default);
        if !failures.at(at.0, at.1) {
            *failures = Failures {
                spec_version: at.0,
                revision: at.1.map(str::to_owned),
                ..Failures::default()
            };
        }
        failures.recreated = true;
        self.record(&state, entry, status).await?;
        state.budgets.recreate = true;
        state.budgets.delete_requests = 0;
        state.next = Next::Delete;
        Ok(state)
    }

    /// Refuses (`NotOwned`) a stack this entry did not make and does not
    /// adopt, logging an adoption; and a stack whose service role the entry
    /// does not name, unless it is one the installation may pass.
    fn ours_to_touch(
        &self,
        state: &RunState,
        entry: &StackEntry,
        stack: Option<&StackInfo>,
    ) -> Result<Owner, StepError> {
        let Some(found) = stack.filter(|s| s.status != StackStatus::DeleteComplete) else {
            return Ok(Owner::Ours);
        };
        let owner = self.owner_of(entry, found);
        match &owner {
            Owner::Ours => {}
            Owner::Adopted => {
                warn!(stack = %state.entry, stack_id = %found.stack_id, "adopting a stack stacksync did not make (adopt: true); its change set is previewed before it runs");
            }
            Owner::Foreign(why) => {
                return Err(StepError::stalled(StallReason::NotOwned, why.clone()));
            }
        }
        self.role_allowed(entry, found)?;
        Ok(owner)
    }

    /// Executes the change set poll-status found ready, unless a retried
    /// step finds it executing already.
    async fn execute(&self, mut state: RunState, entry: &StackEntry, cfn: &Port<P>) -> StepResult {
        let stack_name = entry.spec.effective_stack_name();
        let change_set = state
            .change_set
            .clone()
            .ok_or_else(|| StepError::missing("change-set", "changeSetName"))?;
        let name = change_set.name;
        let started = cfn
            .describe_change_set(stack_name, &name)
            .await?
            .is_some_and(|cs| {
                matches!(
                    cs.execution,
                    ExecutionStatus::ExecuteInProgress | ExecutionStatus::ExecuteComplete
                )
            });
        if !started {
            if change_set.adopting {
                self.preview_adoption(&state, entry, cfn, &name).await?;
            }
            info!(stack = %state.entry, change_set = %name, "executing change set");
            cfn.execute_change_set(stack_name, &name).await?;
        }
        if let Some(change_set) = state.change_set.as_mut() {
            change_set.execute = false;
        }
        self.wait(state, WaitOn::Execution, &entry.spec)
    }

    /// Before an adopting change set runs: what it will do to the stack,
    /// recorded in the status (`adoption`, shown by `stacksync get`) and
    /// logged, row by row, with the stack's tags before.
    async fn preview_adoption(
        &self,
        state: &RunState,
        entry: &StackEntry,
        cfn: &Port<P>,
        name: &str,
    ) -> Result<(), StepError> {
        let stack_name = entry.spec.effective_stack_name();
        let stack = cfn.describe_stack(stack_name).await?;
        let (changes, more) = bounded(cfn.change_set_changes(stack_name, name).await?);
        for change in &changes {
            warn!(stack = %state.entry, change_set = %name, %change, "adoption: the change set will");
        }
        let adoption = Adoption {
            stack_id: stack
                .as_ref()
                .map(|s| s.stack_id.clone())
                .unwrap_or_default(),
            previous_tags: stack.map(|s| s.tags).unwrap_or_default(),
            change_set: name.to_owned(),
            run: state.execution.name.clone(),
            at: Timestamp(crate::clock::now_millis()),
            changes,
            more,
        };
        warn!(stack = %state.entry, stack_id = %adoption.stack_id, rows = adoption.changes.len() + more, "adopting: previewed, executing");
        let status = transitions::adopting(&entry.status, adoption);
        self.record(state, entry, status).await
    }

    /// The stack a CREATE change set made for itself (`REVIEW_IN_PROGRESS`),
    /// recorded as this entry's before anything else can fail: a change set
    /// that then fails leaves it behind, untagged where the endpoint does not
    /// tag it, and the next run must know it as its own. Its StackId as
    /// CloudFormation answered, or (a retried step: the change set was there
    /// already) as the change set names it.
    async fn record_placeholder(
        &self,
        state: &RunState,
        entry: &StackEntry,
        cfn: &Port<P>,
        name: &str,
        answered: Option<String>,
    ) -> Result<(), StepError> {
        let stack_id = match answered {
            Some(id) => Some(id),
            None => cfn
                .describe_change_set(entry.spec.effective_stack_name(), name)
                .await?
                .and_then(|cs| cs.stack_id),
        };
        let Some(stack_id) = stack_id.filter(|id| !id.is_empty()) else {
            return Ok(());
        };
        if entry.status.run.placeholder.as_deref() == Some(stack_id.as_str()) {
            return Ok(());
        }
        let status = transitions::with_placeholder(&entry.status, stack_id);
        self.record(state, entry, status).await
    }

    /// Creates the run's change set (named from the stack and the desired
    /// state, so a retried step finds the one it made).
    async fn create(
        &self,
        mut state: RunState,
        entry: &StackEntry,
        cfn: &Port<P>,
        (kind, adopting): (ChangeSetKind, bool),
        cleanup_review: bool,
    ) -> StepResult {
        let stack_name = entry.spec.effective_stack_name();
        let desired = state
            .desired_hash()
            .map(str::to_owned)
            .ok_or_else(|| StepError::missing("change-set", "desiredHash"))?;
        let name = change_set_name(
            stack_name,
            state.execution.spec_version,
            &desired,
            &state.execution.name,
        );
        // A run that cannot wait for a change set makes none (one made here
        // and given up on at once would outlive the run).
        super::within_budget(&state, &entry.spec, "a change set to be made")?;
        if cleanup_review {
            // Old change sets of a never-created stack; ours (a retried step
            // made it already) stays.
            for old in cfn.list_change_sets(stack_name).await? {
                if old != name && crate::ownership::ours_change_set(&old) {
                    cfn.delete_change_set(stack_name, &old).await?;
                }
            }
        }
        let parameters = self.parameters(&state, cfn).await?;
        let mut request = self.change_set_request(&state, &entry.spec, &name, kind, parameters)?;
        request.template_body = self.checked_template_body(&state, &entry.spec).await?;
        request.revert_drift = state.revert().is_some() && kind == ChangeSetKind::Update;
        let created = match cfn.create_change_set(&request).await {
            Err(e) if request.revert_drift && refuses_drift_aware(&e) => {
                // An endpoint without drift-aware change sets: the template
                // as it is, which puts back only what it changes.
                warn!(stack = %state.entry, error = %e, "drift-aware change sets refused here: applying the template as it is");
                if let Some(revert) = state.uploaded.as_mut().and_then(|u| u.revert.as_mut()) {
                    revert.reapplied = true;
                }
                request.revert_drift = false;
                cfn.create_change_set(&request).await?
            }
            created => created?,
        };
        match created {
            Created::ChangeSet { stack_id } => {
                if kind == ChangeSetKind::Create {
                    self.record_placeholder(&state, entry, cfn, &name, stack_id)
                        .await?;
                }
                state.change_set = Some(ChangeSetInHand {
                    kind: Some(kind),
                    adopting,
                    ..ChangeSetInHand::named(name)
                });
                self.wait(state, WaitOn::ChangeSet, &entry.spec)
            }
            Created::NothingToChange => {
                let stack = cfn.describe_stack(stack_name).await?;
                let seen = self
                    .observe_if_there(cfn, &entry.spec, stack.as_ref())
                    .await?;
                let outputs = stack.as_ref().map(|s| s.outputs.clone());
                let message = self.with_untaken_tags(
                    "in sync: the change set was empty".to_owned(),
                    &state,
                    &entry.spec,
                    stack.as_ref(),
                );
                self.in_sync(state, entry, cfn, seen, outputs, &message)
                    .await
            }
        }
    }

    fn change_set_request(
        &self,
        state: &RunState,
        spec: &StackSpec,
        name: &str,
        kind: ChangeSetKind,
        parameters: Vec<(String, String)>,
    ) -> Result<ChangeSetRequest, StepError> {
        let uploaded = state
            .uploaded
            .as_ref()
            .ok_or_else(|| StepError::missing("change-set", "templateKey"))?;
        let url = crate::naming::template_url(
            &self.config.template_url_base,
            &uploaded.template_key,
            uploaded.template_version.as_deref(),
        );
        Ok(ChangeSetRequest {
            description: format!(
                "stacksync: {} at {} (spec v{})",
                state.entry,
                short(state.revision().unwrap_or("?")),
                state.execution.spec_version
            ),
            ..ChangeSetRequest::for_spec(
                spec,
                &uploaded.file_tags,
                &self.config.installation,
                name,
                kind,
                url,
                parameters,
            )
        })
    }
}

impl<P: Ports> Steps<P> {
    /// The stored template as the change set's `TemplateBody`, when it fits
    /// one (at most 51,200 bytes): CloudFormation then reads nothing from
    /// the bucket, so what it deploys is what template-upload checked,
    /// whatever becomes of the object (a `TemplateURL`'s `versionId` is
    /// honoured by moto's patch, ignored by LocalStack, and AWS's
    /// documentation does not say: TESTING.md). A template that no longer
    /// holds the bytes its key is the hash of is refused, as parameters
    /// are; a larger one (`None`) goes by the pinned URL.
    async fn checked_template_body(
        &self,
        state: &RunState,
        spec: &StackSpec,
    ) -> Result<Option<String>, StepError> {
        let Some(key) = state.uploaded.as_ref().map(|u| u.template_key.as_str()) else {
            return Ok(None);
        };
        let limit = crate::ports::MAX_TEMPLATE_BODY as u64;
        let bytes = match self.blobs.get(key, limit).await {
            Ok(bytes) => bytes,
            // Over the limit (or unreadable to us): CloudFormation reads the URL.
            Err(crate::ports::PortError::Refused(why)) => {
                info!(key, %why, "the template goes by its pinned URL, not as the body");
                return Ok(None);
            }
            Err(e) => return Err(StepError::port(StallReason::ArtifactUnavailable)(e)),
        };
        let named =
            crate::naming::template_key(&crate::hash::sha256_hex(&bytes), spec.target_account());
        if named != key {
            return Err(StepError::stalled(
                StallReason::ArtifactUnavailable,
                format!(
                    "{key} no longer holds the template its name is the hash of (written outside stacksync since the run stored it); nothing was deployed, and the next run stores it again"
                ),
            ));
        }
        Ok(String::from_utf8(bytes).ok())
    }
}

/// Whether CloudFormation refused a drift-aware change set as one it does
/// not serve (an endpoint, or a partition, without them: the adapter says
/// so of "Unexpected parameter DeploymentMode").
fn refuses_drift_aware(e: &crate::ports::PortError) -> bool {
    matches!(e, crate::ports::PortError::Unsupported(_))
}

#[cfg(test)]
mod tests;
