//! CloudFormation's stack, change-set and execution statuses, classified.
//!
//! Statuses arrive as text from the API (or from a fake); an unknown one is
//! kept verbatim so the decision table can refuse it by name.

use std::fmt;

/// The kind of change set to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ChangeSetKind {
    Create,
    Update,
}

/// Every CloudFormation stack status.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StackStatus {
    CreateInProgress,
    CreateFailed,
    CreateComplete,
    RollbackInProgress,
    RollbackFailed,
    RollbackComplete,
    DeleteInProgress,
    DeleteFailed,
    DeleteComplete,
    UpdateInProgress,
    UpdateCompleteCleanupInProgress,
    UpdateComplete,
    UpdateFailed,
    UpdateRollbackInProgress,
    UpdateRollbackFailed,
    UpdateRollbackCompleteCleanupInProgress,
    UpdateRollbackComplete,
    ReviewInProgress,
    ImportInProgress,
    ImportComplete,
    ImportRollbackInProgress,
    ImportRollbackFailed,
    ImportRollbackComplete,
    /// A status this version of stacksync does not know.
    Other(String),
}

const STACK_STATUSES: [(&str, StackStatus); 23] = [
    ("CREATE_IN_PROGRESS", StackStatus::CreateInProgress),
    ("CREATE_FAILED", StackStatus::CreateFailed),
    ("CREATE_COMPLETE", StackStatus::CreateComplete),
    ("ROLLBACK_IN_PROGRESS", StackStatus::RollbackInProgress),
    ("ROLLBACK_FAILED", StackStatus::RollbackFailed),
    ("ROLLBACK_COMPLETE", StackStatus::RollbackComplete),
    ("DELETE_IN_PROGRESS", StackStatus::DeleteInProgress),
    ("DELETE_FAILED", StackStatus::DeleteFailed),
    ("DELETE_COMPLETE", StackStatus::DeleteComplete),
    ("UPDATE_IN_PROGRESS", StackStatus::UpdateInProgress),
    (
        "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS",
        StackStatus::UpdateCompleteCleanupInProgress,
    ),
    ("UPDATE_COMPLETE", StackStatus::UpdateComplete),
    ("UPDATE_FAILED", StackStatus::UpdateFailed),
    (
        "UPDATE_ROLLBACK_IN_PROGRESS",
        StackStatus::UpdateRollbackInProgress,
    ),
    ("UPDATE_ROLLBACK_FAILED", StackStatus::UpdateRollbackFailed),
    (
        "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS",
        StackStatus::UpdateRollbackCompleteCleanupInProgress,
    ),
    (
        "UPDATE_ROLLBACK_COMPLETE",
        StackStatus::UpdateRollbackComplete,
    ),
    ("REVIEW_IN_PROGRESS", StackStatus::ReviewInProgress),
    ("IMPORT_IN_PROGRESS", StackStatus::ImportInProgress),
    ("IMPORT_COMPLETE", StackStatus::ImportComplete),
    (
        "IMPORT_ROLLBACK_IN_PROGRESS",
        StackStatus::ImportRollbackInProgress,
    ),
    ("IMPORT_ROLLBACK_FAILED", StackStatus::ImportRollbackFailed),
    (
        "IMPORT_ROLLBACK_COMPLETE",
        StackStatus::ImportRollbackComplete,
    ),
];

impl StackStatus {
    /// Every known status, for table tests.
    pub fn all() -> impl Iterator<Item = StackStatus> {
        STACK_STATUSES.iter().map(|(_, s)| s.clone())
    }

    pub fn parse(text: &str) -> Self {
        STACK_STATUSES
            .iter()
            .find(|(name, _)| *name == text)
            .map(|(_, s)| s.clone())
            .unwrap_or_else(|| Self::Other(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Other(text) => text,
            known => STACK_STATUSES
                .iter()
                .find(|(_, s)| s == known)
                .map(|(name, _)| *name)
                .unwrap_or("UNKNOWN"),
        }
    }

    /// CloudFormation is working on the stack: look again later.
    /// (`REVIEW_IN_PROGRESS` is not work: it is a stack that was never created.)
    pub fn in_progress(&self) -> bool {
        self.as_str().ends_with("_IN_PROGRESS") && *self != Self::ReviewInProgress
    }

    /// The stack does not really exist: none of its resources were created.
    pub fn not_created(&self) -> bool {
        matches!(self, Self::ReviewInProgress | Self::DeleteComplete)
    }

    /// The last operation succeeded.
    pub fn is_success(&self) -> bool {
        matches!(
            self,
            Self::CreateComplete | Self::UpdateComplete | Self::ImportComplete
        )
    }
}

impl fmt::Display for StackStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A change set's own status (its creation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeSetStatus {
    CreatePending,
    CreateInProgress,
    CreateComplete,
    DeletePending,
    DeleteInProgress,
    DeleteComplete,
    DeleteFailed,
    Failed,
}

impl ChangeSetStatus {
    pub const ALL: [ChangeSetStatus; 8] = [
        Self::CreatePending,
        Self::CreateInProgress,
        Self::CreateComplete,
        Self::DeletePending,
        Self::DeleteInProgress,
        Self::DeleteComplete,
        Self::DeleteFailed,
        Self::Failed,
    ];

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::CreatePending => "CREATE_PENDING",
            Self::CreateInProgress => "CREATE_IN_PROGRESS",
            Self::CreateComplete => "CREATE_COMPLETE",
            Self::DeletePending => "DELETE_PENDING",
            Self::DeleteInProgress => "DELETE_IN_PROGRESS",
            Self::DeleteComplete => "DELETE_COMPLETE",
            Self::DeleteFailed => "DELETE_FAILED",
            Self::Failed => "FAILED",
        }
    }
}

/// Whether a change set can be, is being, or was executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecutionStatus {
    Unavailable,
    Available,
    ExecuteInProgress,
    ExecuteComplete,
    ExecuteFailed,
    Obsolete,
}

impl ExecutionStatus {
    pub const ALL: [ExecutionStatus; 6] = [
        Self::Unavailable,
        Self::Available,
        Self::ExecuteInProgress,
        Self::ExecuteComplete,
        Self::ExecuteFailed,
        Self::Obsolete,
    ];

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unavailable => "UNAVAILABLE",
            Self::Available => "AVAILABLE",
            Self::ExecuteInProgress => "EXECUTE_IN_PROGRESS",
            Self::ExecuteComplete => "EXECUTE_COMPLETE",
            Self::ExecuteFailed => "EXECUTE_FAILED",
            Self::Obsolete => "OBSOLETE",
        }
    }
}

/// A change set "with no changes": success (the stack is in sync), not failure.
///
/// Real AWS says "The submitted information didn't contain changes…"; moto
/// says "No updates are to be performed." in one shape (see TESTING notes).
pub fn is_empty_change_set_reason(reason: &str) -> bool {
    reason.contains("didn't contain changes") || reason.contains("No updates are to be performed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stack_status_round_trips_through_its_name() {
        for status in StackStatus::all() {
            assert_eq!(StackStatus::parse(status.as_str()), status);
        }
        assert_eq!(
            StackStatus::parse("NEW_THING"),
            StackStatus::Other("NEW_THING".into())
        );
        assert_eq!(StackStatus::parse("NEW_THING").as_str(), "NEW_THING");
    }

    #[test]
    fn review_in_progress_is_not_work_in_progress() {
        assert!(!StackStatus::ReviewInProgress.in_progress());
        assert!(StackStatus::ReviewInProgress.not_created());
        assert!(StackStatus::UpdateRollbackCompleteCleanupInProgress.in_progress());
        assert_eq!(
            StackStatus::all().filter(StackStatus::in_progress).count(),
            9
        );
    }

    #[test]
    fn change_set_and_execution_statuses_parse() {
        for s in ChangeSetStatus::ALL {
            assert_eq!(ChangeSetStatus::parse(s.as_str()), Some(s));
        }
        for s in ExecutionStatus::ALL {
            assert_eq!(ExecutionStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(ChangeSetStatus::parse("nope"), None);
    }

    #[test]
    fn both_shapes_of_an_empty_change_set_are_recognised() {
        assert!(is_empty_change_set_reason(
            "The submitted information didn't contain changes. Submit different information to create a change set."
        ));
        assert!(is_empty_change_set_reason(
            "No updates are to be performed."
        ));
        assert!(!is_empty_change_set_reason("Template format error"));
    }
}
