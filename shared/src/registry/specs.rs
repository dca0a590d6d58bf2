//! Entries and their specs: reading entries (by name, by source, by stack
//! name), and the writes `stacksync apply`, `delete`, `suspend` and `resume`
//! make. Spec writes are conditioned on the `specVersion` they were planned
//! from, so two concurrent applies cannot both win.

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;

use super::claims::{Part, build_error, claim_conflict, holder_of, items_of};
use super::expr::{self, Write, names};
use super::followers::Follower;
use super::item::{n, s, to_attr_of};
use super::plan::{self, Action, Change, Plan};
use super::schema::{self, PK, STACK_PREFIX, attr, stack_key};
use super::{
    Page, Registry, RegistryError, Result, StackEntry, Unreadable, decode_entries, decode_entry,
    entry_item, spec_attributes,
};
use crate::clock::EpochMillis;
use crate::spec::StackSpec;
use crate::status::Timestamp;

/// DynamoDB allows at most 100 actions (items) in one transaction.
pub const MAX_TRANSACTION_ITEMS: usize = 100;

/// Reading entries.
pub trait Entries: Send + Sync {
    /// One entry, read consistently; `None` when there is none.
    fn get(&self, name: &str) -> impl Future<Output = Result<Option<StackEntry>>> + Send;
    /// Every stack that follows the source `key` ([`crate::source::source_key`]),
    /// by name, as the triggers need it (nothing of its spec): reads
    /// proportional to the followers, not to the registry.
    fn followers(&self, key: &str) -> impl Future<Output = Result<Vec<Follower>>> + Send;
    /// Every entry whose CloudFormation stack is named `stack_name` (in any
    /// region: the caller compares), by name.
    fn by_stack_name(
        &self,
        stack_name: &str,
    ) -> impl Future<Output = Result<Vec<StackEntry>>> + Send;
}

/// Changing specs: what the CLI does to the registry.
pub trait Specs: Entries {
    /// Every entry, sorted by name (items that cannot be read are left
    /// out, and logged).
    fn list(&self) -> impl Future<Output = Result<Vec<StackEntry>>> + Send;
    /// Every entry, and every stack item that could not be read.
    fn list_all(&self) -> impl Future<Output = Result<(Vec<StackEntry>, Vec<Unreadable>)>> + Send {
        async move { Ok((self.list().await?, Vec::new())) }
    }
    /// Writes one batch of a plan (changes of at most
    /// [`MAX_TRANSACTION_ITEMS`] items, [`items_of`]) in one transaction: all
    /// of it or none of it. Each write is conditioned on the `specVersion`
    /// the plan was made from, and each entry claims the stack it drives
    /// (`registry::claims`), so an entry changed by someone else since, or a
    /// stack another entry drives, fails the whole batch with
    /// [`RegistryError::Conflict`] naming that entry.
    fn apply_batch(
        &self,
        batch: &[&Change],
        now: EpochMillis,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Carries out a whole plan from [`plan::plan_apply`] (see
    /// [`apply_plan`]), and on failure says only why.
    fn apply(&self, plan: &Plan, now: EpochMillis) -> impl Future<Output = Result<()>> + Send {
        async move {
            apply_plan(self, plan, now, |_| {})
                .await
                .map(drop)
                .map_err(|stopped| stopped.error)
        }
    }
    /// Marks an entry for deletion (idempotent); the reconcile engine then
    /// deletes the stack (`destroyOnDelete`) or leaves it, and drops the
    /// entry. Returns false when deletion had already been requested.
    fn request_deletion(
        &self,
        name: &str,
        now: EpochMillis,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Suspends or resumes an entry (the operator flag, apart from the spec's
    /// own `suspend`). Resuming makes the entry due at once. Returns whether
    /// anything changed; an entry being deleted is [`RegistryError::BeingDeleted`].
    fn set_suspended(
        &self,
        name: &str,
        suspended: bool,
        now: EpochMillis,
    ) -> impl Future<Output = Result<bool>> + Send;
}

/// How far a plan's writes have got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    /// Changes written so far (whole batches).
    pub written: usize,
    /// Changes the plan writes in all.
    pub total: usize,
}

/// A plan stopped part-way: `written` of `total` changes are in the
/// registry (whole batches, in plan order), the rest are not.
#[derive(Debug)]
pub struct ApplyStopped {
    pub applied: Applied,
    pub error: RegistryError,
}

/// Carries out a plan batch by batch, in plan order (creates and updates
/// before prunes), telling `progress` after each batch. A plan of up to
/// [`MAX_TRANSACTION_ITEMS`] writes is all or nothing; a larger one is all
/// or nothing per batch. Applying the same file again finishes a plan that
/// stopped: what was written is then unchanged, and only the rest is
/// written. Returns the number of changes written.
pub async fn apply_plan<S: Specs + ?Sized>(
    specs: &S,
    plan: &Plan,
    now: EpochMillis,
    mut progress: impl FnMut(Applied) + Send,
) -> std::result::Result<usize, ApplyStopped> {
    let mut writes: Vec<&Change> = plan.writes().collect();
    // Prunes last: a plan that stops part-way has marked nothing for
    // deletion before everything it creates and updates is written.
    writes.sort_by_key(|c| matches!(c.action, Action::Prune { .. }));
    let mut applied = Applied {
        written: 0,
        total: writes.len(),
    };
    for batch in batches(&writes) {
        if let Err(error) = specs.apply_batch(batch, now).await {
            return Err(ApplyStopped { applied, error });
        }
        applied.written += batch.len();
        progress(applied);
    }
    Ok(applied.written)
}

/// The writes in order, cut into batches of at most
/// [`MAX_TRANSACTION_ITEMS`] items each.
pub fn batches<'a, 'c>(writes: &'a [&'c Change]) -> Vec<&'a [&'c Change]> {
    let mut out = Vec::new();
    let (mut start, mut items) = (0, 0);
    for (i, change) in writes.iter().enumerate() {
        let more = items_of(change);
        if items + more > MAX_TRANSACTION_ITEMS && i > start {
            out.push(&writes[start..i]);
            (start, items) = (i, 0);
        }
        items += more;
    }
    if start < writes.len() {
        out.push(&writes[start..]);
    }
    out
}

impl Registry {
    pub(super) async fn get_existing(&self, name: &str) -> Result<StackEntry> {
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
        let (entries, unreadable) = decode_entries(out.items());
        let next = out
            .last_evaluated_key()
            .and_then(|k| k.get(PK))
            .and_then(|v| v.as_s().ok())
            .cloned();
        Ok(Page {
            entries,
            unreadable,
            next,
        })
    }

    /// Every entry whose `attribute` is `value`, through `index`, by name.
    async fn by_index(&self, index: &str, attribute: &str, value: &str) -> Result<Vec<StackEntry>> {
        let condition = format!("#{attribute} = :value");
        let items = self
            .query_all(index, &condition, vec![(":value", s(value))], None)
            .await?;
        // An item that cannot be read is logged and left out: the
        // others still follow their source or match their event.
        let (mut found, _unreadable) = decode_entries(&items);
        found.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(found)
    }

    /// The writes of one change of a plan: the entry, conditioned on what
    /// the plan was made from, and the claims of the stacks it drives.
    fn transact_items(
        &self,
        change: &plan::Change,
        now: EpochMillis,
    ) -> Result<Vec<(TransactWriteItem, Part)>> {
        let mut items = vec![(self.transact_item(change, now)?, Part::Entry)];
        items.extend(self.claim_items(change)?);
        Ok(items)
    }

    /// The entry's write of a change of a plan.
    fn transact_item(&self, change: &plan::Change, now: EpochMillis) -> Result<TransactWriteItem> {
        let key = stack_key(&change.name);
        let values = |extra: Vec<(&str, AttributeValue)>| -> HashMap<String, AttributeValue> {
            let mut values: HashMap<String, AttributeValue> =
                extra.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            values.insert(":now".into(), to_attr_of(&Timestamp(now)));
            values.insert(":due".into(), n(now));
            values
        };
        let item = match (&change.action, &change.spec) {
            (Action::Create, Some(spec)) => TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(entry_item(&StackEntry::registered_by(
                            change, spec, now,
                        ))))
                        .condition_expression(expr::ABSENT)
                        .set_expression_attribute_names(Some(names(&[expr::ABSENT])))
                        .build()
                        .map_err(build_error)?,
                )
                .build(),
            (Action::Update { from, .. }, Some(spec)) => {
                let mut update = values(vec![(":expected", n(*from)), (":next", n(from + 1))]);
                update.extend(
                    spec_attributes(spec)
                        .into_iter()
                        .map(|(k, v)| (format!(":{k}"), v)),
                );
                let expression = match &change.owner {
                    Some(owner) => {
                        update.insert(":owner".into(), to_attr_of(owner));
                        expr::UPDATE_SPEC_OWNED
                    }
                    None => expr::UPDATE_SPEC,
                };
                self.conditional_update(&key, expression, update)?
            }
            (Action::Move { version, .. }, _) => {
                let mut update = values(vec![(":expected", n(*version))]);
                update.remove(":due");
                let expression = match &change.owner {
                    Some(owner) => {
                        update.insert(":owner".into(), to_attr_of(owner));
                        expr::SET_OWNER
                    }
                    None => expr::REMOVE_OWNER,
                };
                self.conditional_update(&key, expression, update)?
            }
            (Action::Rekey { version, to, .. }, _) => self.conditional_update(
                &key,
                expr::SET_SOURCE_KEY,
                HashMap::from([
                    (":expected".to_owned(), n(*version)),
                    (":to".to_owned(), s(to)),
                    (":due".to_owned(), n(now)),
                ]),
            )?,
            (Action::Prune { version, .. }, _) => self.conditional_update(
                &key,
                expr::MARK_DELETION,
                values(vec![(":expected", n(*version))]),
            )?,
            _ => {
                return Err(RegistryError::Aws {
                    operation: "TransactWriteItems",
                    code: None,
                    message: format!("plan entry {:?} has no spec to write", change.name),
                    transient: false,
                });
            }
        };
        Ok(item)
    }

    /// An update of a plan: only while the entry is at the planned version.
    fn conditional_update(
        &self,
        key: &str,
        update: &str,
        values: HashMap<String, AttributeValue>,
    ) -> Result<TransactWriteItem> {
        Ok(TransactWriteItem::builder()
            .update(
                Update::builder()
                    .table_name(&self.table)
                    .key(PK, s(key))
                    .update_expression(update)
                    .condition_expression(expr::SPEC_AT_VERSION)
                    .set_expression_attribute_names(Some(names(&[expr::SPEC_AT_VERSION, update])))
                    .set_expression_attribute_values(Some(values))
                    .build()
                    .map_err(build_error)?,
            )
            .build())
    }

    fn transaction_error(
        &self,
        err: SdkError<TransactWriteItemsError, HttpResponse>,
        batch: &[&plan::Change],
        parts: &[(usize, Part)],
    ) -> RegistryError {
        if let SdkError::ServiceError(service) = &err
            && let TransactWriteItemsError::TransactionCanceledException(cancel) = service.err()
        {
            let reasons = cancel.cancellation_reasons();
            let lost = reasons
                .iter()
                .position(|r| r.code() == Some("ConditionalCheckFailed"));
            if let Some(i) = lost
                && let Some((index, part)) = parts.get(i)
                && let Some(change) = batch.get(*index)
            {
                if let Part::Claim(key) | Part::Release(key) = part {
                    let holder = reasons[i].item().and_then(holder_of);
                    return claim_conflict(&change.name, key, holder.as_deref());
                }
                let detail = match change.action {
                    Action::Create => "it was created meanwhile".to_owned(),
                    Action::Update { from, .. }
                    | Action::Prune { version: from, .. }
                    | Action::Rekey { version: from, .. }
                    | Action::Move { version: from, .. } => {
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
}

impl Entries for Registry {
    /// One entry, read consistently.
    async fn get(&self, name: &str) -> Result<Option<StackEntry>> {
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

    async fn followers(&self, key: &str) -> Result<Vec<Follower>> {
        self.followers_of(key).await
    }

    async fn by_stack_name(&self, stack_name: &str) -> Result<Vec<StackEntry>> {
        self.by_index(schema::INDEX_BY_STACK_NAME, attr::STACK_NAME, stack_name)
            .await
    }
}

/// After a batch is written: a new entry registered waiting whose
/// dependencies have all settled meanwhile (one ended `Ready` between the
/// plan and the write, and found it not there yet) is made due now.
/// Best effort, after the batch is written: a failure is logged (the
/// entry then runs at its `interval`), never the apply's.
pub(crate) async fn wake_created<R: Entries + super::Schedule>(
    registry: &R,
    batch: &[&Change],
    now: EpochMillis,
) {
    for change in batch {
        if !matches!(change.action, Action::Create) || change.waiting_for.is_empty() {
            continue;
        }
        let mut settled = true;
        for upstream in &change.waiting_for {
            settled &= matches!(
                registry.get(upstream).await,
                Ok(Some(e)) if super::graph::settled(&e, now)
            );
        }
        if settled && let Err(e) = registry.mark_due(&change.name, now).await {
            tracing::warn!(stack = %change.name, error = %e, "could not make the new entry due: it runs at its interval");
        }
    }
}

/// Records, for every entry a batch creates or changes, that it depends on
/// the stacks its spec names (`registry::dependents`): they make it due.
pub(crate) async fn register_dependents<R: super::Dependents>(
    registry: &R,
    batch: &[&Change],
) -> Result<()> {
    for change in batch {
        if let Some(spec) = &change.spec {
            for upstream in spec.upstream() {
                registry.add_dependent(upstream, &change.name).await?;
            }
        }
    }
    Ok(())
}

impl Specs for Registry {
    async fn list(&self) -> Result<Vec<StackEntry>> {
        Ok(self.list_all().await?.0)
    }

    async fn list_all(&self) -> Result<(Vec<StackEntry>, Vec<Unreadable>)> {
        let mut all = Vec::new();
        let mut unreadable = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self.list_page(cursor.as_deref(), 500).await?;
            all.extend(page.entries);
            unreadable.extend(page.unreadable);
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok((all, unreadable))
    }

    async fn apply_batch(&self, batch: &[&Change], now: EpochMillis) -> Result<()> {
        // Each stack an entry depends on learns of it first (idempotent,
        // and a name left by a batch that fails costs one read later).
        register_dependents(self, batch).await?;
        let mut items = Vec::with_capacity(batch.len() * 2);
        // Which change each item is of, and what it is.
        let mut parts = Vec::with_capacity(batch.len() * 2);
        for (index, change) in batch.iter().enumerate() {
            for (item, part) in self.transact_items(change, now)? {
                items.push(item);
                parts.push((index, part));
            }
        }
        // The idempotency token lets the SDK retry this very call safely.
        // It must be unique to this call: two writers with equal tokens
        // would be taken for one (DynamoDB answers the second with the
        // first's result, and that write would be lost silently).
        let token = transaction_token(&self.table, batch);
        self.client
            .transact_write_items()
            .set_transact_items(Some(items))
            .client_request_token(token)
            .send()
            .await
            .map(drop)
            .map_err(|err| self.transaction_error(err, batch, &parts))?;
        wake_created(self, batch, now).await;
        Ok(())
    }

    async fn request_deletion(&self, name: &str, now: EpochMillis) -> Result<bool> {
        let marked = self
            .write_if(
                stack_key(name),
                Write::Update(expr::MARK_DELETION),
                expr::EXISTS_NOT_DELETING,
                vec![(":now", to_attr_of(&Timestamp(now))), (":due", n(now))],
            )
            .await?;
        if !marked {
            self.get_existing(name).await?;
        }
        Ok(marked)
    }

    async fn set_suspended(&self, name: &str, suspended: bool, now: EpochMillis) -> Result<bool> {
        let mut values = vec![
            (":flag", AttributeValue::Bool(suspended)),
            (":now", to_attr_of(&Timestamp(now))),
        ];
        let update = if suspended {
            expr::SUSPEND
        } else {
            values.push((":due", n(now)));
            expr::RESUME
        };
        let changed = self
            .write_if(
                stack_key(name),
                Write::Update(update),
                expr::SUSPENDED_DIFFERS,
                values,
            )
            .await?;
        if !changed
            && self
                .get_existing(name)
                .await?
                .deletion_requested_at
                .is_some()
        {
            return Err(RegistryError::BeingDeleted {
                name: name.to_owned(),
            });
        }
        Ok(changed)
    }
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
