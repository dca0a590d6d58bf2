//! An organization in memory: units, their accounts and their units.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::ports::organizations::Listed;
use crate::ports::{Organizations, PortError, PortResult};

#[derive(Debug, Default)]
struct Tree {
    accounts: BTreeMap<String, Vec<String>>,
    units: BTreeMap<String, Vec<String>>,
    calls: usize,
}

/// Parents (units or roots) with their accounts and units; a parent never
/// given is not found, as in Organizations.
#[derive(Debug, Clone, Default)]
pub struct MemoryOrganizations(Arc<Mutex<Tree>>);

impl MemoryOrganizations {
    /// `account` moves under `unit` (from wherever it was).
    pub fn put_account(&self, unit: &str, account: &str) {
        let mut tree = self.tree();
        for held in tree.accounts.values_mut() {
            held.retain(|a| a != account);
        }
        tree.accounts
            .entry(unit.to_owned())
            .or_default()
            .push(account.to_owned());
    }

    /// `unit` is under `parent`.
    pub fn put_unit(&self, parent: &str, unit: &str) {
        let mut tree = self.tree();
        tree.accounts.entry(unit.to_owned()).or_default();
        tree.units
            .entry(parent.to_owned())
            .or_default()
            .push(unit.to_owned());
    }

    /// How many calls were made.
    pub fn calls(&self) -> usize {
        self.tree().calls
    }

    fn tree(&self) -> std::sync::MutexGuard<'_, Tree> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self, parent: &str, units: bool) -> PortResult<Vec<String>> {
        let mut tree = self.tree();
        tree.calls += 1;
        if !tree.accounts.contains_key(parent) {
            return Err(PortError::NotFound(format!(
                "ParentNotFoundException: {parent} was not found"
            )));
        }
        let held = if units { &tree.units } else { &tree.accounts };
        Ok(held.get(parent).cloned().unwrap_or_default())
    }
}

impl Organizations for MemoryOrganizations {
    fn accounts_for_parent<'a>(&'a self, parent: &'a str) -> Listed<'a> {
        let read = self.read(parent, false);
        Box::pin(async move { read })
    }

    fn units_for_parent<'a>(&'a self, parent: &'a str) -> Listed<'a> {
        let read = self.read(parent, true);
        Box::pin(async move { read })
    }
}
