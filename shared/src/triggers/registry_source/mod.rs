//! The applier of registry sources: a source's stacks files at one commit
//! read, validated and planned as a whole, then written plan-first.
//!
//! 1. The commit is read only when [`SourceStatus::needs`] it: a source
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

use std::collections::BTreeMap;
use std::future::Future;

use serde::Serialize;

use crate::clock::EpochMillis;
use crate::manifest::parse_manifest_in;
use crate::notice::{Notice, NoticeKind, NoticeSource};
use crate::ownership::InstallationPolicy;
use crate::ports::source::FetchError;
use crate::ports::{Notifier, SourceFetcher};
use crate::registry::plan::{Action, Plan, PlanConflict, Writer, plan_by};
use crate::registry::{RegistryError, RegistrySources, Specs, apply_plan};
use crate::registry_source::{
    Applying, Failure, Hold, Pattern, RegistrySource, RelativeBase, SourceState, SourceStatus,
    prune_held,
};
use crate::spec::StackSpec;
use crate::status::Phase;

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
    /// Another reader wrote the source's status meanwhile.
    #[error(
        "registry source {0:?} was written by another reader meanwhile; it is read again on the next run"
    )]
    Raced(String),
}

/// The stacks files of one commit, read: every spec with its file, or
/// every problem.
struct Read {
    specs: Vec<StackSpec>,
    files: Vec<String>,
    /// Each spec's index in its file, for messages.
    indexes: Vec<usize>,
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
    R: Specs + RegistrySources,
    S: SourceFetcher,
{
    let name = source.spec.name.clone();
    let fetch_error = |error| SyncError::Fetch {
        source_name: name.clone(),
        error,
    };
    let location = source.spec.location();
    let revision = match head {
        Some(head) => head.to_owned(),
        None => match fetcher.resolve(&location, &source.spec.reference).await {
            Ok(head) => head,
            Err(e) if e.is_transient() => return Err(fetch_error(e)),
            Err(e) => {
                // A ref that is gone, credentials refused: said on the source.
                return fail(
                    registry,
                    notices,
                    installation,
                    source,
                    "",
                    vec![e.to_string()],
                    now,
                )
                .await;
            }
        },
    };
    if !source.status.needs(&revision) {
        return Ok(Outcome::Unchanged { revision });
    }
    let read = match read_files(fetcher, source, &revision).await {
        Ok(Ok(read)) => read,
        Ok(Err(problems)) => {
            return fail(
                registry,
                notices,
                installation,
                source,
                &revision,
                problems,
                now,
            )
            .await;
        }
        Err(e) => return Err(fetch_error(e)),
    };
    let refused = check_policy(installation, &read.specs, &read.files);
    if !refused.is_empty() {
        return fail(
            registry,
            notices,
            installation,
            source,
            &revision,
            refused,
            now,
        )
        .await;
    }
    let registry_error = |error| SyncError::Registry {
        source_name: name.clone(),
        error,
    };
    let current = registry.list().await.map_err(registry_error)?;
    let writer = Writer::Source {
        name: &name,
        commit: &revision,
        files: &read.files,
    };
    let plan = match plan_by(
        &read.specs,
        &current,
        true,
        installation.home.as_deref(),
        writer,
    ) {
        Ok(plan) => plan,
        Err(conflicts) => {
            let problems = conflict_lines(&read, &conflicts);
            return fail(
                registry,
                notices,
                installation,
                source,
                &revision,
                problems,
                now,
            )
            .await;
        }
    };
    let owned = current
        .iter()
        .filter(|e| writer.owns(e) && e.deletion_requested_at.is_none())
        .count();
    let pruned = names_of(&plan, |a| matches!(a, Action::Prune { .. }));
    if prune_held(pruned.len(), owned) && source.status.approved_prune.as_deref() != Some(&revision)
    {
        return hold(
            registry,
            notices,
            installation,
            source,
            &revision,
            pruned,
            owned,
        )
        .await;
    }
    write_plan(registry, source, &plan, &revision, now).await?;
    Ok(Outcome::Applied {
        revision,
        created: names_of(&plan, |a| matches!(a, Action::Create)),
        updated: names_of(&plan, |a| {
            matches!(a, Action::Update { .. } | Action::Rekey { .. })
        }),
        moved: names_of(&plan, |a| matches!(a, Action::Move { .. })),
        pruned,
        unchanged: plan
            .changes
            .iter()
            .filter(|c| matches!(c.action, Action::Unchanged { .. }))
            .count(),
    })
}

fn names_of(plan: &Plan, which: impl Fn(&Action) -> bool) -> Vec<String> {
    plan.changes
        .iter()
        .filter(|c| which(&c.action))
        .map(|c| c.name.clone())
        .collect()
}

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
pub trait AppliesPushes: Send + Sync + std::fmt::Debug {
    fn apply_pushed<'a>(
        &'a self,
        moved: &'a crate::triggers::RefMoved,
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
    R: Specs + RegistrySources,
    S: SourceFetcher,
{
    async fn apply(
        &self,
        moved: &crate::triggers::RefMoved,
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
                Some(moved.commit.as_str())
            } else if short.contains(&key) {
                None
            } else {
                continue;
            };
            let outcome = sync_source(
                &self.registry,
                &self.sources,
                &self.notices,
                &self.installation,
                &source,
                head,
                now,
            )
            .await?;
            tracing::info!(source = %source.spec.name, ?outcome, "registry source read for a push");
            for name in outcome.to_start() {
                let key = match self.registry.get(&name).await {
                    Ok(Some(entry)) => Some(crate::source::source_key(
                        entry.spec.source.url(),
                        entry.spec.effective_ref(),
                    )),
                    _ => None,
                };
                let (pinned, naming) = match key {
                    Some(k) if named.contains(&k) => (true, moved.commit.clone()),
                    Some(k) if short.contains(&k) => {
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
    R: Specs + RegistrySources + std::fmt::Debug,
    S: SourceFetcher + std::fmt::Debug,
{
    fn apply_pushed<'a>(
        &'a self,
        moved: &'a crate::triggers::RefMoved,
        now: EpochMillis,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<ToStart>, SyncError>> + Send + 'a>> {
        Box::pin(self.apply(moved, now))
    }
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

/// Records the plan, writes it batch by batch, records the commit applied.
async fn write_plan<R: Specs + RegistrySources>(
    registry: &R,
    source: &RegistrySource,
    plan: &Plan,
    revision: &str,
    now: EpochMillis,
) -> Result<(), SyncError> {
    let name = &source.spec.name;
    let registry_error = |error| SyncError::Registry {
        source_name: name.clone(),
        error,
    };
    let mut version = source.version;
    let writes = plan.writes().count();
    let mut status = source.status.clone();
    if writes > 0 {
        status.applying = Some(Applying {
            commit: revision.to_owned(),
            changes: writes,
            started_at: now,
        });
        write_status(registry, name, version, &status).await?;
        version += 1;
        apply_plan(registry, plan, now, |applied| {
            tracing::info!(source = %name, written = applied.written, total = applied.total, "registry source: batch written");
        })
        .await
        .map_err(|stopped| registry_error(stopped.error))?;
    }
    let entries = plan
        .changes
        .iter()
        .filter(|c| !matches!(c.action, Action::Prune { .. }))
        .count();
    status = SourceStatus {
        state: SourceState::Ready,
        applied_revision: Some(revision.to_owned()),
        applied_at: Some(now),
        entries,
        applying: None,
        failure: None,
        hold: None,
        approved_prune: status.approved_prune.filter(|c| c != revision),
    };
    write_status(registry, name, version, &status).await
}

async fn write_status<R: RegistrySources>(
    registry: &R,
    name: &str,
    version: u64,
    status: &SourceStatus,
) -> Result<(), SyncError> {
    match registry.write_source_status(name, version, status).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(SyncError::Raced(name.to_owned())),
        Err(error) => Err(SyncError::Registry {
            source_name: name.to_owned(),
            error,
        }),
    }
}

/// Fetches the commit's stacks files and reads them all: the specs, or
/// every problem (`Ok(Err)`); a source that could not be reached is `Err`.
async fn read_files<S: SourceFetcher>(
    fetcher: &S,
    source: &RegistrySource,
    revision: &str,
) -> Result<Result<Read, Vec<String>>, FetchError> {
    let spec = &source.spec;
    let pattern = match Pattern::parse(&spec.path) {
        Ok(p) => p,
        Err(e) => return Ok(Err(vec![format!("path: {e}")])),
    };
    let files = match fetcher
        .fetch(&spec.location(), revision, &pattern.wanted(&spec.signed_by))
        .await
    {
        Ok(files) => files,
        Err(e) if e.is_transient() => return Err(e),
        Err(e) => return Ok(Err(vec![e.to_string()])),
    };
    let mut read = Read {
        specs: Vec::new(),
        files: Vec::new(),
        indexes: Vec::new(),
    };
    let mut problems = Vec::new();
    let mut first_file: BTreeMap<String, String> = BTreeMap::new();
    let stacks_files: Vec<&(String, Vec<u8>)> = files
        .iter()
        .filter(|(path, _)| pattern.matches(path))
        .collect();
    if stacks_files.is_empty() {
        problems.push(format!(
            "{}: no stacks file matches it at this commit",
            pattern.as_str()
        ));
    }
    for (path, bytes) in stacks_files {
        let Ok(text) = std::str::from_utf8(bytes) else {
            problems.push(format!("{path}: the file is not UTF-8 text"));
            continue;
        };
        let base = RelativeBase::of(spec, path);
        match parse_manifest_in(path, text, Some(&base)) {
            Ok(specs) => {
                for (index, stack) in specs.into_iter().enumerate() {
                    if let Some(other) = first_file.insert(stack.name.clone(), path.clone()) {
                        problems.push(format!(
                            "{path}: stacks[{index}] ({}): field name: also an entry of {other}: \
                             names must be unique across a source's files",
                            stack.name
                        ));
                    }
                    read.specs.push(stack);
                    read.files.push(path.clone());
                    read.indexes.push(index);
                }
            }
            Err(e) => problems.extend(e.to_string().lines().map(str::to_owned)),
        }
    }
    Ok(if problems.is_empty() {
        Ok(read)
    } else {
        Err(problems)
    })
}

/// A plan's conflicts, in the form of the files' own problems.
fn conflict_lines(read: &Read, conflicts: &[PlanConflict]) -> Vec<String> {
    conflicts
        .iter()
        .map(|c| match read.specs.iter().position(|s| s.name == c.name) {
            Some(i) => format!(
                "{}: stacks[{}] ({}): field {}: {}",
                read.files[i], read.indexes[i], c.name, c.field, c.message
            ),
            None => format!("{}: field {}: {}", c.name, c.field, c.message),
        })
        .collect()
}

/// What the installation refuses of the specs (a stack name outside its
/// prefix, a role it does not list), one line per entry.
fn check_policy(installation: &Installation, specs: &[StackSpec], files: &[String]) -> Vec<String> {
    specs
        .iter()
        .zip(files)
        .filter_map(|(spec, file)| {
            let why = installation.policy.refuses_spec(spec)?;
            Some(format!("{file}: {}: {why}", spec.name))
        })
        .collect()
}

/// Records the commit failed (once) and tells the bus.
async fn fail<R: RegistrySources>(
    registry: &R,
    notices: &Notifier,
    installation: &Installation,
    source: &RegistrySource,
    revision: &str,
    problems: Vec<String>,
    now: EpochMillis,
) -> Result<Outcome, SyncError> {
    let outcome = Outcome::Failed {
        revision: revision.to_owned(),
        problems: problems.clone(),
    };
    let known = source
        .status
        .failure
        .as_ref()
        .is_some_and(|f| f.commit == revision && f.problems == problems);
    if known {
        return Ok(outcome);
    }
    tracing::warn!(source = %source.spec.name, commit = %revision, ?problems, "registry source: commit not applied");
    let status = SourceStatus {
        state: SourceState::Failed,
        failure: Some(Failure {
            commit: revision.to_owned(),
            problems: problems.clone(),
            at: now,
        }),
        hold: None,
        ..source.status.clone()
    };
    write_status(registry, &source.spec.name, source.version, &status).await?;
    tell(notices, installation, source, revision, "Failed", problems).await;
    Ok(outcome)
}

/// Records the commit held by the prune guard and tells the bus.
async fn hold<R: RegistrySources>(
    registry: &R,
    notices: &Notifier,
    installation: &Installation,
    source: &RegistrySource,
    revision: &str,
    entries: Vec<String>,
    of: usize,
) -> Result<Outcome, SyncError> {
    let status = SourceStatus {
        state: SourceState::Held,
        hold: Some(Hold {
            commit: revision.to_owned(),
            entries: entries.clone(),
            of,
        }),
        failure: None,
        ..source.status.clone()
    };
    write_status(registry, &source.spec.name, source.version, &status).await?;
    let problem = status.summary();
    tell(
        notices,
        installation,
        source,
        revision,
        SourceState::Held.as_str(),
        vec![problem],
    )
    .await;
    Ok(Outcome::Held {
        revision: revision.to_owned(),
        entries,
    })
}

async fn tell(
    notices: &Notifier,
    installation: &Installation,
    source: &RegistrySource,
    revision: &str,
    state: &str,
    problems: Vec<String>,
) {
    let notice = Notice {
        kind: Some(NoticeKind::RegistrySourceFailed),
        installation: installation.name.clone(),
        phase: Phase::Failed,
        revision: Some(revision.to_owned()).filter(|r| !r.is_empty()),
        message: problems.first().cloned(),
        registry_source: Some(NoticeSource {
            name: source.spec.name.clone(),
            commit: revision.to_owned(),
            state: state.to_owned(),
            problems,
        }),
        ..Notice::default()
    };
    notices.send(&notice).await;
}

#[cfg(test)]
mod tests;
