//! `stacksync status [NAME…]`: every stack's sync status, a row each. The
//! same table ends `reconcile` and `sync`, with the entries they ran.

use serde::Serialize;
use stacksync::clock::{age, now_millis};
use stacksync::registry::{Lease, Registry, Specs, StackEntry};
use stacksync::status::{Phase, Retrying, StallReason, Timestamp};

use crate::Output;
use crate::error::Result;
use crate::output::{Table, cell, print_structured};

pub async fn status(registry: &Registry, names: &[String], format: Output) -> Result {
    let (mut entries, unreadable) = registry.list_all().await.map_err(|e| e.to_string())?;
    // Items no reader can use are named on stderr: the table stays the
    // table, and scripts reading it are not confused.
    for item in &unreadable {
        warn_user!(
            "registry item {} cannot be read, and every reader skips it: {}",
            item.key,
            item.detail
        );
    }
    // A fleet's name stands for its targets.
    let fleets = super::fleet::fleets_named(registry, names, &entries).await?;
    if !names.is_empty() {
        let missing: Vec<String> = names
            .iter()
            .filter(|n| !entries.iter().any(|e| &e.name == *n) && !fleets.contains_key(*n))
            .map(|n| format!("{n:?}"))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "no stack named {} in the registry {:?} (`stacksync list` shows the names)",
                missing.join(" or "),
                registry.table()
            ));
        }
        entries.retain(|e| {
            names.contains(&e.name) || fleets.values().any(|(_, t)| t.contains(&e.name))
        });
    }
    print_status(&entries, format)?;
    if format == Output::Table {
        for (fleet, targets) in fleets.values() {
            let rows: Vec<&StackEntry> = entries
                .iter()
                .filter(|e| targets.contains(&e.name))
                .collect();
            say!("{}", super::fleet::summary(fleet, &rows));
            if let Some(line) = super::rollout::line(fleet, &rows) {
                say!("{line}");
            }
        }
    }
    // The registry sources, as a section of the table (`source list -o
    // json` has them structured: the JSON of `status` stays the stacks').
    if format == Output::Table && names.is_empty() {
        use stacksync::registry::RegistrySources;
        let sources = registry
            .registry_sources()
            .await
            .map_err(|e| e.to_string())?;
        if !sources.is_empty() {
            say!();
            super::source::print_sources(&sources);
        }
    }
    Ok(())
}

/// One line of `stacksync status`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusRow<'a> {
    name: &'a str,
    phase: Phase,
    stack_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    stack_status: Option<&'a str>,
    /// When stacksync last read that status (a run's end): the registry's
    /// memory of the stack, not the stack now.
    #[serde(skip_serializing_if = "Option::is_none")]
    stack_status_at: Option<Timestamp>,
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
    stall_reason: Option<StallReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    /// The run holding the stack now, since and until when.
    #[serde(skip_serializing_if = "Option::is_none")]
    lease: Option<&'a Lease>,
    /// Why no run acts on the entry (a later schema, unknown spec fields).
    #[serde(skip_serializing_if = "Option::is_none")]
    unsupported: Option<&'a str>,
    /// How many resources the last drift detection found drifted
    /// (`stacksync drift NAME` shows them).
    #[serde(skip_serializing_if = "Option::is_none")]
    drifted_resources: Option<usize>,
    /// The step of the run in hand that is being retried, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    retrying: Option<&'a Retrying>,
    /// `Pending`: its last run waits for a sync window to open (due then).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    held_by_window: bool,
    /// `Pending`: its last run waits for its fleet's rollout (its turn, or
    /// a halted rollout) at a revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    held_by_rollout: Option<&'a stacksync::status::RolloutHold>,
}

impl<'a> StatusRow<'a> {
    /// The phase as the table shows it: with the failure's reason (a
    /// Pending row, spec changed since, shows none), the drifted
    /// resources, or what a Pending run waits for.
    fn phase_label(&self) -> String {
        match (self.stall_reason, self.drifted_resources) {
            (Some(reason), _) if self.phase == Phase::Failed => {
                format!("{} ({reason})", self.phase)
            }
            (_, Some(n)) if self.phase == Phase::Drifted => format!("Drifted ({n})"),
            _ if self.phase == Phase::Pending && self.held_by_window => "Pending (Window)".into(),
            _ if self.phase == Phase::Pending => match self.held_by_rollout {
                Some(hold) if hold.halted => "Pending (Halted)".into(),
                Some(_) => "Pending (Rollout)".into(),
                None => self.phase.to_string(),
            },
            _ => self.phase.to_string(),
        }
    }

    fn of(e: &'a StackEntry) -> Self {
        Self {
            name: &e.name,
            phase: e.display_phase(),
            stack_name: e.spec.effective_stack_name(),
            stack_status: e.status.stack.status.as_deref(),
            // Recorded before `stackStatusAt` was: a `Ready` run's end is
            // when it was read; any other's, unknown.
            stack_status_at: e
                .status
                .stack
                .at
                .or(e
                    .status
                    .times
                    .last_reconcile_at
                    .filter(|_| e.status.phase == Phase::Ready))
                .filter(|_| e.status.stack.status.is_some()),
            last_applied_revision: e.status.applied.last_applied_revision.as_deref(),
            last_attempted_revision: e.status.run.last_attempted_revision.as_deref(),
            last_reconcile_at: e.status.times.last_reconcile_at,
            next_reconcile_at: e.status.times.next_reconcile_at,
            spec_version: e.spec_version,
            observed_spec_version: e.status.run.observed_spec_version,
            stall_reason: e.status.stall_reason,
            // What blocks every run comes first.
            message: e.unsupported.as_deref().or(e.status.message.as_deref()),
            lease: e.lease.as_ref(),
            unsupported: e.unsupported.as_deref(),
            held_by_window: e.status.inputs.held_by_window,
            held_by_rollout: e.status.inputs.held_by_rollout.as_ref(),
            drifted_resources: e
                .status
                .findings
                .drift
                .as_ref()
                .map(|d| d.resources.len())
                .filter(|n| *n > 0),
            // Only while the run that recorded it holds the stack, lately,
            // and is not waiting for a person (that says what to do).
            retrying: e.status.run.retrying.as_ref().filter(|r| {
                let now = now_millis();
                let holder = e.lease.as_ref().filter(|l| l.is_live(now));
                e.display_phase() == Phase::Reconciling
                    && stacksync::reconcile::steps::retrying::current(
                        r,
                        holder.map(|l| l.owner.as_str()),
                        now,
                    )
            }),
        }
    }
}

/// The run holding a stack, and for how long (or that its lease ran out
/// without being released: a run that stopped; `stacksync unlock`).
fn held_by(lease: Option<&Lease>, now: i64) -> String {
    let Some(lease) = lease else {
        return "-".into();
    };
    let owner = cell(Some(&lease.owner), 40);
    match (lease.is_live(now), lease.taken_at) {
        (true, Some(since)) => format!("{owner} for {}", age(now, since.0)),
        (true, None) => owner,
        (false, _) => format!("{owner}, ran out {} ago", age(now, lease.expires_at.0)),
    }
}

/// The status of `name` after a run: its row, or, when the run removed its
/// entry, a line that says so and what became of the stack: the run's own
/// outcome (`ran`) where known, never a guess.
pub fn print_outcome(
    name: &str,
    entry: Option<StackEntry>,
    ran: Option<&str>,
    format: Output,
) -> Result {
    match entry {
        Some(entry) => print_status(&[entry], format),
        None if format == Output::Table => {
            match ran {
                Some(outcome) => say!("{name}: {outcome}"),
                None => say!(
                    "{name}: entry removed from the registry (the run did not say what became \
                     of its stack: `stacksync get` no longer finds it; CloudFormation does, if \
                     it was kept)"
                ),
            }
            Ok(())
        }
        None => print_structured(format, &Vec::<StatusRow>::new()),
    }
}

pub fn print_status(entries: &[StackEntry], format: Output) -> Result {
    let rows: Vec<StatusRow> = entries.iter().map(StatusRow::of).collect();
    if format != Output::Table {
        return print_structured(format, &rows);
    }
    if rows.is_empty() {
        say!("no stacks registered: add some with `stacksync apply -f stacks.yaml`");
        return Ok(());
    }
    let now = now_millis();
    let mut table = Table::new(vec![
        "NAME",
        "PHASE",
        "STACK STATUS",
        "REVISION",
        "LAST RECONCILE",
        "HELD BY",
        "MESSAGE",
    ]);
    for row in &rows {
        let revision = row
            .last_applied_revision
            .map(|r| r.chars().take(12).collect::<String>());
        let phase = row.phase_label();
        // A drifted stack says so, and where to look.
        let drift_note = (row.phase == Phase::Drifted).then(|| {
            format!(
                "{} resource(s) drifted: `stacksync drift {}`",
                row.drifted_resources.unwrap_or(0),
                row.name
            )
        });
        // A run being retried says what fails, and since when.
        let retry_note = row.retrying.map(|r| {
            format!(
                "retrying {} (attempt {}, since {} ago): {}",
                r.step,
                r.attempts + 1,
                age(now, r.since.0),
                r.cause
            )
        });
        let message = drift_note
            .as_deref()
            .or(retry_note.as_deref())
            .or(row.message);
        table.row(vec![
            row.name.to_owned(),
            phase,
            // What the last run saw, and when: not the stack now.
            cell(
                row.stack_status
                    .map(|st| match row.stack_status_at {
                        Some(at) => format!("{st}, seen {} ago", age(now, at.0)),
                        None => st.to_owned(),
                    })
                    .as_deref(),
                48,
            ),
            cell(revision.as_deref(), 12),
            row.last_reconcile_at
                .map(|t| format!("{} ago", age(now, t.0)))
                .unwrap_or_else(|| "never".into()),
            held_by(row.lease, now),
            cell(message, 80),
        ]);
    }
    put!("{}", table.render());
    Ok(())
}
