//! CloudFormation's own checks of a ready change set: its pre-deployment
//! validations (`DescribeEvents` of the change set: failures, and the
//! warnings of `WARN` validations such as S3 bucket emptiness or service
//! quotas), its hooks' results (`ListHookResults`, target `CHANGE_SET`),
//! and the hooks its execution will invoke (`DescribeChangeSetHooks`).
//! Each call is made once, without the SDK's retries: an endpoint that
//! does not serve it (the emulators answer 500 and `InternalFailure`) costs
//! one request, and what it does not serve is left out.

use std::future::Future;

use aws_sdk_cloudformation::Client;
use aws_sdk_cloudformation::types::ListHookResultsTargetType;
use tracing::info;

use crate::ports::ChangeSetCheck;

/// Pages read of each (a change set's checks fit in one).
const MAX_PAGES: usize = 5;

fn once() -> aws_sdk_cloudformation::config::Builder {
    aws_sdk_cloudformation::config::Builder::default()
        .retry_config(aws_smithy_types::retry::RetryConfig::disabled())
}

/// Every check found; `None` when the endpoint served none of the calls.
pub(super) async fn change_set_checks(
    client: &Client,
    stack: &str,
    change_set: &str,
) -> Option<Vec<ChangeSetCheck>> {
    let validations = validations(client, stack, change_set).await;
    let id = client
        .describe_change_set()
        .stack_name(stack)
        .change_set_name(change_set)
        .customize()
        .config_override(once())
        .send()
        .await
        .ok()
        .and_then(|out| out.change_set_id().map(str::to_owned));
    let results = match &id {
        Some(id) => hook_results(client, stack, id).await,
        None => None,
    };
    let planned = planned_hooks(client, stack, change_set).await;
    if validations.is_none() && results.is_none() && planned.is_none() {
        return None;
    }
    Some(
        [validations, results, planned]
            .into_iter()
            .flatten()
            .flatten()
            .collect(),
    )
}

/// Every page of one call (`page`: the checks of a page and the next
/// token); `None` when the endpoint refused it.
async fn pages<F, Fut>(stack: &str, call: &str, mut page: F) -> Option<Vec<ChangeSetCheck>>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<(Vec<ChangeSetCheck>, Option<String>), String>>,
{
    let mut checks = Vec::new();
    let mut token = None;
    for _ in 0..MAX_PAGES {
        match page(token.take()).await {
            Ok((found, next)) => {
                checks.extend(found);
                match next {
                    Some(next) if !next.is_empty() => token = Some(next),
                    _ => break,
                }
            }
            Err(error) => {
                info!(stack, call, %error, "change set checks not served here");
                return None;
            }
        }
    }
    Some(checks)
}

/// The change set's validation events (failed, or warned about).
async fn validations(
    client: &Client,
    stack: &str,
    change_set: &str,
) -> Option<Vec<ChangeSetCheck>> {
    pages(stack, "DescribeEvents", |token| async move {
        let out = client
            .describe_events()
            .stack_name(stack)
            .change_set_name(change_set)
            .set_next_token(token)
            .customize()
            .config_override(once())
            .send()
            .await
            .map_err(|e| crate::ports::aws_error::failure("DescribeEvents", &e).to_string())?;
        let checks = out
            .operation_events()
            .iter()
            .filter_map(|e| {
                Some(ChangeSetCheck {
                    kind: "validation".into(),
                    name: e.validation_name()?.to_owned(),
                    status: e.validation_status().map(|s| s.as_str().to_owned()),
                    mode: e.validation_failure_mode().map(|m| m.as_str().to_owned()),
                    target: e
                        .validation_path()
                        .or(e.logical_resource_id())
                        .map(str::to_owned),
                    reason: e.validation_status_reason().map(str::to_owned),
                })
            })
            .collect();
        Ok((checks, out.next_token))
    })
    .await
}

/// The results of the hooks CloudFormation invoked on the change set.
async fn hook_results(client: &Client, stack: &str, id: &str) -> Option<Vec<ChangeSetCheck>> {
    pages(stack, "ListHookResults", |token| async move {
        let out = client
            .list_hook_results()
            .target_type(ListHookResultsTargetType::ChangeSet)
            .target_id(id)
            .set_next_token(token)
            .customize()
            .config_override(once())
            .send()
            .await
            .map_err(|e| crate::ports::aws_error::failure("ListHookResults", &e).to_string())?;
        let checks = out
            .hook_results()
            .iter()
            .map(|r| ChangeSetCheck {
                kind: "hook".into(),
                name: r.type_name().unwrap_or("?").to_owned(),
                status: r.status().map(|s| s.as_str().to_owned()),
                mode: r.failure_mode().map(|m| m.as_str().to_owned()),
                target: r.hook_execution_target().map(str::to_owned),
                reason: r.hook_status_reason().map(str::to_owned),
            })
            .collect();
        Ok((checks, out.next_token))
    })
    .await
}

/// The hooks the change set's execution will invoke.
async fn planned_hooks(
    client: &Client,
    stack: &str,
    change_set: &str,
) -> Option<Vec<ChangeSetCheck>> {
    pages(stack, "DescribeChangeSetHooks", |token| async move {
        let out = client
            .describe_change_set_hooks()
            .stack_name(stack)
            .change_set_name(change_set)
            .set_next_token(token)
            .customize()
            .config_override(once())
            .send()
            .await
            .map_err(|e| {
                crate::ports::aws_error::failure("DescribeChangeSetHooks", &e).to_string()
            })?;
        let checks = out
            .hooks()
            .iter()
            .map(|h| ChangeSetCheck {
                kind: "hook to run".into(),
                name: h.type_name().unwrap_or("?").to_owned(),
                status: None,
                mode: h.failure_mode().map(|m| m.as_str().to_owned()),
                target: h
                    .target_details()
                    .and_then(|t| t.resource_target_details())
                    .map(|r| {
                        format!(
                            "{} ({})",
                            r.logical_resource_id().unwrap_or("?"),
                            r.resource_type().unwrap_or("?")
                        )
                    }),
                reason: h.invocation_point().map(|p| format!("at {}", p.as_str())),
            })
            .collect();
        Ok((checks, out.next_token))
    })
    .await
}
