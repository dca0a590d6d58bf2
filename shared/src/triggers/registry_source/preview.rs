//! A registry source's stacks files at a pull request's head, planned as
//! the applier plans them and written nowhere: what the pull request's
//! comment says of the entries it adds, changes, moves and prunes, and the
//! specs its previews are made of.

use super::Installation;
use super::read::{check_policy, conflict_lines, expanded, read_files, recorded_units};
use crate::ports::SourceFetcher;
use crate::pull_request::{PullRequest, StacksFiles};
use crate::registry::plan::{Action, Writer, plan_by};
use crate::registry::{RegistrySources, Specs};
use crate::registry_source::{RegistrySource, prune_held};

/// What the pull request's head (`head`, a full commit id) does to each
/// registry source that follows its base repository and branch; an error
/// when the registry or a source cannot be reached (worth another try).
pub async fn stacks_files_at<R, S>(
    registry: &R,
    fetcher: &S,
    installation: &Installation,
    pr: &PullRequest,
    head: &str,
) -> Result<Vec<StacksFiles>, String>
where
    R: Specs + RegistrySources + crate::registry::Fleets,
    S: SourceFetcher,
{
    let keys = pr.base_keys();
    let sources: Vec<RegistrySource> = registry
        .registry_sources()
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|s| keys.contains(&s.spec.key()))
        .collect();
    let mut out = Vec::new();
    for source in &sources {
        out.push(plan_at(registry, fetcher, installation, source, head).await?);
    }
    Ok(out)
}

/// `source` read at `head` and planned against the registry.
async fn plan_at<R, S>(
    registry: &R,
    fetcher: &S,
    installation: &Installation,
    source: &RegistrySource,
    head: &str,
) -> Result<StacksFiles, String>
where
    R: Specs + RegistrySources + crate::registry::Fleets,
    S: SourceFetcher,
{
    let mut files = StacksFiles {
        source: source.spec.name.clone(),
        ..StacksFiles::default()
    };
    let read = match read_files(fetcher, source, head).await {
        Ok(Ok(read)) => read,
        Ok(Err(problems)) => return Ok(StacksFiles { problems, ..files }),
        Err(e) => return Err(format!("registry source {}: {e}", source.spec.name)),
    };
    // A fleet's targets as applying the commit would make them.
    let recorded = registry.fleets().await.map_err(|e| e.to_string())?;
    let units = recorded_units(&recorded, &read);
    let read = match expanded(&read, &units) {
        Ok(read) => read,
        Err(problems) => return Ok(StacksFiles { problems, ..files }),
    };
    let refused = check_policy(installation, &read);
    if !refused.is_empty() {
        return Ok(StacksFiles {
            problems: refused,
            ..files
        });
    }
    let current = registry.list().await.map_err(|e| e.to_string())?;
    let writer = Writer::Source {
        name: &source.spec.name,
        commit: head,
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
            return Ok(StacksFiles {
                problems: conflict_lines(&read, &conflicts),
                ..files
            });
        }
    };
    let spec_of = |name: &str| read.specs.iter().find(|s| s.name == name).cloned();
    for change in &plan.changes {
        match &change.action {
            Action::Create => files.created.extend(spec_of(&change.name)),
            Action::Update { .. } | Action::Rekey { .. } => {
                files.updated.extend(spec_of(&change.name));
            }
            Action::Move { .. } => files.moved.push(change.name.clone()),
            Action::Prune { .. } => files.pruned.push(change.name.clone()),
            _ => {}
        }
    }
    let owned = current
        .iter()
        .filter(|e| writer.owns(e) && e.deletion_requested_at.is_none())
        .count();
    files.held = prune_held(files.pruned.len(), owned);
    Ok(files)
}
