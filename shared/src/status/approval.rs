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
