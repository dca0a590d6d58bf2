//! `stacksync apply -f FILE`: register the file's entries, update the changed
//! ones, and with `--prune` mark the others for deletion; all of it or none.

use std::path::Path;

use serde::Serialize;
use stacksync::StackSpec;
use stacksync::clock::now_millis;
use stacksync::registry::plan::{Action, Change, Plan, PlanConflict, plan_apply};
use stacksync::registry::{Registry, Specs};

use super::validate::read_manifest;
use crate::Output;
use crate::error::Result;
use crate::output::{Table, print_structured};

pub async fn apply(
    registry: &Registry,
    file: &Path,
    prune: bool,
    dry_run: bool,
    format: Output,
) -> Result {
    apply_file(registry, file, prune, dry_run, format)
        .await
        .map(drop)
}

/// What `-o json` and `-o yaml` print.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ApplyReport<'a> {
    file: String,
    dry_run: bool,
    changes: &'a [Change],
}

/// Plans the changes `file` makes to the registry, writes them (unless
/// `dry_run`) and prints them. Returns the file's specs, for `sync`.
pub async fn apply_file(
    registry: &Registry,
    file: &Path,
    prune: bool,
    dry_run: bool,
    format: Output,
) -> Result<Vec<StackSpec>> {
    let desired = read_manifest(file)?;
    let current = registry.list().await.map_err(|e| e.to_string())?;
    let plan = plan_apply(&desired, &current, prune)
        .map_err(|conflicts| conflicts_message(file, &desired, &conflicts))?;
    if !dry_run {
        registry
            .apply(&plan, now_millis())
            .await
            .map_err(|e| e.to_string())?;
    }
    if format == Output::Table {
        print_plan(&plan, dry_run, registry.table());
    } else {
        print_structured(
            format,
            &ApplyReport {
                file: file.display().to_string(),
                dry_run,
                changes: &plan.changes,
            },
        )?;
    }
    Ok(desired)
}

/// One line per conflict, in the form of the file's own problems (file,
/// entry, field), so both kinds read alike.
fn conflicts_message(file: &Path, desired: &[StackSpec], conflicts: &[PlanConflict]) -> String {
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
}

fn print_plan(plan: &Plan, dry_run: bool, table_name: &str) {
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
        println!("{writes} change(s) applied to {table_name:?}");
    }
}
