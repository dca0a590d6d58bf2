//! Registry sources as the registry keeps them: one item per source
//! (`regsource#NAME`) holding its spec, its status and a version that every
//! status write is conditioned on, so a webhook and a scheduler run that
//! read one commit at once cannot overwrite each other's record. The items
//! sit in the scheduler's index apart (`schedShard` `registry-sources`), so
//! listing them is one query, whatever the registry holds.

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::types::AttributeValue;

use super::expr::{self, Write};
use super::item::{from_attr, n, s, to_attr_of};
use super::schema::{INDEX_BY_NEXT_RECONCILE, PK, attr};
use super::{Registry, RegistryError, Result};
use crate::registry_source::{RegistrySource, SourceSpec, SourceStatus};

/// Prefix of a registry source's partition key.
pub const REGISTRY_SOURCE_PREFIX: &str = "regsource#";
/// The `schedShard` of registry source items.
pub const REGISTRY_SOURCES_SHARD: &str = "registry-sources";

/// The registry sources of an installation.
pub trait RegistrySources: Send + Sync {
    /// Every registry source, by name.
    fn registry_sources(&self) -> impl Future<Output = Result<Vec<RegistrySource>>> + Send;
    /// One, read consistently.
    fn registry_source(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<RegistrySource>>> + Send;
    /// Registers a source (`Pending`, version 1), unless one of that name
    /// exists. Returns whether it was added.
    fn add_registry_source(&self, spec: &SourceSpec) -> impl Future<Output = Result<bool>> + Send;
    /// Writes a source's status, if it is still at `version` (it goes to
    /// `version + 1`). Returns false when someone wrote meanwhile.
    fn write_source_status(
        &self,
        name: &str,
        version: u64,
        status: &SourceStatus,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Forgets a source (its entries are left as they are). Returns whether
    /// it was there.
    fn remove_registry_source(&self, name: &str) -> impl Future<Output = Result<bool>> + Send;
}

fn key(name: &str) -> String {
    format!("{REGISTRY_SOURCE_PREFIX}{name}")
}

type Item = HashMap<String, AttributeValue>;

/// A source item read back; what is wrong with it, naming its key.
pub(super) fn source_from_item(item: &Item) -> Result<RegistrySource> {
    let pk = item
        .get(PK)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default();
    let corrupt = |detail: String| RegistryError::Corrupt {
        key: pk.clone(),
        detail,
    };
    let read = |name: &str| -> Result<serde_json::Value> {
        item.get(name)
            .map(from_attr)
            .transpose()
            .map_err(|e| corrupt(format!("{name}: {e}")))?
            .ok_or_else(|| corrupt(format!("the item has no {name}")))
    };
    let spec: SourceSpec = serde_json::from_value(read(attr::SPEC)?)
        .map_err(|e| corrupt(format!("{}: {e}", attr::SPEC)))?;
    let status: SourceStatus = match item.get(attr::STATUS) {
        Some(_) => serde_json::from_value(read(attr::STATUS)?)
            .map_err(|e| corrupt(format!("{}: {e}", attr::STATUS)))?,
        None => SourceStatus::default(),
    };
    let version = item
        .get(attr::SPEC_VERSION)
        .and_then(|v| v.as_n().ok())
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| corrupt(format!("the item has no {}", attr::SPEC_VERSION)))?;
    Ok(RegistrySource {
        spec,
        status,
        version,
    })
}

impl RegistrySources for Registry {
    async fn registry_sources(&self) -> Result<Vec<RegistrySource>> {
        let items = self
            .query_all(
                INDEX_BY_NEXT_RECONCILE,
                expr::IN_SHARD,
                vec![(":shard", s(REGISTRY_SOURCES_SHARD))],
                None,
            )
            .await?;
        let mut sources = Vec::with_capacity(items.len());
        for item in &items {
            match source_from_item(item) {
                Ok(source) => sources.push(source),
                Err(e) => tracing::warn!(error = %e, "registry source skipped: it cannot be read"),
            }
        }
        sources.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        Ok(sources)
    }

    async fn registry_source(&self, name: &str) -> Result<Option<RegistrySource>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(key(name)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.aws_error("GetItem", e))?;
        out.item().map(source_from_item).transpose()
    }

    async fn add_registry_source(&self, spec: &SourceSpec) -> Result<bool> {
        let item = Item::from([
            (PK.to_owned(), s(key(&spec.name))),
            (attr::SPEC.to_owned(), to_attr_of(spec)),
            (
                attr::STATUS.to_owned(),
                to_attr_of(&SourceStatus::default()),
            ),
            (attr::SPEC_VERSION.to_owned(), n(1)),
            (attr::SCHED_SHARD.to_owned(), s(REGISTRY_SOURCES_SHARD)),
            (attr::NEXT_RECONCILE_AT.to_owned(), n(0)),
        ]);
        self.put_if_absent(item).await
    }

    async fn write_source_status(
        &self,
        name: &str,
        version: u64,
        status: &SourceStatus,
    ) -> Result<bool> {
        self.write_if(
            key(name),
            Write::Update(expr::SET_SOURCE_STATUS),
            expr::SOURCE_AT_VERSION,
            vec![
                (":status", to_attr_of(status)),
                (":expected", n(version)),
                (":next", n(version + 1)),
            ],
        )
        .await
    }

    async fn remove_registry_source(&self, name: &str) -> Result<bool> {
        self.write_if(key(name), Write::Delete, expr::EXISTS, Vec::new())
            .await
    }
}

/// The same, in memory (`registry::memory`), held to the DynamoDB registry
/// by the contract (`registry::contract`).
#[cfg(any(test, feature = "fakes"))]
mod in_memory {
    use super::super::Result;
    use super::super::memory::MemoryRegistry;

    impl super::RegistrySources for MemoryRegistry {
        async fn registry_sources(&self) -> Result<Vec<crate::registry_source::RegistrySource>> {
            Ok(self.state().registry_sources.values().cloned().collect())
        }

        async fn registry_source(
            &self,
            name: &str,
        ) -> Result<Option<crate::registry_source::RegistrySource>> {
            Ok(self.state().registry_sources.get(name).cloned())
        }

        async fn add_registry_source(
            &self,
            spec: &crate::registry_source::SourceSpec,
        ) -> Result<bool> {
            let mut state = self.state();
            if state.registry_sources.contains_key(&spec.name) {
                return Ok(false);
            }
            state.registry_sources.insert(
                spec.name.clone(),
                crate::registry_source::RegistrySource {
                    spec: spec.clone(),
                    status: Default::default(),
                    version: 1,
                },
            );
            Ok(true)
        }

        async fn write_source_status(
            &self,
            name: &str,
            version: u64,
            status: &crate::registry_source::SourceStatus,
        ) -> Result<bool> {
            let mut state = self.state();
            match state.registry_sources.get_mut(name) {
                Some(source) if source.version == version => {
                    source.status = status.clone();
                    source.version += 1;
                    Ok(true)
                }
                _ => Ok(false),
            }
        }

        async fn remove_registry_source(&self, name: &str) -> Result<bool> {
            Ok(self.state().registry_sources.remove(name).is_some())
        }
    }
}
