//! A local interpreter for the Amazon States Language: enough of it to run
//! `statemachine/*.asl.json` exactly as written, in-process.
//!
//! Supported, as Step Functions documents them: `Pass`, `Task`, `Choice`,
//! `Wait` (`Seconds`, `SecondsPath`), `Succeed`, `Fail`; `InputPath`,
//! `Parameters` (with `.$` keys and the `$$` context object), `ResultPath`,
//! `OutputPath`; `Retry` (`IntervalSeconds`, `MaxAttempts`, `BackoffRate`,
//! `MaxDelaySeconds`, `JitterStrategy`) and `Catch` (`ResultPath`). Paths are
//! reference paths (`$`, `$.a.b`, `$.a[0]`). Anything else in a definition is
//! an error at load time, never a silent difference.

pub mod path;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use serde_json::{Map, Value, json};

use path::{get_path, set_path};

/// A failure inside the interpreter or a task: Step Functions' `Error` and `Cause`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}: {cause}")]
pub struct AslError {
    pub name: String,
    pub cause: String,
}

impl AslError {
    pub fn new(name: impl Into<String>, cause: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            cause: cause.into(),
        }
    }

    fn runtime(cause: impl Into<String>) -> Self {
        Self::new("States.Runtime", cause)
    }
}

/// Runs Task states' resources.
pub trait TaskRunner: Send + Sync {
    fn run(
        &self,
        resource: &str,
        input: Value,
    ) -> impl Future<Output = Result<Value, AslError>> + Send;
}

/// What happened, for people watching a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    StateEntered {
        name: String,
        kind: String,
    },
    TaskFailed {
        name: String,
        error: AslError,
        retry_in: Option<Duration>,
    },
    Caught {
        name: String,
        error: AslError,
        next: String,
    },
    Waiting {
        name: String,
        seconds: f64,
    },
}

/// How an execution ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Succeeded(Value),
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

/// A loaded state machine definition.
#[derive(Debug, Clone)]
pub struct StateMachine {
    start_at: String,
    states: BTreeMap<String, Value>,
}

const KNOWN_FIELDS: [&str; 27] = [
    "Type",
    "Comment",
    "Next",
    "End",
    "InputPath",
    "OutputPath",
    "ResultPath",
    "Parameters",
    "Result",
    "Resource",
    "TimeoutSeconds",
    "HeartbeatSeconds",
    "Retry",
    "Catch",
    "Choices",
    "Default",
    "Seconds",
    "SecondsPath",
    "Timestamp",
    "TimestampPath",
    "Error",
    "Cause",
    "ErrorPath",
    "CausePath",
    "ResultSelector",
    "Credentials",
    "QueryLanguage",
];

impl StateMachine {
    /// Parses a definition after applying `${Name}` substitutions, and checks
    /// that every state is one this interpreter runs faithfully.
    pub fn load(
        definition: &str,
        substitutions: &BTreeMap<String, String>,
    ) -> Result<Self, AslError> {
        let mut text = definition.to_owned();
        for (name, value) in substitutions {
            text = text.replace(&format!("${{{name}}}"), value);
        }
        if let Some(start) = text.find("${") {
            let end = text[start..]
                .find('}')
                .map_or(text.len(), |e| start + e + 1);
            return Err(AslError::new(
                "States.Runtime",
                format!("no substitution for {}", &text[start..end]),
            ));
        }
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| AslError::runtime(format!("definition is not JSON: {e}")))?;
        let start_at = value["StartAt"]
            .as_str()
            .ok_or_else(|| AslError::runtime("definition has no StartAt"))?
            .to_owned();
        let states: BTreeMap<String, Value> = value["States"]
            .as_object()
            .ok_or_else(|| AslError::runtime("definition has no States"))?
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, state) in &states {
            let kind = state["Type"].as_str().unwrap_or("");
            if !matches!(
                kind,
                "Pass" | "Task" | "Choice" | "Wait" | "Succeed" | "Fail"
            ) {
                return Err(AslError::runtime(format!(
                    "state {name}: type {kind:?} is not supported by the local runner"
                )));
            }
            for field in state.as_object().into_iter().flatten().map(|(k, _)| k) {
                if !KNOWN_FIELDS.contains(&field.as_str())
                    || [
                        "ResultSelector",
                        "Credentials",
                        "QueryLanguage",
                        "Timestamp",
                        "TimestampPath",
                        "ErrorPath",
                        "CausePath",
                        "HeartbeatSeconds",
                    ]
                    .contains(&field.as_str())
                {
                    return Err(AslError::runtime(format!(
                        "state {name}: field {field} is not supported by the local runner"
                    )));
                }
            }
            let rule_targets = ["Choices", "Catch"]
                .iter()
                .flat_map(|field| state[*field].as_array().into_iter().flatten())
                .filter_map(|rule| rule.get("Next"));
            for next in [state.get("Next"), state.get("Default")]
                .into_iter()
                .flatten()
                .chain(rule_targets)
            {
                let next = next.as_str().unwrap_or("");
                if !states.contains_key(next) {
                    return Err(AslError::runtime(format!(
                        "state {name}: Next {next:?} does not exist"
                    )));
                }
            }
        }
        if !states.contains_key(&start_at) {
            return Err(AslError::runtime(format!(
                "StartAt {start_at:?} does not exist"
            )));
        }
        Ok(Self { start_at, states })
    }

    /// Runs one execution to its end.
    pub async fn execute<R: TaskRunner>(
        &self,
        runner: &R,
        execution_name: &str,
        input: Value,
        options: &RunOptions,
        on_event: &mut (dyn FnMut(&Event, &Value) + Send),
    ) -> Outcome {
        let mut current = self.start_at.clone();
        let original = input.clone();
        let mut data = input;
        for _ in 0..options.max_transitions {
            let Some(state) = self.states.get(&current) else {
                return Outcome::Failed(AslError::runtime(format!("no state named {current}")));
            };
            let kind = state["Type"].as_str().unwrap_or("");
            on_event(
                &Event::StateEntered {
                    name: current.clone(),
                    kind: kind.to_owned(),
                },
                &data,
            );
            let context = json!({
                "Execution": {"Id": format!("local:{execution_name}"), "Name": execution_name, "Input": original},
                "State": {"Name": current},
            });
            let step = self
                .step(
                    &current,
                    state,
                    data.clone(),
                    &context,
                    runner,
                    options,
                    on_event,
                )
                .await;
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

    #[allow(clippy::too_many_arguments)]
    async fn step<R: TaskRunner>(
        &self,
        name: &str,
        state: &Value,
        input: Value,
        context: &Value,
        runner: &R,
        options: &RunOptions,
        on_event: &mut (dyn FnMut(&Event, &Value) + Send),
    ) -> Result<Step, AslError> {
        let kind = state["Type"].as_str().unwrap_or("");
        let next_or_end = |output: Value| -> Result<Step, AslError> {
            match state.get("Next").and_then(Value::as_str) {
                Some(next) => Ok(Step::Next(next.to_owned(), output)),
                None if state.get("End") == Some(&Value::Bool(true)) => Ok(Step::End(output)),
                None => Err(AslError::runtime(format!(
                    "state {name} has neither Next nor End"
                ))),
            }
        };
        match kind {
            "Succeed" => {
                let effective = apply_input_path(state, &input)?;
                Ok(Step::End(apply_output_path(state, effective)?))
            }
            "Fail" => Err(AslError::new(
                state["Error"].as_str().unwrap_or("States.Failed"),
                state["Cause"].as_str().unwrap_or(""),
            )),
            "Pass" => {
                let effective = apply_input_path(state, &input)?;
                let result = match (state.get("Result"), state.get("Parameters")) {
                    (Some(result), _) => result.clone(),
                    (None, Some(params)) => resolve_parameters(params, &effective, context)?,
                    (None, None) => effective,
                };
                let output = apply_result_path(state, input, result)?;
                next_or_end(apply_output_path(state, output)?)
            }
            "Wait" => {
                let effective = apply_input_path(state, &input)?;
                let seconds = match (state.get("Seconds"), state.get("SecondsPath")) {
                    (Some(s), _) => s.as_f64().unwrap_or(0.0),
                    (None, Some(p)) => get_path(&effective, p.as_str().unwrap_or("$"))?
                        .as_f64()
                        .filter(|s| *s >= 0.0)
                        .ok_or_else(|| {
                            AslError::runtime(format!(
                                "state {name}: SecondsPath is not a non-negative number"
                            ))
                        })?,
                    _ => 0.0,
                };
                on_event(
                    &Event::Waiting {
                        name: name.to_owned(),
                        seconds,
                    },
                    &input,
                );
                tokio::time::sleep(seconds_to_wait(seconds, options.speedup)).await;
                next_or_end(apply_output_path(state, input)?)
            }
            "Choice" => {
                let effective = apply_input_path(state, &input)?;
                for choice in state["Choices"].as_array().into_iter().flatten() {
                    if evaluate_choice(choice, &effective)? {
                        let next = choice["Next"].as_str().unwrap_or("");
                        return Ok(Step::Next(
                            next.to_owned(),
                            apply_output_path(state, input)?,
                        ));
                    }
                }
                match state.get("Default").and_then(Value::as_str) {
                    Some(default) => Ok(Step::Next(
                        default.to_owned(),
                        apply_output_path(state, input)?,
                    )),
                    None => Err(AslError::new(
                        "States.NoChoiceMatched",
                        format!("state {name}: no choice matched"),
                    )),
                }
            }
            "Task" => {
                let effective = apply_input_path(state, &input)?;
                let params = match state.get("Parameters") {
                    Some(p) => resolve_parameters(p, &effective, context)?,
                    None => effective,
                };
                let resource = state["Resource"].as_str().unwrap_or("");
                let mut attempts: BTreeMap<usize, u32> = BTreeMap::new();
                // TimeoutSeconds is real time (a hung call is hung however sped up).
                let timeout = state["TimeoutSeconds"].as_f64().unwrap_or(MAX_WAIT_SECONDS);
                loop {
                    let attempt = tokio::time::timeout(
                        seconds_to_wait(timeout, 1.0),
                        runner.run(resource, params.clone()),
                    )
                    .await
                    .unwrap_or_else(|_| {
                        Err(AslError::new(
                            "States.Timeout",
                            format!("{name} ran longer than {timeout} s"),
                        ))
                    });
                    match attempt {
                        Ok(result) => {
                            let output = apply_result_path(state, input, result)?;
                            return next_or_end(apply_output_path(state, output)?);
                        }
                        Err(error) => {
                            if let Some(delay) = retry_delay(state, &error, &mut attempts) {
                                on_event(
                                    &Event::TaskFailed {
                                        name: name.to_owned(),
                                        error: error.clone(),
                                        retry_in: Some(delay),
                                    },
                                    &input,
                                );
                                tokio::time::sleep(seconds_to_wait(
                                    delay.as_secs_f64(),
                                    options.speedup,
                                ))
                                .await;
                                continue;
                            }
                            on_event(
                                &Event::TaskFailed {
                                    name: name.to_owned(),
                                    error: error.clone(),
                                    retry_in: None,
                                },
                                &input,
                            );
                            return self.catch(name, state, input, error, on_event);
                        }
                    }
                }
            }
            other => Err(AslError::runtime(format!(
                "state {name}: type {other} is not supported"
            ))),
        }
    }

    fn catch(
        &self,
        name: &str,
        state: &Value,
        input: Value,
        error: AslError,
        on_event: &mut (dyn FnMut(&Event, &Value) + Send),
    ) -> Result<Step, AslError> {
        for catcher in state["Catch"].as_array().into_iter().flatten() {
            if matches_error(catcher, &error.name) {
                let next = catcher["Next"].as_str().unwrap_or("").to_owned();
                on_event(
                    &Event::Caught {
                        name: name.to_owned(),
                        error: error.clone(),
                        next: next.clone(),
                    },
                    &input,
                );
                let caught = json!({"Error": error.name, "Cause": error.cause});
                let output = match catcher.get("ResultPath") {
                    // `null`: the error is discarded and the input goes on.
                    Some(Value::Null) => input,
                    path => set_path(input, path.and_then(Value::as_str).unwrap_or("$"), caught)?,
                };
                return Ok(Step::Next(next, output));
            }
        }
        Err(error)
    }
}

enum Step {
    Next(String, Value),
    End(Value),
}

fn matches_error(rule: &Value, name: &str) -> bool {
    rule["ErrorEquals"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| {
            let e = e.as_str().unwrap_or("");
            // States.ALL matches everything but States.Runtime-class interpreter errors
            // are matched too here: they are bugs we want recorded, not hidden.
            e == name
                || e == "States.ALL"
                || (e == "States.TaskFailed" && !name.starts_with("States."))
        })
}

/// The delay before the next attempt, or `None` when no retrier applies or
/// its attempts are used up. `attempts` counts per retrier.
fn retry_delay(
    state: &Value,
    error: &AslError,
    attempts: &mut BTreeMap<usize, u32>,
) -> Option<Duration> {
    let (index, rule) = state["Retry"]
        .as_array()?
        .iter()
        .enumerate()
        .find(|(_, r)| matches_error(r, &error.name))?;
    let max_attempts = rule["MaxAttempts"].as_u64().unwrap_or(3) as u32;
    let done = attempts.entry(index).or_insert(0);
    if *done >= max_attempts {
        return None;
    }
    let interval = rule["IntervalSeconds"].as_f64().unwrap_or(1.0);
    let rate = rule["BackoffRate"].as_f64().unwrap_or(2.0);
    let mut delay = interval * rate.powi(i32::try_from(*done).unwrap_or(i32::MAX));
    if let Some(max) = rule["MaxDelaySeconds"].as_f64() {
        delay = delay.min(max);
    }
    if rule["JitterStrategy"].as_str() == Some("FULL") {
        delay *= jitter();
    }
    *done += 1;
    Some(seconds_to_wait(delay, 1.0))
}

/// The longest wait the interpreter honours (a year), so that no number in a
/// definition or its input can overflow a `Duration`.
const MAX_WAIT_SECONDS: f64 = 365.0 * 86_400.0;

/// A wait of `seconds`, divided by `speedup`, bounded.
fn seconds_to_wait(seconds: f64, speedup: f64) -> Duration {
    let scaled = seconds / speedup.max(1e-9);
    let bounded = if scaled.is_finite() {
        scaled.clamp(0.0, MAX_WAIT_SECONDS)
    } else {
        MAX_WAIT_SECONDS
    };
    Duration::from_secs_f64(bounded)
}

/// A number in [0, 1) without a random-number crate: the clock's nanoseconds.
fn jitter() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1_000_000) / 1_000_000.0
}

fn apply_input_path(state: &Value, input: &Value) -> Result<Value, AslError> {
    match state.get("InputPath") {
        None => Ok(input.clone()),
        Some(Value::Null) => Ok(json!({})),
        Some(p) => get_path(input, p.as_str().unwrap_or("$")),
    }
}

fn apply_output_path(state: &Value, output: Value) -> Result<Value, AslError> {
    match state.get("OutputPath") {
        None => Ok(output),
        Some(Value::Null) => Ok(json!({})),
        Some(p) => get_path(&output, p.as_str().unwrap_or("$")),
    }
}

fn apply_result_path(state: &Value, input: Value, result: Value) -> Result<Value, AslError> {
    match state.get("ResultPath") {
        None => Ok(result),
        Some(Value::Null) => Ok(input),
        Some(p) => set_path(input, p.as_str().unwrap_or("$"), result),
    }
}

/// `Parameters`: keys ending in `.$` take the value at a path (`$$.` for the context).
fn resolve_parameters(template: &Value, input: &Value, context: &Value) -> Result<Value, AslError> {
    match template {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, value) in map {
                if let Some(stripped) = key.strip_suffix(".$") {
                    let path = value.as_str().ok_or_else(|| {
                        AslError::runtime(format!("Parameters: {key} must be a path"))
                    })?;
                    let resolved = match path.strip_prefix("$$") {
                        Some(rest) => get_path(context, &format!("${rest}"))?,
                        None => get_path(input, path)?,
                    };
                    out.insert(stripped.to_owned(), resolved);
                } else {
                    out.insert(key.clone(), resolve_parameters(value, input, context)?);
                }
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => items
            .iter()
            .map(|v| resolve_parameters(v, input, context))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

fn evaluate_choice(rule: &Value, input: &Value) -> Result<bool, AslError> {
    if let Some(all) = rule.get("And").and_then(Value::as_array) {
        for r in all {
            if !evaluate_choice(r, input)? {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    if let Some(any) = rule.get("Or").and_then(Value::as_array) {
        for r in any {
            if evaluate_choice(r, input)? {
                return Ok(true);
            }
        }
        return Ok(false);
    }
    if let Some(not) = rule.get("Not") {
        return Ok(!evaluate_choice(not, input)?);
    }
    let variable = rule["Variable"]
        .as_str()
        .ok_or_else(|| AslError::runtime("a choice rule has no Variable"))?;
    let value = get_path(input, variable).ok();
    if let Some(expected) = rule.get("IsPresent") {
        return Ok(value.is_some() == expected.as_bool().unwrap_or(true));
    }
    let Some(value) = value else {
        return Err(AslError::runtime(format!(
            "choice variable {variable} is not in the input"
        )));
    };
    for (op, expected) in rule.as_object().into_iter().flatten() {
        let result = match op.as_str() {
            "StringEquals" => value.as_str() == expected.as_str(),
            "BooleanEquals" => value.as_bool() == expected.as_bool(),
            "NumericEquals" => value.as_f64() == expected.as_f64(),
            "NumericGreaterThan" => value
                .as_f64()
                .zip(expected.as_f64())
                .is_some_and(|(a, b)| a > b),
            "NumericLessThan" => value
                .as_f64()
                .zip(expected.as_f64())
                .is_some_and(|(a, b)| a < b),
            "IsNull" => value.is_null() == expected.as_bool().unwrap_or(true),
            "Variable" | "Next" => continue,
            other => {
                return Err(AslError::runtime(format!(
                    "choice operator {other} is not supported by the local runner"
                )));
            }
        };
        return Ok(result);
    }
    Err(AslError::runtime("a choice rule has no comparison"))
}

#[cfg(test)]
mod tests;
