//! The desired-stack registry: specs, statuses and per-stack leases, the
//! scheduler's queue and sources, and the webhook's delivery ids.
//!
//! It is a port, one small trait per concern, with two implementations:
//! [`Registry`] on one DynamoDB table, and [`memory::MemoryRegistry`] in
//! memory (for the unit tests of the steps, the scheduler and the triggers)
//! that a contract test holds to the same behaviour ([`contract`]).
//!
//! | concern | trait | file |
//! |---|---|---|
//! | entries and specs | [`Entries`], [`Specs`] | `specs.rs` |
//! | leases and statuses | [`Leases`] | `leases.rs` |
//! | the scheduler's queue and sources | [`Schedule`] | `schedule.rs` |
//! | webhook deliveries | [`Deliveries`] | `deliveries.rs` |
//!
//! Every write that can race is conditional — on `specVersion` for specs, on
//! the lease owner for statuses, on the value read for the scheduler's marks
//! — and a lost race comes back as a typed [`RegistryError`] (or `false`),
//! never as a silent overwrite.

pub mod answers;
pub mod claims;
pub mod deliveries;
pub mod dependents;
pub mod drift;
pub mod expr;
pub mod fleet_approvals;
pub mod fleets;
pub mod followers;
pub mod graph;
pub mod item;
pub mod leases;
pub mod plan;
pub mod refusals;
mod reviews;
pub mod schedule;
pub mod schema;
pub mod slots;
pub mod specs;
pub mod stacks_sources;
pub mod targets;
pub mod writer;

#[cfg(any(test, feature = "fakes"))]
pub mod contract;
#[cfg(any(test, feature = "fakes"))]
pub mod memory;

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{AttributeValue, TableStatus};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use serde::Serialize;

pub use answers::{Answer, Answers};
pub use deliveries::Deliveries;
pub use dependents::Dependents;
pub use drift::DriftRecords;
pub use fleet_approvals::FleetApprovals;
pub use fleets::{Fleet, FleetRecords, Fleets, UnitsRead};
pub use followers::{Follower, follower_of};
pub use leases::{LEASE_TTL, Lease, Leases, Parked, lease_ttl};
pub use refusals::ApprovalRecords;
pub use reviews::Reviews;
pub use schedule::{Schedule, SourceRecord, Watched};
pub use slots::{Slots, Taken};
pub use specs::{Applied, ApplyStopped, Entries, Specs, apply_plan};
pub use stacks_sources::RegistrySources;

use crate::source::source_key;
use crate::spec::StackSpec;
use crate::status::{Phase, Status, Timestamp, transitions};
use item::{entry_from_item, item_key, n, s, status_attributes, to_attr_of};
use schema::{PK, attr, sched_shard, stack_key};

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
    /// Why this version must not act on the entry, though it could read
    /// it: written by a later schema, or its spec holds fields this version
    /// does not know (ignored when it was read). `None` for a normal entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
    /// The source key the item is indexed under (`sourceKey`), as read;
    /// `None` where the entry was not read from DynamoDB. `apply` rewrites
    /// one of an older form ([`crate::source::source_key`]).
    #[serde(skip)]
    pub stored_source_key: Option<String>,
    /// The registry source, file and commit the entry was last written
    /// from; `None`: the CLI's (`stacksync apply`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<crate::registry_source::Owner>,
    /// The last preview of the stack posted on a pull request
    /// (`approval: pullRequest`), written by the preview function.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reviewed: Option<crate::pull_request::Reviewed>,
}

impl StackEntry {
    /// A new entry as `apply` registers it: version 1, `Pending`, due at once.
    pub fn registered(name: &str, spec: &StackSpec, now: crate::clock::EpochMillis) -> StackEntry {
        let at = Timestamp(now);
        StackEntry {
            name: name.to_owned(),
            spec_version: 1,
            spec_hash: spec.content_hash(),
            spec: spec.clone(),
            suspended: false,
            deletion_requested_at: None,
            created_at: at,
            updated_at: at,
            status: transitions::registered(now),
            lease: None,
            unsupported: None,
            stored_source_key: None,
            owner: None,
            reviewed: None,
        }
    }

    /// A new entry as a plan's change registers it: waiting (not due until
    /// its `interval`, unless what it waits for makes it due first) when
    /// some of its dependencies are not `Ready`.
    pub fn registered_by(
        change: &plan::Change,
        spec: &StackSpec,
        now: crate::clock::EpochMillis,
    ) -> StackEntry {
        let mut entry = Self::registered(&change.name, spec, now);
        entry.owner.clone_from(&change.owner);
        if !change.waiting_for.is_empty() {
            let due = Timestamp(now.saturating_add(
                i64::try_from(spec.interval.as_secs().saturating_mul(1000)).unwrap_or(i64::MAX),
            ));
            entry.status = transitions::waiting(
                &entry.status,
                change.waiting_for.clone(),
                transitions::waiting_message(&change.waiting_for),
                due,
            );
        }
        entry
    }

    /// Suspended by the spec or by an operator.
    pub fn is_suspended(&self) -> bool {
        self.suspended || self.spec.suspend
    }

    /// The phase to show a person: the recorded one, unless the entry is
    /// being deleted, is suspended, or has a spec newer than the last reconcile.
    pub fn display_phase(&self) -> Phase {
        if self.deletion_requested_at.is_some() {
            Phase::Deleting
        } else if self.is_suspended() {
            Phase::Suspended
        } else if self.status.run.observed_spec_version < self.spec_version
            && matches!(self.status.phase, Phase::Ready | Phase::Failed)
        {
            Phase::Pending
        } else if self.status.phase == Phase::Ready
            && self
                .status
                .findings
                .drift
                .as_ref()
                .is_some_and(crate::drift::DriftRecord::drifted)
        {
            Phase::Drifted
        } else {
            self.status.phase
        }
    }
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub entries: Vec<StackEntry>,
    /// Items on this page that could not be read (skipped).
    pub unreadable: Vec<Unreadable>,
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
        /// Throttling, a 5xx, a timeout ([`crate::ports::is_transient`]).
        transient: bool,
    },
}

impl RegistryError {
    /// Worth retrying with backoff (throttling, 5xx, timeouts).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Aws {
                transient: true,
                ..
            }
        )
    }
}

pub type Result<T, E = RegistryError> = std::result::Result<T, E>;

/// Everything the steps need of the registry.
pub trait StepRegistry:
    Entries + Leases + Schedule + Dependents + Slots + FleetRecords + FleetApprovals
{
}
impl<T: Entries + Leases + Schedule + Dependents + Slots + FleetRecords + FleetApprovals>
    StepRegistry for T
{
}

/// Ends the hold of a run that was stopped from outside (an execution
/// aborted or timed out, a local run killed, `stacksync unlock`): if `owner`
/// still holds the stack, records the run `Failed (Interrupted)` with `why`
/// and releases the lease, the stack due again at once. Returns whether it
/// did (false: the run had released it, or another run holds it now).
pub async fn end_hold<R: Entries + Leases>(
    registry: &R,
    name: &str,
    owner: &str,
    why: &str,
    now: crate::clock::EpochMillis,
) -> Result<bool> {
    let Some(entry) = registry.get(name).await? else {
        return Ok(false);
    };
    if entry.lease.as_ref().is_none_or(|l| l.owner != owner) {
        return Ok(false);
    }
    let status = transitions::interrupted(&entry.status, owner, why, now);
    match registry
        .write_status_and_release(name, owner, &status)
        .await
    {
        Ok(()) => Ok(true),
        // Released or taken over meanwhile: nothing of ours to end.
        Err(RegistryError::LeaseNotHeld { .. } | RegistryError::NotFound { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The registry on DynamoDB: one table (see [`schema`]).
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

    /// The region of the registry's table: the installation's, where a
    /// spec without `region` deploys its stack.
    pub fn region(&self) -> Option<String> {
        self.client.config().region().map(|r| r.to_string())
    }

    /// A DynamoDB error in the registry's terms (a missing table is named).
    pub(super) fn aws_error<E>(
        &self,
        operation: &'static str,
        err: SdkError<E, HttpResponse>,
    ) -> RegistryError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let code = err.code().map(str::to_owned);
        if code.as_deref() == Some("ResourceNotFoundException") {
            return RegistryError::TableMissing {
                table: self.table.clone(),
            };
        }
        let message = crate::ports::aws_error::failure(operation, &err);
        let transient = match &err {
            SdkError::ServiceError(service) => {
                crate::ports::is_transient(code.as_deref(), Some(service.raw().status().as_u16()))
            }
            // Timeouts, connection failures, unreadable responses: try again.
            _ => true,
        };
        RegistryError::Aws {
            operation,
            code,
            message,
            transient,
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
                transient: false,
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
            tokio::time::sleep(Duration::from_millis(250 * (attempt + 1).min(8))).await;
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
                            transient: false,
                        })?,
                )
                .send()
                .await
                .map_err(|e| self.aws_error("UpdateTimeToLive", e))?;
        }
        Ok(created)
    }
}

/// The attributes that follow from a spec: the spec itself, its hash, its
/// source key, its CloudFormation stack name.
fn spec_attributes(spec: &StackSpec) -> HashMap<String, AttributeValue> {
    HashMap::from([
        (attr::SPEC.to_owned(), to_attr_of(spec)),
        (
            attr::SCHEMA_VERSION.to_owned(),
            n(schema::ITEM_SCHEMA_VERSION),
        ),
        (attr::SPEC_HASH.to_owned(), s(spec.content_hash())),
        (
            attr::SPEC_SUSPEND.to_owned(),
            AttributeValue::Bool(spec.suspend),
        ),
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
    let (record, watch) = status_attributes(&entry.status);
    item.insert(attr::STATUS.into(), record);
    item.insert(attr::WATCH.into(), watch);
    item.insert(
        attr::SUSPENDED.into(),
        AttributeValue::Bool(entry.suspended),
    );
    item.insert(attr::CREATED_AT.into(), to_attr_of(&entry.created_at));
    item.insert(attr::UPDATED_AT.into(), to_attr_of(&entry.updated_at));
    item.insert(attr::SCHED_SHARD.into(), s(sched_shard(&entry.name)));
    if let Some(at) = entry.status.times.next_reconcile_at {
        item.insert(attr::NEXT_RECONCILE_AT.into(), n(at.0));
    }
    if let Some(at) = entry.deletion_requested_at {
        item.insert(attr::DELETION_REQUESTED_AT.into(), to_attr_of(&at));
    }
    if let Some(owner) = &entry.owner {
        item.insert(attr::OWNER.into(), to_attr_of(owner));
    }
    if let Some(reviewed) = &entry.reviewed {
        item.insert(attr::REVIEWED.into(), to_attr_of(reviewed));
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
pub(crate) fn sample_entry(name: &str, mut status: Status) -> StackEntry {
    status.phase = Phase::Ready;
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
        status,
        lease: None,
        unsupported: None,
        stored_source_key: None,
        owner: None,
        reviewed: None,
    }
}

/// A stack item that could not be read at all (no name, a spec that is
/// not one, an attribute of the wrong type): every reader that lists
/// entries skips it, logs it, and goes on with the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    /// Its partition key (`stack#NAME`).
    pub key: String,
    /// What is wrong with it.
    pub detail: String,
}

/// The entries due, and the due items that could not be read.
#[derive(Debug, Clone, Default)]
pub struct Due {
    pub entries: Vec<StackEntry>,
    pub unreadable: Vec<Unreadable>,
}

/// Decodes the items a query or scan gave: the entries, and the items that
/// could not be read (each logged), so one bad item never hides the rest.
fn decode_entries(items: &[HashMap<String, AttributeValue>]) -> (Vec<StackEntry>, Vec<Unreadable>) {
    let mut entries = Vec::with_capacity(items.len());
    let mut unreadable = Vec::new();
    for item in items {
        match entry_from_item(item) {
            Ok(entry) => entries.push(entry),
            Err(detail) => {
                let key = item_key(item);
                tracing::warn!(%key, %detail, "registry item skipped: it cannot be read");
                unreadable.push(Unreadable { key, detail });
            }
        }
    }
    (entries, unreadable)
}

fn decode_entry(item: &HashMap<String, AttributeValue>) -> Result<StackEntry> {
    entry_from_item(item).map_err(|detail| RegistryError::Corrupt {
        key: item_key(item),
        detail,
    })
}
