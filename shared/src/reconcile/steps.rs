//! The reconcile steps: what each Lambda (and the local runner's Task states)
//! does. Each takes the run's state and returns it with `next` set; the state
//! machine routes on `next` and does all the waiting.
//!
//! Every way out — in sync, applied, deleted, suspended, failed — writes the
//! status and releases the lease ([`Steps::finish`], [`Steps::finalize`]).

use std::collections::BTreeMap;
use std::time::Duration;

use tracing::info;

use super::decide::{
    ChangeSetDecision, ChangeSetKind, ChangeSetObservation, DeleteDecision, ExecutionOutcome,
    FailedCreatePolicy, StackDecision, StackObservation, decide_after_execute, decide_change_set,
    decide_delete, decide_stack,
};
use super::ports::{
    ChangeSetRequest, CloudFormation, CloudFormationFactory, Created, SourceFetcher, first_failure,
};
use super::run::{FinalizeInput, Next, RunState, StepError, WaitOn};
use super::status::{ChangeSetStatus, ExecutionStatus};
use crate::adapters::s3::S3Store;
use crate::artifact;
use crate::clock::{EpochMillis, now_millis};
use crate::hash::sha256_hex;
use crate::registry::{Registry, RegistryError, StackEntry};
use crate::source::normalize_url;
use crate::spec::{SourceKind, StackSpec};
use crate::status::{Phase, Status, Timestamp};
use crate::template;

/// How long a step's lease lasts; every step renews it.
pub const LEASE_TTL: Duration = Duration::from_secs(15 * 60);
/// The longest wait between two polls.
pub const MAX_POLL_SECONDS: u64 = 60;
/// How often a run continues a failed rollback before reporting it.
pub const MAX_ROLLBACK_CONTINUES: u32 = 1;
/// How often delete asks CloudFormation before reporting `DELETE_FAILED`.
pub const MAX_DELETE_REQUESTS: u32 = 2;

pub type StepResult = Result<RunState, StepError>;

/// Settings read once at start.
#[derive(Debug, Clone)]
pub struct StepConfig {
    /// `https://BUCKET.s3.REGION.amazonaws.com`: template URLs are this + `/` + key.
    pub template_url_base: String,
}

/// The steps, with the clients they use.
#[derive(Debug)]
pub struct Steps<F, S> {
    pub registry: Registry,
    pub store: S3Store,
    pub cloudformation: F,
    pub sources: S,
    pub config: StepConfig,
}

/// The change set's name: from the stack, the spec version and the desired
/// hash, so a retried step finds the one it made (CloudFormation: ≤ 128,
/// `[A-Za-z][-A-Za-z0-9]*`). The stack is in it so that two stacks with one
/// template never share a name: CloudFormation scopes names to a stack, but
/// tools that look change sets up by name alone (moto does) would mix them.
pub fn change_set_name(stack: &str, spec_version: u64, desired_hash: &str) -> String {
    let hash = crate::hash::sha256_hex(format!("{stack}\0{desired_hash}").as_bytes());
    format!("stacksync-v{spec_version}-{}", &hash[..16])
}

/// The next, longer poll interval: ×1.5, capped.
pub fn next_poll_seconds(current: u64, first: u64) -> u64 {
    let base = current.max(first).max(1);
    (base + base.div_ceil(2)).min(MAX_POLL_SECONDS.max(first))
}

fn artifact_key(url: &str, revision: &str) -> String {
    format!(
        "artifacts/{}/{revision}.tar.gz",
        &sha256_hex(normalize_url(url).as_bytes())[..16]
    )
}

impl<F: CloudFormationFactory, S: SourceFetcher> Steps<F, S> {
    async fn entry(&self, state: &RunState) -> Result<StackEntry, StepError> {
        self.registry.get(&state.stack_id).await?.ok_or_else(|| {
            StepError::stalled(format!(
                "stack {:?} is no longer registered",
                state.stack_id
            ))
        })
    }

    /// How every step after the first begins: renew the lease (so a long
    /// run keeps it, and a run that lost it stops here) and read the entry
    /// afresh (a retried or resumed step never works from stale state).
    async fn resume(&self, state: &RunState) -> Result<StackEntry, StepError> {
        self.registry
            .renew_lease(&state.stack_id, &state.execution, LEASE_TTL, now_millis())
            .await?;
        self.entry(state).await
    }

    async fn port(&self, spec: &StackSpec) -> Result<F::Port, StepError> {
        Ok(self
            .cloudformation
            .for_stack(spec.region.as_deref(), spec.assume_role_arn.as_deref())
            .await?)
    }

    /// The phase's transition time: kept when the phase stays, now when it changes.
    fn with_transition(&self, entry: &StackEntry, mut status: Status) -> Status {
        if status.phase == entry.status.phase {
            status.last_transition_at = entry.status.last_transition_at;
        } else {
            status.last_transition_at = Some(Timestamp(now_millis()));
        }
        status
    }

    /// Writes a status while the run goes on.
    async fn record(
        &self,
        state: &RunState,
        entry: &StackEntry,
        status: Status,
    ) -> Result<(), StepError> {
        let status = self.with_transition(entry, status);
        self.registry
            .write_status(&state.stack_id, &state.execution, &status)
            .await?;
        Ok(())
    }

    /// Ends the run: status written and lease released in one conditional
    /// write (a retried step cannot find one done and the other not), `next` = done.
    async fn finish(
        &self,
        mut state: RunState,
        entry: &StackEntry,
        status: Status,
        outcome: &str,
    ) -> StepResult {
        info!(stack = %state.stack_id, phase = %status.phase, outcome, "run finished");
        let mut status = self.with_transition(entry, status);
        // The spec changed (or deletion was asked) while this run worked from
        // an older one: look again at once rather than after `interval`.
        if state.spec_version > 0 {
            let latest = self.registry.get(&state.stack_id).await?;
            if latest.is_some_and(|e| {
                e.spec_version != state.spec_version || e.deletion_requested_at.is_some()
            }) {
                status.next_reconcile_at = Some(Timestamp(now_millis()));
            }
        }
        self.registry
            .write_status_and_release(&state.stack_id, &state.execution, &status)
            .await?;
        state.next = Next::Done;
        state.outcome = Some(outcome.to_owned());
        Ok(state)
    }

    /// Ends the run in sync: `Ready` at this run's revision, nothing deployed.
    async fn in_sync(
        &self,
        state: RunState,
        entry: &StackEntry,
        stack_status: Option<String>,
        message: &str,
    ) -> StepResult {
        let status = self.ready_status(&state, entry, stack_status, message);
        self.finish(state, entry, status, "in sync").await
    }

    fn ready_status(
        &self,
        state: &RunState,
        entry: &StackEntry,
        stack_status: Option<String>,
        message: &str,
    ) -> Status {
        let now = now_millis();
        Status {
            phase: Phase::Ready,
            observed_spec_version: state.spec_version,
            last_attempted_revision: state.revision.clone(),
            last_applied_revision: state.revision.clone(),
            applied_hash: state.desired_hash.clone(),
            stack_status,
            stack_status_reason: None,
            change_set_name: state
                .change_set_name
                .clone()
                .or(entry.status.change_set_name.clone()),
            message: Some(message.to_owned()),
            last_transition_at: None,
            last_reconcile_at: Some(Timestamp(now)),
            next_reconcile_at: Some(Timestamp(due(now, entry.spec.interval.as_secs()))),
        }
    }

    // ---- artifact-fetch -------------------------------------------------

    /// Loads the spec, takes the lease, honours suspend and deletion, resolves
    /// the revision and stores the artifact (once per source and revision).
    pub async fn artifact_fetch(&self, mut state: RunState) -> StepResult {
        let now = now_millis();
        state.started_at = now;
        match self
            .registry
            .acquire_lease(&state.stack_id, &state.execution, LEASE_TTL, now)
            .await
        {
            Ok(_) => {}
            Err(RegistryError::LeaseHeld { owner, .. }) => {
                // Another run drives the stack: it will see this change too.
                info!(stack = %state.stack_id, holder = %owner, "lease held; ending");
                state.next = Next::Done;
                state.outcome = Some(format!("another run ({owner}) holds the stack"));
                return Ok(state);
            }
            Err(RegistryError::Conflict { detail, .. }) => {
                state.next = Next::Done;
                state.outcome = Some(format!("the lease changed hands: {detail}"));
                return Ok(state);
            }
            Err(RegistryError::NotFound { .. }) => {
                state.next = Next::Done;
                state.outcome = Some("the entry is no longer registered".into());
                return Ok(state);
            }
            Err(e) => return Err(e.into()),
        }
        // Read only now, holding the lease: the status copied below is the
        // latest, not one that a run finishing just before us has replaced.
        let entry = self.entry(&state).await?;
        state.spec_version = entry.spec_version;

        if entry.deletion_requested_at.is_some() {
            state.next = Next::Delete;
            state.recreate = false;
            return Ok(state);
        }
        if entry.is_suspended() {
            let status = Status {
                phase: Phase::Suspended,
                message: Some("suspended: stacksync leaves the stack alone".into()),
                next_reconcile_at: Some(Timestamp(due(now, entry.spec.interval.as_secs()))),
                ..entry.status.clone()
            };
            return self.finish(state, &entry, status, "suspended").await;
        }

        let spec = &entry.spec;
        let url = spec.source.url().to_owned();
        if spec.source.kind() == Some(SourceKind::S3) {
            return Err(StepError::stalled(format!(
                "S3 sources ({url}) are not supported by this version of stacksync yet"
            )));
        }
        if spec.source.credentials_secret.is_some() {
            return Err(StepError::stalled(format!(
                "source.credentialsSecret is not supported by this version of stacksync yet: \
                 {url} can only be fetched without credentials"
            )));
        }
        let reference = spec.effective_ref().unwrap_or("main").to_owned();
        // Always the ref's head now: deliveries come in any order and may be
        // replayed, so a trigger's commit is never deployed as-is (that could
        // roll a stack back to an older push). A trigger naming an older
        // commit than the head deploys the head; one naming the head costs
        // nothing more.
        let revision = self.sources.resolve(&url, &reference).await?;
        if let Some(pushed) = state.trigger.revision.as_deref()
            && is_commit_id(pushed)
            && !pushed.eq_ignore_ascii_case(&revision)
        {
            info!(stack = %state.stack_id, pushed, head = %revision, "the ref moved on since the trigger; deploying its head");
        }
        let key = artifact_key(&url, &revision);
        if !self.store.exists(&key).await? {
            let files = self.sources.fetch(&url, &revision).await?;
            let packed = artifact::pack(&files).map_err(|e| StepError::stalled(e.to_string()))?;
            self.store
                .put_if_absent(&key, packed, "application/gzip")
                .await?;
            info!(stack = %state.stack_id, %revision, files = files.len(), "artifact stored");
        } else {
            info!(stack = %state.stack_id, %revision, "artifact re-used");
        }
        let status = Status {
            phase: Phase::Reconciling,
            last_attempted_revision: Some(revision.clone()),
            message: Some(format!("reconciling {}", short(&revision))),
            next_reconcile_at: None,
            ..entry.status.clone()
        };
        self.record(&state, &entry, status).await?;
        state.revision = Some(revision);
        state.artifact_key = Some(key);
        state.next = Next::Upload;
        Ok(state)
    }

    // ---- template-upload ------------------------------------------------

    /// Takes the template (and parameter file) out of the artifact, checks it,
    /// stores it content-addressed, and computes the desired hash. Already
    /// applied to a healthy stack → the run ends in sync, no change set made.
    pub async fn template_upload(&self, mut state: RunState) -> StepResult {
        let entry = self.resume(&state).await?;
        let spec = &entry.spec;
        let key = state
            .artifact_key
            .clone()
            .ok_or_else(|| StepError::stalled("template-upload needs artifactKey"))?;
        let archive = self.store.get(&key, artifact::MAX_UNPACKED_BYTES).await?;
        let path = &spec.source.path;
        let revision = state.revision.clone().unwrap_or_default();
        let at = format!("at {}", short(&revision));
        let template = artifact::read_file(&archive, path, template::MAX_TEMPLATE_BYTES as u64)
            .map_err(|e| StepError::stalled(e.to_string()))?
            .ok_or_else(|| {
                StepError::stalled(format!(
                    "template {path} not found in {} {at}",
                    spec.source.url()
                ))
            })?;
        template::check_template(path, &template)
            .map_err(|e| StepError::stalled(format!("{e} ({at})")))?;

        let from_file = match &spec.parameter_file {
            Some(file) => {
                let bytes =
                    artifact::read_file(&archive, file, template::MAX_PARAMETER_FILE_BYTES as u64)
                        .map_err(|e| StepError::stalled(e.to_string()))?
                        .ok_or_else(|| {
                            StepError::stalled(format!("parameter file {file} not found {at}"))
                        })?;
                template::read_parameter_file(file, &bytes).map_err(StepError::stalled)?
            }
            None => BTreeMap::new(),
        };
        let parameters = template::merge_parameters(from_file, spec);
        let template_sha = sha256_hex(&template);
        let template_key = format!("templates/{template_sha}");
        if !self.store.exists(&template_key).await? {
            self.store
                .put_if_absent(&template_key, template, "text/plain")
                .await?;
        }
        let desired = template::desired_hash(&template_sha, &parameters, spec);
        // The merged parameters can be large (200 × 4 KB): they go to S3, not
        // into the state, and change-set reads them back.
        let parameters_json =
            serde_json::to_vec(&parameters).map_err(|e| StepError::stalled(e.to_string()))?;
        let parameters_key = format!("parameters/{}.json", sha256_hex(&parameters_json));
        if !self.store.exists(&parameters_key).await? {
            self.store
                .put_if_absent(&parameters_key, parameters_json, "application/json")
                .await?;
        }
        state.parameters_key = Some(parameters_key);
        state.template_key = Some(template_key);
        state.desired_hash = Some(desired.clone());

        if entry.status.applied_hash.as_deref() == Some(desired.as_str()) {
            // Our own check first: nothing to deploy if the stack is healthy.
            let cfn = self.port(spec).await?;
            let stack = cfn.describe_stack(spec.effective_stack_name()).await?;
            if let Some(stack) = stack.filter(|s| s.status.is_success()) {
                return self
                    .in_sync(
                        state,
                        &entry,
                        Some(stack.status.to_string()),
                        "in sync: nothing to change",
                    )
                    .await;
            }
        }
        state.next = Next::ChangeSet;
        Ok(state)
    }

    // ---- change-set -----------------------------------------------------

    /// Acts on the stack's status (the decision table), or executes the change
    /// set poll-status found ready.
    pub async fn change_set(&self, mut state: RunState) -> StepResult {
        let entry = self.resume(&state).await?;
        let spec = &entry.spec;
        let stack_name = spec.effective_stack_name();
        let cfn = self.port(spec).await?;

        if state.execute {
            let name = state.change_set_name.clone().unwrap_or_default();
            // A retried step may find its change set already executing.
            let started = cfn
                .describe_change_set(stack_name, &name)
                .await?
                .is_some_and(|cs| {
                    matches!(
                        cs.execution,
                        ExecutionStatus::ExecuteInProgress | ExecutionStatus::ExecuteComplete
                    )
                });
            if !started {
                info!(stack = %state.stack_id, change_set = %name, "executing change set");
                cfn.execute_change_set(stack_name, &name).await?;
            }
            state.execute = false;
            return Ok(self.wait(state, WaitOn::Execution, spec));
        }

        let stack = cfn.describe_stack(stack_name).await?;
        let hash_matches =
            entry.status.applied_hash.is_some() && entry.status.applied_hash == state.desired_hash;
        let decision = decide_stack(StackObservation {
            status: stack.as_ref().map(|s| &s.status),
            hash_matches,
            on_failed_create: FailedCreatePolicy::Recreate,
        });
        info!(stack = %state.stack_id, status = ?stack.as_ref().map(|s| s.status.to_string()), ?decision, "decided");
        match decision {
            StackDecision::CreateChangeSet {
                kind,
                cleanup_review,
            } => {
                let desired = state.desired_hash.clone().unwrap_or_default();
                let name = change_set_name(stack_name, state.spec_version, &desired);
                if cleanup_review {
                    // Old change sets of a never-created stack; ours (a retried
                    // step made it already) stays.
                    for old in cfn.list_change_sets(stack_name).await? {
                        if old != name {
                            cfn.delete_change_set(stack_name, &old).await?;
                        }
                    }
                }
                let parameters = self.parameters(&state).await?;
                let request = self.change_set_request(&state, spec, &name, kind, parameters)?;
                match cfn.create_change_set(&request).await? {
                    Created::ChangeSet => {
                        state.change_set_name = Some(name);
                        state.change_set_kind = Some(kind);
                        Ok(self.wait(state, WaitOn::ChangeSet, spec))
                    }
                    Created::NothingToChange => {
                        self.in_sync(
                            state,
                            &entry,
                            stack.map(|s| s.status.to_string()),
                            "in sync: the change set was empty",
                        )
                        .await
                    }
                }
            }
            StackDecision::Wait => Ok(self.wait(state, WaitOn::Stack, spec)),
            StackDecision::InSync => {
                self.in_sync(
                    state,
                    &entry,
                    stack.map(|s| s.status.to_string()),
                    "in sync: nothing to change",
                )
                .await
            }
            StackDecision::ContinueRollback
                if state.rollback_continues >= MAX_ROLLBACK_CONTINUES =>
            {
                // Continuing did not help: a resource needs skipping or fixing by hand.
                let events = cfn.events_since(stack_name, state.started_at).await?;
                let reason = first_failure(&events)
                    .or_else(|| stack.and_then(|s| s.reason))
                    .unwrap_or_else(|| "no reason given".into());
                Err(StepError::stalled(format!(
                    "the stack is still UPDATE_ROLLBACK_FAILED after ContinueUpdateRollback: {reason}"
                )))
            }
            StackDecision::ContinueRollback => {
                cfn.continue_update_rollback(stack_name, spec.role_arn.as_deref())
                    .await?;
                state.rollback_continues += 1;
                Ok(self.wait(state, WaitOn::Rollback, spec))
            }
            StackDecision::DeleteAndRecreate => {
                state.recreate = true;
                state.delete_requests = 0;
                state.next = Next::Delete;
                Ok(state)
            }
            StackDecision::Stalled { reason } => Err(StepError::stalled(reason)),
        }
    }

    async fn parameters(&self, state: &RunState) -> Result<Vec<(String, String)>, StepError> {
        let Some(key) = &state.parameters_key else {
            return Ok(Vec::new());
        };
        let bytes = self.store.get(key, 16 * 1024 * 1024).await?;
        let map: BTreeMap<String, String> = serde_json::from_slice(&bytes)
            .map_err(|e| StepError::stalled(format!("{key}: {e}")))?;
        Ok(map.into_iter().collect())
    }

    fn change_set_request(
        &self,
        state: &RunState,
        spec: &StackSpec,
        name: &str,
        kind: ChangeSetKind,
        parameters: Vec<(String, String)>,
    ) -> Result<ChangeSetRequest, StepError> {
        let template_key = state
            .template_key
            .as_deref()
            .ok_or_else(|| StepError::stalled("change-set needs templateKey"))?;
        Ok(ChangeSetRequest {
            stack_name: spec.effective_stack_name().to_owned(),
            change_set_name: name.to_owned(),
            kind,
            template_url: format!(
                "{}/{template_key}",
                self.config.template_url_base.trim_end_matches('/')
            ),
            parameters,
            tags: spec
                .tags
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            capabilities: spec
                .capabilities
                .iter()
                .map(|c| c.as_str().to_owned())
                .collect(),
            role_arn: spec.role_arn.clone(),
            notification_arns: spec.notification_arns.clone(),
            rollback_triggers: spec
                .rollback
                .iter()
                .flat_map(|r| r.triggers.iter().map(|t| (t.arn.clone(), t.kind.clone())))
                .collect(),
            rollback_monitoring_minutes: spec
                .rollback
                .as_ref()
                .and_then(|r| r.monitoring_time)
                .and_then(|t| i32::try_from(t.as_secs() / 60).ok()),
            description: format!(
                "stacksync: {} at {} (spec v{})",
                state.stack_id,
                short(state.revision.as_deref().unwrap_or("?")),
                state.spec_version
            ),
        })
    }

    fn wait(&self, mut state: RunState, on: WaitOn, spec: &StackSpec) -> RunState {
        let first = spec.poll_interval.as_secs();
        state.wait_seconds = if state.wait_on == Some(on) {
            next_poll_seconds(state.wait_seconds, first)
        } else {
            first
        };
        state.wait_on = Some(on);
        state.next = Next::Wait;
        state
    }

    // ---- poll-status ----------------------------------------------------

    /// Looks at what the run waits for and says: wait again, go on, or finish.
    pub async fn poll_status(&self, mut state: RunState) -> StepResult {
        let entry = self.resume(&state).await?;
        state.polls += 1;
        let spec = &entry.spec;
        let stack_name = spec.effective_stack_name();
        let cfn = self.port(spec).await?;
        match state.wait_on {
            None | Some(WaitOn::Stack) | Some(WaitOn::Rollback) => {
                let stack = cfn.describe_stack(stack_name).await?;
                if stack.as_ref().is_some_and(|s| s.status.in_progress()) {
                    let on = state.wait_on.unwrap_or(WaitOn::Stack);
                    return Ok(self.wait(state, on, spec));
                }
                // Settled: decide again from the new status.
                state.wait_on = None;
                state.next = Next::ChangeSet;
                Ok(state)
            }
            Some(WaitOn::ChangeSet) => {
                let name = state.change_set_name.clone().unwrap_or_default();
                let Some(cs) = cfn.describe_change_set(stack_name, &name).await? else {
                    // Gone (deleted by someone, or by a retried step): decide again.
                    info!(stack = %state.stack_id, change_set = %name, "change set gone; deciding again");
                    state.wait_on = None;
                    state.change_set_name = None;
                    state.next = Next::ChangeSet;
                    return Ok(state);
                };
                let ready_without_changes = cs.status == ChangeSetStatus::CreateComplete
                    && cs.execution == ExecutionStatus::Available
                    && cs.changes == 0;
                let stack_matches = if ready_without_changes {
                    self.stack_matches(&state, spec, &cfn).await?
                } else {
                    true
                };
                let decision = decide_change_set(ChangeSetObservation {
                    status: cs.status,
                    execution: cs.execution,
                    reason: cs.reason.as_deref(),
                    changes: Some(cs.changes),
                    stack_matches,
                });
                info!(stack = %state.stack_id, change_set = %name, ?decision, "change set polled");
                match decision {
                    ChangeSetDecision::Wait => Ok(self.wait(state, WaitOn::ChangeSet, spec)),
                    ChangeSetDecision::Execute => {
                        state.execute = true;
                        state.next = Next::ChangeSet;
                        Ok(state)
                    }
                    ChangeSetDecision::WaitForStack => {
                        Ok(self.wait(state, WaitOn::Execution, spec))
                    }
                    ChangeSetDecision::CheckStack => {
                        self.after_execution(state, &entry, &cfn).await
                    }
                    ChangeSetDecision::Empty => {
                        cfn.delete_change_set(stack_name, &name).await?;
                        let stack = cfn.describe_stack(stack_name).await?;
                        self.in_sync(
                            state,
                            &entry,
                            stack.map(|s| s.status.to_string()),
                            "in sync: the change set was empty",
                        )
                        .await
                    }
                    ChangeSetDecision::Failed { reason } => {
                        cfn.delete_change_set(stack_name, &name).await?;
                        Err(StepError::stalled(reason))
                    }
                }
            }
            Some(WaitOn::Execution) => self.after_execution(state, &entry, &cfn).await,
        }
    }

    /// Whether the stack already has the parameters and tags we want.
    async fn stack_matches(
        &self,
        state: &RunState,
        spec: &StackSpec,
        cfn: &F::Port,
    ) -> Result<bool, StepError> {
        let Some(stack) = cfn.describe_stack(spec.effective_stack_name()).await? else {
            return Ok(false);
        };
        if stack.status.not_created() {
            return Ok(false);
        }
        let wanted: BTreeMap<String, String> = self.parameters(state).await?.into_iter().collect();
        let same_parameters = wanted
            .iter()
            .all(|(k, v)| stack.parameters.get(k) == Some(v));
        Ok(same_parameters && stack.tags == spec.tags)
    }

    async fn after_execution(
        &self,
        state: RunState,
        entry: &StackEntry,
        cfn: &F::Port,
    ) -> StepResult {
        let spec = &entry.spec;
        let stack_name = spec.effective_stack_name();
        let stack = cfn.describe_stack(stack_name).await?;
        match decide_after_execute(stack.as_ref().map(|s| &s.status)) {
            ExecutionOutcome::Wait => Ok(self.wait(state, WaitOn::Execution, spec)),
            ExecutionOutcome::Succeeded => {
                if spec.termination_protection {
                    cfn.set_termination_protection(stack_name, true).await?;
                }
                if let Some(policy) = &spec.stack_policy {
                    cfn.set_stack_policy(stack_name, &policy.to_string())
                        .await?;
                }
                let status_text = stack.map(|s| s.status.to_string());
                let message = format!(
                    "applied {}",
                    short(state.revision.as_deref().unwrap_or("?"))
                );
                let status = self.ready_status(&state, entry, status_text, &message);
                self.finish(state, entry, status, "applied").await
            }
            ExecutionOutcome::Failed => {
                let events = cfn.events_since(stack_name, state.started_at).await?;
                let status = stack
                    .as_ref()
                    .map(|s| s.status.to_string())
                    .unwrap_or_else(|| "gone".into());
                let reason = first_failure(&events)
                    .or_else(|| stack.and_then(|s| s.reason))
                    .unwrap_or_else(|| "no reason given".into());
                Err(StepError::stalled(format!(
                    "the stack ended in {status}: {reason}"
                )))
            }
        }
    }

    // ---- delete ---------------------------------------------------------

    /// Deletes the stack — for a removed entry with `destroyOnDelete`, or to
    /// recreate a failed create — polling (through the state machine) to gone.
    pub async fn delete(&self, mut state: RunState) -> StepResult {
        let entry = self.resume(&state).await?;
        let spec = &entry.spec;
        let stack_name = spec.effective_stack_name();
        if !state.recreate && !spec.destroy_on_delete {
            self.registry
                .remove(&state.stack_id, &state.execution)
                .await?;
            state.next = Next::Done;
            state.outcome = Some(format!(
                "entry removed; stack {stack_name} left in place (destroyOnDelete is false)"
            ));
            return Ok(state);
        }
        let cfn = self.port(spec).await?;
        let stack = cfn.describe_stack(stack_name).await?;
        match decide_delete(stack.as_ref().map(|s| &s.status)) {
            DeleteDecision::Gone if state.recreate => {
                state.recreate = false;
                state.wait_on = None;
                state.next = Next::ChangeSet;
                Ok(state)
            }
            DeleteDecision::Gone => {
                self.registry
                    .remove(&state.stack_id, &state.execution)
                    .await?;
                state.next = Next::Done;
                state.outcome = Some(format!("stack {stack_name} deleted; entry removed"));
                Ok(state)
            }
            DeleteDecision::Wait => Ok(self.wait_delete(state, spec)),
            DeleteDecision::Delete => {
                let failed_before = stack
                    .as_ref()
                    .is_some_and(|s| s.status.as_str() == "DELETE_FAILED");
                if failed_before && state.delete_requests >= MAX_DELETE_REQUESTS {
                    let events = cfn.events_since(stack_name, state.started_at).await?;
                    let reason = first_failure(&events)
                        .or_else(|| stack.and_then(|s| s.reason))
                        .unwrap_or_else(|| "no reason given".into());
                    return Err(StepError::stalled(format!(
                        "deleting stack {stack_name} failed (DELETE_FAILED): {reason}"
                    )));
                }
                if spec.termination_protection && state.delete_requests == 0 {
                    // stacksync turned it on; the entry's removal turns it off.
                    cfn.set_termination_protection(stack_name, false).await?;
                }
                cfn.delete_stack(stack_name, spec.role_arn.as_deref())
                    .await?;
                state.delete_requests += 1;
                Ok(self.wait_delete(state, spec))
            }
        }
    }

    fn wait_delete(&self, mut state: RunState, spec: &StackSpec) -> RunState {
        let first = spec.poll_interval.as_secs();
        state.wait_seconds = if state.next == Next::WaitDelete {
            next_poll_seconds(state.wait_seconds, first)
        } else {
            first
        };
        state.next = Next::WaitDelete;
        state
    }

    // ---- finalize (Catch) -----------------------------------------------

    /// Records a failure caught by the state machine and releases the lease.
    /// The previous `lastAppliedRevision` and `appliedHash` are kept; a retry
    /// is due after `retryInterval`.
    pub async fn finalize(&self, input: FinalizeInput) -> StepResult {
        let state = input.state;
        let message = input.error.message();
        let Some(entry) = self.registry.get(&state.stack_id).await? else {
            return Ok(RunState {
                next: Next::Done,
                outcome: Some(message),
                ..state
            });
        };
        let holds = entry
            .lease
            .as_ref()
            .is_some_and(|l| l.owner == state.execution);
        if !holds {
            // Never took the lease, or lost it: the status is someone else's to write.
            return Ok(RunState {
                next: Next::Done,
                outcome: Some(message),
                ..state
            });
        }
        let now = now_millis();
        let status = Status {
            phase: Phase::Failed,
            // A failure in the first step comes with the state it was given,
            // before the spec version was read: the entry's is the one tried.
            observed_spec_version: if state.spec_version > 0 {
                state.spec_version
            } else {
                entry.spec_version
            },
            last_attempted_revision: state
                .revision
                .clone()
                .or(entry.status.last_attempted_revision.clone()),
            message: Some(message.clone()),
            change_set_name: state
                .change_set_name
                .clone()
                .or(entry.status.change_set_name.clone()),
            last_reconcile_at: Some(Timestamp(now)),
            next_reconcile_at: Some(Timestamp(due(now, entry.spec.retry_interval.as_secs()))),
            ..entry.status.clone()
        };
        self.finish(state, &entry, status, &message).await
    }
}

fn due(now: EpochMillis, secs: u64) -> EpochMillis {
    now.saturating_add(i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX))
}

/// The first 12 characters of a revision.
pub fn short(revision: &str) -> &str {
    revision
        .char_indices()
        .nth(12)
        .map_or(revision, |(i, _)| &revision[..i])
}

/// A full Git commit id (SHA-1 or SHA-256, hex).
fn is_commit_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.chars().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_set_names_are_deterministic_and_valid() {
        let name = change_set_name("orders", 3, "0123456789abcdef0123");
        assert_eq!(name, change_set_name("orders", 3, "0123456789abcdef0123"));
        assert!(
            name.starts_with("stacksync-v3-") && name.len() == 29,
            "{name}"
        );
        assert!(crate::validate::stack_name(&name).is_ok());
        // Two stacks with one template: two names.
        assert_ne!(name, change_set_name("billing", 3, "0123456789abcdef0123"));
        assert_ne!(name, change_set_name("orders", 4, "0123456789abcdef0123"));
    }

    #[test]
    fn poll_intervals_grow_by_half_up_to_a_cap() {
        let mut s = 5;
        let mut seen = vec![];
        for _ in 0..8 {
            s = next_poll_seconds(s, 5);
            seen.push(s);
        }
        assert_eq!(seen, [8, 12, 18, 27, 41, 60, 60, 60]);
        assert_eq!(next_poll_seconds(0, 1), 2);
        assert_eq!(
            next_poll_seconds(300, 300),
            300,
            "a long first interval is its own cap"
        );
    }
}
