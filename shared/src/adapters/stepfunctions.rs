//! Starting and listing reconcile executions of a deployed state machine.
//!
//! Used by `stacksync reconcile` / `history`, the webhook and the scheduler.
//! Execution names are deterministic for a (stack, trigger, key): Step
//! Functions refuses a second execution of one name (for 90 days), so a
//! retried webhook delivery or a scheduler run that overlaps another cannot
//! start the same reconcile twice.

use aws_sdk_sfn::Client;
use aws_sdk_sfn::error::ProvideErrorMetadata;
use aws_sdk_sfn::types::{ExecutionStatus, HistoryEvent, HistoryEventType};
use serde::Serialize;

use super::port_error;
use crate::clock::EpochMillis;
use crate::naming::execution_name;
use crate::ports::{PortResult, Started, Starter, Trigger};

/// How much earlier than the request an execution may have started and still
/// be the one this request started (clock skew between the caller and AWS;
/// a wrong guess only mislabels a start in a report, never starts twice).
const START_SKEW_MILLIS: i64 = 1_000;

/// Whether an execution that started at `started` (as Step Functions says)
/// is the one a request sent at `sent` started.
fn started_recently(started: Option<i64>, sent: EpochMillis) -> bool {
    started.is_none_or(|at| at >= sent - START_SKEW_MILLIS)
}

/// One past or running execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionSummary {
    pub name: String,
    pub arn: String,
    /// `RUNNING`, `SUCCEEDED`, `FAILED`, `TIMED_OUT`, `ABORTED`, ...
    pub status: String,
    pub started_at: EpochMillis,
    pub stopped_at: Option<EpochMillis>,
    /// What the run said it did (its output's `outcome`), once it ended
    /// with one; only [`Executions::describe`] reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
}

/// One state entered, or a failure, in an execution's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Entered(String),
    Failed { error: String, cause: String },
}

/// The reconcile state machine of one installation.
#[derive(Debug, Clone)]
pub struct Executions {
    client: Client,
    state_machine_arn: String,
}

impl Executions {
    pub fn new(client: Client, state_machine_arn: impl Into<String>) -> Self {
        Self {
            client,
            state_machine_arn: state_machine_arn.into(),
        }
    }

    pub fn state_machine_arn(&self) -> &str {
        &self.state_machine_arn
    }

    /// The ARN of the execution `name` of this state machine.
    pub fn execution_arn(&self, name: &str) -> String {
        format!(
            "{}:{name}",
            self.state_machine_arn
                .replacen(":stateMachine:", ":execution:", 1)
        )
    }

    async fn describe_execution(
        &self,
        execution_arn: &str,
    ) -> PortResult<aws_sdk_sfn::operation::describe_execution::DescribeExecutionOutput> {
        self.client
            .describe_execution()
            .execution_arn(execution_arn)
            .send()
            .await
            .map_err(|e| port_error("DescribeExecution", &e))
    }

    /// Status of one execution.
    pub async fn describe(&self, execution_arn: &str) -> PortResult<ExecutionSummary> {
        let out = self.describe_execution(execution_arn).await?;
        Ok(ExecutionSummary {
            name: out.name.unwrap_or_default(),
            arn: out.execution_arn,
            status: out.status.as_str().to_owned(),
            started_at: millis(&out.start_date),
            stopped_at: out.stop_date.as_ref().map(millis),
            outcome: out
                .output
                .as_deref()
                .and_then(|o| serde_json::from_str::<serde_json::Value>(o).ok())
                .and_then(|o| o["outcome"].as_str().map(str::to_owned)),
        })
    }

    /// Stops a running execution (`stacksync unlock`); one that has ended
    /// or is not there is fine. Returns whether one was stopped.
    pub async fn stop(&self, execution_arn: &str, cause: &str) -> PortResult<bool> {
        match self
            .client
            .stop_execution()
            .execution_arn(execution_arn)
            .cause(cause)
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_execution_does_not_exist()) =>
            {
                Ok(false)
            }
            Err(e) => Err(port_error("StopExecution", &e)),
        }
    }

    /// The history events of an execution after event id `after`: the states
    /// entered and the failures, and the last event id seen.
    pub async fn steps_since(
        &self,
        execution_arn: &str,
        after: i64,
    ) -> PortResult<(Vec<Step>, i64)> {
        let mut steps = Vec::new();
        let mut last = after;
        let mut pages = self
            .client
            .get_execution_history()
            .execution_arn(execution_arn)
            .max_results(1000)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| port_error("GetExecutionHistory", &e))?;
            for event in page.events {
                if event.id <= after {
                    continue;
                }
                last = last.max(event.id);
                if let Some(step) = step_of(&event) {
                    steps.push(step);
                }
            }
        }
        Ok((steps, last))
    }

    /// The newest executions for `stack`, newest first, at most `limit`.
    /// Step Functions cannot filter by name, so this pages through the
    /// machine's executions (newest first) until `limit` are found or
    /// `max_scanned` were looked at.
    pub async fn history(
        &self,
        stack: &str,
        limit: usize,
        max_scanned: usize,
    ) -> PortResult<Vec<ExecutionSummary>> {
        let mut found = Vec::new();
        if limit == 0 {
            return Ok(found);
        }
        let mut scanned = 0;
        let mut pages = self
            .client
            .list_executions()
            .state_machine_arn(&self.state_machine_arn)
            .max_results(1000)
            .into_paginator()
            .send();
        'pages: while let Some(page) = pages.next().await {
            let page = page.map_err(|e| port_error("ListExecutions", &e))?;
            for item in page.executions {
                scanned += 1;
                if crate::naming::execution_may_be_for(&item.name, stack)
                    && (stack.chars().count() < crate::naming::EXECUTION_PREFIX_CHARS
                        || self.input_names(&item.execution_arn, stack).await?)
                {
                    found.push(ExecutionSummary {
                        name: item.name,
                        arn: item.execution_arn,
                        status: item.status.as_str().to_owned(),
                        started_at: millis(&item.start_date),
                        stopped_at: item.stop_date.as_ref().map(millis),
                        outcome: None,
                    });
                }
                if found.len() >= limit || scanned >= max_scanned {
                    break 'pages;
                }
            }
        }
        Ok(found)
    }

    /// Whether the execution's input names `stack` (for long stack names).
    async fn input_names(&self, execution_arn: &str, stack: &str) -> PortResult<bool> {
        let out = self.describe_execution(execution_arn).await?;
        let input: serde_json::Value = out
            .input
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default();
        Ok(input.get("stackId").and_then(|v| v.as_str()) == Some(stack))
    }
}

impl Starter for Executions {
    /// Starts the reconcile of `stack`, named [`execution_name`]`(stack,
    /// trigger.kind, key)`. An execution of that name that already exists
    /// counts as started (`new: false`), not as an error.
    async fn start(&self, stack: &str, trigger: &Trigger, key: &str) -> PortResult<Started> {
        let name = execution_name(stack, trigger.kind.as_str(), key);
        let input = serde_json::json!({ "stackId": stack, "trigger": trigger }).to_string();
        let sent = crate::clock::now_millis();
        let result = self
            .client
            .start_execution()
            .state_machine_arn(&self.state_machine_arn)
            .name(&name)
            .input(input)
            .send()
            .await;
        match result {
            Ok(out) => Ok(Started {
                stack: stack.to_owned(),
                execution_name: name,
                // Step Functions answers a start that matches a *running*
                // execution (same name and input) with that execution: one
                // that began well before this request is not new.
                new: started_recently(out.start_date.to_millis().ok(), sent),
                execution_arn: out.execution_arn,
            }),
            Err(e) if e.code() == Some("ExecutionAlreadyExists") => Ok(Started {
                stack: stack.to_owned(),
                execution_arn: self.execution_arn(&name),
                execution_name: name,
                new: false,
            }),
            Err(e) => Err(port_error("StartExecution", &e)),
        }
    }
}

/// Starts runs on the machine a step's own execution runs on (its
/// dependents, the moment it ends `Ready`).
#[derive(Debug, Clone)]
pub struct MachineStarter {
    client: Client,
}

impl MachineStarter {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl crate::ports::StartOn for MachineStarter {
    fn start_on<'a>(
        &'a self,
        machine: &'a str,
        stack: &'a str,
        trigger: &'a Trigger,
        key: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = PortResult<Started>> + Send + 'a>> {
        Box::pin(async move {
            Executions::new(self.client.clone(), machine)
                .start(stack, trigger, key)
                .await
        })
    }
}

/// Answers a task token (an execution waiting for approval): with
/// `output` (`SendTaskSuccess`), or failed with `error` and `cause`
/// (`SendTaskFailure`). `Ok(false)`: the token is no longer awaited
/// (answered already, timed out, or its execution ended).
pub async fn answer_token(
    client: &Client,
    token: &str,
    answer: &crate::ports::Answer,
) -> PortResult<bool> {
    use crate::ports::Answer;
    let result = match answer {
        Answer::Success { output } => client
            .send_task_success()
            .task_token(token)
            .output(output.to_string())
            .send()
            .await
            .map(drop)
            .map_err(|e| {
                (
                    e.code().map(str::to_owned),
                    port_error("SendTaskSuccess", &e),
                )
            }),
        Answer::Failure { error, cause } => client
            .send_task_failure()
            .task_token(token)
            .error(error)
            .cause(cause)
            .send()
            .await
            .map(drop)
            .map_err(|e| {
                (
                    e.code().map(str::to_owned),
                    port_error("SendTaskFailure", &e),
                )
            }),
    };
    match result {
        Ok(()) => Ok(true),
        Err((Some(code), _))
            if matches!(
                code.as_str(),
                "TaskTimedOut" | "TaskDoesNotExist" | "InvalidToken"
            ) =>
        {
            Ok(false)
        }
        Err((_, e)) => Err(e),
    }
}

/// Task tokens answered through Step Functions, by the function that
/// answers approvals (`SendTaskSuccess` and `SendTaskFailure` take no
/// resource: whoever holds them and a token may answer it, which is why the
/// tokens are kept where only that function reads them).
#[derive(Debug, Clone)]
pub struct StepFunctionsTokens {
    client: Client,
}

impl StepFunctionsTokens {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl crate::ports::TaskTokens for StepFunctionsTokens {
    async fn answer_token(&self, token: &str, answer: &crate::ports::Answer) -> PortResult<bool> {
        answer_token(&self.client, token, answer).await
    }
}

impl crate::ports::TaskTokens for Executions {
    async fn answer_token(&self, token: &str, answer: &crate::ports::Answer) -> PortResult<bool> {
        answer_token(&self.client, token, answer).await
    }
}

/// Whether an execution status is final.
pub fn is_finished(status: &str) -> bool {
    status != ExecutionStatus::Running.as_str()
        && status != ExecutionStatus::PendingRedrive.as_str()
}

fn step_of(event: &HistoryEvent) -> Option<Step> {
    if let Some(details) = &event.state_entered_event_details {
        return Some(Step::Entered(details.name.clone()));
    }
    let failed = |error: Option<&str>, cause: Option<&str>| Step::Failed {
        error: error.unwrap_or_default().to_owned(),
        cause: cause.unwrap_or_default().to_owned(),
    };
    match event.r#type {
        HistoryEventType::ExecutionFailed => event
            .execution_failed_event_details
            .as_ref()
            .map(|d| failed(d.error.as_deref(), d.cause.as_deref())),
        HistoryEventType::LambdaFunctionFailed => event
            .lambda_function_failed_event_details
            .as_ref()
            .map(|d| failed(d.error.as_deref(), d.cause.as_deref())),
        _ => None,
    }
}

fn millis(date: &aws_smithy_types::DateTime) -> EpochMillis {
    date.to_millis().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_deterministic_bounded_and_safe() {
        let a = execution_name("network", "webhook", "0123abcd");
        assert_eq!(a, execution_name("network", "webhook", "0123abcd"));
        assert!(a.starts_with("network_webhook_"));
        assert_ne!(a, execution_name("network", "webhook", "0123abce"));
        assert_ne!(a, execution_name("network", "schedule", "0123abcd"));
        let long = "a".repeat(128);
        let b = execution_name(&long, "schedule", "k");
        assert!(b.len() <= 80, "{} chars", b.len());
        assert!(
            b.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        let other = format!("{}b", "a".repeat(127));
        assert_ne!(b, execution_name(&other, "schedule", "k"));
    }

    #[test]
    fn history_matches_a_stack_by_its_name_prefix_only() {
        let name = execution_name("app", "manual", "1");
        assert!(crate::naming::execution_may_be_for(&name, "app"));
        assert!(!crate::naming::execution_may_be_for(&name, "ap"));
        assert!(!crate::naming::execution_may_be_for(
            &execution_name("app-db", "manual", "1"),
            "app"
        ));
    }

    #[test]
    fn execution_arns_follow_the_state_machine_arn() {
        let client = Client::from_conf(
            aws_sdk_sfn::Config::builder()
                .behavior_version(aws_sdk_sfn::config::BehaviorVersion::latest())
                .build(),
        );
        let e = Executions::new(client, "arn:aws:states:eu-west-1:1:stateMachine:sm");
        assert_eq!(
            e.execution_arn("x_manual_1"),
            "arn:aws:states:eu-west-1:1:execution:sm:x_manual_1"
        );
        assert!(is_finished("FAILED"));
        assert!(!is_finished("RUNNING"));
    }

    #[test]
    fn an_execution_that_began_before_the_request_is_not_new() {
        let sent = 1_800_000_000_000;
        assert!(started_recently(Some(sent + 40), sent));
        assert!(started_recently(Some(sent - 300), sent)); // skew
        assert!(!started_recently(Some(sent - 60_000), sent));
        assert!(started_recently(None, sent));
    }
}
