//! The in-memory registry's spec writes: a plan's batches, checked as the
//! DynamoDB registry's transactions check them (versions, claims).

use super::{MemoryRegistry, State, not_found};
use crate::clock::EpochMillis;
use crate::registry::claims::claim_conflict;
use crate::registry::plan::{Action, Change};
use crate::registry::schema::claim_key;
use crate::registry::{RegistryError, Result, Specs, StackEntry};
use crate::status::Timestamp;

/// Why one change of a plan cannot be written, as DynamoDB's cancelled
/// transaction would say.
fn refused(state: &State, change: &Change) -> Option<RegistryError> {
    if let Some(conflict) = claimed(state, change) {
        return Some(conflict);
    }
    let current = state.entries.get(&change.name);
    let detail = match (&change.action, current) {
        (Action::Create, Some(_)) => "it was created meanwhile".to_owned(),
        (action, current) => {
            let from = action.expected_version()?;
            if current.is_some_and(|e| e.spec_version == from && e.deletion_requested_at.is_none())
            {
                return None;
            }
            format!("it is no longer at specVersion {from}, or is being deleted")
        }
    };
    Some(RegistryError::Conflict {
        name: change.name.clone(),
        detail,
    })
}

/// Another entry drives the stack a change's spec would (each entry's
/// claim, as the DynamoDB registry keeps it, is its spec's stack).
fn claimed(state: &State, change: &Change) -> Option<RegistryError> {
    let spec = change.spec.as_ref()?;
    let home = state.home.as_deref();
    let key = claim_key(spec, home);
    let holder = state
        .entries
        .values()
        .find(|e| e.name != change.name && claim_key(&e.spec, home) == key)?;
    Some(claim_conflict(&change.name, &key, Some(&holder.name)))
}

fn write_change(state: &mut State, change: &Change, now: EpochMillis) {
    let at = Timestamp(now);
    match (&change.action, &change.spec) {
        (Action::Create, Some(spec)) => {
            let entry = StackEntry::registered_by(change, spec, now);
            state.entries.insert(change.name.clone(), entry);
        }
        (Action::Update { from, .. }, Some(spec)) => {
            if let Some(e) = state.entries.get_mut(&change.name) {
                e.spec = spec.clone();
                e.spec_hash = spec.content_hash();
                e.spec_version = from + 1;
                e.updated_at = at;
                e.status.times.next_reconcile_at = Some(at);
                if change.owner.is_some() {
                    e.owner.clone_from(&change.owner);
                }
            }
        }
        (Action::Move { .. }, _) => {
            if let Some(e) = state.entries.get_mut(&change.name) {
                e.owner.clone_from(&change.owner);
                e.updated_at = at;
            }
        }
        (Action::Rekey { .. }, _) => {
            // Keys are computed from the spec here: only the due time moves.
            if let Some(e) = state.entries.get_mut(&change.name) {
                e.status.times.next_reconcile_at = Some(at);
            }
        }
        (Action::Prune { .. }, _) => {
            if let Some(e) = state.entries.get_mut(&change.name) {
                e.deletion_requested_at = Some(at);
                e.status.times.next_reconcile_at = Some(at);
            }
        }
        _ => {}
    }
}

impl Specs for MemoryRegistry {
    async fn list(&self) -> Result<Vec<StackEntry>> {
        Ok(self.state().entries.values().cloned().collect())
    }

    async fn apply_batch(&self, batch: &[&Change], now: EpochMillis) -> Result<()> {
        crate::registry::specs::register_dependents(self, batch).await?;
        {
            let mut state = self.state();
            if let Some(conflict) = batch.iter().find_map(|c| refused(&state, c)) {
                return Err(conflict);
            }
            for change in batch {
                write_change(&mut state, change, now);
            }
        }
        crate::registry::specs::wake_created(self, batch, now).await;
        Ok(())
    }

    async fn request_deletion(&self, name: &str, now: EpochMillis) -> Result<bool> {
        let mut state = self.state();
        let entry = state.entries.get_mut(name).ok_or_else(|| not_found(name))?;
        if entry.deletion_requested_at.is_some() {
            return Ok(false);
        }
        entry.deletion_requested_at = Some(Timestamp(now));
        entry.status.times.next_reconcile_at = Some(Timestamp(now));
        Ok(true)
    }

    async fn set_suspended(&self, name: &str, suspended: bool, now: EpochMillis) -> Result<bool> {
        let mut state = self.state();
        let entry = state.entries.get_mut(name).ok_or_else(|| not_found(name))?;
        if entry.deletion_requested_at.is_some() {
            return Err(RegistryError::BeingDeleted {
                name: name.to_owned(),
            });
        }
        if entry.suspended == suspended {
            return Ok(false);
        }
        entry.suspended = suspended;
        entry.updated_at = Timestamp(now);
        if !suspended {
            entry.status.times.next_reconcile_at = Some(Timestamp(now));
        }
        Ok(true)
    }
}
