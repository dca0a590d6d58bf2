//! Every DynamoDB expression the registry writes with, and the one helper
//! that makes a conditional write. Attribute names go through `#name`
//! placeholders (several of ours, like `status` and `name`, are reserved
//! words in DynamoDB expressions); [`names`] maps them back.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;

use super::item::s;
use super::schema::PK;
use super::{Registry, Result};

/// A status written while the run goes on (with its `watch` copy).
pub const STATUS: &str = "SET #status = :status, #watch = :watch";
/// The same, moving the entry in the scheduler's index.
pub const STATUS_DUE: &str = "SET #status = :status, #watch = :watch, #nextReconcileAt = :due";
/// A run's last status, the lease given back, and the entry out of the
/// scheduler's queue (the health check watches it).
pub const FINAL_STATUS: &str = "SET #status = :status, #watch = :watch REMOVE #leaseOwner, #leaseExpiresAt, #leaseTakenAt, #leaseParked, #nextReconcileAt";
/// A run's last status and the lease given back, due again at `:due`.
pub const FINAL_STATUS_DUE: &str = "SET #status = :status, #watch = :watch, #nextReconcileAt = :due REMOVE #leaseOwner, #leaseExpiresAt, #leaseTakenAt, #leaseParked";
/// A new item: only if no item has the key.
pub const ABSENT: &str = "attribute_not_exists(#pk)";
/// A source's followers, through the `by-source` index.
pub const SOURCE_IS: &str = "#sourceKey = :value";
/// What the triggers read of a follower (`registry::followers`): nothing of
/// its spec.
pub const FOLLOWER: &str = "#pk, #name, #suspended, #specSuspend, #deletionRequestedAt, #leaseExpiresAt, #status.#lastAttemptedRevision, #status.#lastReconcileAt, #status.#heldByWindow, #status.#heldByRollout, #watch.#phase";
/// A stack's claim: free, or this entry's already.
pub const CLAIM_FREE_OR_MINE: &str = "attribute_not_exists(#pk) OR #name = :name";
/// The entry is still as the plan saw it, and not being deleted.
pub const SPEC_AT_VERSION: &str =
    "#specVersion = :expected AND attribute_not_exists(#deletionRequestedAt)";
/// A changed spec: new version, due at once.
pub const UPDATE_SPEC: &str = "SET #spec = :spec, #schemaVersion = :schemaVersion, #specHash = :specHash, #specSuspend = :specSuspend, #sourceKey = :sourceKey, #stackName = :stackName, #specVersion = :next, #updatedAt = :now, #nextReconcileAt = :due";
/// A changed spec from a registry source: its owner (source, file, commit) too.
pub const UPDATE_SPEC_OWNED: &str = "SET #spec = :spec, #schemaVersion = :schemaVersion, #specHash = :specHash, #specSuspend = :specSuspend, #sourceKey = :sourceKey, #stackName = :stackName, #specVersion = :next, #updatedAt = :now, #nextReconcileAt = :due, #owner = :owner";
/// An entry moved to another file of its source: only its owner changes.
/// The last preview posted on a pull request (`registry/reviews.rs`).
pub const SET_REVIEWED: &str = "SET #reviewed = :reviewed";
/// …merged, if it is still that pull request's at that head.
pub const SET_REVIEWED_MERGED: &str = "SET #reviewed.#merged = :true";
pub const REVIEWED_AT: &str = "#reviewed.#pullRequest = :pr AND #reviewed.#head = :head";
pub const SET_OWNER: &str = "SET #owner = :owner, #updatedAt = :now";
/// An entry its source let go: the CLI's from now on.
pub const REMOVE_OWNER: &str = "SET #updatedAt = :now REMOVE #owner";
/// A source key of an older form rewritten (the spec is the same), due at
/// once: the scheduler watches its source under the new key from its run.
pub const SET_SOURCE_KEY: &str = "SET #sourceKey = :to, #nextReconcileAt = :due";
/// Deletion requested: due at once.
pub const MARK_DELETION: &str = "SET #deletionRequestedAt = :now, #nextReconcileAt = :due";
/// The entry exists and its deletion was not requested yet.
pub const EXISTS_NOT_DELETING: &str =
    "attribute_exists(#pk) AND attribute_not_exists(#deletionRequestedAt)";
/// The entry exists, is not being deleted, and its operator flag differs.
pub const SUSPENDED_DIFFERS: &str =
    "attribute_exists(#pk) AND attribute_not_exists(#deletionRequestedAt) AND #suspended <> :flag";
/// Suspend: the operator flag.
pub const SUSPEND: &str = "SET #suspended = :flag, #updatedAt = :now";
/// Resume: the operator flag, due at once.
pub const RESUME: &str = "SET #suspended = :flag, #updatedAt = :now, #nextReconcileAt = :due";
/// Nobody holds the lease, it expired, or the caller already holds it.
pub const LEASE_FREE_EXPIRED_OR_MINE: &str = "attribute_exists(#pk) AND (attribute_not_exists(#leaseOwner) OR #leaseExpiresAt <= :now OR #leaseOwner = :owner)";
/// Take the lease, from now (a retried first step, a few seconds on, takes
/// it anew: an expired lease's time must not pass to its new owner).
pub const TAKE_LEASE: &str = "SET #leaseOwner = :owner, #leaseExpiresAt = :expires, #leaseTakenAt = :now REMOVE #leaseParked";
/// Extend the lease.
pub const EXTEND_LEASE: &str = "SET #leaseExpiresAt = :expires";
/// The caller holds the lease.
pub const HOLDS_LEASE: &str = "#leaseOwner = :owner";
/// Give the lease back.
pub const DROP_LEASE: &str = "REMOVE #leaseOwner, #leaseExpiresAt, #leaseTakenAt, #leaseParked";
/// Extend the lease and record the run parked until its stack's event.
pub const PARK: &str = "SET #leaseExpiresAt = :expires, #leaseParked = :parked";
/// The caller holds the lease and the entry is being deleted.
pub const HOLDS_LEASE_AND_DELETING: &str =
    "#leaseOwner = :owner AND attribute_exists(#deletionRequestedAt)";
/// Move an entry in the scheduler's index…
pub const SET_DUE: &str = "SET #nextReconcileAt = :to";
/// …or out of it…
pub const REMOVE_DUE: &str = "REMOVE #nextReconcileAt";
/// …only if it is still where it was read.
pub const DUE_AT: &str = "#nextReconcileAt = :from";
/// Make an entry due at `:now`…
pub const SET_DUE_NOW: &str = "SET #nextReconcileAt = :now";
/// …unless it is due by then already, or gone.
pub const NOT_DUE_YET: &str =
    "attribute_exists(#pk) AND (attribute_not_exists(#nextReconcileAt) OR #nextReconcileAt > :now)";
/// A new source item, with no head yet.
pub const NEW_SOURCE: &str =
    "SET #url = :url, #ref = :ref, #schedShard = :shard, #nextReconcileAt = :zero";
/// The same, listed with a secret.
pub const NEW_SOURCE_WITH_CREDENTIALS: &str = "SET #url = :url, #ref = :ref, #schedShard = :shard, #nextReconcileAt = :zero, #credentialsSecret = :cred";
/// The secret a source is listed with…
pub const SET_CREDENTIALS: &str = "SET #credentialsSecret = :cred";
/// …or none.
pub const REMOVE_CREDENTIALS: &str = "REMOVE #credentialsSecret";
/// Only if the item is there.
pub const EXISTS: &str = "attribute_exists(#pk)";
/// A registry source's status written, its version moved on.
pub const SET_SOURCE_STATUS: &str = "SET #status = :status, #specVersion = :next";
/// A registry source still at the version its status was read at.
pub const SOURCE_AT_VERSION: &str = "#specVersion = :expected";
/// A source's head, and when its followers were looked at.
pub const SET_HEAD: &str = "SET #head = :head, #followersCheckedAt = :now";
/// The source still holds the head that was read…
pub const HEAD_IS: &str = "#head = :seen";
/// …or has none yet.
pub const NO_HEAD_YET: &str = "attribute_exists(#pk) AND attribute_not_exists(#head)";
/// Due entries of one shard of the scheduler's index.
pub const DUE_IN_SHARD: &str = "#schedShard = :shard AND #nextReconcileAt <= :now";
/// Every item of one shard of the scheduler's index.
pub const IN_SHARD: &str = "#schedShard = :shard";
/// Stack entries only (a listing).
pub const IS_STACK: &str = "begins_with(#pk, :prefix)";

/// The `#name` placeholders used in DynamoDB expressions, mapped to the
/// attribute names (`#status` → `status`).
pub fn names(expressions: &[&str]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for expression in expressions {
        let mut rest = *expression;
        while let Some(start) = rest.find('#') {
            let tail = &rest[start + 1..];
            let len = tail
                .find(|c: char| !c.is_ascii_alphanumeric())
                .unwrap_or(tail.len());
            out.insert(format!("#{}", &tail[..len]), tail[..len].to_owned());
            rest = &tail[len..];
        }
    }
    out
}

/// The condition of a write did not hold.
pub fn is_condition_failure<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> bool {
    err.code() == Some("ConditionalCheckFailedException")
}

/// The values of an expression: `(":name", value)`.
pub type Values = Vec<(&'static str, AttributeValue)>;

fn values(values: Values) -> Option<HashMap<String, AttributeValue>> {
    (!values.is_empty()).then(|| values.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// What a conditional write of the registry is.
#[derive(Debug, Clone, Copy)]
pub enum Write<'a> {
    /// `UpdateItem` with this update expression.
    Update(&'a str),
    /// `DeleteItem`.
    Delete,
}

impl Registry {
    /// One conditional write of the item `pk`: `true` if it was made,
    /// `false` if `condition` did not hold (someone else wrote first, or the
    /// item is not as expected): every write that can race goes through here.
    pub(super) async fn write_if(
        &self,
        pk: String,
        write: Write<'_>,
        condition: &str,
        vals: Values,
    ) -> Result<bool> {
        let result = match write {
            Write::Update(update) => self
                .client
                .update_item()
                .table_name(&self.table)
                .key(PK, s(pk))
                .update_expression(update)
                .condition_expression(condition)
                .set_expression_attribute_names(Some(names(&[update, condition])))
                .set_expression_attribute_values(values(vals))
                .send()
                .await
                .map(drop)
                .map_err(|e| (is_condition_failure(&e), self.aws_error("UpdateItem", e))),
            Write::Delete => self
                .client
                .delete_item()
                .table_name(&self.table)
                .key(PK, s(pk))
                .condition_expression(condition)
                .set_expression_attribute_names(Some(names(&[condition])))
                .set_expression_attribute_values(values(vals))
                .send()
                .await
                .map(drop)
                .map_err(|e| (is_condition_failure(&e), self.aws_error("DeleteItem", e))),
        };
        match result {
            Ok(()) => Ok(true),
            Err((true, _)) => Ok(false),
            Err((false, e)) => Err(e),
        }
    }

    /// A new item, if no item has its key: `true` if it was written.
    pub(super) async fn put_if_absent(
        &self,
        item: HashMap<String, AttributeValue>,
    ) -> Result<bool> {
        self.put_if(item, ABSENT, Vec::new()).await
    }

    /// A whole item, if `condition` holds of the one it replaces: `true` if
    /// it was written.
    pub(super) async fn put_if(
        &self,
        item: HashMap<String, AttributeValue>,
        condition: &str,
        vals: Values,
    ) -> Result<bool> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names(&[condition])))
            .set_expression_attribute_values(values(vals))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failure(&e) => Ok(false),
            Err(e) => Err(self.aws_error("PutItem", e)),
        }
    }

    /// Runs a query of `index` to its end (or until `limit` items).
    pub(super) async fn query_all(
        &self,
        index: &str,
        condition: &str,
        vals: Values,
        limit: Option<usize>,
    ) -> Result<Vec<HashMap<String, AttributeValue>>> {
        let mut found = Vec::new();
        let mut start = None;
        let vals = values(vals);
        loop {
            let page_limit = limit.map(|l| i32::try_from(l - found.len()).unwrap_or(i32::MAX));
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(index)
                .key_condition_expression(condition)
                .set_expression_attribute_names(Some(names(&[condition])))
                .set_expression_attribute_values(vals.clone())
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_map_to_attribute_names() {
        let found = names(&[FINAL_STATUS_DUE, HOLDS_LEASE]);
        assert_eq!(found.get("#status").map(String::as_str), Some("status"));
        assert_eq!(
            found.get("#nextReconcileAt").map(String::as_str),
            Some("nextReconcileAt")
        );
        assert_eq!(
            found.get("#leaseOwner").map(String::as_str),
            Some("leaseOwner")
        );
        assert_eq!(found.get("#watch").map(String::as_str), Some("watch"));
        assert_eq!(
            found.len(),
            7,
            "status, watch, nextReconcileAt and the four of the lease"
        );
    }
}
