//! The preview function: a `Pull Request Changed` event (the webhook's)
//! reviewed: the touched stacks previewed (change sets made, described and
//! deleted, never executed: its role has no `ExecuteChangeSet`), one
//! comment on the pull request, a status on its head; and a run's events
//! (started, waiting for approval, ended) as a status on the commit it
//! deploys (`reconcile::review::runs`).

use serde_json::{Value, json};

use super::{FunctionError, aws_config, init_logs, required, serve_invocations};
use crate::reconcile::review::runs::{report_run, run_event};
use crate::reconcile::review::{Reviewed, pull_request_event};
use crate::registry::Registry;

/// Runs the preview function (target of the `Pull Request Changed` rule).
///
/// Environment: `STACKSYNC_TABLE`, `STACKSYNC_BUCKET`;
/// `STACKSYNC_TEMPLATE_URL_BASE` (optional).
pub fn serve_preview() -> Result<(), lambda_runtime::Error> {
    super::block_on(preview())
}

async fn preview() -> Result<(), lambda_runtime::Error> {
    init_logs();
    let table = required("STACKSYNC_TABLE")?;
    let bucket = required("STACKSYNC_BUCKET")?;
    let config = aws_config().await?;
    let registry = Registry::new(aws_sdk_dynamodb::Client::new(&config), table.clone());
    let endpoint = std::env::var("AWS_ENDPOINT_URL")
        .ok()
        .filter(|e| !e.is_empty());
    let mut reviewer = crate::wiring::sdk_reviewer(
        &config,
        registry,
        &bucket,
        endpoint.as_deref(),
        super::installation_policy()?,
    );
    // `PolicySource`: each preview shows what a run's Guard check finds.
    reviewer.config.rules =
        crate::guard::policy_source(&std::env::var("STACKSYNC_POLICY_SOURCE").unwrap_or_default())?;
    let (reviewer, table) = (&reviewer, &table);
    serve_invocations(move |event| async move {
        match run_event(&event.payload, table) {
            Ok(Some((moment, run))) => {
                let report = report_run(&reviewer.registry, &reviewer.hosts, table, moment, &run)
                    .await
                    .map_err(FunctionError::transient)?;
                let answer = json!({"result": "run status", "report": format!("{report:?}")});
                tracing::info!(stack = %run.stack, %answer, "run reported");
                return Ok(answer);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::error!(error = %e, "event rejected");
                return Ok(json!({"result": "rejected", "error": e}));
            }
        }
        let pr = match pull_request_event(&event.payload, table) {
            Ok(pr) => pr,
            // Not worth a retry: the same event fails the same way.
            Err(e) => {
                tracing::error!(error = %e, "event rejected");
                return Ok(json!({"result": "rejected", "error": e}));
            }
        };
        let reviewed = reviewer
            .review(&pr)
            .await
            .map_err(|e| FunctionError::transient(format!("{}: {e}", pr.label())))?;
        let answer = answer(&reviewed);
        tracing::info!(pr = %pr.label(), %answer, "pull request reviewed");
        Ok::<Value, FunctionError>(answer)
    })
    .await
}

/// What the function answers (and logs) of a review.
pub fn answer(reviewed: &Reviewed) -> Value {
    match reviewed {
        Reviewed::Posted {
            stacks,
            comment,
            status,
        } => json!({
            "result": "posted",
            "stacks": stacks.iter().map(|(n, a)| json!({"name": n, "action": a})).collect::<Vec<_>>(),
            "comment": match comment {
                Ok(Some(p)) if p.created => "created".to_owned(),
                Ok(Some(_)) => "updated".to_owned(),
                Ok(None) => "none (no stack touched)".to_owned(),
                Err(e) => format!("not posted: {e}"),
            },
            "status": match status {
                Ok(()) => "set".to_owned(),
                Err(e) => format!("not set: {e}"),
            },
        }),
        Reviewed::Superseded { head } => json!({"result": "superseded", "head": head}),
        Reviewed::NothingFollows => json!({"result": "no stack follows the base branch"}),
        Reviewed::NotOpen => json!({"result": "closed"}),
        Reviewed::Merged { marked } => json!({"result": "merged", "marked": marked}),
    }
}
