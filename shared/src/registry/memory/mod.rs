//! The registry in memory: the same conditions as the DynamoDB expressions
//! of [`super::expr`], checked and applied under one lock (DynamoDB
//! serializes the conditional writes of an item; the lock does that for all
//! of them). For the unit tests of the steps, the scheduler and the triggers;
//! [`super::contract`] holds it to the DynamoDB registry's behaviour.
//!
//! As in the table, `nextReconcileAt` is an attribute of its own: a status
//! written without one keeps the entry where it is in the scheduler's queue,
//! and the entry read back carries the attribute's value.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::answers::{Answer, Answers};
use super::followers::{Follower, follower_of};
use super::leases::written_already;
use super::schedule::{SourceRecord, Watched};
use super::schema::{SCHED_SHARDS, sched_shard};
use super::{Deliveries, Entries, Lease, Leases, RegistryError, Result, Schedule, StackEntry};
use crate::clock::EpochMillis;
use crate::source::source_key;
use crate::status::{Status, Timestamp};

#[derive(Debug, Default, Clone)]
pub(super) struct State {
    entries: BTreeMap<String, StackEntry>,
    sources: BTreeMap<String, SourceRecord>,
    /// Delivery id → expiry (epoch seconds).
    deliveries: BTreeMap<String, i64>,
    /// The region of a spec that names none (the DynamoDB registry's is
    /// its client's).
    home: Option<String>,
    /// Task token → its answer.
    answers: BTreeMap<String, Answer>,
    /// A stack → the entries that depend on it.
    pub(super) dependents: BTreeMap<String, std::collections::BTreeSet<String>>,
    /// Registry sources, by name.
    pub(super) registry_sources: BTreeMap<String, crate::registry_source::RegistrySource>,
    /// Fleets, by name.
    pub(super) fleets: BTreeMap<String, super::fleets::Fleet>,
    /// Run slots: account/region key → holder → when its slot runs out.
    pub(super) slots: BTreeMap<String, std::collections::HashMap<String, i64>>,
    /// Changes approved for fleets: `approved_key` → who approved.
    pub(super) approved_rows: BTreeMap<String, String>,
}

impl State {
    pub(super) fn entry_mut(&mut self, name: &str) -> Option<&mut StackEntry> {
        self.entries.get_mut(name)
    }
}

/// The registry, in memory (its clones share it).
#[derive(Debug, Default, Clone)]
pub struct MemoryRegistry {
    state: std::sync::Arc<Mutex<State>>,
}

impl MemoryRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// With `region` as the region of specs that name none.
    pub fn with_home_region(self, region: &str) -> Self {
        self.state().home = Some(region.to_owned());
        self
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts an entry as it is (any state), as a test's set-up does.
    pub fn insert(&self, entry: StackEntry) {
        self.state().entries.insert(entry.name.clone(), entry);
    }

    /// The entry as stored, if any (no error path: for assertions).
    pub fn entry(&self, name: &str) -> Option<StackEntry> {
        self.state().entries.get(name).cloned()
    }

    /// The source item of `key`, if any.
    pub fn source(&self, key: &str) -> Option<SourceRecord> {
        self.state().sources.get(key).cloned()
    }

    /// Whether a delivery id was claimed.
    pub fn has_delivery(&self, id: &str) -> bool {
        self.state().deliveries.contains_key(id)
    }
}

fn not_found(name: &str) -> RegistryError {
    RegistryError::NotFound {
        name: name.to_owned(),
    }
}

fn holds(entry: &StackEntry, owner: &str) -> bool {
    entry.lease.as_ref().is_some_and(|l| l.owner == owner)
}

fn lease_not_held(entry: Option<&StackEntry>, name: &str, owner: &str) -> RegistryError {
    match entry {
        Some(entry) => RegistryError::LeaseNotHeld {
            name: name.to_owned(),
            owner: owner.to_owned(),
            holder: entry.lease.as_ref().map(|l| l.owner.clone()),
        },
        None => not_found(name),
    }
}

/// The entries of `state` whose `key` is `value`, by name.
fn entries_where(
    state: &State,
    key: impl Fn(&StackEntry) -> String,
    value: &str,
) -> Vec<StackEntry> {
    state
        .entries
        .values()
        .filter(|e| key(e) == value)
        .cloned()
        .collect()
}

impl Entries for MemoryRegistry {
    async fn get(&self, name: &str) -> Result<Option<StackEntry>> {
        Ok(self.entry(name))
    }

    async fn followers(&self, key: &str) -> Result<Vec<Follower>> {
        Ok(entries_where(
            &self.state(),
            |e| source_key(e.spec.source.url(), e.spec.effective_ref()),
            key,
        )
        .iter()
        .map(follower_of)
        .collect())
    }

    async fn by_stack_name(&self, stack_name: &str) -> Result<Vec<StackEntry>> {
        Ok(entries_where(
            &self.state(),
            |e| e.spec.effective_stack_name().to_owned(),
            stack_name,
        ))
    }
}

impl MemoryRegistry {
    /// The conditional status write of [`Leases::write_status`] and
    /// [`Leases::write_status_and_release`].
    fn put_status(&self, name: &str, owner: &str, status: &Status, release: bool) -> Result<()> {
        let mut state = self.state();
        let entry = state.entries.get_mut(name);
        let Some(entry) = entry.filter(|e| holds(e, owner)) else {
            let current = state.entries.get(name);
            let bounded = status.clone().bounded();
            if release && current.is_some_and(|e| written_already(e, &bounded)) {
                return Ok(());
            }
            return Err(lease_not_held(current, name, owner));
        };
        let due = entry.status.times.next_reconcile_at;
        entry.status = status.clone().bounded();
        // No due time in the status: while the run goes on, the entry stays
        // where it is in the queue; at its end, it leaves the queue.
        if !release {
            entry.status.times.next_reconcile_at = status.times.next_reconcile_at.or(due);
        }
        if release {
            entry.lease = None;
        }
        Ok(())
    }
}

impl Leases for MemoryRegistry {
    async fn acquire_lease(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
        now: EpochMillis,
    ) -> Result<Lease> {
        let mut state = self.state();
        let entry = state.entries.get_mut(name).ok_or_else(|| not_found(name))?;
        match &entry.lease {
            Some(held) if held.owner != owner && held.is_live(now) => {
                Err(RegistryError::LeaseHeld {
                    name: name.to_owned(),
                    owner: held.owner.clone(),
                    expires_at: held.expires_at,
                })
            }
            _ => {
                let lease = Lease::new(owner, now, ttl);
                entry.lease = Some(lease.clone());
                Ok(lease)
            }
        }
    }

    async fn renew_lease(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
        now: EpochMillis,
    ) -> Result<Lease> {
        let mut state = self.state();
        let entry = state.entries.get_mut(name);
        let Some(entry) = entry.filter(|e| holds(e, owner)) else {
            return Err(lease_not_held(state.entries.get(name), name, owner));
        };
        let taken_at = entry.lease.as_ref().and_then(|l| l.taken_at);
        let lease = Lease {
            taken_at,
            parked: entry.lease.as_ref().and_then(|l| l.parked.clone()),
            ..Lease::new(owner, now, ttl)
        };
        entry.lease = Some(lease.clone());
        Ok(lease)
    }

    async fn park(
        &self,
        name: &str,
        parked: &crate::registry::Parked,
        ttl: Duration,
        now: EpochMillis,
    ) -> Result<Lease> {
        let mut lease = self.renew_lease(name, &parked.execution, ttl, now).await?;
        lease.parked = Some(parked.clone());
        if let Some(entry) = self.state().entries.get_mut(name) {
            entry.lease = Some(lease.clone());
        }
        Ok(lease)
    }

    async fn release_lease(&self, name: &str, owner: &str) -> Result<()> {
        let mut state = self.state();
        match state.entries.get_mut(name) {
            Some(entry) if holds(entry, owner) => {
                entry.lease = None;
                Ok(())
            }
            Some(entry) if entry.lease.is_some() => Err(lease_not_held(Some(entry), name, owner)),
            _ => Ok(()),
        }
    }

    async fn write_status(&self, name: &str, owner: &str, status: &Status) -> Result<()> {
        self.put_status(name, owner, status, false)
    }

    async fn write_status_and_release(
        &self,
        name: &str,
        owner: &str,
        status: &Status,
    ) -> Result<()> {
        self.put_status(name, owner, status, true)
    }

    async fn remove(&self, name: &str, owner: &str) -> Result<()> {
        let mut state = self.state();
        let Some(entry) = state.entries.get(name) else {
            return Ok(());
        };
        if entry.deletion_requested_at.is_none() {
            return Err(RegistryError::Conflict {
                name: name.to_owned(),
                detail: "its deletion was not requested".into(),
            });
        }
        if !holds(entry, owner) {
            return Err(lease_not_held(Some(entry), name, owner));
        }
        state.entries.remove(name);
        Ok(())
    }
}

/// Whether a source item still holds the head `seen` (`None`: no head yet).
fn head_is(source: Option<&SourceRecord>, seen: Option<&str>) -> bool {
    source.is_some_and(|s| s.head.as_deref() == seen)
}

impl Schedule for MemoryRegistry {
    async fn watched(&self) -> Result<Vec<Watched>> {
        Ok(self
            .state()
            .entries
            .values()
            .map(|e| Watched {
                name: e.name.clone(),
                stack_name: e.spec.effective_stack_name().to_owned(),
                phase: Some(e.status.phase),
                seen: e.status.applied.seen.clone(),
                suspended: e.suspended,
                deleting: e.deletion_requested_at.is_some(),
                lease_expires_at: e.lease.as_ref().map(|l| l.expires_at.0),
                next_reconcile_at: e.status.times.next_reconcile_at.map(|t| t.0),
                drift: e
                    .status
                    .findings
                    .drift
                    .as_ref()
                    .map(crate::drift::DriftRecord::watch),
            })
            .collect())
    }

    async fn due(&self, now: EpochMillis, per_shard: usize) -> Result<super::Due> {
        let state = self.state();
        let mut due = Vec::new();
        for shard in 0..SCHED_SHARDS {
            let mut in_shard: Vec<&StackEntry> = state
                .entries
                .values()
                .filter(|e| sched_shard(&e.name) == shard.to_string())
                .filter(|e| e.status.times.next_reconcile_at.is_some_and(|t| t.0 <= now))
                .collect();
            in_shard.sort_by_key(|e| (e.status.times.next_reconcile_at, e.name.clone()));
            due.extend(in_shard.into_iter().take(per_shard.max(1)).cloned());
        }
        due.sort_by_key(|e| (e.status.times.next_reconcile_at, e.name.clone()));
        Ok(super::Due {
            entries: due,
            unreadable: Vec::new(),
        })
    }

    async fn sources(&self) -> Result<Vec<SourceRecord>> {
        Ok(self.state().sources.values().cloned().collect())
    }

    async fn add_source(
        &self,
        key: &str,
        url: &str,
        reference: &str,
        credentials: Option<&str>,
    ) -> Result<bool> {
        let mut state = self.state();
        if state.sources.contains_key(key) {
            return Ok(false);
        }
        state.sources.insert(
            key.to_owned(),
            SourceRecord {
                key: key.to_owned(),
                url: url.to_owned(),
                reference: reference.to_owned(),
                head: None,
                followers_checked_at: None,
                credentials: credentials.map(str::to_owned),
            },
        );
        Ok(true)
    }

    async fn set_source_credentials(&self, key: &str, credentials: Option<&str>) -> Result<bool> {
        let mut state = self.state();
        let Some(source) = state.sources.get_mut(key) else {
            return Ok(false);
        };
        source.credentials = credentials.map(str::to_owned);
        Ok(true)
    }

    async fn record_source_head(
        &self,
        key: &str,
        seen: Option<&str>,
        head: &str,
        now: EpochMillis,
    ) -> Result<bool> {
        let mut state = self.state();
        if !head_is(state.sources.get(key), seen) {
            return Ok(false);
        }
        if let Some(source) = state.sources.get_mut(key) {
            source.head = Some(head.to_owned());
            source.followers_checked_at = Some(now);
        }
        Ok(true)
    }

    async fn forget_source(&self, key: &str, seen: Option<&str>) -> Result<bool> {
        let mut state = self.state();
        if !head_is(state.sources.get(key), seen) {
            return Ok(false);
        }
        state.sources.remove(key);
        Ok(true)
    }

    async fn move_due(
        &self,
        name: &str,
        from: EpochMillis,
        to: Option<EpochMillis>,
    ) -> Result<bool> {
        let mut state = self.state();
        match state.entries.get_mut(name) {
            Some(e) if e.status.times.next_reconcile_at == Some(Timestamp(from)) => {
                e.status.times.next_reconcile_at = to.map(Timestamp);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn mark_due(&self, name: &str, at: EpochMillis) -> Result<bool> {
        let mut state = self.state();
        match state.entries.get_mut(name) {
            Some(e) if e.status.times.next_reconcile_at.is_none_or(|t| t.0 > at) => {
                e.status.times.next_reconcile_at = Some(Timestamp(at));
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

impl Answers for MemoryRegistry {
    async fn answer(&self, token: &str, answer: &Answer, _now: EpochMillis) -> Result<bool> {
        let mut state = self.state();
        if state.answers.contains_key(token) {
            return Ok(false);
        }
        state.answers.insert(token.to_owned(), answer.clone());
        Ok(true)
    }

    async fn answer_of(&self, token: &str) -> Result<Option<Answer>> {
        Ok(self.state().answers.get(token).cloned())
    }
}

impl Deliveries for MemoryRegistry {
    async fn record_delivery(&self, id: &str, now: EpochMillis, ttl_seconds: i64) -> Result<bool> {
        let mut state = self.state();
        if state.deliveries.contains_key(id) {
            return Ok(false);
        }
        state
            .deliveries
            .insert(id.to_owned(), now / 1000 + ttl_seconds);
        Ok(true)
    }
}

impl super::Dependents for MemoryRegistry {
    async fn add_dependent(&self, upstream: &str, dependent: &str) -> Result<()> {
        self.state()
            .dependents
            .entry(upstream.to_owned())
            .or_default()
            .insert(dependent.to_owned());
        Ok(())
    }

    async fn remove_dependent(&self, upstream: &str, dependent: &str) -> Result<()> {
        if let Some(set) = self.state().dependents.get_mut(upstream) {
            set.remove(dependent);
        }
        Ok(())
    }

    async fn dependents(&self, upstream: &str) -> Result<Vec<String>> {
        Ok(self
            .state()
            .dependents
            .get(upstream)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default())
    }
}

mod specs;

impl super::Slots for MemoryRegistry {
    async fn take_slot(
        &self,
        key: &str,
        holder: &str,
        cap: u32,
        expires_at: i64,
        now: i64,
    ) -> Result<super::Taken> {
        let mut state = self.state();
        let holders = state.slots.entry(key.to_owned()).or_default();
        if !holders.contains_key(holder) {
            holders.retain(|_, at| *at > now);
            if holders.len() >= usize::try_from(cap).unwrap_or(usize::MAX) {
                return Ok(super::Taken::Full {
                    holders: holders.len(),
                });
            }
        }
        holders.insert(holder.to_owned(), expires_at);
        Ok(super::Taken::Yes)
    }

    async fn release_slot(&self, key: &str, holder: &str) -> Result<()> {
        if let Some(holders) = self.state().slots.get_mut(key) {
            holders.remove(holder);
        }
        Ok(())
    }

    async fn slot_holders(&self, key: &str) -> Result<std::collections::HashMap<String, i64>> {
        Ok(self.state().slots.get(key).cloned().unwrap_or_default())
    }
}

impl super::FleetApprovals for MemoryRegistry {
    async fn approve_rows(
        &self,
        fleet: &str,
        revision: &str,
        rows: &str,
        by: &str,
        _now: i64,
    ) -> Result<()> {
        let key = super::fleet_approvals::approved_key(fleet, revision, rows);
        self.state()
            .approved_rows
            .entry(key)
            .or_insert_with(|| by.to_owned());
        Ok(())
    }

    async fn rows_approved(
        &self,
        fleet: &str,
        revision: &str,
        rows: &str,
    ) -> Result<Option<String>> {
        let key = super::fleet_approvals::approved_key(fleet, revision, rows);
        Ok(self.state().approved_rows.get(&key).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_memory_registry_keeps_the_registry_contract() {
        let registry = MemoryRegistry::new().with_home_region(super::super::contract::HOME);
        super::super::contract::check(&registry, "memory").await;
    }
}
