//! The status on the wire: one flat object, as every version of stacksync
//! stored it (the registry item's `status` attribute) and printed it
//! (`stacksync get -o json`), and its conversions to and from [`Status`]'s
//! records. Only those conversions build one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    Adoption, Applied, ApprovalRecord, Approvals, AwaitingApproval, Described, Failures, Findings,
    Inputs, LastRun, Phase, Retrying, StallReason, Status, Times, Timestamp,
};
use crate::seen::{OutOfBand, Seen};

/// The status as it is stored and shown: every field at the top level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Wire {
    pub(super) phase: Phase,
    /// The `specVersion` the last reconcile worked from (0: never reconciled).
    pub(super) observed_spec_version: u64,
    /// The revision (commit SHA or S3 version) the last reconcile tried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) last_attempted_revision: Option<String>,
    /// The revision the stack was last brought to successfully.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) last_applied_revision: Option<String>,
    /// Hash of everything that determined the deployed stack at that revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) applied_hash: Option<String>,
    /// CloudFormation's stack status, as last described.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stack_status: Option<String>,
    /// When it was described (`None`: recorded before this was; the run's
    /// end, `lastReconcileAt`, is when).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stack_status_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stack_status_reason: Option<String>,
    /// The change set the last reconcile made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) change_set_name: Option<String>,
    /// What a person should know: the failure reason, or what happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) message: Option<String>,
    /// Why the last run stalled (with phase `Failed`): what to match on,
    /// where the message is for people.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stall_reason: Option<StallReason>,
    /// When the phase last changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) last_transition_at: Option<Timestamp>,
    /// When the last reconcile ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) last_reconcile_at: Option<Timestamp>,
    /// The execution that ended last (its name: the lease owner it had). A
    /// step of that execution retried after the run's final write finds it
    /// here, and ends instead of failing for want of the lease.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) run: Option<String>,
    /// When the scheduler starts the stack's reconcile (a retry, a run that
    /// did not finish); `None` for a stack that is fine: the scheduler's
    /// health check watches it. Stored as the registry's indexed
    /// `nextReconcileAt` attribute, not inside the record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) next_reconcile_at: Option<Timestamp>,
    /// The stack as the last successful run left it: what the next runs and
    /// the scheduler's health check compare with CloudFormation. Stored as
    /// the registry's `watch` attribute (read through a narrow index), not
    /// inside the record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) seen: Option<Seen>,
    /// The last change made outside stacksync that a run found, and whether
    /// it was put back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) out_of_band: Option<OutOfBand>,
    /// Failed attempts in a row at the last attempted spec and revision;
    /// `None` once a run succeeds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) failures: Option<Failures>,
    /// The last time a run took over a stack stacksync did not make
    /// (`adopt: true`): which, when, and what its change set did, as
    /// described before it was executed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) adoption: Option<Adoption>,
    /// The last Guard check of the stack's template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) policy: Option<super::PolicyRecord>,
    /// CloudFormation's checks of the last change set about to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) checks: Option<super::ChecksRecord>,
    /// The change set waiting for a person's approval, while one waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) awaiting: Option<AwaitingApproval>,
    /// What became of the latest change sets that asked for approval
    /// (newest last, at most [`MAX_APPROVAL_RECORDS`]): who approved or
    /// rejected which, when.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) approvals: Vec<ApprovalRecord>,
    /// The stack's outputs as CloudFormation reported them when the last
    /// run ended `Ready` (each as [`crate::parameters::output_record`]
    /// keeps it): what tells whether the entries that read them must run
    /// again (they read the values themselves, from CloudFormation).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(super) outputs: BTreeMap<String, String>,
    /// The SSM parameters the outputs are published as: name → value hash.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(super) published: BTreeMap<String, String>,
    /// Where each parameter and tag of the last run came from, with the
    /// values of secrets and `NoEcho` parameters masked
    /// (`stacksync get NAME --explain`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) provenance: Vec<crate::parameters::Provenance>,
    /// The registered stacks the last run waited for (not settled yet): a
    /// stack that becomes `Ready` makes those that wait for it due.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) waiting_for: Vec<String>,
    /// The other stacks' outputs the last run read (`fromStack`): stack →
    /// output → value as recorded ([`crate::parameters::output_record`]).
    /// A stack whose outputs are no longer these makes this one due.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(super) read_outputs: BTreeMap<String, BTreeMap<String, String>>,
    /// The local files the last run's templates named, packaged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) packaged: Vec<crate::package::Artifact>,
    /// The last run waits for a sync window to open.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) held_by_window: bool,
    /// The last run waits, at this revision, for the waves of its fleet's
    /// rollout before its own, or for a halted rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) held_by_rollout: Option<super::record::RolloutHold>,
    /// What the last drift detection found ([`crate::drift`]): written
    /// outside runs, carried by them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) drift: Option<crate::drift::DriftRecord>,
    /// The StackId of the stack a CREATE change set of this entry made for
    /// itself (`REVIEW_IN_PROGRESS`), recorded when CreateChangeSet
    /// answered: the entry's own, tagged or not, until a run makes it (its
    /// StackId then recorded in `seen`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) placeholder: Option<String>,
    /// The run's step being retried now, and why (`None` once the run
    /// ends, whatever the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) retrying: Option<Retrying>,
}

impl From<Wire> for Status {
    fn from(w: Wire) -> Self {
        Status {
            phase: w.phase,
            message: w.message,
            stall_reason: w.stall_reason,
            times: Times {
                last_transition_at: w.last_transition_at,
                last_reconcile_at: w.last_reconcile_at,
                next_reconcile_at: w.next_reconcile_at,
            },
            run: LastRun {
                observed_spec_version: w.observed_spec_version,
                last_attempted_revision: w.last_attempted_revision,
                execution: w.run,
                change_set_name: w.change_set_name,
                placeholder: w.placeholder,
                failures: w.failures,
                retrying: w.retrying,
            },
            stack: Described {
                status: w.stack_status,
                at: w.stack_status_at,
                reason: w.stack_status_reason,
            },
            applied: Applied {
                last_applied_revision: w.last_applied_revision,
                applied_hash: w.applied_hash,
                seen: w.seen,
                outputs: w.outputs,
                published: w.published,
            },
            approval: Approvals {
                awaiting: w.awaiting,
                records: w.approvals,
            },
            inputs: Inputs {
                provenance: w.provenance,
                waiting_for: w.waiting_for,
                read_outputs: w.read_outputs,
                packaged: w.packaged,
                held_by_window: w.held_by_window,
                held_by_rollout: w.held_by_rollout,
            },
            findings: Findings {
                drift: w.drift,
                out_of_band: w.out_of_band,
                adoption: w.adoption,
                policy: w.policy,
                checks: w.checks,
            },
        }
    }
}

impl From<Status> for Wire {
    fn from(s: Status) -> Self {
        Wire {
            phase: s.phase,
            observed_spec_version: s.run.observed_spec_version,
            last_attempted_revision: s.run.last_attempted_revision,
            last_applied_revision: s.applied.last_applied_revision,
            applied_hash: s.applied.applied_hash,
            stack_status: s.stack.status,
            stack_status_at: s.stack.at,
            stack_status_reason: s.stack.reason,
            change_set_name: s.run.change_set_name,
            message: s.message,
            stall_reason: s.stall_reason,
            last_transition_at: s.times.last_transition_at,
            last_reconcile_at: s.times.last_reconcile_at,
            run: s.run.execution,
            next_reconcile_at: s.times.next_reconcile_at,
            seen: s.applied.seen,
            out_of_band: s.findings.out_of_band,
            failures: s.run.failures,
            adoption: s.findings.adoption,
            policy: s.findings.policy,
            checks: s.findings.checks,
            awaiting: s.approval.awaiting,
            approvals: s.approval.records,
            outputs: s.applied.outputs,
            published: s.applied.published,
            provenance: s.inputs.provenance,
            waiting_for: s.inputs.waiting_for,
            read_outputs: s.inputs.read_outputs,
            packaged: s.inputs.packaged,
            held_by_window: s.inputs.held_by_window,
            held_by_rollout: s.inputs.held_by_rollout,
            drift: s.findings.drift,
            placeholder: s.run.placeholder,
            retrying: s.run.retrying,
        }
    }
}
