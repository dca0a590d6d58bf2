//! Fleets as the registry keeps them: one item per fleet (`fleet#NAME`)
//! holding the fleet as written, who wrote it, and the accounts its units
//! held at the last read, with a version every write is conditioned on. Its
//! targets are ordinary entries (`crate::fleet`). The items sit in the
//! scheduler's index apart (`schedShard` `fleets`), due (`nextReconcileAt`)
//! when the fleet's units are to be read again: the scheduler's query for
//! them costs one read unit when none is.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use super::expr::{self, Write};
use super::item::{from_attr, n, s, to_attr_of};
use super::schema::{INDEX_BY_NEXT_RECONCILE, PK, attr};
use super::{Registry, RegistryError, Result};
use crate::clock::EpochMillis;
use crate::registry_source::Owner;
use crate::spec::StackSpec;
use crate::status::Timestamp;

/// Prefix of a fleet's partition key.
pub const FLEET_PREFIX: &str = "fleet#";
/// The `schedShard` of fleet items.
pub const FLEETS_SHARD: &str = "fleets";

/// One fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fleet {
    /// The entry as written, with its `targets:`.
    pub spec: StackSpec,
    /// Who wrote it: a registry source, or the CLI (`None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
    /// The last read of its organizational units.
    #[serde(default)]
    pub read: UnitsRead,
    /// The revision `stacksync rollout resume` let its rollout go on at,
    /// past the targets that failed ([`crate::rollout`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed: Option<String>,
    /// Rises by one on every write; each write is conditioned on it.
    #[serde(skip)]
    pub version: u64,
}

/// What the last read of a fleet's units found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnitsRead {
    /// When they were read (`None`: never: a fleet of listed accounts, or
    /// one with a unit not read yet, due at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Timestamp>,
    /// Each unit's active accounts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub units: BTreeMap<String, Vec<String>>,
    /// Why the last read failed (the accounts are the read before's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Fleet {
    /// When its units are to be read again (`None`: it has none; at once:
    /// they were never read).
    pub fn due_at(&self) -> Option<EpochMillis> {
        let every = crate::fleet::reread_every(&self.spec)?;
        let Some(at) = self.read.at else {
            return Some(0);
        };
        let every = i64::try_from(every.as_secs()).unwrap_or(i64::MAX);
        Some(at.0.saturating_add(every.saturating_mul(1000)))
    }
}

/// One fleet's record, read: all a run needs of fleets (its rollout's
/// waves).
pub trait FleetRecords: Send + Sync {
    /// One, read consistently.
    fn fleet(&self, name: &str) -> impl Future<Output = Result<Option<Fleet>>> + Send;
}

/// The fleets of an installation: listed, written, forgotten.
pub trait Fleets: FleetRecords {
    /// Every fleet, by name.
    fn fleets(&self) -> impl Future<Output = Result<Vec<Fleet>>> + Send;
    /// The fleets whose units are due to be read again at `now`.
    fn due_fleets(&self, now: EpochMillis) -> impl Future<Output = Result<Vec<Fleet>>> + Send;
    /// Writes `fleet` if it is still at `expected` (`None`: if there is none
    /// of its name); it is then at `expected + 1` (or 1). Returns false when
    /// someone wrote meanwhile.
    fn put_fleet(
        &self,
        fleet: &Fleet,
        expected: Option<u64>,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Forgets a fleet (its targets' entries are pruned by the plan that
    /// drops it), if it is still at `version`.
    fn remove_fleet(&self, name: &str, version: u64) -> impl Future<Output = Result<bool>> + Send;
}

fn key(name: &str) -> String {
    format!("{FLEET_PREFIX}{name}")
}

type Item = HashMap<String, AttributeValue>;

fn fleet_from_item(item: &Item) -> Result<Fleet> {
    let pk = item
        .get(PK)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default();
    let corrupt = |detail: String| RegistryError::Corrupt {
        key: pk.clone(),
        detail,
    };
    let value = item
        .get(attr::FLEET)
        .map(from_attr)
        .transpose()
        .map_err(|e| corrupt(format!("{}: {e}", attr::FLEET)))?
        .ok_or_else(|| corrupt(format!("the item has no {}", attr::FLEET)))?;
    let mut fleet: Fleet =
        serde_json::from_value(value).map_err(|e| corrupt(format!("{}: {e}", attr::FLEET)))?;
    fleet.version = item
        .get(attr::SPEC_VERSION)
        .and_then(|v| v.as_n().ok())
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| corrupt(format!("the item has no {}", attr::SPEC_VERSION)))?;
    Ok(fleet)
}

fn fleets_of(items: &[Item]) -> Vec<Fleet> {
    let mut fleets: Vec<Fleet> = items
        .iter()
        .filter_map(|item| {
            fleet_from_item(item)
                .inspect_err(|e| tracing::warn!(error = %e, "fleet skipped: it cannot be read"))
                .ok()
        })
        .collect();
    fleets.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
    fleets
}

impl FleetRecords for Registry {
    async fn fleet(&self, name: &str) -> Result<Option<Fleet>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(key(name)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.aws_error("GetItem", e))?;
        out.item().map(fleet_from_item).transpose()
    }
}

impl Fleets for Registry {
    async fn fleets(&self) -> Result<Vec<Fleet>> {
        let items = self
            .query_all(
                INDEX_BY_NEXT_RECONCILE,
                expr::IN_SHARD,
                vec![(":shard", s(FLEETS_SHARD))],
                None,
            )
            .await?;
        Ok(fleets_of(&items))
    }

    async fn due_fleets(&self, now: EpochMillis) -> Result<Vec<Fleet>> {
        let items = self
            .query_all(
                INDEX_BY_NEXT_RECONCILE,
                expr::DUE_IN_SHARD,
                vec![(":shard", s(FLEETS_SHARD)), (":now", n(now))],
                None,
            )
            .await?;
        Ok(fleets_of(&items))
    }

    async fn put_fleet(&self, fleet: &Fleet, expected: Option<u64>) -> Result<bool> {
        let mut item = Item::from([
            (PK.to_owned(), s(key(&fleet.spec.name))),
            (attr::FLEET.to_owned(), to_attr_of(fleet)),
            (attr::SPEC_VERSION.to_owned(), n(expected.unwrap_or(0) + 1)),
            (attr::SCHED_SHARD.to_owned(), s(FLEETS_SHARD)),
        ]);
        // A fleet of listed accounts has no units to read: it stays out of
        // the due query's range (the index keeps items by this attribute).
        item.insert(
            attr::NEXT_RECONCILE_AT.to_owned(),
            n(fleet.due_at().unwrap_or(EpochMillis::MAX)),
        );
        match expected {
            None => self.put_if_absent(item).await,
            Some(version) => {
                self.put_if(
                    item,
                    expr::SOURCE_AT_VERSION,
                    vec![(":expected", n(version))],
                )
                .await
            }
        }
    }

    async fn remove_fleet(&self, name: &str, version: u64) -> Result<bool> {
        self.write_if(
            key(name),
            Write::Delete,
            expr::SOURCE_AT_VERSION,
            vec![(":expected", n(version))],
        )
        .await
    }
}

/// The same, in memory (`registry::memory`), held to the DynamoDB registry
/// by the contract (`registry::contract`).
#[cfg(any(test, feature = "fakes"))]
mod in_memory {
    use super::super::Result;
    use super::super::memory::MemoryRegistry;
    use super::{EpochMillis, Fleet};

    impl super::FleetRecords for MemoryRegistry {
        async fn fleet(&self, name: &str) -> Result<Option<Fleet>> {
            Ok(self.state().fleets.get(name).cloned())
        }
    }

    impl super::Fleets for MemoryRegistry {
        async fn fleets(&self) -> Result<Vec<Fleet>> {
            Ok(self.state().fleets.values().cloned().collect())
        }

        async fn due_fleets(&self, now: EpochMillis) -> Result<Vec<Fleet>> {
            Ok(self
                .state()
                .fleets
                .values()
                .filter(|f| f.due_at().is_some_and(|due| due <= now))
                .cloned()
                .collect())
        }

        async fn put_fleet(&self, fleet: &Fleet, expected: Option<u64>) -> Result<bool> {
            let mut state = self.state();
            let now = state.fleets.get(&fleet.spec.name).map(|f| f.version);
            if now != expected {
                return Ok(false);
            }
            let mut written = fleet.clone();
            written.version = expected.unwrap_or(0) + 1;
            state.fleets.insert(fleet.spec.name.clone(), written);
            Ok(true)
        }

        async fn remove_fleet(&self, name: &str, version: u64) -> Result<bool> {
            let mut state = self.state();
            if state.fleets.get(name).map(|f| f.version) != Some(version) {
                return Ok(false);
            }
            state.fleets.remove(name);
            Ok(true)
        }
    }
}
