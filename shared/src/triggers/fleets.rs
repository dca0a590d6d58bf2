//! Fleets' targets kept to what their organizational units hold: the units
//! read (by `apply`, and by the scheduler every `targetsInterval`), the
//! targets planned and written, the fleet recorded (`registry::fleets`).
//!
//! A read that fails changes nothing: the targets stay as the last good
//! read made them, and the fleet records why. A read that would prune
//! every one of a fleet's targets, or more than a fifth and more than five
//! of them, is held the same way (the prune guard): `stacksync apply
//! --yes` of the file confirms it (for a registry source's fleet: the
//! accounts excluded in its file, a commit under the source's own guard).

use std::collections::BTreeSet;

use serde::Serialize;

use crate::clock::EpochMillis;
use crate::ports::Organizations;
use crate::ports::organizations::accounts_under;
use crate::registry::plan::{Action, Plan, Writer};
use crate::registry::targets::{Units, departed_needs_confirmation, plan_with_fleets};
use crate::registry::{Fleet, Fleets, Specs, UnitsRead, apply_plan};
use crate::registry_source::Owner;
use crate::spec::StackSpec;
use crate::status::Timestamp;

/// Reads the accounts of every unit of `fleets` (each unit once). One line
/// per unit that cannot be read, naming the fleet, the field and the unit.
pub async fn read_units(
    organizations: Option<&dyn Organizations>,
    fleets: &[&StackSpec],
) -> Result<Units, Vec<String>> {
    let mut units = Units::new();
    let mut problems = Vec::new();
    for fleet in fleets {
        let Some(targets) = &fleet.targets else {
            continue;
        };
        for (index, unit) in targets.organizational_units.iter().enumerate() {
            if units.contains_key(unit) {
                continue;
            }
            let field = format!("targets.organizationalUnits[{index}]");
            let Some(organizations) = organizations else {
                problems.push(format!(
                    "{}: {field}: {unit} cannot be read: no AWS Organizations reader is configured",
                    fleet.name
                ));
                continue;
            };
            match accounts_under(organizations, unit, targets.recursive).await {
                Ok(accounts) => {
                    units.insert(unit.clone(), accounts);
                }
                Err(e) => problems.push(format!(
                    "{}: {field}: {unit} cannot be read: {}",
                    fleet.name,
                    e.message()
                )),
            }
        }
    }
    if problems.is_empty() {
        Ok(units)
    } else {
        Err(problems)
    }
}

/// The fleet as recorded with `units` read at `at` (`None`: some unit is
/// not read yet, and the fleet is due for a read at once), written by
/// `owner` (`None`: the CLI).
pub fn fleet_record(
    spec: &StackSpec,
    units: &Units,
    at: Option<EpochMillis>,
    owner: Option<Owner>,
) -> Fleet {
    let own: Units = spec
        .targets
        .iter()
        .flat_map(|t| &t.organizational_units)
        .filter_map(|u| Some((u.clone(), units.get(u)?.clone())))
        .collect();
    let read = if crate::fleet::reread_every(spec).is_some() {
        let covered = spec
            .targets
            .iter()
            .flat_map(|t| &t.organizational_units)
            .all(|u| own.contains_key(u));
        UnitsRead {
            at: at.filter(|_| covered).map(Timestamp),
            units: own,
            error: None,
        }
    } else {
        UnitsRead::default()
    };
    Fleet {
        spec: spec.clone(),
        owner,
        read,
        resumed: None,
        version: 0,
    }
}

/// Records the file's fleets (the CLI's) as applied at `now`, their units
/// read then, and with `prune` forgets the CLI's fleets no longer in it.
pub async fn record_fleets<R: Fleets>(
    registry: &R,
    desired: &[StackSpec],
    units: &Units,
    prune: bool,
    now: EpochMillis,
) -> Result<(), String> {
    let fleets: Vec<Fleet> = desired
        .iter()
        .filter(|s| s.targets.is_some())
        .map(|s| fleet_record(s, units, Some(now), None))
        .collect();
    let recorded = registry.fleets().await.map_err(|e| e.to_string())?;
    record(
        registry,
        &recorded,
        &fleets,
        &|f: &Fleet| f.owner.is_none(),
        prune,
    )
    .await
}

/// Writes `fleets` over the `recorded` ones (as read: every write is
/// conditioned on the version read) their writer owns (`owned`), and with
/// `prune` forgets the writer's fleets not among them. Fails naming the
/// fleet when another writer wrote it meanwhile.
pub async fn record<R: Fleets>(
    registry: &R,
    recorded: &[Fleet],
    fleets: &[Fleet],
    owned: &(dyn Fn(&Fleet) -> bool + Sync),
    prune: bool,
) -> Result<(), String> {
    for new in fleets {
        let old = recorded
            .iter()
            .filter(|f| owned(f))
            .find(|f| f.spec.name == new.spec.name);
        // What `rollout resume` let go on is kept across writes.
        let new = &Fleet {
            resumed: old.and_then(|f| f.resumed.clone()),
            ..new.clone()
        };
        let written = registry
            .put_fleet(new, old.map(|f| f.version))
            .await
            .map_err(|e| e.to_string())?;
        if !written {
            return Err(format!(
                "fleet {:?}: written by another writer meanwhile; apply again",
                new.spec.name
            ));
        }
    }
    if prune {
        let kept: BTreeSet<&str> = fleets.iter().map(|f| f.spec.name.as_str()).collect();
        for gone in recorded
            .iter()
            .filter(|f| owned(f))
            .filter(|f| !kept.contains(f.spec.name.as_str()))
        {
            registry
                .remove_fleet(&gone.spec.name, gone.version)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// What one read of a fleet's units did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum Reread {
    /// The targets are as the units hold them: these were added and pruned.
    Applied {
        created: Vec<String>,
        pruned: Vec<String>,
    },
    /// Nothing changed: the read failed, or the prune guard held it.
    Kept { why: String },
}

/// Reads a fleet's units again at `now` and brings its targets to what
/// they hold, written as the fleet's writer wrote them (the CLI, or its
/// registry source at its commit; `home`: the installation's region).
pub async fn reread<R: Specs + Fleets>(
    registry: &R,
    organizations: Option<&dyn Organizations>,
    fleet: &Fleet,
    home: Option<&str>,
    now: EpochMillis,
) -> Result<Reread, String> {
    let current = registry.list().await.map_err(|e| e.to_string())?;
    reread_from(registry, organizations, fleet, &current, home, now).await
}

/// [`reread`] planned against `current`, the registry's entries as read
/// once for every fleet a scheduler run reads (their targets are apart; a
/// write raced by another is refused by its condition, and read again on
/// the next run).
pub async fn reread_from<R: Specs + Fleets>(
    registry: &R,
    organizations: Option<&dyn Organizations>,
    fleet: &Fleet,
    current: &[crate::registry::StackEntry],
    home: Option<&str>,
    now: EpochMillis,
) -> Result<Reread, String> {
    let units = match read_units(organizations, &[&fleet.spec]).await {
        Ok(units) => units,
        Err(problems) => return keep(registry, fleet, problems.join("; "), now).await,
    };
    let desired = std::slice::from_ref(&fleet.spec);
    // The fleet's writer writes its targets: the CLI, or its registry
    // source at the commit it was applied from.
    let count = fleet
        .spec
        .targets
        .as_ref()
        .map_or(0, |t| crate::fleet::targets_of(t, &units).len());
    let files = match &fleet.owner {
        Some(owner) => vec![owner.file.clone(); count],
        None => Vec::new(),
    };
    let writer = match &fleet.owner {
        Some(owner) => Writer::Source {
            name: &owner.source,
            commit: &owner.commit,
            files: &files,
        },
        None => Writer::Cli,
    };
    let plan =
        plan_with_fleets(desired, &units, current, false, home, writer).map_err(|conflicts| {
            let lines: Vec<String> = conflicts
                .iter()
                .map(|c| format!("{}: {}: {}", c.name, c.field, c.message))
                .collect();
            lines.join("; ")
        })?;
    if let Some(why) = departed_needs_confirmation(&plan, current) {
        return keep(registry, fleet, format!("held: {why}"), now).await;
    }
    apply_plan(registry, &plan, now, |_| {})
        .await
        .map_err(|stopped| stopped.error.to_string())?;
    let record = Fleet {
        version: fleet.version,
        resumed: fleet.resumed.clone(),
        ..fleet_record(&fleet.spec, &units, Some(now), fleet.owner.clone())
    };
    if !registry
        .put_fleet(&record, Some(fleet.version))
        .await
        .map_err(|e| e.to_string())?
    {
        return Err(format!(
            "fleet {:?}: written meanwhile; read again on the next run",
            fleet.spec.name
        ));
    }
    Ok(applied(&plan))
}

fn applied(plan: &Plan) -> Reread {
    let named = |pick: fn(&Action) -> bool| {
        plan.changes
            .iter()
            .filter(|c| pick(&c.action))
            .map(|c| c.name.clone())
            .collect()
    };
    Reread::Applied {
        created: named(|a| matches!(a, Action::Create)),
        pruned: named(|a| matches!(a, Action::Prune { .. })),
    }
}

/// The targets stay; the fleet records why, and is read again after its
/// interval.
async fn keep<R: Fleets>(
    registry: &R,
    fleet: &Fleet,
    why: String,
    now: EpochMillis,
) -> Result<Reread, String> {
    let mut record = fleet.clone();
    record.read.at = Some(Timestamp(now));
    record.read.error = Some(why.clone());
    registry
        .put_fleet(&record, Some(fleet.version))
        .await
        .map_err(|e| e.to_string())?;
    Ok(Reread::Kept { why })
}

#[cfg(test)]
mod tests;
