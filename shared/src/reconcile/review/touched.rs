//! Which stacks a pull request touches, read from the repository: the
//! commits of its base branch and its head as the repository has them now,
//! and, per entry, the files a run takes at each.

use std::time::Duration;

use crate::ports::{SourceFetcher, SourceLocation};
use crate::pull_request::PullRequest;
use crate::reconcile::desired::{self, FetchFailed};
use crate::spec::StackSpec;

/// Reads of the head before it is taken as moved on: a host may announce
/// a push a moment before its pull ref shows it.
const HEAD_READS: u32 = 3;
const HEAD_WAIT: Duration = Duration::from_millis(700);

/// Whether a pull request touches one stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touch {
    /// Its files are the same at the base and at the head.
    Unchanged,
    Changed,
    /// Its files cannot be read at the head (a template removed or broken
    /// by the pull request): a failed preview, said why.
    Unreadable(String),
    /// The source could not be reached (transient): try the review again.
    Unreachable(String),
}

/// The base branch's head and the pull request's head, full commit ids,
/// read from the repository at `source`; `None` when the head has moved
/// past the event's (a newer push).
pub async fn revisions<S: SourceFetcher>(
    sources: &S,
    source: &SourceLocation,
    pr: &PullRequest,
) -> Result<Option<(String, String)>, String> {
    let base = sources
        .resolve(source, &pr.base_ref)
        .await
        .map_err(|e| format!("{}: {e}", pr.base_ref))?;
    for read in 1..=HEAD_READS {
        match head_now(sources, source, pr).await? {
            Some(head) if pr.is_head(&head) => return Ok(Some((base, head))),
            _ if read < HEAD_READS => tokio::time::sleep(HEAD_WAIT).await,
            _ => {}
        }
    }
    Ok(None)
}

/// Whether the pull request's head is no longer `head` (read once).
pub async fn head_moved<S: SourceFetcher>(
    sources: &S,
    source: &SourceLocation,
    pr: &PullRequest,
    head: &str,
) -> bool {
    matches!(head_now(sources, source, pr).await, Ok(Some(now)) if now != head)
}

/// The pull request's head as the base repository has it: its pull ref
/// (GitHub, GitLab), else its branch (same repository only); for a fork
/// without a pull ref, the event's commit when it is a full id.
async fn head_now<S: SourceFetcher>(
    sources: &S,
    source: &SourceLocation,
    pr: &PullRequest,
) -> Result<Option<String>, String> {
    if let Some(pull_ref) = pr.host.head_ref(pr.number)
        && let Ok(head) = sources.resolve(source, &pull_ref).await
    {
        return Ok(Some(head));
    }
    if !pr.fork {
        return sources
            .resolve(source, &pr.head_ref)
            .await
            .map(Some)
            .map_err(|e| format!("{}: {e}", pr.head_ref));
    }
    if pr.head_commit.len() == 40 {
        return Ok(Some(pr.head_commit.clone()));
    }
    Err(format!(
        "the head of {} is in a fork, and the base repository keeps no ref of it",
        pr.label()
    ))
}

/// Whether `spec`'s files differ between `base` and `head`.
pub async fn touched<S: SourceFetcher>(
    sources: &S,
    spec: &StackSpec,
    base: &str,
    head: &str,
) -> Touch {
    let at_head = match desired::fetch(sources, spec, head).await {
        Ok(files) => files,
        Err(FetchFailed::Source(e)) if e.is_transient() => {
            return Touch::Unreachable(e.to_string());
        }
        Err(FetchFailed::Source(e)) => return Touch::Unreadable(e.to_string()),
        Err(FetchFailed::Invalid(e)) => return Touch::Unreadable(e),
    };
    match desired::fetch(sources, spec, base).await {
        Ok(at_base) if at_base == at_head => Touch::Unchanged,
        Err(FetchFailed::Source(e)) if e.is_transient() => Touch::Unreachable(e.to_string()),
        // Files the base lacks (a stack the pull request starts) change.
        _ => Touch::Changed,
    }
}
