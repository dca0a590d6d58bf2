//! One stack, one entry: every entry claims the CloudFormation stack it
//! drives with a claim item (`claim#<account>#<region>#<stack name>`, naming
//! the entry), written in the same transaction as the entry. A claim that
//! another entry holds fails the transaction, so two applies that run at
//! once can never both register one stack, whatever each planned from.
//!
//! An update that moves an entry to another stack claims the new one and
//! gives the old one up in its transaction; removing an entry gives its
//! claim up with it. Entries registered before claims existed get theirs at
//! their next change.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};

use super::expr::{self, names};
use super::item::s;
use super::plan::{Action, Change};
use super::schema::{PK, attr, claim_key};
use super::{Registry, RegistryError, Result};
use crate::spec::StackSpec;

/// What one item of an apply's transaction is, so that a cancellation
/// reason can be told in the entry's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Part {
    /// The entry's own item.
    Entry,
    /// The claim of the stack it drives (now): its key.
    Claim(String),
    /// The claim of the stack it drove before, given up.
    Release(String),
}

/// The most items one change writes: the entry, its claim, and the claim
/// it gives up (an update that moves to another stack).
pub fn items_of(change: &Change) -> usize {
    match change.action {
        Action::Create => 2,
        Action::Update { .. } => 3,
        Action::Prune { .. } | Action::Rekey { .. } | Action::Move { .. } => 1,
        Action::Unchanged { .. } => 0,
    }
}

impl Registry {
    /// The claim items of a change: its stack claimed, and the one it drove
    /// before given up if that is another.
    pub(super) fn claim_items(&self, change: &Change) -> Result<Vec<(TransactWriteItem, Part)>> {
        let Some(spec) = change.spec.as_ref() else {
            return Ok(Vec::new());
        };
        let home = self.region();
        let key = claim_key(spec, home.as_deref());
        let mut items = vec![(self.claim(&change.name, &key)?, Part::Claim(key.clone()))];
        if let Some(previous) = &change.previous {
            let old = claim_key(previous, home.as_deref());
            if old != key {
                items.push((self.release(&change.name, &old)?, Part::Release(old)));
            }
        }
        Ok(items)
    }

    /// Claims `key` for the entry `name`: only if free, or its own already.
    fn claim(&self, name: &str, key: &str) -> Result<TransactWriteItem> {
        let put = Put::builder()
            .table_name(&self.table)
            .item(PK, s(key))
            .item(attr::NAME, s(name))
            .condition_expression(expr::CLAIM_FREE_OR_MINE)
            .set_expression_attribute_names(Some(names(&[expr::CLAIM_FREE_OR_MINE])))
            .expression_attribute_values(":name", s(name))
            // The holder's name, for the message, when another holds it.
            .return_values_on_condition_check_failure(
                aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
            )
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// Gives the claim `key` up: only if the entry `name` holds it (a claim
    /// that is not there is fine).
    pub(super) fn release(&self, name: &str, key: &str) -> Result<TransactWriteItem> {
        let delete = Delete::builder()
            .table_name(&self.table)
            .key(PK, s(key))
            .condition_expression(expr::CLAIM_FREE_OR_MINE)
            .set_expression_attribute_names(Some(names(&[expr::CLAIM_FREE_OR_MINE])))
            .expression_attribute_values(":name", s(name))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().delete(delete).build())
    }

    /// Drops the entry `name` (its lease holder `owner`, its deletion
    /// requested) and gives up the claim of the stack `spec` drives, in one
    /// transaction. `Ok(false)`: the entry's condition did not hold. A claim
    /// that another entry holds (it claimed the stack while this entry,
    /// registered before claims, had none) is left to it.
    pub(super) async fn remove_claimed(
        &self,
        name: &str,
        owner: &str,
        spec: &StackSpec,
    ) -> Result<bool> {
        let entry = Delete::builder()
            .table_name(&self.table)
            .key(PK, s(super::schema::stack_key(name)))
            .condition_expression(expr::HOLDS_LEASE_AND_DELETING)
            .set_expression_attribute_names(Some(names(&[expr::HOLDS_LEASE_AND_DELETING])))
            .expression_attribute_values(":owner", s(owner))
            .build()
            .map_err(build_error)?;
        let key = claim_key(spec, self.region().as_deref());
        let items = vec![
            TransactWriteItem::builder().delete(entry).build(),
            self.release(name, &key)?,
        ];
        let err = match self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
        {
            Ok(_) => return Ok(true),
            Err(err) => err,
        };
        let failed = |i: usize| {
            err.as_service_error()
                .and_then(|e| match e {
                    aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(c) => {
                        c.cancellation_reasons().get(i).and_then(|r| r.code()).map(str::to_owned)
                    }
                    _ => None,
                })
                .as_deref()
                == Some("ConditionalCheckFailed")
        };
        if failed(0) {
            return Ok(false);
        }
        if failed(1) {
            // Not this entry's claim: the entry goes alone.
            return self
                .write_if(
                    super::schema::stack_key(name),
                    expr::Write::Delete,
                    expr::HOLDS_LEASE_AND_DELETING,
                    vec![(":owner", s(owner))],
                )
                .await;
        }
        Err(self.aws_error("TransactWriteItems", err))
    }
}

/// Why a claim failed, in the entry's terms: `holder` is the entry named
/// by the claim item (from the cancellation reason), if known.
pub(super) fn claim_conflict(name: &str, key: &str, holder: Option<&str>) -> RegistryError {
    let stack = describe(key);
    let detail = match holder {
        Some(other) => format!(
            "the registry entry {other:?} already manages the CloudFormation stack {stack} \
             (registered meanwhile, or by an apply running at the same time)"
        ),
        None => format!("another registry entry already manages the CloudFormation stack {stack}"),
    };
    RegistryError::Conflict {
        name: name.to_owned(),
        detail,
    }
}

/// `claim#ACCOUNT#REGION#NAME` → `"NAME" in REGION of account ACCOUNT`.
fn describe(key: &str) -> String {
    let mut parts = key
        .trim_start_matches(super::schema::CLAIM_PREFIX)
        .splitn(3, '#');
    let (account, region, name) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let mut out = format!("{name:?}");
    if !region.is_empty() {
        out.push_str(&format!(" in {region}"));
    }
    if !account.is_empty() {
        out.push_str(&format!(" of account {account}"));
    }
    out
}

/// The entry a claim item names.
pub(super) fn holder_of(
    item: &std::collections::HashMap<String, AttributeValue>,
) -> Option<String> {
    item.get(attr::NAME).and_then(|v| v.as_s().ok()).cloned()
}

/// A transaction's item that could not be built (a field missing): a
/// refusal, as DynamoDB would give it.
pub(super) fn build_error(e: aws_sdk_dynamodb::error::BuildError) -> RegistryError {
    RegistryError::Aws {
        operation: "TransactWriteItems",
        code: None,
        message: e.to_string(),
        transient: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_key_reads_back_as_the_stack_it_names() {
        assert_eq!(
            describe("claim#210987654321#eu-west-1#orders"),
            "\"orders\" in eu-west-1 of account 210987654321"
        );
        assert_eq!(describe("claim###orders"), "\"orders\"");
    }
}
