//! The stacks that follow a source, as the triggers read them: enough to
//! start each or leave it alone, and nothing of its spec. The webhook is a
//! public URL's function; what its role may read of the registry is only
//! this (an IAM condition on `dynamodb:Attributes`), never the specs and
//! their parameters.

use aws_sdk_dynamodb::types::{AttributeValue, Select};

use super::expr::{self, names};
use super::item::s;
use super::schema::{INDEX_BY_SOURCE, PK, attr};
use super::{Registry, RegistryError, Result};
use crate::clock::EpochMillis;
use crate::status::Phase;

/// One stack that follows a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Follower {
    pub name: String,
    /// Suspended: by the operator (`stacksync suspend`) or by its spec.
    pub suspended: bool,
    /// Its deletion was requested.
    pub deleting: bool,
    /// Its lease runs out then, if held.
    pub lease_expires_at: Option<EpochMillis>,
    /// The revision its last run worked at.
    pub last_attempted_revision: Option<String>,
    /// Its last run waits for a sync window to open: the queue starts it
    /// then, at the head of that time.
    pub held_by_window: bool,
    /// Its last run waits for its fleet's rollout ([`crate::rollout`]):
    /// the run that ends the wave before starts it.
    pub held_by_rollout: bool,
    /// The phase its last run recorded.
    pub phase: Option<Phase>,
    /// When its last run ended.
    pub last_reconcile_at: Option<EpochMillis>,
}

impl Follower {
    /// Its last run waits for something that starts it when it comes (a
    /// window, a wave): a push or a moved head does not start it.
    pub fn held(&self) -> bool {
        self.held_by_window || self.held_by_rollout
    }

    /// As a rollout sees it.
    pub fn peer(&self, now: EpochMillis) -> crate::rollout::Peer {
        crate::rollout::Peer {
            revision: self.last_attempted_revision.clone(),
            phase: self.phase,
            ended_at: self.last_reconcile_at,
            running: self.lease_expires_at.is_some_and(|at| at > now),
            out: self.suspended || self.deleting,
            held_by_window: self.held_by_window,
        }
    }
}

/// The attributes the triggers may read through the `by-source` index
/// (their roles' `dynamodb:Attributes` condition lists the same, with the
/// index's key).
pub const FOLLOWER_ATTRIBUTES: [&str; 8] = [
    PK,
    attr::NAME,
    attr::SUSPENDED,
    attr::SPEC_SUSPEND,
    attr::DELETION_REQUESTED_AT,
    attr::LEASE_EXPIRES_AT,
    attr::STATUS,
    attr::WATCH,
];

type Item = std::collections::HashMap<String, AttributeValue>;

impl Follower {
    fn from_item(item: &Item) -> Result<Follower> {
        let text = |v: Option<&AttributeValue>| v.and_then(|v| v.as_s().ok()).cloned();
        let nested = |top: &str, inner: &str| {
            text(
                item.get(top)
                    .and_then(|v| v.as_m().ok())
                    .and_then(|m| m.get(inner)),
            )
        };
        let name = text(item.get(attr::NAME)).ok_or_else(|| RegistryError::Corrupt {
            key: text(item.get(PK)).unwrap_or_default(),
            detail: "the item has no name".into(),
        })?;
        let phase = nested(attr::WATCH, "phase")
            .and_then(|p| serde_json::from_value::<Phase>(serde_json::Value::String(p)).ok());
        Ok(Follower {
            name,
            // Items written before `specSuspend`: the phase its last run
            // recorded says it.
            suspended: [attr::SUSPENDED, attr::SPEC_SUSPEND]
                .iter()
                .any(|a| matches!(item.get(*a), Some(AttributeValue::Bool(true))))
                || phase == Some(Phase::Suspended),
            deleting: item.contains_key(attr::DELETION_REQUESTED_AT),
            lease_expires_at: item
                .get(attr::LEASE_EXPIRES_AT)
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse().ok()),
            last_attempted_revision: nested(attr::STATUS, "lastAttemptedRevision"),
            held_by_window: item
                .get(attr::STATUS)
                .and_then(|v| v.as_m().ok())
                .and_then(|m| m.get("heldByWindow"))
                .is_some_and(|v| matches!(v, AttributeValue::Bool(true))),
            held_by_rollout: item
                .get(attr::STATUS)
                .and_then(|v| v.as_m().ok())
                .is_some_and(|m| m.contains_key("heldByRollout")),
            phase,
            last_reconcile_at: nested(attr::STATUS, "lastReconcileAt")
                .and_then(|t| crate::clock::parse_rfc3339(&t)),
        })
    }
}

impl Registry {
    /// Every stack following the source `key`, by name, read through the
    /// `by-source` index with only [`FOLLOWER_ATTRIBUTES`] projected.
    pub(super) async fn followers_of(&self, key: &str) -> Result<Vec<Follower>> {
        let mut found = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(INDEX_BY_SOURCE)
                .key_condition_expression(expr::SOURCE_IS)
                .projection_expression(expr::FOLLOWER)
                .select(Select::SpecificAttributes)
                .set_expression_attribute_names(Some(names(&[expr::SOURCE_IS, expr::FOLLOWER])))
                .expression_attribute_values(":value", s(key))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| self.aws_error("Query", e))?;
            for item in out.items() {
                // One item that cannot be read is logged and left out: the
                // others still follow their source.
                match Follower::from_item(item) {
                    Ok(f) => found.push(f),
                    Err(e) => {
                        tracing::warn!(error = %e, "registry item skipped: it cannot be read")
                    }
                }
            }
            match out.last_evaluated_key {
                Some(next) if !next.is_empty() => start = Some(next),
                _ => break,
            }
        }
        found.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(found)
    }
}

/// A follower as the in-memory registry keeps it: the same reading of the
/// entry (its spec is not looked at).
pub fn follower_of(entry: &super::StackEntry) -> Follower {
    Follower {
        name: entry.name.clone(),
        suspended: entry.is_suspended() || entry.status.phase == Phase::Suspended,
        deleting: entry.deletion_requested_at.is_some(),
        lease_expires_at: entry.lease.as_ref().map(|l| l.expires_at.0),
        last_attempted_revision: entry.status.run.last_attempted_revision.clone(),
        held_by_window: entry.status.inputs.held_by_window,
        held_by_rollout: entry.status.inputs.held_by_rollout.is_some(),
        phase: Some(entry.status.phase),
        last_reconcile_at: entry.status.times.last_reconcile_at.map(|t| t.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_is_read_from_its_projected_attributes_alone() {
        let map = |pairs: &[(&str, &str)]| {
            AttributeValue::M(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), s(*v)))
                    .collect(),
            )
        };
        let item: Item = [
            (PK.to_owned(), s("stack#orders")),
            (attr::NAME.to_owned(), s("orders")),
            (
                attr::LEASE_EXPIRES_AT.to_owned(),
                AttributeValue::N("42".into()),
            ),
            (
                attr::STATUS.to_owned(),
                map(&[
                    ("lastAttemptedRevision", "abc"),
                    ("lastReconcileAt", "2026-11-27T10:00:00.000Z"),
                    ("heldByRollout", "abc"),
                ]),
            ),
            (attr::WATCH.to_owned(), map(&[("phase", "Suspended")])),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            Follower::from_item(&item).unwrap(),
            Follower {
                name: "orders".into(),
                suspended: true,
                deleting: false,
                lease_expires_at: Some(42),
                last_attempted_revision: Some("abc".into()),
                held_by_window: false,
                held_by_rollout: true,
                phase: Some(Phase::Suspended),
                last_reconcile_at: crate::clock::parse_rfc3339("2026-11-27T10:00:00Z"),
            }
        );
        let nameless: Item = [(PK.to_owned(), s("stack#x"))].into_iter().collect();
        assert!(Follower::from_item(&nameless).is_err());
    }
}
