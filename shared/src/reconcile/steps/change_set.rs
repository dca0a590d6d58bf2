//! `change-set` (state `ChangeSet`): acts on the stack's status by the
//! decision table — creates a CREATE or UPDATE change set, waits for someone
//! else's operation, continues a failed rollback, or deletes a failed create
//! to make it again — or executes the change set poll-status found ready.

use tracing::{info, warn};

use super::{StepResult, Steps, short, wait};
use crate::naming::change_set_name;
use crate::ownership::Owner;
use crate::ports::{
    Blobs, ChangeSetRequest, CloudFormation, CloudFormationFactory, Created, SourceFetcher,
    StackInfo,
};
use crate::preview::bounded;
use crate::reconcile::decide::{
    ChangeSetKind, FailedCreate, StackDecision, StackObservation, decide_stack,
};
use crate::reconcile::run::{Next, RunState, StepError, WaitOn};
use crate::registry::{StackEntry, StepRegistry};
use crate::spec::StackSpec;
use crate::stack_status::{ExecutionStatus, StackStatus};
use crate::status::{Adoption, Failures, StallReason, Status, Timestamp};

impl<R, B, F, S> Steps<R, B, F, S>
where
    R: StepRegistry,
    B: Blobs,
    F: CloudFormationFactory,
    S: SourceFetcher,
{
    pub async fn change_set(&self, mut state: RunState) -> StepResult {
        let entry = self.resume(&state).await?;
        let cfn = self.port(&entry.spec).await?;
        if state.approved.is_some() {
            state = self.after_approval(state, &entry, &cfn).await?;
        }
        if state.execute {
            return self.execute(state, &entry, &cfn).await;
        }
        let stack_name = entry.spec.effective_stack_name();
        let stack = cfn.describe_stack(stack_name).await?;
        state.adopting = self.ours_to_touch(&state, &entry, stack.as_ref())? == Owner::Adopted;
        // At the applied hash, unless the stack was changed outside
        // stacksync (or the run is forced): then Git wins.
        let hash_matches = entry.status.applied_hash.is_some()
            && entry.status.applied_hash == state.desired_hash
            && !state.must_apply;
        let at = (state.spec_version, state.revision.as_deref());
        let decision = decide_stack(StackObservation {
            status: stack.as_ref().map(|s| &s.status),
            hash_matches,
            rollback_continues: state.rollback_continues,
            failed_create: FailedCreate::of(
                entry.spec.failed_create(),
                entry.status.failures.as_ref(),
                at,
                state.trigger.force,
            ),
        });
        info!(stack = %state.stack_id, status = ?stack.as_ref().map(|s| s.status.to_string()), ?decision, "decided");
        match decision {
            StackDecision::CreateChangeSet {
                kind,
                cleanup_review,
            } => self.create(state, &entry, &cfn, kind, cleanup_review).await,
            StackDecision::Wait => wait(state, WaitOn::Stack, &entry.spec),
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
                state.rollback_continues += 1;
                wait(state, WaitOn::Rollback, &entry.spec)
            }
            StackDecision::DeleteAndRecreate => self.delete_and_recreate(state, &entry).await,
            StackDecision::Stalled { reason, message } => Err(StepError::stalled(reason, message)),
        }
    }

    /// A failed create is deleted to be made again: recorded before the
    /// delete, so a create that fails again at this revision is not made a
    /// third time.
    async fn delete_and_recreate(&self, mut state: RunState, entry: &StackEntry) -> StepResult {
        let at = (state.spec_version, state.revision.as_deref());
        let mut status = entry.status.clone();
        let failures = status.failures.get_or_insert_with(Default::default);
        if !failures.at(at.0, at.1) {
            *failures = Failures {
                spec_version: at.0,
                revision: at.1.map(str::to_owned),
                ..Failures::default()
            };
        }
        failures.recreated = true;
        self.record(&state, entry, status).await?;
        state.recreate = true;
        state.delete_requests = 0;
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
                warn!(stack = %state.stack_id, stack_id = %found.stack_id, "adopting a stack stacksync did not make (adopt: true); its change set is previewed before it runs");
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
    async fn execute(&self, mut state: RunState, entry: &StackEntry, cfn: &F::Port) -> StepResult {
        let stack_name = entry.spec.effective_stack_name();
        let name = state
            .change_set_name
            .clone()
            .ok_or_else(|| StepError::missing("change-set", "changeSetName"))?;
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
            if state.adopting {
                self.preview_adoption(&state, entry, cfn, &name).await?;
            }
            info!(stack = %state.stack_id, change_set = %name, "executing change set");
            cfn.execute_change_set(stack_name, &name).await?;
        }
        state.execute = false;
        wait(state, WaitOn::Execution, &entry.spec)
    }

    /// Before an adopting change set runs: what it will do to the stack,
    /// recorded in the status (`adoption`, shown by `stacksync get`) and
    /// logged, row by row, with the stack's tags before.
    async fn preview_adoption(
        &self,
        state: &RunState,
        entry: &StackEntry,
        cfn: &F::Port,
        name: &str,
    ) -> Result<(), StepError> {
        let stack_name = entry.spec.effective_stack_name();
        let stack = cfn.describe_stack(stack_name).await?;
        let (changes, more) = bounded(cfn.change_set_changes(stack_name, name).await?);
        for change in &changes {
            warn!(stack = %state.stack_id, change_set = %name, %change, "adoption: the change set will");
        }
        let adoption = Adoption {
            stack_id: stack
                .as_ref()
                .map(|s| s.stack_id.clone())
                .unwrap_or_default(),
            previous_tags: stack.map(|s| s.tags).unwrap_or_default(),
            change_set: name.to_owned(),
            run: state.execution.clone(),
            at: Timestamp(crate::clock::now_millis()),
            changes,
            more,
        };
        warn!(stack = %state.stack_id, stack_id = %adoption.stack_id, rows = adoption.changes.len() + more, "adopting: previewed, executing");
        let status = Status {
            adoption: Some(adoption),
            ..entry.status.clone()
        };
        self.record(state, entry, status).await
    }

    /// Creates the run's change set (named from the stack and the desired
    /// state, so a retried step finds the one it made).
    async fn create(
        &self,
        mut state: RunState,
        entry: &StackEntry,
        cfn: &F::Port,
        kind: ChangeSetKind,
        cleanup_review: bool,
    ) -> StepResult {
        let stack_name = entry.spec.effective_stack_name();
        let desired = state
            .desired_hash
            .clone()
            .ok_or_else(|| StepError::missing("change-set", "desiredHash"))?;
        let name = change_set_name(stack_name, state.spec_version, &desired, &state.execution);
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
        request.revert_drift = state.revert_drift.is_some() && kind == ChangeSetKind::Update;
        let created = match cfn.create_change_set(&request).await {
            Err(e) if request.revert_drift && refuses_drift_aware(&e) => {
                // An endpoint without drift-aware change sets: the template
                // as it is, which puts back only what it changes.
                warn!(stack = %state.stack_id, error = %e, "drift-aware change sets refused here: applying the template as it is");
                state.revert_reapplied = true;
                request.revert_drift = false;
                cfn.create_change_set(&request).await?
            }
            created => created?,
        };
        match created {
            Created::ChangeSet => {
                state.change_set_name = Some(name);
                state.change_set_kind = Some(kind);
                wait(state, WaitOn::ChangeSet, &entry.spec)
            }
            Created::NothingToChange => {
                let stack = cfn.describe_stack(stack_name).await?;
                let seen = self
                    .observe_if_there(cfn, &entry.spec, stack.as_ref())
                    .await?;
                let outputs = stack.as_ref().map(|s| s.outputs.clone());
                self.in_sync(
                    state,
                    entry,
                    cfn,
                    seen,
                    outputs,
                    "in sync: the change set was empty",
                )
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
        let template_key = state
            .template_key
            .as_deref()
            .ok_or_else(|| StepError::missing("change-set", "templateKey"))?;
        let url = crate::naming::template_url(
            &self.config.template_url_base,
            template_key,
            state.template_version.as_deref(),
        );
        Ok(ChangeSetRequest {
            description: format!(
                "stacksync: {} at {} (spec v{})",
                state.stack_id,
                short(state.revision.as_deref().unwrap_or("?")),
                state.spec_version
            ),
            ..ChangeSetRequest::for_spec(
                spec,
                &state.file_tags,
                &self.config.installation,
                name,
                kind,
                url,
                parameters,
            )
        })
    }
}

/// Whether CloudFormation refused a change set for its `DeploymentMode`
/// (an endpoint, or a partition, without drift-aware change sets).
fn refuses_drift_aware(e: &crate::ports::PortError) -> bool {
    let text = e.to_string();
    text.contains("DeploymentMode") || text.contains("REVERT_DRIFT")
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::fakes::ScriptedCloudFormation;
    use crate::stack_status::StackStatus as S;

    /// A run brought to the change-set step, the stack answering `statuses`.
    async fn at_change_set(
        statuses: &[Option<S>],
        extra: impl FnOnce(&mut StackEntry),
    ) -> (Test, RunState) {
        let t = Test::with(ScriptedCloudFormation::with_stack(statuses), extra).await;
        let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        let state = t.steps.template_upload(state).await.unwrap();
        (t, state)
    }

    #[tokio::test]
    async fn an_attached_role_the_installation_may_pass_needs_no_naming_and_another_is_refused() {
        for (attached, refused) in [
            ("arn:aws:iam::123456789012:role/deploy-orders", false),
            ("arn:aws:iam::123456789012:role/cdk-exec", true),
        ] {
            let (mut t, state) = at_change_set(&[Some(S::UpdateComplete)], |_| {}).await;
            t.cfn.script().role_arn = Some(attached.into());
            t.steps.config.policy = crate::ownership::InstallationPolicy {
                service_roles: Some(vec!["arn:aws:iam::123456789012:role/deploy-*".into()]),
                ..Default::default()
            };
            match t.steps.change_set(state).await {
                Err(e) if refused => {
                    assert_eq!(e.name(), "StackSync.Stalled.NotAllowed");
                    assert!(e.message().contains(attached), "{}", e.message());
                    assert!(t.cfn.script().requests.is_empty(), "no change set");
                }
                Ok(state) if !refused => {
                    assert_eq!(state.wait_on, Some(WaitOn::ChangeSet));
                    assert_eq!(t.cfn.script().requests[0].role_arn, None);
                }
                other => panic!("{attached}: {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn no_stack_gets_a_create_change_set_with_the_spec_settings() {
        let (t, state) = at_change_set(&[None], |e| {
            e.spec.role_arn = Some("arn:aws:iam::123456789012:role/cfn".into());
            e.spec.tags.insert("team".into(), "orders".into());
        })
        .await;
        let state = t.steps.change_set(state).await.unwrap();
        assert_eq!(
            (state.next, state.wait_on, state.wait_seconds),
            (Next::Wait, Some(WaitOn::ChangeSet), 5)
        );
        let request = t.cfn.script().requests[0].clone();
        assert_eq!(request.kind, ChangeSetKind::Create);
        assert_eq!(Some(request.change_set_name), state.change_set_name);
        assert_eq!(
            request.role_arn.as_deref(),
            Some("arn:aws:iam::123456789012:role/cfn")
        );
        // The spec's tags, and the two that say whose the stack is.
        let tags: Vec<(&str, &str)> = request
            .tags
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            tags,
            [
                ("stacksync:entry", "orders"),
                ("stacksync:installation", "stacksync-test"),
                ("team", "orders")
            ]
        );
        assert!(
            request
                .template_url
                .starts_with("https://bucket.s3.us-east-1.amazonaws.com/templates/")
        );
    }

    #[tokio::test]
    async fn a_template_overwritten_after_it_was_checked_is_not_what_cloudformation_reads() {
        let (t, state) = at_change_set(&[None], |_| {}).await;
        let key = state.template_key.clone().unwrap();
        let checked = state.template_version.clone().unwrap();
        t.steps.blobs.inner.put(&key, b"Resources: {Evil: {}}");
        t.steps.change_set(state).await.unwrap();
        let url = t.cfn.script().requests[0].template_url.clone();
        assert!(
            url.ends_with(&format!("/{key}?versionId={checked}")),
            "{url}"
        );
        assert_eq!(
            t.steps.blobs.inner.version(&key, &checked).as_deref(),
            Some(TEMPLATE)
        );
    }

    #[tokio::test]
    async fn parameters_overwritten_after_they_were_stored_are_refused_before_any_change_set() {
        let (t, state) = at_change_set(&[None], |_| {}).await;
        let key = state.parameters_key.clone().unwrap();
        t.steps.blobs.inner.put(&key, br#"{"Admin":"true"}"#);
        let err = t.steps.change_set(state).await.unwrap_err();
        match err {
            StepError::Stalled { reason, message } => {
                assert_eq!(reason, StallReason::ArtifactUnavailable);
                assert!(
                    message.contains("no longer holds") && message.contains(&key),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(t.cfn.script().requests.is_empty(), "no change set made");
    }

    #[tokio::test]
    async fn a_stack_left_in_review_is_cleaned_of_other_change_sets_first() {
        let (t, state) = at_change_set(&[Some(S::ReviewInProgress)], |_| {}).await;
        t.steps.change_set(state).await.unwrap();
        assert_eq!(
            t.cfn.operations(),
            [
                "DescribeStacks",
                "ListChangeSets",
                "DeleteChangeSet",
                "CreateChangeSet"
            ]
        );
        // Only stacksync's own: someone else's change set survives.
        let calls = t.cfn.script().calls.clone();
        assert!(calls.contains(&"DeleteChangeSet stacksync-v1-left-over".to_owned()));
        assert!(
            !calls.iter().any(|c| c.contains("someone-elses")),
            "{calls:?}"
        );
    }

    #[tokio::test]
    async fn a_failed_rollback_is_continued_once_then_reported_with_the_failed_resource() {
        let (t, state) = at_change_set(&[Some(S::UpdateRollbackFailed)], |_| {}).await;
        t.cfn.script().events = vec![crate::fakes::failure_event(
            "Table",
            "UPDATE_FAILED",
            "being modified",
        )];
        let state = t.steps.change_set(state).await.unwrap();
        assert_eq!(
            (state.wait_on, state.rollback_continues),
            (Some(WaitOn::Rollback), 1)
        );
        t.stack_answers(&[Some(S::UpdateRollbackFailed)]);
        let err = t.steps.change_set(state).await.unwrap_err();
        match err {
            StepError::Stalled { reason, message } => {
                assert_eq!(reason, StallReason::RollbackFailed);
                assert!(
                    message.contains("Table") && message.contains("being modified"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_failed_create_goes_to_delete_for_recreation() {
        let (t, state) = at_change_set(&[Some(S::RollbackComplete)], |_| {}).await;
        let state = t.steps.change_set(state).await.unwrap();
        assert_eq!((state.next, state.recreate), (Next::Delete, true));
    }

    #[tokio::test]
    async fn a_ready_change_set_is_executed_once_even_when_the_step_is_retried() {
        let (t, state) = at_change_set(&[Some(S::UpdateComplete)], |_| {}).await;
        let mut state = t.steps.change_set(state).await.unwrap();
        state.execute = true;
        let again = state.clone();
        let state = t.steps.change_set(state).await.unwrap();
        assert_eq!(state.wait_on, Some(WaitOn::Execution));
        t.steps.change_set(again).await.unwrap();
        let executes = t
            .cfn
            .operations()
            .iter()
            .filter(|o| *o == "ExecuteChangeSet")
            .count();
        assert_eq!(executes, 1, "{:?}", t.cfn.operations());
    }

    #[tokio::test]
    async fn someone_elses_operation_is_waited_for_and_delete_failed_is_left_alone() {
        let (t, state) = at_change_set(&[Some(S::UpdateInProgress)], |_| {}).await;
        let state = t.steps.change_set(state).await.unwrap();
        assert_eq!(state.wait_on, Some(WaitOn::Stack));
        t.stack_answers(&[Some(S::DeleteFailed)]);
        let err = t.steps.change_set(state).await.unwrap_err();
        assert!(
            matches!(
                err,
                StepError::Stalled {
                    reason: StallReason::StackBlocked,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn an_adopted_stack_is_previewed_recorded_and_logged_before_its_change_set_runs() {
        let (t, state) = at_change_set(&[Some(S::UpdateComplete)], |e| e.spec.adopt = true).await;
        t.cfn.script().tags = Some(std::collections::BTreeMap::from([(
            "team".into(),
            "theirs".into(),
        )]));
        t.cfn.script().changes = vec![crate::preview::ResourceChange {
            action: "Remove".into(),
            logical_id: "Theirs".into(),
            resource_type: "AWS::SNS::Topic".into(),
            physical_id: None,
            replacement: None,
            changed: Vec::new(),
        }];
        let mut state = t.steps.change_set(state).await.unwrap();
        assert!(state.adopting);
        assert_eq!(t.entry().status.adoption, None, "not before it is ready");
        state.execute = true;
        t.steps.change_set(state).await.unwrap();
        let adoption = t.entry().status.adoption.expect("recorded");
        assert_eq!(adoption.changes[0].logical_id, "Theirs");
        assert_eq!(adoption.previous_tags["team"], "theirs");
        assert_eq!(adoption.run, "run-1");
        let ops = t.cfn.operations();
        let previewed = ops.iter().rposition(|o| o == "DescribeChangeSet").unwrap();
        let executed = ops.iter().position(|o| o == "ExecuteChangeSet").unwrap();
        assert!(previewed < executed, "previewed first: {ops:?}");
    }
}
