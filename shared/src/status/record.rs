//! The status record of one stack: a small core (the phase, what a person
//! should know, why a run stalled) and a record per concern. Stored and
//! shown as one flat object ([`super::wire`]); made anew only by
//! [`super::transitions`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    Adoption, ApprovalRecord, AwaitingApproval, Failures, MAX_MESSAGE_CHARS, Phase, Retrying,
    StallReason, Timestamp,
};
use crate::seen::{OutOfBand, Seen};

/// The status record of one stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(from = "super::wire::Wire", into = "super::wire::Wire")]
pub struct Status {
    pub phase: Phase,
    /// What a person should know: the failure reason, or what happened.
    pub message: Option<String>,
    /// Why the last run stalled (with phase `Failed`): what to match on,
    /// where the message is for people.
    pub stall_reason: Option<StallReason>,
    /// When the phase changed, the last run ended, the next one is due.
    pub times: Times,
    /// What the last run worked from, what it made, how it fails.
    pub run: LastRun,
    /// CloudFormation's stack status, as last described.
    pub stack: Described,
    /// The stack as the last successful run left it.
    pub applied: Applied,
    /// The change set waiting for a person, and what became of earlier ones.
    pub approval: Approvals,
    /// What the last run read: where its values came from, the other
    /// stacks it read or waits for.
    pub inputs: Inputs,
    /// What was found about the stack besides the runs: drift, a change
    /// made outside stacksync, an adoption.
    pub findings: Findings,
}

/// When things happened to the stack, and when its next run is due.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Times {
    /// When the phase last changed.
    pub last_transition_at: Option<Timestamp>,
    /// When the last reconcile ended.
    pub last_reconcile_at: Option<Timestamp>,
    /// When the scheduler starts the stack's reconcile (a retry, a run that
    /// did not finish); `None` for a stack that is fine: the scheduler's
    /// health check watches it. Stored as the registry's indexed
    /// `nextReconcileAt` attribute, not inside the record.
    pub next_reconcile_at: Option<Timestamp>,
}

/// The last run: what it worked from, what it made, how it failed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LastRun {
    /// The `specVersion` the last reconcile worked from (0: never reconciled).
    pub observed_spec_version: u64,
    /// The revision (commit SHA or S3 version) the last reconcile tried.
    pub last_attempted_revision: Option<String>,
    /// The execution that ended last (its name: the lease owner it had). A
    /// step of that execution retried after the run's final write finds it
    /// here, and ends instead of failing for want of the lease.
    pub execution: Option<String>,
    /// The change set the last reconcile made.
    pub change_set_name: Option<String>,
    /// The StackId of the stack a CREATE change set of this entry made for
    /// itself (`REVIEW_IN_PROGRESS`), recorded when CreateChangeSet
    /// answered: the entry's own, tagged or not, until a run makes it (its
    /// StackId then recorded in `applied.seen`).
    pub placeholder: Option<String>,
    /// Failed attempts in a row at the last attempted spec and revision;
    /// `None` once a run succeeds.
    pub failures: Option<Failures>,
    /// The run's step being retried now, and why (`None` once the run
    /// ends, whatever the end).
    pub retrying: Option<Retrying>,
}

/// CloudFormation's stack status, as a run last described it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Described {
    pub status: Option<String>,
    /// When it was described (`None`: recorded before this was; the run's
    /// end, `times.last_reconcile_at`, is when).
    pub at: Option<Timestamp>,
    pub reason: Option<String>,
}

/// The stack as the last successful run left it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Applied {
    /// The revision the stack was last brought to successfully.
    pub last_applied_revision: Option<String>,
    /// Hash of everything that determined the deployed stack at that revision.
    pub applied_hash: Option<String>,
    /// What the next runs and the scheduler's health check compare with
    /// CloudFormation. Stored as the registry's `watch` attribute (read
    /// through a narrow index), not inside the record.
    pub seen: Option<Seen>,
    /// The stack's outputs as CloudFormation reported them when the last
    /// run ended `Ready` (each as [`crate::parameters::output_record`]
    /// keeps it): what tells whether the entries that read them must run
    /// again (they read the values themselves, from CloudFormation).
    pub outputs: BTreeMap<String, String>,
    /// The SSM parameters the stack's outputs are published as
    /// (`publish:`): name → a hash of the value published, never the value.
    pub published: BTreeMap<String, String>,
}

/// Approvals: the change set waiting for a person, and the record of those
/// that asked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Approvals {
    /// The change set waiting for a person's approval, while one waits.
    pub awaiting: Option<AwaitingApproval>,
    /// What became of the latest change sets that asked for approval
    /// (newest last, at most [`super::MAX_APPROVAL_RECORDS`]): who approved
    /// or rejected which, when.
    pub records: Vec<ApprovalRecord>,
}

/// What the last run read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inputs {
    /// Where each parameter and tag of the last run came from, with the
    /// values of secrets and `NoEcho` parameters masked
    /// (`stacksync get NAME --explain`).
    pub provenance: Vec<crate::parameters::Provenance>,
    /// The registered stacks the last run waited for (not settled yet): a
    /// stack that becomes `Ready` makes those that wait for it due.
    pub waiting_for: Vec<String>,
    /// The other stacks' outputs the last run read (`fromStack`): stack →
    /// output → value as recorded ([`crate::parameters::output_record`]).
    /// A stack whose outputs are no longer these makes this one due.
    pub read_outputs: BTreeMap<String, BTreeMap<String, String>>,
    /// The local files the last run's templates named, packaged
    /// ([`crate::package`]): where each was named, its path, its key
    /// (`stacksync get NAME --explain`; `diff` says which changed). At most
    /// [`MAX_PACKAGED_RECORDED`].
    pub packaged: Vec<crate::package::Artifact>,
    /// The last run waits for a sync window to open (`Pending (Window)`):
    /// due when it opens.
    pub held_by_window: bool,
    /// The last run waits, at this revision, for the waves of its fleet's
    /// rollout before its own, or for a halted rollout (`Pending
    /// (Rollout)`, `Pending (Halted)`).
    pub held_by_rollout: Option<RolloutHold>,
}

/// Why a fleet target's last run waits for its fleet's rollout.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutHold {
    /// The revision it waits to go to.
    pub revision: String,
    /// Past the failure tolerance (`Pending (Halted)`), not waiting for its
    /// turn (`Pending (Rollout)`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub halted: bool,
}

/// Most packaged artifacts a status records (the item is bounded).
pub const MAX_PACKAGED_RECORDED: usize = 100;

/// What was found about the stack besides what runs do to it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Findings {
    /// What the last drift detection found ([`crate::drift`]): written
    /// outside runs, carried by them.
    pub drift: Option<crate::drift::DriftRecord>,
    /// The last change made outside stacksync that a run found, and whether
    /// it was put back.
    pub out_of_band: Option<OutOfBand>,
    /// The last time a run took over a stack stacksync did not make
    /// (`adopt: true`): which, when, and what its change set did, as
    /// described before it was executed.
    pub adoption: Option<Adoption>,
    /// What the last Guard check of the stack's template found (runs
    /// check it before any change set): `get NAME` shows it.
    pub policy: Option<PolicyRecord>,
    /// CloudFormation's own checks of the last change set a run was about
    /// to execute (pre-deployment validations, hooks), when it made any.
    pub checks: Option<ChecksRecord>,
}

/// CloudFormation's checks of one change set, one line each.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChecksRecord {
    pub change_set: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    pub checks: Vec<crate::preview::ChangeSetCheck>,
}

/// The most findings of each kind a policy record keeps.
pub const MAX_POLICY_FINDINGS: usize = 20;

/// A Guard check, as recorded: when, at which revision, and what it found
/// (at most [`MAX_POLICY_FINDINGS`] violations and warnings each; the
/// counts are whole).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRecord {
    pub checked_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    pub report: crate::guard::Report,
    /// The violations and warnings found, whole counts.
    #[serde(default)]
    pub violations: u32,
    #[serde(default)]
    pub warnings: u32,
    /// What was checked: the template, the values and tags Guard was
    /// given, and the rule sets (each stored by revision), hashed. A run
    /// that would check the same again takes this record's answer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub input_hash: String,
}

impl PolicyRecord {
    pub fn new(
        checked_at: Timestamp,
        revision: Option<String>,
        mut report: crate::guard::Report,
    ) -> Self {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let (violations, warnings) = (count(report.violations.len()), count(report.warnings.len()));
        report.violations.truncate(MAX_POLICY_FINDINGS);
        report.warnings.truncate(MAX_POLICY_FINDINGS);
        Self {
            checked_at,
            revision,
            report,
            violations,
            warnings,
            input_hash: String::new(),
        }
    }

    /// Whether `other` found the same (whenever it was made).
    pub fn same_findings(&self, other: &PolicyRecord) -> bool {
        self.revision == other.revision
            && self.input_hash == other.input_hash
            && self.report == other.report
            && (self.violations, self.warnings) == (other.violations, other.warnings)
    }
}

impl Status {
    /// Whether runs at this spec version and revision have given up (only
    /// a forced reconcile tries again).
    pub fn gave_up_at(&self, spec_version: u64, revision: Option<&str>) -> bool {
        self.phase == Phase::Failed
            && self
                .run
                .failures
                .as_ref()
                .is_some_and(|f| f.gave_up && f.at(spec_version, revision))
    }

    /// The record as it may be stored: messages cut to [`MAX_MESSAGE_CHARS`],
    /// the provenance to [`MAX_PROVENANCE_BYTES`] (values left out first).
    pub fn bounded(mut self) -> Self {
        self.inputs.provenance = bounded_provenance(self.inputs.provenance);
        for text in [&mut self.message, &mut self.stack.reason]
            .into_iter()
            .flatten()
        {
            if text.chars().count() > MAX_MESSAGE_CHARS {
                let cut: String = text.chars().take(MAX_MESSAGE_CHARS - 1).collect();
                *text = format!("{cut}…");
            }
        }
        self
    }
}

/// The most bytes the provenance of a status may take as stored (its
/// registry item holds the spec too); past it, its values are left out.
pub const MAX_PROVENANCE_BYTES: usize = 64 * 1024;

/// `provenance` as it may be stored: within [`MAX_PROVENANCE_BYTES`], its
/// values left out first, then its last rows.
pub fn bounded_provenance(
    mut provenance: Vec<crate::parameters::Provenance>,
) -> Vec<crate::parameters::Provenance> {
    let size = |p: &[crate::parameters::Provenance]| serde_json::to_vec(p).map_or(0, |b| b.len());
    if size(&provenance) > MAX_PROVENANCE_BYTES {
        for row in &mut provenance {
            row.value = None;
        }
        while size(&provenance) > MAX_PROVENANCE_BYTES {
            provenance.pop();
        }
    }
    provenance
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_provenance_loses_its_values_first_and_then_rows() {
        let row = |i: usize| crate::parameters::Provenance {
            kind: crate::parameters::Kind::Parameter,
            name: format!("P{i}"),
            from: "stacks.yaml".into(),
            value: Some("v".repeat(256)),
        };
        let fits = bounded_provenance((0..10).map(row).collect());
        assert!(fits.iter().all(|p| p.value.is_some()));
        let big = bounded_provenance((0..400).map(row).collect());
        assert_eq!(big.len(), 400);
        assert!(big.iter().all(|p| p.value.is_none()));
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let status = Status {
            message: Some("é".repeat(MAX_MESSAGE_CHARS + 10)),
            ..Status::default()
        };
        let message = status.bounded().message.unwrap();
        assert_eq!(message.chars().count(), MAX_MESSAGE_CHARS);
        assert!(message.ends_with('…'));
    }
}
