//! An approval refused (the caller is not among the entry's approvers),
//! recorded among the status's approval records by the function that
//! answers approvals, outside the run that holds the stack (parked while
//! it waits): only while that very run still waits, so a record never lands
//! in another run's status.

use std::future::Future;

use super::expr::Write;
use super::item::{s, to_attr_of};
use super::schema::stack_key;
use super::{Registry, Result};
use crate::status::ApprovalRecord;
use crate::status::appended_approval;

/// The approval records, replaced.
pub const SET_APPROVALS: &str = "SET #status.#approvals = :approvals";
/// …while the run that asked still waits.
pub const STILL_WAITING: &str = "#status.#awaiting.#run = :run";

/// The approval records' writer outside runs.
pub trait ApprovalRecords: Send + Sync {
    /// Appends `record` (a refusal) to `name`'s approval records, read as
    /// `read`, while the run `run` still waits. Returns whether it was
    /// written (false: the wait ended meanwhile).
    fn record_refusal(
        &self,
        name: &str,
        run: &str,
        read: &[ApprovalRecord],
        record: ApprovalRecord,
    ) -> impl Future<Output = Result<bool>> + Send;
}

impl ApprovalRecords for Registry {
    async fn record_refusal(
        &self,
        name: &str,
        run: &str,
        read: &[ApprovalRecord],
        record: ApprovalRecord,
    ) -> Result<bool> {
        let records = appended_approval(read, record);
        self.write_if(
            stack_key(name),
            Write::Update(SET_APPROVALS),
            STILL_WAITING,
            vec![(":approvals", to_attr_of(&records)), (":run", s(run))],
        )
        .await
    }
}

#[cfg(any(test, feature = "fakes"))]
impl ApprovalRecords for super::memory::MemoryRegistry {
    async fn record_refusal(
        &self,
        name: &str,
        run: &str,
        read: &[ApprovalRecord],
        record: ApprovalRecord,
    ) -> Result<bool> {
        let mut state = self.state();
        let Some(entry) = state.entry_mut(name) else {
            return Ok(false);
        };
        if entry
            .status
            .approval
            .awaiting
            .as_ref()
            .map(|a| a.run.as_str())
            != Some(run)
        {
            return Ok(false);
        }
        entry.status.approval.records = appended_approval(read, record);
        Ok(true)
    }
}
