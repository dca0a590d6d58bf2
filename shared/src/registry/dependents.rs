//! Who waits for whom: one item per stack that others depend on
//! (`dependents#<name>`), holding the names of the entries that found it
//! while they ran (a `dependsOn`, or a `fromStack` parameter). A run that
//! ends `Ready` reads it to make due exactly the dependents that must run
//! again: those that wait for it, and those that read an output that
//! changed. Reads and writes proportional to the dependents, never a scan.
//!
//! A name stays until a run finds the entry no longer depends on the stack
//! (or is gone) and takes it out: a stale name costs one read, never a run.

use std::future::Future;

use aws_sdk_dynamodb::types::AttributeValue;

use super::expr::Write;
use super::item::s;
use super::schema::PK;
use super::{Registry, Result};

/// Prefix of the partition key of dependents items.
pub const DEPENDENTS_PREFIX: &str = "dependents#";
/// The string set of dependents' names.
const NAMES: &str = "names";
/// Adds to the set (the item made if absent).
const ADD: &str = "ADD #names :names";
/// Takes out of the set.
const DELETE: &str = "DELETE #names :names";
/// Any item (ADD makes one; DELETE of an absent item is a no-op).
const ANY: &str = "attribute_not_exists(#pk) OR attribute_exists(#pk)";

/// The partition key of the dependents item of `name`.
pub fn dependents_key(name: &str) -> String {
    format!("{DEPENDENTS_PREFIX}{name}")
}

/// The entries that depend on a stack.
pub trait Dependents: Send + Sync {
    /// Records that `dependent` depends on `upstream` (idempotent).
    fn add_dependent(
        &self,
        upstream: &str,
        dependent: &str,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Forgets that `dependent` depends on `upstream`.
    fn remove_dependent(
        &self,
        upstream: &str,
        dependent: &str,
    ) -> impl Future<Output = Result<()>> + Send;
    /// The entries recorded as depending on `upstream`, sorted.
    fn dependents(&self, upstream: &str) -> impl Future<Output = Result<Vec<String>>> + Send;
}

impl Dependents for Registry {
    async fn add_dependent(&self, upstream: &str, dependent: &str) -> Result<()> {
        self.write_if(
            dependents_key(upstream),
            Write::Update(ADD),
            ANY,
            vec![(":names", AttributeValue::Ss(vec![dependent.to_owned()]))],
        )
        .await
        .map(drop)
    }

    async fn remove_dependent(&self, upstream: &str, dependent: &str) -> Result<()> {
        self.write_if(
            dependents_key(upstream),
            Write::Update(DELETE),
            ANY,
            vec![(":names", AttributeValue::Ss(vec![dependent.to_owned()]))],
        )
        .await
        .map(drop)
    }

    async fn dependents(&self, upstream: &str) -> Result<Vec<String>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(dependents_key(upstream)))
            .projection_expression("#names")
            .expression_attribute_names("#names", NAMES)
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.aws_error("GetItem", e))?;
        let mut names = out
            .item()
            .and_then(|item| item.get(NAMES))
            .and_then(|v| v.as_ss().ok())
            .cloned()
            .unwrap_or_default();
        names.sort();
        Ok(names)
    }
}
