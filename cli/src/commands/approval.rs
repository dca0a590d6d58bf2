//! `stacksync approve NAME --change-set ID` and `stacksync reject NAME
//! --reason TEXT`: answer the change set that waits for a person. An
//! approval names the exact change set it approves; either answer names
//! the caller (their AWS identity). A deployed run's wait is answered
//! through Step Functions (its task token); a local run's (`reconcile
//! --local`, in another terminal) through the registry, where it looks.

use serde::Serialize;
use serde_json::json;
use stacksync::adapters::stepfunctions::answer_token;
use stacksync::clock::now_millis;
use stacksync::reconcile::run::ApprovalAnswer;
use stacksync::registry::{Answer, Answers};
use stacksync::status::AwaitingApproval;

use crate::Output;
use crate::connect::{Connection, registered};
use crate::error::Result;
use crate::output::print_structured;

/// The error a rejection fails the waiting task with: a stall the run
/// records as `Failed (Rejected)`.
const REJECTED: &str = "StackSync.Stalled.Rejected";

pub async fn approve(aws: &Connection, name: &str, change_set: &str, format: Output) -> Result {
    let awaiting = awaiting(aws, name).await?;
    if awaiting.change_set != change_set {
        return Err(format!(
            "{name} awaits approval of the change set {}, not {change_set}: review that one \
             (stacksync get {name}) and approve it by its name",
            awaiting.change_set
        ));
    }
    let by = caller(aws).await;
    let output = serde_json::to_value(ApprovalAnswer {
        change_set: change_set.to_owned(),
        by: by.clone(),
        at: now_millis(),
    })
    .map_err(|e| e.to_string())?;
    answer(aws, name, &awaiting, &Answer::Success { output }).await?;
    report(
        format,
        name,
        &awaiting,
        "approved",
        by.as_deref(),
        "the run checks that nothing moved since the preview, then executes it",
    )
}

pub async fn reject(aws: &Connection, name: &str, reason: &str, format: Output) -> Result {
    let awaiting = awaiting(aws, name).await?;
    let by = caller(aws).await;
    let cause = format!(
        "by {}: {reason}",
        by.as_deref().unwrap_or("an unknown caller")
    );
    let failure = Answer::Failure {
        error: REJECTED.to_owned(),
        cause,
    };
    answer(aws, name, &awaiting, &failure).await?;
    report(
        format,
        name,
        &awaiting,
        "rejected",
        by.as_deref(),
        "the change set is deleted and the stack stays Failed (Rejected) until a push or a spec change",
    )
}

/// What waits for approval on `name`, or an error saying nothing does.
async fn awaiting(aws: &Connection, name: &str) -> Result<AwaitingApproval> {
    let entry = registered(&aws.registry, name).await?;
    let phase = entry.display_phase();
    entry
        .status
        .awaiting
        .ok_or_else(|| format!("{name}: no change set awaits approval (the stack is {phase})"))
}

/// Sends the answer where the waiting run looks for it: Step Functions for
/// a deployed run, the registry for a local one (its token says `local:`).
async fn answer(
    aws: &Connection,
    name: &str,
    awaiting: &AwaitingApproval,
    answer: &Answer,
) -> Result {
    let token = &awaiting.token;
    let answered = if token.starts_with("local:") {
        aws.registry
            .answer(token, answer, now_millis())
            .await
            .map_err(|e| e.to_string())?
    } else {
        answer_token(&aws_sdk_sfn::Client::new(&aws.config), token, answer)
            .await
            .map_err(|e| e.to_string())?
    };
    if answered {
        Ok(())
    } else {
        Err(format!(
            "{name}: the change set {} is no longer waiting (answered already, timed out, or its \
             run {} ended)",
            awaiting.change_set, awaiting.run
        ))
    }
}

/// The caller's AWS identity (`GetCallerIdentity`), for the record; `None`
/// when it cannot be read.
async fn caller(aws: &Connection) -> Option<String> {
    match aws_sdk_sts::Client::new(&aws.config)
        .get_caller_identity()
        .send()
        .await
    {
        Ok(out) => out.arn().map(str::to_owned),
        Err(e) => {
            tracing::warn!(error = %e, "the caller's identity could not be read");
            None
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Answered<'a> {
    stack: &'a str,
    change_set: &'a str,
    decision: &'a str,
    by: Option<&'a str>,
    run: &'a str,
}

fn report(
    format: Output,
    name: &str,
    awaiting: &AwaitingApproval,
    decision: &str,
    by: Option<&str>,
    then: &str,
) -> Result {
    if format == Output::Table {
        say!(
            "{decision} the change set {} of {name}{}: {then}",
            awaiting.change_set,
            by.map(|b| format!(" (as {b})")).unwrap_or_default()
        );
        return Ok(());
    }
    print_structured(
        format,
        &json!(Answered {
            stack: name,
            change_set: &awaiting.change_set,
            decision,
            by,
            run: &awaiting.run,
        }),
    )
}
