//! A fleet's rollout in waves: where it stands (a line under its targets
//! in `status`) and `rollout resume` (go on past the failed targets).

use std::collections::BTreeMap;

use serde::Serialize;
use stacksync::clock::now_millis;
use stacksync::registry::{
    Fleet, FleetRecords as _, Fleets as _, Specs as _, StackEntry, follower_of,
};
use stacksync::rollout::{Peer, Plan, Progress, next_starts, plan, progress};

use crate::Output;
use crate::connect::Connection;
use crate::error::Result;
use crate::output::print_structured;

/// The revision a rollout is at, as its targets say: the one most of
/// those it holds wait at (`None`: it holds none).
fn held_at(targets: &[&StackEntry]) -> Option<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for t in targets {
        if let Some(hold) = &t.status.inputs.held_by_rollout {
            *counts.entry(hold.revision.as_str()).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(r, _)| r.to_owned())
}

fn peers(targets: &[&StackEntry]) -> BTreeMap<String, Peer> {
    let now = now_millis();
    targets
        .iter()
        .map(|e| (e.name.clone(), follower_of(e).peer(now)))
        .collect()
}

fn resumed_at(fleet: &Fleet, revision: &str) -> bool {
    fleet
        .resumed
        .as_deref()
        .is_some_and(|r| r.eq_ignore_ascii_case(revision))
}

/// The line `status` shows under a fleet's targets while its rollout holds
/// some: where it stands, and each failed target's message (the root
/// cause its run recorded).
pub fn line(fleet: &Fleet, targets: &[&StackEntry]) -> Option<String> {
    let plan = plan(&fleet.spec, &fleet.read.units)?;
    let revision = held_at(targets)?;
    let p = progress(
        &plan,
        &peers(targets),
        &revision,
        resumed_at(fleet, &revision),
    );
    let short: String = revision.chars().take(12).collect();
    let mut line = format!(
        "rollout of {short}: {} of {} wave(s) ended",
        p.ended, p.waves
    );
    if p.halted {
        line = format!(
            "Halted: {line}; {} target(s) failed, failureTolerance is {} (push a fix, or \
             `stacksync rollout resume {}`)",
            p.failed.len(),
            plan.tolerance,
            fleet.spec.name
        );
    }
    for failed in p.failed.iter().take(10) {
        let message = targets
            .iter()
            .find(|t| &t.name == failed)
            .and_then(|t| t.status.message.as_deref())
            .unwrap_or("no message recorded");
        line.push_str(&format!("\n  {failed}: {message}"));
    }
    Some(line)
}

/// What `rollout resume` did.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Resumed {
    fleet: String,
    revision: String,
    was_halted: bool,
    next_wave: Vec<String>,
}

/// `stacksync rollout resume NAME`: records on the fleet that its rollout
/// goes on past the failures at the revision its targets are held at, and
/// starts (with `local`, runs) the next wave's targets.
pub async fn resume(
    aws: &Connection,
    name: &str,
    local: bool,
    speedup: f64,
    format: Output,
) -> Result {
    let fleet = aws
        .registry
        .fleet(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{name:?} is not a fleet: `stacksync status` lists them"))?;
    let Some(plan) = plan(&fleet.spec, &fleet.read.units) else {
        return Err(format!(
            "the fleet {name:?} has no rollout: its targets all go at once"
        ));
    };
    let entries = aws.registry.list().await.map_err(|e| e.to_string())?;
    let targets: Vec<&StackEntry> = entries
        .iter()
        .filter(|e| e.spec.is_target_of(name))
        .collect();
    let Some(revision) = held_at(&targets) else {
        return Err(format!(
            "no target of {name:?} waits for its rollout: there is nothing to resume"
        ));
    };
    let before = progress(
        &plan,
        &peers(&targets),
        &revision,
        resumed_at(&fleet, &revision),
    );
    if !before.halted && !resumed_at(&fleet, &revision) {
        // Resuming would let later failures at this revision through too.
        return Err(format!(
            "the rollout of {name} at {} is not halted ({} of {} wave(s) ended, {} failed): \
             its targets go on as the waves before them end",
            revision.chars().take(12).collect::<String>(),
            before.ended,
            before.waves,
            before.failed.len()
        ));
    }
    if !resumed_at(&fleet, &revision) {
        let record = Fleet {
            resumed: Some(revision.clone()),
            ..fleet.clone()
        };
        let written = aws
            .registry
            .put_fleet(&record, Some(fleet.version))
            .await
            .map_err(|e| e.to_string())?;
        if !written {
            return Err(format!(
                "the fleet {name:?} was written meanwhile (an apply, a read of its units): resume again"
            ));
        }
    }
    let next = next_wave(&plan, &targets, &revision);
    let resumed = Resumed {
        fleet: name.to_owned(),
        revision: revision.clone(),
        was_halted: before.halted,
        next_wave: next.clone(),
    };
    report(&resumed, &before, format)?;
    start(aws, &next, local, speedup).await
}

fn next_wave(plan: &Plan, targets: &[&StackEntry], revision: &str) -> Vec<String> {
    next_starts(plan, &peers(targets), revision, true)
        .map(|(names, _)| names)
        .unwrap_or_default()
}

fn report(resumed: &Resumed, before: &Progress, format: Output) -> Result {
    if format != Output::Table {
        return print_structured(format, resumed);
    }
    let short: String = resumed.revision.chars().take(12).collect();
    say!(
        "rollout of {} resumed at {short}{}: the failures at it no longer hold it ({} failed)",
        resumed.fleet,
        if resumed.was_halted {
            ""
        } else {
            " (resumed before)"
        },
        before.failed.len()
    );
    if resumed.next_wave.is_empty() {
        say!("no target to start now: the runs under way start the next wave as they end");
    } else {
        say!("next wave: {}", resumed.next_wave.join(", "));
    }
    Ok(())
}

async fn start(aws: &Connection, names: &[String], local: bool, speedup: f64) -> Result {
    if names.is_empty() {
        return Ok(());
    }
    if local {
        return super::run::reconcile_changed(aws, names, speedup).await;
    }
    let deployed = crate::deployed::Deployed::new(&aws.config, &aws.resources)?;
    for name in names {
        deployed
            .reconcile(&aws.registry, name, false, std::time::Duration::ZERO, false)
            .await?;
    }
    Ok(())
}
