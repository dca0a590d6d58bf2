//! Runs parked until their stack's CloudFormation event, locally: their
//! tokens answered as a deployment answers them (`SendTaskSuccess`,
//! recorded for the IAM test under the function that calls it), through
//! the registry's answers the local runner reads (it has no Step Functions).

use stacksync::clock::now_millis;
use stacksync::ports::{Answer, PortError, PortResult, TaskTokens};
use stacksync::registry::{Answers, Registry};

use crate::iam::call::Call;
use crate::iam::record::{record, recording};

/// Records a Step Functions call made in the function's stead (Step
/// Functions itself is not called here), for the IAM test.
fn record_states(operation: &str, target: Option<&str>) {
    if recording() {
        record(Call {
            service: "states".into(),
            operation: operation.to_owned(),
            region: "us-east-1".into(),
            status: 200,
            target: target.map(str::to_owned),
            ..Call::default()
        });
    }
}

/// Task tokens answered into `registry`'s answers.
#[derive(Debug, Clone)]
pub struct LocalWakes(pub Registry);

impl TaskTokens for LocalWakes {
    async fn answer_token(&self, token: &str, answer: &Answer) -> PortResult<bool> {
        let operation = match answer {
            Answer::Success { .. } => "SendTaskSuccess",
            Answer::Failure { .. } => "SendTaskFailure",
        };
        record_states(operation, None);
        // Step Functions' own write, not the caller's: outside its function.
        let (registry, token, answer) = (self.0.clone(), token.to_owned(), answer.clone());
        tokio::spawn(async move { registry.answer(&token, &answer, now_millis()).await })
            .await
            .map_err(|e| PortError::Transient(e.to_string()))?
            .map_err(|e| PortError::Transient(e.to_string()))
    }
}

/// Runs started by a run's end (its dependents), handed to the test as
/// Step Functions would start them: the test runs each (`Harness`), in turn.
#[derive(Debug)]
pub struct ChannelStarter {
    to: tokio::sync::mpsc::UnboundedSender<(String, stacksync::ports::Trigger)>,
    names: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl ChannelStarter {
    /// The starter, and where its starts arrive: (stack, trigger).
    pub fn new() -> (
        Self,
        tokio::sync::mpsc::UnboundedReceiver<(String, stacksync::ports::Trigger)>,
    ) {
        let (to, from) = tokio::sync::mpsc::unbounded_channel();
        let starter = Self {
            to,
            names: std::sync::Mutex::default(),
        };
        (starter, from)
    }
}

impl stacksync::ports::StartOn for ChannelStarter {
    fn start_on<'a>(
        &'a self,
        machine: &'a str,
        stack: &'a str,
        trigger: &'a stacksync::ports::Trigger,
        key: &'a str,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = PortResult<stacksync::ports::Started>> + Send + 'a>,
    > {
        Box::pin(async move {
            record_states("StartExecution", Some(machine));
            let name = stacksync::naming::execution_name(stack, trigger.kind.as_str(), key);
            let new = self
                .names
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(name.clone());
            if new {
                self.to
                    .send((stack.to_owned(), trigger.clone()))
                    .map_err(|e| PortError::Transient(e.to_string()))?;
            }
            Ok(stacksync::ports::Started {
                stack: stack.to_owned(),
                execution_arn: format!("local:{name}"),
                execution_name: name,
                new,
            })
        })
    }
}

/// Starts recorded in memory (`RecordingStarter`), each recorded for the IAM
/// test as the `StartExecution` it stands for, under the calling function.
#[derive(Debug, Clone)]
pub struct RecordedStarts(pub std::sync::Arc<stacksync::fakes::RecordingStarter>);

impl stacksync::ports::StartOn for RecordedStarts {
    fn start_on<'a>(
        &'a self,
        machine: &'a str,
        stack: &'a str,
        trigger: &'a stacksync::ports::Trigger,
        key: &'a str,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = PortResult<stacksync::ports::Started>> + Send + 'a>,
    > {
        record_states("StartExecution", Some(machine));
        self.0.start_on(machine, stack, trigger, key)
    }
}
