//! The reconcile steps: what each Lambda function (and the local runner's
//! Task states) does, one module per step, named like its `functions/`
//! folder and its state in `statemachine/reconcile.asl.json`:
//!
//! | step | state | does |
//! |---|---|---|
//! | [`artifact_fetch`] | `FetchArtifact` | takes the lease, resolves the revision, stores the artifact |
//! | [`template_upload`] | `UploadTemplate` | checks and stores the template; in sync → done |
//! | [`change_set`] | `ChangeSet` | acts on the stack's status, or executes a ready change set |
//! | [`poll_status`] | `PollStatus` | wait again, go on, or finish |
//! | [`approval`] | `AwaitApproval` | records a change set that waits for a person, and the token that answers it |
//! | [`delete`] | `DeleteStack` | deletes the stack; drops the entry or goes on to create |
//! | [`finalize`] | `RecordFailure` | records a caught failure, releases the lease |
//!
//! Each takes the run's state and returns it with `next` set; the state
//! machine routes on `next` and does all the waiting. What to do is decided
//! in [`super::decide`]; the steps observe, ask it, and act. Every way out —
//! in sync, applied, deleted, suspended, failed — writes the status and
//! releases the lease (one conditional write, `Steps::finish`).

pub mod approval;
pub mod artifact_fetch;
pub mod change_set;
pub mod delete;
pub mod finalize;
mod fleet_approval;
mod name;
mod notify;
mod parameters;
pub mod park;
pub mod policy;
pub mod poll_status;
mod publish;
mod ready;
pub mod retrying;
mod rollout;
mod settings;
mod slots;
pub mod template_upload;
mod upstream;
mod waits;
mod windows;

#[cfg(test)]
mod testing;

use std::collections::BTreeMap;

use serde_json::Value;
use tracing::info;

use super::decide::{Effect, effects_of_end};
use super::run::{FinalizeInput, Next, RunState, StepError};
use crate::clock::{EpochMillis, now_millis};
use crate::ports::{
    Blobs, CloudFormationFactory, EventsOf, SourceFetcher, StackInfo, first_failure, root_cause,
};
use crate::registry::{Entries as _, Leases as _};
use crate::registry::{RegistryError, StackEntry, StepRegistry, lease_ttl};
use crate::seen::{Seen, deployed_hash};
use crate::spec::StackSpec;
use crate::status::{StallReason, Status, Timestamp, transitions};

/// The longest wait between two polls.
pub const MAX_POLL_SECONDS: u64 = 60;

pub type StepResult = Result<RunState, StepError>;

pub use name::StepName;
use ready::ready_status;
pub use slots::slot_of;
use waits::within_budget;
pub use waits::{
    EVENT_WAIT_POLL_INTERVALS, MAX_EVENT_WAIT_SECONDS, first_event_wait, next_poll_seconds,
};

/// Settings read once at start.
#[derive(Debug, Clone)]
pub struct StepConfig {
    /// Template URLs: this + `/` + key; `bucket`: the installation's (packaged templates name it).
    pub template_url_base: String,
    pub bucket: String,
    /// The local runner: `http://` and `git://` sources are fetched without
    /// `source.insecure` (a deployed installation refuses them).
    pub local: bool,
    /// The installation, as its stacks' `stacksync:installation` tag names
    /// it: the registry table's name.
    pub installation: String,
    /// What a deployed installation allows its entries (stack names,
    /// service roles); the local runner's checks none.
    pub policy: crate::ownership::InstallationPolicy,
    /// A deployed installation's approval function URL
    /// (`STACKSYNC_ANSWER_URL`), where its runs' waits are answered by a
    /// caller whose identity AWS verified; `None`: the local runner, whose
    /// waits are answered through the registry.
    pub answer_url: Option<String>,
    /// The installation's Guard rules (`PolicySource`), checked on every
    /// stack's template before its change set; an entry's `policy:` adds.
    pub rules: Option<crate::spec::Source>,
    /// The region whose CloudFormation events reach this installation's
    /// events function (`STACKSYNC_STACK_EVENTS`): a run waiting on a stack
    /// there (in the installation's own account) parks until the stack's
    /// event wakes it. `None`: every run polls (the local runner).
    pub stack_events: Option<String>,
    /// The installation's sync windows (`STACKSYNC_WINDOWS`), besides each
    /// entry's own: when runs may change stacks.
    pub windows: Vec<crate::window::Window>,
    /// The time windows are judged at: the system's (a test's own).
    pub clock: crate::clock::Clock,
    /// At most this many runs at once per account and region
    /// (`MaxRunsPerAccount`); `None`: no cap.
    pub max_runs_per_account: Option<u32>,
    /// The installation's region: the region of specs that name none.
    pub home_region: Option<String>,
}

/// The ports the steps use, named once: a deployment's (DynamoDB, S3, the
/// SDK, the sources), a local run's, a test's fakes. A step's code names
/// `P: Ports`, and its CloudFormation handle [`Port<P>`].
pub trait Ports {
    type Registry: StepRegistry;
    type Blobs: Blobs;
    type CloudFormation: CloudFormationFactory;
    type Sources: SourceFetcher;
}

/// Four ports as one [`Ports`]: `Steps<With<R, B, F, S>>`.
#[derive(Debug)]
pub struct With<R, B, F, S>(std::marker::PhantomData<(R, B, F, S)>);

impl<R, B, F, S> Ports for With<R, B, F, S>
where
    R: StepRegistry,
    B: Blobs,
    F: CloudFormationFactory,
    S: SourceFetcher,
{
    type Registry = R;
    type Blobs = B;
    type CloudFormation = F;
    type Sources = S;
}

/// The CloudFormation handle of one account and region, as the steps of
/// `P` get it.
pub type Port<P> = <<P as Ports>::CloudFormation as CloudFormationFactory>::Port;

/// The steps, with the ports they use.
pub struct Steps<P: Ports> {
    pub registry: P::Registry,
    pub blobs: P::Blobs,
    pub cloudformation: P::CloudFormation,
    pub sources: P::Sources,
    pub config: StepConfig,
    /// Where the runs' events go (an EventBridge bus), if anywhere.
    pub notices: crate::ports::Notifier,
    /// The Guard rule sets read so far (by revision).
    pub rule_cache: policy::RuleCache,
    /// Who answers a parked run's token when the run finds its stack
    /// settled as it parks (Step Functions; the registry's answers locally).
    pub wakes: crate::ports::Wakes,
    /// Who starts a run's dependents the moment it ends `Ready`, on the
    /// machine it runs on (none: the scheduler starts them).
    pub starter: crate::ports::RunStarter,
}

impl<P: Ports> std::fmt::Debug for Steps<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steps")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<P: Ports> Steps<P> {
    /// Runs one step on a JSON input: what a Lambda function does with its
    /// event, and what the local runner does for a Task state.
    pub async fn run(&self, step: StepName, input: Value) -> Result<Value, StepError> {
        let parse = |v: Value| {
            serde_json::from_value::<RunState>(v).map_err(|e| {
                StepError::stalled(
                    StallReason::ContractViolated,
                    format!("{step}: bad input: {e}"),
                )
            })
        };
        let ended = |mut state: RunState, e: StepError| match e {
            StepError::Ended { outcome } => {
                state.next = Next::Done;
                state.execution.outcome = Some(outcome);
                Ok(state)
            }
            other => Err(other),
        };
        if step == StepName::PollStatus && input.get("taskToken").is_some() {
            return self.park_step(input).await;
        }
        let state = match step {
            StepName::ArtifactFetch => {
                let state = parse(input)?;
                match self.artifact_fetch(state.clone()).await {
                    Ok(done) => done,
                    Err(e) => return Err(self.retrying(step, &state, e).await),
                }
            }
            StepName::TemplateUpload
            | StepName::ChangeSet
            | StepName::PollStatus
            | StepName::Delete => {
                let state = parse(input)?;
                let result = match step {
                    StepName::TemplateUpload => self.template_upload(state.clone()).await,
                    StepName::ChangeSet => self.change_set(state.clone()).await,
                    StepName::PollStatus => self.poll_status(state.clone()).await,
                    _ => self.delete(state.clone()).await,
                };
                match result {
                    Ok(done) => done,
                    Err(e) => {
                        let e = self.retrying(step, &state, e).await;
                        ended(state, e)?
                    }
                }
            }
            StepName::Approval => {
                let input: approval::ApprovalInput =
                    serde_json::from_value(input).map_err(|e| {
                        StepError::stalled(
                            StallReason::ContractViolated,
                            format!("approval: bad input: {e}"),
                        )
                    })?;
                let state = input.state.clone();
                self.approval(input).await.or_else(|e| ended(state, e))?
            }
            StepName::Finalize => {
                let input: FinalizeInput = serde_json::from_value(input).map_err(|e| {
                    StepError::stalled(
                        StallReason::ContractViolated,
                        format!("finalize: bad input: {e}"),
                    )
                })?;
                self.finalize(input).await?
            }
        };
        serde_json::to_value(state)
            .map_err(|e| StepError::stalled(StallReason::ContractViolated, e.to_string()))
    }

    async fn entry(&self, state: &RunState) -> Result<StackEntry, StepError> {
        self.registry.get(&state.entry).await?.ok_or_else(|| {
            StepError::stalled(
                StallReason::NotRegistered,
                format!("stack {:?} is no longer registered", state.entry),
            )
        })
    }

    /// How every step after the first begins: read the entry afresh (a
    /// retried or resumed step never works from stale state) and renew the
    /// lease for as long as the spec's waits need (a heartbeat: a run that
    /// lost its lease stops here, and one that stopped frees the stack soon).
    /// Read first, renewed second: a renewal that holds proves nobody else
    /// wrote since.
    async fn resume(&self, state: &RunState) -> Result<StackEntry, StepError> {
        let entry = self.entry(state).await?;
        let renewed = self
            .registry
            .renew_lease(
                &state.entry,
                &state.execution.name,
                lease_ttl(&entry.spec),
                now_millis(),
            )
            .await;
        match renewed {
            Ok(_) => Ok(entry),
            // This run's own final write, made by an earlier attempt of this
            // step whose answer was lost: the run is over.
            Err(RegistryError::LeaseNotHeld { holder: None, .. })
                if entry.status.run.execution.as_deref() == Some(state.execution.name.as_str()) =>
            {
                Err(StepError::Ended {
                    outcome: format!(
                        "ended by an earlier attempt of this step ({})",
                        entry.status.phase
                    ),
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Whose `stack` is, for `entry` ([`crate::ownership::owner`]).
    fn owner_of(&self, entry: &StackEntry, stack: &StackInfo) -> crate::ownership::Owner {
        // The stack a run left (`seen`), or the placeholder a CREATE change
        // set of this entry made.
        let seen = entry
            .status
            .applied
            .seen
            .as_ref()
            .map(|s| s.stack_id.as_str());
        let recorded = entry
            .status
            .run
            .placeholder
            .as_deref()
            .filter(|p| *p == stack.stack_id)
            .or(seen);
        crate::ownership::owner(
            &entry.spec,
            &self.config.installation,
            &stack.stack_id,
            &stack.tags,
            recorded,
        )
    }

    /// Refuses (`ServiceRoleNotNamed`, `NotAllowed`) a stack whose service
    /// role CloudFormation would use unchecked: one the entry does not name
    /// and the installation may not pass.
    fn role_allowed(&self, entry: &StackEntry, stack: &StackInfo) -> Result<(), StepError> {
        match self.config.policy.refuses_role(
            stack.role_arn.as_deref(),
            entry.spec.role_arn.as_deref(),
            entry.spec.effective_stack_name(),
        ) {
            Some((reason, why)) => Err(StepError::stalled(reason, why)),
            None => Ok(()),
        }
    }

    async fn port(&self, spec: &StackSpec) -> Result<Port<P>, StepError> {
        Ok(self
            .cloudformation
            .for_stack(
                spec.region.as_deref(),
                spec.assume_role_arn.as_deref(),
                Some(&spec.name),
            )
            .await?)
    }

    /// Writes a status while the run goes on.
    async fn record(
        &self,
        state: &RunState,
        entry: &StackEntry,
        status: Status,
    ) -> Result<(), StepError> {
        let status = transitions::recorded(&entry.status, status, now_millis());
        self.registry
            .write_status(&state.entry, &state.execution.name, &status)
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
        info!(stack = %state.entry, phase = %status.phase, outcome, "run finished");
        let mut status =
            transitions::ended(&entry.status, status, &state.execution.name, now_millis());
        // The spec changed (or deletion was asked) while this run worked from
        // an older one: look again at once rather than after `interval`.
        if state.execution.spec_version > 0 {
            let latest = self.registry.get(&state.entry).await?;
            if latest.is_some_and(|e| {
                e.spec_version != state.execution.spec_version || e.deletion_requested_at.is_some()
            }) {
                status = transitions::due_now(status, now_millis());
            }
        }
        let outcome = match &state.execution.note {
            Some(note) => {
                status.message = Some(match status.message.take() {
                    Some(message) => format!("{message}; {note}"),
                    None => note.clone(),
                });
                format!("{outcome}; {note}")
            }
            None => outcome.to_owned(),
        };
        let effects = effects_of_end(entry.status.phase, status.phase);
        self.registry
            .write_status_and_release(&state.entry, &state.execution.name, &status)
            .await?;
        self.carry_out(&state, entry, &status, &effects).await;
        self.give_back_slot(&mut state, Some(&entry.spec)).await;
        if let Some(fetched) = &state.fetched {
            self.advance_rollout(&state, entry, &status, &fetched.revision)
                .await;
        }
        state.next = Next::Done;
        state.execution.outcome = Some(outcome);
        Ok(state)
    }

    /// Carries out what a run's end set going ([`effects_of_end`]), once its
    /// status is written; each best effort (logged, never failing the run).
    async fn carry_out(
        &self,
        state: &RunState,
        entry: &StackEntry,
        status: &Status,
        effects: &[Effect],
    ) {
        for effect in effects {
            match effect {
                Effect::WakeDependents => {
                    let by = Some(&state.execution);
                    self.wake_dependents(&state.entry, &status.applied.outputs, by)
                        .await;
                }
                Effect::RecheckUpstream => {
                    self.recheck_upstream(entry, status, state.execution.started_at)
                        .await;
                }
                Effect::Notify(kind) => self.notify(*kind, state, entry, status, None).await,
            }
        }
    }

    /// Ends the run in sync: `Ready` at this run's revision, nothing
    /// deployed. `outputs`: the stack's, as `cfn` reported them.
    async fn in_sync(
        &self,
        state: RunState,
        entry: &StackEntry,
        cfn: &Port<P>,
        seen: Option<Seen>,
        outputs: Option<BTreeMap<String, String>>,
        message: &str,
    ) -> StepResult {
        let outputs = self
            .recordable_outputs(&state, &entry.spec, cfn, outputs)
            .await?;
        let status = self.ready(&state, entry, cfn, seen, outputs, message).await;
        self.finish(state, entry, status, "in sync").await
    }

    /// `message`, and the stack's tags that are not the entry's, if any:
    /// CloudFormation found the change set empty, and left them as they
    /// are (decided from the stack as described, not from what was sent).
    fn with_untaken_tags(
        &self,
        message: String,
        state: &RunState,
        spec: &StackSpec,
        stack: Option<&StackInfo>,
    ) -> String {
        let Some(stack) = stack.filter(|s| !s.status.not_created()) else {
            return message;
        };
        let file_tags = state
            .uploaded
            .as_ref()
            .map(|u| u.file_tags.clone())
            .unwrap_or_default();
        let desired =
            crate::ownership::desired_tags_with(&file_tags, spec, &self.config.installation);
        let differing = super::decide::tags_differing(&stack.tags, &desired);
        if differing.is_empty() {
            return message;
        }
        format!(
            "{message}; the stack's tags are not the entry's ({}), and CloudFormation's empty change set leaves them so",
            differing.join(", ")
        )
    }

    /// The stack as it is now, in the terms a later run and the health
    /// check compare with: its description, and the hash of the template
    /// and parameters CloudFormation holds (one `GetTemplate`).
    async fn observe(
        &self,
        cfn: &Port<P>,
        spec: &StackSpec,
        stack: &StackInfo,
    ) -> Result<Seen, StepError> {
        use crate::ports::Stacks as _;
        let body = cfn
            .template_body(spec.effective_stack_name())
            .await?
            .unwrap_or_default();
        Ok(Seen {
            region: spec.region.clone(),
            assume_role_arn: spec.assume_role_arn.clone(),
            stack_id: stack.stack_id.clone(),
            changed_at: Timestamp(stack.changed_at),
            stack_status: stack.status.to_string(),
            drift: stack.drift.clone(),
            deployed_hash: deployed_hash(
                &body,
                &parameters::masked(spec, &stack.parameters),
                &stack.tags,
            ),
            interval_seconds: spec.interval.as_secs(),
            drift_seconds: Some(spec.drift.interval_seconds()),
        })
    }

    /// [`Steps::observe`], for a stack that may be gone.
    async fn observe_if_there(
        &self,
        cfn: &Port<P>,
        spec: &StackSpec,
        stack: Option<&StackInfo>,
    ) -> Result<Option<Seen>, StepError> {
        match stack {
            Some(stack) => Ok(Some(self.observe(cfn, spec, stack).await?)),
            None => Ok(None),
        }
    }

    /// Why the stack's operation failed: the first failed resource since the
    /// run started, or the stack's own reason.
    async fn failure_reason(
        &self,
        cfn: &Port<P>,
        stack_name: &str,
        state: &RunState,
        stack: Option<StackInfo>,
    ) -> Result<String, StepError> {
        use crate::ports::Stacks as _;
        // The operation's own failures first: validations and hooks too.
        if let Some(operation) = stack.as_ref().and_then(StackInfo::deploying_operation)
            && let Some(events) = cfn
                .failed_events(stack_name, EventsOf::Operation(operation))
                .await?
            && let Some(cause) = root_cause(&events)
        {
            return Ok(cause);
        }
        let events = cfn
            .events_since(stack_name, state.execution.started_at)
            .await?;
        Ok(first_failure(&events)
            .or_else(|| stack.and_then(|s| s.reason))
            .unwrap_or_else(|| "no reason given".into()))
    }
}

/// `now` + `secs`.
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

#[cfg(test)]
mod tests {
    use super::*;

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
