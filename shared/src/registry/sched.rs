//! The registry's reads and writes for the triggers: the scheduler's due
//! entries and source items, and the marks the events function leaves.
//!
//! Every write here is conditional on what was read, so a trigger can never
//! overwrite a newer `nextReconcileAt` written by a run (which holds the lease
//! and writes the status) or by an operator.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::item::{n, s};
use super::schema::{self, INDEX_BY_NEXT_RECONCILE, SCHED_SHARDS, SOURCE_PREFIX, attr};
use super::{
    Registry, RegistryError, Result, StackEntry, decode_entry, is_condition_failure, names,
};
use crate::clock::EpochMillis;

/// A source the scheduler watches: one item per normal URL and ref, holding
/// the last head every follower was brought to (or started for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRecord {
    /// [`crate::source::source_key`]: normal URL and ref.
    pub key: String,
    /// A URL to list the refs from (the first follower's spelling).
    pub url: String,
    /// The ref followed (`main` when the spec names none).
    pub reference: String,
    /// The head recorded last; `None` for a source not looked at yet.
    pub head: Option<String>,
    /// When the source's followers were last listed.
    pub followers_checked_at: Option<EpochMillis>,
}

type Item = HashMap<String, AttributeValue>;

fn text(item: &Item, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

fn number(item: &Item, name: &str) -> Option<i64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|t| t.parse().ok())
}

fn source_from_item(item: &Item) -> Result<SourceRecord> {
    let pk = text(item, schema::PK).unwrap_or_default();
    let corrupt = |detail: &str| RegistryError::Corrupt {
        key: pk.clone(),
        detail: detail.to_owned(),
    };
    let key = pk
        .strip_prefix(SOURCE_PREFIX)
        .ok_or_else(|| corrupt("not a source item"))?
        .to_owned();
    Ok(SourceRecord {
        url: text(item, attr::URL).ok_or_else(|| corrupt("the item has no url"))?,
        reference: text(item, attr::REF).ok_or_else(|| corrupt("the item has no ref"))?,
        head: text(item, attr::HEAD),
        followers_checked_at: number(item, attr::FOLLOWERS_CHECKED_AT),
        key,
    })
}

impl Registry {
    /// One conditional `UpdateItem` of the item `pk`: `true` if it was made,
    /// `false` if the condition did not hold (someone else wrote first).
    async fn update_if(
        &self,
        pk: String,
        update: &str,
        condition: &str,
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<bool> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(schema::PK, s(pk))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names(&[update, condition])))
            .set_expression_attribute_values(Some(
                values.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            ))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failure(&e) => Ok(false),
            Err(e) => Err(self.aws_error("UpdateItem", e)),
        }
    }

    /// Runs a query to its end (or until `limit` items), returning the items.
    async fn query_all(
        &self,
        index: &str,
        condition: &str,
        values: Item,
        limit: Option<usize>,
    ) -> Result<Vec<Item>> {
        let mut found = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let page_limit = limit.map(|l| i32::try_from(l - found.len()).unwrap_or(i32::MAX));
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(index)
                .key_condition_expression(condition)
                .set_expression_attribute_names(Some(names(&[condition])))
                .set_expression_attribute_values(Some(values.clone()))
                .set_limit(page_limit)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| self.aws_error("Query", e))?;
            found.extend(out.items().iter().cloned());
            if limit.is_some_and(|l| found.len() >= l) {
                break;
            }
            match out.last_evaluated_key {
                Some(next) if !next.is_empty() => start = Some(next),
                _ => break,
            }
        }
        Ok(found)
    }

    /// The entries due at `now` (`nextReconcileAt` ≤ now), oldest first, at
    /// most `per_shard` from each scheduler shard: reads proportional to the
    /// due entries, never to the registry.
    pub async fn due(&self, now: EpochMillis, per_shard: usize) -> Result<Vec<StackEntry>> {
        let mut due = Vec::new();
        for shard in 0..SCHED_SHARDS {
            let items = self
                .query_all(
                    INDEX_BY_NEXT_RECONCILE,
                    "#schedShard = :shard AND #nextReconcileAt <= :now",
                    HashMap::from([
                        (":shard".to_owned(), s(shard.to_string())),
                        (":now".to_owned(), n(now)),
                    ]),
                    Some(per_shard.max(1)),
                )
                .await?;
            for item in &items {
                due.push(decode_entry(item)?);
            }
        }
        due.sort_by_key(|e| (e.status.next_reconcile_at.map(|t| t.0), e.name.clone()));
        Ok(due)
    }

    /// Every source item (one query of the scheduler index's `sources` shard).
    pub async fn sources(&self) -> Result<Vec<SourceRecord>> {
        let items = self
            .query_all(
                INDEX_BY_NEXT_RECONCILE,
                "#schedShard = :shard",
                HashMap::from([(":shard".to_owned(), s(schema::SOURCES_SHARD))]),
                None,
            )
            .await?;
        items.iter().map(source_from_item).collect()
    }

    /// Adds a source item with no head yet, unless one exists. Returns
    /// whether it was added.
    pub async fn add_source(&self, key: &str, url: &str, reference: &str) -> Result<bool> {
        self.update_if(
            format!("{SOURCE_PREFIX}{key}"),
            "SET #url = :url, #ref = :ref, #schedShard = :shard, #nextReconcileAt = :zero",
            "attribute_not_exists(#pk)",
            vec![
                (":url", s(url)),
                (":ref", s(reference)),
                (":shard", s(schema::SOURCES_SHARD)),
                (":zero", n(0)),
            ],
        )
        .await
    }

    /// Records `head` as the source's head, if the item still holds `seen`
    /// (`None`: no head yet). Returns false when someone recorded another
    /// head meanwhile (or the item is gone): the next run looks again.
    pub async fn record_source_head(
        &self,
        key: &str,
        seen: Option<&str>,
        head: &str,
        now: EpochMillis,
    ) -> Result<bool> {
        let mut values = vec![(":head", s(head)), (":now", n(now))];
        let condition = match seen {
            Some(seen) => {
                values.push((":seen", s(seen)));
                "#head = :seen"
            }
            None => "attribute_exists(#pk) AND attribute_not_exists(#head)",
        };
        self.update_if(
            format!("{SOURCE_PREFIX}{key}"),
            "SET #head = :head, #followersCheckedAt = :now",
            condition,
            values,
        )
        .await
    }

    /// Drops a source item nobody follows any more, if it still holds `seen`.
    pub async fn forget_source(&self, key: &str, seen: Option<&str>) -> Result<bool> {
        let condition = match seen {
            Some(_) => "#head = :seen",
            None => "attribute_exists(#pk) AND attribute_not_exists(#head)",
        };
        let mut request = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key(schema::PK, s(format!("{SOURCE_PREFIX}{key}")))
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names(&[condition])));
        if let Some(seen) = seen {
            request = request.expression_attribute_values(":seen", s(seen));
        }
        match request.send().await {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failure(&e) => Ok(false),
            Err(e) => Err(self.aws_error("DeleteItem", e)),
        }
    }

    /// Moves a stack's `nextReconcileAt` from `from` to `to`, only if it is
    /// still `from` (a run that wrote since wins). Returns whether it moved.
    pub async fn move_due(&self, name: &str, from: EpochMillis, to: EpochMillis) -> Result<bool> {
        self.update_if(
            schema::stack_key(name),
            "SET #nextReconcileAt = :to",
            "#nextReconcileAt = :from",
            vec![(":from", n(from)), (":to", n(to))],
        )
        .await
    }

    /// Makes a stack due at `now` (the scheduler starts it on its next run),
    /// unless it is due already or gone. Returns whether it changed.
    pub async fn mark_due(&self, name: &str, now: EpochMillis) -> Result<bool> {
        self.update_if(
            schema::stack_key(name),
            "SET #nextReconcileAt = :now",
            "attribute_exists(#pk) AND (attribute_not_exists(#nextReconcileAt) OR #nextReconcileAt > :now)",
            vec![(":now", n(now))],
        )
        .await
    }

    /// Every entry whose CloudFormation stack is named `stack_name` (in any
    /// region: the caller compares), through the stack-name index.
    pub async fn by_stack_name(&self, stack_name: &str) -> Result<Vec<StackEntry>> {
        self.by_index(schema::INDEX_BY_STACK_NAME, attr::STACK_NAME, stack_name)
            .await
    }

    /// Every entry whose `attribute` is `value`, through `index`, by name.
    pub(super) async fn by_index(
        &self,
        index: &str,
        attribute: &str,
        value: &str,
    ) -> Result<Vec<StackEntry>> {
        let condition = format!("#{attribute} = :value");
        let items = self
            .query_all(
                index,
                &condition,
                HashMap::from([(":value".to_owned(), s(value))]),
                None,
            )
            .await?;
        let mut found = items.iter().map(decode_entry).collect::<Result<Vec<_>>>()?;
        found.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(found)
    }
}
