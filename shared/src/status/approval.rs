//! What a status keeps of approval gates: the change set that waits, and
//! what became of the latest ones that asked.

use serde::{Deserialize, Serialize};

use super::{ResourceChange, Timestamp, is_zero};

/// How many answers the approval records keep (refusals aside:
/// [`MAX_REFUSALS_KEPT`]).
pub const MAX_APPROVAL_RECORDS: usize = 10;

/// A change set that waits for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitingApproval {
    /// The change set to approve, by name: `stacksync approve NAME
    /// --change-set <this>`.
    pub change_set: String,
    /// Why it waits (the `approval` policy, and what in the change set
    /// asked for it).
    pub why: String,
    /// What it would do, one row per resource (bounded), and how many more.
    pub changes: Vec<ResourceChange>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more: usize,
    /// The checks of this change set, one line each: what the Guard check
    /// of its revision found (its summary, then its warnings: a change set
    /// that waits broke no blocking rule), then CloudFormation's own
    /// (pre-deployment validations, hooks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
    /// The execution waiting. Its task token is not here: it is kept where
    /// only the function that answers approvals reads it
    /// ([`crate::naming::approval_token_key`]).
    pub run: String,
    /// Where a deployed run's wait is answered: the approval function's URL
    /// (IAM-authorised: the caller's identity comes from AWS). `None`: a
    /// local run (`reconcile --local`), answered through the registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_url: Option<String>,
    /// A token written into the status by a version before tokens left it:
    /// read (so a wait that spans the upgrade can be answered), never
    /// written or shown again.
    #[serde(rename = "token", default, skip_serializing)]
    pub legacy_token: Option<String>,
    pub requested_at: Timestamp,
    /// Past this, the change set is deleted and the run fails.
    pub expires_at: Timestamp,
}

/// What a person (or the clock) decided of a change set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRecord {
    pub change_set: String,
    pub decision: Decision,
    /// Who decided (the caller's AWS identity), if a person did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    pub at: Timestamp,
    /// A rejection's reason; why an approval became void.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The execution that asked.
    pub run: String,
}

/// The outcome of an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Decision {
    /// Approved, and the change set ran.
    Approved,
    Rejected,
    /// Nobody answered within `approvalTimeout`.
    TimedOut,
    /// Approved, but the stack or its desired state moved since the
    /// preview: the change set was replaced, and approval asked again.
    Void,
    /// Someone who is not among the approvers tried to approve or reject:
    /// refused, and the change set still waits.
    Refused,
}

/// How many refusals (callers who are not approvers) the approval records
/// keep, besides the [`MAX_APPROVAL_RECORDS`] answers: however many are
/// refused, they never push an answer out.
pub const MAX_REFUSALS_KEPT: usize = 3;

/// `records` with `record` appended: the newest [`MAX_APPROVAL_RECORDS`]
/// answers (approved, rejected, void, timed out) and the newest
/// [`MAX_REFUSALS_KEPT`] refusals, in their order.
pub fn appended_approval(
    records: &[ApprovalRecord],
    record: ApprovalRecord,
) -> Vec<ApprovalRecord> {
    let mut records = records.to_vec();
    records.push(record);
    let refused = |r: &ApprovalRecord| r.decision == Decision::Refused;
    keep_newest(&mut records, MAX_REFUSALS_KEPT, refused);
    keep_newest(&mut records, MAX_APPROVAL_RECORDS, |r| !refused(r));
    records
}

/// Drops the oldest of `records` that are `of_kind` past `max` of them.
fn keep_newest(
    records: &mut Vec<ApprovalRecord>,
    max: usize,
    of_kind: impl Fn(&ApprovalRecord) -> bool,
) {
    let mut excess = records
        .iter()
        .filter(|r| of_kind(r))
        .count()
        .saturating_sub(max);
    records.retain(|r| {
        if excess > 0 && of_kind(r) {
            excess -= 1;
            false
        } else {
            true
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(decision: Decision, at: i64) -> ApprovalRecord {
        ApprovalRecord {
            change_set: format!("cs-{at}"),
            decision,
            by: Some("arn:aws:iam::111122223333:user/someone".into()),
            at: Timestamp(at),
            reason: None,
            run: "run-1".into(),
        }
    }

    #[test]
    fn refusals_never_push_the_answers_out() {
        let answers: Vec<ApprovalRecord> = (0..MAX_APPROVAL_RECORDS as i64)
            .map(|at| record(Decision::Approved, at))
            .collect();
        let mut records = answers.clone();
        for at in 100..200 {
            records = appended_approval(&records, record(Decision::Refused, at));
        }
        assert_eq!(records.len(), MAX_APPROVAL_RECORDS + MAX_REFUSALS_KEPT);
        assert_eq!(records[..answers.len()], answers[..], "every answer kept");
        let refusals: Vec<i64> = records[answers.len()..].iter().map(|r| r.at.0).collect();
        assert_eq!(refusals, [197, 198, 199], "the newest refusals");

        // Answers past their bound: the oldest answer goes, the refusals
        // stay, in order.
        let mut records = vec![record(Decision::Refused, 0)];
        for at in 1..=MAX_APPROVAL_RECORDS as i64 + 1 {
            records = appended_approval(&records, record(Decision::Approved, at));
        }
        records = appended_approval(&records, record(Decision::Void, 99));
        let kept: Vec<i64> = records.iter().map(|r| r.at.0).collect();
        assert_eq!(kept, [0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 99]);
    }
}
