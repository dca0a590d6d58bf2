//! What a status keeps of approval gates: the change set that waits, and
//! what became of the latest ones that asked.

use serde::{Deserialize, Serialize};

use super::{ResourceChange, Timestamp, is_zero};

/// How many approval records a status keeps.
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
/// keep: however many are refused, they never push the answers out.
pub const MAX_REFUSALS_KEPT: usize = 3;

/// `records` with `record` appended: past [`MAX_REFUSALS_KEPT`] refusals
/// the oldest refusal is dropped, and past [`MAX_APPROVAL_RECORDS`] the
/// oldest refusal, else the oldest record.
pub fn appended_approval(
    records: &[ApprovalRecord],
    record: ApprovalRecord,
) -> Vec<ApprovalRecord> {
    let mut records = records.to_vec();
    records.push(record);
    let refused = |r: &ApprovalRecord| r.decision == Decision::Refused;
    let mut refusals = records.iter().filter(|r| refused(r)).count();
    while records.len() > MAX_APPROVAL_RECORDS || refusals > MAX_REFUSALS_KEPT {
        match records.iter().position(refused) {
            Some(oldest) if refusals > 0 => {
                records.remove(oldest);
                refusals -= 1;
            }
            _ => {
                records.remove(0);
            }
        }
    }
    records
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
        let answers: Vec<ApprovalRecord> = (0..MAX_APPROVAL_RECORDS as i64 - 1)
            .map(|at| record(Decision::Approved, at))
            .collect();
        let mut records = answers.clone();
        for at in 100..200 {
            records = appended_approval(&records, record(Decision::Refused, at));
        }
        assert_eq!(records.len(), MAX_APPROVAL_RECORDS);
        assert_eq!(records[..answers.len()], answers[..], "every answer kept");
        assert_eq!(
            records.last().unwrap().at,
            Timestamp(199),
            "the newest refusal"
        );

        // Refusals alone: the newest few.
        let mut records = Vec::new();
        for at in 0..20 {
            records = appended_approval(&records, record(Decision::Refused, at));
        }
        let kept: Vec<i64> = records.iter().map(|r| r.at.0).collect();
        assert_eq!(kept, [17, 18, 19]);

        // Answers past the bound: the oldest refusal goes first, then the
        // oldest answer.
        let mut records = vec![record(Decision::Refused, 0)];
        for at in 1..=MAX_APPROVAL_RECORDS as i64 {
            records = appended_approval(&records, record(Decision::Approved, at));
        }
        assert!(records.iter().all(|r| r.decision == Decision::Approved));
        records = appended_approval(&records, record(Decision::Void, 99));
        assert_eq!(records.first().unwrap().at, Timestamp(2));
        assert_eq!(records.len(), MAX_APPROVAL_RECORDS);
    }
}
