//! Leases and statuses: who drives a stack, until when, and what the run
//! that drives it records. One room for the lease: its length, whether it is
//! live, and every write that takes, keeps or gives it back.
//!
//! Only the lease holder may write a stack's status, so a run that lost its
//! lease (it took too long, or crashed and was replaced) can never overwrite
//! a newer run's status.

use std::future::Future;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::expr::{self, Write};
use super::item::{n, s, status_attributes};
use super::schema::stack_key;
use super::{Registry, RegistryError, Result};
use crate::clock::EpochMillis;
use crate::spec::StackSpec;
use crate::status::{Status, Timestamp};

/// The longest a lease lasts, for the longest `pollInterval` (5m): see
/// [`lease_ttl`]. The scheduler restarts a started run no sooner.
pub const LEASE_TTL: Duration = Duration::from_secs(LEASE_BASE_SECS + 300);

/// A step's attempt (the functions' 300 s timeout), the longest retry
/// backoff (60 s) and a margin (60 s).
const LEASE_BASE_SECS: u64 = 300 + 60 + 60;

/// How long a run's lease lasts: every step renews it at its start, so it
/// must outlast one step, a retry's backoff and the longest wait between two
/// steps (`pollInterval` or a minute, whichever is longer): 8 minutes for the
/// default `pollInterval`. A run that stopped (crashed, killed) frees the
/// stack that long after its last step; `stacksync unlock` at once.
pub fn lease_ttl(spec: &StackSpec) -> Duration {
    let longest_wait = spec.poll_interval.as_secs().max(60);
    Duration::from_secs(LEASE_BASE_SECS + longest_wait)
}

/// Who drives a stack right now, since and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// Normally a Step Functions execution name.
    pub owner: String,
    pub expires_at: Timestamp,
    /// When its owner took it (`None`: taken before this was recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<Timestamp>,
    /// Its owner parked until CloudFormation's event about the stack (its
    /// task token kept where only the events function reads it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parked: Option<Parked>,
}

/// A run parked until CloudFormation's event about its stack ends its
/// wait: which execution, since when, on which stack and operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Parked {
    /// The execution that parked (the lease owner when it did).
    pub execution: String,
    /// When it parked: an event from before is an older operation's.
    pub since: Timestamp,
    /// What it waits for: `execution`, `stack` or `rollback`.
    pub on: String,
    /// The stack's id (ARN), when the run knows it: an event about another
    /// stack of the same name (deleted, made again) is not this one's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_id: Option<String>,
}

impl Lease {
    /// The run parked on this lease, if its owner is the one that parked.
    pub fn parked_run(&self) -> Option<&Parked> {
        self.parked.as_ref().filter(|p| p.execution == self.owner)
    }
}

impl Lease {
    /// A lease taken at `now` for `ttl` by `owner`.
    pub fn new(owner: &str, now: EpochMillis, ttl: Duration) -> Lease {
        Lease {
            owner: owner.to_owned(),
            expires_at: Timestamp(lease_until(now, ttl)),
            taken_at: Some(Timestamp(now)),
            parked: None,
        }
    }

    /// Still held at `now` (not run out).
    pub fn is_live(&self, now: EpochMillis) -> bool {
        self.expires_at.0 > now
    }
}

/// When a lease taken at `now` for `ttl` runs out.
pub fn lease_until(now: EpochMillis, ttl: Duration) -> EpochMillis {
    now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}

/// Leases, and the statuses only their holders may write.
pub trait Leases: Send + Sync {
    /// Takes the lease on a stack for `ttl`: when nobody holds it, when it
    /// has run out (a crashed run), or when `owner` already holds it (a
    /// retried step). Otherwise [`RegistryError::LeaseHeld`] names the holder.
    fn acquire_lease(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
        now: EpochMillis,
    ) -> impl Future<Output = Result<Lease>> + Send;
    /// Extends a lease its owner still holds ([`RegistryError::LeaseNotHeld`] otherwise).
    fn renew_lease(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
        now: EpochMillis,
    ) -> impl Future<Output = Result<Lease>> + Send;
    /// Extends a lease its owner still holds, as [`Leases::renew_lease`],
    /// and records its run parked until the stack's event.
    fn park(
        &self,
        name: &str,
        parked: &Parked,
        ttl: Duration,
        now: EpochMillis,
    ) -> impl Future<Output = Result<Lease>> + Send;
    /// Gives a lease back. Releasing a lease nobody holds is fine (a retried
    /// step); one someone else took over is [`RegistryError::LeaseNotHeld`].
    fn release_lease(&self, name: &str, owner: &str) -> impl Future<Output = Result<()>> + Send;
    /// Records a stack's status while the run goes on (lease holder only);
    /// `status.times.next_reconcile_at` also moves the entry in the scheduler's queue.
    fn write_status(
        &self,
        name: &str,
        owner: &str,
        status: &Status,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Records a run's final status and gives the lease back, in one write.
    /// Writing it again once the lease is given back is fine when the entry
    /// holds exactly that status (a call retried after its answer was lost).
    fn write_status_and_release(
        &self,
        name: &str,
        owner: &str,
        status: &Status,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Drops an entry whose deletion was requested, once its stack is dealt
    /// with (lease holder only). An entry that is gone already is fine (a
    /// retried step, or a call retried after its answer was lost).
    fn remove(&self, name: &str, owner: &str) -> impl Future<Output = Result<()>> + Send;
}

impl Registry {
    async fn put_status(
        &self,
        name: &str,
        owner: &str,
        status: &Status,
        release: bool,
    ) -> Result<()> {
        let status = status.clone().bounded();
        let update = match (status.times.next_reconcile_at.is_some(), release) {
            (true, true) => expr::FINAL_STATUS_DUE,
            (false, true) => expr::FINAL_STATUS,
            (true, false) => expr::STATUS_DUE,
            (false, false) => expr::STATUS,
        };
        let (record, watch) = status_attributes(&status);
        let mut values = vec![(":owner", s(owner)), (":status", record), (":watch", watch)];
        if let Some(at) = status.times.next_reconcile_at {
            values.push((":due", n(at.0)));
        }
        let written = self
            .write_if(
                stack_key(name),
                Write::Update(update),
                expr::HOLDS_LEASE,
                values,
            )
            .await?;
        if written {
            return Ok(());
        }
        // A final write retried after its answer was lost finds its own
        // work done: the lease given back, the status as it wrote it.
        if release
            && let Ok(Some(entry)) = super::specs::Entries::get(self, name).await
            && written_already(&entry, &status)
        {
            return Ok(());
        }
        Err(self.lease_not_held(name, owner).await)
    }

    /// Why a write conditioned on holding the lease failed.
    async fn lease_not_held(&self, name: &str, owner: &str) -> RegistryError {
        match super::specs::Entries::get(self, name).await {
            Ok(Some(entry)) => RegistryError::LeaseNotHeld {
                name: name.to_owned(),
                owner: owner.to_owned(),
                holder: entry.lease.map(|l| l.owner),
            },
            Ok(None) => RegistryError::NotFound {
                name: name.to_owned(),
            },
            Err(e) => e,
        }
    }
}

/// Whether `entry` is as a final status write of `status` left it (`status`
/// already bounded): no lease, and that status.
pub(super) fn written_already(entry: &super::StackEntry, status: &Status) -> bool {
    entry.lease.is_none() && entry.status == *status
}

impl Leases for Registry {
    async fn acquire_lease(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
        now: EpochMillis,
    ) -> Result<Lease> {
        let lease = Lease::new(owner, now, ttl);
        let taken = self
            .write_if(
                stack_key(name),
                Write::Update(expr::TAKE_LEASE),
                expr::LEASE_FREE_EXPIRED_OR_MINE,
                vec![
                    (":owner", s(owner)),
                    (":expires", n(lease.expires_at.0)),
                    (":now", n(now)),
                ],
            )
            .await?;
        if taken {
            return Ok(lease);
        }
        match self.get_existing(name).await?.lease {
            Some(lease) => Err(RegistryError::LeaseHeld {
                name: name.to_owned(),
                owner: lease.owner,
                expires_at: lease.expires_at,
            }),
            // Released between our write and our read: the caller may try again.
            None => Err(RegistryError::Conflict {
                name: name.to_owned(),
                detail: "the lease changed hands while it was being taken".into(),
            }),
        }
    }

    async fn renew_lease(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
        now: EpochMillis,
    ) -> Result<Lease> {
        let lease = Lease::new(owner, now, ttl);
        let renewed = self
            .write_if(
                stack_key(name),
                Write::Update(expr::EXTEND_LEASE),
                expr::HOLDS_LEASE,
                vec![(":owner", s(owner)), (":expires", n(lease.expires_at.0))],
            )
            .await?;
        if renewed {
            Ok(lease)
        } else {
            Err(self.lease_not_held(name, owner).await)
        }
    }

    async fn park(
        &self,
        name: &str,
        parked: &Parked,
        ttl: Duration,
        now: EpochMillis,
    ) -> Result<Lease> {
        let owner = &parked.execution;
        let lease = Lease {
            parked: Some(parked.clone()),
            ..Lease::new(owner, now, ttl)
        };
        let renewed = self
            .write_if(
                stack_key(name),
                Write::Update(expr::PARK),
                expr::HOLDS_LEASE,
                vec![
                    (":owner", s(owner)),
                    (":expires", n(lease.expires_at.0)),
                    (":parked", super::item::to_attr_of(parked)),
                ],
            )
            .await?;
        if renewed {
            Ok(lease)
        } else {
            Err(self.lease_not_held(name, owner).await)
        }
    }

    async fn release_lease(&self, name: &str, owner: &str) -> Result<()> {
        let released = self
            .write_if(
                stack_key(name),
                Write::Update(expr::DROP_LEASE),
                expr::HOLDS_LEASE,
                vec![(":owner", s(owner))],
            )
            .await?;
        if released {
            return Ok(());
        }
        match self.lease_not_held(name, owner).await {
            RegistryError::LeaseNotHeld { holder: None, .. } | RegistryError::NotFound { .. } => {
                Ok(())
            }
            other => Err(other),
        }
    }

    async fn write_status(&self, name: &str, owner: &str, status: &Status) -> Result<()> {
        self.put_status(name, owner, status, false).await
    }

    async fn write_status_and_release(
        &self,
        name: &str,
        owner: &str,
        status: &Status,
    ) -> Result<()> {
        self.put_status(name, owner, status, true).await
    }

    async fn remove(&self, name: &str, owner: &str) -> Result<()> {
        // Gone: removed by this very call, retried after its answer was lost.
        let Some(entry) = super::specs::Entries::get(self, name).await? else {
            return Ok(());
        };
        // Its claim goes with it (the spec cannot change while it is
        // being deleted: apply refuses such an entry).
        if self.remove_claimed(name, owner, &entry.spec).await? {
            return Ok(());
        }
        let Some(entry) = super::specs::Entries::get(self, name).await? else {
            return Ok(());
        };
        if entry.deletion_requested_at.is_none() {
            Err(RegistryError::Conflict {
                name: name.to_owned(),
                detail: "its deletion was not requested".into(),
            })
        } else {
            Err(self.lease_not_held(name, owner).await)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_live_until_it_runs_out() {
        let lease = Lease::new("run", 1_000, Duration::from_secs(60));
        assert_eq!(lease.expires_at, Timestamp(61_000));
        assert!(lease.is_live(60_999));
        assert!(!lease.is_live(61_000));
        assert_eq!(lease_until(i64::MAX - 1, LEASE_TTL), i64::MAX);
    }

    #[test]
    fn a_lease_outlasts_a_step_a_backoff_and_the_longest_wait() {
        let mut spec = crate::spec::fixtures::spec("a");
        assert_eq!(
            lease_ttl(&spec),
            Duration::from_secs(8 * 60),
            "default pollInterval"
        );
        spec.poll_interval = crate::Duration::from_mins(5);
        assert_eq!(lease_ttl(&spec), LEASE_TTL, "the longest pollInterval");
    }
}
