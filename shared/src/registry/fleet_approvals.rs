//! Changes approved once for a fleet (`approval:` on a fleet): when a
//! person approves a target's change set, its rows (what it does to each
//! resource, [`crate::pull_request::rows_hash`]) are recorded for the
//! fleet and revision, one item each (`approved#FLEET#REVISION#ROWS`, who
//! approved, kept 30 days); a later target's change set with the same rows
//! at the same revision runs without asking again: reviewed = executed.
//! An item per approval: no two writers race on one.

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::types::AttributeValue;

use super::item::s;
use super::schema::{PK, TTL_ATTRIBUTE};
use super::{Registry, Result};
use crate::clock::EpochMillis;

/// Prefix of the partition key of an approval recorded for a fleet.
pub const APPROVED_PREFIX: &str = "approved#";
/// How long an approval recorded for a fleet is kept.
pub const APPROVED_KEPT_SECONDS: i64 = 30 * 86_400;
/// Who approved.
const BY: &str = "by";

/// The key of `rows` approved for `fleet` at `revision`.
pub fn approved_key(fleet: &str, revision: &str, rows: &str) -> String {
    format!(
        "{APPROVED_PREFIX}{fleet}#{}#{rows}",
        revision.to_ascii_lowercase()
    )
}

/// The changes approved for fleets.
pub trait FleetApprovals: Send + Sync {
    /// Records that `by` approved a change set of `rows` for a target of
    /// `fleet` at `revision`, unless someone did already (the first
    /// approver is kept: the write is conditional).
    fn approve_rows(
        &self,
        fleet: &str,
        revision: &str,
        rows: &str,
        by: &str,
        now: EpochMillis,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Who approved `rows` for `fleet` at `revision`, if anyone did.
    fn rows_approved(
        &self,
        fleet: &str,
        revision: &str,
        rows: &str,
    ) -> impl Future<Output = Result<Option<String>>> + Send;
}

impl FleetApprovals for Registry {
    async fn approve_rows(
        &self,
        fleet: &str,
        revision: &str,
        rows: &str,
        by: &str,
        now: EpochMillis,
    ) -> Result<()> {
        let expires = now / 1000 + APPROVED_KEPT_SECONDS;
        let item = HashMap::from([
            (PK.to_owned(), s(approved_key(fleet, revision, rows))),
            (BY.to_owned(), s(by)),
            (
                TTL_ATTRIBUTE.to_owned(),
                AttributeValue::N(expires.to_string()),
            ),
        ]);
        // `false`: approved already, by whoever the item names.
        self.put_if_absent(item).await.map(drop)
    }

    async fn rows_approved(
        &self,
        fleet: &str,
        revision: &str,
        rows: &str,
    ) -> Result<Option<String>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(approved_key(fleet, revision, rows)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.aws_error("GetItem", e))?;
        Ok(out
            .item()
            .and_then(|i| i.get(BY))
            .and_then(|v| v.as_s().ok())
            .cloned())
    }
}
