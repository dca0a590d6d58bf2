//! Run slots: at most `MaxRunsPerAccount` runs at once in one account and
//! region, so that a fleet's runs never meet CloudFormation's throttling.
//! One item per account and region (`slots#ACCOUNT/REGION`) holds a map of
//! the runs holding a slot (execution name → when the slot runs out). A
//! run takes one at its start (a conditional write: the map smaller than
//! the cap, or its own name in it already) and gives it back at its end;
//! a slot whose run died runs out by itself, and the next run that finds
//! the map full takes the ones that ran out away (each conditional on its
//! time, so a slot taken again meanwhile stays).

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::types::AttributeValue;

use super::expr::is_condition_failure;
use super::item::s;
use super::schema::PK;
use super::{Registry, Result};
use crate::clock::EpochMillis;

/// Prefix of the partition key of slot items.
pub const SLOTS_PREFIX: &str = "slots#";
/// The map of holders.
const HOLDERS: &str = "holders";
/// The default `MaxRunsPerAccount`.
pub const DEFAULT_MAX_RUNS_PER_ACCOUNT: u32 = 10;
/// The largest `MaxRunsPerAccount`.
pub const MAX_RUNS_PER_ACCOUNT: u32 = 1000;

/// The slot item's key of an account and region.
pub fn slots_key(account: &str, region: &str) -> String {
    format!("{SLOTS_PREFIX}{account}/{region}")
}

/// What a take found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// The run holds a slot (it may have held it already).
    Yes,
    /// Every slot is held, by runs whose slots have not run out: how many.
    Full { holders: usize },
}

/// The slots of runs at once, per account and region.
pub trait Slots: Send + Sync {
    /// Takes a slot of `key` for `holder` until `expires_at`, if fewer than
    /// `cap` are held at `now` (slots that ran out are taken away first).
    fn take_slot(
        &self,
        key: &str,
        holder: &str,
        cap: u32,
        expires_at: EpochMillis,
        now: EpochMillis,
    ) -> impl Future<Output = Result<Taken>> + Send;
    /// Gives `holder`'s slot back (none held: nothing happens).
    fn release_slot(&self, key: &str, holder: &str) -> impl Future<Output = Result<()>> + Send;
    /// Who holds a slot of `key`, and until when.
    fn slot_holders(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<HashMap<String, EpochMillis>>> + Send;
}

/// Holders as a DynamoDB map.
fn holders_of(item: Option<&HashMap<String, AttributeValue>>) -> HashMap<String, EpochMillis> {
    item.and_then(|i| i.get(HOLDERS))
        .and_then(|v| v.as_m().ok())
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_n().ok()?.parse().ok()?)))
                .collect()
        })
        .unwrap_or_default()
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// How many times a take tries again after another run's write won.
const TAKE_ATTEMPTS: usize = 5;

impl Registry {
    /// Adds `holder` if the map is below `cap` or holds it already.
    async fn add_holder(&self, key: &str, holder: &str, cap: u32, expires_at: i64) -> Result<bool> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(key))
            .update_expression("SET #holders.#holder = :expires")
            // `attribute_exists(#holders)` first: moto fails a `size` of an
            // attribute that is not there (AWS finds the condition false).
            .condition_expression(
                "attribute_exists(#holders.#holder) OR \
                 (attribute_exists(#holders) AND size(#holders) < :cap)",
            )
            .expression_attribute_names("#holders", HOLDERS)
            .expression_attribute_names("#holder", holder)
            .expression_attribute_values(":expires", n(expires_at))
            .expression_attribute_values(":cap", n(cap))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failure(&e) => Ok(false),
            Err(e) => Err(self.aws_error("UpdateItem", e)),
        }
    }

    /// The item made with `holder` in it, if there is none yet.
    async fn first_holder(&self, key: &str, holder: &str, expires_at: i64) -> Result<bool> {
        let holders = HashMap::from([(holder.to_owned(), n(expires_at))]);
        self.put_if_absent(HashMap::from([
            (PK.to_owned(), s(key)),
            (HOLDERS.to_owned(), AttributeValue::M(holders)),
        ]))
        .await
    }

    /// Takes away the slots that ran out, each only if its time is still
    /// the one read (one write for all).
    async fn remove_expired(&self, key: &str, expired: &[(String, EpochMillis)]) -> Result<()> {
        let mut update = Vec::new();
        let mut condition = Vec::new();
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(key));
        request = request.expression_attribute_names("#holders", HOLDERS);
        for (i, (holder, at)) in expired.iter().enumerate() {
            update.push(format!("#holders.#h{i}"));
            condition.push(format!("#holders.#h{i} = :t{i}"));
            request = request
                .expression_attribute_names(format!("#h{i}"), holder)
                .expression_attribute_values(format!(":t{i}"), n(at));
        }
        let result = request
            .update_expression(format!("REMOVE {}", update.join(", ")))
            .condition_expression(condition.join(" AND "))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Another run took them away, or one was taken again: read afresh.
            Err(e) if is_condition_failure(&e) => Ok(()),
            Err(e) => Err(self.aws_error("UpdateItem", e)),
        }
    }
}

impl Slots for Registry {
    async fn take_slot(
        &self,
        key: &str,
        holder: &str,
        cap: u32,
        expires_at: EpochMillis,
        now: EpochMillis,
    ) -> Result<Taken> {
        let mut holders = 0;
        for _ in 0..TAKE_ATTEMPTS {
            if self.add_holder(key, holder, cap, expires_at).await? {
                return Ok(Taken::Yes);
            }
            let found = self.slot_holders(key).await?;
            if found.is_empty() {
                // No item yet (or an empty map: the write above would have
                // passed, unless the item is gone).
                if self.first_holder(key, holder, expires_at).await? {
                    return Ok(Taken::Yes);
                }
                continue;
            }
            let expired: Vec<(String, EpochMillis)> = found
                .iter()
                .filter(|(_, at)| **at <= now)
                .map(|(h, at)| (h.clone(), *at))
                .take(25)
                .collect();
            holders = found.len() - expired.len();
            if expired.is_empty() {
                return Ok(Taken::Full { holders });
            }
            self.remove_expired(key, &expired).await?;
        }
        Ok(Taken::Full { holders })
    }

    async fn release_slot(&self, key: &str, holder: &str) -> Result<()> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(key))
            .update_expression("REMOVE #holders.#holder")
            .condition_expression("attribute_exists(#holders.#holder)")
            .expression_attribute_names("#holders", HOLDERS)
            .expression_attribute_names("#holder", holder)
            .send()
            .await;
        match result {
            // Not held (given back already, or taken away as run out).
            Err(e) if is_condition_failure(&e) => Ok(()),
            Err(e) => Err(self.aws_error("UpdateItem", e)),
            Ok(_) => Ok(()),
        }
    }

    async fn slot_holders(&self, key: &str) -> Result<HashMap<String, EpochMillis>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.aws_error("GetItem", e))?;
        Ok(holders_of(out.item()))
    }
}
