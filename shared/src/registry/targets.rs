//! A plan over a file with fleets: each fleet (`targets:`) expanded into
//! its targets' entries ([`crate::fleet::expand`]), planned like any entry,
//! and the targets a fleet no longer has pruned with it (without
//! `--prune`: the fleet is in the file, its targets are what it says).

use std::collections::{BTreeMap, BTreeSet};

use super::StackEntry;
use super::plan::{
    Action, Change, Plan, PlanConflict, Writer, plan_by, prune_needs_confirmation, prune_of,
};
use crate::fleet::expand;
use crate::spec::StackSpec;

/// Each unit's accounts, as read for the fleets of a plan.
pub type Units = BTreeMap<String, Vec<String>>;

/// The file's specs with each fleet's targets in its place, in order.
pub fn expand_all(desired: &[StackSpec], units: &Units) -> Result<Vec<StackSpec>, PlanConflict> {
    let mut out = Vec::with_capacity(desired.len());
    for spec in desired {
        if spec.targets.is_none() {
            out.push(spec.clone());
            continue;
        }
        out.extend(expand(spec, units).map_err(|e| PlanConflict {
            name: spec.name.clone(),
            field: "targets",
            message: e.to_string(),
        })?);
    }
    Ok(out)
}

/// [`plan_by`] over `desired` with its fleets expanded (`units`: what their
/// organizational units hold). Without `prune`, a fleet's entries for
/// targets it no longer has are pruned all the same (by `destroyOnDelete`,
/// like any entry), and only those.
pub fn plan_with_fleets(
    desired: &[StackSpec],
    units: &Units,
    current: &[StackEntry],
    prune: bool,
    home: Option<&str>,
    writer: Writer<'_>,
) -> Result<Plan, Vec<PlanConflict>> {
    let expanded = expand_all(desired, units).map_err(|c| vec![c])?;
    let mut plan = plan_by(&expanded, current, prune, home, writer)?;
    if !prune {
        let fleets: BTreeSet<&str> = desired
            .iter()
            .filter(|s| s.targets.is_some())
            .map(|s| s.name.as_str())
            .collect();
        let wanted: BTreeSet<&str> = expanded.iter().map(|s| s.name.as_str()).collect();
        plan.changes.extend(
            current
                .iter()
                .filter(|e| writer.owns(e) && e.deletion_requested_at.is_none())
                .filter(|e| {
                    e.spec
                        .target_of
                        .as_ref()
                        .is_some_and(|t| fleets.contains(t.fleet.as_str()))
                })
                .filter(|e| !wanted.contains(e.name.as_str()))
                .map(prune_of),
        );
        plan.changes.sort_by(|a, b| a.name.cmp(&b.name));
    }
    Ok(plan)
}

/// Why the fleets' targets `plan` prunes need a confirmation (`--yes`):
/// for some fleet, every one of its targets, or more than 5 and a fifth of
/// them, as [`super::plan::prune_needs_confirmation`] says of a registry.
/// `None` when they may go.
pub fn departed_needs_confirmation(plan: &Plan, current: &[StackEntry]) -> Option<String> {
    let fleet_of = |name: &str| {
        current
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.spec.target_of.as_ref())
            .map(|t| t.fleet.clone())
    };
    let mut pruned: BTreeMap<String, Vec<Change>> = BTreeMap::new();
    for change in plan
        .changes
        .iter()
        .filter(|c| matches!(c.action, Action::Prune { .. }))
    {
        if let Some(fleet) = fleet_of(&change.name) {
            pruned.entry(fleet).or_default().push(change.clone());
        }
    }
    pruned.into_iter().find_map(|(fleet, changes)| {
        let targets = current
            .iter()
            .filter(|e| e.deletion_requested_at.is_none())
            .filter(|e| e.spec.is_target_of(&fleet))
            .count();
        let n = changes.len();
        let destroyed = changes
            .iter()
            .filter(|c| {
                matches!(
                    c.action,
                    Action::Prune {
                        destroys_stack: true,
                        ..
                    }
                )
            })
            .count();
        prune_needs_confirmation(&Plan { changes }, targets)?;
        Some(format!(
            "fleet {fleet}: its organizational units no longer hold the accounts of {n} of its \
             {targets} targets, whose entries would be pruned ({destroyed} of them with \
             destroyOnDelete: their stacks would be deleted): check the organization (--dry-run \
             lists them), and apply again with --yes if that is what you mean"
        ))
    })
}

/// The entry of the file a planned entry comes from: a target's fleet, or
/// itself.
pub fn written_as(name: &str, desired: &[StackSpec]) -> Option<usize> {
    desired.iter().position(|s| s.name == name).or_else(|| {
        desired.iter().position(|s| {
            s.targets.is_some()
                && name
                    .strip_prefix(s.name.as_str())
                    .is_some_and(|rest| rest.starts_with('-'))
        })
    })
}

#[cfg(test)]
mod tests;
