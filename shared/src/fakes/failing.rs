//! A failure-injecting wrapper: any port (and the registry) behind it works
//! as usual, except that the k-th call of a named operation fails with the
//! error planned for it. For tests of what a fault at one exact point does
//! (a lost status write, a start refused mid-run). CloudFormation is not
//! wrapped: the scripted one plans its own faults
//! ([`super::ScriptedCloudFormation::fail`]), and the SDK's calls are
//! failed and counted below the SDK (the test kit's HTTP client).
//!
//! Operations are named as AWS names them (`DescribeStacks`, `GetObject`,
//! `UpdateItem`…), and counted per name from 1.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::calls::Faults;
use crate::clock::EpochMillis;
use crate::content::Wanted;
use crate::ports::source::{FetchError, Files, SourceLocation};
use crate::ports::{
    Blobs, PortError, PortResult, SourceFetcher, Started, Starter, Stored, Trigger,
};
use crate::registry::{
    Answer, Answers, Deliveries, Entries, Follower, Lease, Leases, RegistryError, Schedule,
    SourceRecord, StackEntry, Watched,
};
use crate::status::Status;

/// `inner`, failing the calls planned with [`Failing::fail`].
#[derive(Debug, Clone)]
pub struct Failing<T> {
    pub inner: T,
    plan: Arc<Mutex<Faults>>,
    /// The followers a lagging index answers with, when set.
    lagging: Arc<Mutex<Option<Vec<Follower>>>>,
}

impl<T> Failing<T> {
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            plan: Arc::default(),
            lagging: Arc::default(),
        }
    }

    /// From now on the followers' index answers `as_read`, whatever the
    /// items say (DynamoDB's secondary indexes are eventually consistent).
    pub fn lag_followers(&self, as_read: Vec<Follower>) {
        *self.lagging.lock().unwrap_or_else(PoisonError::into_inner) = Some(as_read);
    }

    /// The `nth` call (from 1) of `operation` fails with `error`.
    pub fn fail(&self, operation: &str, nth: usize, error: PortError) -> &Self {
        self.lock().plan(operation, nth, error);
        self
    }

    /// How many times `operation` was called.
    pub fn calls(&self, operation: &str) -> usize {
        self.lock().calls(operation)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.plan.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a call of `operation`; its planned error, if this is the one.
    fn check(&self, operation: &str) -> PortResult<()> {
        self.lock().count(operation)
    }

    /// The same, as the registry reports AWS errors.
    fn check_registry(&self, operation: &'static str) -> Result<(), RegistryError> {
        self.check(operation).map_err(|e| {
            let (transient, message) = (e.is_transient(), e.message().to_owned());
            RegistryError::Aws {
                operation,
                code: None,
                message,
                transient,
            }
        })
    }
}

impl<T: Blobs> Blobs for Failing<T> {
    async fn exists(&self, key: &str) -> PortResult<bool> {
        self.check("HeadObject")?;
        self.inner.exists(key).await
    }

    async fn get(&self, key: &str, max_bytes: u64) -> PortResult<Vec<u8>> {
        self.check("GetObject")?;
        self.inner.get(key, max_bytes).await
    }

    async fn put_if_absent(
        &self,
        key: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> PortResult<bool> {
        self.check("PutObject")?;
        self.inner.put_if_absent(key, body, content_type).await
    }

    async fn put(&self, key: &str, body: Vec<u8>, content_type: &str) -> PortResult<()> {
        self.check("PutObject")?;
        self.inner.put(key, body, content_type).await
    }

    async fn store(&self, key: &str, body: Vec<u8>, content_type: &str) -> PortResult<Stored> {
        self.check("GetObject")?;
        self.inner.store(key, body, content_type).await
    }
}

impl<T: SourceFetcher> SourceFetcher for Failing<T> {
    async fn resolve(
        &self,
        source: &SourceLocation,
        reference: &str,
    ) -> Result<String, FetchError> {
        self.check("Resolve")?;
        self.inner.resolve(source, reference).await
    }

    async fn fetch(
        &self,
        source: &SourceLocation,
        revision: &str,
        wanted: &Wanted,
    ) -> Result<Files, FetchError> {
        self.check("Fetch")?;
        self.inner.fetch(source, revision, wanted).await
    }
}

impl<T: Starter> Starter for Failing<T> {
    async fn start(&self, stack: &str, trigger: &Trigger, key: &str) -> PortResult<Started> {
        self.check("StartExecution")?;
        self.inner.start(stack, trigger, key).await
    }
}

impl<T: Entries> Entries for Failing<T> {
    async fn get(&self, name: &str) -> Result<Option<StackEntry>, RegistryError> {
        self.check_registry("GetItem")?;
        self.inner.get(name).await
    }

    async fn followers(&self, key: &str) -> Result<Vec<Follower>, RegistryError> {
        self.check_registry("Query")?;
        let lagging = self
            .lagging
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match lagging {
            Some(as_read) => Ok(as_read),
            None => self.inner.followers(key).await,
        }
    }

    async fn by_stack_name(&self, stack_name: &str) -> Result<Vec<StackEntry>, RegistryError> {
        self.check_registry("Query")?;
        self.inner.by_stack_name(stack_name).await
    }
}

impl<T: Leases> Leases for Failing<T> {
    async fn acquire_lease(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
        now: EpochMillis,
    ) -> Result<Lease, RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.acquire_lease(name, owner, ttl, now).await
    }

    async fn renew_lease(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
        now: EpochMillis,
    ) -> Result<Lease, RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.renew_lease(name, owner, ttl, now).await
    }

    async fn park(
        &self,
        name: &str,
        parked: &crate::registry::Parked,
        ttl: Duration,
        now: EpochMillis,
    ) -> Result<Lease, RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.park(name, parked, ttl, now).await
    }

    async fn release_lease(&self, name: &str, owner: &str) -> Result<(), RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.release_lease(name, owner).await
    }

    async fn write_status(
        &self,
        name: &str,
        owner: &str,
        status: &Status,
    ) -> Result<(), RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.write_status(name, owner, status).await
    }

    async fn write_status_and_release(
        &self,
        name: &str,
        owner: &str,
        status: &Status,
    ) -> Result<(), RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner
            .write_status_and_release(name, owner, status)
            .await
    }

    async fn remove(&self, name: &str, owner: &str) -> Result<(), RegistryError> {
        self.check_registry("DeleteItem")?;
        self.inner.remove(name, owner).await
    }
}

impl<T: Schedule> Schedule for Failing<T> {
    async fn watched(&self) -> Result<Vec<Watched>, RegistryError> {
        self.check_registry("Query")?;
        self.inner.watched().await
    }

    async fn due(
        &self,
        now: EpochMillis,
        per_shard: usize,
    ) -> Result<crate::registry::Due, RegistryError> {
        self.check_registry("Query")?;
        self.inner.due(now, per_shard).await
    }

    async fn sources(&self) -> Result<Vec<SourceRecord>, RegistryError> {
        self.check_registry("Query")?;
        self.inner.sources().await
    }

    async fn add_source(
        &self,
        key: &str,
        url: &str,
        reference: &str,
        credentials: Option<&str>,
    ) -> Result<bool, RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner
            .add_source(key, url, reference, credentials)
            .await
    }

    async fn set_source_credentials(
        &self,
        key: &str,
        credentials: Option<&str>,
    ) -> Result<bool, RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.set_source_credentials(key, credentials).await
    }

    async fn record_source_head(
        &self,
        key: &str,
        seen: Option<&str>,
        head: &str,
        now: EpochMillis,
    ) -> Result<bool, RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.record_source_head(key, seen, head, now).await
    }

    async fn forget_source(&self, key: &str, seen: Option<&str>) -> Result<bool, RegistryError> {
        self.check_registry("DeleteItem")?;
        self.inner.forget_source(key, seen).await
    }

    async fn move_due(
        &self,
        name: &str,
        from: EpochMillis,
        to: Option<EpochMillis>,
    ) -> Result<bool, RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.move_due(name, from, to).await
    }

    async fn mark_due(&self, name: &str, now: EpochMillis) -> Result<bool, RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.mark_due(name, now).await
    }
}

impl<T: crate::registry::DriftRecords> crate::registry::DriftRecords for Failing<T> {
    async fn record_drift(
        &self,
        name: &str,
        read: Option<u64>,
        record: &crate::drift::DriftRecord,
        now: EpochMillis,
    ) -> Result<bool, RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.record_drift(name, read, record, now).await
    }
}

impl<T: Answers> Answers for Failing<T> {
    async fn answer(
        &self,
        token: &str,
        answer: &Answer,
        now: EpochMillis,
    ) -> Result<bool, RegistryError> {
        self.check_registry("PutItem")?;
        self.inner.answer(token, answer, now).await
    }

    async fn answer_of(&self, token: &str) -> Result<Option<Answer>, RegistryError> {
        self.check_registry("GetItem")?;
        self.inner.answer_of(token).await
    }
}

impl<T: Deliveries> Deliveries for Failing<T> {
    async fn record_delivery(
        &self,
        id: &str,
        now: EpochMillis,
        ttl_seconds: i64,
    ) -> Result<bool, RegistryError> {
        self.check_registry("PutItem")?;
        self.inner.record_delivery(id, now, ttl_seconds).await
    }
}

impl<T: crate::registry::Dependents> crate::registry::Dependents for Failing<T> {
    async fn add_dependent(&self, upstream: &str, dependent: &str) -> Result<(), RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.add_dependent(upstream, dependent).await
    }

    async fn remove_dependent(&self, upstream: &str, dependent: &str) -> Result<(), RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.remove_dependent(upstream, dependent).await
    }

    async fn dependents(&self, upstream: &str) -> Result<Vec<String>, RegistryError> {
        self.check_registry("GetItem")?;
        self.inner.dependents(upstream).await
    }
}

impl<T: crate::registry::FleetApprovals> crate::registry::FleetApprovals for Failing<T> {
    async fn approve_rows(
        &self,
        fleet: &str,
        revision: &str,
        rows: &str,
        by: &str,
        now: i64,
    ) -> Result<(), RegistryError> {
        self.check_registry("PutItem")?;
        self.inner
            .approve_rows(fleet, revision, rows, by, now)
            .await
    }

    async fn rows_approved(
        &self,
        fleet: &str,
        revision: &str,
        rows: &str,
    ) -> Result<Option<String>, RegistryError> {
        self.check_registry("GetItem")?;
        self.inner.rows_approved(fleet, revision, rows).await
    }
}

impl<T: crate::registry::Slots> crate::registry::Slots for Failing<T> {
    async fn take_slot(
        &self,
        key: &str,
        holder: &str,
        cap: u32,
        expires_at: i64,
        now: i64,
    ) -> Result<crate::registry::Taken, RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner
            .take_slot(key, holder, cap, expires_at, now)
            .await
    }

    async fn release_slot(&self, key: &str, holder: &str) -> Result<(), RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.release_slot(key, holder).await
    }

    async fn slot_holders(
        &self,
        key: &str,
    ) -> Result<std::collections::HashMap<String, i64>, RegistryError> {
        self.check_registry("GetItem")?;
        self.inner.slot_holders(key).await
    }
}

impl<T: crate::registry::Specs> crate::registry::Specs for Failing<T> {
    async fn list(&self) -> Result<Vec<StackEntry>, RegistryError> {
        self.check_registry("Scan")?;
        self.inner.list().await
    }

    async fn apply_batch(
        &self,
        batch: &[&crate::registry::plan::Change],
        now: EpochMillis,
    ) -> Result<(), RegistryError> {
        self.check_registry("TransactWriteItems")?;
        self.inner.apply_batch(batch, now).await
    }

    async fn request_deletion(&self, name: &str, now: EpochMillis) -> Result<bool, RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.request_deletion(name, now).await
    }

    async fn set_suspended(
        &self,
        name: &str,
        suspended: bool,
        now: EpochMillis,
    ) -> Result<bool, RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.set_suspended(name, suspended, now).await
    }
}

impl<T: crate::registry::RegistrySources> crate::registry::RegistrySources for Failing<T> {
    async fn registry_sources(
        &self,
    ) -> Result<Vec<crate::registry_source::RegistrySource>, RegistryError> {
        self.check_registry("Query")?;
        self.inner.registry_sources().await
    }

    async fn registry_source(
        &self,
        name: &str,
    ) -> Result<Option<crate::registry_source::RegistrySource>, RegistryError> {
        self.check_registry("GetItem")?;
        self.inner.registry_source(name).await
    }

    async fn add_registry_source(
        &self,
        spec: &crate::registry_source::SourceSpec,
    ) -> Result<bool, RegistryError> {
        self.check_registry("PutItem")?;
        self.inner.add_registry_source(spec).await
    }

    async fn write_source_status(
        &self,
        name: &str,
        version: u64,
        status: &crate::registry_source::SourceStatus,
    ) -> Result<bool, RegistryError> {
        self.check_registry("UpdateItem")?;
        self.inner.write_source_status(name, version, status).await
    }

    async fn remove_registry_source(&self, name: &str) -> Result<bool, RegistryError> {
        self.check_registry("DeleteItem")?;
        self.inner.remove_registry_source(name).await
    }
}

impl<T: crate::registry::FleetRecords> crate::registry::FleetRecords for Failing<T> {
    async fn fleet(&self, name: &str) -> Result<Option<crate::registry::Fleet>, RegistryError> {
        self.check_registry("GetItem")?;
        self.inner.fleet(name).await
    }
}

impl<T: crate::registry::Fleets> crate::registry::Fleets for Failing<T> {
    async fn fleets(&self) -> Result<Vec<crate::registry::Fleet>, RegistryError> {
        self.check_registry("Query")?;
        self.inner.fleets().await
    }

    async fn due_fleets(
        &self,
        now: crate::clock::EpochMillis,
    ) -> Result<Vec<crate::registry::Fleet>, RegistryError> {
        self.check_registry("Query")?;
        self.inner.due_fleets(now).await
    }

    async fn put_fleet(
        &self,
        fleet: &crate::registry::Fleet,
        expected: Option<u64>,
    ) -> Result<bool, RegistryError> {
        self.check_registry("PutItem")?;
        self.inner.put_fleet(fleet, expected).await
    }

    async fn remove_fleet(&self, name: &str, version: u64) -> Result<bool, RegistryError> {
        self.check_registry("DeleteItem")?;
        self.inner.remove_fleet(name, version).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::MemoryBlobs;

    #[tokio::test]
    async fn only_the_planned_call_fails() {
        let blobs = Failing::new(MemoryBlobs::new());
        blobs.fail("PutObject", 2, PortError::Transient("SlowDown".into()));
        assert!(
            blobs
                .put_if_absent("a", b"1".to_vec(), "text/plain")
                .await
                .is_ok()
        );
        assert_eq!(
            blobs.put_if_absent("b", b"2".to_vec(), "text/plain").await,
            Err(PortError::Transient("SlowDown".into()))
        );
        assert!(
            blobs
                .put_if_absent("b", b"2".to_vec(), "text/plain")
                .await
                .is_ok()
        );
        assert_eq!(blobs.calls("PutObject"), 3);
        assert_eq!(blobs.inner.keys(), ["a", "b"]);
    }
}
