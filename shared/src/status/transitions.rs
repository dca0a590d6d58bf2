//! Every change of a stack's status, in one place: each function takes the
//! status before and the facts of what happened, and returns the status
//! after. Nothing else makes a [`Status`] (the registry's storage only
//! splits one into its attributes and reads it back), so what each
//! transition keeps of the one before, replaces and drops is written here
//! once, and the table test at the end says it for every transition.
//!
//! Two kinds: a **phase** changes (`registered`, `reconciling`, `waiting`,
//! `awaiting_approval`, `ready`, `failed`, `suspended`, `interrupted`,
//! `removed`), or one concern's **record** does while the phase stays
//! (`with_inputs`, `with_placeholder`, `adopting`, `retrying`,
//! `with_approval`, `described`, `out_of_queue`). A run writes what it
//! records mid-run through [`recorded`] and its end through [`ended`].

use std::collections::BTreeMap;

use super::{
    Adoption, ApprovalRecord, AwaitingApproval, Failures, Phase, Retrying, RolloutHold,
    StallReason, Status, Timestamp, approval::appended_approval,
};
use crate::clock::EpochMillis;
use crate::seen::{OutOfBand, Seen};

/// A new entry, as `apply` registers it: `Pending`, due at once.
pub fn registered(now: EpochMillis) -> Status {
    Status {
        phase: Phase::Pending,
        times: super::Times {
            last_transition_at: Some(Timestamp(now)),
            last_reconcile_at: None,
            next_reconcile_at: Some(Timestamp(now)),
        },
        ..Status::default()
    }
}

/// What a person reads while a stack waits for others: `waiting for A
/// (why), B: this stack runs once they are Ready`.
pub fn waiting_message(waiting: &[String]) -> String {
    format!(
        "waiting for {}: this stack runs once {} Ready",
        waiting.join(", "),
        if waiting.len() == 1 {
            "it is"
        } else {
            "they are"
        }
    )
}

/// `Pending` until the registered stacks it depends on (`names`) are
/// settled: due at `due` at the latest (what it waits for makes it due
/// sooner).
pub fn waiting(prev: &Status, names: Vec<String>, message: String, due: Timestamp) -> Status {
    let mut status = prev.clone();
    status.phase = Phase::Pending;
    status.message = Some(message);
    status.inputs.waiting_for = names;
    status.inputs.held_by_window = false;
    status.inputs.held_by_rollout = None;
    status.times.next_reconcile_at = Some(due);
    status
}

/// A `Ready` end with the stack's outputs published (`publish:`): what is
/// published now (`record`), and what the message adds. `retry`: some
/// could not be written, so the stack is due again then (its next run
/// writes them again); what was published before stays recorded.
pub fn published(
    mut status: Status,
    record: Option<BTreeMap<String, String>>,
    note: Option<String>,
    retry: Option<Timestamp>,
) -> Status {
    if let Some(record) = record {
        status.applied.published = record;
    }
    if let Some(note) = note {
        status.message = Some(match status.message.take() {
            Some(message) => format!("{message}; {note}"),
            None => note,
        });
    }
    if retry.is_some() {
        status.times.next_reconcile_at = retry;
    }
    status
}

/// A run that may not change the stack now (a sync window): `Pending`,
/// due when the window opens.
pub fn held_by_window(prev: &Status, message: String, due: Timestamp) -> Status {
    let mut status = prev.clone();
    status.phase = Phase::Pending;
    status.message = Some(message);
    status.inputs.waiting_for.clear();
    status.inputs.held_by_window = true;
    status.inputs.held_by_rollout = None;
    status.times.next_reconcile_at = Some(due);
    status
}

/// A fleet target's run that waits for the waves before its own, or for a
/// halted rollout, at `revision` ([`crate::rollout`]): `Pending`, due at
/// `due` at the latest (the run that ends the wave before starts it).
pub fn held_by_rollout(
    prev: &Status,
    hold: RolloutHold,
    message: String,
    due: Timestamp,
) -> Status {
    let mut status = prev.clone();
    status.phase = Phase::Pending;
    status.message = Some(message);
    status.inputs.waiting_for.clear();
    status.inputs.held_by_window = false;
    status.inputs.held_by_rollout = Some(hold);
    status.times.next_reconcile_at = Some(due);
    status
}

/// A run knows its revision and holds the stack: `Reconciling` it, due when
/// the lease runs out (a run that dies is started again by the scheduler).
/// An earlier run's retries are not this one's.
pub fn reconciling(prev: &Status, revision: &str, message: String, due: Timestamp) -> Status {
    let mut status = prev.clone();
    status.phase = Phase::Reconciling;
    status.run.last_attempted_revision = Some(revision.to_owned());
    status.message = Some(message);
    status.times.next_reconcile_at = Some(due);
    status.run.retrying = None;
    status.inputs.held_by_window = false;
    status.inputs.held_by_rollout = None;
    status
}

/// Suspended: out of the queue (resuming makes it due again).
pub fn suspended(prev: &Status) -> Status {
    let mut status = prev.clone();
    status.phase = Phase::Suspended;
    status.message = Some("suspended: stacksync leaves the stack alone".into());
    status.times.next_reconcile_at = None;
    status
}

/// Out of the queue, as it was: runs gave up at this revision and spec.
pub fn out_of_queue(prev: &Status) -> Status {
    let mut status = prev.clone();
    status.times.next_reconcile_at = None;
    status
}

/// A change set waits for a person: due when the wait ends, should the run
/// die meanwhile.
pub fn awaiting_approval(
    prev: &Status,
    awaiting: AwaitingApproval,
    message: String,
    due: Timestamp,
) -> Status {
    let mut status = prev.clone();
    status.phase = Phase::AwaitingApproval;
    status.message = Some(message);
    status.run.change_set_name = Some(awaiting.change_set.clone());
    status.approval.awaiting = Some(awaiting);
    status.times.next_reconcile_at = Some(due);
    status
}

/// A decision on a change set recorded (bounded: [`appended_approval`]);
/// nothing waits any more.
pub fn with_approval(prev: &Status, record: ApprovalRecord) -> Status {
    let mut status = prev.clone();
    status.approval.awaiting = None;
    status.approval.records = appended_approval(&prev.approval.records, record);
    status
}

/// Where the run's values came from, and the other stacks' outputs it read.
pub fn with_inputs(
    prev: &Status,
    provenance: Vec<crate::parameters::Provenance>,
    read_outputs: BTreeMap<String, BTreeMap<String, String>>,
    mut packaged: Vec<crate::package::Artifact>,
) -> Status {
    let mut status = prev.clone();
    status.inputs.provenance = provenance;
    status.inputs.read_outputs = read_outputs;
    packaged.truncate(super::MAX_PACKAGED_RECORDED);
    status.inputs.packaged = packaged;
    status
}

/// What the Guard check of the run's template found.
pub fn with_policy(prev: &Status, record: super::PolicyRecord) -> Status {
    let mut status = prev.clone();
    status.findings.policy = Some(record);
    status
}

/// CloudFormation's checks of the change set a run is about to execute.
pub fn with_checks(prev: &Status, record: super::ChecksRecord) -> Status {
    let mut status = prev.clone();
    status.findings.checks = Some(record);
    status
}

/// The StackId of the stack a CREATE change set made for itself.
pub fn with_placeholder(prev: &Status, stack_id: String) -> Status {
    let mut status = prev.clone();
    status.run.placeholder = Some(stack_id);
    status
}

/// A stack stacksync did not make, previewed and about to be taken over.
pub fn adopting(prev: &Status, adoption: Adoption) -> Status {
    let mut status = prev.clone();
    status.findings.adoption = Some(adoption);
    status
}

/// A step of the run in hand failed, and is being retried.
pub fn retrying(prev: &Status, retrying: Retrying) -> Status {
    let mut status = prev.clone();
    status.run.retrying = Some(retrying);
    status
}

/// CloudFormation's stack status as described `at` (`None`: no stack).
pub fn described(prev: &Status, stack_status: Option<String>, at: Timestamp) -> Status {
    let mut status = prev.clone();
    status.stack.status = stack_status;
    status.stack.at = Some(at);
    status
}

/// What a run that succeeded knows.
#[derive(Debug, Clone, Default)]
pub struct Success {
    pub spec_version: u64,
    pub revision: Option<String>,
    /// The hash of the desired state applied.
    pub desired_hash: Option<String>,
    /// This run's change set, or none: never an earlier run's.
    pub change_set: Option<String>,
    /// The stack as it is now.
    pub seen: Option<Seen>,
    /// Its outputs, as CloudFormation reports them now (`None`: not
    /// described, the last recorded stay).
    pub outputs: Option<BTreeMap<String, String>>,
    pub message: String,
    /// `None`: out of the queue (the health check watches the stack).
    pub next_reconcile_at: Option<Timestamp>,
    /// A change made outside stacksync that this run found (else the last
    /// one found stays).
    pub out_of_band: Option<OutOfBand>,
    /// The drift this run put back (its fingerprint), and whether by
    /// applying the template as it is.
    pub revert: Option<(String, bool)>,
    pub now: EpochMillis,
}

/// `Ready`: the stack is as the spec says at the run's revision. The
/// failures in a row end; what the stack was waiting for and for whom it
/// was a placeholder is over; drift found on another stack (made anew,
/// replaced) was another's.
pub fn ready(prev: &Status, s: Success) -> Status {
    let same = match (prev.applied.seen.as_ref(), s.seen.as_ref()) {
        (Some(before), Some(now)) => before.stack_id == now.stack_id,
        _ => true,
    };
    let mut status = prev.clone();
    status.phase = Phase::Ready;
    status.message = Some(s.message);
    status.stall_reason = None;
    status.times.last_reconcile_at = Some(Timestamp(s.now));
    status.times.next_reconcile_at = s.next_reconcile_at;
    status.run.observed_spec_version = s.spec_version;
    status.run.last_attempted_revision.clone_from(&s.revision);
    status.run.change_set_name.clone_from(&s.change_set);
    // Set by `ended`, with the execution that writes it.
    status.run.execution = None;
    status.run.failures = None;
    // Made: its StackId is in `seen` now.
    status.run.placeholder = None;
    status.run.retrying = None;
    status.stack.status = s.seen.as_ref().map(|seen| seen.stack_status.clone());
    status.stack.at = Some(Timestamp(s.now));
    status.stack.reason = None;
    status.applied.last_applied_revision = s.revision;
    status.applied.applied_hash = s.desired_hash;
    status.applied.seen = s.seen;
    if let Some(outputs) = s.outputs {
        status.applied.outputs = outputs
            .iter()
            .map(|(k, v)| (k.clone(), crate::parameters::output_record(v)))
            .collect();
    }
    status.approval.awaiting = None;
    status.inputs.waiting_for = Vec::new();
    if let Some(found) = s.out_of_band {
        status.findings.out_of_band = Some(found);
    }
    status.findings.drift = crate::drift::after_run(
        prev.findings.drift.clone().filter(|_| same),
        s.revert.as_ref().map(|(print, _)| print.as_str()),
        s.revert.as_ref().is_some_and(|(_, reapplied)| *reapplied),
        s.change_set.is_some(),
        s.now,
    );
    status
}

/// What a run that failed knows (its failure already counted).
#[derive(Debug, Clone)]
pub struct Failure {
    pub spec_version: u64,
    pub revision: Option<String>,
    pub reason: StallReason,
    pub message: String,
    pub change_set: Option<String>,
    pub failures: Failures,
    /// The next try (`None`: none until something changes).
    pub next_reconcile_at: Option<Timestamp>,
    /// A change made outside stacksync that the run found and could not put
    /// back: still news (else the last one found stays).
    pub out_of_band: Option<OutOfBand>,
    pub now: EpochMillis,
}

/// `Failed`: the failure counted, the next try set; what the last success
/// applied stays.
pub fn failed(prev: &Status, f: Failure) -> Status {
    let mut status = prev.clone();
    status.phase = Phase::Failed;
    status.message = Some(f.message);
    status.stall_reason = Some(f.reason);
    status.times.last_reconcile_at = Some(Timestamp(f.now));
    status.times.next_reconcile_at = f.next_reconcile_at;
    status.run.observed_spec_version = f.spec_version;
    status.run.last_attempted_revision = f.revision;
    status.run.change_set_name = f.change_set;
    status.run.failures = Some(f.failures);
    if let Some(found) = f.out_of_band {
        status.findings.out_of_band = Some(found);
    }
    status
}

/// A hold ended by somebody else (`stacksync unlock`, an execution that
/// was aborted or timed out): `Failed (Interrupted)`, due at once, the
/// hold's run named as the last, its retries over.
pub fn interrupted(prev: &Status, run: &str, why: &str, now: EpochMillis) -> Status {
    let mut status = prev.clone();
    status.phase = Phase::Failed;
    status.stall_reason = Some(StallReason::Interrupted);
    status.message = Some(why.to_owned());
    status.times.last_transition_at = Some(Timestamp(now));
    status.times.last_reconcile_at = Some(Timestamp(now));
    status.times.next_reconcile_at = Some(Timestamp(now));
    status.run.execution = Some(run.to_owned());
    status.run.retrying = None;
    status
}

/// The entry is gone: its last status says how it went (told, not stored).
pub fn removed(prev: &Status, outcome: String) -> Status {
    let mut status = prev.clone();
    status.phase = Phase::Deleting;
    status.message = Some(outcome);
    status
}

/// `next` as a run records it mid-run: its phase's transition time kept
/// when the phase stays, `now` when it changes.
pub fn recorded(prev: &Status, mut next: Status, now: EpochMillis) -> Status {
    next.times.last_transition_at = if next.phase == prev.phase {
        prev.times.last_transition_at
    } else {
        Some(Timestamp(now))
    };
    next
}

/// `next` as a run's end writes it: stamped as [`recorded`], the run named
/// (`execution`), what it retried over with it, and what it waited for
/// dropped unless it still waits.
pub fn ended(prev: &Status, next: Status, execution: &str, now: EpochMillis) -> Status {
    let mut status = recorded(prev, next, now);
    status.run.execution = Some(execution.to_owned());
    status.run.retrying = None;
    if status.phase != Phase::Pending {
        status.inputs.waiting_for.clear();
        status.inputs.held_by_window = false;
        status.inputs.held_by_rollout = None;
    }
    status
}

/// Due at once (the spec changed while a run worked from an older one).
pub fn due_now(mut status: Status, now: EpochMillis) -> Status {
    status.times.next_reconcile_at = Some(Timestamp(now));
    status
}

#[cfg(test)]
mod tests;
