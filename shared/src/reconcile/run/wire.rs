//! The run's state on the wire: one flat object, as every version wrote it,
//! and its conversions to and from [`RunState`]'s records. A record is
//! present when the field that marks its phase is (`revision`,
//! `templateKey`, `changeSetName`).

use serde::{Deserialize, Serialize};

use super::{
    Approval, ApprovalAnswer, ApprovalRequest, Budgets, ChangeSetInHand, Execution, Fetched, Next,
    Revert, RunState, Trigger, Uploaded, Wait, WaitOn,
};
use crate::seen::OutOfBand;
use crate::stack_status::ChangeSetKind;

/// The state as it crosses the state machine: one flat JSON object, as
/// every version of stacksync wrote it (`$.next`, `$.waitSeconds`,
/// `$.approval.timeoutSeconds` are read by the definition). Only
/// [`RunState`]'s conversions build one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Wire {
    /// The registry entry's name.
    pub(super) stack_id: String,
    #[serde(default)]
    pub(super) trigger: Trigger,
    /// The execution's name: the lease owner.
    #[serde(default)]
    pub(super) execution: String,
    /// The tags the entry's parameter file gives (CodePipeline's template
    /// configuration, a Git sync deployment file), read by template-upload:
    /// the change set carries them under the entry's own.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(super) file_tags: std::collections::BTreeMap<String, String>,
    /// The execution's id (`$$.Execution.Id`: its ARN; `local:<name>` for a
    /// local run), for the events a run puts on the bus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) execution_arn: Option<String>,
    /// `Start` of a definition with `WaitForEvent` sets it (`Execution::parks`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) parks: bool,
    /// `Start` of a definition with `WaitForSlot` sets it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) waits_for_slots: bool,
    #[serde(default)]
    pub(super) next: Next,
    /// How long the next Wait state waits.
    #[serde(default)]
    pub(super) wait_seconds: u64,
    #[serde(default)]
    pub(super) spec_version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) artifact_key: Option<String>,
    /// The Guard rule sets stored for the run (artifact-fetch).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) policies: Vec<super::PolicyRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) template_key: Option<String>,
    /// The stack is one stacksync did not make, and the entry adopts it
    /// (`adopt: true`): its change set is previewed (recorded and logged)
    /// before it is executed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) adopting: bool,
    /// The S3 version of `template_key` that template-upload read back and
    /// compared: the change set's `TemplateURL` names it, so an object
    /// written there since is not what CloudFormation deploys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) template_version: Option<String>,
    /// The merged parameters, as JSON in S3 (they may be too big for the state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) parameters_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) desired_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) change_set_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) change_set_kind: Option<ChangeSetKind>,
    /// The id of the stack the run's change set is for, as CloudFormation
    /// reported it: the stack followed while it executes (by name, an
    /// emulator that kept a failed create's stack answers with that one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) change_set_stack_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) wait_on: Option<WaitOn>,
    /// The change set is ready: change-set executes it.
    #[serde(default)]
    pub(super) execute: bool,
    /// Deleting to create again (a failed create), not to remove the entry.
    #[serde(default)]
    pub(super) recreate: bool,
    /// How many times this run continued a failed rollback.
    #[serde(default)]
    pub(super) rollback_continues: u32,
    /// How many times delete asked CloudFormation to delete the stack.
    #[serde(default)]
    pub(super) delete_requests: u32,
    /// Polls so far (the interval grows with them).
    #[serde(default)]
    pub(super) polls: u32,
    /// When the run started (epoch ms): stack events since then are ours.
    #[serde(default)]
    pub(super) started_at: i64,
    /// The stack is not as the last run left it (or nothing was recorded,
    /// or the run is forced): a change set is made even at the applied hash.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) must_apply: bool,
    /// What the run found changed outside stacksync, to put back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) out_of_band: Option<OutOfBand>,
    /// The drift this run reverts (its fingerprint, `crate::drift`): a
    /// drift-aware change set, even at the applied hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) revert_drift: Option<String>,
    /// CloudFormation refused the drift-aware change set: the template is
    /// applied as it is instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) revert_reapplied: bool,
    /// How the run ended, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) outcome: Option<String>,
    /// What the run's end says besides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) note: Option<String>,
    /// The run slot it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) slot: Option<String>,
    /// The ready change set waits (or waited) for a person: what asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) approval: Option<ApprovalRequest>,
    /// The answer the approval's task token brought back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) approved: Option<ApprovalAnswer>,
}

impl From<Wire> for RunState {
    fn from(w: Wire) -> Self {
        let fetched = w.revision.map(|revision| Fetched {
            revision,
            artifact_key: w.artifact_key,
            policies: w.policies,
        });
        let uploaded = w.template_key.map(|template_key| Uploaded {
            template_key,
            template_version: w.template_version,
            parameters_key: w.parameters_key,
            desired_hash: w.desired_hash,
            file_tags: w.file_tags,
            must_apply: w.must_apply,
            out_of_band: w.out_of_band,
            revert: w.revert_drift.map(|drift| Revert {
                drift,
                reapplied: w.revert_reapplied,
            }),
        });
        let change_set = w.change_set_name.map(|name| ChangeSetInHand {
            name,
            kind: w.change_set_kind,
            stack_id: w.change_set_stack_id,
            execute: w.execute,
            adopting: w.adopting,
        });
        RunState {
            entry: w.stack_id,
            trigger: w.trigger,
            next: w.next,
            execution: Execution {
                name: w.execution,
                arn: w.execution_arn,
                parks: w.parks,
                waits_for_slots: w.waits_for_slots,
                started_at: w.started_at,
                spec_version: w.spec_version,
                outcome: w.outcome,
                note: w.note,
                slot: w.slot,
            },
            wait: Wait {
                seconds: w.wait_seconds,
                on: w.wait_on,
                polls: w.polls,
            },
            budgets: Budgets {
                rollback_continues: w.rollback_continues,
                delete_requests: w.delete_requests,
                recreate: w.recreate,
            },
            fetched,
            uploaded,
            change_set,
            approval: Approval {
                request: w.approval,
                answer: w.approved,
            },
        }
    }
}

impl From<RunState> for Wire {
    fn from(s: RunState) -> Self {
        let (revision, artifact_key, policies) = match s.fetched {
            Some(f) => (Some(f.revision), f.artifact_key, f.policies),
            None => (None, None, Vec::new()),
        };
        let u = s.uploaded.unwrap_or_default();
        let uploaded = !u.template_key.is_empty();
        let (revert_drift, revert_reapplied) = match u.revert {
            Some(r) => (Some(r.drift), r.reapplied),
            None => (None, false),
        };
        let c = s.change_set;
        Wire {
            stack_id: s.entry,
            trigger: s.trigger,
            execution: s.execution.name,
            file_tags: u.file_tags,
            execution_arn: s.execution.arn,
            parks: s.execution.parks,
            waits_for_slots: s.execution.waits_for_slots,
            next: s.next,
            wait_seconds: s.wait.seconds,
            spec_version: s.execution.spec_version,
            revision,
            artifact_key,
            policies,
            template_key: uploaded.then_some(u.template_key),
            adopting: c.as_ref().is_some_and(|c| c.adopting),
            template_version: u.template_version,
            parameters_key: u.parameters_key,
            desired_hash: u.desired_hash,
            change_set_kind: c.as_ref().and_then(|c| c.kind),
            change_set_stack_id: c.as_ref().and_then(|c| c.stack_id.clone()),
            execute: c.as_ref().is_some_and(|c| c.execute),
            change_set_name: c.map(|c| c.name),
            wait_on: s.wait.on,
            recreate: s.budgets.recreate,
            rollback_continues: s.budgets.rollback_continues,
            delete_requests: s.budgets.delete_requests,
            polls: s.wait.polls,
            started_at: s.execution.started_at,
            must_apply: u.must_apply,
            out_of_band: u.out_of_band,
            revert_drift,
            revert_reapplied,
            outcome: s.execution.outcome,
            note: s.execution.note,
            slot: s.execution.slot,
            approval: s.approval.request,
            approved: s.approval.answer,
        }
    }
}
