//! Running one state of an execution: one function per state type, called
//! by the run loop in `mod.rs` as it matches on the state.

use std::time::Duration;

use serde_json::{Value, json};

use super::retry::{Catcher, Retries};
use super::states::{Choice, Fail, Pass, Succeed, Task, Transition, Wait, WaitFor};
use super::{AslError, Progress, RunOptions, TaskRunner};

/// What a state did: go on to a state, or end the execution.
#[derive(Debug)]
pub(super) enum Step<'m> {
    Next(&'m str, Value),
    End(Value),
}

impl Transition {
    /// The step to take with the state's `output`.
    fn step(&self, output: Value) -> Step<'_> {
        match self {
            Self::Next(next) => Step::Next(next, output),
            Self::End => Step::End(output),
        }
    }
}

/// One execution in progress: what every state may need besides its input.
pub(super) struct Execution<'r, R> {
    pub(super) runner: &'r R,
    pub(super) options: &'r RunOptions,
    pub(super) on_event: &'r mut (dyn FnMut(&Progress, &Value) + Send),
    pub(super) name: &'r str,
    /// The execution's input, for `$$.Execution.Input`.
    pub(super) input: &'r Value,
}

impl<R: TaskRunner> Execution<'_, R> {
    /// Tells whoever watches the run.
    pub(super) fn emit(&mut self, event: Progress, data: &Value) {
        (self.on_event)(&event, data);
    }

    /// The context object (`$$`) while the state `state` runs (with its
    /// task token, for a `.waitForTaskToken` Task).
    fn context(&self, state: &str, token: Option<&str>) -> Value {
        let mut context = json!({
            "Execution": {"Id": format!("local:{}", self.name), "Name": self.name, "Input": self.input},
            "State": {"Name": state},
        });
        if let Some(token) = token {
            context["Task"] = json!({ "Token": token });
        }
        context
    }

    /// A Pass state: `Result`, else `Parameters`, else the effective input, at `ResultPath`.
    pub(super) fn pass<'m>(
        &self,
        name: &str,
        pass: &'m Pass,
        input: Value,
    ) -> Result<Step<'m>, AslError> {
        let effective = pass.filters.input(&input)?;
        let result = match (&pass.result, &pass.parameters) {
            (Some(result), _) => result.clone(),
            (None, Some(parameters)) => {
                parameters.resolve(&effective, &self.context(name, None))?
            }
            (None, None) => effective,
        };
        let output = pass.result_path.place(input, result)?;
        Ok(pass.transition.step(pass.filters.output(output)?))
    }

    /// Calls the resource until it answers or no retrier applies; then the
    /// catchers. Errors of the state's own paths are not caught, only the call's.
    pub(super) async fn task<'m>(
        &mut self,
        name: &str,
        task: &'m Task,
        input: Value,
    ) -> Result<Step<'m>, AslError> {
        let effective = task.filters.input(&input)?;
        let integration = Integration::of(&task.resource);
        let mut retries = Retries::new(&task.retry);
        // TimeoutSeconds is real time (a hung call is hung however sped up);
        // a wait for a task token's answer is a person's, and sped up.
        let timeout = match &task.timeout_seconds_path {
            Some(path) => path
                .get(&effective)?
                .as_f64()
                .filter(|s| *s > 0.0)
                .ok_or_else(|| {
                    AslError::runtime(format!(
                        "state {name}: TimeoutSecondsPath is not a positive number"
                    ))
                })?,
            None => task.timeout_seconds.unwrap_or(MAX_WAIT_SECONDS),
        };
        loop {
            let token = integration.waits.then(|| task_token(self.name, name));
            let parameters = match &task.parameters {
                Some(p) => p.resolve(&effective, &self.context(name, token.as_deref()))?,
                None => effective.clone(),
            };
            let (resource, payload) = integration.call(&task.resource, parameters)?;
            // The calls are awaited here rather than in a helper `async fn`:
            // each such layer nests the runner's future one level deeper, and
            // the futures of callers that await `execute` are already at the
            // compiler's query depth limit (see `StateMachine::execute`).
            let call = self.runner.run(&resource, payload);
            let called = match tokio::time::timeout(seconds_to_wait(timeout, 1.0), call).await {
                Ok(result) => result,
                Err(_) => Err(AslError::new(
                    "States.Timeout",
                    format!("{name} ran longer than {timeout} s"),
                )),
            };
            let answered = match (called, &token) {
                // The call's own result is not the task's: the answer is.
                (Ok(_), Some(token)) => {
                    let wait = seconds_to_wait(timeout, self.options.speedup);
                    self.runner.wait_for_token(token, wait).await
                }
                (Ok(result), None) => Ok(integration.result(result)),
                (Err(error), _) => Err(error),
            };
            let error = match answered {
                Ok(result) => {
                    let output = task.result_path.place(input, result)?;
                    return Ok(task.transition.step(task.filters.output(output)?));
                }
                Err(error) => error,
            };
            let retry_in = retries.delay(&error);
            let failed = Progress::TaskFailed {
                name: name.to_owned(),
                error: error.clone(),
                retry_in,
            };
            self.emit(failed, &input);
            match retry_in {
                Some(delay) => sleep(delay.as_secs_f64(), self.options.speedup).await,
                None => return self.catch(name, &task.catch, input, error),
            }
        }
    }

    /// Where a failed task goes: the first catcher that applies, else the error ends the run.
    fn catch<'m>(
        &mut self,
        name: &str,
        catchers: &'m [Catcher],
        input: Value,
        error: AslError,
    ) -> Result<Step<'m>, AslError> {
        let Some(catcher) = Catcher::find(catchers, &error) else {
            return Err(error);
        };
        let caught = Progress::Caught {
            name: name.to_owned(),
            error: error.clone(),
            next: catcher.next.clone(),
        };
        self.emit(caught, &input);
        Ok(Step::Next(&catcher.next, catcher.output(input, &error)?))
    }

    /// A Wait state: waits, sped up, then passes its input on.
    pub(super) async fn wait<'m>(
        &mut self,
        name: &str,
        wait: &'m Wait,
        input: Value,
    ) -> Result<Step<'m>, AslError> {
        let effective = wait.filters.input(&input)?;
        let seconds = match &wait.duration {
            WaitFor::Seconds(seconds) => *seconds,
            WaitFor::SecondsPath(path) => path
                .get(&effective)?
                .as_f64()
                .filter(|s| *s >= 0.0)
                .ok_or_else(|| {
                    AslError::runtime(format!(
                        "state {name}: SecondsPath is not a non-negative number"
                    ))
                })?,
        };
        let waiting = Progress::Waiting {
            name: name.to_owned(),
            seconds,
        };
        self.emit(waiting, &input);
        sleep(seconds, self.options.speedup).await;
        Ok(wait.transition.step(wait.filters.output(input)?))
    }
}

/// How a Task's `Resource` is called: a function directly (the local
/// runner's `local:<function>`, a Lambda ARN), or through Step Functions'
/// Lambda integration (`arn:aws:states:::lambda:invoke`, with
/// `FunctionName` and `Payload`), optionally waiting for a task token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Integration {
    lambda_invoke: bool,
    waits: bool,
}

impl Integration {
    fn of(resource: &str) -> Integration {
        let lambda_invoke = resource.starts_with("arn:aws:states:::lambda:invoke");
        Integration {
            lambda_invoke,
            waits: resource.ends_with(".waitForTaskToken"),
        }
    }

    /// The resource to run and its input: the function and its payload,
    /// through the Lambda integration.
    fn call(self, resource: &str, parameters: Value) -> Result<(String, Value), AslError> {
        if !self.lambda_invoke {
            return Ok((resource.to_owned(), parameters));
        }
        let function = parameters["FunctionName"].as_str().ok_or_else(|| {
            AslError::runtime(format!("{resource}: Parameters.FunctionName is missing"))
        })?;
        Ok((function.to_owned(), parameters["Payload"].clone()))
    }

    /// A call's result as the state sees it: the Lambda integration wraps it.
    fn result(self, result: Value) -> Value {
        if self.lambda_invoke {
            json!({ "Payload": result, "StatusCode": 200 })
        } else {
            result
        }
    }
}

/// A task token of the local runner: `local:` (so that whoever answers it
/// knows it is not Step Functions'), the execution, the state, and a nonce
/// (a state may ask again in one execution).
fn task_token(execution: &str, state: &str) -> String {
    static NONCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nonce = NONCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("local:{execution}:{state}:{nanos:x}{nonce}")
}

/// A Choice state: the `Next` of the first rule that matches, else `Default`.
pub(super) fn choice<'m>(
    name: &str,
    choice: &'m Choice,
    input: Value,
) -> Result<Step<'m>, AslError> {
    let effective = choice.filters.input(&input)?;
    let mut next = choice.default.as_deref();
    for rule in &choice.choices {
        if rule.rule.matches(&effective)? {
            next = Some(&rule.next);
            break;
        }
    }
    match next {
        Some(next) => Ok(Step::Next(next, choice.filters.output(input)?)),
        None => Err(AslError::new(
            "States.NoChoiceMatched",
            format!("state {name}: no choice matched"),
        )),
    }
}

/// A Succeed state: ends the execution with its input through its paths.
pub(super) fn succeed<'m>(succeed: &Succeed, input: Value) -> Result<Step<'m>, AslError> {
    let effective = succeed.filters.input(&input)?;
    Ok(Step::End(succeed.filters.output(effective)?))
}

/// A Fail state: the error it ends the execution with.
pub(super) fn fail(fail: &Fail) -> AslError {
    AslError::new(&fail.error, &fail.cause)
}

/// The longest wait the interpreter honours (a year), so that no number in a
/// definition or its input can overflow a `Duration`.
pub(super) const MAX_WAIT_SECONDS: f64 = 365.0 * 86_400.0;

/// A wait of `seconds`, divided by `speedup`, bounded.
pub(super) fn seconds_to_wait(seconds: f64, speedup: f64) -> Duration {
    let scaled = seconds / speedup.max(1e-9);
    let bounded = if scaled.is_finite() {
        scaled.clamp(0.0, MAX_WAIT_SECONDS)
    } else {
        MAX_WAIT_SECONDS
    };
    Duration::from_secs_f64(bounded)
}

/// Sleeps `seconds` of the definition's time, sped up.
async fn sleep(seconds: f64, speedup: f64) {
    tokio::time::sleep(seconds_to_wait(seconds, speedup)).await;
}
