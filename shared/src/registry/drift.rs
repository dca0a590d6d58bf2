//! The drift record's writes outside runs (the scheduler's detections and
//! their findings): `status.findings.drift` and its index copy `watch.drift`, in one
//! conditional write — only while no run holds the stack (a run carries the
//! record it read, so nothing written meanwhile could be lost), and only if
//! the record is still the one read (`rev`).

use std::future::Future;

use super::expr::Write;
use super::item::{n, to_attr_of};
use super::schema::stack_key;
use super::{Registry, Result};
use crate::clock::EpochMillis;
use crate::drift::DriftRecord;

/// Record and index copy, set together.
pub const SET_DRIFT: &str = "SET #status.#drift = :drift, #watch.#drift = :driftWatch";
/// No run holds the stack, and it has no record yet…
pub const NO_RUN_NO_DRIFT: &str = "attribute_exists(#watch) AND (attribute_not_exists(#leaseOwner) OR #leaseExpiresAt <= :now) AND attribute_not_exists(#watch.#drift)";
/// …or the record read is still there.
pub const NO_RUN_DRIFT_AT: &str = "attribute_exists(#watch) AND (attribute_not_exists(#leaseOwner) OR #leaseExpiresAt <= :now) AND #watch.#drift.#rev = :rev";

/// The drift record's writer.
pub trait DriftRecords: Send + Sync {
    /// Writes `record` as the stack's drift record, if no run holds the
    /// stack and its record is still at `read` (`None`: none yet). Returns
    /// whether it was written (false: a run or another writer came first;
    /// the next scheduler run looks again).
    fn record_drift(
        &self,
        name: &str,
        read: Option<u64>,
        record: &DriftRecord,
        now: EpochMillis,
    ) -> impl Future<Output = Result<bool>> + Send;
}

impl DriftRecords for Registry {
    async fn record_drift(
        &self,
        name: &str,
        read: Option<u64>,
        record: &DriftRecord,
        now: EpochMillis,
    ) -> Result<bool> {
        let mut values = vec![
            (":drift", to_attr_of(record)),
            (":driftWatch", to_attr_of(&record.watch())),
            (":now", n(now)),
        ];
        let condition = match read {
            Some(rev) => {
                values.push((":rev", n(rev)));
                NO_RUN_DRIFT_AT
            }
            None => NO_RUN_NO_DRIFT,
        };
        self.write_if(stack_key(name), Write::Update(SET_DRIFT), condition, values)
            .await
    }
}

#[cfg(any(test, feature = "fakes"))]
impl DriftRecords for super::memory::MemoryRegistry {
    async fn record_drift(
        &self,
        name: &str,
        read: Option<u64>,
        record: &DriftRecord,
        now: EpochMillis,
    ) -> Result<bool> {
        let mut state = self.state();
        let Some(entry) = state.entry_mut(name) else {
            return Ok(false);
        };
        let free = entry.lease.as_ref().is_none_or(|l| l.expires_at.0 <= now);
        if !free || entry.status.findings.drift.as_ref().map(|d| d.rev) != read {
            return Ok(false);
        }
        entry.status.findings.drift = Some(record.clone());
        Ok(true)
    }
}
