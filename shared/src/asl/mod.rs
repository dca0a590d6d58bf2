//! A local interpreter for the Amazon States Language: enough of it to run
//! `statemachine/*.asl.json` exactly as written, in-process.
//!
//! Supported, as Step Functions documents them: `Pass`, `Task` (`Resource`,
//! `TimeoutSeconds`), `Choice` (`And`, `Or`, `Not`, `StringEquals`,
//! `BooleanEquals`, `NumericEquals`, `NumericGreaterThan`, `NumericLessThan`,
//! `IsNull`, `IsPresent`), `Wait` (`Seconds`, `SecondsPath`), `Succeed`,
//! `Fail`; `InputPath`, `Parameters` (with `.$` keys and the `$$` context
//! object), `ResultPath`, `OutputPath`; the intrinsic function `States.MathAdd` in `Parameters`; `Retry` (`IntervalSeconds`,
//! `MaxAttempts`, `BackoffRate`, `MaxDelaySeconds`, `JitterStrategy`) and
//! `Catch` (`ResultPath`). Paths are reference paths (`$`, `$.a.b`,
//! `$.a[0]`). Anything else in a definition is an error at load time, never
//! a silent difference.
//!
//! [`StateMachine::load`] parses every state into a typed value (`states.rs`;
//! choice rules in `choice.rs`, `Retry` and `Catch` in `retry.rs`,
//! `Parameters` in `parameters.rs`), so a malformed definition is refused with
//! the state and the field at fault before anything runs. [`StateMachine::execute`]
//! then runs state after state (`run.rs`: one function per state type).

mod choice;
mod fields;
mod parameters;
pub mod path;
mod retry;
mod run;
mod states;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use serde_json::Value;

use run::{Execution, Step};
use states::State;

/// A failure inside the interpreter or a task: Step Functions' `Error` and `Cause`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}: {cause}")]
pub struct AslError {
    /// The error name (`States.Timeout`, `StackSync.Transient`): what `Retry`
    /// and `Catch` rules match on.
    pub name: String,
    /// The human-readable explanation.
    pub cause: String,
}

impl AslError {
    /// An error named `name`, explained by `cause`.
    pub fn new(name: impl Into<String>, cause: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            cause: cause.into(),
        }
    }

    /// `States.Runtime`: the definition or the data does not fit (a bug, not
    /// a transient failure); every load error is one.
    fn runtime(cause: impl Into<String>) -> Self {
        Self::new("States.Runtime", cause)
    }
}

/// Runs Task states' resources.
pub trait TaskRunner: Send + Sync {
    /// Runs `resource` (a Task state's `Resource`, after substitutions) on
    /// `input` (the state's effective input or `Parameters`); an error goes
    /// through the state's `Retry` and `Catch` rules.
    fn run(
        &self,
        resource: &str,
        input: Value,
    ) -> impl Future<Output = Result<Value, AslError>> + Send;

    /// Waits for the answer to a task token (a `.waitForTaskToken` Task
    /// whose call returned), for at most `timeout`: the answer's output, its
    /// failure as the error, or `States.Timeout`. A runner that keeps no
    /// answers cannot.
    fn wait_for_token(
        &self,
        token: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<Value, AslError>> + Send {
        let _ = timeout;
        let token = token.to_owned();
        async move {
            Err(AslError::new(
                "States.Runtime",
                format!("this runner cannot wait for the task token {token}"),
            ))
        }
    }
}

/// What happened, for people watching a run.
#[derive(Debug, Clone, PartialEq)]
///
/// Each event comes with the data it concerns: the state's input.
pub enum Progress {
    /// A state starts; `kind` is its `Type` (`"Task"`, `"Choice"`...).
    StateEntered { name: String, kind: String },
    /// A task's call failed; `retry_in` is the delay before the next attempt
    /// (not sped up), `None` when no retrier applies any more.
    TaskFailed {
        name: String,
        error: AslError,
        retry_in: Option<Duration>,
    },
    /// A catcher of the state `name` caught `error` and goes to `next`.
    Caught {
        name: String,
        error: AslError,
        next: String,
    },
    /// A Wait state waits this many seconds (before the speed-up).
    Waiting { name: String, seconds: f64 },
}

/// How an execution ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A Succeed state or an `End` was reached, with this output.
    Succeeded(Value),
    /// A Fail state, an error no catcher took, or a runtime error.
    Failed(AslError),
}

/// Options of a local run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Wait states and retry intervals are divided by this (tests: 100 or more).
    pub speedup: f64,
    /// Stops a run that would go on forever (a bug): at most this many state transitions.
    pub max_transitions: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            speedup: 1.0,
            max_transitions: 25_000,
        }
    }
}

/// A loaded state machine definition: every state parsed and checked, every
/// transition known to lead to a state.
#[derive(Debug, Clone)]
pub struct StateMachine {
    start_at: String,
    states: BTreeMap<String, State>,
}

/// The top-level fields of a definition this interpreter runs.
const DEFINITION_FIELDS: [&str; 4] = ["Comment", "StartAt", "States", "Version"];

impl StateMachine {
    /// Parses a definition after applying `${Name}` substitutions, and checks
    /// that every state is one this interpreter runs faithfully. An error
    /// names the state and the field at fault.
    pub fn load(
        definition: &str,
        substitutions: &BTreeMap<String, String>,
    ) -> Result<Self, AslError> {
        let text = substitute(definition, substitutions)?;
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| AslError::runtime(format!("definition is not JSON: {e}")))?;
        let definition = value
            .as_object()
            .ok_or_else(|| AslError::runtime("definition is not a JSON object"))?;
        if let Some(field) = definition
            .keys()
            .find(|k| !DEFINITION_FIELDS.contains(&k.as_str()))
        {
            return Err(AslError::runtime(format!(
                "definition: field {field} is not supported by the local runner"
            )));
        }
        let start_at = value["StartAt"]
            .as_str()
            .ok_or_else(|| AslError::runtime("definition has no StartAt"))?
            .to_owned();
        let states = value["States"]
            .as_object()
            .ok_or_else(|| AslError::runtime("definition has no States"))?
            .iter()
            .map(|(name, state)| Ok((name.clone(), State::parse(name, state)?)))
            .collect::<Result<BTreeMap<_, _>, AslError>>()?;
        let machine = Self { start_at, states };
        machine.check_transitions()?;
        Ok(machine)
    }

    /// Refuses a `StartAt`, `Next`, `Default` or catcher's `Next` that names no state.
    fn check_transitions(&self) -> Result<(), AslError> {
        for (name, state) in &self.states {
            for (field, target) in state.targets() {
                if !self.states.contains_key(target) {
                    return Err(AslError::runtime(format!(
                        "state {name}: field {field}: state {target:?} does not exist"
                    )));
                }
            }
        }
        if !self.states.contains_key(&self.start_at) {
            return Err(AslError::runtime(format!(
                "StartAt {:?} does not exist",
                self.start_at
            )));
        }
        Ok(())
    }

    /// Runs one execution to its end.
    pub async fn execute<R: TaskRunner>(
        &self,
        runner: &R,
        execution_name: &str,
        input: Value,
        options: &RunOptions,
        on_event: &mut (dyn FnMut(&Progress, &Value) + Send),
    ) -> Outcome {
        let original = input.clone();
        let mut execution = Execution {
            runner,
            options,
            on_event,
            name: execution_name,
            input: &original,
        };
        let mut current = self.start_at.as_str();
        let mut data = input;
        for _ in 0..options.max_transitions {
            // Loading checked every transition; a missing state would be a bug here.
            let Some(state) = self.states.get(current) else {
                return Outcome::Failed(AslError::runtime(format!("no state named {current}")));
            };
            let entered = Progress::StateEntered {
                name: current.to_owned(),
                kind: state.kind().to_owned(),
            };
            execution.emit(entered, &data);
            // Matched here rather than in a helper `async fn`: each such layer
            // nests the task runner's future one level deeper, and the futures
            // of callers that await `execute` (tests/tests/reconcile.rs) are
            // already at the compiler's query depth limit.
            let step = match state {
                State::Pass(pass) => execution.pass(current, pass, data),
                State::Task(task) => execution.task(current, task, data).await,
                State::Choice(choice) => run::choice(current, choice, data),
                State::Wait(wait) => execution.wait(current, wait, data).await,
                State::Succeed(succeed) => run::succeed(succeed, data),
                State::Fail(fail) => Err(run::fail(fail)),
            };
            match step {
                Ok(Step::Next(next, output)) => {
                    current = next;
                    data = output;
                }
                Ok(Step::End(output)) => return Outcome::Succeeded(output),
                Err(error) => return Outcome::Failed(error),
            }
        }
        Outcome::Failed(AslError::runtime(format!(
            "the run passed {} state transitions; stopped",
            options.max_transitions
        )))
    }
}

/// `definition` with every `${Name}` replaced; one left over is an error.
fn substitute(
    definition: &str,
    substitutions: &BTreeMap<String, String>,
) -> Result<String, AslError> {
    let mut text = definition.to_owned();
    for (name, value) in substitutions {
        text = text.replace(&format!("${{{name}}}"), value);
    }
    if let Some(start) = text.find("${") {
        let end = text[start..]
            .find('}')
            .map_or(text.len(), |e| start + e + 1);
        return Err(AslError::runtime(format!(
            "no substitution for {}",
            &text[start..end]
        )));
    }
    Ok(text)
}

#[cfg(test)]
mod tests;
