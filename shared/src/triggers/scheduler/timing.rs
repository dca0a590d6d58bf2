//! Where a scheduler run's time went.

use std::time::Duration;

/// Where one run's time went (wall clock). Every phase but `own_work` is
/// waiting on a call (DynamoDB, Git, CloudFormation, Step Functions) with
/// the little work around it; `own_work` is the rest: judging every stack
/// against its listing, choosing what to start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timing {
    /// Reading the due entries and the source records (DynamoDB).
    pub queue: Duration,
    /// Listing the sources' heads (Git) and reading moved ones' followers.
    pub sources: Duration,
    /// Reading the watch index (DynamoDB).
    pub watch_read: Duration,
    /// Listing the stacks of each account and region (CloudFormation).
    pub listing: Duration,
    /// Starting executions and the writes around them, postponing, and
    /// recording source heads.
    pub starting: Duration,
    /// The run, from first call to report.
    pub total: Duration,
}

impl Timing {
    /// The time not spent waiting on a call.
    pub fn own_work(&self) -> Duration {
        self.total.saturating_sub(
            self.queue + self.sources + self.watch_read + self.listing + self.starting,
        )
    }
}
