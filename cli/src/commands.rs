//! The commands: each reads, decides, writes through the registry, and prints.

use std::path::Path;

use serde::Serialize;
use stacksync::StackSpec;
use stacksync::clock::{age, now_millis};
use stacksync::manifest::{ManifestError, parse_manifest};
use stacksync::registry::plan::{Action, Change, plan_apply};
use stacksync::registry::{Entries, Registry, Specs, StackEntry};
use stacksync::status::Timestamp;

use crate::connect::{Connection, connect};
use crate::deployed::Deployed;
use crate::error::Result;
use crate::local::LocalRunner;
use crate::output::{Table, cell, print_structured};
use crate::{Cli, Command, Output};

pub async fn run(cli: Cli) -> Result {
    let format = cli.output;
    // Checking a file needs no AWS at all.
    if let Command::Validate { file } = &cli.command {
        let specs = read_manifest(file)?;
        return match format {
            Output::Table => {
                println!("{}: {} entries, all valid", file.display(), specs.len());
                Ok(())
            }
            _ => print_structured(format, &specs),
        };
    }
    let Connection {
        config,
        resources,
        registry,
    } = connect(&cli).await?;
    let err = |e: stacksync::registry::RegistryError| e.to_string();
    match cli.command {
        Command::Validate { .. } => Ok(()),
        Command::Init => {
            let created = registry.create_table().await.map_err(err)?;
            let what = if created { "created" } else { "already exists" };
            match format {
                Output::Table => println!("registry table {:?} {what}", registry.table()),
                _ => print_structured(
                    format,
                    &serde_json::json!({"table": registry.table(), "created": created}),
                )?,
            }
            Ok(())
        }
        Command::Apply {
            file,
            prune,
            dry_run,
        } => apply(&registry, &file, prune, dry_run, format)
            .await
            .map(drop),
        Command::List => {
            let entries = registry.list().await.map_err(err)?;
            print_list(&entries, format)
        }
        Command::Get { name } => {
            let entry = registry.get(&name).await.map_err(err)?.ok_or_else(|| {
                format!(
                    "no stack named {name:?} in the registry {:?}",
                    registry.table()
                )
            })?;
            // A single entry reads best as YAML, even in "table" mode.
            print_structured(
                if format == Output::Json {
                    format
                } else {
                    Output::Yaml
                },
                &entry,
            )
        }
        Command::Delete { name } => {
            let entry = registry.get(&name).await.map_err(err)?.ok_or_else(|| {
                format!(
                    "no stack named {name:?} in the registry {:?}",
                    registry.table()
                )
            })?;
            let requested = registry
                .request_deletion(&name, now_millis())
                .await
                .map_err(err)?;
            let fate = if entry.spec.destroy_on_delete {
                format!(
                    "the stack {:?} will be deleted (destroyOnDelete: true)",
                    entry.spec.effective_stack_name()
                )
            } else {
                format!(
                    "the stack {:?} will be left in place (destroyOnDelete: false) and the entry dropped",
                    entry.spec.effective_stack_name()
                )
            };
            report(
                format,
                &name,
                if requested {
                    "deleting"
                } else {
                    "already-deleting"
                },
                &fate,
            )
        }
        Command::Suspend { name } => {
            let changed = registry
                .set_suspended(&name, true, now_millis())
                .await
                .map_err(err)?;
            let detail = if changed {
                "reconciles stop until `stacksync resume`"
            } else {
                "was already suspended"
            };
            report(format, &name, "suspended", detail)
        }
        Command::Resume { name } => {
            let changed = registry
                .set_suspended(&name, false, now_millis())
                .await
                .map_err(err)?;
            let entry = registry.get(&name).await.map_err(err)?;
            if entry.is_some_and(|e| e.spec.suspend) {
                eprintln!(
                    "warning: {name:?} still has `suspend: true` in its spec; change stacks.yaml and apply it to reconcile"
                );
            }
            let detail = if changed {
                "due for reconcile now"
            } else {
                "was not suspended"
            };
            report(format, &name, "resumed", detail)
        }
        Command::Reconcile {
            name,
            local,
            wait,
            timeout,
            speedup,
        } => {
            let ok = if local {
                let runner =
                    LocalRunner::new(&config, registry, &resources.bucket, speedup).await?;
                let ok = runner.reconcile(&name).await?;
                let entries = runner.steps.registry.list().await.map_err(err)?;
                print_status(
                    &entries
                        .into_iter()
                        .filter(|e| e.name == name)
                        .collect::<Vec<_>>(),
                    format,
                )?;
                ok
            } else {
                let deployed = Deployed::new(&config, &resources)?;
                let ok = deployed
                    .reconcile(&registry, &name, wait, timeout.as_std())
                    .await?;
                if wait {
                    let entry = registry.get(&name).await.map_err(err)?;
                    print_status(&entry.into_iter().collect::<Vec<_>>(), format)?;
                }
                ok
            };
            if ok {
                Ok(())
            } else {
                Err(format!("the reconcile of {name:?} failed"))
            }
        }
        Command::Sync {
            file,
            prune,
            local,
            wait,
            timeout,
            speedup,
        } => {
            // Fail before writing anything if there is nothing to run the reconciles.
            let deployed = if local {
                None
            } else {
                Some(Deployed::new(&config, &resources)?)
            };
            let desired = apply(&registry, &file, prune, false, Output::Table).await?;
            // The file's entries, and every entry being deleted (pruned now or before).
            let names: Vec<String> = registry
                .list()
                .await
                .map_err(err)?
                .into_iter()
                .filter(|e| {
                    e.deletion_requested_at.is_some() || desired.iter().any(|s| s.name == e.name)
                })
                .map(|e| e.name)
                .collect();
            let mut failed = Vec::new();
            let registry = match deployed {
                Some(deployed) => {
                    for name in &names {
                        if !deployed
                            .reconcile(&registry, name, wait, timeout.as_std())
                            .await?
                        {
                            failed.push(name.clone());
                        }
                    }
                    if !wait {
                        return Ok(());
                    }
                    registry
                }
                None => {
                    let runner =
                        LocalRunner::new(&config, registry, &resources.bucket, speedup).await?;
                    for name in &names {
                        if !runner.reconcile(name).await? {
                            failed.push(name.clone());
                        }
                    }
                    runner.steps.registry
                }
            };
            println!();
            let entries = registry.list().await.map_err(err)?;
            print_status(&entries, format)?;
            if failed.is_empty() {
                Ok(())
            } else {
                Err(format!("the reconcile failed for {failed:?}"))
            }
        }
        Command::History { name, limit } => {
            if registry.get(&name).await.map_err(err)?.is_none() {
                eprintln!(
                    "note: {name:?} is not in the registry {:?} (any past executions are listed)",
                    registry.table()
                );
            }
            Deployed::new(&config, &resources)?
                .history(&name, limit, format)
                .await
        }
        Command::Status { names } => {
            let mut entries = registry.list().await.map_err(err)?;
            if !names.is_empty() {
                let missing: Vec<&String> = names
                    .iter()
                    .filter(|n| !entries.iter().any(|e| &e.name == *n))
                    .collect();
                if !missing.is_empty() {
                    return Err(format!(
                        "no stack named {missing:?} in the registry {:?}",
                        registry.table()
                    ));
                }
                entries.retain(|e| names.contains(&e.name));
            }
            print_status(&entries, format)
        }
    }
}

fn read_manifest(file: &Path) -> Result<Vec<StackSpec>> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    parse_manifest(&file.display().to_string(), &text).map_err(|e: ManifestError| {
        let n = e.problems.len();
        if n > 1 {
            format!("{n} problems, nothing was applied:\n{e}")
        } else {
            e.to_string()
        }
    })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ApplyReport<'a> {
    file: String,
    dry_run: bool,
    changes: &'a [Change],
}

async fn apply(
    registry: &Registry,
    file: &Path,
    prune: bool,
    dry_run: bool,
    format: Output,
) -> Result<Vec<StackSpec>> {
    let desired = read_manifest(file)?;
    let current = registry.list().await.map_err(|e| e.to_string())?;
    let plan = plan_apply(&desired, &current, prune).map_err(|conflicts| {
        conflicts
            .iter()
            .map(|c| {
                let index = desired.iter().position(|s| s.name == c.name).unwrap_or(0);
                format!(
                    "{}: stacks[{index}] ({}): field {}: {}",
                    file.display(),
                    c.name,
                    c.field,
                    c.message
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    if !dry_run {
        registry
            .apply(&plan, now_millis())
            .await
            .map_err(|e| e.to_string())?;
    }
    if format != Output::Table {
        print_structured(
            format,
            &ApplyReport {
                file: file.display().to_string(),
                dry_run,
                changes: &plan.changes,
            },
        )?;
        return Ok(desired);
    }
    let (verb_create, verb_update, verb_prune) = if dry_run {
        ("would create", "would update", "would prune")
    } else {
        ("created", "updated", "pruned")
    };
    let mut table = Table::new(vec!["NAME", "ACTION", "DETAIL"]);
    for change in &plan.changes {
        let (action, detail) = match &change.action {
            Action::Create => (verb_create, "specVersion 1".to_owned()),
            Action::Update { from, changed } => (
                verb_update,
                format!(
                    "specVersion {from} → {} (changed: {})",
                    from + 1,
                    changed.join(", ")
                ),
            ),
            Action::Unchanged { version } => ("unchanged", format!("specVersion {version}")),
            Action::Prune { .. } => (verb_prune, "marked for deletion".to_owned()),
        };
        table.row(vec![change.name.clone(), action.to_owned(), detail]);
    }
    print!("{}", table.render());
    let writes = plan.writes().count();
    if dry_run {
        println!("dry run: {writes} change(s) planned, nothing written");
    } else {
        println!("{writes} change(s) applied to {:?}", registry.table());
    }
    Ok(desired)
}

fn report(format: Output, name: &str, action: &str, detail: &str) -> Result {
    match format {
        Output::Table => {
            println!("{name}: {action}: {detail}");
            Ok(())
        }
        _ => print_structured(
            format,
            &serde_json::json!({"name": name, "action": action, "detail": detail}),
        ),
    }
}

fn print_list(entries: &[StackEntry], format: Output) -> Result {
    if format != Output::Table {
        return print_structured(format, &entries);
    }
    let mut table = Table::new(vec![
        "NAME", "STACK", "REGION", "SOURCE", "REF", "PATH", "VERSION", "FLAGS",
    ]);
    for e in entries {
        let mut flags = Vec::new();
        if e.is_suspended() {
            flags.push("suspended");
        }
        if e.deletion_requested_at.is_some() {
            flags.push("deleting");
        }
        if e.spec.destroy_on_delete {
            flags.push("destroy-on-delete");
        }
        table.row(vec![
            e.name.clone(),
            e.spec.effective_stack_name().to_owned(),
            cell(e.spec.region.as_deref(), 20),
            cell(Some(e.spec.source.url()), 50),
            cell(e.spec.effective_ref(), 20),
            cell(Some(&e.spec.source.path), 40),
            e.spec_version.to_string(),
            cell(Some(&flags.join(",")), 40),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}

/// One line of `stacksync status`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusRow<'a> {
    name: &'a str,
    phase: String,
    stack_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    stack_status: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_applied_revision: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_attempted_revision: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_reconcile_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_reconcile_at: Option<Timestamp>,
    spec_version: u64,
    observed_spec_version: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
}

fn print_status(entries: &[StackEntry], format: Output) -> Result {
    let rows: Vec<StatusRow> = entries
        .iter()
        .map(|e| StatusRow {
            name: &e.name,
            phase: e.display_phase().to_string(),
            stack_name: e.spec.effective_stack_name(),
            stack_status: e.status.stack_status.as_deref(),
            last_applied_revision: e.status.last_applied_revision.as_deref(),
            last_attempted_revision: e.status.last_attempted_revision.as_deref(),
            last_reconcile_at: e.status.last_reconcile_at,
            next_reconcile_at: e.status.next_reconcile_at,
            spec_version: e.spec_version,
            observed_spec_version: e.status.observed_spec_version,
            message: e.status.message.as_deref(),
        })
        .collect();
    if format != Output::Table {
        return print_structured(format, &rows);
    }
    if rows.is_empty() {
        println!("no stacks registered: add some with `stacksync apply -f stacks.yaml`");
        return Ok(());
    }
    let now = now_millis();
    let mut table = Table::new(vec![
        "NAME",
        "PHASE",
        "STACK STATUS",
        "REVISION",
        "LAST RECONCILE",
        "MESSAGE",
    ]);
    for row in &rows {
        let revision = row
            .last_applied_revision
            .map(|r| r.chars().take(12).collect::<String>());
        table.row(vec![
            row.name.to_owned(),
            row.phase.clone(),
            cell(row.stack_status, 40),
            cell(revision.as_deref(), 12),
            row.last_reconcile_at
                .map(|t| format!("{} ago", age(now, t.0)))
                .unwrap_or_else(|| "never".into()),
            cell(row.message, 80),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}
