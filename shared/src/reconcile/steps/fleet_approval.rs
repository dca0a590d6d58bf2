//! `approval:` on a fleet: a person approves a target's change set once,
//! and its rows are approved for the fleet at that revision
//! ([`crate::registry::fleet_approvals`]); a later target (a later wave of
//! its rollout) whose change set has the same rows runs without asking:
//! reviewed = executed. One whose rows differ waits for a person, as ever.

use super::{Ports, Steps};
use crate::clock::now_millis;
use crate::reconcile::run::{ApprovalRequest, RunState, StepError};
use crate::registry::{FleetApprovals as _, StackEntry};

impl<P: Ports> Steps<P> {
    /// Who approved change sets of `rows` for the entry's fleet at the
    /// run's revision (`None`: nobody, or the entry is no fleet's target).
    pub(super) async fn approved_for_fleet(
        &self,
        state: &RunState,
        entry: &StackEntry,
        rows: &str,
    ) -> Result<Option<String>, StepError> {
        let (Some(target), Some(revision)) = (&entry.spec.target_of, state.revision()) else {
            return Ok(None);
        };
        Ok(self
            .registry
            .rows_approved(&target.fleet, revision, rows)
            .await?)
    }

    /// A person approved this target's change set (`request`): its rows are
    /// approved for the fleet at its revision. Best effort: a record lost
    /// makes a later target ask again, nothing worse.
    pub(super) async fn record_fleet_approval(
        &self,
        entry: &StackEntry,
        request: &ApprovalRequest,
        by: Option<&str>,
    ) {
        let (Some(target), Some(revision), Some(rows)) = (
            &entry.spec.target_of,
            request.revision.as_deref(),
            request.rows.as_deref(),
        ) else {
            return;
        };
        let by = by.unwrap_or("an approver");
        if let Err(e) = self
            .registry
            .approve_rows(&target.fleet, revision, rows, by, now_millis())
            .await
        {
            tracing::warn!(stack = %entry.name, fleet = %target.fleet, error = %e, "could not record the approval for the fleet: its other targets ask again");
        }
    }
}
