//! `stacksync approve FLEET --change-set ID`: a change reviewed once for a
//! fleet. `ID` is the change set one of its targets waits with (`stacksync
//! get FLEET --target ACCOUNT/REGION` shows it); that target, and every
//! other target of the fleet waiting at the same revision with the same
//! changes (the same rows, all of them shown), are approved, each through
//! the same path as `approve NAME` (the approval function checks the
//! approver for each). Their runs record the rows as approved for the
//! fleet, so the later waves of its rollout with the same changes run
//! without asking; a target whose changes differ waits for its own.

use stacksync::pull_request::rows_hash;
use stacksync::registry::{FleetRecords as _, Specs as _, StackEntry};
use stacksync::status::AwaitingApproval;

use crate::Output;
use crate::connect::Connection;
use crate::error::Result;
use crate::output::print_structured;

/// `Some`: `name` is a fleet (no entry is so named), and the approval of
/// its targets' change set `change_set` was answered.
pub async fn approve_fleet(
    aws: &Connection,
    name: &str,
    change_set: &str,
    format: Output,
) -> Option<Result> {
    use stacksync::registry::Entries as _;
    if aws.registry.get(name).await.ok().flatten().is_some() {
        return None;
    }
    aws.registry.fleet(name).await.ok().flatten()?;
    Some(approve_targets(aws, name, change_set, format).await)
}

fn waiting(entry: &StackEntry) -> Option<&AwaitingApproval> {
    entry.status.approval.awaiting.as_ref()
}

async fn approve_targets(aws: &Connection, name: &str, change_set: &str, format: Output) -> Result {
    let entries = aws.registry.list().await.map_err(|e| e.to_string())?;
    let targets: Vec<&StackEntry> = entries
        .iter()
        .filter(|e| e.spec.is_target_of(name))
        .collect();
    let reviewed = targets
        .iter()
        .find(|t| waiting(t).is_some_and(|w| w.change_set == change_set))
        .ok_or_else(|| {
            format!(
                "no target of the fleet {name} waits with the change set {change_set}: \
                 `stacksync status {name}` shows which wait, `stacksync get {name} --target \
                 ACCOUNT/REGION` their change sets"
            )
        })?;
    let revision = &reviewed.status.run.last_attempted_revision;
    let rows = waiting(reviewed)
        .filter(|w| w.more == 0)
        .map(|w| rows_hash(&w.changes));
    let mut approved = Vec::new();
    let mut left = Vec::new();
    for target in &targets {
        let Some(awaiting) = waiting(target) else {
            continue;
        };
        let same = target.name == reviewed.name
            || (&target.status.run.last_attempted_revision == revision
                && awaiting.more == 0
                && rows.as_deref() == Some(rows_hash(&awaiting.changes).as_str()));
        if !same {
            left.push(target.name.clone());
            continue;
        }
        let (_, by) =
            super::approval::answer_approve(aws, &target.name, &awaiting.change_set).await?;
        approved.push(Approved {
            stack: target.name.clone(),
            change_set: awaiting.change_set.clone(),
            by,
        });
    }
    if format != Output::Table {
        return print_structured(format, &FleetApproved { approved, left });
    }
    for a in &approved {
        say!(
            "approved the change set {} of {}{}",
            a.change_set,
            a.stack,
            a.by.as_deref()
                .map(|b| format!(" (as {b})"))
                .unwrap_or_default()
        );
    }
    say!(
        "fleet {name}: {} target(s) approved with the same changes; the runs check that nothing \
         moved since, then execute them, and the later waves with the same changes run without \
         asking",
        approved.len()
    );
    if !left.is_empty() {
        say!(
            "waiting with other changes (approve each by its own change set): {}",
            left.join(", ")
        );
    }
    Ok(())
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Approved {
    stack: String,
    change_set: String,
    by: Option<String>,
}

#[derive(serde::Serialize)]
struct FleetApproved {
    approved: Vec<Approved>,
    left: Vec<String>,
}
