//! The state that flows through one reconcile execution, and the errors whose
//! names the state machine's `Retry` and `Catch` match.
//!
//! The state is small (names, keys, hashes, counters — never a template): Step
//! Functions limits state to 256 KB.

use serde::{Deserialize, Serialize};

use crate::ports::{PortError, ResourceChange};
pub use crate::ports::{Trigger, TriggerKind};
use crate::registry::RegistryError;
use crate::seen::OutOfBand;
use crate::stack_status::ChangeSetKind;
pub use crate::status::StallReason;

mod wire;

/// Where the state machine goes after a step (its `Choice` states read `$.next`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Next {
    /// artifact-fetch → template-upload.
    #[default]
    Upload,
    /// → change-set (decide, or execute when `execute` is set).
    ChangeSet,
    /// → Wait `$.waitSeconds`, then poll-status.
    Wait,
    /// → WaitForEvent: poll-status, given a task token, polls; still
    /// waiting, it parks the run until CloudFormation's event answers the
    /// token, or `$.waitSeconds` pass (then it polls again, the wait
    /// doubled by the machine, at most [`MAX_EVENT_WAIT_SECONDS`]).
    ///
    /// [`MAX_EVENT_WAIT_SECONDS`]: crate::reconcile::steps::MAX_EVENT_WAIT_SECONDS
    WaitEvent,
    /// → delete.
    Delete,
    /// → Wait `$.waitSeconds`, then delete again.
    WaitDelete,
    /// → Wait `$.waitSeconds`, then fetch again: every run slot of the
    /// stack's account and region is held (`MaxRunsPerAccount`).
    WaitSlot,
    /// → AwaitApproval: the ready change set waits for a person (a task
    /// token), then the run fetches again and executes it if it still holds.
    Approval,
    /// The run is over; status written, lease released.
    Done,
    /// The run is over and failed (the finalizer recorded why): the
    /// execution fails, as its status says.
    Failed,
}

/// What poll-status is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitOn {
    /// Our change set being created.
    ChangeSet,
    /// Someone else's operation on the stack, before we decide.
    Stack,
    /// Our change set being executed.
    Execution,
    /// `ContinueUpdateRollback`.
    Rollback,
    /// A run slot of the stack's account and region.
    Slot,
}

impl WaitOn {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ChangeSet => "change-set",
            Self::Stack => "stack",
            Self::Execution => "execution",
            Self::Rollback => "rollback",
            Self::Slot => "slot",
        }
    }
}

/// The execution's state: input of every step, output of every step. A
/// record per phase, present once that phase has run, so that a step
/// cannot read what has not happened yet; on the wire, one flat object
/// (`wire::Wire`, the shape every earlier version wrote).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(from = "wire::Wire", into = "wire::Wire")]
pub struct RunState {
    /// The registry entry's name (`stackId` on the wire).
    pub entry: String,
    pub trigger: Trigger,
    /// Where the state machine goes next.
    pub next: Next,
    /// Which execution this is, and what it works at.
    pub execution: Execution,
    /// How the run waits: for what, how long, how often it polled.
    pub wait: Wait,
    /// What the run may still try, counted.
    pub budgets: Budgets,
    /// artifact-fetch: the revision and its stored files.
    pub fetched: Option<Fetched>,
    /// template-upload: the desired state, stored, and what it found of
    /// the stack.
    pub uploaded: Option<Uploaded>,
    /// change-set: the change set in hand.
    pub change_set: Option<ChangeSetInHand>,
    /// The approval the ready change set asked for, and its answer.
    pub approval: Approval,
}

/// Which execution a run is, and what it works at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Execution {
    /// The execution's name: the lease owner.
    pub name: String,
    /// Its id (`$$.Execution.Id`: its ARN; `local:<name>` for a local
    /// run), for the events a run puts on the bus.
    pub arn: Option<String>,
    /// When the run started (epoch ms): stack events since then are ours.
    pub started_at: i64,
    /// The entry's spec version the run works at.
    pub spec_version: u64,
    /// How the run ended, in words.
    pub outcome: Option<String>,
    /// What the run's end says besides (a forced run that went through a
    /// closed sync window or a rollout, a change approved for its fleet):
    /// added to its outcome and its status message ([`Execution::add_note`]).
    pub note: Option<String>,
    /// The run slot it holds (`slots#ACCOUNT/REGION`), given back at its end.
    pub slot: Option<String>,
    /// The definition it runs on has `WaitForEvent` (its `Start` says so):
    /// an execution started before it (a deploy does not move a running
    /// execution to the new definition) never parks, it polls.
    pub parks: bool,
    /// The definition it runs on has `WaitForSlot` (its `Start` says so):
    /// an execution started before it goes on without waiting for a run
    /// slot (the machine would not know where `wait-slot` leads).
    pub waits_for_slots: bool,
}

impl Execution {
    /// Adds `note` to what the run's end says, after any said before, once
    /// (a run back from an approval passes its first step again).
    pub fn add_note(&mut self, note: String) {
        self.note = Some(match self.note.take() {
            Some(before) if before.contains(&note) => before,
            Some(before) => format!("{before}; {note}"),
            None => note,
        });
    }
}

/// How a run waits.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Wait {
    /// How long the next Wait state waits.
    pub seconds: u64,
    /// What poll-status is waiting for.
    pub on: Option<WaitOn>,
    /// Polls so far (the interval grows with them).
    pub polls: u32,
}

/// What a run may still try.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Budgets {
    /// How many times this run continued a failed rollback.
    pub rollback_continues: u32,
    /// How many times delete asked CloudFormation to delete the stack.
    pub delete_requests: u32,
    /// Deleting to create again (a failed create), not to remove the entry.
    pub recreate: bool,
}

/// What artifact-fetch fetched.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fetched {
    pub revision: String,
    /// Where its files are stored (none yet while they are being stored).
    pub artifact_key: Option<String>,
    /// The Guard rule sets the run checks the template against, stored.
    pub policies: Vec<PolicyRef>,
}

/// A rule set a run checks its template against: where it comes from (as
/// findings name it: `url@revision/path`) and where its files are stored
/// (by source, revision and folder: fetched once per revision).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRef {
    pub origin: String,
    pub key: String,
}

/// What template-upload stored, and what it found of the stack.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Uploaded {
    pub template_key: String,
    /// The S3 version of `template_key` that template-upload read back and
    /// compared: the change set's `TemplateURL` names it, so an object
    /// written there since is not what CloudFormation deploys.
    pub template_version: Option<String>,
    /// The merged parameters, as JSON in S3 (they may be too big for the state).
    pub parameters_key: Option<String>,
    pub desired_hash: Option<String>,
    /// The tags the entry's parameter file gives (CodePipeline's template
    /// configuration, a Git sync deployment file): the change set carries
    /// them under the entry's own.
    pub file_tags: std::collections::BTreeMap<String, String>,
    /// The stack is not as the last run left it (or nothing was recorded,
    /// or the run is forced): a change set is made even at the applied hash.
    pub must_apply: bool,
    /// What the run found changed outside stacksync, to put back.
    pub out_of_band: Option<OutOfBand>,
    /// The drift this run reverts.
    pub revert: Option<Revert>,
}

/// A drift this run reverts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Revert {
    /// Its fingerprint (`crate::drift`): a drift-aware change set, even at
    /// the applied hash.
    pub drift: String,
    /// CloudFormation refused the drift-aware change set: the template is
    /// applied as it is instead.
    pub reapplied: bool,
}

/// The change set a run made (or was approved).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChangeSetInHand {
    pub name: String,
    pub kind: Option<ChangeSetKind>,
    /// The id of the stack it is for, as CloudFormation reported it: the
    /// stack followed while it executes (by name, an emulator that kept a
    /// failed create's stack answers with that one).
    pub stack_id: Option<String>,
    /// It is ready: change-set executes it.
    pub execute: bool,
    /// The stack is one stacksync did not make, and the entry adopts it
    /// (`adopt: true`): the change set is previewed (recorded and logged)
    /// before it is executed.
    pub adopting: bool,
}

impl ChangeSetInHand {
    /// A change set known by its name only.
    pub fn named(name: impl Into<String>) -> Self {
        ChangeSetInHand {
            name: name.into(),
            ..ChangeSetInHand::default()
        }
    }
}

/// The approval a ready change set asked for, and its answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Approval {
    /// The ready change set waits (or waited) for a person: what asked.
    pub request: Option<ApprovalRequest>,
    /// The answer the approval's task token brought back.
    pub answer: Option<ApprovalAnswer>,
}

impl RunState {
    /// The revision the run fetched.
    pub fn revision(&self) -> Option<&str> {
        self.fetched.as_ref().map(|f| f.revision.as_str())
    }

    /// The hash of the desired state template-upload stored.
    pub fn desired_hash(&self) -> Option<&str> {
        self.uploaded
            .as_ref()
            .and_then(|u| u.desired_hash.as_deref())
    }

    /// The change set in hand's name.
    pub fn change_set_name(&self) -> Option<&str> {
        self.change_set.as_ref().map(|c| c.name.as_str())
    }

    /// The change set in hand is ready to execute.
    pub fn executes(&self) -> bool {
        self.change_set.as_ref().is_some_and(|c| c.execute)
    }

    /// A change set is made even at the applied hash.
    pub fn must_apply(&self) -> bool {
        self.uploaded.as_ref().is_some_and(|u| u.must_apply)
    }

    /// The drift this run reverts.
    pub fn revert(&self) -> Option<&Revert> {
        self.uploaded.as_ref().and_then(|u| u.revert.as_ref())
    }

    /// The out-of-band change this run puts back.
    pub fn out_of_band(&self) -> Option<&OutOfBand> {
        self.uploaded.as_ref().and_then(|u| u.out_of_band.as_ref())
    }
}

/// A ready change set that waits for a person, and what it was made from
/// (an approval holds only while these stay).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    pub change_set: String,
    /// Why it waits.
    pub why: String,
    /// What it would do (bounded), and how many rows more.
    pub changes: Vec<ResourceChange>,
    #[serde(default)]
    pub more: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_hash: Option<String>,
    pub spec_version: u64,
    /// The stack when it asked: its id and when CloudFormation last changed
    /// it (none for a create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<(String, i64)>,
    /// How long it waits (the state machine's `TimeoutSecondsPath`).
    pub timeout_seconds: u64,
    /// When it asked (epoch ms): the wait is not counted in the run's
    /// `timeout`.
    pub asked_at: i64,
    /// CloudFormation's own checks of the change set (validations,
    /// hooks), one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
    /// A hash of every row of the change set
    /// ([`crate::pull_request::rows_hash`]): what an approval of a fleet's
    /// target approves for the fleet's other targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<String>,
}

/// What `stacksync approve` sends back through the task token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalAnswer {
    /// The change set the approver named.
    pub change_set: String,
    /// Who approved (the caller's AWS identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// When (epoch ms).
    pub at: i64,
}

/// The error names of the contract with the state machine.
pub mod error_names {
    /// Throttling, timeouts, 5xx: `Retry` with backoff and jitter.
    pub const TRANSIENT: &str = "StackSync.Transient";
    /// A source that did not answer in time: `Retry` once only (each try
    /// already waited its timeout), then `Catch`.
    pub const TIMEOUT: &str = "StackSync.Timeout";
    /// A person must act (bad template, failed stack…): `Catch` → record →
    /// `Fail`. The full name says why: `StackSync.Stalled.<Reason>`.
    pub const STALLED: &str = "StackSync.Stalled";
}

/// A step's failure: transient (the state machine retries it) or stalled
/// (it records the failure and stops). Its [`name`](StepError::name) is what
/// the state machine's `Retry` and `Catch` match.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    #[error("{message}")]
    Transient { message: String },
    /// A source that did not answer within its timeouts.
    #[error("{message}")]
    TimedOut { message: String },
    #[error("{message}")]
    Stalled {
        reason: StallReason,
        message: String,
    },
    /// The run ended already: an earlier attempt of this step wrote its
    /// final status and gave the lease back, and its answer was lost (a
    /// Lambda that died after the write, a retried call). The step then ends
    /// the run as that attempt did, never a second time.
    #[error("{outcome}")]
    Ended { outcome: String },
}

impl StepError {
    pub fn stalled(reason: StallReason, message: impl Into<String>) -> Self {
        Self::Stalled {
            reason,
            message: message.into(),
        }
    }

    pub fn transient(message: impl Into<String>) -> Self {
        Self::Transient {
            message: message.into(),
        }
    }

    /// A field of the run's state that a step needs and did not get.
    pub fn missing(step: &str, field: &str) -> Self {
        Self::stalled(
            StallReason::ContractViolated,
            format!("{step} needs `{field}` in the run's state, and it is missing"),
        )
    }

    /// The error's name: `StackSync.Transient` or `StackSync.Stalled.<Reason>`.
    pub fn name(&self) -> String {
        match self {
            Self::Transient { .. } => error_names::TRANSIENT.to_owned(),
            Self::TimedOut { .. } => error_names::TIMEOUT.to_owned(),
            Self::Stalled { reason, .. } => format!("{}.{reason}", error_names::STALLED),
            // Never leaves `Steps::run`, which ends the run with it.
            Self::Ended { .. } => "StackSync.Ended".to_owned(),
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Self::Transient { message }
            | Self::TimedOut { message }
            | Self::Stalled { message, .. }
            | Self::Ended { outcome: message } => message,
        }
    }

    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Transient { .. })
    }

    /// A port's refusal, as a stall for `reason`; transient errors stay transient.
    pub fn port(reason: StallReason) -> impl Fn(PortError) -> StepError {
        move |e| match e {
            PortError::Transient(m) => Self::transient(m),
            PortError::Refused(m) | PortError::NotFound(m) | PortError::Unsupported(m) => {
                Self::stalled(reason, m)
            }
        }
    }
}

impl From<PortError> for StepError {
    /// A refusal of AWS (access denied, validation error): `Refused`.
    fn from(e: PortError) -> Self {
        Self::port(StallReason::Refused)(e)
    }
}

impl From<RegistryError> for StepError {
    fn from(e: RegistryError) -> Self {
        if e.is_transient() {
            Self::transient(e.to_string())
        } else {
            Self::stalled(StallReason::RegistryRefused, e.to_string())
        }
    }
}

/// The failure a `Catch` hands to the finalizer: `{"Error": name, "Cause": text}`.
/// Step Functions wraps a Lambda's error as a JSON `Cause` holding
/// `errorMessage`; the local runner passes the message itself. Both are read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct CaughtError {
    #[serde(rename = "Error", default)]
    pub error: String,
    #[serde(rename = "Cause", default)]
    pub cause: String,
}

impl CaughtError {
    /// Why the run stalled, from the error's name.
    pub fn reason(&self) -> StallReason {
        StallReason::of_error_name(&self.error)
    }

    /// The human message inside the cause; never empty (the error's name,
    /// where the cause says nothing).
    pub fn message(&self) -> String {
        serde_json::from_str::<serde_json::Value>(&self.cause)
            .ok()
            .and_then(|v| {
                v.get("errorMessage")
                    .and_then(|m| m.as_str())
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| {
                let cause = self.cause.trim();
                let bare = cause.is_empty()
                    || serde_json::from_str::<serde_json::Value>(cause)
                        .is_ok_and(|v| v.is_object());
                if bare {
                    format!("{} (with no message)", self.error)
                } else {
                    cause.to_owned()
                }
            })
    }
}

/// The finalizer's input: the state as it was, and what was caught.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct FinalizeInput {
    #[serde(flatten)]
    pub state: RunState,
    #[serde(default)]
    pub error: CaughtError,
}

#[cfg(test)]
mod tests;
