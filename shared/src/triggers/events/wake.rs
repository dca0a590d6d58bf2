//! Waking runs parked until their stack's CloudFormation event
//! (`reconcile::steps::park`): the event must be about the stack the run
//! waits on, settled (no operation in progress), and not older than the
//! park; the run's kept token is then answered with the state it parked
//! with, and the run polls. Whatever the event says, the run decides from
//! what it then sees: a wrong wake costs one poll, never a wrong step.

use std::future::Future;
use std::pin::Pin;

use super::StackStatusChange;
use crate::clock::EpochMillis;
use crate::naming::wait_token_key;
use crate::ports::{Blobs, PortError, PortResult, Wakes};
use crate::ports::{MAX_PARKED_TOKEN_BYTES, ParkedToken};
use crate::registry::Parked;

/// How much earlier than the park an event may be stamped and still wake
/// it: EventBridge stamps events to the second.
const CLOCK_SLACK_MS: EpochMillis = 1_000;

/// Whether `change`, stamped `event_time`, ends the wait of `parked`; else
/// why not.
pub fn wakes(
    parked: &Parked,
    change: &StackStatusChange,
    event_time: Option<EpochMillis>,
) -> Result<(), &'static str> {
    if change.in_progress() {
        return Err("an operation is still in progress");
    }
    if parked
        .stack_id
        .as_deref()
        .is_some_and(|id| id != change.stack_id)
    {
        return Err("another stack of that name");
    }
    if event_time.is_some_and(|t| t < parked.since.0 - CLOCK_SLACK_MS) {
        return Err("older than the run's wait");
    }
    Ok(())
}

/// Answers a parked run's kept token (an object, for the events handler).
pub trait WakeParked: Send + Sync + std::fmt::Debug {
    /// Answers the token `execution` keeps for `entry`; `Ok(false)`: none
    /// kept, or no longer awaited.
    fn wake<'a>(
        &'a self,
        entry: &'a str,
        execution: &'a str,
    ) -> Pin<Box<dyn Future<Output = PortResult<bool>> + Send + 'a>>;
}

/// The kept tokens in `blobs`, answered through `wakes`.
#[derive(Debug)]
pub struct TokenWaker<B> {
    pub blobs: B,
    pub wakes: Wakes,
}

impl<B: Blobs + std::fmt::Debug> WakeParked for TokenWaker<B> {
    fn wake<'a>(
        &'a self,
        entry: &'a str,
        execution: &'a str,
    ) -> Pin<Box<dyn Future<Output = PortResult<bool>> + Send + 'a>> {
        Box::pin(async move {
            let key = wait_token_key(entry, execution);
            let bytes = match self.blobs.get(&key, MAX_PARKED_TOKEN_BYTES).await {
                Ok(bytes) => bytes,
                Err(PortError::NotFound(_)) => return Ok(false),
                Err(e) => return Err(e),
            };
            let kept: ParkedToken = serde_json::from_slice(&bytes)
                .map_err(|e| PortError::Refused(format!("{key}: not a parked run's token: {e}")))?;
            self.wakes.wake(&kept.token, &kept.state).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Timestamp;

    const SINCE: EpochMillis = 1_800_000_000_000;

    fn parked(stack_id: Option<&str>) -> Parked {
        Parked {
            execution: "run-1".into(),
            since: Timestamp(SINCE),
            on: "execution".into(),
            stack_id: stack_id.map(str::to_owned),
        }
    }

    fn change(status: &str, id: &str) -> StackStatusChange {
        StackStatusChange {
            stack_id: id.into(),
            stack_name: "orders".into(),
            status: status.into(),
            status_reason: None,
            client_request_token: None,
        }
    }

    #[test]
    fn a_settled_stack_wakes_the_run_that_waits_on_it() {
        let p = parked(Some("arn:1"));
        assert_eq!(
            wakes(&p, &change("UPDATE_COMPLETE", "arn:1"), Some(SINCE + 5)),
            Ok(())
        );
        assert_eq!(
            wakes(&p, &change("UPDATE_ROLLBACK_FAILED", "arn:1"), None),
            Ok(())
        );
        // Stamped to the second: an event of the same second still counts.
        assert_eq!(
            wakes(&p, &change("CREATE_COMPLETE", "arn:1"), Some(SINCE - 900)),
            Ok(())
        );
        // A run that does not know the stack's id yet takes the name's.
        assert_eq!(
            wakes(
                &parked(None),
                &change("DELETE_COMPLETE", "arn:9"),
                Some(SINCE)
            ),
            Ok(())
        );
    }

    #[test]
    fn progress_another_stack_and_an_older_operation_wake_nothing() {
        let p = parked(Some("arn:1"));
        assert!(wakes(&p, &change("UPDATE_IN_PROGRESS", "arn:1"), Some(SINCE + 5)).is_err());
        assert!(
            wakes(
                &p,
                &change("UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "arn:1"),
                Some(SINCE + 5)
            )
            .is_err()
        );
        assert!(wakes(&p, &change("UPDATE_COMPLETE", "arn:2"), Some(SINCE + 5)).is_err());
        // An old UPDATE_COMPLETE delivered late, during a later update.
        assert_eq!(
            wakes(
                &p,
                &change("UPDATE_COMPLETE", "arn:1"),
                Some(SINCE - 60_000)
            ),
            Err("older than the run's wait")
        );
    }
}
