//! The desired-stack registry on DynamoDB: specs, statuses and per-stack leases.
//!
//! Every write that can race is conditional — on `specVersion` for specs, on
//! the lease owner for statuses — and a lost race comes back as a typed
//! [`RegistryError`], never as a silent overwrite.

pub mod item;
pub mod plan;
pub mod sched;
pub mod schema;

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TableStatus, TransactWriteItem, Update};
use serde::Serialize;

use crate::clock::EpochMillis;
use crate::source::source_key;
use crate::spec::StackSpec;
use crate::status::{Phase, Status, Timestamp};
use item::{entry_from_item, item_key, n, s, to_attr_of};
use plan::{Action, Plan};
use schema::{PK, STACK_PREFIX, attr, sched_shard, stack_key};

/// DynamoDB allows at most 100 actions in one transaction.
const MAX_TRANSACTION_ITEMS: usize = 100;

/// One registry entry: the spec, its version, and the status.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StackEntry {
    pub name: String,
    /// Rises by one on every real change of the spec.
    pub spec_version: u64,
    /// [`StackSpec::content_hash`] of `spec`.
    pub spec_hash: String,
    pub spec: StackSpec,
    /// Suspended by an operator (`stacksync suspend`), whatever the spec says.
    pub suspended: bool,
    /// Set when the entry was removed; the stack is then deleted or released.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_requested_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
}

impl StackEntry {
    /// Suspended by the spec or by an operator.
    pub fn is_suspended(&self) -> bool {
        self.suspended || self.spec.suspend
    }

    /// The phase to show a person: the recorded one, unless the entry is
    /// being deleted, is suspended, or has a spec newer than the last reconcile.
    pub fn display_phase(&self) -> Phase {
        if self.deletion_requested_at.is_some() && self.status.phase != Phase::Deleted {
            Phase::Deleting
        } else if self.is_suspended() {
            Phase::Suspended
        } else if self.status.observed_spec_version < self.spec_version
            && matches!(self.status.phase, Phase::Ready | Phase::Failed)
        {
            Phase::Pending
        } else {
            self.status.phase
        }
    }
}

/// Who drives a stack right now, and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// Normally a Step Functions execution id.
    pub owner: String,
    pub expires_at: Timestamp,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub entries: Vec<StackEntry>,
    /// Pass back to get the next page; `None` at the end.
    pub next: Option<String>,
}

/// What went wrong with a registry operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    #[error("no stack named {name:?} in the registry")]
    NotFound { name: String },
    #[error(
        "stack {name:?} was changed by someone else while this write was made ({detail}); read it again and retry"
    )]
    Conflict { name: String, detail: String },
    #[error("stack {name:?} is being deleted; this change is refused")]
    BeingDeleted { name: String },
    #[error("stack {name:?} is driven by {owner} until {}", crate::clock::rfc3339(expires_at.0))]
    LeaseHeld {
        name: String,
        owner: String,
        expires_at: Timestamp,
    },
    #[error("{owner} does not hold the lease on stack {name:?} (held by: {})", holder.as_deref().unwrap_or("nobody"))]
    LeaseNotHeld {
        name: String,
        owner: String,
        holder: Option<String>,
    },
    #[error(
        "the registry table {table:?} does not exist: run `stacksync init` or deploy template.yaml"
    )]
    TableMissing { table: String },
    #[error("the registry item {key:?} cannot be read: {detail}")]
    Corrupt { key: String, detail: String },
    #[error("DynamoDB {operation} failed: {message}")]
    Aws {
        operation: &'static str,
        code: Option<String>,
        message: String,
    },
}

impl RegistryError {
    /// Worth retrying with backoff (throttling, 5xx, timeouts).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Aws { code, .. } => code.as_deref().is_none_or(|c| {
                matches!(
                    c,
                    "ThrottlingException"
                        | "ProvisionedThroughputExceededException"
                        | "RequestLimitExceeded"
                        | "InternalServerError"
                        | "ServiceUnavailable"
                        | "TransactionInProgressException"
                )
            }),
            _ => false,
        }
    }
}

pub type Result<T, E = RegistryError> = std::result::Result<T, E>;

/// The registry: one DynamoDB table (see [`schema`]).
#[derive(Debug, Clone)]
pub struct Registry {
    client: Client,
    table: String,
}

impl Registry {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    fn aws_error<E, R>(&self, operation: &'static str, err: SdkError<E, R>) -> RegistryError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        let code = err.code().map(str::to_owned);
        if code.as_deref() == Some("ResourceNotFoundException") {
            return RegistryError::TableMissing {
                table: self.table.clone(),
            };
        }
        let message = match (&err, err.message()) {
            (SdkError::ServiceError(_), Some(message)) => {
                format!("{}: {message}", code.as_deref().unwrap_or("error"))
            }
            _ => DisplayErrorContext(&err).to_string(),
        };
        RegistryError::Aws {
            operation,
            code,
            message,
        }
    }

    /// Creates the table (and its TTL) if it does not exist; waits until it is
    /// active. Returns whether it was created.
    pub async fn create_table(&self) -> Result<bool> {
        let request = schema::create_table_request(&self.client, &self.table).map_err(|e| {
            RegistryError::Aws {
                operation: "CreateTable",
                code: None,
                message: e.to_string(),
            }
        })?;
        let created = match request.send().await {
            Ok(_) => true,
            Err(e) if e.code() == Some("ResourceInUseException") => false,
            Err(e) => return Err(self.aws_error("CreateTable", e)),
        };
        for attempt in 0..120 {
            let described = self
                .client
                .describe_table()
                .table_name(&self.table)
                .send()
                .await
                .map_err(|e| self.aws_error("DescribeTable", e))?;
            if described.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
                break;
            }
            tokio_sleep(Duration::from_millis(250 * (attempt + 1).min(8))).await;
        }
        if created {
            self.client
                .update_time_to_live()
                .table_name(&self.table)
                .time_to_live_specification(
                    aws_sdk_dynamodb::types::TimeToLiveSpecification::builder()
                        .attribute_name(schema::TTL_ATTRIBUTE)
                        .enabled(true)
                        .build()
                        .map_err(|e| RegistryError::Aws {
                            operation: "UpdateTimeToLive",
                            code: None,
                            message: e.to_string(),
                        })?,
                )
                .send()
                .await
                .map_err(|e| self.aws_error("UpdateTimeToLive", e))?;
        }
        Ok(created)
    }

    /// One entry, read consistently.
    pub async fn get(&self, name: &str) -> Result<Option<StackEntry>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(stack_key(name)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.aws_error("GetItem", e))?;
        out.item().map(decode_entry).transpose()
    }

    async fn get_existing(&self, name: &str) -> Result<StackEntry> {
        self.get(name)
            .await?
            .ok_or_else(|| RegistryError::NotFound {
                name: name.to_owned(),
            })
    }

    /// One page of entries, in no particular order. `limit` bounds the items
    /// read per page (DynamoDB's `Limit`), so a page may hold fewer entries.
    pub async fn list_page(&self, cursor: Option<&str>, limit: i32) -> Result<Page> {
        let mut request = self
            .client
            .scan()
            .table_name(&self.table)
            .consistent_read(true)
            .limit(limit)
            .filter_expression("begins_with(#pk, :prefix)")
            .set_expression_attribute_names(Some(names(&["#pk"])))
            .expression_attribute_values(":prefix", s(STACK_PREFIX));
        if let Some(key) = cursor {
            request = request.exclusive_start_key(PK, s(key));
        }
        let out = request
            .send()
            .await
            .map_err(|e| self.aws_error("Scan", e))?;
        let entries = out
            .items()
            .iter()
            .map(decode_entry)
            .collect::<Result<Vec<_>>>()?;
        let next = out
            .last_evaluated_key()
            .and_then(|k| k.get(PK))
            .and_then(|v| v.as_s().ok())
            .cloned();
        Ok(Page { entries, next })
    }

    /// Every entry, sorted by name.
    pub async fn list(&self) -> Result<Vec<StackEntry>> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self.list_page(cursor.as_deref(), 500).await?;
            all.extend(page.entries);
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }

    /// Every entry that follows the source `key` ([`crate::source::source_key`]:
    /// normal URL and ref), through the source index: reads proportional to
    /// the matching entries, not to the registry.
    pub async fn by_source(&self, key: &str) -> Result<Vec<StackEntry>> {
        self.by_index(schema::INDEX_BY_SOURCE, attr::SOURCE_KEY, key)
            .await
    }

    /// Records a webhook delivery id, once: `true` the first time, `false` for
    /// a delivery seen before (a conditional put, so two concurrent copies
    /// cannot both get `true`). The item expires `ttl_seconds` after `now`.
    pub async fn record_delivery(
        &self,
        id: &str,
        now: EpochMillis,
        ttl_seconds: i64,
    ) -> Result<bool> {
        let expires = now / 1000 + ttl_seconds;
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .item(PK, s(format!("{}{id}", schema::DELIVERY_PREFIX)))
            .item(
                schema::TTL_ATTRIBUTE,
                AttributeValue::N(expires.to_string()),
            )
            .condition_expression("attribute_not_exists(#pk)")
            .set_expression_attribute_names(Some(names(&["#pk"])))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failure(&e) => Ok(false),
            Err(e) => Err(self.aws_error("PutItem", e)),
        }
    }

    /// Carries out a plan from [`plan::plan_apply`]: all of it or none of it
    /// (up to 100 writes per transaction; larger plans go in several).
    ///
    /// Each write is conditioned on the `specVersion` the plan was made from,
    /// so an entry changed by someone else since fails the whole transaction
    /// with [`RegistryError::Conflict`] naming that entry.
    pub async fn apply(&self, plan: &Plan, now: EpochMillis) -> Result<()> {
        let writes: Vec<_> = plan.writes().collect();
        for batch in writes.chunks(MAX_TRANSACTION_ITEMS) {
            let mut items = Vec::with_capacity(batch.len());
            for change in batch {
                items.push(self.transact_item(change, now)?);
            }
            // The idempotency token lets the SDK retry this very call safely.
            // It must be unique to this call: two writers with equal tokens
            // would be taken for one (DynamoDB answers the second with the
            // first's result, and that write would be lost silently).
            let token = transaction_token(&self.table, batch);
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(items))
                .client_request_token(token)
                .send()
                .await;
            if let Err(err) = result {
                return Err(self.transaction_error(err, batch));
            }
        }
        Ok(())
    }

    fn transact_item(&self, change: &plan::Change, now: EpochMillis) -> Result<TransactWriteItem> {
        let build_err = |e: aws_sdk_dynamodb::error::BuildError| RegistryError::Aws {
            operation: "TransactWriteItems",
            code: None,
            message: e.to_string(),
        };
        let key = stack_key(&change.name);
        let spec = change.spec.as_ref();
        let item = match (&change.action, spec) {
            (Action::Create, Some(spec)) => {
                let status = Status {
                    phase: Phase::Pending,
                    last_transition_at: Some(Timestamp(now)),
                    ..Status::default()
                };
                let mut values = spec_attributes(spec);
                values.insert(PK.into(), s(&key));
                values.insert(attr::NAME.into(), s(&change.name));
                values.insert(attr::SPEC_VERSION.into(), n(1));
                values.insert(attr::STATUS.into(), to_attr_of(&status));
                values.insert(attr::SUSPENDED.into(), AttributeValue::Bool(false));
                values.insert(attr::CREATED_AT.into(), to_attr_of(&Timestamp(now)));
                values.insert(attr::UPDATED_AT.into(), to_attr_of(&Timestamp(now)));
                values.insert(attr::NEXT_RECONCILE_AT.into(), n(now));
                values.insert(attr::SCHED_SHARD.into(), s(sched_shard(&change.name)));
                TransactWriteItem::builder()
                    .put(
                        Put::builder()
                            .table_name(&self.table)
                            .set_item(Some(values))
                            .condition_expression(expr::CREATE_IF_ABSENT)
                            .set_expression_attribute_names(Some(names(&[expr::CREATE_IF_ABSENT])))
                            .build()
                            .map_err(build_err)?,
                    )
                    .build()
            }
            (Action::Update { from, .. }, Some(spec)) => {
                let mut values: HashMap<String, AttributeValue> = spec_attributes(spec)
                    .into_iter()
                    .map(|(k, v)| (format!(":{k}"), v))
                    .collect();
                values.insert(":expected".into(), n(*from));
                values.insert(":next".into(), n(from + 1));
                values.insert(":now".into(), to_attr_of(&Timestamp(now)));
                values.insert(":due".into(), n(now));
                TransactWriteItem::builder()
                    .update(
                        Update::builder()
                            .table_name(&self.table)
                            .key(PK, s(&key))
                            .update_expression(expr::UPDATE_SPEC)
                            .condition_expression(expr::SPEC_AT_VERSION)
                            .set_expression_attribute_names(Some(names(&[
                                expr::SPEC_AT_VERSION,
                                expr::UPDATE_SPEC,
                            ])))
                            .set_expression_attribute_values(Some(values))
                            .build()
                            .map_err(build_err)?,
                    )
                    .build()
            }
            (Action::Prune { version }, _) => TransactWriteItem::builder()
                .update(
                    Update::builder()
                        .table_name(&self.table)
                        .key(PK, s(&key))
                        .update_expression(expr::MARK_DELETION)
                        .condition_expression(expr::SPEC_AT_VERSION)
                        .set_expression_attribute_names(Some(names(&[
                            expr::SPEC_AT_VERSION,
                            expr::MARK_DELETION,
                        ])))
                        .expression_attribute_values(":expected", n(*version))
                        .expression_attribute_values(":now", to_attr_of(&Timestamp(now)))
                        .expression_attribute_values(":due", n(now))
                        .build()
                        .map_err(build_err)?,
                )
                .build(),
            _ => {
                return Err(RegistryError::Aws {
                    operation: "TransactWriteItems",
                    code: None,
                    message: format!("plan entry {:?} has no spec to write", change.name),
                });
            }
        };
        Ok(item)
    }

    fn transaction_error<R: std::fmt::Debug>(
        &self,
        err: SdkError<TransactWriteItemsError, R>,
        batch: &[&plan::Change],
    ) -> RegistryError {
        if let SdkError::ServiceError(service) = &err
            && let TransactWriteItemsError::TransactionCanceledException(cancel) = service.err()
        {
            let reasons = cancel.cancellation_reasons();
            let lost = reasons
                .iter()
                .position(|r| r.code() == Some("ConditionalCheckFailed"));
            if let Some(i) = lost
                && let Some(change) = batch.get(i)
            {
                let detail = match change.action {
                    Action::Create => "it was created meanwhile".to_owned(),
                    Action::Update { from, .. } | Action::Prune { version: from } => {
                        format!("it is no longer at specVersion {from}, or is being deleted")
                    }
                    Action::Unchanged { .. } => String::new(),
                };
                return RegistryError::Conflict {
                    name: change.name.clone(),
                    detail,
                };
            }
            if reasons
                .iter()
                .any(|r| r.code() == Some("TransactionConflict"))
            {
                return RegistryError::Conflict {
                    name: batch
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    detail: "another transaction was writing the same entries".into(),
                };
            }
        }
        self.aws_error("TransactWriteItems", err)
    }

    /// Marks an entry for deletion (idempotent). The reconcile engine then
    /// deletes the stack (`destroyOnDelete`) or leaves it, and drops the entry.
    /// Returns false when deletion had already been requested.
    pub async fn request_deletion(&self, name: &str, now: EpochMillis) -> Result<bool> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(stack_key(name)))
            .update_expression(expr::MARK_DELETION)
            .condition_expression(expr::EXISTS_NOT_DELETING)
            .set_expression_attribute_names(Some(names(&[
                expr::EXISTS_NOT_DELETING,
                expr::MARK_DELETION,
            ])))
            .expression_attribute_values(":now", to_attr_of(&Timestamp(now)))
            .expression_attribute_values(":due", n(now))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failure(&e) => {
                self.get_existing(name).await?;
                Ok(false)
            }
            Err(e) => Err(self.aws_error("UpdateItem", e)),
        }
    }

    /// Suspends or resumes an entry (the operator flag, apart from the spec's
    /// own `suspend`). Resuming makes the entry due at once. Returns whether
    /// anything changed.
    pub async fn set_suspended(
        &self,
        name: &str,
        suspended: bool,
        now: EpochMillis,
    ) -> Result<bool> {
        let condition = "attribute_exists(#pk) AND attribute_not_exists(#deletionRequestedAt) AND #suspended <> :flag";
        // Resuming makes the entry due at once.
        let update = if suspended {
            "SET #suspended = :flag, #updatedAt = :now"
        } else {
            "SET #suspended = :flag, #updatedAt = :now, #nextReconcileAt = :due"
        };
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(stack_key(name)))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names(&[update, condition])))
            .expression_attribute_values(":flag", AttributeValue::Bool(suspended))
            .expression_attribute_values(":now", to_attr_of(&Timestamp(now)));
        if !suspended {
            request = request.expression_attribute_values(":due", n(now));
        }
        match request.send().await {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failure(&e) => {
                let entry = self.get_existing(name).await?;
                if entry.deletion_requested_at.is_some() {
                    Err(RegistryError::BeingDeleted {
                        name: name.to_owned(),
                    })
                } else {
                    Ok(false)
                }
            }
            Err(e) => Err(self.aws_error("UpdateItem", e)),
        }
    }

    /// Records the status of a stack. Only the holder of the lease may write
    /// it, so a run that lost its lease cannot overwrite a newer run's status.
    /// `status.next_reconcile_at` moves the entry in the scheduler's index.
    pub async fn write_status(&self, name: &str, owner: &str, status: &Status) -> Result<()> {
        self.put_status(name, owner, status, false).await
    }

    /// Records the final status of a run and gives the lease back, in one
    /// write conditioned on holding the lease.
    pub async fn write_status_and_release(
        &self,
        name: &str,
        owner: &str,
        status: &Status,
    ) -> Result<()> {
        self.put_status(name, owner, status, true).await
    }

    async fn put_status(
        &self,
        name: &str,
        owner: &str,
        status: &Status,
        release: bool,
    ) -> Result<()> {
        let status = status.clone().bounded();
        let update = match (status.next_reconcile_at.is_some(), release) {
            (true, true) => expr::FINAL_STATUS_DUE,
            (false, true) => expr::FINAL_STATUS,
            (true, false) => expr::STATUS_DUE,
            (false, false) => expr::STATUS,
        };
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(stack_key(name)))
            .update_expression(update)
            .condition_expression(expr::HOLDS_LEASE)
            .set_expression_attribute_names(Some(names(&[update, expr::HOLDS_LEASE])))
            .expression_attribute_values(":owner", s(owner))
            .expression_attribute_values(":status", to_attr_of(&status));
        if let Some(at) = status.next_reconcile_at {
            request = request.expression_attribute_values(":due", n(at.0));
        }
        match request.send().await {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failure(&e) => Err(self.lease_not_held(name, owner).await),
            Err(e) => Err(self.aws_error("UpdateItem", e)),
        }
    }

    async fn lease_not_held(&self, name: &str, owner: &str) -> RegistryError {
        match self.get(name).await {
            Ok(Some(entry)) => RegistryError::LeaseNotHeld {
                name: name.to_owned(),
                owner: owner.to_owned(),
                holder: entry.lease.map(|l| l.owner),
            },
            Ok(None) => RegistryError::NotFound {
                name: name.to_owned(),
            },
            Err(e) => e,
        }
    }

    /// Takes the lease on a stack for `ttl`: when nobody holds it, when it has
    /// expired (a crashed run), or when `owner` already holds it (a retried
    /// step). Otherwise [`RegistryError::LeaseHeld`] names the holder.
    pub async fn acquire_lease(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
        now: EpochMillis,
    ) -> Result<Lease> {
        let expires = lease_until(now, ttl);
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(stack_key(name)))
            .update_expression(expr::TAKE_LEASE)
            .condition_expression(expr::LEASE_FREE_EXPIRED_OR_MINE)
            .set_expression_attribute_names(Some(names(&[
                expr::LEASE_FREE_EXPIRED_OR_MINE,
                expr::TAKE_LEASE,
            ])))
            .expression_attribute_values(":owner", s(owner))
            .expression_attribute_values(":expires", n(expires))
            .expression_attribute_values(":now", n(now))
            .send()
            .await;
        match result {
            Ok(_) => Ok(Lease {
                owner: owner.to_owned(),
                expires_at: Timestamp(expires),
            }),
            Err(e) if is_condition_failure(&e) => {
                let entry = self.get_existing(name).await?;
                match entry.lease {
                    Some(lease) => Err(RegistryError::LeaseHeld {
                        name: name.to_owned(),
                        owner: lease.owner,
                        expires_at: lease.expires_at,
                    }),
                    // Released between our write and our read: the caller may try again.
                    None => Err(RegistryError::Conflict {
                        name: name.to_owned(),
                        detail: "the lease changed hands while it was being taken".into(),
                    }),
                }
            }
            Err(e) => Err(self.aws_error("UpdateItem", e)),
        }
    }

    /// Extends a lease its owner still holds.
    pub async fn renew_lease(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
        now: EpochMillis,
    ) -> Result<Lease> {
        let expires = lease_until(now, ttl);
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(stack_key(name)))
            .update_expression(expr::EXTEND_LEASE)
            .condition_expression(expr::HOLDS_LEASE)
            .set_expression_attribute_names(Some(names(&[expr::HOLDS_LEASE, expr::EXTEND_LEASE])))
            .expression_attribute_values(":owner", s(owner))
            .expression_attribute_values(":expires", n(expires))
            .send()
            .await;
        match result {
            Ok(_) => Ok(Lease {
                owner: owner.to_owned(),
                expires_at: Timestamp(expires),
            }),
            Err(e) if is_condition_failure(&e) => Err(self.lease_not_held(name, owner).await),
            Err(e) => Err(self.aws_error("UpdateItem", e)),
        }
    }

    /// Gives a lease back. Releasing a lease nobody holds is fine (a retried
    /// step); releasing one someone else took over is [`RegistryError::LeaseNotHeld`].
    pub async fn release_lease(&self, name: &str, owner: &str) -> Result<()> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(stack_key(name)))
            .update_expression(expr::DROP_LEASE)
            .condition_expression(expr::HOLDS_LEASE)
            .set_expression_attribute_names(Some(names(&[expr::HOLDS_LEASE, expr::DROP_LEASE])))
            .expression_attribute_values(":owner", s(owner))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failure(&e) => match self.lease_not_held(name, owner).await {
                RegistryError::LeaseNotHeld { holder: None, .. }
                | RegistryError::NotFound { .. } => Ok(()),
                other => Err(other),
            },
            Err(e) => Err(self.aws_error("UpdateItem", e)),
        }
    }

    /// Drops an entry whose deletion was requested, once its stack is dealt
    /// with. Only the lease holder may do it.
    pub async fn remove(&self, name: &str, owner: &str) -> Result<()> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key(PK, s(stack_key(name)))
            .condition_expression(expr::HOLDS_LEASE_AND_DELETING)
            .set_expression_attribute_names(Some(names(&[expr::HOLDS_LEASE_AND_DELETING])))
            .expression_attribute_values(":owner", s(owner))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failure(&e) => {
                let entry = self.get_existing(name).await?;
                if entry.deletion_requested_at.is_none() {
                    Err(RegistryError::Conflict {
                        name: name.to_owned(),
                        detail: "its deletion was not requested".into(),
                    })
                } else {
                    Err(self.lease_not_held(name, owner).await)
                }
            }
            Err(e) => Err(self.aws_error("DeleteItem", e)),
        }
    }
}

/// The conditions and updates of every write. Attribute names go through
/// `#name` placeholders (several of ours, like `status` and `name`, are
/// reserved words in DynamoDB expressions); see [`names`].
mod expr {
    /// A status written while the run goes on.
    pub const STATUS: &str = "SET #status = :status";
    /// The same, moving the entry in the scheduler's index.
    pub const STATUS_DUE: &str = "SET #status = :status, #nextReconcileAt = :due";
    /// A run's last status, and the lease given back.
    pub const FINAL_STATUS: &str = "SET #status = :status REMOVE #leaseOwner, #leaseExpiresAt";
    /// The same, moving the entry in the scheduler's index.
    pub const FINAL_STATUS_DUE: &str =
        "SET #status = :status, #nextReconcileAt = :due REMOVE #leaseOwner, #leaseExpiresAt";
    /// A new entry: only if no entry has the name.
    pub const CREATE_IF_ABSENT: &str = "attribute_not_exists(#pk)";
    /// The entry is still as the plan saw it, and not being deleted.
    pub const SPEC_AT_VERSION: &str =
        "#specVersion = :expected AND attribute_not_exists(#deletionRequestedAt)";
    /// A changed spec: new version, due at once.
    pub const UPDATE_SPEC: &str = "SET #spec = :spec, #specHash = :specHash, #sourceKey = :sourceKey, #stackName = :stackName, #specVersion = :next, #updatedAt = :now, #nextReconcileAt = :due";
    /// Deletion requested: due at once.
    pub const MARK_DELETION: &str = "SET #deletionRequestedAt = :now, #nextReconcileAt = :due";
    /// The entry exists and its deletion was not requested yet.
    pub const EXISTS_NOT_DELETING: &str =
        "attribute_exists(#pk) AND attribute_not_exists(#deletionRequestedAt)";
    /// Nobody holds the lease, it expired, or the caller already holds it.
    pub const LEASE_FREE_EXPIRED_OR_MINE: &str = "attribute_exists(#pk) AND (attribute_not_exists(#leaseOwner) OR #leaseExpiresAt <= :now OR #leaseOwner = :owner)";
    /// Take or extend the lease.
    pub const TAKE_LEASE: &str = "SET #leaseOwner = :owner, #leaseExpiresAt = :expires";
    /// Extend the lease.
    pub const EXTEND_LEASE: &str = "SET #leaseExpiresAt = :expires";
    /// The caller holds the lease.
    pub const HOLDS_LEASE: &str = "#leaseOwner = :owner";
    /// Give the lease back.
    pub const DROP_LEASE: &str = "REMOVE #leaseOwner, #leaseExpiresAt";
    /// The caller holds the lease and the entry is being deleted.
    pub const HOLDS_LEASE_AND_DELETING: &str =
        "#leaseOwner = :owner AND attribute_exists(#deletionRequestedAt)";
}

/// When a lease taken at `now` for `ttl` runs out.
fn lease_until(now: EpochMillis, ttl: Duration) -> EpochMillis {
    now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}

/// A token unique to one `TransactWriteItems` call (≤ 36 characters): the
/// content written, plus this process and a counter.
fn transaction_token(table: &str, batch: &[&plan::Change]) -> String {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let content: Vec<String> = batch
        .iter()
        .map(|c| {
            let spec = c
                .spec
                .as_ref()
                .map(StackSpec::content_hash)
                .unwrap_or_default();
            format!("{}:{:?}:{spec}", c.name, c.action)
        })
        .collect();
    let unique = format!(
        "{table}|{}|{}|{}|{}",
        content.join(","),
        std::process::id(),
        crate::clock::now_millis(),
        CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    crate::hash::sha256_hex(unique.as_bytes())[..36].to_owned()
}

/// The attributes that follow from a spec: the spec itself, its hash, its
/// source key, its CloudFormation stack name.
fn spec_attributes(spec: &StackSpec) -> HashMap<String, AttributeValue> {
    HashMap::from([
        (attr::SPEC.to_owned(), to_attr_of(spec)),
        (attr::SPEC_HASH.to_owned(), s(spec.content_hash())),
        (attr::STACK_NAME.to_owned(), s(spec.effective_stack_name())),
        (
            attr::SOURCE_KEY.to_owned(),
            s(source_key(spec.source.url(), spec.effective_ref())),
        ),
    ])
}

/// The whole item of an entry, as the registry stores it: for tests and
/// benchmarks that set up thousands of entries in a given state at once
/// (`BatchWriteItem`), where [`Registry::apply`] would make them new.
pub fn entry_item(entry: &StackEntry) -> HashMap<String, AttributeValue> {
    let mut item = spec_attributes(&entry.spec);
    item.insert(PK.into(), s(stack_key(&entry.name)));
    item.insert(attr::NAME.into(), s(&entry.name));
    item.insert(attr::SPEC_VERSION.into(), n(entry.spec_version));
    item.insert(attr::SPEC_HASH.into(), s(&entry.spec_hash));
    item.insert(attr::STATUS.into(), to_attr_of(&entry.status));
    item.insert(
        attr::SUSPENDED.into(),
        AttributeValue::Bool(entry.suspended),
    );
    item.insert(attr::CREATED_AT.into(), to_attr_of(&entry.created_at));
    item.insert(attr::UPDATED_AT.into(), to_attr_of(&entry.updated_at));
    item.insert(attr::SCHED_SHARD.into(), s(sched_shard(&entry.name)));
    if let Some(at) = entry.status.next_reconcile_at {
        item.insert(attr::NEXT_RECONCILE_AT.into(), n(at.0));
    }
    if let Some(at) = entry.deletion_requested_at {
        item.insert(attr::DELETION_REQUESTED_AT.into(), to_attr_of(&at));
    }
    if let Some(lease) = &entry.lease {
        item.insert(attr::LEASE_OWNER.into(), s(&lease.owner));
        item.insert(attr::LEASE_EXPIRES_AT.into(), n(lease.expires_at.0));
    }
    item
}

/// An entry for unit tests: `name` follows `https://git.example/infra.git`
/// (`t.yaml`), at `specVersion` 1, `Ready` with the given status fields.
#[cfg(test)]
pub(crate) fn sample_entry(name: &str, status: Status) -> StackEntry {
    let spec: StackSpec = serde_json::from_value(serde_json::json!({
        "name": name,
        "source": {"git": "https://git.example/infra.git", "path": "t.yaml"}
    }))
    .unwrap_or_else(|e| panic!("sample spec: {e}"));
    StackEntry {
        name: name.into(),
        spec_version: 1,
        spec_hash: String::new(),
        spec,
        suspended: false,
        deletion_requested_at: None,
        created_at: Timestamp(0),
        updated_at: Timestamp(0),
        status: Status {
            phase: Phase::Ready,
            ..status
        },
        lease: None,
    }
}

fn decode_entry(item: &HashMap<String, AttributeValue>) -> Result<StackEntry> {
    entry_from_item(item).map_err(|detail| RegistryError::Corrupt {
        key: item_key(item),
        detail,
    })
}

/// The `#name` placeholders used in DynamoDB expressions, mapped to the
/// attribute names (`#status` → `status`): several of ours are reserved words.
fn names(expressions: &[&str]) -> HashMap<String, String> {
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

fn is_condition_failure<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> bool {
    err.code() == Some("ConditionalCheckFailedException")
}

async fn tokio_sleep(d: Duration) {
    tokio::time::sleep(d).await;
}
