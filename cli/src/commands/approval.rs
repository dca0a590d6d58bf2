//! `stacksync approve NAME --change-set ID` and `stacksync reject NAME
//! --reason TEXT`: answer the change set that waits for a person. An
//! approval names the exact change set it approves.
//!
//! A deployed run's wait is answered by the installation's approval
//! function (its IAM-authorised URL, recorded with the wait): the request
//! is signed with the caller's AWS credentials, the function takes the
//! caller's identity from AWS, lets only the approvers through, and alone
//! reads the run's task token. A local run's wait (`reconcile --local`, in
//! another terminal) is answered through the registry, where it looks:
//! whoever may write the registry may answer it (`--help` says so).

use serde::Serialize;
use serde_json::{Value, json};
use stacksync::adapters::answer_url;
use stacksync::approvers::Rejection;
use stacksync::clock::now_millis;
use stacksync::naming::approval_token_key;
use stacksync::ports::Blobs;
use stacksync::reconcile::run::ApprovalAnswer;
use stacksync::registry::{Answer, Answers};
use stacksync::status::AwaitingApproval;
use stacksync::triggers::answer::rejection_error;

use crate::Output;
use crate::connect::{Connection, registered};
use crate::error::Result;
use crate::output::print_structured;

pub async fn approve(aws: &Connection, name: &str, change_set: &str, format: Output) -> Result {
    let (awaiting, by) = answer_approve(aws, name, change_set).await?;
    report(
        format,
        name,
        &awaiting,
        "approved",
        by.as_deref(),
        "the run checks that nothing moved since the preview, then executes it",
    )
}

/// Approves `name`'s waiting change set `change_set`: what waited, and who
/// approved as the answer says.
pub async fn answer_approve(
    aws: &Connection,
    name: &str,
    change_set: &str,
) -> Result<(AwaitingApproval, Option<String>)> {
    let awaiting = awaiting(aws, name).await?;
    if awaiting.change_set != change_set {
        return Err(format!(
            "{name} awaits approval of the change set {}, not {change_set}: review that one \
             (stacksync get {name}) and approve it by its name",
            awaiting.change_set
        ));
    }
    let by = match &awaiting.answer_url {
        Some(url) => {
            let request = json!({"stack": name, "decision": "approve", "changeSet": change_set});
            Some(through_function(aws, url, &request).await?)
        }
        None => {
            let by = caller(aws).await;
            let output = serde_json::to_value(ApprovalAnswer {
                change_set: change_set.to_owned(),
                by: by.clone(),
                at: now_millis(),
            })
            .map_err(|e| e.to_string())?;
            through_registry(aws, name, &awaiting, &Answer::Success { output }).await?;
            by
        }
    };
    Ok((awaiting, by))
}

pub async fn reject(aws: &Connection, name: &str, reason: &str, format: Output) -> Result {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(format!(
            "{name}: --reason is empty: say why (it is recorded with the rejection)"
        ));
    }
    let awaiting = awaiting(aws, name).await?;
    let by = match &awaiting.answer_url {
        Some(url) => {
            let request = json!({"stack": name, "decision": "reject", "reason": reason});
            Some(through_function(aws, url, &request).await?)
        }
        None => {
            let by = caller(aws).await;
            let failure = Answer::Failure {
                error: rejection_error(),
                cause: Rejection {
                    by: by.clone(),
                    reason: reason.to_owned(),
                }
                .cause(),
            };
            through_registry(aws, name, &awaiting, &failure).await?;
            by
        }
    };
    report(
        format,
        name,
        &awaiting,
        "rejected",
        by.as_deref(),
        "the run deletes the change set, and the stack stays Failed (Rejected) until a push or a spec change",
    )
}

/// What waits for approval on `name`, or an error saying nothing does.
async fn awaiting(aws: &Connection, name: &str) -> Result<AwaitingApproval> {
    let entry = registered(&aws.registry, name).await?;
    let phase = entry.display_phase();
    entry
        .status
        .approval
        .awaiting
        .ok_or_else(|| format!("{name}: no change set awaits approval (the stack is {phase})"))
}

/// A deployed run's wait: the approval function answers it, for the
/// caller AWS says signed the request. The caller as the function saw it.
async fn through_function(aws: &Connection, url: &str, request: &Value) -> Result<String> {
    let (status, body) = answer_url::post(&aws.config, url, request).await?;
    let message = body["message"].as_str().unwrap_or_default();
    let said = if message.is_empty() {
        body.to_string()
    } else {
        message.to_owned()
    };
    match status {
        200 => Ok(body["by"]
            .as_str()
            .filter(|b| !b.is_empty())
            .unwrap_or("a caller the function did not name")
            .to_owned()),
        403 => Err(format!("refused by the approval function: {said}")),
        _ => Err(format!(
            "the approval function answered HTTP {status}: {said}"
        )),
    }
}

/// A local run's wait: answered through the registry, where the waiting
/// run looks, with the token the run kept in the bucket.
async fn through_registry(
    aws: &Connection,
    name: &str,
    awaiting: &AwaitingApproval,
    answer: &Answer,
) -> Result {
    let blobs = stacksync::adapters::s3::S3Store::new(
        stacksync::adapters::s3_client(&aws.config, aws.config.endpoint_url().is_some()),
        &aws.resources.bucket,
    );
    let key = approval_token_key(name, &awaiting.run);
    let kept = blobs.exists(&key).await.map_err(|e| {
        format!(
            "{name}: cannot look for the run's task token at s3://{}/{key}: {e}",
            aws.resources.bucket
        )
    })?;
    let token = if kept {
        let bytes = blobs.get(&key, 16 * 1024).await.map_err(|e| {
            format!(
                "{name}: cannot read the run's task token at s3://{}/{key}: {e}",
                aws.resources.bucket
            )
        })?;
        String::from_utf8_lossy(&bytes).into_owned()
    } else {
        awaiting.legacy_token.clone().ok_or_else(|| {
            format!(
                "{name}: the run {} keeps no task token in s3://{}/{key} (its wait may have ended)",
                awaiting.run, aws.resources.bucket
            )
        })?
    };
    let answered = aws
        .registry
        .answer(&token, answer, now_millis())
        .await
        .map_err(|e| e.to_string())?;
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

/// The caller's AWS identity (`GetCallerIdentity`), for the record of a
/// local run's answer; `None` when it cannot be read.
async fn caller(aws: &Connection) -> Option<String> {
    match aws_sdk_sts::Client::new(&aws.config)
        .get_caller_identity()
        .send()
        .await
    {
        Ok(out) => out.arn().map(str::to_owned),
        Err(e) => {
            tracing::warn!(
                error = %stacksync::ports::aws_error::failure("GetCallerIdentity", &e),
                "the caller's identity could not be read"
            );
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
