//! What stacksync observed and did for one stack: the status record.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::clock::{self, EpochMillis};
use crate::preview::ResourceChange;

mod approval;
mod record;
pub mod transitions;
mod wire;
pub use approval::{
    ApprovalRecord, AwaitingApproval, Decision, MAX_APPROVAL_RECORDS, MAX_REFUSALS_KEPT,
    appended_approval,
};
pub use record::{
    Applied, Approvals, ChecksRecord, Described, Findings, Inputs, LastRun, MAX_PACKAGED_RECORDED,
    MAX_POLICY_FINDINGS, MAX_PROVENANCE_BYTES, PolicyRecord, RolloutHold, Status, Times,
    bounded_provenance,
};

/// Longest status message kept; longer ones are cut (DynamoDB items are bounded).
pub const MAX_MESSAGE_CHARS: usize = 2048;

/// Where a stack is in its life, as the reconcile engine last recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum Phase {
    /// Registered, not reconciled yet.
    #[default]
    Pending,
    /// A reconcile is running.
    Reconciling,
    /// The stack matches the spec at `lastAppliedRevision`.
    Ready,
    /// `Ready`, and the last drift detection found resources that are not
    /// as the template says (`status.drift`). Shown, never stored: the
    /// stored phase stays `Ready`.
    Drifted,
    /// The last reconcile failed; see `message`.
    Failed,
    /// The entry was removed; the stack is being deleted (or released).
    /// Once it is gone, so is the entry.
    Deleting,
    /// Reconciles are suspended.
    Suspended,
    /// A change set is ready and waits for a person's approval
    /// (`stacksync approve` / `reject`).
    AwaitingApproval,
}

impl Phase {
    /// `Ready`, drifted or not: the stack is as the spec says, as far as
    /// runs go (dependents may go on).
    pub fn is_ready(self) -> bool {
        matches!(self, Self::Ready | Self::Drifted)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Reconciling => "Reconciling",
            Self::Ready => "Ready",
            Self::Drifted => "Drifted",
            Self::Failed => "Failed",
            Self::Deleting => "Deleting",
            Self::Suspended => "Suspended",
            Self::AwaitingApproval => "AwaitingApproval",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An instant, stored and shown as RFC 3339 text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub EpochMillis);

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&clock::rfc3339_millis(self.0))
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        clock::parse_rfc3339(&text)
            .map(Timestamp)
            .ok_or_else(|| serde::de::Error::custom(format!("{text:?} is not an RFC 3339 time")))
    }
}

/// Why a run stalled: a person must act (or the spec or the revision must
/// change) before trying again can help. Kept in the status (`stallReason`)
/// and in the error's name, so tests, the CLI and alarms match on it, never
/// on message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StallReason {
    /// The entry is no longer registered.
    NotRegistered,
    /// The source kind or an option of it is not supported by this version.
    Unsupported,
    /// The source cannot be read: not found, no access, no such ref.
    SourceUnavailable,
    /// The source refused the credentials: wrong, expired, or without
    /// access. Tried again after the backoff, up to `maxAttempts` (the
    /// secret read afresh, so a mended one is used).
    AuthenticationFailed,
    /// The source was read, and what it holds is refused: a link leaving
    /// it, a file in Git LFS or a submodule, a hostile or oversized archive.
    InvalidSource,
    /// The template or parameter file is missing, too large or not valid.
    InvalidTemplate,
    /// An object the run stored (artifact, template, parameters) is missing
    /// or unreadable.
    ArtifactUnavailable,
    /// AWS refused a request (access denied, validation error…).
    Refused,
    /// The change set failed, or was deleted or outdated by someone else.
    ChangeSetFailed,
    /// The stack's operation failed or was rolled back.
    StackFailed,
    /// The rollback stays failed after `ContinueUpdateRollback`.
    RollbackFailed,
    /// Deleting the stack failed.
    DeleteFailed,
    /// The stack's create failed, and the stack stays as it failed: kept
    /// for inspection (`onFailedCreate: keep`), or made anew once at this
    /// revision already. No more tries until the revision or the spec
    /// changes, or a forced reconcile.
    FailedCreateStays,
    /// The stack is in a state stacksync leaves alone.
    StackBlocked,
    /// The stack was not made by this installation's entry (no
    /// `stacksync:` tags, another StackId), and the entry does not adopt it.
    NotOwned,
    /// The stack has a service role the entry does not name: without
    /// `roleArn`, CloudFormation would deploy under it unchecked.
    ServiceRoleNotNamed,
    /// A person rejected the change set (`stacksync reject`).
    Rejected,
    /// Nobody approved the change set within `approvalTimeout`.
    ApprovalTimedOut,
    /// The installation does not allow what the entry asks: a stack name
    /// outside its `StackNamePrefix`, a service role outside its
    /// `CloudFormationRoleArns`, or no `roleArn` where it requires one.
    NotAllowed,
    /// A run's state lacks what a step needs (a broken contract between
    /// the state machine and the steps).
    ContractViolated,
    /// The registry refused a write (the lease was lost, a conflict).
    RegistryRefused,
    /// Transient errors outlasted every retry.
    RetriesExhausted,
    /// The run passed its deadline (`timeout`) or its poll budget
    /// (`maxPolls`) while it waited, or its source did not answer in time.
    TimedOut,
    /// The run was stopped from outside: a local run interrupted (Ctrl-C,
    /// SIGTERM), an execution aborted, or a hold ended by `stacksync unlock`.
    Interrupted,
    /// An error stacksync did not raise (a Lambda or Step Functions error).
    Unexpected,
    /// A parameter's value could not be read: its SSM parameter, secret
    /// (or the key in it) or stack output is not there. Retried with
    /// backoff: the value may be created without a change to the spec.
    MissingValue,
    /// The source's credentials secret may not be sent to the source's
    /// host (or repository), or names none (`hosts`): nothing was sent.
    CredentialNotForHost,
    /// A secret (`{secret:}`, a SecureString `{ssm:}`) would be passed to
    /// a parameter the template does not mark `NoEcho`, where anyone who
    /// may describe the stack reads it; or read with `fromStack` from an
    /// output that holds one (recorded `****`), where it would be recorded.
    SecretNotNoEcho,
    /// The template breaks a blocking Guard rule of the installation's or
    /// the entry's policy: nothing was made. Tried again with backoff, as
    /// a missing value is: the rules may change without a change to the
    /// spec or the template.
    PolicyViolation,
    /// A rule set cannot be used: a rule file does not parse (its file and
    /// line named), or the folder holds no `.guard` file. Nothing was made.
    InvalidPolicy,
}

impl StallReason {
    pub const ALL: [StallReason; 30] = [
        Self::NotRegistered,
        Self::Unsupported,
        Self::SourceUnavailable,
        Self::AuthenticationFailed,
        Self::InvalidSource,
        Self::InvalidTemplate,
        Self::ArtifactUnavailable,
        Self::Refused,
        Self::ChangeSetFailed,
        Self::StackFailed,
        Self::RollbackFailed,
        Self::DeleteFailed,
        Self::FailedCreateStays,
        Self::StackBlocked,
        Self::NotOwned,
        Self::ServiceRoleNotNamed,
        Self::Rejected,
        Self::ApprovalTimedOut,
        Self::NotAllowed,
        Self::ContractViolated,
        Self::RegistryRefused,
        Self::RetriesExhausted,
        Self::TimedOut,
        Self::Interrupted,
        Self::Unexpected,
        Self::MissingValue,
        Self::CredentialNotForHost,
        Self::SecretNotNoEcho,
        Self::PolicyViolation,
        Self::InvalidPolicy,
    ];

    /// Whether trying again at the same revision and spec is unlikely to
    /// help by itself (a failed stack, a refused template or credential):
    /// such failures count towards `maxAttempts`. The others are of the
    /// moment (throttling past every retry, a timeout, an interruption, a
    /// lost lease) and are retried, with backoff, without end.
    pub fn is_lasting(self) -> bool {
        !matches!(
            self,
            Self::RetriesExhausted
                | Self::TimedOut
                | Self::Interrupted
                | Self::RegistryRefused
                | Self::ArtifactUnavailable
                | Self::Unexpected
                | Self::MissingValue
                | Self::PolicyViolation
                | Self::InvalidPolicy
        )
    }

    /// As in error names: `InvalidTemplate`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotRegistered => "NotRegistered",
            Self::Unsupported => "Unsupported",
            Self::SourceUnavailable => "SourceUnavailable",
            Self::AuthenticationFailed => "AuthenticationFailed",
            Self::InvalidSource => "InvalidSource",
            Self::InvalidTemplate => "InvalidTemplate",
            Self::ArtifactUnavailable => "ArtifactUnavailable",
            Self::Refused => "Refused",
            Self::ChangeSetFailed => "ChangeSetFailed",
            Self::StackFailed => "StackFailed",
            Self::RollbackFailed => "RollbackFailed",
            Self::DeleteFailed => "DeleteFailed",
            Self::FailedCreateStays => "FailedCreateStays",
            Self::StackBlocked => "StackBlocked",
            Self::NotOwned => "NotOwned",
            Self::ServiceRoleNotNamed => "ServiceRoleNotNamed",
            Self::Rejected => "Rejected",
            Self::ApprovalTimedOut => "ApprovalTimedOut",
            Self::NotAllowed => "NotAllowed",
            Self::ContractViolated => "ContractViolated",
            Self::RegistryRefused => "RegistryRefused",
            Self::RetriesExhausted => "RetriesExhausted",
            Self::TimedOut => "TimedOut",
            Self::Interrupted => "Interrupted",
            Self::Unexpected => "Unexpected",
            Self::MissingValue => "MissingValue",
            Self::CredentialNotForHost => "CredentialNotForHost",
            Self::SecretNotNoEcho => "SecretNotNoEcho",
            Self::PolicyViolation => "PolicyViolation",
            Self::InvalidPolicy => "InvalidPolicy",
        }
    }

    /// The reason of a caught error, from its name: `StackSync.Stalled.X`
    /// → X; the transient name (its retries ran out) → `RetriesExhausted`;
    /// anything else → `Unexpected`.
    pub fn of_error_name(name: &str) -> StallReason {
        if name == "StackSync.Transient" {
            return Self::RetriesExhausted;
        }
        if name == "StackSync.Timeout" {
            return Self::TimedOut;
        }
        name.strip_prefix("StackSync.Stalled")
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|r| Self::ALL.into_iter().find(|x| x.as_str() == r))
            .unwrap_or(Self::Unexpected)
    }
}

impl std::fmt::Display for StallReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Failed attempts in a row at one spec version and revision: what the
/// wait before the next try, and giving up, are decided from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Failures {
    /// Failed attempts so far (0: none yet, only a recreate recorded).
    pub count: u32,
    /// The spec version and revision they were made at.
    pub spec_version: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// A failed create was deleted to be made again at this revision (it
    /// is, at most once).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub recreated: bool,
    /// No more tries until the revision or the spec changes, or a forced
    /// reconcile: `maxAttempts` ran out, or a failed create stays.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub gave_up: bool,
}

impl Failures {
    /// Whether these are failures at this spec version and revision.
    pub fn at(&self, spec_version: u64, revision: Option<&str>) -> bool {
        self.spec_version == spec_version
            && match (self.revision.as_deref(), revision) {
                (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                (None, None) => true,
                _ => false,
            }
    }
}

/// A step of the run in hand that failed for a reason worth retrying, and
/// is being retried: what failed, and how often in a row the same way.
/// Written by the failed attempt (while its run holds the stack), shown by
/// `stacksync status` and `get`, and gone when the run ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retrying {
    /// The run (execution) whose step failed: another run's record is not
    /// this run's (a run that was stopped leaves its record behind).
    #[serde(default)]
    pub run: String,
    /// The state whose step failed (`PollStatus`).
    pub step: String,
    /// The failed call and its error, as the step said it.
    pub cause: String,
    /// Failures with this same step and cause in this run, each within
    /// [`crate::reconcile::steps::retrying::SAME_FAILURE_WINDOW_MS`] of the last.
    pub attempts: u32,
    /// The first of them.
    pub since: Timestamp,
    /// The latest.
    pub at: Timestamp,
}

/// A stack taken over on purpose, and the preview of the change that took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Adoption {
    /// The stack adopted (its StackId).
    pub stack_id: String,
    /// Its tags before (another installation's `stacksync:` tags, if any).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub previous_tags: BTreeMap<String, String>,
    /// The change set that adopted it, and the run that made it.
    pub change_set: String,
    pub run: String,
    /// When it was previewed (just before it was executed).
    pub at: Timestamp,
    /// What the change set did, one row per resource (at most
    /// [`crate::preview::MAX_RECORDED_CHANGES`]), and how many rows more.
    pub changes: Vec<ResourceChange>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_text() {
        let json = serde_json::to_string(&Timestamp(1_700_000_000_000)).unwrap();
        assert_eq!(json, "\"2023-11-14T22:13:20.000Z\"");
        let back: Timestamp = serde_json::from_str(&json).unwrap();
        assert_eq!(back, Timestamp(1_700_000_000_000));
        assert!(serde_json::from_str::<Timestamp>("\"soon\"").is_err());
    }
}
