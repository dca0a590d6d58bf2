//! `stacksync apply -f FILE`: register the file's entries, update the changed
//! ones, and with `--prune` mark the others for deletion: all of it or none
//! up to one transaction (50 new entries: each with the claim of its stack),
//! batch by batch (with progress, resumable) beyond.

use std::path::Path;

use serde::Serialize;
use stacksync::StackSpec;
use stacksync::clock::now_millis;
use stacksync::ownership::InstallationPolicy;
use stacksync::registry::plan::{
    Action, Change, Plan, PlanConflict, Writer, prune_needs_confirmation,
};
use stacksync::registry::specs::{MAX_TRANSACTION_ITEMS, batches};
use stacksync::registry::targets::{
    Units, departed_needs_confirmation, expand_all, plan_with_fleets, written_as,
};
use stacksync::registry::{Applied, ApplyStopped, Registry, Specs, apply_plan};
use stacksync::triggers::fleets::{read_units, record_fleets};

use super::validate::read_manifest;
use crate::Output;
use crate::connect::Connection;
use crate::error::Result;
use crate::output::{Table, print_structured};

/// Whether `apply` and `sync` prune, and whether a large prune was confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prune {
    /// Entries not in the file are left alone.
    No,
    /// The same, and a fleet's targets whose accounts left its units are
    /// pruned however many (`--yes` without `--prune`).
    NoConfirmed,
    /// They are marked for deletion, unless that is all of them or many
    /// ([`prune_needs_confirmation`]).
    Yes,
    /// They are marked for deletion, however many (`--yes`).
    Confirmed,
}

impl Prune {
    /// From the flags `--prune` and `--yes`.
    pub fn of(prune: bool, yes: bool) -> Self {
        match (prune, yes) {
            (false, false) => Self::No,
            (false, true) => Self::NoConfirmed,
            (true, false) => Self::Yes,
            (true, true) => Self::Confirmed,
        }
    }

    fn enabled(self) -> bool {
        matches!(self, Self::Yes | Self::Confirmed)
    }
}

pub async fn apply(
    aws: &Connection,
    file: &Path,
    prune: Prune,
    dry_run: bool,
    format: Output,
) -> Result {
    apply_file(aws, file, prune, dry_run, format)
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
/// `dry_run`) and prints them. Returns the file's specs, each fleet's
/// targets in its place, for `sync`.
pub async fn apply_file(
    aws: &Connection,
    file: &Path,
    prune: Prune,
    dry_run: bool,
    format: Output,
) -> Result<Vec<StackSpec>> {
    let registry = &aws.registry;
    let desired = read_manifest(file, !dry_run)?;
    let outcome = if dry_run { "" } else { "; nothing was applied" };
    let units = fleet_units(aws, file, &desired, outcome).await?;
    let expanded = expand_all(&desired, &units)
        .map_err(|c| format!("{}{outcome}", conflicts_message(file, &desired, &[c])))?;
    if let Some(policy) = &aws.resources.policy {
        allowed_by(policy, file, &desired, &expanded, dry_run)?;
    }
    let current = registry.list().await.map_err(|e| e.to_string())?;
    let home = registry.region();
    let plan = plan_with_fleets(
        &desired,
        &units,
        &current,
        prune.enabled(),
        home.as_deref(),
        Writer::Cli,
    )
    .map_err(|conflicts| format!("{}{outcome}", conflicts_message(file, &desired, &conflicts)))?;
    // A prune takes only the CLI's own entries: the guard counts those.
    let registered = current
        .iter()
        .filter(|e| e.deletion_requested_at.is_none() && e.owner.is_none())
        .count();
    if !dry_run
        && prune == Prune::Yes
        && let Some(why) = prune_needs_confirmation(&plan, registered)
    {
        return Err(format!("{}: {why}; nothing was applied", file.display()));
    }
    // Without --prune, a fleet's departed targets are pruned all the same:
    // as many as the guard allows, or with --yes.
    if !dry_run
        && prune == Prune::No
        && let Some(why) = departed_needs_confirmation(&plan, &current)
    {
        return Err(format!("{}: {why}; nothing was applied", file.display()));
    }
    if !dry_run {
        write(registry, &plan, file).await?;
        record_fleets(registry, &desired, &units, prune.enabled(), now_millis())
            .await
            .map_err(|e| format!("{}: {e}", file.display()))?;
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
    Ok(expanded)
}

/// The accounts of the file's fleets' organizational units, read through
/// the installation's Organizations role (its output `OrganizationsRoleArn`,
/// else `STACKSYNC_ORGANIZATIONS_ROLE_ARN`, else the caller's credentials).
/// A unit that cannot be read stops the apply: its targets are not guessed.
async fn fleet_units(
    aws: &Connection,
    file: &Path,
    desired: &[StackSpec],
    outcome: &str,
) -> Result<Units> {
    let fleets: Vec<&StackSpec> = desired
        .iter()
        .filter(|s| {
            s.targets
                .as_ref()
                .is_some_and(|t| !t.organizational_units.is_empty())
        })
        .collect();
    if fleets.is_empty() {
        return Ok(Units::new());
    }
    let organizations =
        stacksync::wiring::organizations(&aws.config, aws.resources.organizations_role.as_deref())
            .await;
    read_units(Some(&organizations), &fleets)
        .await
        .map_err(|problems| {
            problems
                .iter()
                .map(|p| format!("{}: {p}", file.display()))
                .collect::<Vec<_>>()
                .join("\n")
                + outcome
        })
}

/// Writes the plan: one transaction while it fits one, else batch by batch
/// with progress on stderr. A stopped apply says what was written, and that
/// applying the same file again finishes it.
async fn write(registry: &Registry, plan: &Plan, file: &Path) -> Result {
    let writes: Vec<&Change> = plan.writes().collect();
    let batches = batches(&writes).len();
    let progress = |a: Applied| {
        if batches > 1 {
            warn_user!("applied {} of {} changes", a.written, a.total);
        }
    };
    match apply_plan(registry, plan, now_millis(), progress).await {
        Ok(_) => Ok(()),
        Err(stopped) => Err(stopped_message(&stopped, file)),
    }
}

fn stopped_message(stopped: &ApplyStopped, file: &Path) -> String {
    let Applied { written, total } = stopped.applied;
    if written == 0 {
        return format!("{}; nothing was applied", stopped.error);
    }
    format!(
        "{}; {written} of {total} changes were applied (in batches of at most \
         {MAX_TRANSACTION_ITEMS} items, in the file's order), the other {} were not: apply {} \
         again to finish (what is applied already shows as unchanged)",
        stopped.error,
        total - written,
        file.display()
    )
}

/// Refuses a file with entries the installation would refuse at their
/// first run (a stack name outside its prefix, a missing or unlisted
/// `roleArn`), one line per entry, as the file's own problems read.
fn allowed_by(
    policy: &InstallationPolicy,
    file: &Path,
    desired: &[StackSpec],
    expanded: &[StackSpec],
    dry_run: bool,
) -> Result {
    let refused: Vec<String> = expanded
        .iter()
        .filter_map(|spec| {
            let why = policy.refuses_spec(spec)?;
            let index = written_as(&spec.name, desired).unwrap_or(0);
            Some(format!(
                "{}: stacks[{index}] ({}): {why}",
                file.display(),
                spec.name
            ))
        })
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    let outcome = if dry_run { "" } else { "; nothing was applied" };
    Err(format!("{}{outcome}", refused.join("\n")))
}

/// One line per conflict, in the form of the file's own problems (file,
/// entry, field), so both kinds read alike.
fn conflicts_message(file: &Path, desired: &[StackSpec], conflicts: &[PlanConflict]) -> String {
    conflicts
        .iter()
        .map(|c| {
            let index = written_as(&c.name, desired).unwrap_or(0);
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

/// What pruning an entry does to its stack, which `destroyOnDelete` decides.
fn prune_detail(stack_name: &str, destroys_stack: bool, dry_run: bool) -> String {
    match (destroys_stack, dry_run) {
        (true, true) => {
            format!(
                "the stack {stack_name} would be deleted (destroyOnDelete), if it is the entry's"
            )
        }
        (true, false) => {
            format!(
                "the stack {stack_name} will be deleted (destroyOnDelete), if it is the entry's"
            )
        }
        (false, true) => format!("the entry would go; the stack {stack_name} would be kept"),
        (false, false) => format!("the entry goes; the stack {stack_name} is kept"),
    }
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
            Action::Rekey { version, from, to } => (
                if dry_run {
                    "would re-index"
                } else {
                    "re-indexed"
                },
                format!("specVersion {version} (source key {from} → {to})"),
            ),
            Action::Move { version, from, to } => (
                if dry_run { "would move" } else { "moved" },
                format!(
                    "specVersion {version} (file {} → {})",
                    from.as_deref().unwrap_or("-"),
                    to.as_deref().unwrap_or("the CLI")
                ),
            ),
            Action::Prune {
                stack_name,
                destroys_stack,
                ..
            } => (
                verb_prune,
                prune_detail(stack_name, *destroys_stack, dry_run),
            ),
        };
        table.row(vec![change.name.clone(), action.to_owned(), detail]);
    }
    put!("{}", table.render());
    let writes = plan.writes().count();
    if dry_run {
        say!("dry run: {writes} change(s) planned, nothing written");
    } else {
        say!("{writes} change(s) applied to {table_name:?}");
    }
}
