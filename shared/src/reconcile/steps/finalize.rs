//! `finalize` (state `RecordFailure`): records a failure the state machine
//! caught, deletes the change set the run made and never executed, and
//! releases the lease. The last applied revision and hash are kept; a retry
//! is due after `retryInterval`.

use tracing::{info, warn};

use super::{Ports, StepResult, Steps, due, short};
use crate::approvers::Rejection;
use crate::clock::now_millis;
use crate::notice::{NoticeApproval, NoticeKind};
use crate::ports::{ChangeSets, Stacks};
use crate::reconcile::decide::after_failure;
use crate::reconcile::run::{CaughtError, FinalizeInput, Next, RunState, StepError};
use crate::registry::Entries as _;
use crate::registry::StackEntry;
use crate::stack_status::ExecutionStatus;
use crate::status::{ApprovalRecord, Decision, Phase, StallReason, Status, Timestamp, transitions};

/// A failure while a change set waited for approval, in its own words: a
/// person rejected it (`StackSync.Stalled.Rejected`, the reason in the
/// cause), or nobody answered within `approvalTimeout` (`States.Timeout` of
/// the wait); with the approval record it leaves. Any other failure as it
/// was caught.
fn approval_failure(
    state: &RunState,
    error: &CaughtError,
    message: String,
    left: &[String],
) -> (StallReason, String, Option<ApprovalRecord>) {
    let reason = error.reason();
    let Some(request) = &state.approval.request else {
        return (reason, message, None);
    };
    let record = |decision, reason: Option<String>| ApprovalRecord {
        change_set: request.change_set.clone(),
        decision,
        by: None,
        at: Timestamp(now_millis()),
        reason,
        run: state.execution.name.clone(),
    };
    match (reason, error.error.as_str()) {
        (StallReason::Rejected, _) => {
            let Rejection { by, reason: why } = Rejection::from_cause(&message);
            let text = format!(
                "change set {} rejected{}: {why}",
                request.change_set,
                by.as_deref()
                    .map(|b| format!(" by {b}"))
                    .unwrap_or_default()
            );
            let decided = ApprovalRecord {
                by,
                ..record(Decision::Rejected, Some(why))
            };
            (StallReason::Rejected, text, Some(decided))
        }
        (_, "States.Timeout") => {
            let waited = crate::duration::Duration::from_secs(request.timeout_seconds);
            (
                StallReason::ApprovalTimedOut,
                format!(
                    "approval timed out: nobody approved change set {} within {waited}; {}",
                    request.change_set,
                    if left.contains(&request.change_set) {
                        "it could not be deleted (it is left, never executed)"
                    } else {
                        "it was deleted"
                    }
                ),
                Some(record(Decision::TimedOut, None)),
            )
        }
        _ => (reason, message, None),
    }
}

/// How the run ended already, if a step wrote its end and then failed (its
/// answer lost: the Task failed after the write): as its status says, only
/// while nobody holds the stack (another run's status says nothing of how
/// this one ended); or, its entry gone while it deleted it (only a run
/// removes an entry, and only while it holds it), done.
fn ended_already(
    state: &RunState,
    entry: Option<&StackEntry>,
    message: &str,
) -> Option<(Next, String)> {
    match entry {
        Some(e)
            if e.status.run.execution.as_deref() == Some(state.execution.name.as_str())
                && e.lease.is_none() =>
        {
            let next = if e.status.phase == Phase::Failed {
                Next::Failed
            } else {
                Next::Done
            };
            Some((
                next,
                format!(
                    "ended {} by its own last write ({}); the step that made it then failed: \
                     {message}",
                    e.status.phase,
                    e.status.message.as_deref().unwrap_or("no message")
                ),
            ))
        }
        None if matches!(state.next, Next::Delete | Next::WaitDelete) => Some((
            Next::Done,
            format!(
                "entry removed from the registry by this run (the step that removed it then \
                 failed: {message})"
            ),
        )),
        _ => None,
    }
}

/// How long each best-effort call of the finalizer may take (its Task has
/// 60 s, and the failure must be recorded whatever CloudFormation does).
const BEST_EFFORT: std::time::Duration = std::time::Duration::from_secs(8);

impl<P: Ports> Steps<P> {
    pub async fn finalize(&self, input: FinalizeInput) -> StepResult {
        let state = input.state;
        let message = input.error.message();
        let entry = self.registry.get(&state.entry).await?;
        if let Some((next, outcome)) = ended_already(&state, entry.as_ref(), &message) {
            let mut state = state;
            state.next = next;
            state.execution.outcome = Some(outcome);
            return Ok(state);
        }
        let spec = entry.as_ref().map(|e| e.spec.clone());
        let Some(entry) = entry.filter(|e| {
            e.lease
                .as_ref()
                .is_some_and(|l| l.owner == state.execution.name)
        }) else {
            // Gone, never leased, or lost: the status is someone else's to write.
            let mut state = state;
            self.give_back_slot(&mut state, spec.as_ref()).await;
            state.next = Next::Failed;
            state.execution.outcome = Some(message);
            return Ok(state);
        };
        let left = self.clean_up(&state, &entry).await;
        let (reason, message, decided) = approval_failure(&state, &input.error, message, &left);
        let mut status = self.failed_status(&state, &entry, reason, &message);
        // The stack as it is now, not as the last success left it (a failed
        // create that made it, an out-of-band delete), once the run got as
        // far as CloudFormation: kept as it was (with its age) if the run
        // failed before, or CloudFormation cannot say.
        let reached = state.desired_hash().is_some();
        if reached && let Some(now) = self.stack_status_now(&entry).await {
            status = transitions::described(&status, now, Timestamp(now_millis()));
        }
        let rejected = decided
            .as_ref()
            .filter(|d| d.decision == Decision::Rejected)
            .map(|d| NoticeApproval {
                by: d.by.clone(),
                reason: d.reason.clone(),
                ..NoticeApproval::default()
            });
        if let Some(record) = decided {
            status = transitions::with_approval(&status, record);
        }
        let outcome = status.message.clone().unwrap_or_default();
        // The rejection is Step Functions' fact already (the task failed
        // with it): told before the write that records the run's end.
        if let Some(approval) = rejected {
            self.notify(
                NoticeKind::Rejected,
                &state,
                &entry,
                &status,
                Some(approval),
            )
            .await;
        }
        let mut ended = self.finish(state, &entry, status, &outcome).await?;
        ended.next = Next::Failed;
        Ok(ended)
    }

    /// The `Failed` status a run ends with: the failure counted (at the
    /// run's spec version and revision), and the next try due after a
    /// backoff, or never (a failed create that stays, or `maxAttempts`
    /// reached); the message says which.
    fn failed_status(
        &self,
        state: &RunState,
        entry: &StackEntry,
        reason: StallReason,
        message: &str,
    ) -> Status {
        let now = now_millis();
        // A failure in the first step comes with the state it was given,
        // before the spec version was read: the entry's is the one tried.
        let spec_version = if state.execution.spec_version > 0 {
            state.execution.spec_version
        } else {
            entry.spec_version
        };
        let revision = state.revision().map(str::to_owned).or(entry
            .status
            .run
            .last_attempted_revision
            .clone());
        let counted = after_failure(
            entry.status.run.failures.as_ref(),
            (spec_version, revision.as_deref()),
            reason,
            (entry.spec.retry_interval, entry.spec.max_attempts),
        );
        let at = revision.as_deref().map(short).unwrap_or("its revision");
        let message = match counted.retry_in {
            Some(wait) if reason.is_lasting() => format!(
                "{message} (attempt {} of {} at {at}; next try in {wait})",
                counted.failures.count, entry.spec.max_attempts
            ),
            Some(wait) => format!("{message} (next try in {wait})"),
            None if reason == StallReason::FailedCreateStays => message.to_owned(),
            None => format!(
                "{message} (gave up after {} attempts at {at}: push a fix, change the spec, \
                 or run `stacksync reconcile --force {}`)",
                counted.failures.count, entry.name
            ),
        };
        transitions::failed(
            &entry.status,
            transitions::Failure {
                spec_version,
                revision,
                reason,
                message,
                change_set: state.change_set_name().map(str::to_owned),
                failures: counted.failures,
                next_reconcile_at: counted
                    .retry_in
                    .map(|wait| Timestamp(due(now, wait.as_secs()))),
                // A change found outside stacksync that the run could not
                // put back is still news (`undone: false`).
                out_of_band: state.out_of_band().cloned(),
                now,
            },
        )
    }

    /// Deletes the run's change set if it was made and never executed (an
    /// executed one is CloudFormation's to remove). Best effort: the
    /// failure is recorded whatever happens here, and a lingering change
    /// set is logged, not raised. Returns those it could not delete.
    async fn clean_up(&self, state: &RunState, entry: &StackEntry) -> Vec<String> {
        let stack = entry.spec.effective_stack_name();
        // The one the state names, and the one this run makes (its name is
        // the run's own): a step that made it and then failed hands on the
        // state it was given, which may name none, or an earlier one.
        let made = state.desired_hash().map(|desired| {
            crate::naming::change_set_name(
                stack,
                state.execution.spec_version,
                desired,
                &state.execution.name,
            )
        });
        let mut names: Vec<&str> = state
            .change_set_name()
            .into_iter()
            .chain(made.as_deref())
            .collect();
        names.dedup();
        let mut left = Vec::new();
        for name in names {
            let deleted = tokio::time::timeout(BEST_EFFORT, self.delete_unexecuted(entry, name))
                .await
                .unwrap_or_else(|_| {
                    Err(StepError::transient(format!(
                        "no answer within {}s",
                        BEST_EFFORT.as_secs()
                    )))
                });
            match deleted {
                Ok(true) => {
                    info!(stack = %state.entry, change_set = %name, "the failed run's change set deleted")
                }
                Ok(false) => {}
                Err(e) => {
                    warn!(stack = %state.entry, change_set = %name, error = %e, "the failed run's change set could not be deleted");
                    left.push(name.to_owned());
                }
            }
        }
        left
    }

    /// The stack's status as CloudFormation reports it now (`Some(None)`:
    /// no such stack), or `None` if it could not be read.
    async fn stack_status_now(&self, entry: &StackEntry) -> Option<Option<String>> {
        let cfn = self.port(&entry.spec).await.ok()?;
        let described = tokio::time::timeout(
            BEST_EFFORT,
            cfn.describe_stack(entry.spec.effective_stack_name()),
        )
        .await
        .ok()?;
        match described {
            Ok(stack) => Some(
                stack
                    .filter(|s| !s.status.not_created())
                    .map(|s| s.status.to_string()),
            ),
            Err(e) => {
                warn!(stack = %entry.name, error = %e, "the failed stack's status could not be read");
                None
            }
        }
    }

    /// Deletes change set `name` if it is there and was never executed.
    async fn delete_unexecuted(&self, entry: &StackEntry, name: &str) -> Result<bool, StepError> {
        let stack = entry.spec.effective_stack_name();
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
        Ok(unexecuted)
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

    /// The state machine's catch: `error` handed to finalize with `state`.
    async fn catch(t: &Test, state: RunState, error: &StepError) -> RunState {
        t.steps
            .finalize(FinalizeInput {
                state,
                error: caught(error),
            })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_caught_failure_is_recorded_with_its_reason_and_the_lease_released() {
        let t = Test::new().await;
        let mut entry = t.entry();
        entry.status.applied.last_applied_revision = Some("older".into());
        entry.status.applied.applied_hash = Some("h".into());
        t.steps.registry.inner.insert(entry);
        let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        let error = StepError::stalled(
            StallReason::InvalidTemplate,
            "template t.yaml is not valid YAML",
        );
        let state = catch(&t, state, &error).await;
        assert_eq!(state.next, Next::Failed, "the execution fails");
        let entry = t.entry();
        assert_eq!(entry.status.phase, Phase::Failed);
        assert_eq!(
            entry.status.stall_reason,
            Some(StallReason::InvalidTemplate)
        );
        assert_eq!(
            entry.status.message.as_deref(),
            Some(
                "template t.yaml is not valid YAML (attempt 1 of 5 at 0123456789ab; next try in 2m)"
            )
        );
        assert_eq!(
            entry.status.applied.last_applied_revision.as_deref(),
            Some("older"),
            "kept"
        );
        assert_eq!(
            entry.status.applied.applied_hash.as_deref(),
            Some("h"),
            "kept"
        );
        assert!(entry.lease.is_none());
        let retry = entry.status.times.next_reconcile_at.unwrap().0
            - entry.status.times.last_reconcile_at.unwrap().0;
        assert_eq!(retry, entry.spec.retry_interval.as_secs() as i64 * 1000);
    }

    /// One failed run at the head: fetch, then a caught `StackFailed`.
    async fn fail_once(t: &Test, execution: &str, forced: bool) -> RunState {
        let mut input = t.input(execution);
        input.trigger.force = forced;
        let state = t.steps.artifact_fetch(input).await.unwrap();
        if state.next == Next::Done {
            return state;
        }
        let error = StepError::stalled(StallReason::StackFailed, "the stack rolled back");
        catch(t, state, &error).await
    }

    fn wait_ms(entry: &StackEntry) -> Option<i64> {
        let status = &entry.status;
        Some(status.times.next_reconcile_at?.0 - status.times.last_reconcile_at?.0)
    }

    #[tokio::test]
    async fn repeated_failures_at_one_revision_back_off_then_give_up_until_forced_or_pushed() {
        let t = Test::new().await;
        let mut waits = Vec::new();
        for run in 1..=5 {
            fail_once(&t, &format!("run-{run}"), false).await;
            waits.push(wait_ms(&t.entry()).map(|ms| ms / 1000));
        }
        assert_eq!(waits, [Some(120), Some(240), Some(480), Some(960), None]);
        let entry = t.entry();
        let message = entry.status.message.clone().unwrap();
        assert!(
            message.contains("gave up after 5 attempts at 0123456789ab")
                && message.contains("stacksync reconcile --force orders"),
            "{message}"
        );
        assert!(entry.status.gave_up_at(entry.spec_version, Some(HEAD)));

        // Started again anyway (a mark, `reconcile` without --force): it
        // ends at once, leaving the status as it was and the queue.
        let state = fail_once(&t, "run-6", false).await;
        assert_eq!(state.next, Next::Done);
        assert!(state.execution.outcome.unwrap().starts_with("gave up"));
        let after = t.entry();
        assert_eq!(after.status.message.as_deref(), Some(message.as_str()));
        assert_eq!(after.status.times.next_reconcile_at, None);
        assert!(after.lease.is_none());
        assert_eq!(after.status.phase, Phase::Failed, "never Reconciling");

        // Forced: tried again, and counted on.
        fail_once(&t, "run-7", true).await;
        assert_eq!(t.entry().status.run.failures.unwrap().count, 6);

        // A push: a new revision, counted from 1.
        t.steps
            .sources
            .commit(URL, "main", "fedcba", &[("t.yaml", TEMPLATE)]);
        fail_once(&t, "run-8", false).await;
        let entry = t.entry();
        let failures = entry.status.run.failures.unwrap();
        assert_eq!((failures.count, failures.gave_up), (1, false));
        assert_eq!(wait_ms(&t.entry()), Some(120_000));
    }

    #[tokio::test]
    async fn failures_of_the_moment_are_retried_without_giving_up() {
        let t = Test::with_entry(|e| e.spec.max_attempts = 2).await;
        for run in 1..=4 {
            let state = t
                .steps
                .artifact_fetch(t.input(&format!("r{run}")))
                .await
                .unwrap();
            let error = StepError::transient("Throttling: Rate exceeded");
            catch(&t, state, &error).await;
        }
        let entry = t.entry();
        assert_eq!(wait_ms(&entry), Some(16 * 60_000));
        assert!(!entry.status.run.failures.unwrap().gave_up);
        assert!(entry.status.message.unwrap().ends_with("(next try in 16m)"));
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
        assert_eq!(state.next, Next::Failed);
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
            |e| e.status.run.change_set_name = Some("an-earlier-runs".into()),
        )
        .await;
        let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        let state = t.steps.template_upload(state).await.unwrap();
        let state = t.steps.change_set(state).await.unwrap();
        let made = state.change_set_name().map(str::to_owned).unwrap();
        t.cfn.script().change_set = [crate::fakes::ready()].into_iter().collect();
        let error = StepError::stalled(StallReason::Refused, "ExecuteChangeSet: AccessDenied");
        catch(&t, state, &error).await;
        assert!(
            t.cfn
                .script()
                .calls
                .contains(&format!("DeleteChangeSet {made}")),
            "{:?}",
            t.cfn.script().calls
        );
        assert_eq!(
            t.entry().status.run.change_set_name.as_deref(),
            Some(made.as_str())
        );

        let t = Test::with_entry(|e| e.status.run.change_set_name = Some("an-earlier-runs".into()))
            .await;
        let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        let error = StepError::stalled(StallReason::InvalidTemplate, "bad");
        catch(&t, state, &error).await;
        assert_eq!(
            t.entry().status.run.change_set_name,
            None,
            "no change set this run"
        );
        assert!(!t.cfn.operations().contains(&"DeleteChangeSet".to_owned()));
    }
}
