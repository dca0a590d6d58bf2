//! What stacksync tells the world (EventBridge: source `stacksync`): a run
//! started, succeeded or failed; a change set awaits approval, was approved
//! or rejected. Pure values: the steps build them, a port puts them on a bus.

use serde::Serialize;

use crate::status::{Phase, Status};

/// The events' `source`.
pub const SOURCE: &str = "stacksync";

/// The `detail-type` of each notice, as rules match it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum NoticeKind {
    /// A run took the stack (its lease) and starts working.
    #[serde(rename = "Reconcile Started")]
    Started,
    /// A run ended well: in sync, applied, deleted, suspended.
    #[serde(rename = "Reconcile Succeeded")]
    Succeeded,
    /// A run removed the entry (after deleting its stack, or leaving it).
    #[serde(rename = "Reconcile Succeeded")]
    Removed,
    /// A run ended `Failed`.
    #[serde(rename = "Reconcile Failed")]
    Failed,
    /// A change set waits for a person.
    #[serde(rename = "Approval Requested")]
    AwaitingApproval,
    /// A person approved it, and it runs.
    #[serde(rename = "Change Set Approved")]
    Approved,
    /// A person rejected it.
    #[serde(rename = "Change Set Rejected")]
    Rejected,
    /// A drift detection found a drift not reported before.
    #[serde(rename = "Drift Detected")]
    DriftDetected,
    /// A stack reported drifted is no longer.
    #[serde(rename = "Drift Cleared")]
    DriftCleared,
    /// A revert did not clear the drift: reported once, not retried.
    #[serde(rename = "Drift Not Cleared")]
    DriftNotCleared,
    /// A commit of a registry source could not be applied (nothing of it
    /// was written), or was held by the prune guard.
    #[serde(rename = "Registry Source Failed")]
    RegistrySourceFailed,
    /// A Git push moved a registry source: the webhook hands it to the
    /// events function, which applies the source and starts the push's
    /// stacks (the webhook, behind a public URL, writes no spec).
    #[serde(rename = "Registry Source Pushed")]
    RegistrySourcePushed,
    /// A pull request was opened, pushed to, merged or closed: the webhook
    /// hands it to the preview function.
    #[serde(rename = "Pull Request Changed")]
    PullRequestChanged,
}

impl NoticeKind {
    pub const ALL: [NoticeKind; 13] = [
        Self::Started,
        Self::Succeeded,
        Self::Removed,
        Self::Failed,
        Self::AwaitingApproval,
        Self::Approved,
        Self::Rejected,
        Self::DriftDetected,
        Self::DriftCleared,
        Self::DriftNotCleared,
        Self::RegistrySourceFailed,
        Self::RegistrySourcePushed,
        Self::PullRequestChanged,
    ];

    /// The `detail-type`.
    pub fn detail_type(self) -> &'static str {
        match self {
            Self::Started => "Reconcile Started",
            Self::Succeeded | Self::Removed => "Reconcile Succeeded",
            Self::Failed => "Reconcile Failed",
            Self::AwaitingApproval => "Approval Requested",
            Self::Approved => "Change Set Approved",
            Self::Rejected => "Change Set Rejected",
            Self::DriftDetected => "Drift Detected",
            Self::DriftCleared => "Drift Cleared",
            Self::DriftNotCleared => "Drift Not Cleared",
            Self::RegistrySourceFailed => "Registry Source Failed",
            Self::RegistrySourcePushed => "Registry Source Pushed",
            Self::PullRequestChanged => "Pull Request Changed",
        }
    }

    /// How a run that ends in `phase` is told.
    pub fn of_end(phase: Phase) -> Self {
        if phase == Phase::Failed {
            Self::Failed
        } else {
            Self::Succeeded
        }
    }
}

/// One event's `detail`: which stack, which run, what happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    #[serde(skip)]
    pub kind: Option<NoticeKind>,
    /// The installation (its registry table) and the entry.
    pub installation: String,
    /// Empty for a registry source's notice ([`Notice::registry_source`]).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stack: String,
    /// The CloudFormation stack: name, region (`None`: the installation's),
    /// and its StackId when one is known.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stack_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack_id: Option<String>,
    /// The run: its execution's name and ARN (`local:<name>` for a local
    /// run), and what started it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub execution: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_arn: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub trigger: String,
    /// The revision the run works at, and the last one applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_revision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_set: Option<String>,
    /// The stack's phase after the event, and the status's message.
    pub phase: Phase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A failure's kind (as in `Failed (StackFailed)` and the error
    /// `StackSync.Stalled.StackFailed`) and root cause (the status's message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stall_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_cause: Option<String>,
    /// The run removed the entry (its last phase was `Deleting`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
    /// An approval's: why it was asked, until when, who answered and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<NoticeApproval>,
    /// A drift notice's: the drifted resources (logical ids), how many,
    /// the action, and when the detection ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<NoticeDrift>,
    /// A registry source's notice: which source, which commit, and why it
    /// was not applied (each problem names the file, entry and field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry_source: Option<NoticeSource>,
    /// A relayed push ([`NoticeKind::RegistrySourcePushed`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push: Option<NoticePush>,
    /// A relayed pull request ([`NoticeKind::PullRequestChanged`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<crate::pull_request::PullRequest>,
    /// What the run's Guard check found, when it found anything: the
    /// rules broken (`Reconcile Failed`, `PolicyViolation`) or the
    /// warnings of a run that went on (`Reconcile Succeeded`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<crate::guard::Report>,
}

/// The push a `Registry Source Pushed` event relays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct NoticePush {
    /// Every URL of the repository the push named.
    pub repository_urls: Vec<String>,
    /// The full ref (`refs/heads/main`).
    pub reference: String,
    /// The commit it announced (the events function reads the ref's head
    /// itself: an event on the bus proves nothing of a commit).
    pub commit: String,
}

/// What a registry source's notice says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct NoticeSource {
    pub name: String,
    pub commit: String,
    /// `Failed` or `Held (PruneGuard)`.
    pub state: String,
    pub problems: Vec<String>,
}

/// What a drift notice adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct NoticeDrift {
    pub count: usize,
    pub resources: Vec<String>,
    pub action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<String>,
}

/// What an approval notice adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct NoticeApproval {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// How many resources the change set changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Notice {
    /// A notice of `kind` about the stack whose status is now `status`.
    pub fn about(kind: NoticeKind, status: &Status) -> Self {
        let failed = status.phase == Phase::Failed;
        Notice {
            kind: Some(kind),
            phase: status.phase,
            message: status.message.clone(),
            applied_revision: status.applied.last_applied_revision.clone(),
            change_set: status.run.change_set_name.clone(),
            stack_id: status.applied.seen.as_ref().map(|s| s.stack_id.clone()),
            stall_reason: status
                .stall_reason
                .filter(|_| failed)
                .map(|r| r.as_str().to_owned()),
            root_cause: status.message.clone().filter(|_| failed),
            removed: kind == NoticeKind::Removed,
            policy: status
                .findings
                .policy
                .as_ref()
                .filter(|p| {
                    matches!(
                        kind,
                        NoticeKind::Succeeded | NoticeKind::Failed | NoticeKind::AwaitingApproval
                    ) && !(p.report.violations.is_empty() && p.report.warnings.is_empty())
                        && status.run.last_attempted_revision == p.revision
                })
                .map(|p| p.report.clone()),
            ..Notice::default()
        }
    }

    /// The event's `detail`, as JSON text.
    pub fn detail(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }

    /// The `detail-type`.
    pub fn detail_type(&self) -> &'static str {
        self.kind.unwrap_or(NoticeKind::Started).detail_type()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::StallReason;

    #[test]
    fn every_kind_has_the_detail_type_it_serializes_as() {
        for kind in NoticeKind::ALL {
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                kind.detail_type(),
                "{kind:?}"
            );
        }
        assert_eq!(NoticeKind::of_end(Phase::Failed), NoticeKind::Failed);
        assert_eq!(NoticeKind::of_end(Phase::Ready), NoticeKind::Succeeded);
        assert_eq!(NoticeKind::of_end(Phase::Suspended), NoticeKind::Succeeded);
    }

    #[test]
    fn a_failure_carries_its_reason_and_root_cause_and_a_success_neither() {
        let mut failed = Status {
            phase: Phase::Failed,
            message: Some("the stack ended in ROLLBACK_COMPLETE: Queue: bad name".into()),
            stall_reason: Some(StallReason::StackFailed),
            ..Status::default()
        };
        failed.run.change_set_name = Some("stacksync-v1-abc".into());
        failed.applied.last_applied_revision = Some("0123".into());
        let notice = Notice {
            stack: "orders".into(),
            stack_name: "stacksync-orders".into(),
            execution: "orders_manual_1".into(),
            trigger: "manual".into(),
            revision: Some("4567".into()),
            ..Notice::about(NoticeKind::Failed, &failed)
        };
        assert_eq!(notice.detail_type(), "Reconcile Failed");
        let detail: serde_json::Value = serde_json::from_str(&notice.detail()).unwrap();
        assert_eq!(detail["stack"], "orders");
        assert_eq!(detail["stackName"], "stacksync-orders");
        assert_eq!(detail["phase"], "Failed");
        assert_eq!(detail["stallReason"], "StackFailed");
        assert_eq!(
            detail["rootCause"],
            "the stack ended in ROLLBACK_COMPLETE: Queue: bad name"
        );
        assert_eq!(detail["changeSet"], "stacksync-v1-abc");
        assert_eq!(detail["revision"], "4567");
        assert_eq!(detail["appliedRevision"], "0123");
        assert!(detail.get("kind").is_none() && detail.get("approval").is_none());

        let ready = Status {
            phase: Phase::Ready,
            stall_reason: Some(StallReason::StackFailed),
            message: Some("applied".into()),
            ..Status::default()
        };
        let detail: serde_json::Value =
            serde_json::from_str(&Notice::about(NoticeKind::Succeeded, &ready).detail()).unwrap();
        assert!(detail.get("stallReason").is_none() && detail.get("rootCause").is_none());
        assert_eq!(detail["message"], "applied");
    }
}
