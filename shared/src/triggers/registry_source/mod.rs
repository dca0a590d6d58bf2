//! The applier of registry sources: a source's stacks files at one commit
//! read, validated and planned as a whole, then written plan-first.
//!
//! 1. The commit is read only when [`crate::registry_source::SourceStatus::needs`] it: a source
//!    whose ref has not moved costs no write and no fetch.
//! 2. Every stacks file the pattern matches is fetched (only the folder it
//!    lies under: lean fetch, with the template sources' credentials,
//!    transports, signatures and hostile-input rules) and read with every
//!    rule of `apply --prune`: the files' own rules, names unique across
//!    files, the installation's policy, ownership (a source changes only its
//!    own entries), dependencies and cycles, one stack one entry.
//! 3. Anything wrong: nothing of the commit is written; the source records
//!    `Failed` with the commit and each problem (file, entry, field), and a
//!    `Registry Source Failed` event is sent, once per commit. Its entries
//!    keep running at their last good spec; the next good commit recovers.
//! 4. A commit that would prune more than the guard allows
//!    ([`crate::registry_source::prune_held`]) is held (`Held
//!    (PruneGuard)`), until a commit that keeps the entries or an approval
//!    of that commit (`stacksync source approve-prune`).
//! 5. Otherwise the plan is recorded on the source first (`applying`), then
//!    written in transactions of at most 100 items, then the commit is
//!    recorded as applied. A run stopped between batches leaves `applying`:
//!    the next run plans that commit's files again against what was
//!    written (done changes are then unchanged) and finishes it; nothing is
//!    lost or written twice (every write is conditioned on the version it
//!    was planned from).

mod preview;
mod push;
mod read;
mod record;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::clock::EpochMillis;
use crate::ownership::InstallationPolicy;
use crate::ports::source::FetchError;
use crate::ports::{Notifier, SourceFetcher};
use crate::registry::plan::{Action, Plan, Writer, plan_by};
use crate::registry::{RegistryError, RegistrySources, Specs};
use crate::registry_source::{RegistrySource, prune_held};
use crate::source::source_key;

pub use preview::stacks_files_at;
pub use push::{AppliesPushes, PushApplier, ToStart, apply_and_start};
use read::{Read, check_policy, conflict_lines, expanded, read_files, recorded_units};

/// What the applier needs of the installation.
#[derive(Debug, Clone, Default)]
pub struct Installation {
    /// Its registry table's name, for the events.
    pub name: String,
    /// The region of a spec that names none.
    pub home: Option<String>,
    /// What it allows (`StackNamePrefix`, `CloudFormationRoleArns`).
    pub policy: InstallationPolicy,
}

/// What reading a source did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum Outcome {
    /// The commit was applied already (or failed or held before): nothing
    /// was read or written.
    Unchanged { revision: String },
    /// The commit is in the registry.
    Applied {
        revision: String,
        created: Vec<String>,
        updated: Vec<String>,
        moved: Vec<String>,
        pruned: Vec<String>,
        unchanged: usize,
        /// The source key (`source_key`) each created, updated and pruned
        /// entry follows, so a push starts them as it starts its followers.
        #[serde(skip)]
        followed: BTreeMap<String, String>,
    },
    /// The prune guard holds the commit.
    Held {
        revision: String,
        entries: Vec<String>,
    },
    /// The commit is refused: nothing of it was written.
    Failed {
        revision: String,
        problems: Vec<String>,
    },
}

impl Outcome {
    /// The entries whose runs the commit asks for (created, updated, pruned).
    pub fn to_start(&self) -> Vec<String> {
        match self {
            Outcome::Applied {
                created,
                updated,
                pruned,
                ..
            } => created
                .iter()
                .chain(updated)
                .chain(pruned)
                .cloned()
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Why a source could not be read now: worth trying again (the next
/// scheduler run, the sender's retry). Its status is left as it was, or
/// (for a plan stopped part-way) as `applying`, which the next run finishes.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("registry source {source_name:?}: {error}")]
    Registry {
        source_name: String,
        error: RegistryError,
    },
    #[error("registry source {source_name:?}: {error}")]
    Fetch {
        source_name: String,
        error: FetchError,
    },
    /// A fleet's record could not be written (another writer wrote it).
    #[error("registry source {source_name:?}: {error}")]
    Fleets { source_name: String, error: String },
    /// Another reader wrote the source's status meanwhile.
    #[error(
        "registry source {0:?} was written by another reader meanwhile; it is read again on the next run"
    )]
    Raced(String),
}

/// One source being read at one time: what every step of it needs.
struct Sync<'a, R> {
    registry: &'a R,
    notices: &'a Notifier,
    installation: &'a Installation,
    source: &'a RegistrySource,
    now: EpochMillis,
}

impl<R> Sync<'_, R> {
    fn fetch_error(&self, error: FetchError) -> SyncError {
        SyncError::Fetch {
            source_name: self.source.spec.name.clone(),
            error,
        }
    }

    fn registry_error(&self, error: RegistryError) -> SyncError {
        SyncError::Registry {
            source_name: self.source.spec.name.clone(),
            error,
        }
    }
}

/// Reads `source` at `head` (`None`: its ref is resolved first) and applies
/// it (see the module's description).
pub async fn sync_source<R, S>(
    registry: &R,
    fetcher: &S,
    notices: &Notifier,
    installation: &Installation,
    source: &RegistrySource,
    head: Option<&str>,
    now: EpochMillis,
) -> Result<Outcome, SyncError>
where
    R: Specs + RegistrySources + crate::registry::Fleets,
    S: SourceFetcher,
{
    let sync = Sync {
        registry,
        notices,
        installation,
        source,
        now,
    };
    let revision = match head {
        Some(head) => head.to_owned(),
        None => match fetcher
            .resolve(&read::location(&source.spec), &source.spec.reference)
            .await
        {
            Ok(head) => head,
            Err(e) if e.is_transient() => return Err(sync.fetch_error(e)),
            // A ref that is gone, credentials refused: said on the source.
            Err(e) => return sync.fail("", vec![e.to_string()]).await,
        },
    };
    if !source.status.needs(&revision) {
        return Ok(Outcome::Unchanged { revision });
    }
    let read = match read_files(fetcher, source, &revision).await {
        Ok(Ok(read)) => read,
        Ok(Err(problems)) => return sync.fail(&revision, problems).await,
        Err(e) => return Err(sync.fetch_error(e)),
    };
    // Fleets: their targets from the accounts their units held at their
    // last read (a unit not read yet: at the scheduler's next run).
    let recorded = registry
        .fleets()
        .await
        .map_err(|e| sync.registry_error(e))?;
    let units = recorded_units(&recorded, &read);
    let targets = match expanded(&read, &units) {
        Ok(targets) => targets,
        Err(problems) => return sync.fail(&revision, problems).await,
    };
    let refused = check_policy(installation, &targets);
    if !refused.is_empty() {
        return sync.fail(&revision, refused).await;
    }
    sync.apply(&read, &targets, &recorded, revision).await
}

impl<R: Specs + RegistrySources + crate::registry::Fleets> Sync<'_, R> {
    /// Plans the commit's entries (`read`, its fleets' targets in their
    /// place: `targets`) against the registry, holds it or writes it (its
    /// fleets recorded first: their targets follow their records).
    async fn apply(
        &self,
        fleets: &Read,
        read: &Read,
        recorded: &[crate::registry::Fleet],
        revision: String,
    ) -> Result<Outcome, SyncError> {
        let current = self
            .registry
            .list()
            .await
            .map_err(|e| self.registry_error(e))?;
        let writer = Writer::Source {
            name: &self.source.spec.name,
            commit: &revision,
            files: &read.files,
        };
        let home = self.installation.home.as_deref();
        let plan = match plan_by(&read.specs, &current, true, home, writer) {
            Ok(plan) => plan,
            Err(conflicts) => return self.fail(&revision, conflict_lines(read, &conflicts)).await,
        };
        let owned = current
            .iter()
            .filter(|e| writer.owns(e) && e.deletion_requested_at.is_none())
            .count();
        let pruned = names_of(&plan, |a| matches!(a, Action::Prune { .. }));
        let approved = self.source.status.approved_prune.as_deref() == Some(revision.as_str());
        if prune_held(pruned.len(), owned) && !approved {
            return self.hold(&revision, pruned, owned).await;
        }
        self.record_fleets(fleets, recorded, &revision).await?;
        self.write_plan(&plan, &revision).await?;
        let created = names_of(&plan, |a| matches!(a, Action::Create));
        let updated = names_of(&plan, |a| {
            matches!(a, Action::Update { .. } | Action::Rekey { .. })
        });
        let key = |s: &crate::spec::StackSpec| source_key(s.source.url(), s.effective_ref());
        let followed = read
            .specs
            .iter()
            .filter(|s| created.contains(&s.name) || updated.contains(&s.name))
            .map(|s| (s.name.clone(), key(s)))
            .chain(
                current
                    .iter()
                    .filter(|e| pruned.contains(&e.name))
                    .map(|e| (e.name.clone(), key(&e.spec))),
            )
            .collect();
        Ok(Outcome::Applied {
            created,
            updated,
            followed,
            moved: names_of(&plan, |a| matches!(a, Action::Move { .. })),
            pruned,
            unchanged: plan
                .changes
                .iter()
                .filter(|c| matches!(c.action, Action::Unchanged { .. }))
                .count(),
            revision,
        })
    }
}

impl<R: crate::registry::Fleets> Sync<'_, R> {
    /// Records the commit's fleets as this source's, each with the accounts
    /// its units held at its last read (a fleet with a unit not read yet is
    /// due for a read at once), and forgets this source's fleets the commit
    /// no longer has.
    async fn record_fleets(
        &self,
        read: &Read,
        recorded: &[crate::registry::Fleet],
        revision: &str,
    ) -> Result<(), SyncError> {
        let name = &self.source.spec.name;
        let units = recorded_units(recorded, read);
        let mut fleets = Vec::new();
        for (spec, file) in read.specs.iter().zip(&read.files) {
            if spec.targets.is_none() {
                continue;
            }
            let last = recorded
                .iter()
                .find(|f| f.spec.name == spec.name)
                .and_then(|f| f.read.at);
            let owner = crate::registry_source::Owner {
                source: name.clone(),
                file: file.clone(),
                commit: revision.to_owned(),
            };
            fleets.push(crate::triggers::fleets::fleet_record(
                spec,
                &units,
                last.map(|t| t.0),
                Some(owner),
            ));
        }
        let owned =
            |f: &crate::registry::Fleet| f.owner.as_ref().is_some_and(|o| &o.source == name);
        crate::triggers::fleets::record(self.registry, recorded, &fleets, &owned, true)
            .await
            .map_err(|e| SyncError::Fleets {
                source_name: name.clone(),
                error: e,
            })
    }
}

fn names_of(plan: &Plan, which: impl Fn(&Action) -> bool) -> Vec<String> {
    plan.changes
        .iter()
        .filter(|c| which(&c.action))
        .map(|c| c.name.clone())
        .collect()
}

/// Registers the installation's first registry source (its deployment's
/// parameters, [`crate::registry_source::bootstrap_spec`]) unless it is
/// there: a read, and a write only the first time. Returns whether it
/// was added.
pub async fn bootstrap<R: RegistrySources>(
    registry: &R,
    spec: &crate::registry_source::SourceSpec,
) -> Result<bool, RegistryError> {
    if registry.registry_source(&spec.name).await?.is_some() {
        return Ok(false);
    }
    let added = registry.add_registry_source(spec).await?;
    tracing::info!(source = %spec.name, added, "the installation's registry source registered");
    Ok(added)
}

#[cfg(test)]
mod tests;
