//! The scheduler's queue and sources, and the marks the events function
//! leaves: due entries (the `by-next-reconcile` index, spread over shards),
//! source items with the head their followers were last brought to.
//!
//! Every write here is conditional on what was read, so a trigger can never
//! overwrite a newer `nextReconcileAt` written by a run (which holds the lease
//! and writes the status) or by an operator.

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::types::AttributeValue;

use super::expr::{self, Write};
use super::item::{Watch, from_attr, n, s};
use super::schema::{
    self, INDEX_BY_NEXT_RECONCILE, INDEX_BY_SHARD, SCHED_SHARDS, SOURCE_PREFIX, attr,
};
use super::{Due, Registry, RegistryError, Result, decode_entries};
use crate::clock::EpochMillis;
use crate::seen::Seen;
use crate::status::Phase;

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
    /// The secret its refs are listed with (a follower's
    /// `source.credentialsSecret`: an ARN, never the secret).
    pub credentials: Option<String>,
}

/// A stack as the scheduler's health check reads it (the `by-shard`
/// index): what it judges by, and nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub name: String,
    /// The CloudFormation stack's name.
    pub stack_name: String,
    /// `None`: the entry has no `watch` yet (written before this version).
    pub phase: Option<Phase>,
    /// The stack as the last successful run left it.
    pub seen: Option<Seen>,
    pub suspended: bool,
    pub deleting: bool,
    pub lease_expires_at: Option<EpochMillis>,
    pub next_reconcile_at: Option<EpochMillis>,
    /// What the scheduler needs of the drift record (`watch.drift`).
    pub drift: Option<crate::drift::DriftWatch>,
}

/// The scheduler's reads and marks.
pub trait Schedule: Send + Sync {
    /// Every stack, as the health check needs it: a read of a narrow index,
    /// proportional to the number of stacks but a few hundred bytes each.
    fn watched(&self) -> impl Future<Output = Result<Vec<Watched>>> + Send;
    /// The entries due at `now` (`nextReconcileAt` ≤ now), oldest first, at
    /// most `per_shard` from each shard of the queue: reads proportional to
    /// the due entries, never to the registry.
    /// Items that cannot be read are skipped, and returned apart.
    fn due(&self, now: EpochMillis, per_shard: usize) -> impl Future<Output = Result<Due>> + Send;
    /// Every source item.
    fn sources(&self) -> impl Future<Output = Result<Vec<SourceRecord>>> + Send;
    /// Adds a source item with no head yet, unless one exists. Returns
    /// whether it was added.
    fn add_source(
        &self,
        key: &str,
        url: &str,
        reference: &str,
        credentials: Option<&str>,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Sets the secret a source's refs are listed with (a follower's spec
    /// changed it). Returns false when the source item is gone.
    fn set_source_credentials(
        &self,
        key: &str,
        credentials: Option<&str>,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Records `head` as the source's head, if the item still holds `seen`
    /// (`None`: no head yet). Returns false when someone recorded another
    /// head meanwhile (or the item is gone): the next run looks again.
    fn record_source_head(
        &self,
        key: &str,
        seen: Option<&str>,
        head: &str,
        now: EpochMillis,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Drops a source item nobody follows any more, if it still holds `seen`.
    fn forget_source(
        &self,
        key: &str,
        seen: Option<&str>,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Moves a stack's `nextReconcileAt` from `from` to `to` (`None`: out
    /// of the queue), only if it is still `from` (a run that wrote since
    /// wins). Returns whether it moved.
    fn move_due(
        &self,
        name: &str,
        from: EpochMillis,
        to: Option<EpochMillis>,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Makes a stack due at `at` (the scheduler starts it on its first run
    /// from then), unless it is due by then already, or gone. Returns
    /// whether it changed.
    fn mark_due(&self, name: &str, at: EpochMillis) -> impl Future<Output = Result<bool>> + Send;
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
        credentials: text(item, attr::CREDENTIALS),
        key,
    })
}

fn watched_from_item(item: &Item) -> Result<Watched> {
    let pk = text(item, schema::PK).unwrap_or_default();
    let corrupt = |detail: String| RegistryError::Corrupt {
        key: pk.clone(),
        detail,
    };
    let watch: Option<Watch> = item
        .get(attr::WATCH)
        .map(|v| {
            from_attr(v)
                .and_then(|json| serde_json::from_value(json).map_err(|e| e.to_string()))
                .map_err(|e| corrupt(format!("{}: {e}", attr::WATCH)))
        })
        .transpose()?;
    Ok(Watched {
        name: text(item, attr::NAME).ok_or_else(|| corrupt("the item has no name".into()))?,
        stack_name: text(item, attr::STACK_NAME).unwrap_or_default(),
        phase: watch.as_ref().map(|w| w.phase),
        drift: watch.as_ref().and_then(|w| w.drift.clone()),
        seen: watch.and_then(|w| w.seen),
        suspended: matches!(item.get(attr::SUSPENDED), Some(AttributeValue::Bool(true))),
        deleting: item.contains_key(attr::DELETION_REQUESTED_AT),
        lease_expires_at: number(item, attr::LEASE_EXPIRES_AT),
        next_reconcile_at: number(item, attr::NEXT_RECONCILE_AT),
    })
}

/// The condition on a source's head, and its value: the head read, or none yet.
fn head_condition(seen: Option<&str>) -> (&'static str, Vec<(&'static str, AttributeValue)>) {
    match seen {
        Some(seen) => (expr::HEAD_IS, vec![(":seen", s(seen))]),
        None => (expr::NO_HEAD_YET, Vec::new()),
    }
}

impl Schedule for Registry {
    async fn watched(&self) -> Result<Vec<Watched>> {
        let mut watched = Vec::new();
        for shard in 0..SCHED_SHARDS {
            let items = self
                .query_all(
                    INDEX_BY_SHARD,
                    expr::IN_SHARD,
                    vec![(":shard", s(shard.to_string()))],
                    None,
                )
                .await?;
            for item in &items {
                // One bad item is logged and left out; the others are checked.
                match watched_from_item(item) {
                    Ok(w) => watched.push(w),
                    Err(e) => {
                        tracing::warn!(error = %e, "registry item skipped: it cannot be read")
                    }
                }
            }
        }
        Ok(watched)
    }

    async fn due(&self, now: EpochMillis, per_shard: usize) -> Result<Due> {
        let mut due = Due::default();
        for shard in 0..SCHED_SHARDS {
            let items = self
                .query_all(
                    INDEX_BY_NEXT_RECONCILE,
                    expr::DUE_IN_SHARD,
                    vec![(":shard", s(shard.to_string())), (":now", n(now))],
                    Some(per_shard.max(1)),
                )
                .await?;
            let (entries, unreadable) = decode_entries(&items);
            due.entries.extend(entries);
            due.unreadable.extend(unreadable);
        }
        due.entries.sort_by_key(|e| {
            (
                e.status.times.next_reconcile_at.map(|t| t.0),
                e.name.clone(),
            )
        });
        Ok(due)
    }

    async fn sources(&self) -> Result<Vec<SourceRecord>> {
        let items = self
            .query_all(
                INDEX_BY_NEXT_RECONCILE,
                expr::IN_SHARD,
                vec![(":shard", s(schema::SOURCES_SHARD))],
                None,
            )
            .await?;
        items.iter().map(source_from_item).collect()
    }

    async fn add_source(
        &self,
        key: &str,
        url: &str,
        reference: &str,
        credentials: Option<&str>,
    ) -> Result<bool> {
        let (update, mut values) = match credentials {
            Some(arn) => (expr::NEW_SOURCE_WITH_CREDENTIALS, vec![(":cred", s(arn))]),
            None => (expr::NEW_SOURCE, Vec::new()),
        };
        values.extend([
            (":url", s(url)),
            (":ref", s(reference)),
            (":shard", s(schema::SOURCES_SHARD)),
            (":zero", n(0)),
        ]);
        self.write_if(
            format!("{SOURCE_PREFIX}{key}"),
            Write::Update(update),
            expr::ABSENT,
            values,
        )
        .await
    }

    async fn set_source_credentials(&self, key: &str, credentials: Option<&str>) -> Result<bool> {
        let (update, values) = match credentials {
            Some(arn) => (expr::SET_CREDENTIALS, vec![(":cred", s(arn))]),
            None => (expr::REMOVE_CREDENTIALS, Vec::new()),
        };
        self.write_if(
            format!("{SOURCE_PREFIX}{key}"),
            Write::Update(update),
            expr::EXISTS,
            values,
        )
        .await
    }

    async fn record_source_head(
        &self,
        key: &str,
        seen: Option<&str>,
        head: &str,
        now: EpochMillis,
    ) -> Result<bool> {
        let (condition, mut values) = head_condition(seen);
        values.extend([(":head", s(head)), (":now", n(now))]);
        self.write_if(
            format!("{SOURCE_PREFIX}{key}"),
            Write::Update(expr::SET_HEAD),
            condition,
            values,
        )
        .await
    }

    async fn forget_source(&self, key: &str, seen: Option<&str>) -> Result<bool> {
        let (condition, values) = head_condition(seen);
        self.write_if(
            format!("{SOURCE_PREFIX}{key}"),
            Write::Delete,
            condition,
            values,
        )
        .await
    }

    async fn move_due(
        &self,
        name: &str,
        from: EpochMillis,
        to: Option<EpochMillis>,
    ) -> Result<bool> {
        let (update, mut values) = match to {
            Some(to) => (expr::SET_DUE, vec![(":to", n(to))]),
            None => (expr::REMOVE_DUE, Vec::new()),
        };
        values.push((":from", n(from)));
        self.write_if(
            schema::stack_key(name),
            Write::Update(update),
            expr::DUE_AT,
            values,
        )
        .await
    }

    async fn mark_due(&self, name: &str, at: EpochMillis) -> Result<bool> {
        self.write_if(
            schema::stack_key(name),
            Write::Update(expr::SET_DUE_NOW),
            expr::NOT_DUE_YET,
            vec![(":now", n(at))],
        )
        .await
    }
}
