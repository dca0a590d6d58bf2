//! The triggers: what starts reconcile runs, and nothing else. Each finds the
//! stacks something asks for and starts one execution per stack, named so
//! that a repeated trigger starts nothing new.
//!
//! - [`webhook`]: a Git host's push, verified, behind a Function URL;
//! - [`events`]: EventBridge — CodeCommit pushes and S3 objects start the
//!   stacks that follow them; a CloudFormation change stacksync did not make
//!   marks the stack due;
//! - [`scheduler`]: on a schedule — due stacks, and sources whose head moved;
//! - [`answer`]: behind an IAM-authorised Function URL, answers a change set
//!   that waits for approval, for a verified approver (it starts nothing:
//!   it answers the waiting run's task token);
//! - [`drift`]: on a schedule, in a function of its own — drift detections
//!   started, their findings recorded (it starts no execution: a drift to
//!   revert makes its stack due).
//!
//! They speak to the world through ports only (the registry, [`Starter`],
//! [`crate::ports::SourceFetcher`]), so each is unit-tested on the fakes.

pub mod answer;
pub mod drift;
pub mod events;
pub mod fleets;
pub mod registry_source;
pub mod scheduler;
pub mod webhook;

use std::collections::BTreeSet;

use serde::Serialize;

use crate::ports::{PortError, Starter, Trigger, TriggerKind};
use crate::registry::{Entries, RegistryError};
use crate::source::source_key;

/// A branch or tag of a repository now at a commit: a Git push (webhook) or
/// a CodeCommit reference event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefMoved {
    /// Every URL known for the repository (HTTPS clone, SSH, web page…), so
    /// [`crate::source::normalize_url`] matches whichever one a stack was
    /// registered with. Never empty, no duplicates.
    pub repository_urls: Vec<String>,
    /// The full ref: `refs/heads/<branch>` or `refs/tags/<tag>`.
    pub reference: String,
    /// The commit the ref now points at: 40 lower-case hex digits.
    pub commit: String,
}

impl RefMoved {
    /// The registry's source-index keys this matches, one per distinct
    /// normal URL (see [`crate::source::source_key`]): those of the ref as
    /// pushed ([`Self::named_keys`]), then those of its short name
    /// ([`Self::short_keys`]).
    pub fn source_keys(&self) -> Vec<String> {
        let mut keys = self.named_keys();
        keys.extend(self.short_keys());
        keys
    }

    /// The keys of the stacks that follow this very ref (`refs/heads/x`,
    /// `refs/tags/x`): started at the pushed commit.
    pub fn named_keys(&self) -> Vec<String> {
        self.keys(&self.reference)
    }

    /// The keys of the stacks that follow its short name (`x`): which of a
    /// branch and a tag of that name they follow, only their run can say
    /// (git's order: a tag first), so they are started to look, not at the
    /// pushed commit. Entries registered before the ref's kind was kept in
    /// the key are found here too, and look for themselves alike.
    pub fn short_keys(&self) -> Vec<String> {
        let short = crate::source::normalize_ref(&self.reference);
        if short == self.reference {
            return Vec::new();
        }
        self.keys(short)
    }

    fn keys(&self, reference: &str) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for url in &self.repository_urls {
            let key = source_key(url, Some(reference));
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }
}

/// Starts the stacks that follow the ref `moved` (each once): those of the
/// ref as named at its commit; those of its short name unpinned, each run
/// resolving its own ref, under an execution name of the ref and the commit
/// (a branch and a tag of one name moved to one commit are two starts).
pub async fn start_ref_followers<R: Entries, X: Starter>(
    registry: &R,
    starter: &X,
    moved: &RefMoved,
    kind: TriggerKind,
    starts: &mut Starts,
) -> Result<(), TriggerError> {
    start_ref_followers_up_to(
        MAX_STARTS_PER_TRIGGER,
        registry,
        starter,
        moved,
        kind,
        starts,
    )
    .await
}

/// [`start_ref_followers`], at most `cap` started (the rest left to the
/// scheduler): the queue's consumer answers nobody, and starts more.
pub async fn start_ref_followers_up_to<R: Entries, X: Starter>(
    cap: usize,
    registry: &R,
    starter: &X,
    moved: &RefMoved,
    kind: TriggerKind,
    starts: &mut Starts,
) -> Result<(), TriggerError> {
    let start = Start {
        kind,
        revision: &moved.commit,
        pinned: true,
        naming: &moved.commit,
        cap,
    };
    start_found(
        START_CONCURRENCY,
        registry,
        starter,
        &moved.named_keys(),
        start,
        starts,
    )
    .await?;
    let short = moved.short_keys();
    if short.is_empty() {
        return Ok(());
    }
    let naming = format!("{}@{}", moved.reference, moved.commit);
    start_found(
        START_CONCURRENCY,
        registry,
        starter,
        &short,
        Start {
            kind,
            revision: &moved.commit,
            pinned: false,
            naming: &naming,
            cap,
        },
        starts,
    )
    .await
}

/// One stack started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StartedStack {
    pub stack: String,
    pub execution: String,
    pub revision: String,
}

/// Why a stack that follows the source was not started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SkipReason {
    #[serde(rename = "suspended")]
    Suspended,
    /// Step Functions keeps a name for 90 days: this revision was started
    /// before (a replay, or the same revision again).
    #[serde(rename = "already started for this revision")]
    AlreadyStarted,
    /// Past [`MAX_STARTS_PER_TRIGGER`]: the scheduler starts it (its source
    /// moved past the revision the stack was last tried at).
    #[serde(rename = "left to the scheduler")]
    Deferred,
    /// Held by a sync window: the scheduler starts it when it opens.
    #[serde(rename = "held by a sync window")]
    HeldByWindow,
    /// Held by its fleet's rollout: the run that ends the wave before its
    /// own starts it.
    #[serde(rename = "held by its fleet's rollout")]
    HeldByRollout,
}

/// One stack left alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub stack: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<String>,
    pub reason: SkipReason,
}

/// The stacks started for a trigger, and the ones left alone.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Starts {
    pub started: Vec<StartedStack>,
    pub skipped: Vec<Skipped>,
}

impl Starts {
    /// Nothing followed the source at all.
    pub fn is_empty(&self) -> bool {
        self.started.is_empty() && self.skipped.is_empty()
    }
}

/// Why a trigger could not do its work: worth trying again (the sender's
/// retry, EventBridge's, the next scheduler run), never a person's to fix.
#[derive(Debug, thiserror::Error)]
pub enum TriggerError {
    #[error("{0}")]
    Registry(#[from] RegistryError),
    #[error("starting an execution: {0}")]
    Start(#[from] PortError),
}

impl TriggerError {
    /// Whether trying again may help (throttling, a timeout, a 5xx), as
    /// against a refusal that another try meets again.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Registry(e) => e.is_transient(),
            Self::Start(e) => matches!(e, PortError::Transient(_)),
        }
    }
}

/// The most executions one trigger (a webhook delivery, an event) starts:
/// a delivery answers in bounded time whatever follows the source, and one
/// signed request cannot start the whole registry. The rest are left to the
/// scheduler, which sees the source moved and starts them on its next runs.
pub const MAX_STARTS_PER_TRIGGER: usize = 1_000;

/// The most executions the queue's consumer starts for one queued delivery:
/// it answers nobody, so it may start more than a trigger that answers.
pub const MAX_STARTS_PER_QUEUED_DELIVERY: usize = 10_000;

/// How many executions a trigger starts at once: a push to a source with
/// hundreds of followers is answered well within a sender's timeout
/// (GitHub gives 10 s), and Step Functions' `StartExecution` quota (a
/// bucket of hundreds, refilled at scores a second) is never reached.
pub const START_CONCURRENCY: usize = 32;

/// Starts the reconcile of every stack following one of `keys` (each
/// once), at `revision`, [`START_CONCURRENCY`] at a time; suspended ones
/// are skipped. A start that fails leaves the others going: the error is
/// returned once all were tried, so the sender's retry (the starts are
/// idempotent: one execution per stack and revision) finishes the job.
pub async fn start_followers<R: Entries, X: Starter>(
    registry: &R,
    starter: &X,
    keys: &[String],
    kind: TriggerKind,
    revision: &str,
    starts: &mut Starts,
) -> Result<(), TriggerError> {
    start_followers_at(
        START_CONCURRENCY,
        registry,
        starter,
        keys,
        (kind, revision),
        starts,
    )
    .await
}

/// [`start_followers`], `concurrency` starts at a time (1: one after the
/// other, as before; for the benchmark's comparison).
pub async fn start_followers_at<R: Entries, X: Starter>(
    concurrency: usize,
    registry: &R,
    starter: &X,
    keys: &[String],
    (kind, revision): (TriggerKind, &str),
    starts: &mut Starts,
) -> Result<(), TriggerError> {
    let start = Start {
        kind,
        revision,
        pinned: true,
        naming: revision,
        cap: MAX_STARTS_PER_TRIGGER,
    };
    start_found(concurrency, registry, starter, keys, start, starts).await
}

/// How the followers found are started: the trigger's kind, the revision
/// it names, whether the run deploys that revision (`pinned`) or resolves
/// its own ref, and the key its execution is named by.
#[derive(Debug, Clone, Copy)]
struct Start<'a> {
    kind: TriggerKind,
    revision: &'a str,
    pinned: bool,
    naming: &'a str,
    /// The most started; the rest are left to the scheduler.
    cap: usize,
}

/// The followers of `keys` to start (each once), the suspended ones and
/// those past [`MAX_STARTS_PER_TRIGGER`] put among the skipped.
async fn followers_to_start<R: Entries>(
    registry: &R,
    keys: &[String],
    cap: usize,
    starts: &mut Starts,
) -> Result<Vec<String>, TriggerError> {
    let mut seen = BTreeSet::new();
    let mut to_start = Vec::new();
    for key in keys {
        for entry in registry.followers(key).await? {
            if !seen.insert(entry.name.clone()) {
                continue;
            }
            if entry.suspended || entry.held() {
                let reason = if entry.suspended {
                    SkipReason::Suspended
                } else if entry.held_by_window {
                    SkipReason::HeldByWindow
                } else {
                    SkipReason::HeldByRollout
                };
                starts.skipped.push(Skipped {
                    stack: entry.name,
                    execution: None,
                    reason,
                });
                continue;
            }
            if to_start.len() >= cap {
                starts.skipped.push(Skipped {
                    stack: entry.name,
                    execution: None,
                    reason: SkipReason::Deferred,
                });
                continue;
            }
            to_start.push(entry.name);
        }
    }
    Ok(to_start)
}

async fn start_found<R: Entries, X: Starter>(
    concurrency: usize,
    registry: &R,
    starter: &X,
    keys: &[String],
    start: Start<'_>,
    starts: &mut Starts,
) -> Result<(), TriggerError> {
    use futures_util::stream::{self, StreamExt};
    let Start {
        kind,
        revision,
        pinned,
        naming,
        cap,
    } = start;

    let to_start = followers_to_start(registry, keys, cap, starts).await?;
    let trigger = Trigger {
        revision: pinned.then(|| revision.to_owned()),
        ..Trigger::of(kind)
    };
    // The futures made first (a closure in the stream would make the
    // handler's future not `Send` for every lifetime, as `tokio::spawn`
    // needs), then run `concurrency` at a time.
    let pending: Vec<_> = to_start
        .iter()
        .map(|name| starter.start(name, &trigger, naming))
        .collect();
    let results: Vec<_> = stream::iter(pending)
        .buffered(concurrency.max(1))
        .collect()
        .await;
    let mut failed = None;
    for result in results {
        match result {
            Ok(s) if s.new => starts.started.push(StartedStack {
                stack: s.stack,
                execution: s.execution_name,
                revision: revision.to_owned(),
            }),
            Ok(s) => starts.skipped.push(Skipped {
                stack: s.stack,
                execution: Some(s.execution_name),
                reason: SkipReason::AlreadyStarted,
            }),
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    // In the order of the stacks' names, whatever order they ended in.
    starts.started.sort_by(|a, b| a.stack.cmp(&b.stack));
    starts.skipped.sort_by(|a, b| a.stack.cmp(&b.stack));
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
