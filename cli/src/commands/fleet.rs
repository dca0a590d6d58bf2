//! Fleets in `status` and `get`: a fleet's name stands for its targets'
//! entries (`status NAME`, a row each, and a line on the fleet), and
//! `get NAME --target ACCOUNT/REGION` for one of them.

use std::collections::BTreeMap;

use serde::Serialize;
use stacksync::clock::{age, now_millis};
use stacksync::fleet::{parse_target, target_name};
use stacksync::registry::{Fleet, FleetRecords as _, Registry, StackEntry};

use crate::error::Result;

/// The entry `get` shows: `name`'s target `target` (`ACCOUNT/REGION`), or
/// `name` itself.
pub fn entry_name(name: &str, target: Option<&str>) -> Result<String> {
    match target {
        None => Ok(name.to_owned()),
        Some(target) => {
            let (account, region) = parse_target(target).map_err(|e| format!("--target: {e}"))?;
            Ok(target_name(name, &account, &region))
        }
    }
}

/// The fleets among `names` (those that are no entry's name), with the
/// names of their targets' entries.
pub async fn fleets_named(
    registry: &Registry,
    names: &[String],
    entries: &[StackEntry],
) -> Result<BTreeMap<String, (Fleet, Vec<String>)>> {
    let mut found = BTreeMap::new();
    for name in names
        .iter()
        .filter(|n| !entries.iter().any(|e| &e.name == *n))
    {
        let Some(fleet) = registry.fleet(name).await.map_err(|e| e.to_string())? else {
            continue;
        };
        let targets = entries
            .iter()
            .filter(|e| e.spec.is_target_of(name))
            .map(|e| e.name.clone())
            .collect();
        found.insert(name.clone(), (fleet, targets));
    }
    Ok(found)
}

/// One line on a fleet under its targets' rows: how many are in each
/// phase, and its units' last read.
pub fn summary(fleet: &Fleet, targets: &[&StackEntry]) -> String {
    let mut phases: BTreeMap<String, usize> = BTreeMap::new();
    for entry in targets {
        *phases.entry(entry.display_phase().to_string()).or_default() += 1;
    }
    let counts: Vec<String> = phases.iter().map(|(p, n)| format!("{n} {p}")).collect();
    let mut line = format!(
        "fleet {}: {} target(s){}",
        fleet.spec.name,
        targets.len(),
        if counts.is_empty() {
            String::new()
        } else {
            format!(" ({})", counts.join(", "))
        }
    );
    if let Some(at) = fleet.read.at {
        let accounts: usize = fleet.read.units.values().map(Vec::len).sum();
        line.push_str(&format!(
            "; organizational units read {} ago ({accounts} account(s))",
            age(now_millis(), at.0)
        ));
    }
    if let Some(error) = &fleet.read.error {
        line.push_str(&format!("; last read: {error}"));
    }
    line
}

/// What `get NAME` prints of a fleet.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetView<'a> {
    pub fleet: &'a Fleet,
    pub targets: &'a [String],
}
