//! The previews posted on pull requests, recorded on the stacks' entries
//! (attribute `reviewed`) for `approval: pullRequest`: written by the
//! preview function, read with the entry by the run that follows a merge.
//! One record per stack, the last posted; a merge marks it only if it is
//! that pull request's, at the head it merged.

use std::future::Future;

use super::expr::{self, Write};
use super::item::{s, to_attr_of};
use super::schema::stack_key;
use super::{Registry, Result};
use crate::pull_request::Reviewed;

/// Writing the `reviewed` record.
pub trait Reviews: Send + Sync {
    /// Records the preview of `entry` (replacing the one before); false
    /// when there is no such entry.
    fn record_review(
        &self,
        entry: &str,
        reviewed: &Reviewed,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Marks the preview of `entry` merged, if it is the one of
    /// `pull_request` at `head`: whether it was (false: another pull
    /// request previewed the stack since, or this one's last preview was
    /// of another commit).
    fn mark_merged(
        &self,
        entry: &str,
        pull_request: &str,
        head: &str,
    ) -> impl Future<Output = Result<bool>> + Send;
}

impl Reviews for Registry {
    async fn record_review(&self, entry: &str, reviewed: &Reviewed) -> Result<bool> {
        self.write_if(
            stack_key(entry),
            Write::Update(expr::SET_REVIEWED),
            expr::EXISTS,
            vec![(":reviewed", to_attr_of(reviewed))],
        )
        .await
    }

    async fn mark_merged(&self, entry: &str, pull_request: &str, head: &str) -> Result<bool> {
        self.write_if(
            stack_key(entry),
            Write::Update(expr::SET_REVIEWED_MERGED),
            expr::REVIEWED_AT,
            vec![
                (":pr", s(pull_request)),
                (":head", s(head)),
                (":true", aws_sdk_dynamodb::types::AttributeValue::Bool(true)),
            ],
        )
        .await
    }
}

#[cfg(any(test, feature = "fakes"))]
impl Reviews for super::memory::MemoryRegistry {
    async fn record_review(&self, entry: &str, reviewed: &Reviewed) -> Result<bool> {
        let mut state = self.state();
        let Some(found) = state.entry_mut(entry) else {
            return Ok(false);
        };
        found.reviewed = Some(reviewed.clone());
        Ok(true)
    }

    async fn mark_merged(&self, entry: &str, pull_request: &str, head: &str) -> Result<bool> {
        let mut state = self.state();
        let Some(reviewed) = state.entry_mut(entry).and_then(|e| e.reviewed.as_mut()) else {
            return Ok(false);
        };
        if reviewed.pull_request != pull_request || reviewed.head != head {
            return Ok(false);
        }
        reviewed.merged = true;
        Ok(true)
    }
}
