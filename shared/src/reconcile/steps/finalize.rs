//! `finalize` (state `RecordFailure`): records a failure the state machine
//! caught, deletes the change set the run made and never executed, and
//! releases the lease. The last applied revision and hash are kept; a retry
//! is due after `retryInterval`.

use tracing::{info, warn};

use super::{StepResult, Steps, due};
use crate::clock::now_millis;
use crate::ports::{Blobs, CloudFormation, CloudFormationFactory, SourceFetcher};
use crate::reconcile::run::{FinalizeInput, Next, RunState, StepError};
use crate::registry::{StackEntry, StepRegistry};
use crate::stack_status::ExecutionStatus;
use crate::status::{Phase, Status, Timestamp};

impl<R, B, F, S> Steps<R, B, F, S>
where
    R: StepRegistry,
    B: Blobs,
    F: CloudFormationFactory,
    S: SourceFetcher,
{
    pub async fn finalize(&self, input: FinalizeInput) -> StepResult {
        let state = input.state;
        let message = input.error.message();
        let entry = self.registry.get(&state.stack_id).await?;
        let Some(entry) =
            entry.filter(|e| e.lease.as_ref().is_some_and(|l| l.owner == state.execution))
        else {
            // Gone, never leased, or lost: the status is someone else's to write.
            return Ok(RunState {
                next: Next::Done,
                outcome: Some(message),
                ..state
            });
        };
        self.clean_up(&state, &entry).await;
        let now = now_millis();
        let status = Status {
            phase: Phase::Failed,
            // A failure in the first step comes with the state it was given,
            // before the spec version was read: the entry's is the one tried.
            observed_spec_version: if state.spec_version > 0 {
                state.spec_version
            } else {
                entry.spec_version
            },
            last_attempted_revision: state
                .revision
                .clone()
                .or(entry.status.last_attempted_revision.clone()),
            message: Some(message.clone()),
            stall_reason: Some(input.error.reason()),
            change_set_name: state.change_set_name.clone(),
            last_reconcile_at: Some(Timestamp(now)),
            next_reconcile_at: Some(Timestamp(due(now, entry.spec.retry_interval.as_secs()))),
            // A change found outside stacksync that the run could not put
            // back is still news (`undone: false`).
            out_of_band: state
                .out_of_band
                .clone()
                .or_else(|| entry.status.out_of_band.clone()),
            ..entry.status.clone()
        };
        self.finish(state, &entry, status, &message).await
    }

    /// Deletes the run's change set if it was made and never executed (an
    /// executed one is CloudFormation's to remove). Best effort: the
    /// failure is recorded whatever happens here, and a lingering change
    /// set is logged, not raised.
    async fn clean_up(&self, state: &RunState, entry: &StackEntry) {
        let Some(name) = &state.change_set_name else {
            return;
        };
        let stack = entry.spec.effective_stack_name();
        let cleaned = async {
            let cfn = self.port(&entry.spec).await?;
            let unexecuted = cfn
                .describe_change_set(stack, name)
                .await?
                .is_some_and(|cs| {
                    matches!(
                        cs.execution,
                        ExecutionStatus::Available | ExecutionStatus::Unavailable
                    )
                });
            if unexecuted {
                cfn.delete_change_set(stack, name).await?;
            }
            Ok::<bool, StepError>(unexecuted)
        };
        match cleaned.await {
            Ok(true) => {
                info!(stack = %state.stack_id, change_set = %name, "the failed run's change set deleted")
            }
            Ok(false) => {}
            Err(e) => {
                warn!(stack = %state.stack_id, change_set = %name, error = %e, "the failed run's change set could not be deleted")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::reconcile::run::{CaughtError, StepError};
    use crate::status::StallReason;

    fn caught(error: &StepError) -> CaughtError {
        CaughtError {
            error: error.name(),
            cause: serde_json::json!({"errorType": error.name(), "errorMessage": error.message()})
                .to_string(),
        }
    }

    #[tokio::test]
    async fn a_caught_failure_is_recorded_with_its_reason_and_the_lease_released() {
        let t = Test::new().await;
        let mut entry = t.entry();
        entry.status.last_applied_revision = Some("older".into());
        entry.status.applied_hash = Some("h".into());
        t.steps.registry.inner.insert(entry);
        let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        let error = StepError::stalled(
            StallReason::InvalidTemplate,
            "template t.yaml is not valid YAML",
        );
        let state = t
            .steps
            .finalize(FinalizeInput {
                state,
                error: caught(&error),
            })
            .await
            .unwrap();
        assert_eq!(state.next, Next::Done);
        let entry = t.entry();
        assert_eq!(entry.status.phase, Phase::Failed);
        assert_eq!(
            entry.status.stall_reason,
            Some(StallReason::InvalidTemplate)
        );
        assert_eq!(
            entry.status.message.as_deref(),
            Some("template t.yaml is not valid YAML")
        );
        assert_eq!(
            entry.status.last_applied_revision.as_deref(),
            Some("older"),
            "kept"
        );
        assert_eq!(entry.status.applied_hash.as_deref(), Some("h"), "kept");
        assert!(entry.lease.is_none());
        let retry =
            entry.status.next_reconcile_at.unwrap().0 - entry.status.last_reconcile_at.unwrap().0;
        assert_eq!(retry, entry.spec.retry_interval.as_secs() as i64 * 1000);
    }

    #[tokio::test]
    async fn a_run_that_does_not_hold_the_lease_writes_nothing() {
        let t = Test::new().await;
        t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        let before = t.entry();
        let error = StepError::transient("throttled");
        let state = t
            .steps
            .finalize(FinalizeInput {
                state: t.input("run-2"),
                error: caught(&error),
            })
            .await
            .unwrap();
        assert_eq!(state.next, Next::Done);
        assert_eq!(t.entry(), before);
    }

    /// A failed run's change set, made and never executed, is deleted (it
    /// lingered `AVAILABLE` across later runs); the status names the run's
    /// own change set or none, never an earlier run's.
    #[tokio::test]
    async fn a_failed_run_deletes_the_change_set_it_made_and_names_only_its_own() {
        let t = Test::with(
            crate::fakes::ScriptedCloudFormation::with_stack(&[Some(
                crate::stack_status::StackStatus::UpdateComplete,
            )]),
            |e| e.status.change_set_name = Some("an-earlier-runs".into()),
        )
        .await;
        let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        let state = t.steps.template_upload(state).await.unwrap();
        let state = t.steps.change_set(state).await.unwrap();
        let made = state.change_set_name.clone().unwrap();
        t.cfn.script().change_set = [crate::fakes::ready(1)].into_iter().collect();
        let error = StepError::stalled(StallReason::Refused, "ExecuteChangeSet: AccessDenied");
        t.steps
            .finalize(FinalizeInput {
                state,
                error: caught(&error),
            })
            .await
            .unwrap();
        assert!(
            t.cfn
                .script()
                .calls
                .contains(&format!("DeleteChangeSet {made}")),
            "{:?}",
            t.cfn.script().calls
        );
        assert_eq!(
            t.entry().status.change_set_name.as_deref(),
            Some(made.as_str())
        );

        let t =
            Test::with_entry(|e| e.status.change_set_name = Some("an-earlier-runs".into())).await;
        let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        let error = StepError::stalled(StallReason::InvalidTemplate, "bad");
        t.steps
            .finalize(FinalizeInput {
                state,
                error: caught(&error),
            })
            .await
            .unwrap();
        assert_eq!(
            t.entry().status.change_set_name,
            None,
            "no change set this run"
        );
        assert!(!t.cfn.operations().contains(&"DeleteChangeSet".to_owned()));
    }
}
