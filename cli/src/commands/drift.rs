//! `stacksync drift NAME`: what the last drift detection found of one
//! stack — each drifted resource's property differences, expected and
//! actual, less `drift.ignore` — as the drift function recorded it. `-o json`
//! and `-o yaml` print the record itself.

use serde::Serialize;
use stacksync::clock::{age, now_millis};
use stacksync::drift::{DriftRecord, RevertState};
use stacksync::registry::Registry;
use stacksync::spec::DriftSpec;
use stacksync::status::Phase;

use crate::Output;
use crate::connect::registered;
use crate::error::Result;
use crate::output::{Table, cell, print_structured};

/// What `-o json` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DriftView<'a> {
    name: &'a str,
    stack_name: &'a str,
    phase: Phase,
    settings: &'a DriftSpec,
    #[serde(flatten)]
    record: &'a DriftRecord,
}

pub async fn drift(registry: &Registry, name: &str, format: Output) -> Result {
    let entry = registered(registry, name).await?;
    let record = entry.status.findings.drift.clone().unwrap_or_default();
    if format != Output::Table {
        return print_structured(
            format,
            &DriftView {
                name,
                stack_name: entry.spec.effective_stack_name(),
                phase: entry.display_phase(),
                settings: &entry.spec.drift,
                record: &record,
            },
        );
    }
    let now = now_millis();
    let checked = match record.checked_at {
        Some(at) => format!(
            "last detection {} ago ({})",
            age(now, at.0),
            record.stack_drift.as_deref().unwrap_or("no result")
        ),
        None => "no detection read yet".to_owned(),
    };
    say!(
        "{name}: {} — {checked}; every {}, action {}",
        entry.display_phase(),
        entry.spec.drift.interval,
        format!("{:?}", entry.spec.drift.action).to_lowercase()
    );
    if let Some(d) = &record.detection {
        say!(
            "a detection is running (started {} ago)",
            age(now, d.started_at.0)
        );
    }
    if let Some(reason) = &record.reason {
        say!("the detection said: {reason}");
    }
    if let Some(revert) = &record.revert {
        say!(
            "{}",
            revert_line(revert.state, revert.reapplied, age(now, revert.at.0))
        );
    }
    if record.resources.is_empty() {
        say!("no drifted resource{}", ignored_note(record.ignored));
        return Ok(());
    }
    put!("{}", differences_table(&record).render());
    if record.ignored > 0 || record.omitted > 0 {
        say!(
            "{}{}",
            ignored_note(record.ignored).trim_start_matches(' '),
            if record.omitted > 0 {
                format!("; {} more not kept (the record is bounded)", record.omitted)
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

/// A row per property difference (a deleted resource: one row, no property).
fn differences_table(record: &DriftRecord) -> Table {
    let mut table = Table::new(vec![
        "RESOURCE", "TYPE", "DRIFT", "PROPERTY", "EXPECTED", "ACTUAL",
    ]);
    for resource in &record.resources {
        let differences: Vec<_> = resource.differences.iter().map(Some).collect();
        for difference in if differences.is_empty() {
            vec![None]
        } else {
            differences
        } {
            table.row(vec![
                resource.logical_id.clone(),
                resource.resource_type.clone(),
                difference.map_or(resource.status.clone(), |d| d.kind.clone()),
                cell(difference.map(|d| d.path.as_str()), 60),
                cell(difference.map(|d| d.expected.as_str()), 40),
                cell(difference.map(|d| d.actual.as_str()), 40),
            ]);
        }
    }
    table
}

fn ignored_note(ignored: u32) -> String {
    if ignored == 0 {
        String::new()
    } else {
        format!(" ({ignored} difference(s) ignored by drift.ignore)")
    }
}

fn revert_line(state: RevertState, reapplied: bool, ago: String) -> String {
    match (state, reapplied) {
        (RevertState::Requested, _) => format!("revert asked {ago} ago: the next run puts it back"),
        (RevertState::Applied, false) => {
            format!("reverted {ago} ago by a drift-aware change set; the next detection checks it")
        }
        (RevertState::Applied, true) => format!(
            "drift-aware change sets are refused here: the template was applied as it is {ago} ago; \
             the next detection checks what it put back"
        ),
        (RevertState::NotCleared, _) => format!(
            "the revert did not clear this drift (found again {ago} ago): not reverted again \
             until the drift changes"
        ),
    }
}
