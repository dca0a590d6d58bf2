//! A step that failed for a reason worth retrying: the failure recorded in
//! the status while the state machine retries it (`stacksync status` says
//! what is retried, and why), and a run that keeps failing the same way
//! ended with that failure as its cause.
//!
//! The state machine's `Retry` gives each step a few tries with backoff; a
//! step that fails the same way after them ends the run (`RetriesExhausted`,
//! with the step's own error). What `Retry` cannot see is a run that makes
//! progress in between, round after round, and fails the same way each
//! time: [`MAX_SAME_FAILURES`] failures of one step with one cause in one
//! run end it, whatever succeeded in between, instead of looping until the
//! poll budget and being blamed on the wait.

use tracing::warn;

use super::{StepName, Steps};
use crate::clock::{EpochMillis, age, now_millis};
use crate::ports::{Blobs, CloudFormationFactory, SourceFetcher};
use crate::reconcile::run::{RunState, StepError};
use crate::registry::StepRegistry;
use crate::status::{Retrying, StallReason, Status, Timestamp};

/// Failures of one step with one cause in one run that end it: more than
/// the state machine's own retries of a step (7 attempts), so that only a
/// run that goes round and fails the same way again meets it.
pub const MAX_SAME_FAILURES: u32 = 12;

/// The retry record after `step` failed with `cause` at `now`: one more of
/// the same, or the first of a new kind.
pub fn next_retry(
    previous: Option<&Retrying>,
    step: StepName,
    cause: &str,
    now: EpochMillis,
) -> Retrying {
    match previous {
        Some(p) if p.step == step.state() && p.cause == cause => Retrying {
            attempts: p.attempts.saturating_add(1),
            at: Timestamp(now),
            ..p.clone()
        },
        _ => Retrying {
            step: step.state().to_owned(),
            cause: cause.to_owned(),
            attempts: 1,
            since: Timestamp(now),
            at: Timestamp(now),
        },
    }
}

/// The failure that ends a run which failed the same way too often.
pub fn exhausted(retrying: &Retrying, now: EpochMillis) -> StepError {
    StepError::stalled(
        StallReason::RetriesExhausted,
        format!(
            "{} ({} failed {} times in a row in this run, over {}; each retry met the same error)",
            retrying.cause,
            retrying.step,
            retrying.attempts,
            age(now, retrying.since.0)
        ),
    )
}

impl<R, B, F, S> Steps<R, B, F, S>
where
    R: StepRegistry,
    B: Blobs,
    F: CloudFormationFactory,
    S: SourceFetcher,
{
    /// A step's error, after recording a transient one in the status (the
    /// run's own status only: the write holds only while its run holds the
    /// stack), or the run's end if it failed so too often. Any other error
    /// as it was.
    pub(super) async fn retrying(
        &self,
        step: StepName,
        state: &RunState,
        error: StepError,
    ) -> StepError {
        if !error.is_transient() || state.execution.is_empty() {
            return error;
        }
        let entry = match self.registry.get(&state.stack_id).await {
            Ok(Some(entry)) => entry,
            _ => return error,
        };
        let held = entry
            .lease
            .as_ref()
            .is_some_and(|l| l.owner == state.execution);
        if !held {
            return error;
        }
        let now = now_millis();
        let retrying = next_retry(entry.status.retrying.as_ref(), step, error.message(), now);
        if retrying.attempts >= MAX_SAME_FAILURES {
            return exhausted(&retrying, now);
        }
        let status = Status {
            retrying: Some(retrying),
            ..entry.status.clone()
        };
        if let Err(e) = self
            .registry
            .write_status(&state.stack_id, &state.execution, &status)
            .await
        {
            warn!(stack = %state.stack_id, error = %e, "the retried failure could not be recorded");
        }
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_failure_counts_up_and_another_starts_again() {
        let first = next_retry(None, StepName::PollStatus, "X: HTTP 500", 1_000);
        assert_eq!((first.attempts, first.since.0), (1, 1_000));
        let second = next_retry(Some(&first), StepName::PollStatus, "X: HTTP 500", 5_000);
        assert_eq!(
            (second.attempts, second.since.0, second.at.0),
            (2, 1_000, 5_000)
        );
        let other = next_retry(Some(&second), StepName::PollStatus, "Y: throttled", 6_000);
        assert_eq!((other.attempts, other.since.0), (1, 6_000));
        let elsewhere = next_retry(Some(&second), StepName::ChangeSet, "X: HTTP 500", 7_000);
        assert_eq!(elsewhere.attempts, 1);
        let ended = exhausted(
            &Retrying {
                attempts: MAX_SAME_FAILURES,
                ..second
            },
            125_000,
        );
        assert_eq!(ended.name(), "StackSync.Stalled.RetriesExhausted");
        assert!(
            ended.message().starts_with(
                "X: HTTP 500 (PollStatus failed 12 times in a row in this run, over 2m"
            ),
            "{}",
            ended.message()
        );
    }
}
