//! `stacksync unlock NAME [--yes]`: ends the hold of a run that will not end
//! it itself — a local run killed (`kill -9`, a closed laptop), an execution
//! stuck — after saying who holds the stack and since when. Against a
//! deployed installation the holding execution is stopped first; then the
//! run is recorded `Failed (Interrupted)`, the lease released, and the
//! stack due again at once.

use std::io::{BufRead, IsTerminal, Write};

use stacksync::adapters::stepfunctions::Executions;
use stacksync::clock::{age, now_millis, rfc3339};
use stacksync::registry::{Lease, end_hold};

use crate::Output;
use crate::connect::{Connection, registered};
use crate::error::Result;
use crate::output::print_structured;

/// Who holds the stack, since when, and until when, in words.
pub fn describe(lease: &Lease, now: i64) -> String {
    let since = lease
        .taken_at
        .map(|t| format!(" since {} ({} ago)", rfc3339(t.0), age(now, t.0)))
        .unwrap_or_default();
    let expiry = if lease.is_live(now) {
        format!("runs out in {}", age(lease.expires_at.0, now))
    } else {
        format!("ran out {} ago", age(now, lease.expires_at.0))
    };
    format!("held by {}{since}; the lease {expiry}", lease.owner)
}

pub async fn unlock(aws: &Connection, name: &str, yes: bool, format: Output) -> Result {
    let entry = registered(&aws.registry, name).await?;
    let now = now_millis();
    let Some(lease) = entry.lease else {
        return report(
            format,
            name,
            None,
            false,
            "no run holds it: nothing to unlock",
        );
    };
    if format == Output::Table {
        say!("{name} is {}", describe(&lease, now));
    }
    if !yes && !confirm(&format!("End {}'s hold on {name}?", lease.owner))? {
        return Err(format!(
            "{name} is still held by {}: nothing was changed",
            lease.owner
        ));
    }
    let stopped = stop_execution(aws, &lease.owner).await?;
    let execution = match stopped {
        Stopped::Yes => "its execution was stopped",
        Stopped::NotRunning => "no running execution of it",
        Stopped::Local => "a local run: no execution to stop",
        Stopped::NotLooked => {
            "its execution, if it runs, was not stopped: no state machine was given \
             (--installation or --state-machine-arn)"
        }
    };
    let why = format!(
        "interrupted: `stacksync unlock` ended the hold of {} ({execution}); the stack is due again",
        lease.owner,
    );
    let stopped = stopped == Stopped::Yes;
    let ended = end_hold(&aws.registry, name, &lease.owner, &why, now_millis())
        .await
        .map_err(|e| e.to_string())?;
    let detail = if ended {
        format!("released {}'s hold", lease.owner)
    } else {
        format!("{} had let go meanwhile: nothing to release", lease.owner)
    };
    report(format, name, Some(&lease.owner), stopped, &detail)
}

/// Asks on the terminal; without one, `--yes` must have said so.
fn confirm(question: &str) -> Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Err(format!(
            "{question} — stdin is not a terminal: pass --yes to confirm"
        ));
    }
    put!("{question} [y/N] ");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| e.to_string())?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// What became of the holder's execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    /// It ran, and was stopped.
    Yes,
    /// It was not running (ended, or never there).
    NotRunning,
    /// The holder is a local run (`local-…`): nothing to stop.
    Local,
    /// No state machine known: not looked for.
    NotLooked,
}

/// Stops the holder if it is an execution of the deployed state machine
/// (a local run's lease owner starts with `local-`).
async fn stop_execution(aws: &Connection, owner: &str) -> Result<Stopped> {
    if owner.starts_with("local-") {
        return Ok(Stopped::Local);
    }
    let Some(machine) = &aws.resources.state_machine_arn else {
        return Ok(Stopped::NotLooked);
    };
    let executions = Executions::new(aws_sdk_sfn::Client::new(&aws.config), machine);
    let stopped = executions
        .stop(&executions.execution_arn(owner), "stacksync unlock")
        .await
        .map_err(|e| e.to_string())?;
    Ok(if stopped {
        Stopped::Yes
    } else {
        Stopped::NotRunning
    })
}

fn report(format: Output, name: &str, holder: Option<&str>, stopped: bool, detail: &str) -> Result {
    match format {
        Output::Table => {
            say!("{name}: {detail}");
            Ok(())
        }
        _ => print_structured(
            format,
            &serde_json::json!({"name": name, "holder": holder, "executionStopped": stopped, "result": detail}),
        ),
    }
}
