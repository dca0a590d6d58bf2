//! The registry sources a pull request's base branch holds, planned at its
//! head (`triggers::registry_source::stacks_files_at`, put together by the
//! composition root): the review shows and previews what the pull
//! request's stacks files would register.

use std::future::Future;
use std::pin::Pin;

use super::SourceLocation;
use crate::pull_request::{PullRequest, StacksFiles};

/// A boxed future of the planner's (it is a trait object).
pub type Planned<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// Plans the registry sources that follow a pull request's base branch.
pub trait StacksFilesPlanner: Send + Sync {
    /// Where those sources are read (their repository, with their
    /// secret): none when no registry source follows the base branch.
    fn locations<'a>(&'a self, pr: &'a PullRequest) -> Planned<'a, Vec<SourceLocation>>;
    /// Each such source at `head` (a full commit id), planned.
    fn plan<'a>(&'a self, pr: &'a PullRequest, head: &'a str) -> Planned<'a, Vec<StacksFiles>>;
}
