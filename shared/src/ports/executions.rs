//! The execution port: starting a reconcile run of one stack, and what a run
//! is told about why it started.

use std::future::Future;

use serde::{Deserialize, Serialize};

use super::PortResult;

/// What started a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TriggerKind {
    /// `stacksync reconcile`, `sync`, or a test.
    #[default]
    Manual,
    /// The scheduler (a due entry, or a source that moved).
    Schedule,
    /// A Git webhook delivery.
    Webhook,
    /// An EventBridge event (CodeCommit push, S3 object).
    Event,
    /// A stack this one depends on ended `Ready` and started it.
    Upstream,
    /// The wave before this fleet target's own ended ([`crate::rollout`]),
    /// or `stacksync rollout resume`.
    Rollout,
}

impl TriggerKind {
    /// As it appears in execution names and in the run's input.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manual => "manual",
            Self::Schedule => "schedule",
            Self::Webhook => "webhook",
            Self::Event => "event",
            Self::Upstream => "upstream",
            Self::Rollout => "rollout",
        }
    }
}

/// What started a run, as its input says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Trigger {
    #[serde(default)]
    pub kind: TriggerKind,
    /// The revision the trigger saw (a pushed commit, an S3 version). The run
    /// always deploys the ref's head; this only says what was announced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Make a change set even when the stack looks in sync
    /// (`stacksync reconcile --force`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
}

impl Trigger {
    /// A trigger of this kind, announcing no revision.
    pub fn of(kind: TriggerKind) -> Self {
        Self {
            kind,
            revision: None,
            force: false,
        }
    }
}

/// What a start did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Started {
    pub stack: String,
    pub execution_name: String,
    pub execution_arn: String,
    /// False when an execution of this name existed already (a replay, or a
    /// start that overlapped another): nothing new was started.
    pub new: bool,
}

/// What a task token was answered with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Answer {
    /// The task succeeds with this output (`SendTaskSuccess`).
    Success { output: serde_json::Value },
    /// The task fails with this error (`SendTaskFailure`).
    Failure { error: String, cause: String },
}

/// Answers the task tokens executions wait on (a change set that waits for
/// approval).
pub trait TaskTokens: Send + Sync {
    /// Answers `token`; `Ok(false)`: it is no longer awaited (answered
    /// already, timed out, or its execution ended).
    fn answer_token(
        &self,
        token: &str,
        answer: &Answer,
    ) -> impl Future<Output = PortResult<bool>> + Send;
}

/// Answers a parked run's task token: [`TaskTokens`] as an object, for
/// the steps and the events function (`Wakes`).
pub trait Wake: Send + Sync {
    /// Answers `token` with `output` (`SendTaskSuccess`); `Ok(false)`: no
    /// longer awaited.
    fn wake<'a>(
        &'a self,
        token: &'a str,
        output: &'a serde_json::Value,
    ) -> std::pin::Pin<Box<dyn Future<Output = PortResult<bool>> + Send + 'a>>;
}

impl<T: TaskTokens> Wake for T {
    fn wake<'a>(
        &'a self,
        token: &'a str,
        output: &'a serde_json::Value,
    ) -> std::pin::Pin<Box<dyn Future<Output = PortResult<bool>> + Send + 'a>> {
        Box::pin(async move {
            let answer = Answer::Success {
                output: output.clone(),
            };
            self.answer_token(token, &answer).await
        })
    }
}

/// What a parked run keeps for the events function: the token, and the
/// state its answer carries (the state the run parked with).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParkedToken {
    pub token: String,
    pub state: serde_json::Value,
}

/// The most a kept token may weigh when read back.
pub const MAX_PARKED_TOKEN_BYTES: u64 = 512 * 1024;

/// Who answers parked runs' tokens, if anyone: Step Functions in a
/// deployment, the registry's answers for the local runner, nobody (then
/// no run parks: it polls).
#[derive(Clone, Default)]
pub struct Wakes(Option<std::sync::Arc<dyn Wake>>);

impl Wakes {
    /// Tokens answered by `by`.
    pub fn by(by: std::sync::Arc<dyn Wake>) -> Self {
        Self(Some(by))
    }

    /// Nobody answers: runs poll.
    pub fn none() -> Self {
        Self(None)
    }

    /// Whether anyone answers.
    pub fn is_some(&self) -> bool {
        self.0.is_some()
    }

    /// Answers `token` with `output`; `Ok(false)`: nobody answers here, or
    /// the token is no longer awaited.
    pub async fn wake(&self, token: &str, output: &serde_json::Value) -> PortResult<bool> {
        match &self.0 {
            Some(by) => by.wake(token, output).await,
            None => Ok(false),
        }
    }
}

impl std::fmt::Debug for Wakes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Wakes(tokens)"
        } else {
            "Wakes(none)"
        })
    }
}

/// Starts reconcile runs on a state machine named by the caller: a step
/// starts its stack's dependents on the machine its own execution runs on.
pub trait StartOn: Send + Sync {
    /// Starts the run of `stack` on `machine`, as [`Starter::start`].
    fn start_on<'a>(
        &'a self,
        machine: &'a str,
        stack: &'a str,
        trigger: &'a Trigger,
        key: &'a str,
    ) -> std::pin::Pin<Box<dyn Future<Output = PortResult<Started>> + Send + 'a>>;
}

/// Who starts a finished run's dependents, if anyone (none: the local
/// runner, whose dependents the scheduler or the next `sync` runs).
#[derive(Clone, Default)]
pub struct RunStarter(Option<std::sync::Arc<dyn StartOn>>);

impl RunStarter {
    /// Runs started by `by`.
    pub fn by(by: std::sync::Arc<dyn StartOn>) -> Self {
        Self(Some(by))
    }

    /// Nobody starts runs here.
    pub fn none() -> Self {
        Self(None)
    }

    /// Starts the run of `stack` on the machine of `execution_arn` (an
    /// execution's ARN, or a local run's id); `Ok(None)`: nobody starts
    /// runs here, or the id names no machine.
    pub async fn start(
        &self,
        execution_arn: &str,
        stack: &str,
        trigger: &Trigger,
        key: &str,
    ) -> PortResult<Option<Started>> {
        let (Some(by), Some(machine)) = (&self.0, state_machine_of(execution_arn)) else {
            return Ok(None);
        };
        by.start_on(&machine, stack, trigger, key).await.map(Some)
    }

    /// Starts the run of `stack` on `machine` (its ARN); `Ok(None)`: nobody
    /// starts runs here.
    pub async fn start_on(
        &self,
        machine: &str,
        stack: &str,
        trigger: &Trigger,
        key: &str,
    ) -> PortResult<Option<Started>> {
        match &self.0 {
            Some(by) => by.start_on(machine, stack, trigger, key).await.map(Some),
            None => Ok(None),
        }
    }
}

impl std::fmt::Debug for RunStarter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "RunStarter(machine)"
        } else {
            "RunStarter(none)"
        })
    }
}

/// The state machine of an execution: `arn:P:states:R:A:execution:M:N` is
/// of `arn:P:states:R:A:stateMachine:M`; a local run (`local:N`) is of the
/// machine `local` (the local runner's one definition).
pub fn state_machine_of(execution_arn: &str) -> Option<String> {
    let parts: Vec<&str> = execution_arn.split(':').collect();
    match parts.as_slice() {
        ["local", name] if !name.is_empty() => Some("local".to_owned()),
        [
            "arn",
            partition,
            "states",
            region,
            account,
            "execution",
            machine,
            name,
        ] if !machine.is_empty() && !name.is_empty() => Some(format!(
            "arn:{partition}:states:{region}:{account}:stateMachine:{machine}"
        )),
        _ => None,
    }
}

/// Starts reconcile runs.
pub trait Starter: Send + Sync {
    /// Starts the run of `stack`, named from the stack, the trigger's kind
    /// and `key` (`naming::execution_name`): the same (stack, kind, key)
    /// never starts twice.
    fn start(
        &self,
        stack: &str,
        trigger: &Trigger,
        key: &str,
    ) -> impl Future<Output = PortResult<Started>> + Send;
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_executions_machine_is_read_from_its_arn() {
        assert_eq!(
            super::state_machine_of(
                "arn:aws-cn:states:cn-north-1:123456789012:execution:Reconcile-x1:orders_manual_ab"
            ),
            Some("arn:aws-cn:states:cn-north-1:123456789012:stateMachine:Reconcile-x1".into())
        );
        assert_eq!(
            super::state_machine_of("local:orders_manual_ab").as_deref(),
            Some("local")
        );
        assert_eq!(super::state_machine_of("orders_manual_ab"), None);
        assert_eq!(
            super::state_machine_of("arn:aws:states:us-east-1:1:stateMachine:Reconcile"),
            None
        );
    }
}
