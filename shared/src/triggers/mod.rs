//! The triggers: what starts reconcile runs, and nothing else. Each finds the
//! stacks something asks for and starts one execution per stack, named so
//! that a repeated trigger starts nothing new.
//!
//! - [`webhook`]: a Git host's push, verified, behind a Function URL;
//! - [`events`]: EventBridge — CodeCommit pushes and S3 objects start the
//!   stacks that follow them; a CloudFormation change stacksync did not make
//!   marks the stack due;
//! - [`scheduler`]: on a schedule — due stacks, and sources whose head moved.
//!
//! They speak to the world through ports only (the registry, [`Starter`],
//! [`crate::ports::SourceFetcher`]), so each is unit-tested on the fakes.

pub mod events;
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
    /// normal URL (see [`crate::source::source_key`]).
    pub fn source_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for url in &self.repository_urls {
            let key = source_key(url, Some(&self.reference));
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }
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

/// Starts one execution per non-suspended stack that follows any of `keys`
/// (source-index keys), named by stack, `kind` and `revision`: a repeated
/// trigger for one revision starts nothing new. Stops at the first error
/// (what was started stays started; a retry of the whole trigger starts only
/// the rest).
pub async fn start_followers<R: Entries, X: Starter>(
    registry: &R,
    starter: &X,
    keys: &[String],
    kind: TriggerKind,
    revision: &str,
    starts: &mut Starts,
) -> Result<(), TriggerError> {
    let mut seen = BTreeSet::new();
    for key in keys {
        for entry in registry.by_source(key).await? {
            if !seen.insert(entry.name.clone()) {
                continue;
            }
            if entry.is_suspended() {
                starts.skipped.push(Skipped {
                    stack: entry.name,
                    execution: None,
                    reason: SkipReason::Suspended,
                });
                continue;
            }
            let trigger = Trigger {
                revision: Some(revision.to_owned()),
                ..Trigger::of(kind)
            };
            let s = starter.start(&entry.name, &trigger, revision).await?;
            if s.new {
                starts.started.push(StartedStack {
                    stack: s.stack,
                    execution: s.execution_name,
                    revision: revision.to_owned(),
                });
            } else {
                starts.skipped.push(Skipped {
                    stack: s.stack,
                    execution: Some(s.execution_name),
                    reason: SkipReason::AlreadyStarted,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::RecordingStarter;
    use crate::registry::memory::MemoryRegistry;
    use crate::registry::sample_entry;
    use crate::status::Status;

    #[tokio::test]
    async fn followers_start_once_per_revision_and_suspended_ones_are_skipped() {
        let registry = MemoryRegistry::new();
        registry.insert(sample_entry("a", Status::default()));
        let mut suspended = sample_entry("b", Status::default());
        suspended.suspended = true;
        registry.insert(suspended);
        let starter = RecordingStarter::new();
        let keys = [source_key("https://git.example/infra.git", Some("main"))];
        let mut starts = Starts::default();
        start_followers(
            &registry,
            &starter,
            &keys,
            TriggerKind::Webhook,
            "c1",
            &mut starts,
        )
        .await
        .unwrap();
        assert_eq!(
            starts
                .started
                .iter()
                .map(|s| s.stack.as_str())
                .collect::<Vec<_>>(),
            ["a"]
        );
        assert_eq!(starts.skipped[0].reason, SkipReason::Suspended);
        let mut again = Starts::default();
        start_followers(
            &registry,
            &starter,
            &keys,
            TriggerKind::Webhook,
            "c1",
            &mut again,
        )
        .await
        .unwrap();
        assert!(again.started.is_empty());
        assert_eq!(again.skipped.len(), 2);
        assert_eq!(starter.started().len(), 1);
        let json = serde_json::to_value(&again).unwrap();
        assert_eq!(
            json["skipped"][0]["reason"],
            "already started for this revision"
        );
    }
}
