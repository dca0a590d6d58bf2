//! Running the reconcile: `reconcile` and `sync`, in the deployed state
//! machine or in-process (`--local`), and `history`, the deployed machine's
//! past executions of one stack.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use stacksync::adapters::stepfunctions::ExecutionSummary;
use stacksync::clock::rfc3339;
use stacksync::registry::{Entries, Specs, StackEntry};
use stacksync::status::ApprovalRecord;

use super::apply::{Prune, apply_file};
use super::status::{print_outcome, print_status};
use crate::Output;
use crate::connect::Connection;
use crate::deployed::Deployed;
use crate::error::Result;
use crate::local::LocalRunner;
use crate::output::{Table, print_structured};

/// Where `reconcile` and `sync` run the state machine. Each place has its own
/// flags; the other's are ignored.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    /// In-process, every Wait and retry delay divided by `speedup`.
    Local { speedup: f64 },
    /// In Step Functions; with `wait`, followed until it ends or `timeout`.
    Deployed { wait: bool, timeout: Duration },
}

impl Mode {
    pub fn new(local: bool, wait: bool, timeout: stacksync::Duration, speedup: f64) -> Self {
        if local {
            Self::Local { speedup }
        } else {
            Self::Deployed {
                wait,
                timeout: timeout.as_std(),
            }
        }
    }
}

/// `stacksync reconcile NAME`; `force`: make a change set even at the
/// applied state.
pub async fn reconcile(
    aws: &Connection,
    name: &str,
    mode: Mode,
    force: bool,
    format: Output,
) -> Result {
    let succeeded = match mode {
        Mode::Local { speedup } => reconcile_local(aws, name, speedup, force, format).await?,
        Mode::Deployed { wait, timeout } => {
            reconcile_deployed(aws, name, wait, timeout, force, format).await?
        }
    };
    if succeeded {
        Ok(())
    } else {
        Err(format!("the reconcile of {name:?} failed"))
    }
}

async fn reconcile_local(
    aws: &Connection,
    name: &str,
    speedup: f64,
    force: bool,
    format: Output,
) -> Result<bool> {
    let runner = local_runner(aws, speedup).await?;
    let (succeeded, ran) = runner.reconcile(name, force).await?;
    let entry = aws.registry.get(name).await.map_err(|e| e.to_string())?;
    print_outcome(name, entry, ran.as_deref(), format)?;
    Ok(succeeded)
}

async fn reconcile_deployed(
    aws: &Connection,
    name: &str,
    wait: bool,
    timeout: Duration,
    force: bool,
    format: Output,
) -> Result<bool> {
    let deployed = Deployed::new(&aws.config, &aws.resources)?;
    let (succeeded, ran) = deployed
        .reconcile(&aws.registry, name, wait, timeout, force)
        .await?;
    // Without `wait` the run has only started: its status would say nothing new.
    if wait {
        let entry = aws.registry.get(name).await.map_err(|e| e.to_string())?;
        print_outcome(name, entry, ran.as_deref(), format)?;
    }
    Ok(succeeded)
}

pub async fn sync(
    aws: &Connection,
    file: &Path,
    prune: Prune,
    mode: Mode,
    format: Output,
) -> Result {
    let (failed, in_file) = match mode {
        Mode::Local { speedup } => sync_local(aws, file, prune, speedup).await?,
        Mode::Deployed { wait, timeout } => {
            let ran = sync_deployed(aws, file, prune, wait, timeout).await?;
            // Only started: there is no outcome to show yet.
            if !wait {
                return Ok(());
            }
            ran
        }
    };
    say!();
    let entries = aws.registry.list().await.map_err(|e| e.to_string())?;
    print_status(&entries, format)?;
    if failed.is_empty() {
        return Ok(());
    }
    // Which failed, and why: the file's own entries first.
    let why = |name: &str| match entries.iter().find(|e| e.name == name) {
        None => "its entry is gone".to_owned(),
        Some(e) => e
            .status
            .message
            .clone()
            .unwrap_or_else(|| format!("no message recorded (`stacksync get {name}`)")),
    };
    for name in &failed {
        let whose = if in_file.contains(name) {
            ""
        } else {
            " (not in the file: being deleted)"
        };
        warn_user!("failed: {name}{whose}: {}", why(name));
    }
    let (code, message) = sync_failure(&file.display().to_string(), &failed, &in_file);
    crate::error::exit_with(code);
    Err(message)
}

/// How a sync whose reconciles `failed` ends: exit 1 and the entries when
/// any of the file's own failed; exit 3 when only entries the file does not
/// name failed (others' deletions, pruned before), so that a CI job can
/// tell "my stacks failed" from "another entry is stuck".
fn sync_failure(
    file: &str,
    failed: &[String],
    in_file: &std::collections::BTreeSet<String>,
) -> (u8, String) {
    let (ours, others): (Vec<&String>, Vec<&String>) =
        failed.iter().partition(|n| in_file.contains(*n));
    let others_note = if others.is_empty() {
        String::new()
    } else {
        format!("; and for {others:?}, which {file} does not name (being deleted)")
    };
    if ours.is_empty() {
        (
            3,
            format!(
                "every entry of {file} reconciled; the reconcile failed only for {others:?}, \
                 which {file} does not name (being deleted) (exit code 3)"
            ),
        )
    } else {
        (
            1,
            format!("the reconcile failed for {ours:?} of {file}{others_note}"),
        )
    }
}

/// Reconciles the entries `file` leaves to reconcile, in-process; returns the
/// names of those that failed.
async fn sync_local(
    aws: &Connection,
    file: &Path,
    prune: Prune,
    speedup: f64,
) -> Result<(Vec<String>, BTreeSet<String>)> {
    let (names, in_file) = apply_for_sync(aws, file, prune).await?;
    let runner = local_runner(aws, speedup).await?;
    let mut failed = Vec::new();
    for name in names {
        if !runner.reconcile(&name, false).await?.0 {
            failed.push(name);
        }
    }
    Ok((failed, in_file))
}

/// Starts (and with `wait`, follows) the reconciles of the entries `file`
/// leaves to reconcile; returns the names of those that failed.
async fn sync_deployed(
    aws: &Connection,
    file: &Path,
    prune: Prune,
    wait: bool,
    timeout: Duration,
) -> Result<(Vec<String>, BTreeSet<String>)> {
    // Fail before writing anything if there is nothing to run the reconciles.
    let deployed = Deployed::new(&aws.config, &aws.resources)?;
    let (names, in_file) = apply_for_sync(aws, file, prune).await?;
    let mut failed = Vec::new();
    for name in names {
        // One entry's trouble (not started, still running at --timeout) is
        // its own: the others still run, and the summary names it.
        match deployed
            .reconcile(&aws.registry, &name, wait, timeout, false)
            .await
        {
            Ok((true, _)) => {}
            Ok((false, _)) => failed.push(name),
            Err(e) => {
                warn_user!("{e}");
                failed.push(name);
            }
        }
    }
    Ok((failed, in_file))
}

/// Applies `file`, and returns what to reconcile: its entries, and every
/// entry being deleted (pruned now or before), whose reconcile deletes it;
/// each after what it depends on. With the names the file holds.
async fn apply_for_sync(
    aws: &Connection,
    file: &Path,
    prune: Prune,
) -> Result<(Vec<String>, BTreeSet<String>)> {
    let desired = apply_file(aws, file, prune, false, Output::Table).await?;
    let in_file: BTreeSet<String> = desired.iter().map(|s| s.name.clone()).collect();
    let entries = aws.registry.list().await.map_err(|e| e.to_string())?;
    let wanted: Vec<_> = entries
        .into_iter()
        .filter(|e| e.deletion_requested_at.is_some() || in_file.contains(&e.name))
        .collect();
    // What a stack depends on runs before it (and is deleted after it).
    Ok((run_order(aws, &wanted).await?, in_file))
}

/// `wanted` in the order runs one after another go: each after what it
/// depends on, and a fleet's targets wave by wave (`rollout:`).
async fn run_order(aws: &Connection, wanted: &[StackEntry]) -> Result<Vec<String>> {
    use stacksync::registry::Fleets as _;
    let names = stacksync::registry::graph::in_dependency_order(wanted);
    let plans: Vec<_> = aws
        .registry
        .fleets()
        .await
        .map_err(|e| e.to_string())?
        .iter()
        .filter_map(|f| stacksync::rollout::plan(&f.spec, &f.read.units))
        .collect();
    Ok(stacksync::rollout::in_wave_order(names, &plans))
}

/// Runs `names` through the local runner, each after what it depends on
/// (a deletion after its dependents'); fails naming those that failed.
pub async fn reconcile_changed(aws: &Connection, names: &[String], speedup: f64) -> Result {
    if names.is_empty() {
        return Ok(());
    }
    let entries = aws.registry.list().await.map_err(|e| e.to_string())?;
    let wanted: Vec<_> = entries
        .into_iter()
        .filter(|e| names.contains(&e.name))
        .collect();
    let runner = local_runner(aws, speedup).await?;
    let mut failed = Vec::new();
    for name in run_order(aws, &wanted).await? {
        if !runner.reconcile(&name, false).await?.0 {
            failed.push(name);
        }
    }
    say!();
    let entries = aws.registry.list().await.map_err(|e| e.to_string())?;
    print_status(&entries, Output::Table)?;
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("the reconcile failed for {failed:?}"))
    }
}

/// The in-process runner, on the same registry as the rest of the command.
async fn local_runner(aws: &Connection, speedup: f64) -> Result<LocalRunner> {
    let mut runner = LocalRunner::new(
        &aws.config,
        aws.registry.clone(),
        &aws.resources.bucket,
        speedup,
    )
    .await?;
    // Against a deployed installation, what it allows holds locally too.
    if let Some(policy) = &aws.resources.policy {
        runner.steps.config.policy = policy.clone();
    }
    // Its Guard rules (`PolicySource`, or STACKSYNC_POLICY_SOURCE) too.
    runner.steps.config.rules = aws.resources.rules.clone();
    Ok(runner)
}

/// One execution in `history`, with the approvals it asked for (who
/// approved or rejected which change set, when), as the status records them.
#[derive(Serialize)]
struct HistoryRow<'a> {
    #[serde(flatten)]
    execution: &'a ExecutionSummary,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    approvals: Vec<&'a ApprovalRecord>,
}

pub async fn history(aws: &Connection, name: &str, limit: usize, format: Output) -> Result {
    // Executions outlive entries: a deleted stack's are still worth showing.
    let entry = aws.registry.get(name).await.map_err(|e| e.to_string())?;
    if entry.is_none() {
        warn_user!(
            "note: {name:?} is not in the registry {:?} (any past executions are listed)",
            aws.registry.table()
        );
    }
    let approvals = entry.map(|e| e.status.approval.records).unwrap_or_default();
    let deployed = Deployed::new(&aws.config, &aws.resources)?;
    let found = deployed.history(name, limit).await?;
    let rows: Vec<HistoryRow<'_>> = found
        .iter()
        .map(|execution| HistoryRow {
            execution,
            approvals: approvals
                .iter()
                .filter(|a| a.run == execution.name)
                .collect(),
        })
        .collect();
    if format != Output::Table {
        return print_structured(format, &rows);
    }
    if found.is_empty() {
        say!(
            "no executions of {name:?} in {} (among its newest 10,000)",
            deployed.state_machine_arn()
        );
        return Ok(());
    }
    print_history(&rows);
    Ok(())
}

fn print_history(rows: &[HistoryRow<'_>]) {
    let mut table = Table::new(vec![
        "STARTED",
        "STATUS",
        "DURATION",
        "EXECUTION",
        "APPROVALS",
    ]);
    for row in rows {
        let e = row.execution;
        let duration = e
            .stopped_at
            .map(|stop| format!("{:.1}s", (stop - e.started_at) as f64 / 1000.0))
            .unwrap_or_else(|| "running".into());
        let approvals = row
            .approvals
            .iter()
            .map(|a| {
                format!(
                    "{} {}{} at {}",
                    serde_json::to_value(a.decision)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    a.change_set,
                    a.by.as_deref()
                        .map(|b| format!(" by {b}"))
                        .unwrap_or_default(),
                    rfc3339(a.at.0)
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        table.row(vec![
            rfc3339(e.started_at),
            e.status.clone(),
            duration,
            e.name.clone(),
            approvals,
        ]);
    }
    put!("{}", table.render());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_fails_1_for_its_own_entries_and_3_when_only_others_failed() {
        let in_file: BTreeSet<String> = ["a".to_owned(), "b".to_owned()].into();
        let (code, message) = sync_failure("s.yaml", &["a".into(), "old".into()], &in_file);
        assert_eq!(code, 1);
        assert_eq!(
            message,
            "the reconcile failed for [\"a\"] of s.yaml; and for [\"old\"], which s.yaml does \
             not name (being deleted)"
        );
        let (code, message) = sync_failure("s.yaml", &["old".into()], &in_file);
        assert_eq!(code, 3);
        assert!(
            message.starts_with("every entry of s.yaml reconciled"),
            "{message}"
        );
    }
}
