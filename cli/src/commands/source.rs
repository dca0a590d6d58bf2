//! `stacksync source …`: the registry sources an installation follows
//! (stacks files in Git or S3): `add`, `list`, `get`, `remove`, `sync` and
//! `approve-prune`.

use serde::Serialize;
use stacksync::clock::now_millis;
use stacksync::ports::Notifier;
use stacksync::registry::plan::{Action, Change, Plan};
use stacksync::registry::{Registry, RegistrySources, Specs, StackEntry, apply_plan};
use stacksync::registry_source::{RegistrySource, SourceSpec, short};
use stacksync::triggers::registry_source::{Installation, Outcome, sync_source};

use crate::Output;
use crate::connect::Connection;
use crate::error::Result;
use crate::output::{Table, cell, print_structured};

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The source `name`, or an error that says how to find the names.
async fn registered(registry: &Registry, name: &str) -> Result<RegistrySource> {
    registry
        .registry_source(name)
        .await
        .map_err(err)?
        .ok_or_else(|| {
            format!(
                "no registry source named {name:?} in {:?} (`stacksync source list` shows them)",
                registry.table()
            )
        })
}

/// The entries `name` owns, by name.
async fn owned_by(registry: &Registry, name: &str) -> Result<Vec<StackEntry>> {
    let all = registry.list().await.map_err(err)?;
    Ok(all
        .into_iter()
        .filter(|e| e.owner.as_ref().is_some_and(|o| o.source == name))
        .collect())
}

pub async fn add(aws: &Connection, spec: SourceSpec, format: Output) -> Result {
    if let Some(problems) = spec.problems() {
        return Err(format!(
            "registry source {:?}: {problems}; nothing was added",
            spec.name
        ));
    }
    if !aws.registry.add_registry_source(&spec).await.map_err(err)? {
        return Err(format!(
            "a registry source named {:?} exists already (`stacksync source get {}`); nothing \
             was added",
            spec.name, spec.name
        ));
    }
    let added = registered(&aws.registry, &spec.name).await?;
    if format != Output::Table {
        return print_structured(format, &added);
    }
    say!(
        "registry source {:?} added: {} at {} ({}); it is read on the next push or scheduler run, \
         or now with `stacksync source sync {}`",
        spec.name,
        spec.url,
        if spec.reference.is_empty() {
            "latest"
        } else {
            &spec.reference
        },
        spec.path,
        spec.name
    );
    Ok(())
}

pub async fn list(registry: &Registry, format: Output) -> Result {
    let sources = registry.registry_sources().await.map_err(err)?;
    if format != Output::Table {
        return print_structured(format, &sources);
    }
    print_sources(&sources);
    Ok(())
}

/// The registry sources' table (`source list`, and a section of `status`).
pub fn print_sources(sources: &[RegistrySource]) {
    if sources.is_empty() {
        say!(
            "no registry sources: add one with `stacksync source add NAME --git URL --ref main --path stacks.yaml`"
        );
        return;
    }
    let mut table = Table::new(vec![
        "SOURCE", "URL", "REF", "PATH", "REVISION", "ENTRIES", "STATE",
    ]);
    for s in sources {
        table.row(vec![
            s.spec.name.clone(),
            cell(Some(&s.spec.url), 50),
            cell(Some(&s.spec.reference), 20),
            cell(Some(&s.spec.path), 30),
            s.status
                .applied_revision
                .as_deref()
                .map(short)
                .unwrap_or("-")
                .to_owned(),
            s.status.entries.to_string(),
            cell(Some(&s.status.summary()), 120),
        ]);
    }
    put!("{}", table.render());
}

/// What `source get` shows.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SourceReport<'a> {
    #[serde(flatten)]
    source: &'a RegistrySource,
    /// Its entries: name, file, commit.
    owned: Vec<OwnedEntry<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OwnedEntry<'a> {
    name: &'a str,
    file: &'a str,
    commit: &'a str,
    phase: String,
}

pub async fn get(registry: &Registry, name: &str, format: Output) -> Result {
    let source = registered(registry, name).await?;
    let entries = owned_by(registry, name).await?;
    let owned = entries
        .iter()
        .filter_map(|e| {
            let o = e.owner.as_ref()?;
            Some(OwnedEntry {
                name: &e.name,
                file: &o.file,
                commit: &o.commit,
                phase: e.display_phase().to_string(),
            })
        })
        .collect();
    let report = SourceReport {
        source: &source,
        owned,
    };
    let format = if format == Output::Json {
        format
    } else {
        Output::Yaml
    };
    print_structured(format, &report)
}

/// `source remove`: the entries pruned (under the guard: `--yes`) or let
/// go to the CLI (`--keep-entries`), then the source forgotten. Works on
/// the entries a source left behind too, once its item is gone.
pub async fn remove(
    registry: &Registry,
    name: &str,
    keep_entries: bool,
    yes: bool,
    format: Output,
) -> Result {
    let source = registry.registry_source(name).await.map_err(err)?;
    let entries: Vec<StackEntry> = owned_by(registry, name)
        .await?
        .into_iter()
        .filter(|e| e.deletion_requested_at.is_none())
        .collect();
    if source.is_none() && entries.is_empty() {
        return Err(format!(
            "no registry source named {name:?}, and no entry it owns (`stacksync source list`)"
        ));
    }
    if !keep_entries && !yes && !entries.is_empty() {
        let destroyed = entries.iter().filter(|e| e.spec.destroy_on_delete).count();
        return Err(format!(
            "removing {name:?} would prune every entry it owns ({}), {destroyed} of them with \
             destroyOnDelete (their stacks would be deleted): run again with --yes if that is \
             what you mean, or with --keep-entries to keep them (the CLI then owns them); \
             nothing was changed",
            entries.len()
        ));
    }
    // The source first: no reader re-creates what is pruned below.
    let removed = registry.remove_registry_source(name).await.map_err(err)?;
    let plan = Plan {
        changes: entries
            .iter()
            .map(|e| release_or_prune(e, keep_entries))
            .collect(),
    };
    apply_plan(registry, &plan, now_millis(), |_| {})
        .await
        .map_err(|stopped| {
            format!(
                "{}; {} of {} entries were changed: run `stacksync source remove {name}` again \
                 to finish",
                stopped.error, stopped.applied.written, stopped.applied.total
            )
        })?;
    let what = if keep_entries {
        "kept (owned by the CLI now)"
    } else {
        "pruned"
    };
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    match format {
        Output::Table => say!(
            "registry source {name:?} {}; its {} entries {what}{}",
            if removed {
                "removed"
            } else {
                "was gone already"
            },
            names.len(),
            if names.is_empty() {
                String::new()
            } else {
                format!(": {}", names.join(", "))
            }
        ),
        _ => print_structured(
            format,
            &serde_json::json!({"source": name, "removed": removed, "entries": names, "kept": keep_entries}),
        )?,
    }
    Ok(())
}

fn release_or_prune(entry: &StackEntry, keep: bool) -> Change {
    let action = if keep {
        Action::Move {
            version: entry.spec_version,
            from: entry.owner.as_ref().map(|o| o.file.clone()),
            to: None,
        }
    } else {
        Action::Prune {
            version: entry.spec_version,
            stack_name: entry.spec.effective_stack_name().to_owned(),
            destroys_stack: entry.spec.destroy_on_delete,
        }
    };
    Change {
        name: entry.name.clone(),
        action,
        spec: None,
        previous: None,
        waiting_for: Vec::new(),
        owner: None,
    }
}

/// `source sync`: reads the source now, as a push would; returns what to
/// reconcile (the entries it created, changed or pruned).
pub async fn sync(aws: &Connection, name: &str, format: Output) -> Result<Vec<String>> {
    let source = registered(&aws.registry, name).await?;
    let sources = stacksync::wiring::sdk_sources(
        &aws.config,
        aws.config.endpoint_url().is_some(),
        &std::env::temp_dir().join("stacksync"),
    );
    let installation = Installation {
        name: aws.registry.table().to_owned(),
        home: aws.registry.region(),
        policy: aws.resources.policy.clone().unwrap_or_default(),
    };
    let outcome = sync_source(
        &aws.registry,
        &sources,
        &Notifier::none(),
        &installation,
        &source,
        None,
        now_millis(),
    )
    .await
    .map_err(err)?;
    if format != Output::Table {
        print_structured(format, &outcome)?;
    } else {
        print_outcome(name, &outcome);
    }
    match &outcome {
        Outcome::Failed { revision, .. } => Err(format!(
            "registry source {name:?}: commit {} not applied; nothing of it was written",
            short(revision)
        )),
        Outcome::Held { revision, .. } => Err(format!(
            "registry source {name:?}: commit {} held by the prune guard; nothing of it was \
             written (`stacksync source approve-prune {name} --commit {revision}` lets it go on)",
            short(revision)
        )),
        _ => Ok(outcome.to_start()),
    }
}

fn print_outcome(name: &str, outcome: &Outcome) {
    match outcome {
        Outcome::Unchanged { revision } => {
            say!(
                "registry source {name:?}: {} is applied already; nothing to do",
                short(revision)
            );
        }
        Outcome::Applied {
            revision,
            created,
            updated,
            moved,
            pruned,
            unchanged,
            ..
        } => {
            say!("registry source {name:?}: {} applied", short(revision));
            for (what, names) in [
                ("created", created),
                ("updated", updated),
                ("moved", moved),
                ("pruned", pruned),
            ] {
                if !names.is_empty() {
                    say!("  {what}: {}", names.join(", "));
                }
            }
            say!("  unchanged: {unchanged}");
        }
        Outcome::Held { revision, entries } => {
            warn_user!(
                "registry source {name:?}: {} held (PruneGuard): it would prune {}",
                short(revision),
                entries.join(", ")
            );
        }
        Outcome::Failed { revision, problems } => {
            warn_user!("registry source {name:?}: {} failed:", short(revision));
            for p in problems {
                warn_user!("  {p}");
            }
        }
    }
}

pub async fn approve_prune(
    registry: &Registry,
    name: &str,
    commit: &str,
    format: Output,
) -> Result {
    let source = registered(registry, name).await?;
    let status = source.status.approved(commit).map_err(|why| {
        format!("registry source {name:?}: {why} (`stacksync source get {name}` names the entries it prunes)")
    })?;
    if !registry
        .write_source_status(name, source.version, &status)
        .await
        .map_err(err)?
    {
        return Err(format!(
            "registry source {name:?} was written meanwhile: look again (`stacksync source get {name}`)"
        ));
    }
    match format {
        Output::Table => say!(
            "commit {} of {name:?} approved to prune {}: the next read applies it (a push, the \
             scheduler, or `stacksync source sync {name}`)",
            short(commit),
            source
                .status
                .hold
                .map(|h| h.entries.join(", "))
                .unwrap_or_default()
        ),
        _ => print_structured(
            format,
            &serde_json::json!({"source": name, "approved": commit}),
        )?,
    }
    Ok(())
}
