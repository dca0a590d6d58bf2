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
//! run, each within [`SAME_FAILURE_WINDOW_MS`] of the last, end it,
//! whatever succeeded in between, instead of looping until the poll budget
//! and being blamed on the wait. Failures further apart (a throttle now and
//! then in a long update) start the count again.

use tracing::warn;

use super::{Ports, StepName, Steps};
use crate::clock::{EpochMillis, age, now_millis};
use crate::reconcile::run::{RunState, StepError};
use crate::registry::{Entries as _, Leases as _};
use crate::status::{Retrying, StallReason, Timestamp, transitions};

/// Failures of one step with one cause in one run that end it: more than
/// the state machine's own retries of a step (7 attempts), so that only a
/// run that goes round and fails the same way again meets it.
pub const MAX_SAME_FAILURES: u32 = 12;

/// How close two failures of one kind must come to count as the same
/// failure again: a round of the state machine's retries (about two
/// minutes) plus a poll's wait, with room to spare.
pub const SAME_FAILURE_WINDOW_MS: EpochMillis = 10 * 60 * 1000;

/// The longest cause recorded (the rest is cut, and compared cut).
const MAX_CAUSE_CHARS: usize = 1000;

/// The retry record after `step` of `run` failed with `cause` at `now`:
/// one more of the same, or the first of a new kind (another step, another
/// cause, another run's record, or the last one too long ago).
pub fn next_retry(
    previous: Option<&Retrying>,
    run: &str,
    step: StepName,
    cause: &str,
    now: EpochMillis,
) -> Retrying {
    let cause: String = if cause.chars().count() > MAX_CAUSE_CHARS {
        let cut: String = cause.chars().take(MAX_CAUSE_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        cause.to_owned()
    };
    match previous {
        Some(p)
            if p.run == run
                && p.step == step.state()
                && p.cause == cause
                && now.saturating_sub(p.at.0) <= SAME_FAILURE_WINDOW_MS =>
        {
            Retrying {
                attempts: p.attempts.saturating_add(1),
                at: Timestamp(now),
                ..p.clone()
            }
        }
        _ => Retrying {
            run: run.to_owned(),
            step: step.state().to_owned(),
            cause,
            attempts: 1,
            since: Timestamp(now),
            at: Timestamp(now),
        },
    }
}

/// Whether `retrying` says what happens now: the run that holds the stack
/// (`holder`) recorded it, lately.
pub fn current(retrying: &Retrying, holder: Option<&str>, now: EpochMillis) -> bool {
    holder == Some(retrying.run.as_str())
        && now.saturating_sub(retrying.at.0) <= SAME_FAILURE_WINDOW_MS
}

/// The failure that ends a run which failed the same way too often.
pub fn exhausted(retrying: &Retrying, now: EpochMillis) -> StepError {
    StepError::stalled(
        StallReason::RetriesExhausted,
        format!(
            "{} ({} failed {} times in this run, over {}, each within 10m of the last; each \
             retry met the same error)",
            retrying.cause,
            retrying.step,
            retrying.attempts,
            age(now, retrying.since.0)
        ),
    )
}

impl<P: Ports> Steps<P> {
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
        if !error.is_transient() || state.execution.name.is_empty() {
            return error;
        }
        let entry = match self.registry.get(&state.entry).await {
            Ok(Some(entry)) => entry,
            _ => return error,
        };
        let held = entry
            .lease
            .as_ref()
            .is_some_and(|l| l.owner == state.execution.name);
        if !held {
            return error;
        }
        let now = now_millis();
        let retrying = next_retry(
            entry.status.run.retrying.as_ref(),
            &state.execution.name,
            step,
            error.message(),
            now,
        );
        if retrying.attempts >= MAX_SAME_FAILURES {
            return exhausted(&retrying, now);
        }
        let status = transitions::retrying(&entry.status, retrying);
        if let Err(e) = self
            .registry
            .write_status(&state.entry, &state.execution.name, &status)
            .await
        {
            warn!(stack = %state.entry, error = %e, "the retried failure could not be recorded");
        }
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_failure_counts_up_and_another_starts_again() {
        let next = |p: Option<&Retrying>, run: &str, step, cause: &str, at| {
            next_retry(p, run, step, cause, at)
        };
        let first = next(None, "r1", StepName::PollStatus, "X: HTTP 500", 1_000);
        assert_eq!((first.attempts, first.since.0), (1, 1_000));
        let second = next(
            Some(&first),
            "r1",
            StepName::PollStatus,
            "X: HTTP 500",
            5_000,
        );
        assert_eq!(
            (second.attempts, second.since.0, second.at.0),
            (2, 1_000, 5_000)
        );
        let other = next(
            Some(&second),
            "r1",
            StepName::PollStatus,
            "Y: throttled",
            6_000,
        );
        assert_eq!((other.attempts, other.since.0), (1, 6_000));
        let elsewhere = next(
            Some(&second),
            "r1",
            StepName::ChangeSet,
            "X: HTTP 500",
            7_000,
        );
        assert_eq!(elsewhere.attempts, 1);
        // Another run's record (a run stopped, its record left): not ours.
        let later_run = next(
            Some(&second),
            "r2",
            StepName::PollStatus,
            "X: HTTP 500",
            8_000,
        );
        assert_eq!((later_run.attempts, later_run.run.as_str()), (1, "r2"));
        // Long after the last one: a throttle now and then, not a loop.
        let much_later = 5_000 + SAME_FAILURE_WINDOW_MS + 1;
        let apart = next(
            Some(&second),
            "r1",
            StepName::PollStatus,
            "X: HTTP 500",
            much_later,
        );
        assert_eq!(apart.attempts, 1);
        assert!(current(&second, Some("r1"), 6_000));
        assert!(!current(&second, Some("r2"), 6_000), "another run holds it");
        assert!(!current(&second, None, 6_000), "nobody holds it");
        assert!(!current(&second, Some("r1"), much_later), "old news");
        let long = "x".repeat(5_000);
        let cut = next(None, "r1", StepName::PollStatus, &long, 1);
        assert_eq!(cut.cause.chars().count(), 1000);
        let ended = exhausted(
            &Retrying {
                attempts: MAX_SAME_FAILURES,
                ..second
            },
            125_000,
        );
        assert_eq!(ended.name(), "StackSync.Stalled.RetriesExhausted");
        assert!(
            ended
                .message()
                .starts_with("X: HTTP 500 (PollStatus failed 12 times in this run, over 2m"),
            "{}",
            ended.message()
        );
    }
}
