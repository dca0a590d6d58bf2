//! A push's registry sources: applied before the push's stacks are started.

use std::future::Future;

use std::collections::BTreeMap;

use super::{Installation, Outcome, SyncError, sync_source};
use crate::clock::EpochMillis;
use crate::ports::{Notifier, SourceFetcher};
use crate::registry::{RegistrySources, Specs};

/// One entry a push's commit changed, to start at once, named as the
/// push's own start of it would be (so it starts once): `pinned` when it
/// follows the pushed ref by its full name (announced at the pushed commit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToStart {
    pub name: String,
    pub pinned: bool,
    /// The execution name's key: the commit, or `ref@commit` for an entry
    /// that follows the ref's short name.
    pub naming: String,
}

/// Applies the registry sources a push moved, before the push's stacks are
/// started (a commit that changes both a stacks file and templates is one
/// revision: entries written first, then their runs at that commit).
/// `exact`: `moved.commit` is the source's new revision (a Git push, an S3
/// version id), read as it is; otherwise the source is resolved again (an
/// unversioned S3 object, of which the event names only an ETag).
pub trait AppliesPushes: Send + Sync + std::fmt::Debug {
    fn apply_pushed<'a>(
        &'a self,
        moved: &'a crate::triggers::RefMoved,
        exact: bool,
        now: EpochMillis,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<ToStart>, SyncError>> + Send + 'a>>;
}

/// The registry sources on a registry and a source fetcher.
#[derive(Debug, Clone)]
pub struct PushApplier<R, S> {
    pub registry: R,
    pub sources: S,
    pub notices: Notifier,
    pub installation: Installation,
}

impl<R, S> PushApplier<R, S>
where
    R: Specs + RegistrySources + crate::registry::Fleets,
    S: SourceFetcher,
{
    async fn apply(
        &self,
        moved: &crate::triggers::RefMoved,
        exact: bool,
        now: EpochMillis,
    ) -> Result<Vec<ToStart>, SyncError> {
        let all = self
            .registry
            .registry_sources()
            .await
            .map_err(|error| SyncError::Registry {
                source_name: String::new(),
                error,
            })?;
        let named = moved.named_keys();
        let short = moved.short_keys();
        let mut to_start = Vec::new();
        for source in all {
            let key = source.spec.key();
            // The pushed ref by its full name is at the pushed commit; a
            // short name (`main`) may be a tag first: resolved.
            let head = if named.contains(&key) {
                Some(moved.commit.as_str()).filter(|_| exact)
            } else if short.contains(&key) {
                None
            } else {
                continue;
            };
            let outcome = match sync_source(
                &self.registry,
                &self.sources,
                &self.notices,
                &self.installation,
                &source,
                head,
                now,
            )
            .await
            {
                Ok(outcome) => outcome,
                // This source waits for the scheduler; the push's others go on.
                Err(e) => {
                    tracing::warn!(error = %e, "registry source not applied for this push: the scheduler reads it");
                    continue;
                }
            };
            tracing::info!(source = %source.spec.name, ?outcome, "registry source read for a push");
            let followed = match &outcome {
                Outcome::Applied { followed, .. } => followed.clone(),
                _ => BTreeMap::new(),
            };
            for name in outcome.to_start() {
                let key = followed.get(&name);
                let (pinned, naming) = match key {
                    Some(k) if named.contains(k) => (true, moved.commit.clone()),
                    Some(k) if short.contains(k) => {
                        (false, format!("{}@{}", moved.reference, moved.commit))
                    }
                    _ => (false, moved.commit.clone()),
                };
                to_start.push(ToStart {
                    name,
                    pinned,
                    naming,
                });
            }
        }
        Ok(to_start)
    }
}

impl<R, S> AppliesPushes for PushApplier<R, S>
where
    R: Specs + RegistrySources + crate::registry::Fleets + std::fmt::Debug,
    S: SourceFetcher + std::fmt::Debug,
{
    fn apply_pushed<'a>(
        &'a self,
        moved: &'a crate::triggers::RefMoved,
        exact: bool,
        now: EpochMillis,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<ToStart>, SyncError>> + Send + 'a>> {
        Box::pin(self.apply(moved, exact, now))
    }
}

/// Applies the registry sources `moved` moved and starts the entries its
/// commit created, changed or pruned, each named as the push's own start of
/// it is (so it starts once). A source that cannot be read now is logged and
/// left to the scheduler: the push's stacks are started all the same.
/// `applier`: `None` for a trigger that reads no registry source.
pub async fn apply_and_start<X: crate::ports::Starter>(
    applier: Option<&dyn AppliesPushes>,
    starter: &X,
    moved: &crate::triggers::RefMoved,
    exact: bool,
    (kind, now): (crate::ports::TriggerKind, EpochMillis),
    starts: &mut crate::triggers::Starts,
) -> Result<(), crate::triggers::TriggerError> {
    let Some(applier) = applier else {
        return Ok(());
    };
    let to_start = match applier.apply_pushed(moved, exact, now).await {
        Ok(to_start) => to_start,
        Err(e) => {
            tracing::warn!(error = %e, "registry source not applied for this push: the scheduler reads it");
            return Ok(());
        }
    };
    for entry in to_start {
        let trigger = crate::ports::Trigger {
            revision: entry.pinned.then(|| moved.commit.clone()),
            ..crate::ports::Trigger::of(kind)
        };
        let started = starter.start(&entry.name, &trigger, &entry.naming).await?;
        if started.new {
            starts.started.push(crate::triggers::StartedStack {
                stack: started.stack,
                execution: started.execution_name,
                revision: moved.commit.clone(),
            });
        }
    }
    Ok(())
}
